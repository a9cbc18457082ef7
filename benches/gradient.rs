//! Differentiation scale: building the gradient program of a `let` chain of
//! n bindings (inlining, then the UNF route or the direct route with sparse
//! continuations, and the UNF route followed by the `opt` pass), at n = 1k,
//! 10k, 100k.
//!
//! `cargo bench --bench gradient`; medians in
//! `target/criterion/gradient/<route>/<n>/new/estimates.json`.

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion};
use gradlift_ad::direct::{Construction, Route};
use gradlift_ad::pipeline::{gradient, Options};
use gradlift_lang::check_source;

fn let_chain(n: usize) -> String {
    let mut s = String::from("def chain(x0: R) -> R =\n");
    for i in 1..=n {
        s.push_str(&format!("  let x{i} = x{} * 0.9999 + 0.0001 in\n", i - 1));
    }
    s.push_str(&format!("  x{n}\n"));
    s
}

fn differentiate(c: &mut Criterion) {
    let mut g = c.benchmark_group("gradient");
    g.sample_size(10);
    for n in [1_000, 10_000, 100_000] {
        let module = check_source("chain.grad", &let_chain(n)).expect("checks");
        for (name, route, optimize) in [
            ("unf", Route::Unf, false),
            ("direct", Route::Direct, false),
            ("unf+opt", Route::Unf, true),
        ] {
            let options = Options {
                route,
                construction: Construction::Sparse,
                optimize,
                checkpoint: None,
            };
            g.bench_with_input(BenchmarkId::new(name, n), &module, |b, m| {
                // The gradient program is dropped outside the timed region.
                b.iter_batched(
                    || (),
                    |()| gradient(m, 0, None, options).expect("differentiates"),
                    BatchSize::LargeInput,
                )
            });
        }
    }
    g.finish();
}

criterion_group!(benches, differentiate);
criterion_main!(benches);
