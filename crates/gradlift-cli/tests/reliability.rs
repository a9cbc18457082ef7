//! The `gradlift` binary at scale and at the limits: a 100,000-binding
//! `let` chain and a 10,000-deep expression evaluate and differentiate on
//! both engines with the main thread's stack limited to 8 MiB; sizes whose
//! workspace would overflow are a clean error; non-finite values print as
//! IEEE results.

use gradlift_lang::testing::{let_chain, nested};
use std::path::PathBuf;
use std::process::{Command, Output};

/// Runs `gradlift` with `args` under `ulimit -s 8192` (an 8 MiB main stack).
fn gradlift_8mib(args: &[&str]) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg("ulimit -s 8192 && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_gradlift"))
        .args(args)
        .output()
        .expect("the gradlift binary runs")
}

fn temp_file(name: &str, contents: &str) -> PathBuf {
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "gradlift-reliability-{}-{name}",
        std::process::id()
    ));
    std::fs::write(&path, contents).expect("write a temporary file");
    path
}

fn json(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

/// Fails cleanly: a non-zero status, an `error:` line, no panic.
fn clean_failure(out: &Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "expected a failure");
    assert!(out.status.code().is_some(), "killed by a signal: {err}");
    assert!(err.contains("error:"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

fn at_scale(name: &str, text: String, steps: usize) {
    let path = temp_file(name, &text);
    let file = path.to_str().unwrap();
    let mut x = 2.0f64;
    for _ in 0..steps {
        x = x * 0.9999 + 0.0001;
    }
    let slope = 0.9999f64.powi(steps as i32);
    for engine in ["jit", "interp"] {
        let out = gradlift_8mib(&["grad", file, "--at", "x0=2", "--engine", engine, "--json"]);
        let v = json(&out);
        let value = v["value"].as_f64().unwrap();
        let grad = v["gradient"]["x0"].as_f64().unwrap();
        assert!((value - x).abs() <= 1e-9 * x, "{engine}: {value} vs {x}");
        assert!(
            (grad - slope).abs() <= 1e-9 * slope,
            "{engine}: {grad} vs {slope}"
        );
        let out = gradlift_8mib(&["eval", file, "--at", "x0=2", "--engine", engine, "--json"]);
        let value = json(&out)["value"].as_f64().unwrap();
        assert!((value - x).abs() <= 1e-9 * x, "{engine}: {value} vs {x}");
    }
    std::fs::remove_file(path).ok();
}

#[test]
fn let_chain_of_100k_bindings_on_an_8mib_stack() {
    at_scale("chain.grad", let_chain(100_000), 100_000);
}

#[test]
fn expression_nested_10k_deep_on_an_8mib_stack() {
    at_scale("nest.grad", nested(10_000), 10_000);
}

/// `s`×`s` reals: at s = 2³² the byte count (2⁶⁷) overflows 64 bits, at
/// s = 2⁴⁰ so does the element count; a size beyond 2⁴⁰ is refused on
/// entry. Every case is an error, on both engines, for the value and the
/// gradient.
#[test]
fn workspace_overflow_is_an_error() {
    let path = temp_file(
        "square.grad",
        "def f(s: size, x: R) -> R =\n  reduce (+) 0 (map (r. reduce (+) 0 r) (replicate(s, replicate(s, x))))\n",
    );
    let file = path.to_str().unwrap();
    for s in [
        "4294967296",
        "1099511627776",
        "1099511627777",
        "9223372036854775807",
    ] {
        for engine in ["jit", "interp"] {
            for command in ["eval", "grad"] {
                let at = format!("s={s}, x=1");
                let out = gradlift_8mib(&[command, file, "--at", &at, "--engine", engine]);
                clean_failure(&out);
            }
        }
    }
    let out = gradlift_8mib(&["grad", file, "--at", "s=3, x=1", "--json"]);
    assert_eq!(json(&out)["gradient"]["x"].as_f64(), Some(9.0));
    std::fs::remove_file(path).ok();
}

/// IEEE results on the command line: non-finite inputs, `log` of a
/// negative number, division by zero, on both engines.
#[test]
fn non_finite_values_print_as_ieee_results() {
    let path = temp_file("ieee.grad", "def f(x: R, y: R) -> R = log(x) + 1 / y\n");
    let file = path.to_str().unwrap();
    for engine in ["jit", "interp"] {
        let run = |at: &str| {
            json(&gradlift_8mib(&[
                "grad", file, "--at", at, "--engine", engine, "--json",
            ]))
        };
        // log(-1) is NaN; its derivative 1/x is -1.
        let v = run("x=-1, y=1");
        assert_eq!(v["value"], "nan", "{engine}");
        assert_eq!(v["gradient"]["x"].as_f64(), Some(-1.0), "{engine}");
        // 1/0 = inf, d(1/y)/dy = -1/y² = -inf.
        let v = run("x=1, y=0");
        assert_eq!(v["value"], "inf", "{engine}");
        assert_eq!(v["gradient"]["y"], "-inf", "{engine}");
        // NaN and infinity in, IEEE out.
        let v = run("x=nan, y=inf");
        assert_eq!(v["value"], "nan", "{engine}");
        assert_eq!(v["gradient"]["x"], "nan", "{engine}");
        assert_eq!(v["gradient"]["y"].as_f64(), Some(-0.0), "{engine}");
    }
    std::fs::remove_file(path).ok();
}
