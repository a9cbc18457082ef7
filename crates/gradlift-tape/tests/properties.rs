//! Random compositions of the primitives: dual numbers, the tape and central
//! finite differences agree on the gradient, and nested dual numbers agree
//! with finite differences of the first derivative.
//!
//! `log`, `sqrt` and division act on `e² + 1/2`, so every composition stays
//! in their domain. Finite differences are only compared where they are
//! meaningful: the evaluation records every branch the non-smooth
//! primitives take (and the side of each pole of `tan`), and a case is
//! discarded unless every point of the difference stencil takes the same
//! branches, and the values stay moderate.

use gradlift_tape::{Dual, Real, Tape};
use proptest::prelude::*;
use std::ops::{Add, Div, Mul, Sub};

#[derive(Clone, Copy, Debug)]
enum UnaryOp {
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

#[derive(Clone, Copy, Debug)]
enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Min,
    Max,
}

#[derive(Clone, Debug)]
enum Expr {
    X,
    Y,
    Const(f64),
    Unary(UnaryOp, Box<Expr>),
    Binary(BinaryOp, Box<Expr>, Box<Expr>),
    /// `c op e`, a constant on the left.
    ConstLeft(BinaryOp, f64, Box<Expr>),
    /// `e op c`, a constant on the right.
    ConstRight(BinaryOp, Box<Expr>, f64),
}

fn expr() -> impl Strategy<Value = Expr> {
    let leaf = prop_oneof![
        Just(Expr::X),
        Just(Expr::Y),
        (-2.0..2.0f64).prop_map(Expr::Const),
    ];
    let unary = prop_oneof![
        Just(UnaryOp::Neg),
        Just(UnaryOp::Sin),
        Just(UnaryOp::Cos),
        Just(UnaryOp::Tan),
        Just(UnaryOp::Exp),
        Just(UnaryOp::Log),
        Just(UnaryOp::Sqrt),
        Just(UnaryOp::Tanh),
        Just(UnaryOp::Abs),
        Just(UnaryOp::Sign),
    ];
    let binary = prop_oneof![
        Just(BinaryOp::Add),
        Just(BinaryOp::Sub),
        Just(BinaryOp::Mul),
        Just(BinaryOp::Div),
        Just(BinaryOp::Pow),
        Just(BinaryOp::Min),
        Just(BinaryOp::Max),
    ];
    leaf.prop_recursive(5, 32, 2, move |inner| {
        prop_oneof![
            (unary.clone(), inner.clone()).prop_map(|(op, e)| Expr::Unary(op, Box::new(e))),
            (binary.clone(), inner.clone(), inner.clone()).prop_map(|(op, a, b)| Expr::Binary(
                op,
                Box::new(a),
                Box::new(b)
            )),
            (binary.clone(), -2.0..2.0f64, inner.clone()).prop_map(|(op, c, e)| Expr::ConstLeft(
                op,
                c,
                Box::new(e)
            )),
            (binary.clone(), inner, -2.0..2.0f64).prop_map(|(op, e, c)| Expr::ConstRight(
                op,
                Box::new(e),
                c
            )),
        ]
    })
}

/// A number type the expressions can be evaluated on: [`Real`] plus
/// constants on the left.
trait Number: Real + Sized
where
    f64: Add<Self, Output = Self>
        + Sub<Self, Output = Self>
        + Mul<Self, Output = Self>
        + Div<Self, Output = Self>,
{
}

impl<R: Real> Number for R where
    f64: Add<R, Output = R> + Sub<R, Output = R> + Mul<R, Output = R> + Div<R, Output = R>
{
}

/// `e²+½`: the positive argument given to `log`, `sqrt`, division and the
/// base of `pow`.
fn positive<R: Real>(e: R) -> R {
    e * e + 0.5
}

fn binary<R: Real>(op: BinaryOp, a: R, b: R, trace: &mut Vec<bool>) -> R {
    match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / positive(b),
        BinaryOp::Pow => positive(a).pow(b),
        BinaryOp::Min => {
            trace.push(b < a);
            a.min(b)
        }
        BinaryOp::Max => {
            trace.push(b > a);
            a.max(b)
        }
    }
}

