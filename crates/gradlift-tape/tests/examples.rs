//! The worked examples of the autodiff chapter and the project's logistic
//! growth fit, run with dual numbers and with the tape, against closed forms
//! and central finite differences.

mod support;

use gradlift_tape::{Dual, Real, Tape};
use support::models::{forward_model, logistic_loss, reverse_model, LOGISTIC_OBS};

fn assert_close(actual: f64, expected: f64, tolerance: f64, what: &str) {
    assert!(
        (actual - expected).abs() <= tolerance,
        "{what}: {actual} differs from {expected} by more than {tolerance}"
    );
}

#[test]
fn dual_cube_and_tangent_line() {
    // y = x³ − 2x at 2: y' = 3x² − 2 = 10.
    let x = Dual::variable(2.0);
    let y = x * x * x - 2.0 * x;
    assert_eq!(y.value, 4.0);
    assert_eq!(y.tangent, 10.0);

    // The chapter's Dual2: cube at {{2, 1}, {1, 0}}.
    let cube = |x: Dual<Dual<f64>>| x * x * x;
    let z = cube(Dual::new(Dual::new(2.0, 1.0), Dual::new(1.0, 0.0)));
    assert_eq!(z.tangent.tangent, 12.0);
    assert_eq!(z.value.tangent, 12.0);
    assert_eq!(z.tangent.value, 12.0);
    assert_eq!(z.value.value, 8.0);
}

#[test]
fn tape_while_loop_with_a_data_dependent_trip_count() {
    let tape = Tape::new();
    let x = tape.var(1.5);
    let y = tape.var(2.0);
    let mut t = x * y;
    let limit = tape.var(100.0);
    let mut trips = 0;
    while t < limit {
        t = t * t;
        trips += 1;
    }
    let r = t.log() - y.exp();
    tape.backward(r);
    assert_eq!(trips, 3); // 3 → 9 → 81 → 6561
                          // r = log((xy)⁸) − eʸ: ∂r/∂x = 8/x, ∂r/∂y = 8/y − eʸ.
    assert!(x.adjoint() > 0.0 && y.adjoint() < 0.0);
    assert_close(x.adjoint(), 16.0 / 3.0, 1e-12, "∂r/∂x");
    assert_close(y.adjoint(), 4.0 - 2.0f64.exp(), 1e-12, "∂r/∂y");
    assert_eq!(limit.adjoint(), 0.0);
}

/// The chapter's forward example in closed form at n = 3, where t = xy + 3
/// is 5 > 1 and s = 6x/y: f = sin((xy+3)²)/x − 2y + 6x/y.
fn forward_model_gradient_at_1_2() -> (f64, f64) {
    let (x, y) = (1.0f64, 2.0f64);
    let u = x * y + 3.0;
    let v = u * u;
    let df_dx = v.cos() * 2.0 * u * y / x - v.sin() / (x * x) + 6.0 / y;
    let df_dy = v.cos() * 2.0 * u * x / x - 2.0 - 6.0 * x / (y * y);
    (df_dx, df_dy)
}

#[test]
fn chapter_forward_model_with_dual_numbers_and_the_tape() {
    let (exact_dx, exact_dy) = forward_model_gradient_at_1_2();

    let df_dx = forward_model(Dual::variable(1.0), Dual::constant(2.0), 3).tangent;
    let df_dy = forward_model(Dual::constant(1.0), Dual::variable(2.0), 3).tangent;
    assert!(df_dx > 22.9 && df_dx < 23.0, "df/dx = {df_dx}");
    assert!(df_dy > 6.4 && df_dy < 6.5, "df/dy = {df_dy}");
    assert_close(df_dx, exact_dx, 1e-12, "dual df/dx");
    assert_close(df_dy, exact_dy, 1e-12, "dual df/dy");

    let tape = Tape::new();
    let (x, y) = (tape.var(1.0), tape.var(2.0));
    let f = forward_model(x, y, 3);
    tape.backward(f);
    assert_close(x.adjoint(), exact_dx, 1e-12, "tape df/dx");
    assert_close(y.adjoint(), exact_dy, 1e-12, "tape df/dy");
    assert_eq!(f.value(), forward_model(1.0, 2.0, 3));
}

