//! The runtime tape: adjoints, the chapter's `backward` semantics, and
//! control flow that depends on data.

use gradlift_tape::{Real, Tape, Var};

fn assert_close(actual: f64, expected: f64, what: &str) {
    assert!(
        (actual - expected).abs() <= 1e-12 * (1.0 + expected.abs()),
        "{what}: {actual} != {expected}"
    );
}

#[test]
fn operators_with_constants_on_either_side() {
    let tape = Tape::new();
    let x = tape.var(2.0);
    let y = tape.var(0.5);
    let f = 3.0 * x - x / y + 1.0 - 2.0 / x + y * 4.0 - (5.0 - y) + (x + 1.0) * (y - 2.0);
    tape.backward(f);
    let (x0, y0) = (2.0, 0.5);
    assert_close(
        f.value(),
        3.0 * x0 - x0 / y0 + 1.0 - 2.0 / x0 + y0 * 4.0 - (5.0 - y0) + (x0 + 1.0) * (y0 - 2.0),
        "value",
    );
    assert_close(
        x.adjoint(),
        3.0 - 1.0 / y0 + 2.0 / (x0 * x0) + (y0 - 2.0),
        "∂f/∂x",
    );
    assert_close(
        y.adjoint(),
        x0 / (y0 * y0) + 4.0 + 1.0 + (x0 + 1.0),
        "∂f/∂y",
    );
}

#[test]
fn compound_assignment_and_a_variable_used_twice() {
    let tape = Tape::new();
    let x = tape.var(3.0);
    let mut s = x * x; // both operands are x: ∂ = 2x
    s += x;
    s -= 1.0;
    s *= 2.0;
    s /= x;
    s += tape.var(7.0);
    tape.backward(s);
    // s = 2(x² + x − 1)/x + 7 = 2x + 2 − 2/x + 7: s' = 2 + 2/x².
    assert_close(x.adjoint(), 2.0 + 2.0 / 9.0, "∂s/∂x");
}

/// A function of one variable, recorded on the variable's tape.
type OnTape = for<'t> fn(Var<'t>) -> Var<'t>;

#[test]
fn primitives_record_their_partials() {
    let x0: f64 = 0.7;
    let cases: [(&str, OnTape, f64); 12] = [
        ("sin", |x| x.sin(), x0.cos()),
        ("cos", |x| x.cos(), -x0.sin()),
        ("tan", |x| x.tan(), 1.0 + x0.tan() * x0.tan()),
        ("exp", |x| x.exp(), x0.exp()),
        ("log", |x| x.log(), 1.0 / x0),
        ("sqrt", |x| x.sqrt(), 0.5 / x0.sqrt()),
        ("tanh", |x| x.tanh(), 1.0 - x0.tanh() * x0.tanh()),
        ("abs", |x| (-x).abs(), 1.0),
        ("sign", |x| x.sign() * x, 1.0),
        ("pow", |x| x.pow(x), x0.powf(x0) * (x0.ln() + 1.0)),
        ("min", |x| x.min(x * x), 2.0 * x0),
        ("max", |x| x.max(x * x), 1.0),
    ];
    for (name, f, expected) in cases {
        let tape = Tape::new();
        let x = tape.var(x0);
        tape.backward(f(x));
        assert_close(x.adjoint(), expected, name);
    }
}

#[test]
fn an_unused_singular_operation_does_not_contaminate_the_gradient() {
    let tape = Tape::new();
    let z = tape.var(0.0);
    let w = tape.var(3.0);
    let unused = z.log(); // value −∞, partial 1/0 = +∞
    let output = z * 2.0 + w * w;
    tape.backward(output);
    // The log node's adjoint is 0 and it is skipped, so no 0 · ∞ = NaN.
    assert_eq!(z.adjoint(), 2.0);
    assert_eq!(w.adjoint(), 6.0);
    assert_eq!(unused.adjoint(), 0.0);
    // Its partial is indeed infinite: differentiating it does reach z.
    tape.backward(unused);
    assert_eq!(unused.value(), f64::NEG_INFINITY);
    assert_eq!(z.adjoint(), f64::INFINITY);
}

