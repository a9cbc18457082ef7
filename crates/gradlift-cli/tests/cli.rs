//! End-to-end tests of the `gradlift` binary: bad input of every kind is a
//! clean error (non-zero status, no panic, a one-line first line, and a
//! position with a caret when the text is at fault), and good input prints
//! the expected values.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

const DOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/dot.grad");
const ODE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/ode.grad");

/// Runs `gradlift` with `args`.
fn gradlift(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gradlift"))
        .args(args)
        .output()
        .expect("the gradlift binary runs")
}

/// A fresh file under the temporary directory holding `contents`; `name`
/// ends the file name (for the extension).
fn temp_file(name: &str, contents: &str) -> PathBuf {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "gradlift-cli-test-{}-{}-{name}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&path, contents).expect("write a temporary file");
    path
}

/// A path under the temporary directory that does not exist.
fn missing_path(name: &str) -> PathBuf {
    let path = temp_file(name, "");
    std::fs::remove_file(&path).expect("remove a temporary file");
    path
}

fn text(p: &Path) -> &str {
    p.to_str().expect("temporary paths are UTF-8")
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("stdout is UTF-8")
}

fn stderr(out: &Output) -> String {
    String::from_utf8(out.stderr.clone()).expect("stderr is UTF-8")
}

/// Checks that `out` is a clean failure and returns the first line of
/// stderr, which must start with `prefix`.
#[track_caller]
fn failure(out: &Output, prefix: &str) -> String {
    let err = stderr(out);
    assert!(
        !out.status.success(),
        "expected a failure, got success; stdout: {}",
        stdout(out)
    );
    assert_eq!(out.status.code(), Some(1), "stderr: {err}");
    assert!(!err.contains("panicked"), "gradlift panicked: {err}");
    assert!(stdout(out).is_empty(), "stdout: {}", stdout(out));
    let first = err.lines().next().unwrap_or("").to_string();
    assert!(
        first.starts_with(prefix),
        "first line {first:?} does not start with {prefix:?}; stderr:\n{err}"
    );
    assert!(first.len() > prefix.len(), "empty message: {err}");
    first
}

/// Checks that stderr shows the source line containing `line` and a caret
/// line whose first `^` is under the start of `at` within that line.
#[track_caller]
fn caret_under(out: &Output, line: &str, at: &str) {
    let err = stderr(out);
    let lines: Vec<&str> = err.lines().collect();
    let src = lines
        .iter()
        .position(|l| l.contains(" | ") && l.ends_with(line))
        .unwrap_or_else(|| panic!("no source line {line:?} in:\n{err}"));
    let caret = lines
        .get(src + 1)
        .unwrap_or_else(|| panic!("no caret line in:\n{err}"));
    let col = caret
        .find('^')
        .unwrap_or_else(|| panic!("no caret in:\n{err}"));
    let shown = &lines[src][col..];
    assert!(
        shown.starts_with(at),
        "the caret points at {shown:?}, not at {at:?}:\n{err}"
    );
}

// ---- bad input ----

#[test]
fn parse_error() {
    let path = temp_file("parse.grad", "# a comment\ndef f(x: R) -> R = x + * 2\n");
    let out = gradlift(&["eval", text(&path), "--at", "x=1"]);
    let first = failure(&out, &format!("{}:2:24: error: ", text(&path)));
    assert!(first.contains("`*`"), "{first}");
    caret_under(&out, "def f(x: R) -> R = x + * 2", "* 2");
}

#[test]
fn parse_error_at_the_end_of_the_file() {
    let path = temp_file("eof.grad", "def f(x: R) -> R = (x + 1\n");
    let out = gradlift(&["eval", text(&path), "--at", "x=1"]);
    let first = failure(&out, &format!("{}:", text(&path)));
    assert!(first.contains("end of input"), "{first}");
    assert!(stderr(&out).contains('^'), "{}", stderr(&out));
}

#[test]
fn unexpected_character() {
    let path = temp_file("char.grad", "def f(x: R) = x $ 1\n");
    let out = gradlift(&["eval", text(&path), "--at", "x=1"]);
    let first = failure(&out, &format!("{}:1:17: error: ", text(&path)));
    assert!(first.contains('$'), "{first}");
    caret_under(&out, "def f(x: R) = x $ 1", "$ 1");
}

#[test]
fn type_error() {
    let path = temp_file(
        "type.grad",
        "def f(x: R, A: [R; n]) =\n  if x > 0 then x else A\n",
    );
    let out = gradlift(&["eval", text(&path), "--at", "x=1, A=[1]"]);
    let first = failure(&out, &format!("{}:2:24: error: ", text(&path)));
    assert!(
        first.contains("`R`") && first.contains("`[R; n]`"),
        "{first}"
    );
    caret_under(&out, "  if x > 0 then x else A", "A");
}