#[test]
fn chapter_reverse_model_with_the_tape_and_dual_numbers() {
    // At n = 6 the loop skips i = 1 and never breaks: s = 14x²; t = 5.
    let exact_value = 5.0f64.sin() - 4.0 + 14.0;
    let exact_dx = 5.0f64.cos() * 2.0 - 5.0f64.sin() + 28.0;
    let exact_dy = 5.0f64.cos() - 2.0;

    let tape = Tape::new();
    let (x, y) = (tape.var(1.0), tape.var(2.0));
    let value = reverse_model(x, y, 6);
    tape.backward(value);
    assert!((value.value() - 9.041076).abs() < 1e-6);
    assert!((x.adjoint() - 29.526249).abs() < 1e-6);
    assert!((y.adjoint() + 1.716338).abs() < 1e-6);
    assert_close(value.value(), exact_value, 1e-12, "tape value");
    assert_close(x.adjoint(), exact_dx, 1e-12, "tape x_grad");
    assert_close(y.adjoint(), exact_dy, 1e-12, "tape y_grad");

    let x_grad = reverse_model(Dual::variable(1.0), Dual::constant(2.0), 6);
    let y_grad = reverse_model(Dual::constant(1.0), Dual::variable(2.0), 6);
    assert_close(x_grad.value, exact_value, 1e-12, "dual value");
    assert_close(x_grad.tangent, exact_dx, 1e-12, "dual x_grad");
    assert_close(y_grad.tangent, exact_dy, 1e-12, "dual y_grad");
}

#[test]
fn chapter_reverse_model_takes_its_break_and_early_return() {
    // x = 3: s = 9·(0 + 2 + 3) = 45 > 40 breaks before i = 4; t = 3y + 3.
    let (x0, y0) = (3.0, 2.0);
    let tape = Tape::new();
    let (x, y) = (tape.var(x0), tape.var(y0));
    tape.backward(reverse_model(x, y, 6));
    let u = x0 * y0 + 3.0;
    assert_close(
        x.adjoint(),
        u.cos() * y0 / x0 - u.sin() / (x0 * x0) + 10.0 * x0,
        1e-12,
        "break x",
    );
    assert_close(y.adjoint(), u.cos() - 2.0, 1e-12, "break y");

    // x = 10, y = 10: s = 2x² = 200 > 40 breaks at i = 3; t = 103 > 100
    // returns t · s.
    let (x0, y0) = (10.0, 10.0);
    let (x, y) = (tape.var(x0), tape.var(y0));
    let f = reverse_model(x, y, 6);
    tape.backward(f);
    assert_eq!(f.value(), 103.0 * 200.0);
    assert_close(x.adjoint(), y0 * 200.0 + 103.0 * 4.0 * x0, 1e-9, "return x");
    assert_close(y.adjoint(), x0 * 200.0, 1e-9, "return y");
}

/// ∂loss/∂rate and ∂loss/∂cap of `examples/logistic_growth.grad` at
/// rate = 0.7, cap = 40 with the header's observations, as computed by the
/// tape. An independent forward-mode evaluation in Python, with the same
/// operation order, gives -5463.002941225067 and -114.4380284516828; the
/// compiled reverse mode (`gradlift grad examples/logistic_growth.grad --at
/// 'rate=0.7, cap=40, obs=[…]'`) gives -5463.002941225056 and
/// -114.43802845168253, and the same loss 1123.366039938105.
const LOGISTIC_GRADIENT: [f64; 2] = [-5463.002941225068, -114.43802845168243];
const LOGISTIC_VALUE: f64 = 1123.366039938105;

#[test]
fn logistic_growth_loss_with_the_tape_dual_numbers_and_finite_differences() {
    let (rate0, cap0) = (0.7, 40.0);

    let tape = Tape::new();
    let (rate, cap) = (tape.var(rate0), tape.var(cap0));
    let loss = logistic_loss(rate, cap, &LOGISTIC_OBS);
    let tape_gradient = tape.gradient(loss, &[rate, cap]);
    assert_close(loss.value(), LOGISTIC_VALUE, 1e-12 * LOGISTIC_VALUE, "loss");

    let by_rate = logistic_loss(Dual::variable(rate0), Dual::constant(cap0), &LOGISTIC_OBS);
    let by_cap = logistic_loss(Dual::constant(rate0), Dual::variable(cap0), &LOGISTIC_OBS);
    let dual_gradient = [by_rate.tangent, by_cap.tangent];
    assert_eq!(by_rate.value, loss.value());

    let plain = |rate: f64, cap: f64| logistic_loss(rate, cap, &LOGISTIC_OBS);
    let h_rate = 1e-6 * rate0;
    let h_cap = 1e-6 * cap0;
    let fd_gradient = [
        (plain(rate0 + h_rate, cap0) - plain(rate0 - h_rate, cap0)) / (2.0 * h_rate),
        (plain(rate0, cap0 + h_cap) - plain(rate0, cap0 - h_cap)) / (2.0 * h_cap),
    ];

    for k in 0..2 {
        let expected = LOGISTIC_GRADIENT[k];
        assert_close(tape_gradient[k], expected, 1e-12 * expected.abs(), "tape");
        assert_close(dual_gradient[k], expected, 1e-12 * expected.abs(), "dual");
        assert_close(
            fd_gradient[k],
            expected,
            1e-5 * expected.abs(),
            "finite difference",
        );
    }
}
