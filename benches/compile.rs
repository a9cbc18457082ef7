//! Compile latency per shipped example: text → native code, for the
//! function (parse, check, inline, simplify, lower, JIT) and for its value and
//! gradient (parse, check, inline, differentiate by the UNF route,
//! simplify, lower, JIT). The function is the file's last definition.
//!
//! `<example>/gradient_cached` is the same define repeated through the
//! compile cache of a `Jit` (`Program::parse_in`, `compile_gradient`): a
//! lookup. `<example>/gradient_disk` is the define a new process makes
//! with a disk cache that holds the gradient (`Jit::disk_cache`, the
//! memory cache off): parse, check, then load the stored code.
//!
//! `cargo bench --bench compile`; medians are in
//! `target/criterion/compile/<example>_<function|gradient>/new/estimates.json`.

use criterion::{criterion_group, criterion_main, Criterion};
use gradlift::{GradOptions, Jit, Program};
use std::hint::black_box;

fn examples() -> Vec<(String, String)> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("the examples directory")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "grad"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
            (stem, std::fs::read_to_string(&p).expect("an example"))
        })
        .collect()
}

fn compile(c: &mut Criterion) {
    // The cold compiles run with the compile cache off.
    let jit = Jit::new().expect("a JIT for the host").cache(false);
    let disk = std::env::temp_dir().join(format!("gradlift-bench-disk-{}", std::process::id()));
    let mut g = c.benchmark_group("compile");
    g.sample_size(20);
    for (name, text) in examples() {
        let differentiable = {
            let p = Program::parse(&name, &text).expect("the example parses");
            let f = p.last_function().expect("a definition");
            f.signature().ret == gradlift::Type::Real
        };
        g.bench_function(format!("{name}/function"), |b| {
            b.iter(|| {
                let p = Program::parse(&name, black_box(&text)).expect("parses");
                let f = p.last_function().expect("a definition");
                f.compile(&jit).expect("compiles")
            })
        });
        if differentiable {
            g.bench_function(format!("{name}/gradient"), |b| {
                b.iter(|| {
                    let p = Program::parse(&name, black_box(&text)).expect("parses");
                    let f = p.last_function().expect("a definition");
                    let grad = f
                        .gradient(None, GradOptions::default())
                        .expect("differentiates");
                    grad.compile(&jit).expect("compiles")
                })
            });
            // A repeated define through the compile cache of a `Jit`
            // that has compiled it once.
            let cached = Jit::new().expect("a JIT for the host");
            g.bench_function(format!("{name}/gradient_cached"), |b| {
                b.iter(|| {
                    let p = Program::parse_in(&cached, &name, black_box(&text)).expect("parses");
                    let f = p.last_function().expect("a definition");
                    f.compile_gradient(&cached, None, GradOptions::default())
                        .expect("compiles")
                })
            });
            // The disk cache alone (as a new process finds it): parse,
            // then load the stored code; nothing is kept in memory.
            let stored = Jit::new()
                .expect("a JIT for the host")
                .cache(false)
                .disk_cache(&disk);
            g.bench_function(format!("{name}/gradient_disk"), |b| {
                b.iter(|| {
                    let p = Program::parse(&name, black_box(&text)).expect("parses");
                    let f = p.last_function().expect("a definition");
                    f.compile_gradient(&stored, None, GradOptions::default())
                        .expect("compiles")
                })
            });
        }
    }
    g.finish();
    let _ = std::fs::remove_dir_all(&disk);
}

criterion_group!(benches, compile);
criterion_main!(benches);
