//! Stack safety at scale, through every stage including the JIT: a
//! 100,000-binding `let` chain and a 10,000-deep nested expression are
//! parsed, checked, evaluated, differentiated by both routes, compiled to
//! native code and called, on a thread with an 8 MiB stack; the value and
//! the gradient check against the closed form.

use gradlift::{GradOptions, Jit, Program, Route, Value};
use gradlift_lang::testing::{let_chain, nested};

/// n steps of x ↦ x·0.9999 + 0.0001 in the program's order, and the
/// derivative 0.9999ⁿ.
fn closed_form(mut x: f64, n: usize) -> (f64, f64) {
    for _ in 0..n {
        x = x * 0.9999 + 0.0001;
    }
    (x, 0.9999f64.powi(n as i32))
}

fn on_8mib_thread(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(f)
        .expect("spawn")
        .join()
        .expect("no stack overflow or panic");
}

fn every_stage(text: String, steps: usize) {
    let (value, slope) = closed_form(2.0, steps);
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs();
    let program = Program::parse("scale.grad", &text).expect("checks");
    let f = program.last_function().unwrap();
    let args = [Value::Real(2.0)];
    let interpreted = f.eval(&args).unwrap().as_real().unwrap();
    assert!(close(interpreted, value), "{interpreted} vs {value}");
    let jit = Jit::new().unwrap();
    let native = f.compile(&jit).expect("compiles").call(&args).unwrap();
    assert!(native.same(&Value::Real(interpreted)), "{native}");
    for route in [Route::Unf, Route::Direct] {
        let g = f
            .gradient(
                None,
                GradOptions {
                    route,
                    ..GradOptions::default()
                },
            )
            .expect("differentiates");
        let (v1, g1) = g.eval(&args).unwrap();
        let (v2, g2) = g.compile(&jit).expect("compiles").call(&args).unwrap();
        assert!(close(v1, value), "{route:?}: {v1} vs {value}");
        let d = g1[0].as_real().unwrap();
        assert!(close(d, slope), "{route:?}: {d} vs {slope}");
        assert_eq!(v1.to_bits(), v2.to_bits(), "{route:?}");
        assert!(g1[0].same(&g2[0]), "{route:?}: {g1:?} vs {g2:?}");
    }
}

#[test]
fn let_chain_of_100k_bindings_natively() {
    on_8mib_thread(|| every_stage(let_chain(100_000), 100_000));
}

#[test]
fn expression_nested_10k_deep_natively() {
    on_8mib_thread(|| every_stage(nested(10_000), 10_000));
}