#[test]
fn unknown_variable() {
    let path = temp_file("unknown.grad", "def f(x: R) -> R = x + y\n");
    let out = gradlift(&["eval", text(&path), "--at", "x=1"]);
    let first = failure(&out, &format!("{}:1:24: error: ", text(&path)));
    assert!(first.contains("unknown variable `y`"), "{first}");
    caret_under(&out, "def f(x: R) -> R = x + y", "y");
}

#[test]
fn call_of_a_later_definition() {
    let path = temp_file(
        "later.grad",
        "def f(x: R) -> R = g(x)\ndef g(x: R) -> R = x\n",
    );
    let out = gradlift(&["eval", text(&path), "--at", "x=1"]);
    let first = failure(&out, &format!("{}:1:20: error: ", text(&path)));
    assert!(first.contains("`g`") && first.contains("later"), "{first}");
    caret_under(&out, "def f(x: R) -> R = g(x)", "g(x)");
}

#[test]
fn unknown_function() {
    let out = gradlift(&["eval", DOT, "--fn", "nope", "--at", "A=[1], B=[2]"]);
    let first = failure(&out, "error: ");
    assert!(first.contains("`nope`") && first.contains("dot"), "{first}");
}

#[test]
fn empty_program() {
    let path = temp_file("empty.grad", "# nothing here\n");
    let out = gradlift(&["eval", text(&path), "--at", ""]);
    let first = failure(&out, "error: ");
    assert!(first.contains("no function"), "{first}");
}

#[test]
fn size_mismatch_at_call_time() {
    let out = gradlift(&["eval", DOT, "--at", "A=[1,2,3], B=[1,2]"]);
    let first = failure(&out, "error: ");
    assert!(
        first.contains("dot") && first.contains('3') && first.contains('2'),
        "{first}"
    );
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
}

#[test]
fn ragged_matrix() {
    let path = temp_file("rows.grad", "def f(M: [[R; d]; m]) -> R = len(M)\n");
    let out = gradlift(&["eval", text(&path), "--at", "M=[[1,2],[3]]"]);
    let first = failure(&out, "error: ");
    assert!(first.contains("M[1]"), "{first}");
}

#[test]
fn index_out_of_bounds_at_run_time() {
    let path = temp_file("index.grad", "def f(A: [R; n]) -> R =\n  A[2] + 1\n");
    let out = gradlift(&["eval", text(&path), "--at", "A=[1,2]"]);
    let first = failure(&out, &format!("{}:2:3: error: ", text(&path)));
    assert!(first.contains("out of bounds"), "{first}");
    caret_under(&out, "  A[2] + 1", "A[2]");
}

#[test]
fn huge_size_at_run_time() {
    let path = temp_file("huge.grad", "def f(s: size) -> R = len(iota(s))\n");
    // The native code refuses the workspace, says so, and how to raise it.
    let out = gradlift(&["eval", text(&path), "--at", "s=1000000000000"]);
    let first = failure(&out, "error: the native code needs at least");
    assert!(first.contains("more than its limit of 4 GiB"), "{first}");
    assert!(
        stderr(&out).contains("--max-workspace 8TiB"),
        "{}",
        stderr(&out)
    );
    // The interpreter says where.
    let out = gradlift(&[
        "eval",
        text(&path),
        "--at",
        "s=1000000000000",
        "--engine",
        "interp",
    ]);
    let first = failure(&out, &format!("{}:1:27: error: ", text(&path)));
    assert!(
        first.contains("iota") && first.contains("interpreter"),
        "{first}"
    );
}