#[test]
fn a_repeated_backward_clears_the_previous_adjoints() {
    let tape = Tape::new();
    let x = tape.var(2.0);
    let y = tape.var(5.0);
    let a = x * y;
    let b = x + 3.0 * y;
    tape.backward(a);
    assert_eq!((x.adjoint(), y.adjoint()), (5.0, 2.0));
    tape.backward(b);
    assert_eq!((x.adjoint(), y.adjoint()), (1.0, 3.0));
    assert_eq!(a.adjoint(), 0.0);
    tape.backward(b);
    assert_eq!((x.adjoint(), y.adjoint()), (1.0, 3.0));
}

#[test]
fn adjoints_before_backward_and_after_the_output_are_zero() {
    let tape = Tape::new();
    let x = tape.var(2.0);
    assert_eq!(x.adjoint(), 0.0);
    let y = x * x;
    tape.backward(y);
    let later = y * 3.0;
    assert_eq!(later.adjoint(), 0.0);
    assert_eq!(y.adjoint(), 1.0);
    assert_eq!(tape.adjoint(x), 4.0);
    assert_eq!(tape.gradient(later, &[x, y]), vec![12.0, 3.0]);
}

#[test]
fn a_constant_operand_is_not_recorded() {
    let tape = Tape::new();
    let x = tape.var(2.0);
    let _ = 2.0 * x + 1.0;
    assert_eq!(tape.len(), 3);
    let _ = x * x;
    assert_eq!(tape.len(), 4);
}

#[test]
fn clear_forgets_the_recording() {
    let mut tape = Tape::with_capacity(16);
    {
        let x = tape.var(1.0);
        tape.backward(x.exp());
        assert_eq!(x.adjoint(), 1.0f64.exp());
    }
    tape.clear();
    assert!(tape.is_empty());
    let x = tape.var(2.0);
    tape.backward(x * x);
    assert_eq!(x.adjoint(), 4.0);
}

#[test]
#[should_panic(expected = "a Var was used with a Tape other than the one that recorded it")]
fn variables_of_two_tapes_do_not_mix() {
    let first = Tape::new();
    let second = Tape::new();
    let _ = first.var(1.0) + second.var(2.0);
}

#[test]
fn comparisons_look_at_the_value_only() {
    let tape = Tape::new();
    let x = tape.var(1.0);
    let y = tape.var(1.0);
    assert_eq!(x, y);
    assert!(x == 1.0);
    assert!(1.0 == x);
    assert!(x < 2.0);
    assert!(0.5 < x);
    assert!(x <= y);
    assert!(x.exp() > y);
}

/// Newton's iteration for √a, stopped by a tolerance: the trip count depends
/// on `a`, and the tape differentiates the iterations that ran.
fn newton_sqrt<'t>(a: Var<'t>) -> (Var<'t>, u32) {
    let mut guess = a;
    let mut iterations = 0;
    while (guess * guess - a).abs() > 1e-14 * a.value() {
        guess = 0.5 * (guess + a / guess);
        iterations += 1;
    }
    (guess, iterations)
}

#[test]
fn a_loop_stopped_by_a_tolerance() {
    let mut trip_counts = Vec::new();
    for a0 in [2.0, 50.0, 1e6] {
        let tape = Tape::new();
        let a = tape.var(a0);
        let (root, iterations) = newton_sqrt(a);
        tape.backward(root);
        trip_counts.push(iterations);
        assert!((root.value() - f64::sqrt(a0)).abs() <= 1e-14 * f64::sqrt(a0));
        assert!((a.adjoint() - 0.5 / f64::sqrt(a0)).abs() <= 1e-9 / f64::sqrt(a0));
    }
    assert!(trip_counts[0] < trip_counts[2], "{trip_counts:?}");
}

#[test]
fn generic_code_lifts_constants_onto_the_tape() {
    fn poly<R: Real>(x: R) -> R {
        let mut acc = x.lift(1.0);
        for _ in 0..3 {
            acc = acc * x + 1.0;
        }
        acc
    }
    let tape = Tape::new();
    let x = tape.var(2.0);
    let p = poly(x);
    tape.backward(p);
    // x³ + x² + x + 1 at 2.
    assert_eq!(p.value(), poly(2.0));
    assert_eq!(x.adjoint(), 3.0 * 4.0 + 2.0 * 2.0 + 1.0);
}
