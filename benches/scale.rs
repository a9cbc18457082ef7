//! Compile time and peak memory against program size: a `let` chain, a
//! nested expression, and `let` chains whose gradients keep a value of
//! every step for the reverse pass, each step reading the two, three or
//! four values before it (`live_chain`), of 1,000, 10,000 and 100,000
//! steps through every stage. Each size runs in a fresh process (this binary, re-executed), so
//! that its peak resident memory (`VmHWM` of /proc/self/status) is its own.
//!
//! `cargo bench --bench scale` prints a Markdown table (docs/reliability.md).

use gradlift::{GradOptions, Jit, Program, Value};
use gradlift_lang::testing::{let_chain, live_chain, nested};
use std::time::Instant;

fn peak_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmHWM:"))?.to_string();
            line.split_whitespace().nth(1)?.parse().ok()
        })
        .unwrap_or(0)
}

/// One size, in this process: prints one table row.
fn measure(shape: &str, n: usize) {
    let text = match shape {
        "let" => let_chain(n),
        "live2" => live_chain(n, 2),
        "live3" => live_chain(n, 3),
        "live4" => live_chain(n, 4),
        _ => nested(n),
    };
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    let program = Program::parse("scale.grad", &text).unwrap();
    let check = ms(t);
    let f = program.last_function().unwrap();
    let t = Instant::now();
    let g = f.gradient(None, GradOptions::default()).unwrap();
    let differentiate = ms(t);
    let jit = Jit::new().unwrap();
    let t = Instant::now();
    let primal = f.compile(&jit).unwrap();
    let compile_primal = ms(t);
    let t = Instant::now();
    let native = g.compile(&jit).unwrap();
    let compile_gradient = ms(t);
    let args = [Value::Real(2.0)];
    let (v, grads) = native.call(&args).unwrap();
    assert_eq!(primal.call(&args).unwrap().as_real(), Some(v));
    if shape.starts_with("live") {
        // The interpreter's gradient, bit for bit (it runs the same
        // program), where it takes seconds, not minutes.
        if n <= 10_000 {
            let (_, want) = g.eval(&args).unwrap();
            assert!(want[0].same(&grads[0]), "{shape} {n}");
        }
    } else {
        assert!((grads[0].as_real().unwrap() - 0.9999f64.powi(n as i32)).abs() < 1e-9);
    }
    let total = check + differentiate + compile_primal + compile_gradient;
    println!(
        "| {shape} | {n} | {check:.1} | {differentiate:.1} | {compile_primal:.1} | {compile_gradient:.1} | {total:.1} | {:.1} |",
        peak_kib() as f64 / 1024.0
    );
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    if let [shape, n] = args.as_slice() {
        measure(shape, n.parse().expect("a size"));
        return;
    }
    println!("| program | steps | parse + check (ms) | differentiate (ms) | compile function (ms) | compile gradient (ms) | total (ms) | peak RSS (MiB) |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    let me = std::env::current_exe().unwrap();
    for shape in ["let", "nested", "live2", "live3", "live4"] {
        for n in [1_000, 10_000, 100_000] {
            // An 8 MiB main stack, as in a shell with the usual limit.
            let status = std::process::Command::new("sh")
                .arg("-c")
                .arg("ulimit -s 8192 && exec \"$0\" \"$@\"")
                .arg(&me)
                .args([shape, &n.to_string()])
                .status()
                .unwrap();
            assert!(status.success(), "{shape} {n}");
        }
    }
}
