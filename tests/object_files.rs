//! Object files (`Jit::for_target(…).object(…)`, what `gradlift emit
//! --object` writes) linked with a C driver that calls them through the ABI
//! of docs/abi.md, for aarch64 (cross-compiled with `aarch64-linux-gnu-gcc
//! -static`, run under `qemu-aarch64`) and for the host (`cc`, run
//! directly). The values and gradients they print agree with the reference
//! interpreter on every case of `tests/examples_expected.json`.
//!
//! Without the tools the test says why on stderr and passes: `.ci/run`
//! installs them (Debian packages gcc-aarch64-linux-gnu and qemu-user).

use gradlift::{Args, GradOptions, Program, Type, Value};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Command;

/// One call the driver makes: the symbol, its `args` words (sizes; the
/// pointers are filled in by the driver), its inputs, the reals expected.
struct Call {
    symbol: String,
    sizes: Vec<i64>,
    inputs: Vec<Vec<f64>>,
    expected: Vec<f64>,
}

/// The calls of every example case (the function, and its gradient when
/// it returns a real) and the object defining them, for `triple`. The
/// symbols are prefixed by the case number, since examples share names.
fn cases(triple: &str) -> (Vec<Call>, Vec<u8>) {
    let root = env!("CARGO_MANIFEST_DIR");
    let cases: Vec<serde_json::Value> = serde_json::from_str(
        &std::fs::read_to_string(format!("{root}/tests/examples_expected.json")).unwrap(),
    )
    .unwrap();
    let jit = gradlift::Jit::for_target(triple).unwrap();
    let mut calls = Vec::new();
    let mut closed = Vec::new();
    for (k, case) in cases.iter().enumerate() {
        let file = case["file"].as_str().unwrap();
        let text = std::fs::read_to_string(format!("{root}/{file}")).unwrap();
        let program = Program::parse(file, &text).unwrap();
        let f = program.function(case["fn"].as_str().unwrap()).unwrap();
        let args = f.args(&Args::from_json(&case["at"]).unwrap()).unwrap();
        let sig = f.signature();
        let sizes = gradlift::lang::value::bind_sizes(f.name(), sig, &args).unwrap();
        let c = f.closed().unwrap();
        let size_words: Vec<i64> = c.size_vars.iter().map(|v| sizes[v]).collect();
        let inputs: Vec<Vec<f64>> = sig
            .params
            .iter()
            .zip(&args)
            .filter(|((_, t), _)| t.is_some())
            .map(|(_, v)| flat(v))
            .collect();
        let mut c = c.clone();
        c.name = format!("case{k}_{}", c.name).into();
        calls.push(Call {
            symbol: c.name.to_string(),
            sizes: size_words.clone(),
            inputs: inputs.clone(),
            expected: flat(&f.eval(&args).unwrap()),
        });
        closed.push(c);
        if sig.ret == Type::Real {
            let g = f.gradient(None, GradOptions::default()).unwrap();
            // A binomial checkpoint schedule runs in the JIT's runtime, which
            // an object file has no copy of (docs/abi.md); its refusal is
            // tested below.
            if g.term().to_string().contains("binomial") {
                continue;
            }
            let (value, grads) = g.eval(&args).unwrap();
            let mut expected = vec![value];
            for x in &grads {
                x.flatten(&mut expected);
            }
            let mut gc = g.closed();
            gc.name = format!("case{k}_{}", gc.name).into();
            calls.push(Call {
                symbol: gc.name.to_string(),
                sizes: size_words,
                inputs,
                expected,
            });
            closed.push(gc);
        }
    }
    let refs: Vec<_> = closed.iter().collect();
    let object = jit.object(&refs).unwrap();
    (calls, object)
}

fn flat(v: &Value) -> Vec<f64> {
    let mut out = Vec::new();
    v.flatten(&mut out);
    out
}

