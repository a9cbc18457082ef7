//! A gradient-norm stopping test for solvers that have none.
//!
//! argmin's L-BFGS and BFGS stop when the gradient norm falls below a
//! tolerance; its nonlinear conjugate gradient and steepest descent run
//! until the iteration limit. [`Converged`] wraps a solver and stops it,
//! as converged, once the gradient norm of its state is below `tolerance`.

use argmin::core::{
    Error, Gradient, IterState, Problem, Solver, State, TerminationReason, TerminationStatus, KV,
};

/// A solver that also stops when the gradient norm is below a tolerance.
#[derive(Clone, Debug)]
pub struct Converged<S> {
    inner: S,
    tolerance: f64,
}

impl<S> Converged<S> {
    /// `inner`, stopped once the gradient norm is below `tolerance`.
    pub fn new(inner: S, tolerance: f64) -> Converged<S> {
        Converged { inner, tolerance }
    }
}

type Iter<J, H, R> = IterState<Vec<f64>, Vec<f64>, J, H, R, f64>;

impl<O, J, H, R, S> Solver<O, Iter<J, H, R>> for Converged<S>
where
    S: Solver<O, Iter<J, H, R>>,
    O: Gradient<Param = Vec<f64>, Gradient = Vec<f64>>,
    Iter<J, H, R>: State<Float = f64, Param = Vec<f64>>,
{
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn init(
        &mut self,
        problem: &mut Problem<O>,
        state: Iter<J, H, R>,
    ) -> Result<(Iter<J, H, R>, Option<KV>), Error> {
        self.inner.init(problem, state)
    }

    fn next_iter(
        &mut self,
        problem: &mut Problem<O>,
        state: Iter<J, H, R>,
    ) -> Result<(Iter<J, H, R>, Option<KV>), Error> {
        let (state, kv) = self.inner.next_iter(problem, state)?;
        // Steepest descent does not update the gradient in its state: take
        // it at the new point (free when the solver has just computed it,
        // and the loss keeps it for the solver's next iteration).
        match state.get_param() {
            Some(x) => {
                let gradient = problem.gradient(x)?;
                Ok((state.gradient(gradient), kv))
            }
            None => Ok((state, kv)),
        }
    }

    fn terminate(&mut self, state: &Iter<J, H, R>) -> TerminationStatus {
        let status = self.inner.terminate(state);
        if status.terminated() {
            return status;
        }
        match state.get_gradient() {
            Some(g) if crate::solve::norm(g) < self.tolerance => {
                TerminationStatus::Terminated(TerminationReason::SolverConverged)
            }
            _ => TerminationStatus::NotTerminated,
        }
    }
}
