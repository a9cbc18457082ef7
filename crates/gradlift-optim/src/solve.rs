//! Running argmin's solvers, or Adam, on a [`Loss`].
//!
//! L-BFGS, BFGS, nonlinear conjugate gradient and steepest descent are
//! argmin's, each with argmin's More–Thuente line search, its first trial
//! step scaled by [`FirstStep`];
//! nothing here searches lines. An observer records the
//! loss after every iteration and reports it to a callback (a progress bar,
//! say). When argmin stops with an error after some progress — a line
//! search that finds no decrease near a minimum, typically — the fit
//! returns the best point it reached, with the error as its stop reason.

use crate::adam::{self, AdamOptions};
use crate::{Converged, Error, FirstStep, Loss};

/// The gradient norm at which conjugate gradient and steepest descent stop
/// (argmin's default for L-BFGS and BFGS).
const TOLERANCE: f64 = 1.4901161193847656e-8;
use argmin::core::observers::{Observe, ObserverMode};
use argmin::core::{CostFunction, Executor, Gradient, IterState, State, KV};
use argmin::solver::conjugategradient::{beta::PolakRibiere, NonlinearConjugateGradient};
use argmin::solver::gradientdescent::SteepestDescent;
use argmin::solver::linesearch::MoreThuenteLineSearch;
use argmin::solver::quasinewton::{BFGS, LBFGS};
use std::sync::{Arc, Mutex};

/// An optimizer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// argmin's L-BFGS (7 correction pairs) with the More–Thuente line search.
    Lbfgs,
    /// argmin's BFGS (a dense inverse Hessian) with More–Thuente.
    Bfgs,
    /// argmin's nonlinear conjugate gradient (Polak–Ribière, restarted
    /// every 10 iterations or when successive gradients lose orthogonality)
    /// with More–Thuente.
    Cg,
    /// argmin's steepest descent with More–Thuente (argmin's Hager–Zhang
    /// search stopped on an internal error on the logistic-growth loss).
    Gd,
    /// Adam ([`crate::Adam`]), on all rows or on minibatches.
    Adam,
}

/// What a fit may do.
#[derive(Clone, Debug)]
pub struct FitOptions {
    /// The most iterations.
    pub max_iters: u64,
    /// For [`Method::Adam`].
    pub adam: AdamOptions,
}

impl Default for FitOptions {
    fn default() -> FitOptions {
        FitOptions {
            max_iters: 1000,
            adam: AdamOptions::default(),
        }
    }
}

/// Called after every iteration with its number (from 1) and its loss.
pub type Progress = Box<dyn FnMut(u64, f64) + Send>;

/// The result of a fit.
#[derive(Clone, Debug)]
pub struct Fit {
    /// The fitted reals (see [`Loss::unflatten`]).
    pub x: Vec<f64>,
    /// The loss at `x`, on all the data.
    pub loss: f64,
    /// The Euclidean norm of the gradient at `x`, on all the data.
    pub grad_norm: f64,
    /// Iterations done.
    pub iters: u64,
    /// The loss on all the data at the start, then after every iteration.
    pub history: Vec<f64>,
    /// Loss and gradient evaluations the optimizer asked for (a loss asked
    /// for at the point of the last gradient is not computed again).
    pub evaluations: (u64, u64),
    /// Why the optimizer stopped.
    pub stop: String,
}

/// Minimizes `loss` from `x0` with `method`, calling `progress` after each
/// iteration.
pub fn fit(
    loss: &mut Loss,
    method: Method,
    x0: Vec<f64>,
    options: &FitOptions,
    progress: Progress,
) -> Result<Fit, Error> {
    let (start_loss, start_grad) = loss.value_and_gradient(&x0)?;
    let start_norm = norm(&start_grad);
    if !start_loss.is_finite() || !start_norm.is_finite() {
        return Err(Error::NotFinite {
            loss: start_loss,
            grad_norm: start_norm,
        });
    }
    if method == Method::Adam {
        return adam::run(loss, x0, options, progress);
    }
    let recorder = Recorder {
        record: Arc::new(Mutex::new(Record {
            history: vec![start_loss],
            best: (start_loss, x0.clone()),
            iters: 0,
        })),
        progress,
    };
    let record = Arc::clone(&recorder.record);
    let problem = Borrowed(loss);
    let max_iters = options.max_iters;
    let n = x0.len();
    let more_thuente = || FirstStep::new(MoreThuenteLineSearch::new());
    let run = match method {
        Method::Lbfgs => finish(
            Executor::new(problem, LBFGS::new(more_thuente(), 7))
                .configure(|s| s.param(x0).max_iters(max_iters).counting(true))
                .add_observer(recorder, ObserverMode::Always)
                .run(),
        ),
        Method::Bfgs => {
            let identity: Vec<Vec<f64>> = (0..n)
                .map(|i| (0..n).map(|j| if i == j { 1.0 } else { 0.0 }).collect())
                .collect();
            finish(
                Executor::new(problem, BFGS::new(more_thuente()))
                    .configure(|s| {
                        s.param(x0)
                            .inv_hessian(identity)
                            .max_iters(max_iters)
                            .counting(true)
                    })
                    .add_observer(recorder, ObserverMode::Always)
                    .run(),
            )
        }
        Method::Cg => {
            let solver = Converged::new(
                NonlinearConjugateGradient::new(more_thuente(), PolakRibiere::new())
                    .restart_iters(10)
                    .restart_orthogonality(0.1),
                TOLERANCE,
            );
            finish(
                Executor::new(problem, solver)
                    .configure(|s| s.param(x0).max_iters(max_iters).counting(true))
                    .add_observer(recorder, ObserverMode::Always)
                    .run(),
            )
        }
        Method::Gd => finish(
            Executor::new(
                problem,
                Converged::new(
                    SteepestDescent::new(FirstStep::every(MoreThuenteLineSearch::new())),
                    TOLERANCE,
                ),
            )
            .configure(|s| s.param(x0).max_iters(max_iters).counting(true))
            .add_observer(recorder, ObserverMode::Always)
            .run(),
        ),
        Method::Adam => unreachable!("Adam returned above"),
    };
    let record = record.lock().expect("record").clone();
    let (x, iters, evaluations, stop) = match run {
        Ok(done) => done,
        // No step was taken: nothing to report but the error.
        Err(e) if record.iters == 0 => return Err(Error::Solver(e)),
        Err(e) => (record.best.1, record.iters, (0, 0), format!("stopped: {e}")),
    };
    let (value, gradient) = loss.value_and_gradient(&x)?;
    Ok(Fit {
        x,
        loss: value,
        grad_norm: norm(&gradient),
        iters,
        history: record.history,
        evaluations,
        stop,
    })
}

