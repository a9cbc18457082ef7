//! Stack safety: very long `let` chains and very deep expressions go through
//! every front-end stage (parse, type-check, print, re-parse, evaluate, drop)
//! on a thread with the default 8 MiB main-thread stack.

use gradlift_lang::testing::{let_chain, nested};
use gradlift_lang::{check_module, interp, parse_module, Value};

fn run_on_8mib_thread(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(f)
        .expect("spawn")
        .join()
        .expect("no stack overflow or panic");
}

fn through_every_stage(text: String, x: f64, expected: f64) {
    let module = parse_module(&text).expect("parses");
    let copy = module.clone();
    assert!(format!("{copy:?}").len() > text.len());
    drop(copy);
    let printed = module.to_string();
    let reparsed = parse_module(&printed).expect("printed text parses");
    assert!(reparsed.same(&module));
    drop(reparsed);
    let checked = check_module(module).expect("type-checks");
    let v = interp::call(&checked, 0, &[Value::Real(x)]).expect("evaluates");
    let got = v.as_real().expect("a real");
    assert!(
        (got - expected).abs() <= 1e-9 * expected.abs(),
        "{got} vs {expected}"
    );
}

/// The value of n steps of x ↦ x·0.9999 + 0.0001, in the same order.
fn iterate(mut x: f64, n: usize) -> f64 {
    for _ in 0..n {
        x = x * 0.9999 + 0.0001;
    }
    x
}

#[test]
fn let_chain_of_100k_bindings() {
    run_on_8mib_thread(|| through_every_stage(let_chain(100_000), 2.0, iterate(2.0, 100_000)));
}

#[test]
fn expression_nested_10k_deep() {
    run_on_8mib_thread(|| through_every_stage(nested(10_000), 2.0, iterate(2.0, 10_000)));
}
