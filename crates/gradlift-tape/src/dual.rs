//! Dual numbers: forward mode at run time.
//!
//! A [`Dual<T>`] carries a value and a tangent, the derivative of the value
//! along one input direction (the `∂post` semantics of the forward-mode
//! blog post: every variable `v` travels with `v̇`). Every operation computes
//! both with the crate's rule table (`src/prim.rs`). The component type `T`
//! is any [`Scalar`], including another dual number, so `Dual<Dual<f64>>`
//! carries two independent perturbations and gives second derivatives:
//!
//! ```
//! use gradlift_tape::Dual;
//!
//! // The chapter's cube: x³ at 2, with both perturbations seeded.
//! let x = Dual::variable(Dual::variable(2.0));
//! let cube = x * x * x;
//! assert_eq!(cube.value.value, 8.0);
//! assert_eq!(cube.value.tangent, 12.0); // 3x²
//! assert_eq!(cube.tangent.tangent, 12.0); // 6x
//! ```
//!
//! # Perturbation confusion
//!
//! A derivative taken inside a function that is itself being differentiated
//! needs a perturbation of its own. Siskind and Pearlmutter (2005) show the
//! classic failure with
//!
//! ```text
//! d/dx (x · d/dy (x + y))   at any x, y  =  d/dx (x · 1)  =  1.
//! ```
//!
//! Computed with a single dual type for both derivatives, the inner
//! derivative sees the outer perturbation of `x` as if it were its own: the
//! tangent of `x + y` is `ẋ + ẏ = 1 + 1`, the inner "derivative" is 2, and
//! the answer comes out as 2. Dynamically typed implementations fix this by
//! tagging each perturbation. Here, as in the chapter's dual family, each
//! nesting level is a distinct type: the outer derivative runs on
//! `Dual<f64>`, the inner one on `Dual<Dual<f64>>`, and `x` must be lifted
//! into the inner level explicitly with [`Dual::constant`] (zero inner
//! tangent — which is what `x` is with respect to `y`). Writing `x + y` with
//! `x: Dual<f64>` and `y: Dual<Dual<f64>>` does not compile:
//!
//! ```compile_fail,E0277
//! use gradlift_tape::Dual;
//! let x = Dual::variable(3.0);
//! let y = Dual::variable(Dual::constant(5.0));
//! let mixed = x + y; // error: no `Dual<f64> + Dual<Dual<f64>>`
//! ```
//!
//! ```
//! use gradlift_tape::{derivative, Dual};
//!
//! let (x0, y0) = (3.0, 5.0);
//!
//! // One type per level: right.
//! let right = derivative(
//!     |x: Dual<f64>| {
//!         let inner = derivative(|y: Dual<Dual<f64>>| Dual::constant(x) + y, Dual::constant(y0));
//!         x * inner
//!     },
//!     x0,
//! );
//! assert_eq!(right, 1.0);
//!
//! // One type reused for both levels: `x + y` type-checks, the inner
//! // derivative counts x's perturbation as y's and returns 2.
//! let confused = derivative(
//!     |x: Dual<f64>| {
//!         let inner = derivative(|y: Dual<f64>| x + y, y0);
//!         x * inner
//!     },
//!     x0,
//! );
//! assert_eq!(confused, 2.0);
//! ```
//!
//! The guarantee is weaker than tagging: the types keep the levels apart
//! only when each derivative is given its own level. Nothing stops code from
//! seeding a new perturbation on a type that already carries one, as the
//! second example does: there the inner `derivative` runs on `Dual<f64>`,
//! the very type of `x`.

use crate::prim;
use crate::real::{Real, Scalar};
use gradlift_lang::Prim;
use std::cmp::Ordering;

/// A dual number `value + tangent·ε` with `ε² = 0`.
///
/// Comparisons (`==`, `<`, also against `f64`) look at the value only.
#[derive(Clone, Copy, Debug)]
pub struct Dual<T = f64> {
    /// The primal value.
    pub value: T,
    /// The derivative of `value` along the seeded direction.
    pub tangent: T,
}

impl<T: Scalar> Dual<T> {
    /// A dual number with the given value and tangent.
    #[inline]
    pub fn new(value: T, tangent: T) -> Self {
        Dual { value, tangent }
    }

