//! Front-end scale: parse, type-check, print and interpret a `let` chain of
//! n bindings and an expression nested n deep, at n = 1k, 10k, 100k.
//!
//! `cargo bench --bench front_end`; medians are in
//! `target/criterion/<group>/<n>/new/estimates.json`.

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion};
use gradlift_lang::{check_module, interp, parse_module, Value};
use std::hint::black_box;

fn let_chain(n: usize) -> String {
    let mut s = String::from("def chain(x0: R) -> R =\n");
    for i in 1..=n {
        s.push_str(&format!("  let x{i} = x{} * 0.9999 + 0.0001 in\n", i - 1));
    }
    s.push_str(&format!("  x{n}\n"));
    s
}

fn front_end(c: &mut Criterion) {
    for n in [1_000, 10_000, 100_000] {
        let text = let_chain(n);
        let module = parse_module(&text).expect("parses");
        let checked = check_module(module.clone()).expect("type-checks");
        let mut g = c.benchmark_group("let_chain");
        g.sample_size(10);
        g.bench_with_input(BenchmarkId::new("parse", n), &text, |b, t| {
            b.iter(|| parse_module(black_box(t)).expect("parses"))
        });
        g.bench_with_input(BenchmarkId::new("check", n), &module, |b, m| {
            b.iter_batched(
                || m.clone(),
                |m| check_module(black_box(m)).expect("type-checks"),
                BatchSize::LargeInput,
            )
        });
        g.bench_with_input(BenchmarkId::new("print", n), &module, |b, m| {
            b.iter(|| black_box(m).to_string())
        });
        g.bench_with_input(BenchmarkId::new("interpret", n), &checked, |b, m| {
            b.iter(|| interp::call(black_box(m), 0, &[Value::Real(2.0)]).expect("evaluates"))
        });
        g.finish();
    }
}

criterion_group!(benches, front_end);
criterion_main!(benches);
