//! The tape of a long `let` chain: what its bindings compute is stored in
//! the workspace as it is computed, and the values read far from where
//! they are bound are read back from there, not kept as SSA values live
//! across the function.
//!
//! Cranelift's register allocator (regalloc2) takes time quadratic in the
//! length of straight-line code when values live across much of it: it
//! splits such a value at each conflict in turn, scanning the rest of its
//! range each time. A gradient's straight-line code makes them: it binds
//! each value of the forward pass and reads it again in the reverse pass,
//! at the mirror position. And Cranelift computes a pure instruction
//! where its result is first used by an instruction with an effect (a
//! store, a call, a branch): a reverse pass of additions and products
//! with no effect until the result is written has all its arithmetic
//! computed at the end, every value it reads live until then. A
//! 10,000-binding chain took 4 to 17 s to compile natively
//! (docs/reliability.md).
//!
//! So a chain of more than [`TAPE_DISTANCE`] bindings takes a tape from
//! the workspace (8 bytes a binding, plus one slot per variable from
//! before the chain that it reads late; in a loop's step, given back with
//! the step's other memory) and finds, in one walk of its terms, the last
//! binding (or its body) mentioning each name. Then:
//!
//! - every scalar (real, integer, boolean) a variable of the chain is
//!   bound to is stored in its slot when it is bound: the store computes
//!   it there;
//! - a variable whose last mention is more than [`TAPE_DISTANCE`]
//!   bindings later, or one bound before the chain (a parameter) and
//!   mentioned after its first [`TAPE_DISTANCE`] bindings, is read from
//!   its slot: a load before each use. A value read that far away is
//!   live across at least as many others, twice the 16 floating-point
//!   registers of x86-64: the allocator would spill it anyway;
//! - the tape's address is read again every [`TAPE_DISTANCE`] bindings
//!   ([`Translator::refresh_tape`]), and the loads go through an address
//!   Cranelift's alias analysis cannot relate to the stores' (it would
//!   forward each stored value to its loads).
//!
//! Every value is then live across at most about [`TAPE_DISTANCE`]
//! bindings, and the values are the same bits (a store and a load of an
//! `f64`, `i64` or `i8`). The function's `info` and, after a long chain,
//! its `out` address are read from stack slots for the same reason
//! (`lower_function`, `Translator::let_chain_into`).
//!
//! A kernel (`split.rs`) has no workspace: its chains have no tape.
//!
//! Reads that do not go through [`Translator::lower`]'s variables — a pair
//! term's invariant reals (`arrays/pairs.rs`), a kernel's captures
//! (`split.rs`) — read the value as bound, which stays valid: it is only
//! kept alive longer there.

use crate::lower::Translator;
use crate::values::mem;
use crate::values::Values;
use cranelift_codegen::ir::{types, InstBuilder};
use gradlift_lang::deep::guard;
use gradlift_lang::syntax::{Expr, ExprKind, Name, Pattern};
use std::collections::HashMap;

/// A value read more than this many bindings after its own goes through
/// the tape (see the module's doc).
pub(crate) const TAPE_DISTANCE: usize = 32;

/// Where a taped variable is: its tape (an index into
/// `Translator::tapes`) and the slot's offset.
#[derive(Clone, Copy)]
pub(crate) struct Slot {
    tape: usize,
    offset: i32,
}

/// What of a chain goes through the tape: its bindings (by index) and the
/// variables bound before it (parameters, outer bindings) that it reads,
/// given the values it binds (`chain`) and its body.
pub(crate) struct Far<'e> {
    pub bindings: Vec<bool>,
    pub outer: Vec<&'e Name>,
}

impl Far<'_> {
    /// How many slots the tape needs: one per binding (every binding is
    /// stored, see the module's doc) and one per variable from before the
    /// chain; none for a chain too short to have a tape.
    pub fn slots(&self) -> usize {
        match self.bindings.len() > TAPE_DISTANCE {
            true => self.outer.len() + self.bindings.len(),
            false => 0,
        }
    }
}

/// [`Far`] of a chain: what it reads more than [`TAPE_DISTANCE`] bindings
/// after its own binding (or, for a variable from before the chain, after
/// the chain's start).
pub(crate) fn far<'e>(chain: &[(&'e Pattern, &'e Expr)], body: &'e Expr) -> Far<'e> {
    let mut far = Far {
        bindings: vec![false; chain.len()],
        outer: Vec::new(),
    };
    if chain.len() <= TAPE_DISTANCE {
        return far;
    }
    // The last mention of each name, by binding index (`chain.len()` for
    // the body).
    let mut last: HashMap<&Name, usize> = HashMap::new();
    for (j, (_, value)) in chain.iter().enumerate() {
        mentions(value, j, &mut last);
    }
    mentions(body, chain.len(), &mut last);
    let mut bound = std::collections::HashSet::new();
    for (k, (pat, _)) in chain.iter().enumerate() {
        if let Pattern::Var(name, _) = pat {
            far.bindings[k] = last.get(name).is_some_and(|&j| j > k + TAPE_DISTANCE);
        }
        let mut names = Vec::new();
        pat.names(&mut names);
        bound.extend(names);
    }
    far.outer = last
        .iter()
        .filter(|&(n, &j)| j > TAPE_DISTANCE && !bound.contains(*n))
        .map(|(n, _)| *n)
        .collect();
    // In a fixed order: the tape's layout is the code's.
    far.outer.sort();
    far
}

