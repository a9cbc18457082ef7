//! Dual numbers: the primitives against closed forms, nesting, and
//! perturbation confusion.

use gradlift_tape::{derivative, second_derivative, Dual, Real};

fn assert_close(actual: f64, expected: f64, what: &str) {
    assert!(
        (actual - expected).abs() <= 1e-12 * (1.0 + expected.abs()),
        "{what}: {actual} != {expected}"
    );
}

type Level2 = Dual<Dual<f64>>;

/// A unary function on the second nesting level, with its value, first and
/// second derivative in closed form.
struct ClosedForm {
    name: &'static str,
    on_duals: fn(Level2) -> Level2,
    value: fn(f64) -> f64,
    first: fn(f64) -> f64,
    second: fn(f64) -> f64,
}

fn closed_forms() -> Vec<ClosedForm> {
    vec![
        ClosedForm {
            name: "sin",
            on_duals: |x| x.sin(),
            value: f64::sin,
            first: f64::cos,
            second: |x| -x.sin(),
        },
        ClosedForm {
            name: "cos",
            on_duals: |x| x.cos(),
            value: f64::cos,
            first: |x| -x.sin(),
            second: |x| -x.cos(),
        },
        ClosedForm {
            name: "tan",
            on_duals: |x| x.tan(),
            value: f64::tan,
            first: |x| 1.0 + x.tan() * x.tan(),
            second: |x| 2.0 * x.tan() * (1.0 + x.tan() * x.tan()),
        },
        ClosedForm {
            name: "exp",
            on_duals: |x| x.exp(),
            value: f64::exp,
            first: f64::exp,
            second: f64::exp,
        },
        ClosedForm {
            name: "log",
            on_duals: |x| x.log(),
            value: f64::ln,
            first: |x| 1.0 / x,
            second: |x| -1.0 / (x * x),
        },
        ClosedForm {
            name: "sqrt",
            on_duals: |x| x.sqrt(),
            value: f64::sqrt,
            first: |x| 0.5 / x.sqrt(),
            second: |x| -0.25 / (x * x.sqrt()),
        },
        ClosedForm {
            name: "tanh",
            on_duals: |x| x.tanh(),
            value: f64::tanh,
            first: |x| 1.0 - x.tanh() * x.tanh(),
            second: |x| -2.0 * x.tanh() * (1.0 - x.tanh() * x.tanh()),
        },
        ClosedForm {
            name: "abs",
            on_duals: |x| x.abs(),
            value: f64::abs,
            first: f64::signum,
            second: |_| 0.0,
        },
        ClosedForm {
            name: "sign",
            on_duals: |x| x.sign(),
            value: f64::signum,
            first: |_| 0.0,
            second: |_| 0.0,
        },
        ClosedForm {
            name: "neg",
            on_duals: |x| -x,
            value: |x| -x,
            first: |_| -1.0,
            second: |_| 0.0,
        },
        ClosedForm {
            name: "1/x",
            on_duals: |x| 1.0 / x,
            value: |x| 1.0 / x,
            first: |x| -1.0 / (x * x),
            second: |x| 2.0 / (x * x * x),
        },
        ClosedForm {
            name: "x^2.5",
            on_duals: |x| x.pow(Dual::from(2.5)),
            value: |x| x.powf(2.5),
            first: |x| 2.5 * x.powf(1.5),
            second: |x| 3.75 * x.sqrt(),
        },
        ClosedForm {
            name: "2^x",
            on_duals: |x| Dual::from(2.0).pow(x),
            value: |x| 2.0f64.powf(x),
            first: |x| 2.0f64.powf(x) * 2.0f64.ln(),
            second: |x| 2.0f64.powf(x) * 2.0f64.ln() * 2.0f64.ln(),
        },
        ClosedForm {
            name: "min(x, 1)",
            on_duals: |x| x.min(Dual::from(1.0)),
            value: |x| x.min(1.0),
            first: |x| if x <= 1.0 { 1.0 } else { 0.0 },
            second: |_| 0.0,
        },
        ClosedForm {
            name: "max(x, 1)",
            on_duals: |x| x.max(Dual::from(1.0)),
            value: |x| x.max(1.0),
            first: |x| if x >= 1.0 { 1.0 } else { 0.0 },
            second: |_| 0.0,
        },
    ]
}

