//! Derivatives of ordinary Rust code, for what the gradlift language cannot
//! express: dual numbers (forward mode, nestable for higher derivatives) and
//! a runtime tape (reverse mode through any control flow).
//!
//! Both carry the primitives of the language (DESIGN §1: `sin cos tan exp
//! log sqrt tanh abs sign pow min max`, `+ - * /` and unary `-`), with the
//! same derivative rules as the compiled gradient, declared once in the
//! crate's rule table (`src/prim.rs`). Write a function once over [`Real`]
//! and run it on `f64`, on [`Dual`] or on a tape's [`Var`]:
//!
//! ```
//! use gradlift_tape::{Dual, Real, Tape};
//!
//! // The chapter's forward-mode example.
//! fn model<R: Real>(x: R, y: R, n: u32) -> R {
//!     let mut s = x.lift(0.0);
//!     for i in 1..=n {
//!         s += x * f64::from(i) / y;
//!     }
//!     let mut t = x * y + 3.0;
//!     if t > 1.0 {
//!         t *= t;
//!     } else {
//!         t = -t;
//!     }
//!     t.sin() / x - y * 2.0 + s
//! }
//!
//! // Forward mode: one pass per input direction.
//! let df_dx = model(Dual::variable(1.0), Dual::constant(2.0), 3).tangent;
//! let df_dy = model(Dual::constant(1.0), Dual::variable(2.0), 3).tangent;
//! assert!(df_dx > 22.9 && df_dx < 23.0 && df_dy > 6.4 && df_dy < 6.5);
//!
//! // Reverse mode: one pass for the whole gradient.
//! let tape = Tape::new();
//! let (x, y) = (tape.var(1.0), tape.var(2.0));
//! tape.backward(model(x, y, 3));
//! assert!((x.adjoint() - df_dx).abs() < 1e-12);
//! assert!((y.adjoint() - df_dy).abs() < 1e-12);
//!
//! // Second derivatives by nesting: d²/dx² x³ at 2.
//! let x = Dual::variable(Dual::variable(2.0));
//! assert_eq!((x * x * x).tangent.tangent, 12.0);
//! ```
//!
//! The [`dual`] module explains perturbation confusion and how one type per
//! nesting level avoids it; the [`tape`] module, the tape's semantics and
//! why it stores partials rather than closures. `docs/tape.md` in the
//! repository says which of the two, or the compiled gradient, to use.
#![warn(missing_docs)]

pub mod dual;
mod dual_ops;
mod prim;
pub mod real;
pub mod tape;
mod var;

pub use dual::{derivative, second_derivative, Dual};
pub use real::{Real, Scalar};
pub use tape::Tape;
pub use var::Var;

/// The code blocks of `docs/tape.md`, run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/tape.md")]
pub struct TapeGuide;
