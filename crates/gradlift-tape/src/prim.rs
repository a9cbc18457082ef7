//! The generic rules of the primitives: a value and its partial
//! derivatives for operands of any [`Scalar`] type.
//!
//! The primitives are the language's ([`gradlift_lang::Prim`], whose table
//! gives their evaluation on `f64` and their partial derivatives as terms);
//! these rules are that table's column for the tape. [`rule`] matches on
//! every primitive without a wildcard, so a primitive added to the table
//! without its rule here does not compile, and a test checks every rule
//! against the table's evaluation and partial derivatives.
//!
//! Input: the operands as any [`Scalar`] `R`. Output: the result in `R` and
//! one [`Partial`] per operand, also in `R`. [`Dual`](crate::Dual) calls
//! these rules with `R` its component type (so a `Dual<Dual<f64>>` evaluates
//! them on `Dual<f64>`, which evaluates them on `f64`), and the tape calls
//! them with `R = f64` and stores the partials.
//!
//! The rules agree with `gradlift_lang::Prim::partials`: non-smooth
//! primitives differentiate as the branch taken, a tie following the first
//! argument; `sign` has derivative 0; `∂₂pow(0, b) = 0`.

use crate::real::Scalar;
use gradlift_lang::Prim;

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

/// `p(a)` or `p(a, b)` and the partial derivatives (a primitive of one
/// argument ignores `b` and its second partial is `Zero`).
///
/// # Panics
///
/// On a comparison or a logical connective, which are not real functions.
#[inline]
pub(crate) fn rule<R: Scalar>(p: Prim, a: R, b: R) -> (R, [Partial<R>; 2]) {
    use Partial::*;
    let one = |x: R, d: Partial<R>| (x, [d, Zero]);
    match p {
        Prim::Add => (a + b, [One, One]),
        Prim::Sub => (a - b, [One, MinusOne]),
        Prim::Mul => (a * b, [Of(b), Of(a)]),
        Prim::Div => {
            let result = a / b;
            (result, [Of(R::from_f64(1.0) / b), Of(-(result / b))])
        }
        Prim::Neg => one(-a, MinusOne),
        Prim::Sin => one(a.sin(), Of(a.cos())),
        Prim::Cos => one(a.cos(), Of(-a.sin())),
        Prim::Tan => {
            let result = a.tan();
            one(result, Of(result * result + 1.0))
        }
        Prim::Exp => {
            let result = a.exp();
            one(result, Of(result))
        }
        Prim::Log => one(a.log(), Of(R::from_f64(1.0) / a)),
        Prim::Log1p => one(a.log1p(), Of(R::from_f64(1.0) / (a + 1.0))),
        Prim::Sqrt => {
            let result = a.sqrt();
            one(result, Of(R::from_f64(0.5) / result))
        }
        Prim::Tanh => {
            let result = a.tanh();
            one(result, Of(R::from_f64(1.0) - result * result))
        }
        Prim::Abs => one(a.abs(), if a < 0.0 { MinusOne } else { One }),
        Prim::Sign => one(a.sign(), Zero),
        Prim::Pow => {
            let result = a.pow(b);
            let base = Of(b * a.pow(b - 1.0));
            let exponent = if a == 0.0 { Zero } else { Of(result * a.log()) };
            (result, [base, exponent])
        }
        Prim::Min => {
            if b < a {
                (b, [Zero, One])
            } else {
                (a, [One, Zero])
            }
        }
        Prim::Max => {
            if b > a {
                (b, [Zero, One])
            } else {
                (a, [One, Zero])
            }
        }
        Prim::Expm1 => {
            let result = a.expm1();
            one(result, Of(result + 1.0))
        }
        Prim::Atan => one(a.atan(), Of(R::from_f64(1.0) / (a * a + 1.0))),
        Prim::Atan2 => {
            let r2 = b * b + a * a;
            (a.atan2(b), [Of(b / r2), Of(-(a / r2))])
        }
        Prim::Erf => one(
            a.erf(),
            Of((-(a * a)).exp() * std::f64::consts::FRAC_2_SQRT_PI),
        ),
        Prim::Lgamma => one(a.lgamma(), Of(a.digamma())),
        Prim::Digamma => one(a.digamma(), Of(R::from_f64(1.0).polygamma(a))),
        Prim::Polygamma => (a.polygamma(b), [Zero, Of((a + 1.0).polygamma(b))]),
        Prim::Floor => one(a.floor(), Zero),
        Prim::Ceil => one(a.ceil(), Zero),
        Prim::Round => one(a.round(), Zero),
        Prim::Sigmoid => {
            let result = a.sigmoid();
            one(result, Of(result * (R::from_f64(1.0) - result)))
        }
        Prim::Softplus => one(a.softplus(), Of(a.sigmoid())),
        Prim::Lt
        | Prim::Le
        | Prim::Gt
        | Prim::Ge
        | Prim::Eq
        | Prim::Ne
        | Prim::And
        | Prim::Or
        | Prim::Not => panic!("`{p}` is not a real function"),
        // Integers are not on the tape: they are not differentiated.
        Prim::IAdd
        | Prim::ISub
        | Prim::IMul
        | Prim::IDiv
        | Prim::IMod
        | Prim::INeg
        | Prim::IMin
        | Prim::IMax
        | Prim::ILt
        | Prim::ILe
        | Prim::IGt
        | Prim::IGe
        | Prim::IEq
        | Prim::INe
        | Prim::ToReal
        | Prim::ToInt => panic!("`{p}` is an operation on integers, not a real function"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gradlift_lang::prim::{Domain, PrimKind};

    fn number(partial: Partial<f64>) -> f64 {
        partial.number().unwrap_or(0.0)
    }

    /// A point inside `domain`.
    fn point(domain: Domain, k: usize) -> f64 {
        let x = [0.3, 0.8, 1.7, -0.6][k % 4];
        match domain {
            Domain::Any => x,
            Domain::Positive => x.abs() + 0.2,
            Domain::Bounded => x.sin(),
            Domain::Order => (k % 3) as f64,
        }
    }

    #[test]
    fn every_rule_is_the_tables_value_and_partials() {
        let h = 1e-6;
        for p in Prim::ALL {
            if p.info().kind() != PrimKind::Real {
                continue;
            }
            let domain = p.domain();
            for k in 0..4 {
                let xs: Vec<f64> = domain
                    .iter()
                    .enumerate()
                    .map(|(i, d)| point(*d, k + 3 * i))
                    .collect();
                let (a, b) = (xs[0], xs.get(1).copied().unwrap_or(0.0));
                let (value, partials) = rule(p, a, b);
                assert_eq!(
                    value.to_bits(),
                    p.eval_real(&xs).to_bits(),
                    "{p:?} at {xs:?}"
                );
                for (i, partial) in partials.iter().take(xs.len()).enumerate() {
                    if domain[i] == Domain::Order {
                        // Not differentiated: an order is a whole number.
                        assert!(matches!(partial, Partial::Zero), "{p:?}");
                        continue;
                    }
                    let at = |dx: f64| {
                        let mut ys = xs.clone();
                        ys[i] += dx;
                        p.eval_real(&ys)
                    };
                    let fd = (at(h) - at(-h)) / (2.0 * h);
                    assert!(
                        (number(*partial) - fd).abs() < 1e-6 * (1.0 + fd.abs()),
                        "∂{}{p:?} at {xs:?}: {} against {fd}",
                        i + 1,
                        number(*partial)
                    );
                }
            }
        }
    }

    #[test]
    fn non_smooth_rules_follow_the_first_argument_at_ties() {
        assert!(matches!(rule(Prim::Abs, 0.0, 0.0).1[0], Partial::One));
        assert!(matches!(rule(Prim::Abs, -0.0, 0.0).1[0], Partial::One));
        assert!(matches!(
            rule(Prim::Min, 1.0, 1.0).1,
            [Partial::One, Partial::Zero]
        ));
        assert!(matches!(
            rule(Prim::Max, 1.0, 1.0).1,
            [Partial::One, Partial::Zero]
        ));
        assert!(matches!(rule(Prim::Pow, 0.0, 2.0).1[1], Partial::Zero));
    }

    #[test]
    fn a_zero_tangent_is_skipped_even_against_an_infinite_partial() {
        let (_, [partial, _]) = rule(Prim::Sqrt, 0.0, 0.0);
        assert_eq!(partial.times(0.0), None);
        assert_eq!(partial.times(1.0), Some(f64::INFINITY));
    }
}