/// Evaluates `e`, pushing onto `trace` every branch decision of a
/// non-smooth primitive.
fn eval<R: Number>(e: &Expr, x: R, y: R, trace: &mut Vec<bool>) -> R
where
    f64: Add<R, Output = R> + Sub<R, Output = R> + Mul<R, Output = R> + Div<R, Output = R>,
{
    match e {
        Expr::X => x,
        Expr::Y => y,
        Expr::Const(c) => x.lift(*c),
        Expr::Unary(op, a) => {
            let a = eval(a, x, y, trace);
            match op {
                UnaryOp::Neg => -a,
                UnaryOp::Sin => a.sin(),
                UnaryOp::Cos => a.cos(),
                UnaryOp::Tan => {
                    trace.push(a.primal().cos() > 0.0);
                    a.tan()
                }
                UnaryOp::Exp => a.exp(),
                UnaryOp::Log => positive(a).log(),
                UnaryOp::Sqrt => positive(a).sqrt(),
                UnaryOp::Tanh => a.tanh(),
                UnaryOp::Abs => {
                    trace.push(a < 0.0);
                    a.abs()
                }
                UnaryOp::Sign => {
                    trace.push(a < 0.0);
                    trace.push(a > 0.0);
                    a.sign()
                }
            }
        }
        Expr::Binary(op, a, b) => {
            let a = eval(a, x, y, trace);
            let b = eval(b, x, y, trace);
            binary(*op, a, b, trace)
        }
        Expr::ConstLeft(op, c, b) => {
            let b = eval(b, x, y, trace);
            match op {
                BinaryOp::Add => *c + b,
                BinaryOp::Sub => *c - b,
                BinaryOp::Mul => *c * b,
                BinaryOp::Div => *c / positive(b),
                _ => binary(*op, x.lift(*c), b, trace),
            }
        }
        Expr::ConstRight(op, a, c) => {
            let a = eval(a, x, y, trace);
            match op {
                BinaryOp::Add => a + *c,
                BinaryOp::Sub => a - *c,
                BinaryOp::Mul => a * *c,
                BinaryOp::Div => a / positive(*c),
                _ => binary(*op, a, x.lift(*c), trace),
            }
        }
    }
}

/// The value and branch trace at a point.
fn plain(e: &Expr, x: f64, y: f64) -> (f64, Vec<bool>) {
    let mut trace = Vec::new();
    let value = eval(e, x, y, &mut trace);
    (value, trace)
}

const H: f64 = 1e-3;

/// A finite-difference derivative with an estimate of its own error.
struct Difference {
    estimate: f64,
    error: f64,
}

/// The fourth-order central difference of `f` at `t` with step `h`, or
/// `None` when a stencil point takes other branches than `t` or leaves
/// moderate values.
fn central_difference_with_step(
    f: &impl Fn(f64) -> (f64, Vec<bool>),
    t: f64,
    h: f64,
) -> Option<f64> {
    let (value, trace) = f(t);
    let stencil = [-2.0, -1.0, 1.0, 2.0].map(|k| f(t + k * h));
    let moderate = |v: f64| v.is_finite() && v.abs() <= 1e4;
    if !moderate(value) || stencil.iter().any(|(v, tr)| *tr != trace || !moderate(*v)) {
        return None;
    }
    let [m2, m1, p1, p2] = stencil.map(|(v, _)| v);
    Some((8.0 * (p1 - m1) - (p2 - m2)) / (12.0 * h))
}

/// The fourth-order central difference at step `H/2`, with the change from
/// step `H` as its error bound (the truncation error falls by 16 when the
/// step halves, so the change overestimates it): a function that varies
/// too fast for the stencil widens the bound instead of failing the test.
fn central_difference(f: impl Fn(f64) -> (f64, Vec<bool>), t: f64) -> Option<Difference> {
    let coarse = central_difference_with_step(&f, t, H)?;
    let fine = central_difference_with_step(&f, t, H / 2.0)?;
    let error = (coarse - fine).abs();
    // Too rough a function for the stencil: no meaningful comparison.
    if error > 1e-4 * (1.0 + fine.abs()) {
        return None;
    }
    Some(Difference {
        estimate: fine,
        error,
    })
}

fn close(a: f64, b: f64, relative: f64) -> bool {
    (a - b).abs() <= relative * (1.0 + a.abs().max(b.abs()))
}

/// `exact` lies within the difference's error bound, widened by `relative`
/// for rounding.
fn agrees(exact: f64, difference: &Difference, relative: f64) -> bool {
    (exact - difference.estimate).abs()
        <= difference.error + relative * (1.0 + exact.abs().max(difference.estimate.abs()))
}

/// The gradient by dual numbers, one pass per input.
fn dual_gradient(e: &Expr, x: f64, y: f64) -> (f64, [f64; 2]) {
    let by_x = eval(e, Dual::variable(x), Dual::constant(y), &mut Vec::new());
    let by_y = eval(e, Dual::constant(x), Dual::variable(y), &mut Vec::new());
    (by_x.value, [by_x.tangent, by_y.tangent])
}

