//! The runtime tape and the dual numbers of gradlift-tape agree with the
//! compiled gradients of the same models written in the language: the
//! chapter's forward and reverse `model`s and the logistic-growth loss.

#[path = "../crates/gradlift-tape/tests/support/models.rs"]
#[allow(dead_code)]
mod models;

use gradlift::{Args, GradOptions, Jit, Program};
use gradlift_tape::{Dual, Tape};
use models::{forward_model, logistic_loss, reverse_model, LOGISTIC_OBS};

fn function_gradient(file: &str, at: &str) -> (f64, Vec<f64>) {
    let root = env!("CARGO_MANIFEST_DIR");
    let text = std::fs::read_to_string(format!("{root}/{file}")).unwrap();
    let program = Program::parse(file, &text).unwrap();
    let f = program.last_function().unwrap();
    let args = f.args(&Args::parse("--at", at).unwrap()).unwrap();
    let g = f.gradient(None, GradOptions::default()).unwrap();
    let (value, grads) = g
        .compile(&Jit::new().unwrap())
        .unwrap()
        .call(&args)
        .unwrap();
    let mut flat = Vec::new();
    grads.iter().for_each(|g| g.flatten(&mut flat));
    (value, flat)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * (1.0 + b.abs())
}

#[test]
fn chapter_forward_model() {
    let (value, grad) = function_gradient("examples/chapter_forward.grad", "x=1, y=2, n=3");
    let dx = forward_model(Dual::variable(1.0), Dual::constant(2.0), 3).tangent;
    let dy = forward_model(Dual::constant(1.0), Dual::variable(2.0), 3).tangent;
    assert!(
        close(grad[0], dx) && close(grad[1], dy),
        "{grad:?} vs dual ({dx}, {dy})"
    );
    let tape = Tape::new();
    let (x, y) = (tape.var(1.0), tape.var(2.0));
    let f = forward_model(x, y, 3);
    tape.backward(f);
    assert!(close(value, f.value()));
    assert!(close(grad[0], x.adjoint()) && close(grad[1], y.adjoint()));
}

#[test]
fn chapter_reverse_model() {
    let (value, grad) = function_gradient("examples/chapter_reverse.grad", "x=1, y=2, n=6");
    let tape = Tape::new();
    let (x, y) = (tape.var(1.0), tape.var(2.0));
    let f = reverse_model(x, y, 6);
    tape.backward(f);
    assert!(close(value, f.value()), "{value} vs {}", f.value());
    assert!(
        close(grad[0], x.adjoint()) && close(grad[1], y.adjoint()),
        "{grad:?}"
    );
}

#[test]
fn logistic_growth_loss() {
    let obs: Vec<String> = LOGISTIC_OBS.iter().map(|o| o.to_string()).collect();
    let at = format!("rate=0.7, cap=40, obs=[{}]", obs.join(", "));
    let (value, grad) = function_gradient("examples/logistic_growth.grad", &at);
    let tape = Tape::new();
    let (rate, cap) = (tape.var(0.7), tape.var(40.0));
    let f = logistic_loss(rate, cap, &LOGISTIC_OBS);
    tape.backward(f);
    assert!(close(value, f.value()), "{value} vs {}", f.value());
    assert!(
        (grad[0] - rate.adjoint()).abs() <= 1e-9 * rate.adjoint().abs(),
        "{} vs {}",
        grad[0],
        rate.adjoint()
    );
    assert!(
        (grad[1] - cap.adjoint()).abs() <= 1e-9 * cap.adjoint().abs(),
        "{} vs {}",
        grad[1],
        cap.adjoint()
    );
}

/// The gradient of `file` at `at` by the compiled reverse mode, against the
/// tape on the same function written in Rust over its flattened input.
fn against_tape(
    file: &str,
    at: &str,
    xs: &[f64],
    f: impl for<'t> Fn(&[gradlift_tape::Var<'t>]) -> gradlift_tape::Var<'t>,
) {
    let (value, grad) = function_gradient(file, at);
    let tape = Tape::new();
    let vars: Vec<_> = xs.iter().map(|&x| tape.var(x)).collect();
    let out = f(&vars);
    tape.backward(out);
    assert!(
        close(value, out.value()),
        "{file}: {value} vs {}",
        out.value()
    );
    for (g, v) in grad.iter().zip(&vars) {
        assert!(
            (g - v.adjoint()).abs() <= 1e-12 * (1.0 + g.abs()),
            "{file}: {grad:?}"
        );
    }
}

#[test]
fn paper_examples_and_logsumexp() {
    use gradlift_tape::Real;
    let a = [0.5, 2.0, -1.5, 3.0];
    against_tape("examples/sum.grad", "A=[0.5, 2, -1.5, 3]", &a, |v| {
        v[1..].iter().fold(v[0], |s, &x| s + x)
    });
    against_tape("examples/prod.grad", "A=[0.5, 2, -1.5, 3]", &a, |v| {
        v[1..].iter().fold(v[0], |s, &x| s * x)
    });
    against_tape("examples/dot.grad", "A=[0.5, 2], B=[-1.5, 3]", &a, |v| {
        v[0] * v[2] + v[1] * v[3]
    });
    against_tape("examples/logsumexp.grad", "x=[0.5, 2, -1.5, 3]", &a, |v| {
        let m = v[1..].iter().fold(v[0], |m, &x| Real::max(m, x));
        let s = v[1..]
            .iter()
            .fold(Real::exp(v[0] - m), |s, &x| s + Real::exp(x - m));
        m + Real::log(s)
    });
}