/// Records `at` as the last mention of every variable `e` mentions (free
/// or not: a name bound inside `e` is never one the chain binds, binders
/// being unique).
fn mentions<'e>(e: &'e Expr, at: usize, last: &mut HashMap<&'e Name, usize>) {
    guard(|| {
        if let ExprKind::Var(n) = &e.kind {
            last.insert(n, at);
        }
        for c in e.children() {
            mentions(c, at, last);
        }
    })
}

impl Translator<'_, '_> {
    /// A tape of `slots` slots for the chain being lowered (none for
    /// none), by its index in `Translator::tapes`.
    pub(crate) fn tape(&mut self, slots: usize) -> Option<usize> {
        if slots == 0 || !self.workspace {
            return None;
        }
        // Slot 0 holds the tape's own address (see `refresh_tape`).
        let bytes = 8 * (slots as u64 + 1);
        let n = self.iconst(bytes as i64);
        let counted = crate::workspace::Bytes::Const(bytes);
        let at = self.alloc(n, counted.clone(), Some(counted));
        self.b.ins().store(mem(), at, at, 0);
        let from = crate::values::opaque(self.b, at);
        self.tapes.push((at, from));
        Some(self.tapes.len() - 1)
    }

    /// The tape's address read again, for the bindings that follow:
    /// every [`TAPE_DISTANCE`] bindings, so that no value of the chain —
    /// its address included — is live across more of it. The address is
    /// loaded from the tape's slot 0 through the last copy: an address
    /// computed the same way each time (a stack slot's, say) would be one
    /// value for Cranelift, live across the whole chain.
    pub(crate) fn refresh_tape(&mut self, tape: usize) {
        let at = self.b.ins().load(types::I64, mem(), self.tapes[tape].1, 0);
        self.tapes[tape] = (at, crate::values::opaque(self.b, at));
        // A new block: Cranelift computes a constant once per block that
        // uses it, so a constant of the chain would otherwise be one value
        // live across all of it.
        let next = self.b.create_block();
        self.b.ins().jump(next, &[]);
        self.b.switch_to_block(next);
        self.b.seal_block(next);
    }

    /// Stores the scalar `name` is bound to into slot `index` of `tape`,
    /// and, when `read`, reads the variable from there from now on. Other
    /// values are left as they are.
    pub(crate) fn store_on_tape(&mut self, name: &Name, tape: usize, index: usize, read: bool) {
        let Some(Values::Real(v) | Values::Int(v) | Values::Bool(v)) = self.env.get(name) else {
            return;
        };
        let offset = i32::try_from(8 * (index + 1)).expect("a tape's offset fits in 32 bits");
        let at = self.tapes[tape].0;
        self.b.ins().store(mem(), *v, at, offset);
        if read {
            let before = self.taped.insert(name.clone(), Slot { tape, offset });
            self.tape_log.push((name.clone(), before));
        }
    }

    /// Undoes the changes to `Translator::taped` made since the log had
    /// `mark` entries: a chain's variables are read from its tape in the
    /// chain only (a body lowered again — a loop's edges and interior,
    /// the lanes of a reduction — binds them afresh, with a tape of its
    /// own).
    pub(crate) fn untape(&mut self, mark: usize) {
        while self.tape_log.len() > mark {
            let (name, before) = self.tape_log.pop().expect("above the mark");
            match before {
                Some(slot) => self.taped.insert(name, slot),
                None => self.taped.remove(&name),
            };
        }
    }

    /// The value of a taped variable, loaded from its slot: `None` when
    /// `name` is not taped.
    pub(crate) fn read_from_tape(&mut self, name: &Name) -> Option<Values> {
        let slot = *self.taped.get(name)?;
        // Through the address the alias analysis cannot relate to the
        // stores' (`Translator::pin`): it would forward each stored value
        // to its loads, and the values would be live across the chain
        // again.
        let at = self.tapes[slot.tape].1;
        let ty = match self.env.get(name)? {
            Values::Real(_) => types::F64,
            Values::Int(_) => types::I64,
            Values::Bool(v) => self.b.func.dfg.value_type(*v),
            _ => return None,
        };
        let v = self.b.ins().load(ty, mem(), at, slot.offset);
        Some(match self.env.get(name)? {
            Values::Real(_) => Values::Real(v),
            Values::Int(_) => Values::Int(v),
            _ => Values::Bool(v),
        })
    }
}
