//! gradlift's compiled gradients against the same gradients written by
//! hand in Rust (a forward sweep storing what the reverse sweep needs, then
//! the reverse sweep), compiled by rustc -O: dot, prod and logsumexp at
//! n = 10³ and 10⁶ and the logistic-growth loss. The gradlift side is the native
//! call on prepared flat buffers (`Compiled::call_flat`), as `gradlift
//! bench` times it. Each hand-written gradient is checked against gradlift's
//! before timing.
//!
//! `cargo bench --bench handwritten`; medians in
//! `target/criterion/handwritten/<function>_<side>/<n>/new/estimates.json`
//! (`logistic_growth_<side>/4000` for the loss, 4,000 steps).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use gradlift::{Args, GradOptions, Jit, Program, Value};
use std::hint::black_box;

fn dot_grad(a: &[f64], b: &[f64], ga: &mut [f64], gb: &mut [f64]) -> f64 {
    ga.copy_from_slice(b);
    gb.copy_from_slice(a);
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn prod_grad(a: &[f64], g: &mut [f64]) -> f64 {
    // g[i] = ∏_{j<i} a[j] · ∏_{j>i} a[j], without division.
    let mut prefix = 1.0;
    for (gi, &ai) in g.iter_mut().zip(a) {
        *gi = prefix;
        prefix *= ai;
    }
    let mut suffix = 1.0;
    for (gi, &ai) in g.iter_mut().zip(a).rev() {
        *gi *= suffix;
        suffix *= ai;
    }
    prefix
}

fn lse_grad(x: &[f64], g: &mut [f64]) -> f64 {
    let m = x
        .iter()
        .fold(f64::NEG_INFINITY, |m, &v| if v > m { v } else { m });
    let mut s = 0.0;
    for (gi, &xi) in g.iter_mut().zip(x) {
        *gi = (xi - m).exp();
        s += *gi;
    }
    for gi in g.iter_mut() {
        *gi /= s;
    }
    m + s.ln()
}

/// The logistic-growth loss and its gradient with respect to rate, cap
/// and the observations; `states` holds the forward sweep.
fn logistic_grad(
    rate: f64,
    cap: f64,
    obs: &[f64; 10],
    states: &mut [f64],
    g_obs: &mut [f64; 10],
) -> (f64, f64, f64) {
    const DT: f64 = 0.0025;
    let mut p = 2.0;
    let mut loss = 0.0;
    for (i, s) in states.iter_mut().enumerate() {
        *s = p;
        p += DT * rate * p * (1.0 - p / cap);
        if (i + 1) % 400 == 0 {
            let r = p - obs[(i + 1) / 400 - 1];
            loss += r * r;
        }
    }
    let (mut g_rate, mut g_cap, mut g_p) = (0.0, 0.0, 0.0);
    for i in (0..states.len()).rev() {
        let p = states[i];
        let next = p + DT * rate * p * (1.0 - p / cap);
        if (i + 1) % 400 == 0 {
            let k = (i + 1) / 400 - 1;
            let r = next - obs[k];
            g_p += 2.0 * r;
            g_obs[k] = -2.0 * r;
        }
        // next = p + DT·rate·p − DT·rate·p²/cap
        g_rate += g_p * DT * p * (1.0 - p / cap);
        g_cap += g_p * DT * rate * p * p / (cap * cap);
        g_p *= 1.0 + DT * rate * (1.0 - 2.0 * p / cap);
    }
    (loss, g_rate, g_cap)
}

struct Native {
    grad: gradlift::CompiledGradient,
    sizes: Vec<i64>,
    inputs: Vec<Vec<f64>>,
    out: Vec<f64>,
}

fn native(file: &str, at: Vec<Value>) -> (Native, Vec<f64>) {
    let root = env!("CARGO_MANIFEST_DIR");
    let program = Program::parse(
        file,
        &std::fs::read_to_string(format!("{root}/{file}")).unwrap(),
    )
    .unwrap();
    let f = program.last_function().unwrap();
    let grad = f
        .gradient(None, GradOptions::default())
        .unwrap()
        .compile(&Jit::new().unwrap())
        .unwrap();
    let sig = f.signature();
    let bound = gradlift::lang::value::bind_sizes(f.name(), sig, &at).unwrap();
    let sizes: Vec<i64> = sig.size_vars.iter().map(|v| bound[v]).collect();
    let inputs: Vec<Vec<f64>> = at
        .iter()
        .map(|v| {
            let mut xs = Vec::new();
            v.flatten(&mut xs);
            xs
        })
        .collect();
    let (value, grads) = grad.call(&at).unwrap();
    let mut flat = vec![value];
    grads.iter().for_each(|g| g.flatten(&mut flat));
    let out = vec![0.0; flat.len()];
    (
        Native {
            grad,
            sizes,
            inputs,
            out,
        },
        flat,
    )
}

impl Native {
    fn run(&mut self) {
        let inputs: Vec<&[f64]> = self.inputs.iter().map(Vec::as_slice).collect();
        self.grad
            .native()
            .call_flat(&self.sizes, &inputs, &mut self.out)
            .unwrap();
    }
}

fn close(a: &[f64], b: &[f64]) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert!((x - y).abs() <= 1e-9 * (1.0 + y.abs()), "{x} vs {y}");
    }
}

