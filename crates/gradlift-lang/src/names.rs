//! A supply of fresh names: each name handed out is distinct from every
//! name handed out or reserved before, so passes that rename every binder
//! never capture a variable.

use crate::syntax::Name;
use std::collections::{HashMap, HashSet};

/// Hands out names unused so far.
#[derive(Debug, Default)]
pub struct NameSupply {
    used: HashSet<Name>,
    next: HashMap<String, usize>,
}

impl NameSupply {
    /// An empty supply.
    pub fn new() -> Self {
        Self::default()
    }

    /// Marks `name` as taken.
    pub fn reserve(&mut self, name: &Name) {
        self.used.insert(name.clone());
    }

    /// `base` itself if unused, else `base_1`, `base_2`, … A trailing
    /// `_<digits>` of `base` is dropped first, so renaming `x_3` gives
    /// `x`, `x_1`, … rather than `x_3_1`.
    pub fn fresh(&mut self, base: &str) -> Name {
        let stem = match base.rsplit_once('_') {
            Some((s, digits))
                if !s.is_empty()
                    && !digits.is_empty()
                    && digits.bytes().all(|b| b.is_ascii_digit()) =>
            {
                s
            }
            _ => base,
        };
        let stem = if stem.is_empty() { "t" } else { stem };
        let plain: Name = Name::from(stem);
        if !self.used.contains(&plain) {
            self.used.insert(plain.clone());
            return plain;
        }
        let counter = self.next.entry(stem.to_string()).or_insert(1);
        loop {
            let candidate: Name = Name::from(format!("{stem}_{counter}"));
            *counter += 1;
            if !self.used.contains(&candidate) {
                self.used.insert(candidate.clone());
                return candidate;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_names_never_repeat() {
        let mut s = NameSupply::new();
        s.reserve(&Name::from("x"));
        assert_eq!(&*s.fresh("x"), "x_1");
        assert_eq!(&*s.fresh("x_1"), "x_2");
        assert_eq!(&*s.fresh("y"), "y");
        assert_eq!(&*s.fresh("y"), "y_1");
    }
}
