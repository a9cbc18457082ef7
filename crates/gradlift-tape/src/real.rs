//! The number interface shared by `f64`, [`Dual`](crate::Dual) and
//! [`Var`](crate::Var).
//!
//! [`Real`] is what a model written once needs: arithmetic among its own
//! kind and with `f64` on the right, the compound assignments, comparisons by
//! primal value, and the real primitives of the language's table
//! ([`gradlift_lang::Prim`]: `sin cos tan exp log sqrt tanh abs sign pow min
//! max`, …), each a method that [`Real::apply`]s it. `f64`, every `Dual<T>` and every tape `Var`
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

use gradlift_lang::Prim;
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
    /// The real primitive `p` of the language applied to `self`, or to
    /// `self` and `other` for a primitive of two arguments (`other` is
    /// ignored for one of one argument). The named methods below call it.
    fn apply(self, p: Prim, other: Self) -> Self;
    /// Sine.
    fn sin(self) -> Self {
        self.apply(Prim::Sin, self)
    }
    /// Cosine.
    fn cos(self) -> Self {
        self.apply(Prim::Cos, self)
    }
    /// Tangent.
    fn tan(self) -> Self {
        self.apply(Prim::Tan, self)
    }
    /// `e` to the power `self` (gradlift's `exp`, as the language computes it).
    fn exp(self) -> Self {
        self.apply(Prim::Exp, self)
    }
    /// Natural logarithm.
    fn log(self) -> Self {
        self.apply(Prim::Log, self)
    }
    /// `log(1 + self)`, exact near 0.
    fn log1p(self) -> Self {
        self.apply(Prim::Log1p, self)
    }
    /// Square root.
    fn sqrt(self) -> Self {
        self.apply(Prim::Sqrt, self)
    }
    /// Hyperbolic tangent (gradlift's, as the language computes it).
    fn tanh(self) -> Self {
        self.apply(Prim::Tanh, self)
    }
    /// Absolute value; its derivative at 0 is 1.
    fn abs(self) -> Self {
        self.apply(Prim::Abs, self)
    }
    /// -1, 0 or 1 (NaN stays NaN); its derivative is 0.
    fn sign(self) -> Self {
        self.apply(Prim::Sign, self)
    }
    /// `exp(self) - 1`, exact near 0.
    fn expm1(self) -> Self {
        self.apply(Prim::Expm1, self)
    }
    /// Arctangent, in (-π/2, π/2).
    fn atan(self) -> Self {
        self.apply(Prim::Atan, self)
    }
    /// The angle of the point (`other`, `self`): `atan2(y, x)` with `self` as y.
    fn atan2(self, other: Self) -> Self {
        self.apply(Prim::Atan2, other)
    }
    /// The error function.
    fn erf(self) -> Self {
        self.apply(Prim::Erf, self)
    }
    /// log |Γ(self)|.
    fn lgamma(self) -> Self {
        self.apply(Prim::Lgamma, self)
    }
    /// ψ(self), the derivative of `lgamma`.
    fn digamma(self) -> Self {
        self.apply(Prim::Digamma, self)
    }
    /// ψ⁽ⁿ⁾(x) with `self` the order n (a whole number, not differentiated)
    /// and `x` the argument.
    fn polygamma(self, x: Self) -> Self {
        self.apply(Prim::Polygamma, x)
    }
    /// The largest whole number not above `self`; its derivative is 0.
    fn floor(self) -> Self {
        self.apply(Prim::Floor, self)
    }
    /// The smallest whole number not below `self`; its derivative is 0.
    fn ceil(self) -> Self {
        self.apply(Prim::Ceil, self)
    }
    /// The nearest whole number, halves away from zero; its derivative is 0.
    fn round(self) -> Self {
        self.apply(Prim::Round, self)
    }
    /// `1 / (1 + exp(-self))`, computed without overflow.
    fn sigmoid(self) -> Self {
        self.apply(Prim::Sigmoid, self)
    }
    /// `log(1 + exp(self))`, computed without overflow.
    fn softplus(self) -> Self {
        self.apply(Prim::Softplus, self)
    }
    /// `self` to the power `exponent`, as C's `pow`. The derivative in the
    /// exponent is 0 at base 0 (as in JAX) rather than `0 · log 0 = NaN`.
    fn pow(self, exponent: Self) -> Self {
        self.apply(Prim::Pow, exponent)
    }
    /// `if other < self then other else self`: a tie returns `self`.
    fn min(self, other: Self) -> Self {
        self.apply(Prim::Min, other)
    }
    /// `if other > self then other else self`: a tie returns `self`.
    fn max(self, other: Self) -> Self {
        self.apply(Prim::Max, other)
    }
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
    /// The language's evaluation ([`Prim::eval_real`]), so a model run on
    /// `f64` gives the interpreter's and the compiled code's bits.
    #[inline]
    fn apply(self, p: Prim, other: Self) -> Self {
        match p.info().arity {
            1 => p.eval_real(&[self]),
            _ => p.eval_real(&[self, other]),
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