/// The best point, the iterations, the evaluation counts and the stop
/// reason of a finished run.
type Finished = (Vec<f64>, u64, (u64, u64), String);

/// The state of argmin's gradient-based solvers over `Vec<f64>`.
type Iter<H> = IterState<Vec<f64>, Vec<f64>, (), H, (), f64>;

/// What argmin's `Executor::run` returns for them.
type Run<'a, S, H> =
    Result<argmin::core::OptimizationResult<Borrowed<'a>, S, Iter<H>>, argmin::core::Error>;

/// The outcome of a finished argmin run.
fn finish<S, H>(run: Run<'_, S, H>) -> Result<Finished, String> {
    let result = run.map_err(|e| e.to_string())?;
    let state = result.state();
    let x = state
        .get_best_param()
        .or(state.get_param())
        .expect("a run that started has a parameter")
        .clone();
    let counts = state.get_func_counts();
    let count = |k: &str| counts.get(k).copied().unwrap_or(0);
    let stop = state
        .get_termination_reason()
        .map_or("stopped".to_string(), |r| r.text().to_string());
    Ok((
        x,
        state.get_iter(),
        (count("cost_count"), count("gradient_count")),
        stop,
    ))
}

/// The Euclidean norm.
pub(crate) fn norm(xs: &[f64]) -> f64 {
    xs.iter().map(|x| x * x).sum::<f64>().sqrt()
}

/// A borrowed loss as an argmin problem (argmin takes its problem by value).
/// A loss or gradient that is not finite is an error: argmin's line
/// searches would otherwise extend their step for ever on a loss that is
/// unbounded below.
struct Borrowed<'a>(&'a Loss);

impl CostFunction for Borrowed<'_> {
    type Param = Vec<f64>;
    type Output = f64;

    fn cost(&self, x: &Vec<f64>) -> Result<f64, argmin::core::Error> {
        let value = self.0.cost(x)?;
        if !value.is_finite() {
            return Err(Error::Diverged {
                what: "loss",
                value,
            }
            .into());
        }
        Ok(value)
    }
}

impl Gradient for Borrowed<'_> {
    type Param = Vec<f64>;
    type Gradient = Vec<f64>;

    fn gradient(&self, x: &Vec<f64>) -> Result<Vec<f64>, argmin::core::Error> {
        let gradient = Gradient::gradient(self.0, x)?;
        let size = norm(&gradient);
        if !size.is_finite() {
            return Err(Error::Diverged {
                what: "gradient norm",
                value: size,
            }
            .into());
        }
        Ok(gradient)
    }
}

#[derive(Clone)]
struct Record {
    history: Vec<f64>,
    best: (f64, Vec<f64>),
    iters: u64,
}

struct Recorder {
    record: Arc<Mutex<Record>>,
    progress: Progress,
}

impl<H> Observe<Iter<H>> for Recorder {
    fn observe_iter(&mut self, state: &Iter<H>, _kv: &KV) -> Result<(), argmin::core::Error> {
        let cost = state.get_cost();
        {
            let mut record = self.record.lock().expect("record");
            record.history.push(cost);
            record.iters = state.get_iter();
            if cost < record.best.0 {
                if let Some(x) = state.get_param() {
                    record.best = (cost, x.clone());
                }
            }
        }
        (self.progress)(state.get_iter(), cost);
        Ok(())
    }
}
