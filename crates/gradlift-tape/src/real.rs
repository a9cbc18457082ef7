//! The number interface shared by `f64`, [`Dual`](crate::Dual) and
//! [`Var`](crate::Var).
//!
//! [`Real`] is what a model written once needs: arithmetic among its own
//! kind and with `f64` on the right, the compound assignments, comparisons by
//! primal value, and the primitives of DESIGN §1 (`sin cos tan exp log sqrt
//! tanh abs sign pow min max`). `f64`, every `Dual<T>` and every tape `Var`
//! implement it, so one generic function runs plainly, in forward mode and in
//! reverse mode:
//!
//! ```
//! use gradlift_tape::{Dual, Real, Tape};
//!
//! fn f<R: Real>(x: R) -> R {
//!     x.sin() * x + 1.0
//! }
//!
//! let plain = f(2.0);
//! let forward = f(Dual::variable(2.0));
//! let tape = Tape::new();
//! let x = tape.var(2.0);
//! let y = f(x);
//! tape.backward(y);
//! let slope = 2.0f64.cos() * 2.0 + 2.0f64.sin();
//! assert_eq!(forward.value, plain);
//! assert!((forward.tangent - slope).abs() < 1e-15);
//! assert!((x.adjoint() - slope).abs() < 1e-15);
//! ```
//!
//! A constant on the left (`2.0 * x`) works on every concrete type but is
//! not part of the generic bound (Rust cannot state it as a supertrait);
//! generic code writes `x * 2.0` or [`Real::lift`]s the constant.
//!
//! [`Scalar`] adds what a tangent needs and a tape variable cannot offer: a
//! constant made from nothing ([`Scalar::from_f64`], the lifting that lets
//! `f64 op Dual<Dual<f64>>` work at every nesting level) and a zero test.
//! `f64` and `Dual<T: Scalar>` implement it, so dual numbers nest.
//!
//! On `f64` some of these names are also inherent methods with another
//! meaning (`f64::log` takes a base, `f64::min` ignores NaN); generic code
//! gets the trait's, and concrete `f64` code can call `Real::log(x)`.

use std::fmt::Debug;
use std::ops::{Add, AddAssign, Div, DivAssign, Mul, MulAssign, Neg, Sub, SubAssign};

/// A real number with the primitives of the gradlift language.
///
/// Comparisons (`<`, `==`, also against `f64`) look at the primal value
/// only, so control flow on a differentiated value takes the branch the
/// plain computation would take. Non-smooth primitives differentiate as the
/// branch taken, a tie following the first argument: `abs'(0) = 1`,
/// `∂₁min(a, a) = 1`, `∂₂min(a, a) = 0`; `sign` has derivative 0.
pub trait Real:
    Copy
    + Debug
    + PartialEq
    + PartialOrd
    + PartialEq<f64>
    + PartialOrd<f64>
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
    + Add<f64, Output = Self>
    + Sub<f64, Output = Self>
    + Mul<f64, Output = Self>
    + Div<f64, Output = Self>
    + AddAssign
    + SubAssign
    + MulAssign
    + DivAssign
    + AddAssign<f64>
    + SubAssign<f64>
    + MulAssign<f64>
    + DivAssign<f64>
{
    /// The plain `f64` value, with every derivative part dropped.
    fn primal(self) -> f64;
    /// The constant `c` in the same context as `self`: a plain number, a
    /// dual number with zero tangent at the same nesting level, or a new
    /// variable on the same tape.
    fn lift(self, c: f64) -> Self;
    /// Sine.
    fn sin(self) -> Self;
    /// Cosine.
    fn cos(self) -> Self;
    /// Tangent.
    fn tan(self) -> Self;
    /// `e` to the power `self`.
    fn exp(self) -> Self;
    /// Natural logarithm.
    fn log(self) -> Self;
    /// Square root.
    fn sqrt(self) -> Self;
    /// Hyperbolic tangent.
    fn tanh(self) -> Self;
    /// Absolute value; its derivative at 0 is 1.
    fn abs(self) -> Self;
    /// -1, 0 or 1 (NaN stays NaN); its derivative is 0.
    fn sign(self) -> Self;
    /// `self` to the power `exponent`, as C's `pow`. The derivative in the
    /// exponent is 0 at base 0 (as in JAX) rather than `0 · log 0 = NaN`.
    fn pow(self, exponent: Self) -> Self;
    /// `if other < self then other else self`: a tie returns `self`.
    fn min(self, other: Self) -> Self;
    /// `if other > self then other else self`: a tie returns `self`.
    fn max(self, other: Self) -> Self;
}

