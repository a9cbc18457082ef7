//! Names and environments for the passes: a fast hash for the short names
//! and integers the passes look up millions of times, a lexical environment
//! with O(1) push, lookup and pop, and the supply of fresh binder names.
//!
//! Every binder the simplifier writes gets a name used by no other binder
//! and by no free variable of the input. Passes after partial evaluation
//! rely on this: a name means the same thing wherever it is in scope, so
//! they need no capture checks and can key tables by name.

use gradlift_lang::syntax::*;

pub(super) use gradlift_lang::names::{FxHasher, FxMap, FxSet};

/// A lexical environment with O(1) lookup, push and pop to a mark (the
/// design of `gradlift_lang::scope::Scope`, with [`FxHasher`]). Each name
/// is given a slot once; pushing hashes the name, popping does not.
pub(super) struct Env<T> {
    slots: FxMap<Name, usize>,
    /// Per slot, its bindings, innermost last.
    stacks: Vec<Vec<T>>,
    /// The slots pushed, in order.
    trail: Vec<usize>,
}

impl<T> Default for Env<T> {
    fn default() -> Self {
        Env {
            slots: FxMap::default(),
            stacks: Vec::new(),
            trail: Vec::new(),
        }
    }
}

impl<T> Env<T> {
    /// An empty environment with room for `n` names.
    pub fn with_capacity(n: usize) -> Env<T> {
        Env {
            slots: FxMap::with_capacity_and_hasher(n, Default::default()),
            stacks: Vec::with_capacity(n),
            trail: Vec::with_capacity(n),
        }
    }

    /// Binds `name`, shadowing earlier bindings of it.
    pub fn push(&mut self, name: Name, value: T) {
        let slot = match self.slots.get(&name) {
            Some(&slot) => slot,
            None => {
                let slot = self.stacks.len();
                self.slots.insert(name, slot);
                self.stacks.push(Vec::new());
                slot
            }
        };
        self.stacks[slot].push(value);
        self.trail.push(slot);
    }

    /// The innermost binding of `name`.
    pub fn get(&self, name: &str) -> Option<&T> {
        let slot = *self.slots.get(name)?;
        self.stacks[slot].last()
    }

    /// A mark to [`Env::pop_to`] later.
    pub fn mark(&self) -> usize {
        self.trail.len()
    }

    /// Removes every binding pushed since `mark`.
    pub fn pop_to(&mut self, mark: usize) {
        while self.trail.len() > mark {
            let slot = self.trail.pop().expect("trail longer than mark");
            self.stacks[slot].pop();
        }
    }
}

/// Hands out binder names: a name is used at most once as a binder and is
/// never one of the reserved names (the free variables of the input).
/// A hint `x_3` gives `x`, then `x_1`, `x_2`, … so output stays readable.
#[derive(Debug, Default)]
pub(super) struct Names {
    taken: FxSet<Name>,
    next: FxMap<Name, usize>,
}

impl Names {
    /// A supply that avoids `reserved`, with room for `n` names.
    pub fn avoiding(reserved: impl IntoIterator<Item = Name>, n: usize) -> Names {
        let mut taken = FxSet::with_capacity_and_hasher(n, Default::default());
        taken.extend(reserved);
        Names {
            taken,
            next: FxMap::default(),
        }
    }

    /// Makes the names `pat` binds available again. Only for binders that
    /// disappear from the output along with every use of their names (the
    /// parameters of a lambda that is η-contracted or fused away).
    pub fn release(&mut self, pat: &Pattern) {
        match pat {
            Pattern::Var(n, _) => {
                self.taken.remove(n);
            }
            Pattern::Wild(_) => {}
            Pattern::Tuple(ps, _) => ps.iter().for_each(|p| self.release(p)),
        }
    }

    /// A name not handed out or reserved before, close to `hint`: an
    /// identifier a program could write (the `·` of the binders the rules
    /// make, which no program can shadow, is dropped), so printed terms
    /// parse back.
    pub fn fresh(&mut self, hint: &str) -> Name {
        let hint = hint.trim_start_matches('·');
        let stem = match hint.rsplit_once('_') {
            Some((s, digits))
                if !s.is_empty()
                    && !digits.is_empty()
                    && digits.bytes().all(|b| b.is_ascii_digit()) =>
            {
                s
            }
            _ => hint,
        };
        let stem = if stem.is_empty() || stem == "_" {
            "t"
        } else {
            stem
        };
        if !self.taken.contains(stem) {
            let name = Name::from(stem);
            self.taken.insert(name.clone());
            return name;
        }
        let counter = match self.next.get_mut(stem) {
            Some(counter) => counter,
            None => self.next.entry(Name::from(stem)).or_insert(0),
        };
        loop {
            *counter += 1;
            let name = Name::from(format!("{stem}_{counter}"));
            if self.taken.insert(name.clone()) {
                return name;
            }
        }
    }
}
