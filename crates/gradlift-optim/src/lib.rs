//! Compiled gradlift losses in the optimizers Rust programs already use.
//!
//! A [`Loss`] is a real-valued gradlift function with some parameters
//! *fitted* — their reals flattened into one `Vec<f64>` — and the others
//! held fixed as data. It compiles the function and its reverse-mode
//! gradient to native code once and implements argmin's
//! [`CostFunction`](argmin::core::CostFunction) and
//! [`Gradient`](argmin::core::Gradient), so argmin's L-BFGS, BFGS,
//! nonlinear conjugate gradient and steepest descent (each with its line
//! search) run on native gradients. [`Adam`] is here for stochastic and
//! minibatch training, the one optimizer argmin lacks.
//!
//! ```
//! use gradlift::{Jit, Program, Value};
//! use gradlift_optim::{fit, FitOptions, Loss, Method};
//!
//! let program = Program::parse(
//!     "quad.grad",
//!     "def loss(a: R, b: R, t: R) -> R = (a - t) * (a - t) + 10 * (b - a * a) * (b - a * a)",
//! )
//! .unwrap();
//! let f = program.function("loss").unwrap();
//! let jit = Jit::new().unwrap();
//! let values = [Value::Real(0.0), Value::Real(0.0), Value::Real(1.5)];
//! let mut loss = Loss::new(&f, &jit, &["a".into(), "b".into()], &values).unwrap();
//! let x0 = loss.start();
//! let result = fit(&mut loss, Method::Lbfgs, x0, &FitOptions::default(), Box::new(|_, _| {})).unwrap();
//! assert!((result.x[0] - 1.5).abs() < 1e-6 && (result.x[1] - 2.25).abs() < 1e-6);
//! ```
#![warn(missing_docs)]

mod adam;
mod converged;
mod first_step;
mod loss;
mod rows;
mod solve;

pub use adam::{Adam, AdamOptions};
pub use converged::Converged;
pub use first_step::FirstStep;
pub use loss::Loss;
pub use rows::RowAxis;
pub use solve::{fit, Fit, FitOptions, Method, Progress};

use thiserror::Error;

/// Why a loss cannot be built or fitted.
#[derive(Debug, Error)]
pub enum Error {
    /// Parsing, differentiating or compiling the function failed.
    #[error("{0}")]
    Gradlift(#[from] gradlift::Error),
    /// The function does not return a real.
    #[error("`{function}` returns `{ty}`, not a real: only a real-valued loss can be minimized")]
    NotScalar {
        /// The function.
        function: String,
        /// Its result type.
        ty: String,
    },
    /// A fitted parameter that the function does not have.
    #[error("`{name}` is not a parameter of `{function}` (its parameters: {params})")]
    UnknownParameter {
        /// The name given.
        name: String,
        /// The function.
        function: String,
        /// Its parameters.
        params: String,
    },
    /// Data for a parameter that the function does not have.
    #[error("the data gives `{name}`, which is not a parameter of `{function}` (its parameters: {params})")]
    UnknownData {
        /// The name given.
        name: String,
        /// The function.
        function: String,
        /// Its parameters.
        params: String,
    },
    /// A size parameter cannot be fitted.
    #[error("`{0}` is a size, a whole number fixed by the data: it cannot be fitted")]
    SizeParameter(String),
    /// No parameter to fit.
    #[error("no parameter of `{function}` to fit: name at least one with its starting value (its parameters: {params})")]
    NothingToFit {
        /// The function.
        function: String,
        /// Its parameters.
        params: String,
    },
    /// A parameter given both a starting value and data.
    #[error("`{0}` is given both as a parameter to fit and as data")]
    FittedAndData(String),
    /// A parameter that is neither fitted nor given in the data.
    #[error("no data for `{name}: {ty}` of `{function}`: every parameter that is not fitted needs a value in the data")]
    MissingData {
        /// The parameter.
        name: String,
        /// Its type.
        ty: String,
        /// The function.
        function: String,
    },
    /// A starting value that does not fit its parameter.
    #[error("{}", if *located { message.clone() } else { format!("starting values: {message}") })]
    Start {
        /// What is wrong (with the text and a caret when `located`).
        message: String,
        /// Whether the message shows where in the text.
        located: bool,
    },
    /// Data that does not fit its parameters.
    #[error("{}", if *located { message.clone() } else { format!("data: {message}") })]
    Data {
        /// What is wrong (with the text and a caret when `located`).
        message: String,
        /// Whether the message shows where in the text.
        located: bool,
    },
    /// Starting values and data whose sizes disagree with the types.
    #[error("{0}")]
    Shape(String),
    /// A parameter vector of the wrong length.
    #[error("{given} parameters given, the loss has {expected}")]
    Dimension {
        /// The length given.
        given: usize,
        /// The number of fitted reals.
        expected: usize,
    },
    /// The native code stopped with an error.
    #[error("evaluating the loss: {0}")]
    Run(String),
    /// The optimizer failed before its first iteration.
    #[error("the optimizer failed: {0}")]
    Solver(String),
    /// Minibatches of a loss whose data has no row axis.
    #[error("minibatches need data with rows: exactly one size variable that is the outer length of some data parameters (`X: [[R; d]; m], y: [R; m]`) and of nothing fitted")]
    NoRows,
    /// A minibatch size out of range.
    #[error("a minibatch of {batch} rows: the data has {rows} rows (`{size}`), so the batch must be between 1 and {rows}")]
    BatchSize {
        /// The batch size asked for.
        batch: usize,
        /// The rows of the data.
        rows: usize,
        /// The size variable counting them.
        size: String,
    },
    /// The loss or its gradient is not finite at the starting point.
    #[error("the loss is {loss} and the gradient norm {grad_norm} at the starting point: start where both are finite")]
    NotFinite {
        /// The loss there.
        loss: f64,
        /// The gradient norm there.
        grad_norm: f64,
    },
    /// The loss or its gradient stopped being finite at a point a line
    /// search tried: the loss may be unbounded below (a line search on a
    /// loss that decreases for ever extends its step for ever).
    #[error(
        "the {what} is {value} at a point the line search tried: the loss may be unbounded below"
    )]
    Diverged {
        /// "loss" or "gradient norm".
        what: &'static str,
        /// Its value there.
        value: f64,
    },
}
