//! Compiling and dropping 10,000 functions in one process keeps resident
//! memory bounded: the native code of a dropped function is freed.
//!
//! Alone in its test binary, so that no other test allocates meanwhile.

use gradlift::{GradOptions, Jit, Program, Value};

/// Resident memory of this process in KiB (Linux: `VmRSS` of
/// /proc/self/status); `None` elsewhere.
fn resident_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn compiling_and_dropping_10k_functions_keeps_memory_bounded() {
    let text = "def f(A: [R; n], x: R) -> R =\n  reduce (+) 0 (map (a. sin(a * x) + exp(a) / (1 + a * a)) A)";
    let program = Program::parse("f.grad", text).unwrap();
    let f = program.last_function().unwrap();
    let g = f.gradient(None, GradOptions::default()).unwrap();
    // Without the compile cache, which would hand out one function.
    let jit = Jit::new().unwrap().cache(false);
    let args = [Value::reals(&[0.5, -1.0, 2.0]), Value::Real(0.3)];
    let (want, _) = g.eval(&args).unwrap();
    let compile_and_drop = |count: usize| {
        for _ in 0..count {
            let compiled = g.compile(&jit).unwrap();
            let (v, _) = compiled.call(&args).unwrap();
            assert_eq!(v.to_bits(), want.to_bits());
            let primal = f.compile(&jit).unwrap();
            assert_eq!(primal.call(&args).unwrap().as_real(), Some(want));
        }
    };
    // Warm up (1,000 compilations: each round compiles the gradient and
    // the function): the allocator's pools and the JIT's first mappings.
    compile_and_drop(500);
    let Some(before) = resident_kib() else {
        eprintln!("no /proc/self/status: resident memory not measured");
        return;
    };
    // 9,000 more: 10,000 in all.
    compile_and_drop(4_500);
    let after = resident_kib().unwrap();
    eprintln!(
        "resident memory after 1,000 compilations {before} KiB, after 10,000 {after} KiB ({:+} KiB)",
        after as i64 - before as i64
    );
    // Code kept alive costs at least a page per function: 9,000 functions,
    // 35 MiB at the least (about 75 MiB measured with the code leaked).
    assert!(
        after < before + 16 * 1024,
        "resident memory grew from {before} KiB to {after} KiB"
    );
}