/// The gradient by the tape, one backward pass.
fn tape_gradient(e: &Expr, x0: f64, y0: f64) -> (f64, [f64; 2]) {
    let tape = Tape::new();
    let (x, y) = (tape.var(x0), tape.var(y0));
    let output = eval(e, x, y, &mut Vec::new());
    tape.backward(output);
    (output.value(), [x.adjoint(), y.adjoint()])
}

/// `∂f/∂x` by dual numbers at the first level.
fn dual_dx(e: &Expr, x: f64, y: f64) -> f64 {
    eval(e, Dual::variable(x), Dual::constant(y), &mut Vec::new()).tangent
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, max_global_rejects: 8192, ..ProptestConfig::default() })]

    #[test]
    fn dual_tape_and_finite_differences_agree(e in expr(), x in -2.0..2.0f64, y in -2.0..2.0f64) {
        let (value, _) = plain(&e, x, y);
        prop_assume!(value.is_finite() && value.abs() < 1e4);
        let (dual_value, dual) = dual_gradient(&e, x, y);
        let (tape_value, tape) = tape_gradient(&e, x, y);
        prop_assert_eq!(dual_value.to_bits(), value.to_bits());
        prop_assert_eq!(tape_value.to_bits(), value.to_bits());
        prop_assume!(dual.iter().all(|g| g.is_finite() && g.abs() < 1e6));
        for k in 0..2 {
            prop_assert!(close(dual[k], tape[k], 1e-10), "input {}: dual {} tape {}", k, dual[k], tape[k]);
        }
        let fd_x = central_difference(|t| plain(&e, t, y), x);
        let fd_y = central_difference(|t| plain(&e, x, t), y);
        prop_assume!(fd_x.is_some() && fd_y.is_some());
        for (k, fd) in [fd_x, fd_y].into_iter().enumerate() {
            let fd = fd.unwrap();
            prop_assert!(
                agrees(dual[k], &fd, 1e-6),
                "input {}: dual {} finite difference {} ± {}", k, dual[k], fd.estimate, fd.error
            );
        }
    }

    #[test]
    fn nested_dual_second_derivatives_agree_with_finite_differences(
        e in expr(), x in -2.0..2.0f64, y in -2.0..2.0f64,
    ) {
        let (value, _) = plain(&e, x, y);
        prop_assume!(value.is_finite() && value.abs() < 1e4);
        // ∂²f/∂x²: both levels seeded along x.
        let xx = eval(&e, Dual::variable(Dual::variable(x)), Dual::constant(Dual::constant(y)), &mut Vec::new());
        // ∂²f/∂y∂x: the inner level along x, the outer along y.
        let yx = eval(
            &e,
            Dual::new(Dual::variable(x), Dual::constant(0.0)),
            Dual::new(Dual::constant(y), Dual::constant(1.0)),
            &mut Vec::new(),
        );
        let first = dual_dx(&e, x, y);
        prop_assume!(first.is_finite() && first.abs() < 1e6);
        prop_assert_eq!(xx.value.tangent.to_bits(), first.to_bits());
        prop_assert_eq!(yx.value.tangent.to_bits(), first.to_bits());
        let second_xx = xx.tangent.tangent;
        let second_yx = yx.tangent.tangent;
        prop_assume!(second_xx.is_finite() && second_yx.is_finite());
        prop_assume!(second_xx.abs() < 1e6 && second_yx.abs() < 1e6);
        // The two seedings of the symmetric pair ∂²/∂x² agree exactly.
        prop_assert_eq!(xx.tangent.value.to_bits(), first.to_bits());

        let first_with_trace = |x: f64, y: f64| {
            let (_, trace) = plain(&e, x, y);
            (dual_dx(&e, x, y), trace)
        };
        let fd_xx = central_difference(|t| first_with_trace(t, y), x);
        let fd_yx = central_difference(|t| first_with_trace(x, t), y);
        prop_assume!(fd_xx.is_some() && fd_yx.is_some());
        let (fd_xx, fd_yx) = (fd_xx.unwrap(), fd_yx.unwrap());
        prop_assert!(
            agrees(second_xx, &fd_xx, 1e-6),
            "∂²f/∂x²: dual {} finite difference {} ± {}", second_xx, fd_xx.estimate, fd_xx.error
        );
        prop_assert!(
            agrees(second_yx, &fd_yx, 1e-6),
            "∂²f/∂y∂x: dual {} finite difference {} ± {}", second_yx, fd_yx.estimate, fd_yx.error
        );
    }
}
