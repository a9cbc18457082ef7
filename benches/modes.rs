//! Four ways to differentiate, on the same functions: the compiled reverse
//! mode (`grad`), the compiled forward mode (`jvp`, one direction), the
//! runtime tape and dual numbers of gradlift-tape (one direction), on the
//! logistic-growth loss and on logsumexp at n = 10⁴.
//!
//! `cargo bench --bench modes`; medians in
//! `target/criterion/modes/<function>_<mode>/new/estimates.json`.

use criterion::{criterion_group, criterion_main, Criterion};
use gradlift::{Args, GradOptions, Jit, Program, Value};
use gradlift_tape::{Dual, Real, Tape};
use std::hint::black_box;

#[path = "../crates/gradlift-tape/tests/support/models.rs"]
#[allow(dead_code)]
mod models;

fn lse<R: Real>(xs: &[R]) -> R {
    let mut a = xs[0];
    for &x in &xs[1..] {
        a = Real::max(a, x);
    }
    let mut s = Real::exp(xs[0] - a);
    for &x in &xs[1..] {
        s += Real::exp(x - a);
    }
    a + Real::log(s)
}

fn load(file: &str) -> Program {
    let root = env!("CARGO_MANIFEST_DIR");
    Program::parse(
        file,
        &std::fs::read_to_string(format!("{root}/{file}")).unwrap(),
    )
    .unwrap()
}

fn modes(c: &mut Criterion) {
    let jit = Jit::new().unwrap();
    let mut g = c.benchmark_group("modes");
    g.sample_size(20);

    // The logistic-growth loss: 2 inputs that matter (rate, cap).
    let program = load("examples/logistic_growth.grad");
    let f = program.last_function().unwrap();
    let obs: Vec<String> = models::LOGISTIC_OBS.iter().map(|o| o.to_string()).collect();
    let args = f
        .args(
            &Args::parse(
                "--at",
                &format!("rate=0.7, cap=40, obs=[{}]", obs.join(", ")),
            )
            .unwrap(),
        )
        .unwrap();
    let grad = f
        .gradient(None, GradOptions::default())
        .unwrap()
        .compile(&jit)
        .unwrap();
    g.bench_function("logistic_growth/compiled_reverse", |b| {
        b.iter(|| grad.call(black_box(&args)).unwrap())
    });
    let dirs = vec![Value::Real(1.0), Value::Real(0.0), Value::reals(&[0.0; 10])];
    let jvp = f.compile_jvp(&jit).unwrap();
    g.bench_function("logistic_growth/compiled_forward", |b| {
        b.iter(|| jvp.call(black_box(&args), &dirs).unwrap())
    });
    g.bench_function("logistic_growth/tape", |b| {
        b.iter(|| {
            let tape = Tape::new();
            let (rate, cap) = (tape.var(0.7), tape.var(40.0));
            let l = models::logistic_loss(rate, cap, &models::LOGISTIC_OBS);
            tape.backward(l);
            (rate.adjoint(), cap.adjoint())
        })
    });
    g.bench_function("logistic_growth/dual", |b| {
        b.iter(|| {
            models::logistic_loss(
                Dual::variable(black_box(0.7)),
                Dual::constant(40.0),
                &models::LOGISTIC_OBS,
            )
            .tangent
        })
    });

    // logsumexp at n = 10⁴.
    let n = 10_000;
    let xs: Vec<f64> = (0..n).map(|i| ((i * 7919) % 1000) as f64 / 100.0).collect();
    let program = load("examples/logsumexp.grad");
    let f = program.last_function().unwrap();
    let args = vec![Value::reals(&xs)];
    let grad = f
        .gradient(None, GradOptions::default())
        .unwrap()
        .compile(&jit)
        .unwrap();
    g.bench_function("logsumexp/compiled_reverse", |b| {
        b.iter(|| grad.call(black_box(&args)).unwrap())
    });
    let mut e0 = vec![0.0; n];
    e0[0] = 1.0;
    let dirs = vec![Value::reals(&e0)];
    let jvp = f.compile_jvp(&jit).unwrap();
    g.bench_function("logsumexp/compiled_forward", |b| {
        b.iter(|| jvp.call(black_box(&args), &dirs).unwrap())
    });
    g.bench_function("logsumexp/tape", |b| {
        b.iter(|| {
            let tape = Tape::new();
            let vars: Vec<_> = xs.iter().map(|&x| tape.var(x)).collect();
            let l = lse(&vars);
            tape.backward(l);
            vars[0].adjoint()
        })
    });
    g.bench_function("logsumexp/dual", |b| {
        b.iter(|| {
            let duals: Vec<Dual<f64>> = xs
                .iter()
                .enumerate()
                .map(|(i, &x)| {
                    if i == 0 {
                        Dual::variable(x)
                    } else {
                        Dual::constant(x)
                    }
                })
                .collect();
            lse(&duals).tangent
        })
    });
    g.finish();
}

criterion_group!(benches, modes);
criterion_main!(benches);
