//! The runtime tape: reverse mode for code whose shape depends on data.
//!
//! Input: ordinary Rust code run on [`Var`]s instead of `f64`s, with any
//! control flow (a loop whose trip count depends on a value, recursion,
//! early return). Output: the adjoint `∂output/∂v` of every recorded
//! variable after [`Tape::backward`].
//!
//! Each operation runs immediately on `f64` and appends one node to the
//! tape: the indices of its operands and the partial derivatives of its
//! result with respect to them, evaluated at this run's values by the
//! crate's rule table (`src/prim.rs`). That is a Wengert list (Wengert 1964;
//! Griewank and Walther 2008). `backward` seeds the output's adjoint with 1
//! and visits the nodes from the output down to the first, adding
//! `adjoint(node) · ∂node/∂operand` to each operand's adjoint.
//!
//! The chapter's `AdTape` records a closure per operation instead. Storing
//! numbers is the same construction with the closure's captured state made
//! explicit: a node is two indices and two partials in one fixed-size
//! record, nothing is allocated or called through a pointer per operation,
//! and the reverse sweep is a plain loop over a contiguous array. A primitive
//! whose reverse step were not "multiply and add" would need the closure
//! back; none of the primitives of DESIGN §1 is such a primitive.
//!
//! Semantics kept from the chapter:
//!
//! - nodes whose adjoint is zero are skipped, so an operation that does not
//!   influence the output contributes nothing even if its partial is
//!   infinite (an unused `log(0)` does not turn an input's adjoint into NaN);
//! - a repeated `backward` clears the previous adjoints before seeding the
//!   new output.
//!
//! Only adjoints of zero are skipped; an operation that does reach the
//! output with an infinite partial gives the infinite (or NaN) gradient the
//! mathematics gives.
//!
//! ```
//! use gradlift_tape::{Real, Tape};
//!
//! let tape = Tape::new();
//! let x = tape.var(1.5);
//! let y = tape.var(2.0);
//! let mut t = x * y;
//! while t < 100.0 {
//!     t = t * t; // the trip count depends on x and y
//! }
//! let r = t.log() - y.exp();
//! tape.backward(r);
//! // t = (xy)⁸, so r = 8 log x + 8 log y − eʸ.
//! assert!((x.adjoint() - 8.0 / 1.5).abs() < 1e-12);
//! assert!((y.adjoint() - (4.0 - 2.0f64.exp())).abs() < 1e-12);
//! ```

use crate::var::Var;
use std::cell::RefCell;
use std::fmt;

/// One recorded operation: `operand_count` operands with their partials.
#[derive(Clone, Copy, Debug)]
struct Node {
    operands: [u32; 2],
    partials: [f64; 2],
    operand_count: u8,
}

/// A record of operations on [`Var`]s, for reverse-mode differentiation.
///
/// The tape is shared by reference (`Var<'t>` holds a `&'t Tape`), and
/// records through interior mutability, so variables combine with ordinary
/// operators. It is not `Sync`: one thread records at a time.
#[derive(Default)]
pub struct Tape {
    nodes: RefCell<Vec<Node>>,
    adjoints: RefCell<Vec<f64>>,
}

impl Tape {
    /// An empty tape.
    pub fn new() -> Self {
        Tape::default()
    }

    /// An empty tape with room for `nodes` operations before it reallocates.
    pub fn with_capacity(nodes: usize) -> Self {
        Tape {
            nodes: RefCell::new(Vec::with_capacity(nodes)),
            adjoints: RefCell::new(Vec::new()),
        }
    }

    /// A new variable (an input, or a constant whose adjoint is of no
    /// interest) holding `value`.
    pub fn var(&self, value: f64) -> Var<'_> {
        self.record(value, &[])
    }

    /// The number of recorded nodes, inputs included.
    pub fn len(&self) -> usize {
        self.nodes.borrow().len()
    }

    /// Whether nothing has been recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets every node and adjoint, keeping the allocation. Needs `&mut`,
    /// so no [`Var`] of the old recording can outlive it.
    pub fn clear(&mut self) {
        self.nodes.get_mut().clear();
        self.adjoints.get_mut().clear();
    }

    /// Computes `∂output/∂v` for every variable `v` recorded up to `output`:
    /// clears the previous adjoints, seeds `output` with 1 and replays the
    /// tape in reverse, skipping nodes whose adjoint is zero. Read the
    /// results with [`Var::adjoint`] or [`Tape::adjoint`].
    ///
    /// # Panics
    ///
    /// If `output` was recorded on another tape.
    pub fn backward(&self, output: Var<'_>) {
        self.check_owner(output);
        let nodes = self.nodes.borrow();
        let mut adjoints = self.adjoints.borrow_mut();
        let last = output.index();
        adjoints.clear();
        adjoints.resize(last + 1, 0.0);
        adjoints[last] = 1.0;
        for index in (0..=last).rev() {
            let adjoint = adjoints[index];
            if adjoint == 0.0 {
                continue;
            }
            let node = &nodes[index];
            for k in 0..usize::from(node.operand_count) {
                adjoints[node.operands[k] as usize] += adjoint * node.partials[k];
            }
        }
    }

    /// The adjoint of `var` from the last [`backward`](Tape::backward): 0 if
    /// none has run, or if `var` was recorded after its output.
    ///
    /// # Panics
    ///
    /// If `var` was recorded on another tape.
    pub fn adjoint(&self, var: Var<'_>) -> f64 {
        self.check_owner(var);
        self.adjoints
            .borrow()
            .get(var.index())
            .copied()
            .unwrap_or(0.0)
    }

    /// Runs [`backward`](Tape::backward) from `output` and returns the
    /// adjoints of `inputs`, in order.
    pub fn gradient(&self, output: Var<'_>, inputs: &[Var<'_>]) -> Vec<f64> {
        self.backward(output);
        inputs.iter().map(|&input| self.adjoint(input)).collect()
    }

    /// Appends a node with the given operands (index and partial) and
    /// returns its variable.
    ///
    /// # Panics
    ///
    /// If the tape already holds 2³² nodes.
    pub(crate) fn record(&self, value: f64, operands: &[(u32, f64)]) -> Var<'_> {
        let mut nodes = self.nodes.borrow_mut();
        let index = u32::try_from(nodes.len())
            .unwrap_or_else(|_| panic!("a Tape holds at most 2^32 nodes"));
        let mut node = Node {
            operands: [0; 2],
            partials: [0.0; 2],
            operand_count: 0,
        };
        for (k, &(operand, partial)) in operands.iter().enumerate() {
            node.operands[k] = operand;
            node.partials[k] = partial;
        }
        node.operand_count = operands.len() as u8;
        nodes.push(node);
        Var::new(self, index, value)
    }

    pub(crate) fn check_owner(&self, var: Var<'_>) {
        assert!(
            std::ptr::eq(self, var.tape()),
            "a Var was used with a Tape other than the one that recorded it"
        );
    }
}

impl fmt::Debug for Tape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tape").field("nodes", &self.len()).finish()
    }
}
