//! The first trial step of a line search, scaled to the gradient.
//!
//! argmin's quasi-Newton and conjugate-gradient solvers start every line
//! search at step length 1. Their later directions are scaled by the
//! curvature they have learned, but the first is the raw −∇f: with a
//! gradient of norm 10⁴ the first trial point lies 10⁴ away, where a loss
//! integrating an ODE overflows and the More–Thuente search stops on the
//! infinity. [`FirstStep`] wraps a line search and sets its initial step to
//! `min(1, 1/‖d‖)` — a move of at most unit length — for the first search
//! direction `d` (for every one with [`FirstStep::every`], which suits
//! steepest descent, whose directions are never scaled), and to 1 after.
//! The search itself is the wrapped one's.

use argmin::core::{Error, Problem, Solver, State, TerminationStatus, KV};
use argmin::solver::linesearch::LineSearch;

/// A line search whose first trial step is scaled to its direction.
#[derive(Clone, Debug)]
pub struct FirstStep<L> {
    inner: L,
    searches: u64,
    every: bool,
}

impl<L> FirstStep<L> {
    /// `inner`, its first search started at `min(1, 1/‖d‖)`.
    pub fn new(inner: L) -> FirstStep<L> {
        FirstStep {
            inner,
            searches: 0,
            every: false,
        }
    }

    /// `inner`, every search started at `min(1, 1/‖d‖)`.
    pub fn every(inner: L) -> FirstStep<L> {
        FirstStep {
            inner,
            searches: 0,
            every: true,
        }
    }
}

impl<L: LineSearch<Vec<f64>, f64>> LineSearch<Vec<f64>, f64> for FirstStep<L> {
    fn search_direction(&mut self, direction: Vec<f64>) {
        let scaled = self.searches == 0 || self.every;
        let length = crate::solve::norm(&direction);
        let step = if scaled && length.is_finite() && length > 1.0 {
            1.0 / length
        } else {
            1.0
        };
        self.inner
            .initial_step_length(step)
            .expect("a positive step length is accepted");
        self.searches += 1;
        self.inner.search_direction(direction);
    }

    fn initial_step_length(&mut self, step_length: f64) -> Result<(), Error> {
        self.inner.initial_step_length(step_length)
    }
}

impl<O, I: State, L: Solver<O, I>> Solver<O, I> for FirstStep<L> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn init(&mut self, problem: &mut Problem<O>, state: I) -> Result<(I, Option<KV>), Error> {
        self.inner.init(problem, state)
    }

    fn next_iter(&mut self, problem: &mut Problem<O>, state: I) -> Result<(I, Option<KV>), Error> {
        self.inner.next_iter(problem, state)
    }

    fn terminate_internal(&mut self, state: &I) -> TerminationStatus {
        self.inner.terminate_internal(state)
    }

    fn terminate(&mut self, state: &I) -> TerminationStatus {
        self.inner.terminate(state)
    }
}
