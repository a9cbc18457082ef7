//! Run time of native code: the primal and the value and gradient of dot,
//! prod and logsumexp at n = 10³ and 10⁶, and of the logistic-growth loss
//! (4,000 steps). Each is compiled once; the timed call is the native code
//! on prepared flat buffers (`Compiled::call_flat`), as `gradlift bench`
//! times it, so the safe API's argument conversion is outside the timed
//! region. Before timing, the native results are checked against the
//! interpreter's.
//!
//! `cargo bench --bench native`; medians in
//! `target/criterion/native/<example>_<primal|gradient>/<n>/new/estimates.json`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use gradlift::{Args, GradOptions, Jit, Program, Value};

/// The compiled primal and gradient of one example at one input, with
/// their flat buffers.
struct Pair {
    primal: gradlift::CompiledFunction,
    grad: gradlift::CompiledGradient,
    sizes: Vec<i64>,
    inputs: Vec<Vec<f64>>,
    primal_out: Vec<f64>,
    grad_out: Vec<f64>,
}

impl Pair {
    fn new(jit: &Jit, file: &str, at: impl FnOnce(&gradlift::Function) -> Vec<Value>) -> Pair {
        let root = env!("CARGO_MANIFEST_DIR");
        let text = std::fs::read_to_string(format!("{root}/{file}")).expect("the example");
        let program = Program::parse(file, &text).expect("the example parses");
        let f = program.last_function().expect("a definition");
        let at = at(&f);
        let primal = f.compile(jit).expect("the function compiles");
        let grad = f
            .gradient(None, GradOptions::default())
            .expect("differentiates")
            .compile(jit)
            .expect("the gradient compiles");
        // Native results against the interpreter's.
        let value = f.eval(&at).expect("the interpreter runs it");
        let native = primal.call(&at).expect("the native function runs");
        assert_eq!(value.as_real(), native.as_real(), "{file}: primal");
        let (v, grads) = grad.call(&at).expect("the native gradient runs");
        let (want_v, want_grads) = f
            .gradient(None, GradOptions::default())
            .expect("differentiates")
            .eval(&at)
            .expect("the interpreter runs the gradient");
        assert_eq!(v, want_v, "{file}: value of the gradient");
        for (g, w) in grads.iter().zip(&want_grads) {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            g.flatten(&mut a);
            w.flatten(&mut b);
            for (x, y) in a.iter().zip(&b) {
                assert!(
                    (x - y).abs() <= 1e-12 * x.abs().max(y.abs()),
                    "{file}: {x} vs {y}"
                );
            }
        }
        let sig = f.signature();
        let bound = gradlift::lang::value::bind_sizes(f.name(), sig, &at).expect("sizes");
        let sizes = sig.size_vars.iter().map(|v| bound[v]).collect();
        let inputs = at
            .iter()
            .map(|v| {
                let mut xs = Vec::new();
                v.flatten(&mut xs);
                xs
            })
            .collect();
        let grad_len = 1 + grads.iter().map(flat_len).sum::<usize>();
        Pair {
            primal,
            grad,
            sizes,
            inputs,
            primal_out: vec![0.0; 1],
            grad_out: vec![0.0; grad_len],
        }
    }

    fn primal(&mut self) {
        let inputs: Vec<&[f64]> = self.inputs.iter().map(Vec::as_slice).collect();
        self.primal
            .native()
            .call_flat(&self.sizes, &inputs, &mut self.primal_out)
            .expect("the primal runs");
    }

    fn gradient(&mut self) {
        let inputs: Vec<&[f64]> = self.inputs.iter().map(Vec::as_slice).collect();
        self.grad
            .native()
            .call_flat(&self.sizes, &inputs, &mut self.grad_out)
            .expect("the gradient runs");
    }
}

fn flat_len(v: &Value) -> usize {
    let mut xs = Vec::new();
    v.flatten(&mut xs);
    xs.len()
}

/// Reals near 1, so that products of 10⁶ of them stay normal numbers.
fn near_one(n: usize, k: usize) -> Vec<f64> {
    (0..n)
        .map(|i| 0.999 + ((i * k) % 1000) as f64 * 2e-6)
        .collect()
}

fn native(c: &mut Criterion) {
    let jit = Jit::new().expect("a JIT for the host");
    let mut g = c.benchmark_group("native");
    g.sample_size(20);
    for n in [1_000, 1_000_000] {
        let examples: [(&str, &str, Vec<Value>); 3] = [
            (
                "dot",
                "examples/dot.grad",
                vec![
                    Value::reals(&near_one(n, 7919)),
                    Value::reals(&near_one(n, 104729)),
                ],
            ),
            (
                "prod",
                "examples/prod.grad",
                vec![Value::reals(&near_one(n, 7919))],
            ),
            (
                "logsumexp",
                "examples/logsumexp.grad",
                vec![Value::reals(&near_one(n, 104729))],
            ),
        ];
        for (name, file, at) in examples {
            let mut pair = Pair::new(&jit, file, |_| at);
            g.bench_function(BenchmarkId::new(format!("{name}_primal"), n), |b| {
                b.iter(|| pair.primal())
            });
            g.bench_function(BenchmarkId::new(format!("{name}_gradient"), n), |b| {
                b.iter(|| pair.gradient())
            });
        }
    }
    let at = Args::parse(
        "--at",
        "rate=0.7, cap=40, obs=[4.644121, 10.053153, 19.111462, 30.172821, 39.461555, \
         45.106019, 47.889332, 49.120644, 49.639065, 49.852771]",
    )
    .expect("arguments");
    let mut growth = Pair::new(&jit, "examples/logistic_growth.grad", |f| {
        f.args(&at).expect("the loss's arguments")
    });
    g.bench_function(BenchmarkId::new("logistic_growth_primal", 4000), |b| {
        b.iter(|| growth.primal())
    });
    g.bench_function(BenchmarkId::new("logistic_growth_gradient", 4000), |b| {
        b.iter(|| growth.gradient())
    });
    g.finish();
}

criterion_group!(benches, native);
criterion_main!(benches);