#[test]
fn the_workspace_limit_is_a_flag() {
    let path = temp_file(
        "limit.grad",
        "def f(A: [R; n]) -> R = let v = scanl (+) 0 A in reduce (+) 0 (map2 (*) (shift1L v) A) + reduce max (-inf) v\n",
    );
    let at = "A=[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]";
    let out = gradlift(&["eval", text(&path), "--at", at, "--max-workspace", "16"]);
    let first = failure(&out, "error: the native code needs at least");
    assert!(first.contains("more than its limit of 16 bytes"), "{first}");
    assert!(
        stderr(&out).contains("--max-workspace 1KiB is enough"),
        "{}",
        stderr(&out)
    );
    let out = gradlift(&["eval", text(&path), "--at", at, "--max-workspace", "1KiB"]);
    assert_eq!(stdout(&out).trim(), "10132.0", "{}", stderr(&out));
    let out = gradlift(&[
        "eval",
        text(&path),
        "--at",
        at,
        "--max-workspace",
        "4 parsecs",
    ]);
    assert!(
        stderr(&out).contains("is not a unit of bytes"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn size_arithmetic_that_overflows() {
    let path = temp_file(
        "overflow.grad",
        "def f(s: size, A: [R; 5*s]) -> R = len(A)\n",
    );
    let out = gradlift(&["eval", text(&path), "--at", "s=2000000000000000000, A=[]"]);
    let first = failure(&out, "error: ");
    assert!(first.contains("5*s"), "{first}");
}

#[test]
fn missing_parameter_in_at() {
    let out = gradlift(&["eval", DOT, "--at", "A=[1,2,3]"]);
    let first = failure(&out, "error: ");
    assert!(first.contains("`B"), "{first}");
}

#[test]
fn unknown_parameter_in_at() {
    let out = gradlift(&["eval", DOT, "--at", "A=[1], B=[2], C=3"]);
    let first = failure(&out, "--at:1:15: error: ");
    assert!(first.contains("`C`"), "{first}");
    caret_under(&out, "A=[1], B=[2], C=3", "C=3");
}

#[test]
fn repeated_parameter_in_at() {
    let out = gradlift(&["eval", DOT, "--at", "A=[1], B=[2], A=[3]"]);
    let first = failure(&out, "--at:1:15: error: ");
    assert!(first.contains("`A`"), "{first}");
    caret_under(&out, "A=[1], B=[2], A=[3]", "A=[3]");
}

#[test]
fn malformed_at_value() {
    let out = gradlift(&["eval", DOT, "--at", "A=[1,2"]);
    let first = failure(&out, "--at:1:7: error: ");
    assert!(first.contains("end of input"), "{first}");
    let err = stderr(&out);
    assert!(err.contains("1 | A=[1,2"), "{err}");
    let caret = err.lines().last().unwrap();
    assert_eq!(caret.find('^'), Some("1 | A=[1,2".len()), "{err}");
}

#[test]
fn malformed_at_number() {
    let out = gradlift(&["eval", DOT, "--at", "A=[1, x], B=[1, 2]"]);
    let first = failure(&out, "--at:1:7: error: ");
    assert!(first.contains("`x`"), "{first}");
    caret_under(&out, "A=[1, x], B=[1, 2]", "x]");
}

#[test]
fn at_value_of_the_wrong_shape() {
    let out = gradlift(&["eval", DOT, "--at", "A=5, B=[1]"]);
    let first = failure(&out, "--at:1:3: error: ");
    assert!(first.contains("`A`") && first.contains("[R; n]"), "{first}");
    caret_under(&out, "A=5, B=[1]", "5");
}

#[test]
fn size_parameter_that_is_not_whole() {
    let out = gradlift(&["eval", ODE, "--fn", "primal", "--at", "x=[1,2], s=2.5"]);
    let first = failure(&out, "--at:1:12: error: ");
    assert!(first.contains("`s`"), "{first}");
    caret_under(&out, "x=[1,2], s=2.5", "2.5");
}

#[test]
fn non_json_at_file() {
    let path = temp_file("bad.json", "{\"A\": [1, 2, 3], \"B\": [4, 5,\n");
    let at = format!("@{}", text(&path));
    let out = gradlift(&["eval", DOT, "--at", &at]);
    let first = failure(&out, "error: ");
    assert!(
        first.contains(text(&path)) && first.contains("JSON"),
        "{first}"
    );
}

#[test]
fn json_at_file_of_the_wrong_shape() {
    let path = temp_file("shape.json", "{\"A\": [1, 2, 3], \"B\": \"four\"}");
    let at = format!("@{}", text(&path));
    let out = gradlift(&["eval", DOT, "--at", &at]);
    let first = failure(&out, "error: ");
    assert!(first.contains("`B`"), "{first}");
    let path = temp_file("array.json", "[1, 2, 3]");
    let at = format!("@{}", text(&path));
    let out = gradlift(&["eval", DOT, "--at", &at]);
    let first = failure(&out, "error: ");
    assert!(first.contains("object"), "{first}");
}

#[test]
fn missing_file() {
    let path = missing_path("missing.grad");
    let out = gradlift(&["eval", text(&path), "--at", "x=1"]);
    let first = failure(&out, "error: ");
    assert!(first.contains(text(&path)), "{first}");
}

#[test]
fn missing_at_file() {
    let path = missing_path("missing.json");
    let at = format!("@{}", text(&path));
    let out = gradlift(&["eval", DOT, "--at", &at]);
    let first = failure(&out, "error: ");
    assert!(first.contains(text(&path)), "{first}");
}

// ---- good input ----

#[test]
fn eval_dot_json() {
    let out = gradlift(&["eval", DOT, "--at", "A=[1,2,3], B=[4,5,6]", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "{\"value\":32.0}\n");
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));
}

#[test]
fn eval_dot_plain() {
    let out = gradlift(&["eval", DOT, "--at", "A=[1,2,3], B=[4,5,6]"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "32.0\n");
    // Arguments in any order, whitespace free, empty arrays.
    let out = gradlift(&["eval", DOT, "--fn", "dot", "--at", " B = [ ] ,A=[]"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "0.0\n");
}

#[test]
fn eval_ode() {
    let out = gradlift(&[
        "eval",
        ODE,
        "--fn",
        "primal",
        "--at",
        "x=[1,2,3,4], s=10",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON output");
    let value: Vec<f64> = json["value"]
        .as_array()
        .expect("an array")
        .iter()
        .map(|v| v.as_f64().expect("a number"))
        .collect();
    // y' = f(x, y) from y(0) = 0 to t = 2 has y_i(t) = x_0 ⋯ x_i · t^(i+1)/(i+1)!,
    // a polynomial of degree ≤ 4, which RK4 integrates exactly:
    // [1·2, 1·2·4/2, 1·2·3·8/6, 1·2·3·4·16/24].
    let want = [2.0, 4.0, 8.0, 16.0];
    assert_eq!(value.len(), want.len(), "{value:?}");
    for (got, want) in value.iter().zip(want) {
        assert!((got - want).abs() < 1e-12, "{value:?}");
    }
    // The named function, and plain output.
    let out = gradlift(&["eval", ODE, "--fn", "primal", "--at", "s=1, x=[0.5]"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "[1.0]\n");
}

#[test]
fn eval_tuples_and_non_finite_values() {
    let path = temp_file(
        "tuple.grad",
        "def f(p: (R, [R; n]), x: R) = (p.1, p.0 / x, -p.0 / x, x - x)\n",
    );
    let out = gradlift(&["eval", text(&path), "--at", "p=(1, [2, 3]), x=0"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "([2.0, 3.0], inf, -inf, 0.0)\n");
    let out = gradlift(&["eval", text(&path), "--at", "p=(1, [2]), x=inf", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "{\"value\":[[2.0],0.0,-0.0,\"nan\"]}\n");
}

#[test]
fn eval_help_mentions_an_example() {
    let out = gradlift(&["eval", "--help"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let help = stdout(&out);
    assert!(
        help.contains("gradlift eval examples/dot.grad --at"),
        "{help}"
    );
    assert!(help.contains("--at"), "{help}");
}

#[test]
fn at_json_file() {
    let path = temp_file("args.json", "{\"B\": [4, 5, 6], \"A\": [1, 2, 3]}");
    let at = format!("@{}", text(&path));
    let out = gradlift(&["eval", DOT, "--at", &at, "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "{\"value\":32.0}\n");
    // Tuples as JSON arrays, non-finite numbers as strings.
    let prog = temp_file(
        "max.grad",
        "def f(p: (R, R), A: [R; n]) = reduce max p.0 A + p.1\n",
    );
    let path = temp_file("inf.json", "{\"p\": [\"-inf\", 1], \"A\": [3, 7, 5]}");
    let at = format!("@{}", text(&path));
    let out = gradlift(&["eval", text(&prog), "--at", &at]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "8.0\n");
}

// ---- grad and emit ----

const PROD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/prod.grad");

#[test]
fn grad_json_prints_value_and_every_gradient() {
    for via in ["unf", "direct"] {
        let out = gradlift(&[
            "grad",
            DOT,
            "--at",
            "A=[1,2,3], B=[4,5,6]",
            "--via",
            via,
            "--json",
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(
            stdout(&out).trim(),
            r#"{"value":32.0,"gradient":{"A":[4.0,5.0,6.0],"B":[1.0,2.0,3.0]}}"#
        );
    }
}

#[test]
fn grad_of_a_product_with_a_zero_is_exact() {
    let out = gradlift(&["grad", PROD, "--at", "A=[2,0,3]", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out).trim(),
        r#"{"value":0.0,"gradient":{"A":[0.0,6.0,0.0]}}"#
    );
}

#[test]
fn grad_wrt_selects_parameters() {
    let out = gradlift(&[
        "grad",
        DOT,
        "--at",
        "A=[1,2,3], B=[4,5,6]",
        "--wrt",
        "B",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out).trim(),
        r#"{"value":32.0,"gradient":{"B":[1.0,2.0,3.0]}}"#
    );
    let out = gradlift(&["grad", DOT, "--at", "A=[1,2,3], B=[4,5,6]", "--wrt", "C"]);
    let first = failure(&out, "error: ");
    assert!(first.contains("`C`"), "{first}");
}

#[test]
fn grad_of_a_function_that_does_not_return_a_real_is_an_error() {
    let f = temp_file("vec.grad", "def f(x: R) -> (R, R) = (x, x)\n");
    let out = gradlift(&["grad", text(&f), "--at", "x=1"]);
    let first = failure(&out, "error: ");
    assert!(first.contains("returns `(R, R)`"), "{first}");
}

#[test]
fn emitted_stages_print_and_the_target_parses_back() {
    for stage in ["source", "unf", "target-unf", "target", "opt", "clif"] {
        let out = gradlift(&["emit", DOT, "--stage", stage]);
        assert!(out.status.success(), "{stage}: {}", stderr(&out));
        assert!(!stdout(&out).is_empty());
    }
    for literal in [false, true] {
        let mut args = vec!["emit", DOT, "--stage", "target"];
        if literal {
            args.push("--literal");
        }
        let out = gradlift(&args);
        let program = temp_file("dot_grad.grad", &stdout(&out));
        let value = gradlift(&["eval", text(&program), "--at", "A=[1,2,3], B=[4,5,6]"]);
        assert!(value.status.success(), "{}", stderr(&value));
        assert_eq!(
            stdout(&value).trim(),
            "(32.0, ([4.0, 5.0, 6.0], [1.0, 2.0, 3.0]))"
        );
    }
}

#[test]
fn the_optimized_gradient_of_every_example_parses_back() {
    // The rules bind names no program can write; the printed program
    // names them afresh, as identifiers.
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");
    let mut checked = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("grad") {
            continue;
        }
        let out = gradlift(&["emit", text(&path), "--grad", "--stage", "opt"]);
        if !out.status.success() {
            // The last function does not return a real.
            continue;
        }
        let program = temp_file("opt_back.grad", &stdout(&out));
        let back = gradlift(&["emit", text(&program), "--stage", "source"]);
        assert!(
            back.status.success(),
            "{}: {}",
            path.display(),
            stderr(&back)
        );
        checked += 1;
    }
    assert!(checked >= 10, "{checked} examples");
}

#[test]
fn cost_json_has_exactly_the_documented_fields() {
    let out = gradlift(&["cost", DOT, "--sizes", "n=10", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out).trim(),
        r#"{"primal":{"moves":143.0,"adds":10.0,"mults":10.0,"nlops":0.0},"gradient":{"moves":145.0,"adds":10.0,"mults":10.0,"nlops":0.0},"nao":1,"bound":12.0,"ratio":1.0122699386503067,"holds":true,"primal_bytes":{"read":240.0,"written":80.0},"gradient_bytes":{"read":240.0,"written":80.0}}"#
    );
    let out = gradlift(&["cost", DOT, "--sizes", "m=10"]);
    let first = failure(&out, "error: ");
    assert!(
        first.contains("`m` is not a size variable of `dot` (its sizes: n)"),
        "{first}"
    );
}

#[test]
fn every_stage_of_the_pass_list_prints() {
    let list = gradlift(&["emit", "--list-stages"]);
    assert!(list.status.success(), "{}", stderr(&list));
    let names: Vec<String> = stdout(&list)
        .lines()
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect();
    for want in [
        "source",
        "target",
        "opt",
        "pe",
        "split",
        "forward-opt",
        "clif",
        "asm",
    ] {
        assert!(names.iter().any(|n| n == want), "{want}: {names:?}");
    }
    for name in &names {
        let out = gradlift(&["emit", DOT, "--stage", name, "--grad"]);
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        assert!(!stdout(&out).is_empty(), "{name}");
    }
    // A member of the simplifier stops its first round there.
    let pe = gradlift(&["emit", DOT, "--stage", "pe", "--grad", "--time-passes"]);
    let err = stderr(&pe);
    assert!(err.contains("target") && err.contains("  pe"), "{err}");
    assert!(
        err.contains("stopped after 1 round: the stage asked for"),
        "{err}"
    );
    assert!(!err.contains("  cse"), "{err}");
    let out = gradlift(&["emit", DOT, "--stage", "nope"]);
    assert!(stderr(&out).contains("no stage `nope`"), "{}", stderr(&out));
    let grad = gradlift(&["grad", DOT, "--at", "A=[1,2], B=[3,4]", "--time-passes"]);
    assert!(
        stderr(&grad).contains("opt") && stderr(&grad).contains("the simplifier stopped"),
        "{}",
        stderr(&grad)
    );
}

#[test]
fn bench_differentiates_with_respect_to_wrt() {
    let out = gradlift(&[
        "bench",
        DOT,
        "--sizes",
        "n=100",
        "--seconds",
        "0.01",
        "--wrt",
        "A",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["grad_ns"].as_f64().unwrap() > 0.0, "{v}");
    let out = gradlift(&[
        "bench",
        DOT,
        "--sizes",
        "n=100",
        "--seconds",
        "0.01",
        "--wrt",
        "C",
    ]);
    let first = failure(&out, "error: ");
    assert!(first.contains("`C` is not a parameter"), "{first}");
}

#[test]
fn bench_reports_its_measurements() {
    let out = gradlift(&[
        "bench",
        DOT,
        "--sizes",
        "n=100",
        "--seconds",
        "0.02",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    for key in [
        "compile_ms",
        "primal_ns",
        "grad_ns",
        "ratio",
        "cost_ratio",
        "bound",
    ] {
        assert!(v[key].as_f64().is_some_and(|x| x > 0.0), "{key} in {v}");
    }
    let out = gradlift(&["bench", DOT, "--seconds", "0.02"]);
    let first = failure(&out, "error: ");
    assert!(first.contains("`n`"), "{first}");
}

#[test]
fn forward_mode_and_second_order() {
    let out = gradlift(&[
        "jvp",
        DOT,
        "--at",
        "A=[1,2,3], B=[4,5,6]",
        "--dir",
        "A=[1,0,0], B=[0,0,1]",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), r#"{"value":32.0,"tangent":7.0}"#);
    let out = gradlift(&[
        "hvp",
        PROD,
        "--at",
        "A=[1,2,3]",
        "--dir",
        "A=[1,0,0]",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out).trim(),
        r#"{"value":6.0,"gradient":{"A":[6.0,3.0,2.0]},"hvp":{"A":[0.0,3.0,2.0]}}"#
    );
    let ex = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/example_1_1.grad"
    );
    let out = gradlift(&["hessian", ex, "--at", "x1=2, x2=3, x3=5", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out).trim(),
        r#"{"value":12.0,"hessian":[[6.0,4.0,0.0],[4.0,0.0,0.0],[0.0,0.0,0.0]]}"#
    );
    // A direction of the wrong shape is a clear error.
    let out = gradlift(&[
        "jvp",
        DOT,
        "--at",
        "A=[1,2,3], B=[4,5,6]",
        "--dir",
        "A=[1,0], B=[0,0,1]",
    ]);
    failure(&out, "error: ");
}

// ---- checkpointing ----

const RELAX: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../examples/relaxation.grad"
);

#[test]
fn checkpoint_schedules_agree() {
    let at = "x=1, y=3, steps=5000";
    let full = gradlift(&["grad", RELAX, "--fn", "relax", "--at", at, "--json"]);
    assert!(full.status.success(), "{}", stderr(&full));
    let full: serde_json::Value = serde_json::from_str(&stdout(&full)).unwrap();
    for s in ["1", "64", "binomial:3", "binomial:20"] {
        let out = gradlift(&[
            "grad",
            RELAX,
            "--fn",
            "relax",
            "--at",
            at,
            "--json",
            "--checkpoint",
            s,
        ]);
        assert!(out.status.success(), "{s}: {}", stderr(&out));
        let got: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
        assert_eq!(got["value"], full["value"], "{s}");
        for p in ["x", "y"] {
            let (a, b) = (
                got["gradient"][p].as_f64().unwrap(),
                full["gradient"][p].as_f64().unwrap(),
            );
            assert!(
                (a - b).abs() <= 1e-12 * b.abs().max(1e-300),
                "{s} d/d{p}: {a} vs {b}"
            );
        }
    }
}

#[test]
fn bad_checkpoint_option() {
    for bad in ["0", "fast", "binomial:", "binomial:0", "-3"] {
        let option = format!("--checkpoint={bad}");
        let out = gradlift(&[
            "grad",
            RELAX,
            "--fn",
            "relax",
            "--at",
            "x=1, y=3, steps=10",
            &option,
        ]);
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("--checkpoint"),
            "{bad}: {}",
            stderr(&out)
        );
        assert!(!stderr(&out).contains("panicked"));
    }
}

#[test]
fn bad_checkpoint_annotation() {
    let cases = [
        ("@checkpoint(0) foldl (+) 0 A", "between 1 and", "0) foldl"),
        (
            "@checkpoint(3) map (x. x) A",
            "applies to a `foldl`",
            "@checkpoint",
        ),
        (
            "@checkpoint(binomial) foldl (+) 0 A",
            "number of snapshots",
            ") foldl",
        ),
        ("@check(3) foldl (+) 0 A", "`checkpoint`", "check(3)"),
    ];
    for (body, message, at) in cases {
        let line = format!("def f(A: [R; n]) -> R = {body}");
        let path = temp_file("ck.grad", &format!("{line}\n"));
        let out = gradlift(&["eval", text(&path), "--at", "A=[1, 2]"]);
        let first = failure(&out, &format!("{}:1:", text(&path)));
        assert!(first.contains(message), "{body}: {first}");
        caret_under(&out, &line, at);
    }
}

/// A reader that stops early (`gradlift emit … | head`) ends the output
/// without a panic.
#[cfg(unix)]
#[test]
fn closed_stdout_is_not_a_panic() {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_gradlift"))
        .args(["emit", ODE, "--fn", "last", "--stage", "clif", "--grad"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the gradlift binary runs");
    let mut first = [0u8; 64];
    child
        .stdout
        .take()
        .expect("piped")
        .read_exact(&mut first)
        .expect("some output");
    // The pipe is closed here, with most of the output unread.
    let out = child.wait_with_output().expect("gradlift ends");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
}

/// `emit --hvp` prints the Hessian-vector product program, over the
/// parameters and their directions, in a form gradlift reads back; its
/// native code is available at the clif stage.
#[test]
fn emit_prints_the_hessian_vector_product_program() {
    let out = gradlift(&["emit", DOT, "--stage", "opt", "--hvp"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let program = stdout(&out);
    assert!(
        program.starts_with("def dot_grad_jvp(A: [R; n], B: [R; n], A_dot: [R; n], B_dot: [R; n])"),
        "{program}"
    );
    let file = temp_file("dot_hvp.grad", &program);
    let back = gradlift(&["emit", text(&file), "--stage", "source"]);
    assert!(back.status.success(), "{}", stderr(&back));
    let clif = gradlift(&["emit", DOT, "--stage", "clif", "--hvp"]);
    assert!(stdout(&clif).contains("function"), "{}", stderr(&clif));
    let both = gradlift(&["emit", DOT, "--stage", "opt", "--hvp", "--grad"]);
    assert!(!both.status.success());
    assert!(
        stderr(&both).contains("cannot be used with"),
        "{}",
        stderr(&both)
    );
}

#[test]
fn huge_size_says_which_engine_stops() {
    // A range a fold consumes is not stored: native code runs it in no
    // workspace; the interpreter, which stores it, says it is its limit.
    let path = temp_file(
        "range.grad",
        "def f(s: size) -> R = reduce (+) 0 (iota(s))\n",
    );
    let out = gradlift(&["eval", text(&path), "--at", "s=600000000"]);
    let sum: f64 = stdout(&out).trim().parse().expect("a real");
    assert!((sum / 1.799999997e17 - 1.0).abs() < 1e-8, "{sum}");
    let out = gradlift(&[
        "eval",
        text(&path),
        "--at",
        "s=600000000",
        "--engine",
        "interp",
    ]);
    let first = failure(&out, &format!("{}:1:37: error: ", text(&path)));
    assert!(first.contains("the interpreter's limit"), "{first}");
}

#[test]
fn size_beyond_what_compiled_code_takes() {
    let path = temp_file("big.grad", "def f(s: size) -> R = s\n");
    let out = gradlift(&["eval", text(&path), "--at", "s=1e15"]);
    let first = failure(&out, "error: ");
    assert!(
        first.contains("`s` is 1000000000000000") && first.contains("2^40"),
        "{first}"
    );
}

#[test]
fn wrong_element_is_named_by_its_path() {
    let out = gradlift(&["eval", DOT, "--at", "A=[1,2,3], B=[[4],[5],[6]]"]);
    let first = failure(&out, "--at:1:15: error: ");
    assert!(
        first.contains("`B[0]` has type `R`") && first.contains("a list of 1 element"),
        "{first}"
    );
}

#[test]
fn constant_length_mismatch_names_the_type() {
    let growth = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/logistic_growth.grad"
    );
    let out = gradlift(&["eval", growth, "--at", "rate=0.5, cap=30, obs=[1,2,3]"]);
    let first = failure(&out, "error: ");
    assert!(
        first.contains("`obs` has length 3, but its type fixes the length at 10"),
        "{first}"
    );
}

#[test]
fn gradient_errors_point_into_the_source() {
    let path = temp_file("oob.grad", "def f(x: [R; n]) -> R =\n  x[5] * 2\n");
    let out = gradlift(&["grad", text(&path), "--at", "x=[1,2]"]);
    let first = failure(&out, &format!("{}:2:3: error: ", text(&path)));
    assert!(first.contains("out of bounds"), "{first}");
    caret_under(&out, "  x[5] * 2", "x[5]");
}

#[test]
fn bench_checks_its_sizes_before_building_anything() {
    let mlp = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/mlp.grad");
    for (file, sizes, want) in [
        (DOT, "n=1000000000000000", "more than 2^40"),
        (DOT, "n=10,n=20", "`n` is given twice"),
        (
            DOT,
            "n=10,m=10",
            "`m` is not a size variable of `dot` (its sizes: n)",
        ),
        (ODE, "n=10", "the size `s` of `last` has no value"),
        (
            mlp,
            "d=1000000,h=1000000,m=1000000",
            "gradlift bench fills at most",
        ),
    ] {
        let fn_args: &[&str] = if file == ODE { &["--fn", "last"] } else { &[] };
        let args: Vec<&str> = ["bench", file]
            .into_iter()
            .chain(fn_args.iter().copied())
            .chain(["--sizes", sizes, "--seconds", "0.01"])
            .collect();
        let out = gradlift(&args);
        let first = failure(&out, "error: ");
        assert!(first.contains(want), "{sizes}: {first}");
    }
}

const JACOBIAN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/jacobian.grad");

#[test]
fn jacobian_of_a_vector_function_in_each_mode() {
    let x = "x=[0.3, 0.5, -0.4]";
    let mut seen = Vec::new();
    for mode in ["forward", "reverse", "auto"] {
        for engine in ["jit", "interp"] {
            let out = gradlift(&[
                "jacobian", JACOBIAN, "--fn", "tip", "--at", x, "--mode", mode, "--engine", engine,
                "--json",
            ]);
            assert!(out.status.success(), "{}", stderr(&out));
            let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
            let rows = json["jacobian"].as_array().unwrap().clone();
            assert_eq!(rows.len(), 2);
            assert_eq!(rows[0].as_array().unwrap().len(), 3);
            seen.push(rows);
        }
    }
    // The tip's x-velocity per joint is −Σ_{i ≥ k} Lᵢ sin(aᵢ).
    let (a, b, c) = (0.3f64, 0.8f64, 0.4f64);
    let want = -(a.sin() + 0.8 * b.sin() + 0.5 * c.sin());
    for rows in &seen {
        let got = rows[0][0].as_f64().unwrap();
        assert!((got - want).abs() < 1e-14, "{got} against {want}");
        let first = seen[0][1][2].as_f64().unwrap();
        assert!((rows[1][2].as_f64().unwrap() - first).abs() < 1e-15);
    }
    // Text: a row per line.
    let out = gradlift(&["jacobian", JACOBIAN, "--fn", "tip", "--at", x]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).lines().count(), 2);
}

#[test]
fn jacobian_errors_say_what_to_do() {
    // Two parameters hold reals: --wrt picks one.
    let out = gradlift(&["jacobian", DOT, "--at", "A=[1,2], B=[3,4]"]);
    assert!(failure(&out, "error: ").contains("--wrt"));
    let out = gradlift(&["jacobian", DOT, "--at", "A=[1,2], B=[3,4]", "--wrt", "B"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "[1.0, 2.0]");
    let out = gradlift(&["jacobian", DOT, "--at", "A=[1,2], B=[3,4]", "--wrt", "C"]);
    assert!(failure(&out, "error: ").contains("not a parameter"));
    // A result that is not a vector.
    let file = temp_file("pair.grad", "def f(x: R) -> (R, R) = (x, x)");
    let out = gradlift(&["jacobian", text(&file), "--at", "x=1"]);
    assert!(failure(&out, "error: ").contains("returning `R` or `[R; m]`"));
}

#[test]
fn a_cache_directory_serves_the_next_run_the_same_gradient() {
    let dir = missing_path("cache");
    let dir_arg = dir.to_str().unwrap();
    let args = [
        "grad",
        ODE,
        "--at",
        "x=[1, 0.5, -0.25], s=3",
        "--json",
        "--cache-dir",
        dir_arg,
    ];
    let first = gradlift(&args);
    assert!(first.status.success(), "{first:?}");
    let files = || std::fs::read_dir(&dir).unwrap().count();
    assert_eq!(files(), 1, "the gradient is stored");
    let second = gradlift(&args);
    assert!(second.status.success(), "{second:?}");
    assert_eq!(first.stdout, second.stdout);
    assert_eq!(files(), 1, "and loaded, not stored again");
    // The environment variable names the same directory.
    let third = Command::new(env!("CARGO_BIN_EXE_gradlift"))
        .args(&args[..5])
        .env("GRADLIFT_CACHE_DIR", &dir)
        .output()
        .unwrap();
    assert_eq!(third.stdout, first.stdout);
    assert_eq!(files(), 1);
    // A directory that cannot be made is no error: the code is compiled.
    let blocked = temp_file("not-a-directory", "");
    let fourth = gradlift(&[&args[..5], &["--cache-dir", blocked.to_str().unwrap()]].concat());
    assert!(fourth.status.success(), "{fourth:?}");
    assert_eq!(fourth.stdout, first.stdout);
    let _ = std::fs::remove_dir_all(&dir);
}
