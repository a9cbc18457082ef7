//! A supply of fresh names: each name handed out is distinct from every
//! name handed out or reserved before, so passes that rename every binder
//! never capture a variable. And the hash every table keyed by names uses.

use crate::syntax::Name;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// Hands out names unused so far.
#[derive(Debug, Default)]
pub struct NameSupply {
    used: FxSet<Name>,
    next: FxMap<String, usize>,
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

/// The multiplicative hash of rustc (`FxHasher`): the passes hash short
/// names and small integers millions of times, where SipHash's resistance
/// to collisions chosen by an attacker buys nothing.
#[derive(Clone, Copy, Default)]
pub struct FxHasher {
    hash: u64,
}

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        // Plain indexing and wrapping arithmetic: names are short, and
        // iterator adapters and overflow checks are slow in the unoptimized
        // builds the tests use.
        let mut word = bytes.len() as u64;
        let mut shift: u32 = 8;
        let mut i = 0;
        while i < bytes.len() {
            word ^= u64::from(bytes[i]).wrapping_shl(shift);
            i = i.wrapping_add(1);
            shift = shift.wrapping_add(8);
            if shift == 64 {
                self.add(word);
                word = 0;
                shift = 0;
            }
        }
        self.add(word);
    }
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i))
    }
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i))
    }
    fn write_u64(&mut self, i: u64) {
        self.add(i)
    }
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64)
    }
    fn finish(&self) -> u64 {
        // The multiply leaves the low bits, which hash tables index by,
        // depending on the first bytes only; fold the high bits down.
        let h = self.hash;
        (h ^ (h >> 29)).wrapping_mul(0xbf58_476d_1ce4_e5b9) ^ (h >> 32)
    }
}

/// A hash map with [`FxHasher`].
pub type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;
/// A hash set with [`FxHasher`].
pub type FxSet<K> = HashSet<K, BuildHasherDefault<FxHasher>>;

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