    /// The input being differentiated with respect to: tangent 1.
    #[inline]
    pub fn variable(value: T) -> Self {
        Dual::new(value, T::from_f64(1.0))
    }

    /// A quantity that does not depend on the seeded input: tangent 0.
    #[inline]
    pub fn constant(value: T) -> Self {
        Dual::new(value, T::from_f64(0.0))
    }

    /// `p(self)` or `p(self, other)`, with the tangent of the result: the
    /// partials of the rule times the operands' tangents (a zero tangent
    /// contributes nothing, even against an infinite partial).
    #[inline]
    pub(crate) fn apply_prim(self, p: Prim, other: Self) -> Self {
        let (value, [da, db]) = prim::rule(p, self.value, other.value);
        let second = if p.info().arity == 2 {
            db.times(other.tangent)
        } else {
            None
        };
        let tangent = match (da.times(self.tangent), second) {
            (Some(ta), Some(tb)) => ta + tb,
            (Some(t), None) | (None, Some(t)) => t,
            (None, None) => T::from_f64(0.0),
        };
        Dual { value, tangent }
    }
}

/// `f'(x)`: evaluates `f` at `x` seeded with tangent 1 and returns the
/// tangent of the result.
///
/// `T` is the level below the one `f` runs on, so a derivative taken inside
/// `f` of a `Dual<f64>` function uses `derivative::<Dual<f64>>` and runs on
/// `Dual<Dual<f64>>` (see the [module docs](crate::dual) on perturbation
/// confusion).
///
/// ```
/// use gradlift_tape::derivative;
/// let slope = derivative(|x| x * x * x - 2.0 * x, 2.0);
/// assert_eq!(slope, 10.0);
/// ```
pub fn derivative<T: Scalar>(f: impl FnOnce(Dual<T>) -> Dual<T>, x: T) -> T {
    f(Dual::variable(x)).tangent
}

/// `f''(x)`, by nesting: `f` runs on `Dual<Dual<T>>` with both
/// perturbations seeded.
///
/// ```
/// use gradlift_tape::second_derivative;
/// assert_eq!(second_derivative(|x| x * x * x, 2.0), 12.0);
/// ```
pub fn second_derivative<T: Scalar>(f: impl FnOnce(Dual<Dual<T>>) -> Dual<Dual<T>>, x: T) -> T {
    f(Dual::variable(Dual::variable(x))).tangent.tangent
}

impl<T: Scalar> Real for Dual<T> {
    #[inline]
    fn primal(self) -> f64 {
        self.value.primal()
    }
    #[inline]
    fn lift(self, c: f64) -> Self {
        Self::from_f64(c)
    }
    #[inline]
    fn apply(self, p: Prim, other: Self) -> Self {
        self.apply_prim(p, other)
    }
}

impl<T: Scalar> Scalar for Dual<T> {
    #[inline]
    fn from_f64(c: f64) -> Self {
        Dual::constant(T::from_f64(c))
    }
    #[inline]
    fn is_zero(self) -> bool {
        self.value.is_zero() && self.tangent.is_zero()
    }
}

/// An `f64` as a constant of any nesting level.
impl<T: Scalar> From<f64> for Dual<T> {
    fn from(c: f64) -> Self {
        Dual::from_f64(c)
    }
}

impl<T: Scalar> PartialEq for Dual<T> {
    fn eq(&self, other: &Self) -> bool {
        self.value == other.value
    }
}

impl<T: Scalar> PartialOrd for Dual<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        self.value.partial_cmp(&other.value)
    }
}

impl<T: Scalar> PartialEq<f64> for Dual<T> {
    fn eq(&self, other: &f64) -> bool {
        self.primal() == *other
    }
}

impl<T: Scalar> PartialOrd<f64> for Dual<T> {
    fn partial_cmp(&self, other: &f64) -> Option<Ordering> {
        self.primal().partial_cmp(other)
    }
}

impl<T: Scalar> PartialEq<Dual<T>> for f64 {
    fn eq(&self, other: &Dual<T>) -> bool {
        *self == other.primal()
    }
}

impl<T: Scalar> PartialOrd<Dual<T>> for f64 {
    fn partial_cmp(&self, other: &Dual<T>) -> Option<Ordering> {
        self.partial_cmp(&other.primal())
    }
}