#[test]
fn primitives_match_their_closed_forms_to_second_order() {
    for form in closed_forms() {
        for x in [0.3, 0.9, 1.7] {
            let result = (form.on_duals)(Dual::variable(Dual::variable(x)));
            let what = format!("{} at {x}", form.name);
            assert_close(result.value.value, (form.value)(x), &what);
            assert_close(result.value.tangent, (form.first)(x), &what);
            assert_close(result.tangent.value, (form.first)(x), &what);
            assert_close(result.tangent.tangent, (form.second)(x), &what);
        }
    }
}

#[test]
fn nesting_gives_higher_derivatives() {
    assert_eq!(derivative(|x| x * x * x - 2.0 * x, 2.0), 10.0);
    assert_eq!(second_derivative(|x| x * x * x, 2.0), 12.0);
    let x = Dual::variable(Dual::variable(Dual::variable(2.0)));
    assert_eq!((x * x * x * x).tangent.tangent.tangent, 24.0 * 2.0);
}

#[test]
fn mixed_partial_from_two_seeded_directions() {
    // f = x · y · sin x: ∂²f/∂x∂y = sin x + x cos x. The inner level seeds x,
    // the outer level seeds y.
    let (x0, y0) = (0.8, 1.3);
    let x = Dual::new(Dual::variable(x0), Dual::constant(0.0));
    let y = Dual::new(Dual::constant(y0), Dual::constant(1.0));
    let f = x * y * x.sin();
    assert_close(f.value.tangent, y0 * (x0.sin() + x0 * x0.cos()), "∂f/∂x");
    assert_close(f.tangent.value, x0 * x0.sin(), "∂f/∂y");
    assert_close(f.tangent.tangent, x0.sin() + x0 * x0.cos(), "∂²f/∂x∂y");
}

#[test]
fn one_type_per_level_prevents_perturbation_confusion() {
    // d/dx (x · d/dy (x + y)) = d/dx (x · 1) = 1 (Siskind & Pearlmutter 2005).
    for (x0, y0) in [(3.0, 5.0), (-1.0, 0.25)] {
        let right = derivative(
            |x: Dual<f64>| {
                let inner = derivative(
                    |y: Dual<Dual<f64>>| Dual::constant(x) + y,
                    Dual::constant(y0),
                );
                x * inner
            },
            x0,
        );
        assert_eq!(right, 1.0);

        // Reusing the outer level for the inner derivative: x's tangent is
        // counted as y's, the inner derivative is 2 and the answer is wrong.
        let confused = derivative(
            |x: Dual<f64>| {
                let inner = derivative(|y: Dual<f64>| x + y, y0);
                x * inner
            },
            x0,
        );
        assert_eq!(confused, 2.0);
    }
}

#[test]
fn a_constant_through_a_singular_primitive_keeps_a_zero_tangent() {
    let zero = Dual::constant(0.0);
    assert_eq!(zero.sqrt().tangent, 0.0);
    assert_eq!(zero.log().tangent, 0.0);
    let x = Dual::variable(2.0);
    let y = x + zero.sqrt() * 3.0 + zero.log().exp();
    assert_eq!(y.tangent, 1.0);
    // A perturbed input at the singularity gets the infinite derivative.
    assert_eq!(Dual::variable(0.0).sqrt().tangent, f64::INFINITY);
}

#[test]
fn comparisons_look_at_the_value_only() {
    let x = Dual::variable(1.0);
    let c = Dual::constant(1.0);
    assert_eq!(x, c);
    assert!(x == 1.0);
    assert!(1.0 == x);
    assert!(x < 2.0);
    assert!(0.5 < x);
    assert!(x >= c);
    assert!(x > Dual::constant(0.0));
    let nested = Dual::variable(Dual::variable(3.0));
    assert!(nested > 2.0 && nested < Dual::from(4.0));
    assert!(Dual::variable(f64::NAN).partial_cmp(&1.0).is_none());
}

#[test]
fn non_smooth_primitives_follow_the_first_argument_at_ties() {
    let a = Dual::new(1.0, 10.0);
    let b = Dual::new(1.0, 20.0);
    assert_eq!(a.min(b).tangent, 10.0);
    assert_eq!(a.max(b).tangent, 10.0);
    assert_eq!(b.min(a).tangent, 20.0);
    assert_eq!(Dual::new(0.0, 5.0).abs().tangent, 5.0);
    assert_eq!(Dual::new(-0.0, 5.0).abs().tangent, 5.0);
    assert_eq!(Dual::new(0.0, 5.0).sign().tangent, 0.0);
    // ∂₂pow(0, b) = 0 rather than 0 · log 0.
    let base = Dual::constant(0.0);
    assert_eq!(base.pow(Dual::variable(2.0)).tangent, 0.0);
}