/// A C program that calls every function as docs/abi.md says (with the
/// workspace its `_workspace` function asks for, which must be enough: a
/// status 1 is printed as such and fails the comparison) and prints
/// `symbol status reals…` per call.
fn driver(calls: &[Call]) -> String {
    let mut c = String::from(
        "#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n\
         typedef int64_t (*fn_t)(const int64_t *, double *, int64_t, uint8_t *, int64_t, int64_t *);\n\
         typedef int64_t (*bound_t)(const int64_t *);\n\
         static uint8_t *ws; static int64_t ws_len;\n\
         static void run(const char *name, fn_t f, bound_t bound, int64_t *args, int64_t out_len) {\n\
           double *out = malloc(sizeof(double) * (out_len > 0 ? out_len : 1));\n\
           int64_t need = bound(args);\n\
           if (need < 0) { printf(\"%s no-bound\\n\", name); free(out); return; }\n\
           if (need > ws_len) {\n\
             ws_len = need;\n\
             ws = realloc(ws, ws_len);\n\
             if (!ws) { perror(\"realloc\"); exit(2); }\n\
           }\n\
           int64_t info = 0;\n\
           int64_t status = f(args, out, out_len, ws, ws_len, &info);\n\
           printf(\"%s %lld\", name, (long long)status);\n\
           if (status == 0) for (int64_t i = 0; i < out_len; i++) printf(\" %.17g\", out[i]);\n\
           printf(\"\\n\");\n\
           free(out);\n\
         }\n",
    );
    for (k, call) in calls.iter().enumerate() {
        writeln!(
            c,
            "int64_t {0}(const int64_t *, double *, int64_t, uint8_t *, int64_t, int64_t *);\n\
             int64_t {0}_workspace(const int64_t *);",
            call.symbol
        )
        .unwrap();
        for (j, input) in call.inputs.iter().enumerate() {
            let reals: Vec<String> = input.iter().map(|x| format!("{x:e}")).collect();
            writeln!(
                c,
                "static double in{k}_{j}[] = {{{}}};",
                if reals.is_empty() {
                    "0".to_string()
                } else {
                    reals.join(", ")
                }
            )
            .unwrap();
        }
    }
    c.push_str("int main(void) {\n");
    for (k, call) in calls.iter().enumerate() {
        let mut words: Vec<String> = call.sizes.iter().map(|s| format!("{s}")).collect();
        words.extend((0..call.inputs.len()).map(|j| format!("(int64_t)in{k}_{j}")));
        words.push("0".into());
        writeln!(
            c,
            "  {{ int64_t args[] = {{{}}}; run(\"{}\", {}, {}_workspace, args, {}); }}",
            words.join(", "),
            call.symbol,
            call.symbol,
            call.symbol,
            call.expected.len()
        )
        .unwrap();
    }
    c.push_str("  return 0;\n}\n");
    c
}