fn handwritten(c: &mut Criterion) {
    let mut g = c.benchmark_group("handwritten");
    g.sample_size(20);
    for n in [1_000, 1_000_000] {
        let a: Vec<f64> = (0..n)
            .map(|i| 0.999 + ((i * 7919) % 1000) as f64 * 2e-6)
            .collect();
        let b: Vec<f64> = (0..n)
            .map(|i| 1.0 - ((i * 104729) % 1000) as f64 * 1e-4)
            .collect();

        let (mut dot, want) = native(
            "examples/dot.grad",
            vec![Value::reals(&a), Value::reals(&b)],
        );
        let (mut ga, mut gb) = (vec![0.0; n], vec![0.0; n]);
        let v = dot_grad(&a, &b, &mut ga, &mut gb);
        close(&[vec![v], ga.clone(), gb.clone()].concat(), &want);
        g.bench_function(BenchmarkId::new("dot_gradlift", n), |bch| {
            bch.iter(|| dot.run())
        });
        g.bench_function(BenchmarkId::new("dot_rust", n), |bch| {
            bch.iter(|| dot_grad(black_box(&a), &b, &mut ga, &mut gb))
        });

        let (mut prod, want) = native("examples/prod.grad", vec![Value::reals(&a)]);
        let mut gp = vec![0.0; n];
        let v = prod_grad(&a, &mut gp);
        close(&[vec![v], gp.clone()].concat(), &want);
        g.bench_function(BenchmarkId::new("prod_gradlift", n), |bch| {
            bch.iter(|| prod.run())
        });
        g.bench_function(BenchmarkId::new("prod_rust", n), |bch| {
            bch.iter(|| prod_grad(black_box(&a), &mut gp))
        });

        let (mut lse, want) = native("examples/logsumexp.grad", vec![Value::reals(&b)]);
        let mut gl = vec![0.0; n];
        let v = lse_grad(&b, &mut gl);
        close(&[vec![v], gl.clone()].concat(), &want);
        g.bench_function(BenchmarkId::new("logsumexp_gradlift", n), |bch| {
            bch.iter(|| lse.run())
        });
        g.bench_function(BenchmarkId::new("logsumexp_rust", n), |bch| {
            bch.iter(|| lse_grad(black_box(&b), &mut gl))
        });
    }

    let obs = [
        4.644121, 10.053153, 19.111462, 30.172821, 39.461555, 45.106019, 47.889332, 49.120644,
        49.639065, 49.852771,
    ];
    let at = Args::parse("--at", &format!("rate=0.7, cap=40, obs={obs:?}")).unwrap();
    let root = env!("CARGO_MANIFEST_DIR");
    let text = std::fs::read_to_string(format!("{root}/examples/logistic_growth.grad")).unwrap();
    let program = Program::parse("lg", &text).unwrap();
    let values = program.last_function().unwrap().args(&at).unwrap();
    let (mut growth, want) = native("examples/logistic_growth.grad", values);
    let (mut states, mut g_obs) = (vec![0.0; 4000], [0.0; 10]);
    let (v, gr, gc) = logistic_grad(0.7, 40.0, &obs, &mut states, &mut g_obs);
    close(&[vec![v, gr, gc], g_obs.to_vec()].concat(), &want);
    g.bench_function(BenchmarkId::new("logistic_growth_gradlift", 4000), |bch| {
        bch.iter(|| growth.run())
    });
    g.bench_function(BenchmarkId::new("logistic_growth_rust", 4000), |bch| {
        bch.iter(|| logistic_grad(black_box(0.7), 40.0, &obs, &mut states, &mut g_obs))
    });
    g.finish();
}

criterion_group!(benches, handwritten);
criterion_main!(benches);
