//! The primitives, each declared once: its value and its partial derivatives.
//!
//! Input: the operands as any [`Scalar`] `R`. Output: the result in `R` and
//! one [`Partial`] per operand, also in `R`. [`Dual`](crate::Dual) calls these
//! rules with `R` its component type (so a `Dual<Dual<f64>>` evaluates them
//! on `Dual<f64>`, which evaluates them on `f64`), and the tape calls them
//! with `R = f64` and stores the partials. Adding a primitive is one row in
//! [`unary`] or [`binary`] plus the methods that name it.
//!
//! The rules agree with `gradlift_lang::Prim::partials`: non-smooth
//! primitives differentiate as the branch taken, a tie following the first
//! argument; `sign` has derivative 0; `∂₂pow(0, b) = 0`.

use crate::real::Scalar;

/// A primitive of one operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unary {
    Neg,
    Sin,
    Cos,
    Tan,
    Exp,
    Log,
    Sqrt,
    Tanh,
    Abs,
    Sign,
}

/// A primitive of two operands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Binary {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Min,
    Max,
}

/// A partial derivative. The constant cases are structural: `Zero` drops the
/// term (the operand does not influence the result), `One` and `MinusOne`
/// pass the tangent or adjoint through without a multiplication.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Partial<R> {
    Zero,
    One,
    MinusOne,
    Of(R),
}

impl<R: Scalar> Partial<R> {
    /// `∂ · tangent`, or `None` when the term vanishes: a structural zero, or
    /// a zero tangent (skipped, so an infinite `∂` does not make NaN).
    #[inline]
    pub(crate) fn times(self, tangent: R) -> Option<R> {
        match self {
            Partial::Zero => None,
            Partial::One => Some(tangent),
            Partial::MinusOne => Some(-tangent),
            Partial::Of(partial) => {
                if tangent.is_zero() {
                    None
                } else {
                    Some(partial * tangent)
                }
            }
        }
    }
}

impl Partial<f64> {
    /// The partial as a number, or `None` for a structural zero.
    #[inline]
    pub(crate) fn number(self) -> Option<f64> {
        match self {
            Partial::Zero => None,
            Partial::One => Some(1.0),
            Partial::MinusOne => Some(-1.0),
            Partial::Of(partial) => Some(partial),
        }
    }
}

/// `op(a)` and `∂op/∂a`.
#[inline]
pub(crate) fn unary<R: Scalar>(op: Unary, a: R) -> (R, Partial<R>) {
    use Partial::*;
    match op {
        Unary::Neg => (-a, MinusOne),
        Unary::Sin => (a.sin(), Of(a.cos())),
        Unary::Cos => (a.cos(), Of(-a.sin())),
        Unary::Tan => {
            let result = a.tan();
            (result, Of(result * result + 1.0))
        }
        Unary::Exp => {
            let result = a.exp();
            (result, Of(result))
        }
        Unary::Log => (a.log(), Of(R::from_f64(1.0) / a)),
        Unary::Sqrt => {
            let result = a.sqrt();
            (result, Of(R::from_f64(0.5) / result))
        }
        Unary::Tanh => {
            let result = a.tanh();
            (result, Of(R::from_f64(1.0) - result * result))
        }
        Unary::Abs => (a.abs(), if a < 0.0 { MinusOne } else { One }),
        Unary::Sign => (a.sign(), Zero),
    }
}

/// `op(a, b)`, `∂op/∂a` and `∂op/∂b`.
#[inline]
pub(crate) fn binary<R: Scalar>(op: Binary, a: R, b: R) -> (R, [Partial<R>; 2]) {
    use Partial::*;
    match op {
        Binary::Add => (a + b, [One, One]),
        Binary::Sub => (a - b, [One, MinusOne]),
        Binary::Mul => (a * b, [Of(b), Of(a)]),
        Binary::Div => {
            let result = a / b;
            (result, [Of(R::from_f64(1.0) / b), Of(-(result / b))])
        }
        Binary::Pow => {
            let result = a.pow(b);
            let base = Of(b * a.pow(b - 1.0));
            let exponent = if a == 0.0 { Zero } else { Of(result * a.log()) };
            (result, [base, exponent])
        }
        Binary::Min => {
            if b < a {
                (b, [Zero, One])
            } else {
                (a, [One, Zero])
            }
        }
        Binary::Max => {
            if b > a {
                (b, [Zero, One])
            } else {
                (a, [One, Zero])
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn number(partial: Partial<f64>) -> f64 {
        partial.number().unwrap_or(0.0)
    }

    #[test]
    fn unary_partials_match_central_differences() {
        let ops = [
            Unary::Neg,
            Unary::Sin,
            Unary::Cos,
            Unary::Tan,
            Unary::Exp,
            Unary::Log,
            Unary::Sqrt,
            Unary::Tanh,
            Unary::Abs,
            Unary::Sign,
        ];
        let h = 1e-6;
        for op in ops {
            for a in [0.3, 0.8, 1.7] {
                let (_, partial) = unary(op, a);
                let fd = (unary(op, a + h).0 - unary(op, a - h).0) / (2.0 * h);
                assert!((number(partial) - fd).abs() < 1e-7, "{op:?} at {a}");
            }
        }
    }

    #[test]
    fn binary_partials_match_central_differences() {
        let ops = [
            Binary::Add,
            Binary::Sub,
            Binary::Mul,
            Binary::Div,
            Binary::Pow,
            Binary::Min,
            Binary::Max,
        ];
        let h = 1e-6;
        for op in ops {
            for (a, b) in [(0.3, 1.9), (1.7, 0.6), (2.5, -0.4)] {
                let (_, [da, db]) = binary(op, a, b);
                let fd_a = (binary(op, a + h, b).0 - binary(op, a - h, b).0) / (2.0 * h);
                let fd_b = (binary(op, a, b + h).0 - binary(op, a, b - h).0) / (2.0 * h);
                assert!((number(da) - fd_a).abs() < 1e-7, "∂₁{op:?} at {a}, {b}");
                assert!((number(db) - fd_b).abs() < 1e-7, "∂₂{op:?} at {a}, {b}");
            }
        }
    }

    #[test]
    fn non_smooth_rules_follow_the_first_argument_at_ties() {
        assert!(matches!(unary(Unary::Abs, 0.0).1, Partial::One));
        assert!(matches!(unary(Unary::Abs, -0.0).1, Partial::One));
        assert!(matches!(
            binary(Binary::Min, 1.0, 1.0).1,
            [Partial::One, Partial::Zero]
        ));
        assert!(matches!(
            binary(Binary::Max, 1.0, 1.0).1,
            [Partial::One, Partial::Zero]
        ));
        assert!(matches!(binary(Binary::Pow, 0.0, 2.0).1[1], Partial::Zero));
    }

    #[test]
    fn a_zero_tangent_is_skipped_even_against_an_infinite_partial() {
        let (_, partial) = unary(Unary::Sqrt, 0.0);
        assert_eq!(partial.times(0.0), None);
        assert_eq!(partial.times(1.0), Some(f64::INFINITY));
    }
}