/// Whether `program --version` runs.
fn have(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("gradlift-objects-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Links `object` with the driver by `cc` and runs it (through `runner`
/// when given), comparing what it prints with the interpreter.
fn link_run_compare(triple: &str, cc: &str, cc_flags: &[&str], runner: Option<&str>) {
    let (calls, object) = cases(triple);
    let dir = scratch(triple);
    let obj = dir.join("functions.o");
    let src = dir.join("driver.c");
    let exe = dir.join("driver");
    std::fs::write(&obj, object).unwrap();
    std::fs::write(&src, driver(&calls)).unwrap();
    let link = Command::new(cc)
        .args(cc_flags)
        .args(["-O1", "-o"])
        .arg(&exe)
        .arg(&src)
        .arg(&obj)
        .arg("-lm")
        .output()
        .unwrap();
    assert!(
        link.status.success(),
        "{cc} failed:\n{}",
        String::from_utf8_lossy(&link.stderr)
    );
    let out = match runner {
        Some(r) => Command::new(r).arg(&exe).output().unwrap(),
        None => Command::new(&exe).output().unwrap(),
    };
    assert!(
        out.status.success(),
        "the driver failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let (reals, inexact) = compare(&calls, &text);
    std::fs::remove_dir_all(&dir).unwrap();
    eprintln!(
        "{triple}: {} calls agree with the interpreter ({reals} reals, {inexact} not bit-identical)",
        calls.len()
    );
}

/// Every line is `symbol 0 reals…` with the expected reals, bit for bit
/// where the operations are the same, and within 1e-12 relative where the
/// target's C library rounds a transcendental function differently.
/// Returns the number of reals compared and of those not bit-identical.
fn compare(calls: &[Call], text: &str) -> (usize, usize) {
    let (mut reals, mut inexact) = (0, 0);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), calls.len(), "{text}");
    for (call, line) in calls.iter().zip(lines) {
        let mut words = line.split(' ');
        assert_eq!(words.next(), Some(call.symbol.as_str()));
        assert_eq!(words.next(), Some("0"), "status of {}", call.symbol);
        let got: Vec<f64> = words.map(|w| w.parse().unwrap()).collect();
        assert_eq!(got.len(), call.expected.len(), "{}", call.symbol);
        for (j, (g, w)) in got.iter().zip(&call.expected).enumerate() {
            reals += 1;
            inexact += usize::from(g.to_bits() != w.to_bits());
            assert!(
                g.to_bits() == w.to_bits()
                    || (g - w).abs() <= 1e-12 * w.abs().max(1e-300)
                    || (g.is_nan() && w.is_nan()),
                "{}[{j}]: native {g}, interpreter {w}",
                call.symbol
            );
        }
    }
    (reals, inexact)
}

#[test]
fn aarch64_objects_agree_with_the_interpreter_under_qemu() {
    let (cc, qemu) = ("aarch64-linux-gnu-gcc", "qemu-aarch64");
    for tool in [cc, qemu] {
        if !have(tool) {
            eprintln!(
                "skipped: `{tool}` is not installed (Debian packages gcc-aarch64-linux-gnu \
                 and qemu-user; .ci/run installs them)"
            );
            return;
        }
    }
    link_run_compare("aarch64-unknown-linux-gnu", cc, &["-static"], Some(qemu));
}

#[test]
fn host_objects_agree_with_the_interpreter() {
    if !cfg!(all(target_os = "linux", target_arch = "x86_64")) {
        eprintln!("skipped: the host object test runs on x86_64 Linux");
        return;
    }
    if !have("cc") {
        eprintln!("skipped: no C compiler `cc`");
        return;
    }
    link_run_compare("x86_64-unknown-linux-gnu", "cc", &[], None);
}

#[test]
fn unknown_targets_are_errors() {
    assert!(gradlift::Jit::for_target("nonsense-cpu-os").is_err());
    let jit = gradlift::Jit::for_target("aarch64-unknown-linux-gnu").unwrap();
    let program = Program::parse("<t>", "def f(x: R) -> R = x * x").unwrap();
    // Code for another target cannot be run in this process.
    assert!(program.last_function().unwrap().compile(&jit).is_err());
}

/// An object file of a gradient with a binomial checkpoint schedule is a
/// clear error, not an object with an unresolved symbol.
#[test]
fn binomial_schedules_are_refused_in_objects() {
    let text = "def f(x: R, s: size) -> R =\n  @checkpoint(binomial 3) foldl (a, i. a * 0.5 + sin(a)) x (iota(s))\n";
    let program = Program::parse("b.grad", text).unwrap();
    let f = program.last_function().unwrap();
    let g = f.gradient(None, GradOptions::default()).unwrap();
    let jit = gradlift::Jit::for_target("aarch64-unknown-linux-gnu").unwrap();
    let err = jit.object(&[&g.closed()]).unwrap_err().to_string();
    assert!(err.contains("binomial"), "{err}");
    // Fixed blocks are plain loops and do go into objects.
    let text = text.replace("binomial 3", "4");
    let program = Program::parse("b.grad", &text).unwrap();
    let g = program
        .last_function()
        .unwrap()
        .gradient(None, GradOptions::default())
        .unwrap();
    assert!(!jit.object(&[&g.closed()]).unwrap().is_empty());
}
