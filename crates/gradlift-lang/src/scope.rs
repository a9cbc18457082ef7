//! A lexical environment with O(1) lookup and O(1) push/pop, so that long
//! `let` chains stay linear: each name maps to a stack of bindings, and a
//! trail records the order of pushes for popping back to a mark.

use crate::names::FxMap;
use crate::syntax::Name;

/// Names in scope, innermost binding first.
#[derive(Debug, Clone)]
pub struct Scope<T> {
    bindings: FxMap<Name, Vec<T>>,
    trail: Vec<Name>,
}

impl<T> Default for Scope<T> {
    fn default() -> Self {
        Scope {
            bindings: FxMap::default(),
            trail: Vec::new(),
        }
    }
}

impl<T> Scope<T> {
    /// An empty scope.
    pub fn new() -> Self {
        Self::default()
    }

    /// Binds `name`, shadowing earlier bindings of it.
    pub fn push(&mut self, name: Name, value: T) {
        self.bindings.entry(name.clone()).or_default().push(value);
        self.trail.push(name);
    }

    /// The innermost binding of `name`.
    pub fn get(&self, name: &str) -> Option<&T> {
        self.bindings.get(name).and_then(|v| v.last())
    }

    /// Every name bound, in no particular order.
    pub fn names(&self) -> impl Iterator<Item = &Name> {
        self.bindings.keys()
    }

    /// A mark to [`Scope::pop_to`] later.
    pub fn mark(&self) -> usize {
        self.trail.len()
    }

    /// Removes every binding pushed since `mark`.
    pub fn pop_to(&mut self, mark: usize) {
        while self.trail.len() > mark {
            let name = self.trail.pop().expect("trail longer than mark");
            let stack = self
                .bindings
                .get_mut(&name)
                .expect("trail names a bound name");
            stack.pop();
            if stack.is_empty() {
                self.bindings.remove(&name);
            }
        }
    }
}