/// A [`Real`] that can be a tangent: constants exist without context, and
/// zero can be recognized. Implemented by `f64` and by `Dual<T>` for every
/// `T: Scalar`, which is what makes dual numbers nest.
pub trait Scalar: Real {
    /// The constant `c`: `c` itself for `f64`, `c` with zero tangent (at
    /// every inner level too) for a dual number.
    fn from_f64(c: f64) -> Self;
    /// Whether every component is zero. A zero tangent is skipped rather
    /// than multiplied by a partial derivative, so an infinite partial (such
    /// as `sqrt` at 0) does not turn a constant's zero tangent into NaN.
    fn is_zero(self) -> bool;
}

impl Real for f64 {
    #[inline]
    fn primal(self) -> f64 {
        self
    }
    #[inline]
    fn lift(self, c: f64) -> Self {
        c
    }
    #[inline]
    fn sin(self) -> Self {
        f64::sin(self)
    }
    #[inline]
    fn cos(self) -> Self {
        f64::cos(self)
    }
    #[inline]
    fn tan(self) -> Self {
        f64::tan(self)
    }
    #[inline]
    fn exp(self) -> Self {
        f64::exp(self)
    }
    #[inline]
    fn log(self) -> Self {
        f64::ln(self)
    }
    #[inline]
    fn sqrt(self) -> Self {
        f64::sqrt(self)
    }
    #[inline]
    fn tanh(self) -> Self {
        f64::tanh(self)
    }
    #[inline]
    fn abs(self) -> Self {
        f64::abs(self)
    }
    #[inline]
    fn sign(self) -> Self {
        if self > 0.0 {
            1.0
        } else if self < 0.0 {
            -1.0
        } else {
            // 0 stays 0 (keeping its sign), NaN stays NaN.
            self * 0.0
        }
    }
    #[inline]
    fn pow(self, exponent: Self) -> Self {
        f64::powf(self, exponent)
    }
    #[inline]
    fn min(self, other: Self) -> Self {
        if other < self {
            other
        } else {
            self
        }
    }
    #[inline]
    fn max(self, other: Self) -> Self {
        if other > self {
            other
        } else {
            self
        }
    }
}

impl Scalar for f64 {
    #[inline]
    fn from_f64(c: f64) -> Self {
        c
    }
    #[inline]
    fn is_zero(self) -> bool {
        self == 0.0
    }
}

#[cfg(test)]
mod tests {
    use super::Real;

    #[test]
    fn ties_follow_the_first_argument() {
        assert_eq!(Real::min(0.0, -0.0).to_bits(), 0.0f64.to_bits());
        assert_eq!(Real::max(-0.0, 0.0).to_bits(), (-0.0f64).to_bits());
        assert_eq!(Real::min(2.0, 1.0), 1.0);
        assert_eq!(Real::max(2.0, 3.0), 3.0);
    }

    #[test]
    fn sign_is_three_valued() {
        assert_eq!(Real::sign(-3.0), -1.0);
        assert_eq!(Real::sign(0.5), 1.0);
        assert_eq!(Real::sign(0.0), 0.0);
        assert!(Real::sign(f64::NAN).is_nan());
    }
}
