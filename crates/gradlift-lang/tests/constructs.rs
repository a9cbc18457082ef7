//! Every construct of the language, evaluated on the reference interpreter
//! and compared with values worked out by hand; the run-time and type errors
//! a program can meet; and printer/parser round trips on tricky text.

use std::f64::consts::E;

use gradlift_lang::{
    check_source, interp, parse_expr, parse_module, CheckedModule, EvalError, Value,
};

// ---- helpers ----

fn checked(src: &str) -> CheckedModule {
    check_source("test.grad", src).unwrap_or_else(|e| panic!("{src}\ndoes not check: {e}"))
}

/// The value of the last definition of `src` at `args`.
fn run(src: &str, args: &[Value]) -> Value {
    let m = checked(src);
    interp::call(&m, m.module.defs.len() - 1, args)
        .unwrap_or_else(|e| panic!("{src}\nfails to evaluate: {e}"))
}

/// The run-time error of the last definition of `src` at `args`.
fn run_error(src: &str, args: &[Value]) -> EvalError {
    let m = checked(src);
    match interp::call(&m, m.module.defs.len() - 1, args) {
        Ok(v) => panic!("{src}\nevaluates to {v}, but an error was expected"),
        Err(e) => e,
    }
}

/// The value of a closed expression.
fn value(expr: &str) -> Value {
    run(&format!("def main() = {expr}"), &[])
}

/// The value of a closed expression of type `R`.
fn real(expr: &str) -> f64 {
    value(expr)
        .as_real()
        .unwrap_or_else(|| panic!("{expr} is not a real"))
}

/// Asserts that `got` is `want`, reals compared bit for bit (`nan` equals
/// `nan`, `0` differs from `-0`).
#[track_caller]
fn assert_same(what: &str, got: &Value, want: &Value) {
    assert!(got.same(want), "{what}: got {got}, expected {want}");
}

#[track_caller]
fn check(expr: &str, want: f64) {
    assert_same(expr, &value(expr), &Value::Real(want));
}

#[track_caller]
fn check_value(expr: &str, want: Value) {
    assert_same(expr, &value(expr), &want);
}

#[track_caller]
fn check_close(expr: &str, want: f64) {
    let got = real(expr);
    assert!(
        (got - want).abs() <= 1e-12 * want.abs().max(1.0),
        "{expr}: got {got:?}, expected {want:?}"
    );
}

fn r(x: f64) -> Value {
    Value::Real(x)
}

fn reals(xs: &[f64]) -> Value {
    Value::reals(xs)
}

fn ints(xs: &[i64]) -> Value {
    Value::array(xs.iter().map(|&k| Value::Int(k)).collect())
}

fn tuple(xs: Vec<Value>) -> Value {
    Value::tuple(xs)
}

fn array(xs: Vec<Value>) -> Value {
    Value::array(xs)
}

/// The message of a front-end error of `src`.
fn front_error(src: &str) -> String {
    match check_source("test.grad", src) {
        Ok(_) => panic!("{src}\nchecks, but an error was expected"),
        Err(e) => e.to_string(),
    }
}

#[track_caller]
fn assert_mentions(message: &str, parts: &[&str]) {
    for p in parts {
        assert!(
            message.contains(p),
            "message {message:?} does not mention {p:?}"
        );
    }
}

// ---- constants ----

#[test]
fn number_literals() {
    check("2", 2.0);
    check("1.5", 1.5);
    check("0.0025", 0.0025);
    check("1e-3", 0.001);
    check("6.02E+23", 6.02e23);
    check("25e1", 250.0);
}

#[test]
fn infinities_and_nan() {
    check("inf", f64::INFINITY);
    check("-inf", f64::NEG_INFINITY);
    assert!(real("nan").is_nan());
    check("1 / 0", f64::INFINITY);
    check("-1 / 0", f64::NEG_INFINITY);
    assert!(real("0 / 0").is_nan());
    assert!(real("inf - inf").is_nan());
}

#[test]
fn negative_literals() {
    check("-1.5", -1.5);
    check("- 1.5", -1.5);
    check("-(1.5)", -1.5);
    check("- -1.5", 1.5);
    check("-1e-3", -0.001);
    // `-0` is negative zero, bit for bit.
    assert_eq!(real("-0").to_bits(), (-0.0f64).to_bits());
    assert_eq!(real("0").to_bits(), 0.0f64.to_bits());
}

// ---- arithmetic ----

#[test]
fn arithmetic_precedence() {
    check("1 + 2 * 3", 7.0);
    check("1 - 2 - 3", -4.0);
    check("8 / 2 / 2", 2.0);
    check("-2 * 3 + 4", -2.0);
    check("2 - -3", 5.0);
    check("(1 + 2) * 3", 9.0);
    // 10 - ((2 * 3) / 4) = 10 - 1.5
    check("10 - 2 * 3 / 4", 8.5);
    // -(2 + 3) * 2 = -5 * 2
    check("-(2 + 3) * 2", -10.0);
    check("2 * -3", -6.0);
    check("2 * - 3", -6.0);
    check("1 - (2 - 3)", 2.0);
}

#[test]
fn unary_minus_on_variables_and_projections() {
    let src = "def f(x: R, p: (R, R)) = (-x, -p.0, - -x, -x * 2)";
    let v = run(src, &[r(3.0), tuple(vec![r(5.0), r(7.0)])]);
    assert_same(src, &v, &tuple(vec![r(-3.0), r(-5.0), r(3.0), r(-6.0)]));
}

// ---- primitives ----

#[test]
fn unary_primitives() {
    check("sin(0)", 0.0);
    check("cos(0)", 1.0);
    check("tan(0)", 0.0);
    check("exp(0)", 1.0);
    check("log(1)", 0.0);
    check("sqrt(9)", 3.0);
    check("tanh(0)", 0.0);
    check("abs(-2.5)", 2.5);
    check("abs(2.5)", 2.5);
    check("sign(-3)", -1.0);
    check("sign(0)", 0.0);
    check("sign(2)", 1.0);
    assert!(real("sign(nan)").is_nan());
    // sin(π/2) = 1, cos(π) = -1, tan(π/4) ≈ 1, exp(1) = e, log(e) = 1
    check_close("sin(1.5707963267948966)", 1.0);
    check_close("cos(3.141592653589793)", -1.0);
    check_close("tan(0.7853981633974483)", 1.0);
    check_close("exp(1)", E);
    check_close("log(2.718281828459045)", 1.0);
    // tanh(1) = (e - 1/e) / (e + 1/e)
    check_close("tanh(1)", 0.7615941559557649);
    check("log(0)", f64::NEG_INFINITY);
    assert!(real("log(-1)").is_nan());
    assert!(real("sqrt(-1)").is_nan());
    check("exp(-inf)", 0.0);
}

#[test]
fn binary_primitives() {
    check("pow(2, 10)", 1024.0);
    check("pow(9, 0.5)", 3.0);
    check("pow(2, -1)", 0.5);
    check("pow(5, 0)", 1.0);
    assert!(real("pow(-8, 1/3)").is_nan());
    check("min(1, 2)", 1.0);
    check("min(2, 1)", 1.0);
    check("max(1, 2)", 2.0);
    check("max(2, 1)", 2.0);
    check("min(-inf, 3)", f64::NEG_INFINITY);
}

#[test]
fn min_and_max_return_the_first_argument_on_ties() {
    let bits = |e: &str| real(e).to_bits();
    let pos = 0.0f64.to_bits();
    let neg = (-0.0f64).to_bits();
    assert_eq!(bits("min(0, -0)"), pos);
    assert_eq!(bits("min(-0, 0)"), neg);
    assert_eq!(bits("max(0, -0)"), pos);
    assert_eq!(bits("max(-0, 0)"), neg);
    // As function values too.
    assert_eq!(bits("reduce min 0 [-0]"), pos);
    assert_eq!(bits("reduce max (-0) [0]"), neg);
}

// ---- conditions ----

#[test]
fn comparisons() {
    check("if 1 < 2 then 1 else 0", 1.0);
    check("if 2 < 2 then 1 else 0", 0.0);
    check("if 2 <= 2 then 1 else 0", 1.0);
    check("if 3 <= 2 then 1 else 0", 0.0);
    check("if 2 > 1 then 10 else 20", 10.0);
    check("if 2 > 2 then 1 else 0", 0.0);
    check("if 2 >= 2 then 1 else 0", 1.0);
    check("if 1 >= 2 then 1 else 0", 0.0);
    check("if 2 == 2 then 1 else 0", 1.0);
    check("if 2 == 3 then 1 else 0", 0.0);
    check("if 2 != 3 then 1 else 0", 1.0);
    check("if 2 != 2 then 1 else 0", 0.0);
    check("if 0 == -0 then 1 else 0", 1.0);
    check("if (1 + 2) < 4 then 1 else 0", 1.0);
}

#[test]
fn comparisons_with_nan() {
    for op in ["<", "<=", ">", ">=", "=="] {
        check(&format!("if nan {op} nan then 1 else 0"), 0.0);
        check(&format!("if 1 {op} nan then 1 else 0"), 0.0);
    }
    check("if nan != nan then 1 else 0", 1.0);
}

#[test]
fn and_or_not() {
    check("if 1 < 2 and 2 < 3 then 1 else 0", 1.0);
    check("if 1 < 2 and 3 < 2 then 1 else 0", 0.0);
    check("if 2 < 1 or 2 < 3 then 1 else 0", 1.0);
    check("if 2 < 1 or 3 < 2 then 1 else 0", 0.0);
    check("if not 2 < 1 then 1 else 0", 1.0);
    check("if not (1 < 2) then 1 else 0", 0.0);
    check("if 1 < 2 and not (3 > 4) then 1 else 0", 1.0);
    // `and` binds tighter than `or`: (F and F) or T, not F and (F or T).
    check("if 1 > 2 and 1 > 2 or 1 < 2 then 1 else 0", 1.0);
    // `not` binds tighter than `or`: (not T) or T, not not (T or T).
    check("if not 1 < 2 or 1 < 2 then 1 else 0", 1.0);
    // `not` binds looser than comparisons, and tighter than `and`:
    // (not F) and F.
    check("if not 2 < 1 and 2 < 1 then 1 else 0", 0.0);
    check("if (1 > 2 or 2 > 1) and 3 > 2 then 1 else 0", 1.0);
    check("if not (1 < 2 or 2 < 1) then 1 else 0", 0.0);
    check("if ((1 < 2)) then 1 else 0", 1.0);
}

#[test]
fn if_forms() {
    check("if 0 == 0 then 1 else if 0 == 1 then 2 else 0", 1.0);
    let chain = "def f(i: R) = if i == 0 then 1 else if i == 1 then 2 else 0";
    assert_same(chain, &run(chain, &[r(1.0)]), &r(2.0));
    assert_same(chain, &run(chain, &[r(7.0)]), &r(0.0));
    let pair = "def f(x: R) = if x < 0 then (0, x) else (x, 0)";
    assert_same(pair, &run(pair, &[r(-2.0)]), &tuple(vec![r(0.0), r(-2.0)]));
    assert_same(pair, &run(pair, &[r(3.0)]), &tuple(vec![r(3.0), r(0.0)]));
    // The `else` branch extends to the right: 1 + (if … else (0 + 2)).
    let open = "def f(x: R) = 1 + if x > 0 then x else 0 + 2";
    assert_same(open, &run(open, &[r(5.0)]), &r(6.0));
    assert_same(open, &run(open, &[r(-1.0)]), &r(3.0));
    let closed = "def f(x: R) = 1 + (if x > 0 then x else 0) + 2";
    assert_same(closed, &run(closed, &[r(5.0)]), &r(8.0));
    // Branches of array type.
    check_value("if 1 > 2 then [1, 2] else [3, 4]", reals(&[3.0, 4.0]));
}

// ---- let ----

#[test]
fn let_bindings() {
    check("let x = 3 in x * x", 9.0);
    check("let (a, b) = (1, 2) in a - b", -1.0);
    check("let (a, (_, c)) = (1, (2, 3)) in a + c", 4.0);
    check("let v: [R; 3] = [1, 2, 3] in v[2]", 3.0);
    check("let x = 1 in let x = x + 1 in x", 2.0);
    check("let _ = 5 in 1", 1.0);
    // 2 * (let x = 1 in (x + 1))
    check("2 * let x = 1 in x + 1", 4.0);
    // 1*1000 + 2*100 + 3*10 + 4
    check(
        "let ((a, b), (c, d)) = ((1, 2), (3, 4)) in a * 1000 + b * 100 + c * 10 + d",
        1234.0,
    );
    check("let ((a, _), _) = ((7, 8), 9) in a", 7.0);
    check("let p: (R, [R; 2]) = (1, [2, 3]) in p.1[1]", 3.0);
    check("let (x, y) = (1, 2) in let (x, y) = (y, x) in x - y", 1.0);
    check("(let x = 1 in x) + (let x = 2 in x * 10)", 21.0);
}

// ---- tuples ----

#[test]
fn tuples_and_projections() {
    check("(1, 2, 3).2", 3.0);
    check("(1, 2, 3).0", 1.0);
    check("fst (1, 2)", 1.0);
    check("snd (1, 2)", 2.0);
    check("snd ((1, 2), 3)", 3.0);
    check("((1, 2), 3).0.1", 2.0);
    check("(4)", 4.0);
    check_value(
        "(1, (2, 3))",
        tuple(vec![r(1.0), tuple(vec![r(2.0), r(3.0)])]),
    );
    check_value("((1, 2)).1 + 0", r(2.0));
    let src = "def f(p: (R, (R, R))) = (fst p.1, snd p.1, -p.0, p.1.1)";
    let v = run(src, &[tuple(vec![r(1.0), tuple(vec![r(5.0), r(6.0)])])]);
    assert_same(src, &v, &tuple(vec![r(5.0), r(6.0), r(-1.0), r(6.0)]));
}

// ---- arrays ----

#[test]
fn array_literals() {
    check_value("[1, 2, 3]", reals(&[1.0, 2.0, 3.0]));
    check_value(
        "[[1, 2], [3, 4]]",
        array(vec![reals(&[1.0, 2.0]), reals(&[3.0, 4.0])]),
    );
    check_value(
        "[(1, 2), (3, 4)]",
        array(vec![
            tuple(vec![r(1.0), r(2.0)]),
            tuple(vec![r(3.0), r(4.0)]),
        ]),
    );
    check_value("[1 + 1, -2, 2 * 3]", reals(&[2.0, -2.0, 6.0]));
    check_value(
        "[[[1], [2]], [[3], [4]]]",
        array(vec![
            array(vec![reals(&[1.0]), reals(&[2.0])]),
            array(vec![reals(&[3.0]), reals(&[4.0])]),
        ]),
    );
}

#[test]
fn indexing() {
    check("[10, 20, 30][1]", 20.0);
    check("[10, 20, 30][0]", 10.0);
    check("[10, 20, 30][-1]", 30.0);
    check("[[1, 2], [3, 4]][1][0]", 3.0);
    check("[[1, 2], [3, 4]][-1][-1]", 4.0);
    let src = "def f(A: [R; n], M: [[R; d]; m]) = (A[0], A[-1], M[1][0], M[0][-1])";
    let v = run(
        src,
        &[
            reals(&[7.0, 8.0, 9.0]),
            array(vec![reals(&[1.0, 2.0]), reals(&[3.0, 4.0])]),
        ],
    );
    assert_same(src, &v, &tuple(vec![r(7.0), r(9.0), r(3.0), r(2.0)]));
    // `map f A[0]` is `map f (A[0])`.
    let src = "def f(M: [[R; d]; m]) = map (x. x * 10) M[1]";
    let v = run(src, &[array(vec![reals(&[1.0, 2.0]), reals(&[3.0, 4.0])])]);
    assert_same(src, &v, &reals(&[30.0, 40.0]));
}

#[test]
fn array_builtins() {
    check_value("len([[1, 2], [3, 4], [5, 6]])", Value::Int(3));
    check_value("len(iota(0))", Value::Int(0));
    check_value("iota(4)", ints(&[0, 1, 2, 3]));
    check_value("iota(0)", reals(&[]));
    check_value(
        "replicate(2, (1, 0))",
        array(vec![
            tuple(vec![r(1.0), r(0.0)]),
            tuple(vec![r(1.0), r(0.0)]),
        ]),
    );
    check_value("replicate(3, 7)", reals(&[7.0, 7.0, 7.0]));
    check_value("replicate(0, 7)", reals(&[]));
    check_value(
        "replicate(2, [1, 2])",
        array(vec![reals(&[1.0, 2.0]), reals(&[1.0, 2.0])]),
    );
    check_value("concat([1, 2], [3])", reals(&[1.0, 2.0, 3.0]));
    check_value("concat(iota(0), [3])", ints(&[3]));
    check_value(
        "concat([[1]], [[2], [3]])",
        array(vec![reals(&[1.0]), reals(&[2.0]), reals(&[3.0])]),
    );
    let src = "def f(A: [R; n]) = (iota(len(A) + 1), replicate(n, 0), iota(2 * n - 1))";
    let v = run(src, &[reals(&[5.0, 6.0])]);
    assert_same(
        src,
        &v,
        &tuple(vec![ints(&[0, 1, 2]), reals(&[0.0, 0.0]), ints(&[0, 1, 2])]),
    );
}

#[test]
fn shifts() {
    check_value("shift1L [1, 2, 3]", reals(&[2.0, 3.0]));
    check_value("shift1R [1, 2, 3]", reals(&[1.0, 2.0]));
    check_value("shift1L [1]", reals(&[]));
    check_value("shift1R [1]", reals(&[]));
    check_value("shift1L iota(0)", reals(&[]));
    check_value("shift1R iota(0)", reals(&[]));
    check_value("shift1L (shift1L [1, 2, 3])", reals(&[3.0]));
    check_value("shift1R [[1, 2], [3, 4]]", array(vec![reals(&[1.0, 2.0])]));
    // Differences of neighbours: [4 - 1, 9 - 4, 16 - 9].
    let src = "def f(A: [R; n]) = map2 (-) (shift1L A) (shift1R A)";
    let v = run(src, &[reals(&[1.0, 4.0, 9.0, 16.0])]);
    assert_same(src, &v, &reals(&[3.0, 5.0, 7.0]));
    // On an empty array of symbolic size, the length is 0, not -1.
    let v = run(src, &[reals(&[])]);
    assert_same(src, &v, &reals(&[]));
    let src = "def f(A: [R; n]) = (shift1L A, shift1R A, len(shift1L A))";
    let v = run(src, &[reals(&[])]);
    assert_same(src, &v, &tuple(vec![reals(&[]), reals(&[]), Value::Int(0)]));
}

// ---- array operations ----

#[test]
fn map_and_map2() {
    check_value("map (x. x * x) [1, 2, 3]", reals(&[1.0, 4.0, 9.0]));
    check_value("map exp ([0, 1])", reals(&[1.0, E]));
    check_value("map exp [0, 1]", reals(&[1.0, E]));
    check_value("map (i. exp(i)) iota(2)", reals(&[1.0, E]));
    check_value("map abs [-1, 2, -3]", reals(&[1.0, 2.0, 3.0]));
    check_value("map (x. 0) [5, 6]", reals(&[0.0, 0.0]));
    check_value("map (_. 1) [5, 6]", reals(&[1.0, 1.0]));
    check_value("map2 (-) [5, 7] [1, 2]", reals(&[4.0, 5.0]));
    check_value("map2 (+) [5, 7] [1, 2]", reals(&[6.0, 9.0]));
    check_value("map2 (*) [5, 7] [1, 2]", reals(&[5.0, 14.0]));
    check_value("map2 (/) [5, 7] [1, 2]", reals(&[5.0, 3.5]));
    check_value("map2 pow [2, 3] [3, 2]", reals(&[8.0, 9.0]));
    check_value("map2 min [2, 3] [3, 2]", reals(&[2.0, 2.0]));
    check_value("map2 max [2, 3] [3, 2]", reals(&[3.0, 3.0]));
    check_value("map2 (x, y. x * y) [1, 3] [2, 4]", reals(&[2.0, 12.0]));
    check_value("map ((x, y). x * y) [(1, 2), (3, 4)]", reals(&[2.0, 12.0]));
    // Argument order: x - 10 y.
    check_value(
        "map2 (x, y. x - 10 * y) [1, 2] [3, 4]",
        reals(&[-29.0, -38.0]),
    );
}

#[test]
fn map_with_free_variables() {
    let src = "def scale(c: R, A: [R; n]) -> [R; n] = map (x. c * x) A";
    let v = run(src, &[r(3.0), reals(&[1.0, -2.0])]);
    assert_same(src, &v, &reals(&[3.0, -6.0]));
    // Size variables and enclosing binders are in scope too.
    let src = "def f(A: [R; n]) = map (x. map (y. x * 10 + y + n) [1, 2]) A";
    let v = run(src, &[reals(&[1.0, 2.0])]);
    // n = 2: [[10 + 1 + 2, 10 + 2 + 2], [20 + 1 + 2, 20 + 2 + 2]]
    assert_same(
        src,
        &v,
        &array(vec![reals(&[13.0, 14.0]), reals(&[23.0, 24.0])]),
    );
}

#[test]
fn reduce() {
    check("reduce (+) 0 [1, 2, 3]", 6.0);
    check("reduce (*) 1 [1, 2, 3, 4]", 24.0);
    check("reduce max (-inf) [3, 1, 4]", 4.0);
    check("reduce min inf [3, 1, 4]", 1.0);
    check("reduce (a, b. a + b) 0 [1, 2, 3]", 6.0);
    check_value("reduce (*) 1 (iota(0))", Value::Int(1));
    check_value("reduce (+) 0 iota(0)", Value::Int(0));
    check("reduce (+) 0 []", 0.0);
    check("reduce max (-inf) []", f64::NEG_INFINITY);
    // (reduce (+) 0 A) / 4 and 2 * (reduce (+) 0 A)
    check("reduce (+) 0 [1, 2, 3, 6] / 4", 3.0);
    check("2 * reduce (+) 0 [1, 2]", 6.0);
    check("-reduce (+) 0 [1, 2]", -3.0);
    // A lambda with a free variable: a + b + c is associative with unit -c;
    // over [1, 2, 4] it is 1 + 2 + 4 + 2c = 7 + 2 * 10.
    let src = "def f(c: R, A: [R; n]) = reduce (a, b. a + b + c) (-c) A";
    assert_same(
        src,
        &run(src, &[r(10.0), reals(&[1.0, 2.0, 4.0])]),
        &r(27.0),
    );
    assert_same(src, &run(src, &[r(10.0), reals(&[])]), &r(-10.0));
}

#[test]
fn foldl() {
    // ((2*0 + 1)*2 + 0)*2 + 1
    check("foldl (acc, y. 2 * acc + y) 0 [1, 0, 1]", 5.0);
    check("foldl (-) 0 [1, 2, 3]", -6.0);
    check("foldl (acc, y. 2 * acc + y) 7 iota(0)", 7.0);
    // Product and sum in one pass.
    check_value(
        "foldl ((p, s), y. (p * y, s + y)) (1, 0) [2, 3, 4]",
        tuple(vec![r(24.0), r(9.0)]),
    );
    check_value(
        "foldl ((p, s), y. (p * y, s + y)) (1, 0) iota(0)",
        tuple(vec![r(1.0), r(0.0)]),
    );
    check("foldl (_, y. y) 0 [1, 2, 3]", 3.0);
    // An array accumulator: prepend each element.
    check_value(
        "foldl (acc, y. concat([y], shift1R acc)) [0, 0, 0] [1, 2]",
        reals(&[2.0, 1.0, 0.0]),
    );
    check(
        "foldl (acc, y. acc + y) 0 iota(10)",
        45.0, // 0 + 1 + ... + 9
    );
}

#[test]
fn scanl() {
    check_value("scanl (+) 0 [1, 2, 3]", reals(&[0.0, 1.0, 3.0, 6.0]));
    check_value("scanl (-) 0 [1, 2, 3]", reals(&[0.0, -1.0, -3.0, -6.0]));
    // v0 = 0, v1 = 2*0 + 1, v2 = 2*1 + 2, v3 = 2*4 + 3
    check_value(
        "scanl (x, y. 2 * x + y) 0 [1, 2, 3]",
        reals(&[0.0, 1.0, 4.0, 11.0]),
    );
    check_value("scanl (x, y. 2 * x + y) 5 iota(0)", reals(&[5.0]));
    check_value(
        "scanl ((a, b), y. (a + y, b * y)) (0, 1) [2, 3]",
        array(vec![
            tuple(vec![r(0.0), r(1.0)]),
            tuple(vec![r(2.0), r(2.0)]),
            tuple(vec![r(5.0), r(6.0)]),
        ]),
    );
}

#[test]
fn scanr() {
    check_value("scanr (+) 0 [1, 2, 3]", reals(&[6.0, 5.0, 3.0, 0.0]));
    // r4 = 0, r3 = 0 - 3, r2 = -3 - 2, r1 = -5 - 1
    check_value("scanr (-) 0 [1, 2, 3]", reals(&[-6.0, -5.0, -3.0, 0.0]));
    // r4 = 0, r3 = 2*0 + 3, r2 = 2*3 + 2, r1 = 2*8 + 1
    check_value(
        "scanr (x, y. 2 * x + y) 0 [1, 2, 3]",
        reals(&[17.0, 8.0, 3.0, 0.0]),
    );
    check_value("scanr (x, y. 2 * x + y) 5 iota(0)", reals(&[5.0]));
    // The accumulator comes first: r2 = (10, 0) with y = 2, r1 with y = 1.
    check_value(
        "scanr ((s, k), y. (s * 10 + y, k + 1)) (0, 0) [1, 2]",
        array(vec![
            tuple(vec![r(21.0), r(2.0)]),
            tuple(vec![r(2.0), r(1.0)]),
            tuple(vec![r(0.0), r(0.0)]),
        ]),
    );
}

#[test]
fn map_of_an_empty_array() {
    check_value("map (x. x * 2) iota(0)", reals(&[]));
    check_value("map2 (+) iota(0) iota(0)", reals(&[]));
    let src = "def f(A: [R; n]) = (map exp A, reduce (+) 1 A, foldl (-) 2 A, scanl (+) 3 A, scanr (+) 4 A)";
    let v = run(src, &[reals(&[])]);
    assert_same(
        src,
        &v,
        &tuple(vec![
            reals(&[]),
            r(1.0),
            r(2.0),
            reals(&[3.0]),
            reals(&[4.0]),
        ]),
    );
    let src = "def f(M: [[R; d]; m]) = (map (row. reduce (+) 0 row) M, len(M))";
    let v = run(src, &[array(vec![])]);
    assert_same(src, &v, &tuple(vec![reals(&[]), Value::Int(0)]));
}

#[test]
fn arrays_of_tuples_and_arrays() {
    check_value(
        "map ((a, b). (b, a)) [(1, 2), (3, 4)]",
        array(vec![
            tuple(vec![r(2.0), r(1.0)]),
            tuple(vec![r(4.0), r(3.0)]),
        ]),
    );
    // Row sums and the elementwise sum of the rows.
    check_value(
        "map (row. reduce (+) 0 row) [[1, 2], [3, 4]]",
        reals(&[3.0, 7.0]),
    );
    check_value(
        "reduce (u, v. map2 (+) u v) [0, 0] [[1, 2], [3, 4]]",
        reals(&[4.0, 6.0]),
    );
    check_value(
        "reduce ((a, b), (c, d). (a + c, b * d)) (0, 1) [(1, 2), (3, 4)]",
        tuple(vec![r(4.0), r(8.0)]),
    );
    check_value(
        "map (x. [x, x * x]) [2, 3]",
        array(vec![reals(&[2.0, 4.0]), reals(&[3.0, 9.0])]),
    );
    check_value(
        "map2 (row, c. map (x. x * c) row) [[1, 2], [3, 4]] [10, 100]",
        array(vec![reals(&[10.0, 20.0]), reals(&[300.0, 400.0])]),
    );
    let src = "def f(P: [(R, [R; 2]); n]) = map ((s, v). map (x. s * x) v) P";
    let v = run(
        src,
        &[array(vec![
            tuple(vec![r(2.0), reals(&[1.0, 2.0])]),
            tuple(vec![r(-1.0), reals(&[3.0, 4.0])]),
        ])],
    );
    assert_same(
        src,
        &v,
        &array(vec![reals(&[2.0, 4.0]), reals(&[-3.0, -4.0])]),
    );
}

// ---- definitions and calls ----

#[test]
fn definitions_as_function_arguments() {
    let src = "
def dot(a: [R; n], b: [R; n]) -> R = reduce (+) 0 (map2 (*) a b)
def rows(X: [[R; d]; m], Y: [[R; d]; m]) = map2 dot X Y
";
    let x = array(vec![reals(&[1.0, 2.0]), reals(&[3.0, 4.0])]);
    let y = array(vec![reals(&[5.0, 6.0]), reals(&[7.0, 8.0])]);
    // [1*5 + 2*6, 3*7 + 4*8]
    assert_same(src, &run(src, &[x, y]), &reals(&[17.0, 53.0]));
    let src = "
def sq(x: R) -> R = x * x
def sum_sq(A: [R; n]) = (map sq A, reduce (+) 0 (map sq A))
";
    assert_same(
        src,
        &run(src, &[reals(&[1.0, 2.0, 3.0])]),
        &tuple(vec![reals(&[1.0, 4.0, 9.0]), r(14.0)]),
    );
    let src = "
def add3(acc: R, y: R) = acc * 3 + y
def f(A: [R; n]) = (foldl add3 0 A, scanl add3 0 A, scanr add3 0 A)
";
    // foldl: (0*3 + 1)*3 + 2 = 5; scanr: r2 = 0*3 + 2, r1 = 2*3 + 1
    assert_same(
        src,
        &run(src, &[reals(&[1.0, 2.0])]),
        &tuple(vec![
            r(5.0),
            reals(&[0.0, 1.0, 5.0]),
            reals(&[7.0, 2.0, 0.0]),
        ]),
    );
}

#[test]
fn calls_of_earlier_definitions() {
    let src = "
def sq(x: R) -> R = x * x
def dot(a: [R; n], b: [R; n]) -> R = reduce (+) 0 (map2 (*) a b)
def norm2(a: [R; n]) -> R = dot(a, a)
def dist2(a: [R; n], b: [R; n]) -> R = norm2(map2 (-) a b)
def loss(X: [[R; d]; m], c: [R; d]) -> R = reduce (+) 0 (map (x. dist2(x, c)) X) + sq(2)
";
    let x = array(vec![reals(&[1.0, 2.0]), reals(&[3.0, 5.0])]);
    // |(1,2)-(1,1)|^2 + |(3,5)-(1,1)|^2 + 2^2 = 1 + (4 + 16) + 4
    assert_same(src, &run(src, &[x, reals(&[1.0, 1.0])]), &r(25.0));
}

#[test]
fn calls_instantiate_sizes() {
    let src = "
def tail(A: [R; n+1]) -> [R; n] = shift1L A
def pair(A: [R; n], B: [R; m]) -> [R; n+m] = concat(A, B)
def f(A: [R; k]) = (tail(A), len(tail(A)), pair(A, tail(A)), tail(concat([9], A)))
";
    let v = run(src, &[reals(&[1.0, 2.0, 3.0])]);
    assert_same(
        src,
        &v,
        &tuple(vec![
            reals(&[2.0, 3.0]),
            Value::Int(2),
            reals(&[1.0, 2.0, 3.0, 2.0, 3.0]),
            reals(&[1.0, 2.0, 3.0]),
        ]),
    );
    // Called directly, `n` is the length minus one.
    let src = "def g(A: [R; n+1]) = n";
    assert_same(src, &run(src, &[reals(&[4.0, 5.0, 6.0])]), &Value::Int(2));
}

#[test]
fn size_parameters() {
    let src = "def f(s: size) = (iota(s), 2 / s, s, replicate(s + 1, s))";
    let v = run(src, &[r(4.0)]);
    assert_same(
        src,
        &v,
        &tuple(vec![
            ints(&[0, 1, 2, 3]),
            r(0.5),
            Value::Int(4),
            ints(&[4; 5]),
        ]),
    );
    let v = run(src, &[r(0.0)]);
    assert_same(
        src,
        &v,
        &tuple(vec![ints(&[]), r(f64::INFINITY), Value::Int(0), ints(&[0])]),
    );
    // A size argument of a call is a size expression.
    let src = "
def count(A: [R; n], s: size) = reduce (+) 0 (map (x. x + s) A)
def f(B: [R; m]) = (count(B, 10), count(B, m + 1))
";
    // (1 + 10) + (2 + 10), (1 + 3) + (2 + 3)
    assert_same(
        src,
        &run(src, &[reals(&[1.0, 2.0])]),
        &tuple(vec![r(23.0), r(9.0)]),
    );
    // Sizes in expressions are reals: the mean divides by m.
    let src = "def mean(y: [R; m]) = reduce (+) 0 y / m";
    assert_same(src, &run(src, &[reals(&[1.0, 2.0, 6.0])]), &r(3.0));
}

#[test]
fn ode_example_steps() {
    // One size-parameter loop driving an earlier definition.
    let src = "
def step(y: [R; n], h: R) -> [R; n] = map (v. v + h) y
def run(y: [R; n], s: size) -> [R; n] = let h = 1 / s in foldl (acc, _. step(acc, h)) y iota(s)
";
    assert_same(
        src,
        &run(src, &[reals(&[0.0, 10.0]), r(4.0)]),
        &reals(&[1.0, 11.0]),
    );
}

// ---- Target-only forms ----

#[test]
fn typed_lambdas_bound_by_let() {
    check("let g = fun (x: R, y: R) -> x * y in g(3, 4)", 12.0);
    check("(fun (x: R) -> x + 1)(2)", 3.0);
    check_value(
        "let g = fun (x: R) -> x * 2 in map g [1, 2]",
        reals(&[2.0, 4.0]),
    );
    check_value(
        "let g = fun (a: R, b: R) -> a - b in scanl g 0 [1, 2]",
        reals(&[0.0, -1.0, -3.0]),
    );
    check(
        "let g = fun (p: (R, R), a: [R; 2]) -> p.0 * a[0] + p.1 * a[1] in g((1, 2), [3, 4])",
        11.0,
    );
    check("let k = fun (x: R) -> fun (y: R) -> x - y in k(10)(3)", 7.0);
}

#[test]
fn closures_capture_their_variables() {
    // The closure sees c = 10 from where it was made, not the later c = 0.
    check(
        "let c = 10 in let g = fun (x: R) -> x + c in let c = 0 in g(1) + c",
        11.0,
    );
    let src = "def f(c: R, A: [R; n]) = let g = fun (x: R) -> c * x + n in map g A";
    // n = 2: [3*1 + 2, 3*2 + 2]
    assert_same(
        src,
        &run(src, &[r(3.0), reals(&[1.0, 2.0])]),
        &reals(&[5.0, 8.0]),
    );
    check_value(
        "map (x. let g = fun (y: R) -> x * y in g(2)) [1, 2]",
        reals(&[2.0, 4.0]),
    );
    let src = "
def sq(x: R) -> R = x * x
def f(x: R) = let g = fun (y: R) -> sq(y) + x in g(3)
";
    assert_same(src, &run(src, &[r(1.0)]), &r(10.0));
}

// ---- run-time errors ----

#[test]
fn size_mismatch_at_call_time() {
    let src = "def dot(a: [R; n], b: [R; n]) -> R = reduce (+) 0 (map2 (*) a b)";
    let e = run_error(
        src,
        &[reals(&[1.0, 2.0, 3.0]), reals(&[1.0, 2.0, 3.0, 4.0])],
    );
    assert!(matches!(e, EvalError::Arguments(_)), "{e:?}");
    let msg = e.to_string();
    assert_mentions(&msg, &["dot", "3", "4"]);
    assert!(!msg.contains('\n'), "{msg}");
    // Rows of a matrix must agree.
    let src = "def f(M: [[R; d]; m]) = len(M)";
    let msg = run_error(src, &[array(vec![reals(&[1.0, 2.0]), reals(&[3.0])])]).to_string();
    assert_mentions(&msg, &["2", "1"]);
    // A value of the wrong shape.
    let src = "def f(p: (R, R)) = p.0";
    let msg = run_error(src, &[r(1.0)]).to_string();
    assert_mentions(&msg, &["(R, R)"]);
    // The wrong number of arguments.
    let msg = run_error(src, &[]).to_string();
    assert_mentions(&msg, &["1", "0"]);
    // `[R; n+1]` cannot be empty.
    let src = "def g(A: [R; n+1]) = n";
    let msg = run_error(src, &[reals(&[])]).to_string();
    assert_mentions(&msg, &["-1"]);
}

#[test]
fn size_parameters_must_be_whole() {
    let src = "def f(s: size) = iota(s)";
    for bad in [-1.0, 1.5, f64::NAN, f64::INFINITY] {
        let msg = run_error(src, &[r(bad)]).to_string();
        assert_mentions(&msg, &["`s`"]);
    }
}

#[test]
fn index_out_of_bounds_at_run_time() {
    let src = "def f(A: [R; n]) = A[3]";
    assert_same(src, &run(src, &[reals(&[1.0, 2.0, 3.0, 4.0])]), &r(4.0));
    let e = run_error(src, &[reals(&[1.0, 2.0, 3.0])]);
    assert!(matches!(e, EvalError::At { .. }), "{e:?}");
    assert_mentions(&e.to_string(), &["3", "out of bounds"]);
    let src = "def f(A: [R; n]) = A[-1]";
    let msg = run_error(src, &[reals(&[])]).to_string();
    assert_mentions(&msg, &["-1", "0"]);
}

#[test]
fn huge_sizes_are_errors() {
    let src = "def f(s: size) = len(iota(s))";
    let msg = run_error(src, &[r(1e12)]).to_string();
    assert_mentions(&msg, &["iota"]);
    let src = "def f(s: size) = len(replicate(s, 1))";
    let msg = run_error(src, &[r(1e15)]).to_string();
    assert_mentions(&msg, &["replicate"]);
    let msg = run_error("def f() = len(iota(100000000000))", &[]).to_string();
    assert_mentions(&msg, &["iota"]);
    // Sizes whose arithmetic would overflow are mismatches, not crashes.
    let src = "def f(s: size, A: [R; 5*s]) = len(A)";
    let msg = run_error(src, &[r(2e18), reals(&[])]).to_string();
    assert_mentions(&msg, &["5*s", "overflows"]);
    let src = "def f(A: [R; n], B: [R; m - n]) = len(B)";
    assert_same(
        src,
        &run(src, &[reals(&[1.0]), reals(&[2.0, 3.0])]),
        &Value::Int(2),
    );
    // A negative size computed at run time.
    let src = "def f(A: [R; n]) = iota(n - 2)";
    let msg = run_error(src, &[reals(&[1.0])]).to_string();
    assert_mentions(&msg, &["-1"]);
}

#[test]
fn sizes_that_cancel() {
    // `shift1L (concat(A, [0]))` has size `n + 1 - 1`, which is `n`.
    let src = "def f(A: [R; n]) = map2 (+) A (shift1L (concat(A, [0])))";
    // [1 + 2, 2 + 0]
    assert_same(src, &run(src, &[reals(&[1.0, 2.0])]), &reals(&[3.0, 2.0]));
}

// ---- type errors ----

#[test]
fn map2_of_arrays_of_different_sizes() {
    let msg = front_error("def dot(a: [R; n], b: [R; m]) -> R = reduce (+) 0 (map2 (*) a b)");
    assert_mentions(&msg, &["map2", "`n`", "`m`"]);
    let msg = front_error("def f() = map2 (+) [1, 2] [1, 2, 3]");
    assert_mentions(&msg, &["map2", "2", "3"]);
}

#[test]
fn if_branches_that_differ() {
    let msg = front_error("def f(x: R, A: [R; n]) = if x > 0 then x else A");
    assert_mentions(&msg, &["if", "`R`", "`[R; n]`"]);
    let msg = front_error("def f(x: R) = if x > 0 then (x, x) else x");
    assert_mentions(&msg, &["`(R, R)`", "`R`"]);
}

#[test]
fn conditions_are_not_values() {
    let msg = front_error("def f(x: R) = x < 1");
    assert_mentions(&msg, &["condition"]);
    let msg = front_error("def f(x: R) = (x < 1) + 1");
    assert_mentions(&msg, &["condition"]);
    let msg = front_error("def f(x: R) = let c = x < 1 in 0");
    assert_mentions(&msg, &["condition"]);
    let msg = front_error("def f(x: R) = if x then 1 else 0");
    assert_mentions(&msg, &["condition", "`R`"]);
    let msg = front_error("def f(x: R) = if x < 1 and x then 1 else 0");
    assert_mentions(&msg, &["and", "`R`"]);
    let msg = front_error("def f(x: R) = [x < 1]");
    assert_mentions(&msg, &["condition"]);
}

#[test]
fn unknown_names() {
    let msg = front_error("def f(x: R) = foo(x)");
    assert_mentions(&msg, &["unknown function `foo`"]);
    let msg = front_error("def f(x: R) = x + y");
    assert_mentions(&msg, &["unknown variable `y`"]);
    let msg = front_error("def f(x: R) = map g [1]");
    assert_mentions(&msg, &["`g`"]);
    let msg = front_error("def f(A: [R; n]) = iota(m)");
    assert_mentions(&msg, &["iota"]);
    let msg = front_error("def f(A: [R; n]) -> [R; k] = A");
    assert_mentions(&msg, &["`k`"]);
}

#[test]
fn wrong_arity() {
    let msg = front_error("def sq(x: R) = x * x\ndef f(x: R) = sq(x, x)");
    assert_mentions(&msg, &["`sq`", "1", "2"]);
    let msg = front_error("def sq(x: R) = x * x\ndef f(x: R) = sq()");
    assert_mentions(&msg, &["`sq`", "1", "0"]);
    let msg = front_error("def f(x: R) = sin(x, x)");
    assert_mentions(&msg, &["`sin`", "1", "2"]);
    let msg = front_error("def f(x: R) = pow(x)");
    assert_mentions(&msg, &["`pow`", "2", "1"]);
    let msg = front_error("def f(A: [R; n]) = map (x, y. x) A");
    assert_mentions(&msg, &["map", "1", "2"]);
    let msg = front_error("def f(A: [R; n]) = reduce (x. x) 0 A");
    assert_mentions(&msg, &["reduce", "2", "1"]);
    let msg = front_error("def f(A: [R; n]) = map (+) A");
    assert_mentions(&msg, &["map", "1", "2"]);
    let msg = front_error("def f(x: R) = let g = fun (a: R) -> a in g(x, x)");
    assert_mentions(&msg, &["takes 1 argument,", "2 were given"]);
    let msg = front_error("def f(A: [R; n]) = map (+) A");
    assert_mentions(&msg, &["takes 1 argument,"]);
}

#[test]
fn calls_of_later_definitions() {
    let msg = front_error("def f(x: R) = g(x)\ndef g(x: R) = x");
    assert_mentions(&msg, &["`g`", "later"]);
    let msg = front_error("def f(x: R) = f(x)");
    assert_mentions(&msg, &["`f`", "itself"]);
    let msg = front_error("def f(A: [R; n]) = map g A\ndef g(x: R) = x");
    assert_mentions(&msg, &["`g`", "later"]);
    // A variable shadows a later definition of the same name.
    let src = "def f(g: R) = g * 2\ndef g(x: R) = x";
    let m = checked(src);
    assert_same(src, &interp::call(&m, 0, &[r(3.0)]).unwrap(), &r(6.0));
}

#[test]
fn primitives_cannot_be_rebound() {
    for src in [
        "def f(sin: R) = sin",
        "def f(x: R) = let exp = x in exp",
        "def max(x: R) = x",
        "def f(A: [R; n]) = map (log. log) A",
        "def f(x: R) = let (a, sqrt) = (x, x) in a",
    ] {
        let msg = front_error(src);
        assert!(msg.contains("primitive"), "{src}: {msg}");
    }
    let msg = front_error("def f(map: R) = map");
    assert!(!msg.is_empty());
}

#[test]
fn other_type_errors() {
    let msg = front_error("def f(x: R) -> [R; 2] = x");
    assert_mentions(&msg, &["`[R; 2]`", "`R`"]);
    let msg = front_error("def f(A: [R; n]) = A + 1");
    assert_mentions(&msg, &["`R`", "`[R; n]`"]);
    let msg = front_error("def f() = [1, (2, 3)]");
    assert_mentions(&msg, &["`R`", "`(R, R)`"]);
    let msg = front_error("def f() = [1, 2, 3][3]");
    assert_mentions(&msg, &["3", "out of bounds"]);
    let msg = front_error("def f() = [1, 2, 3][-4]");
    assert_mentions(&msg, &["-4", "out of bounds"]);
    let msg = front_error("def f() = (1, 2).2");
    assert_mentions(&msg, &[".2"]);
    let msg = front_error("def f(x: R) = fst x");
    assert_mentions(&msg, &["`R`"]);
    let msg = front_error("def f() = let (a, b) = (1, 2, 3) in a");
    assert_mentions(&msg, &["(R, R, R)"]);
    let msg = front_error("def f(A: [R; n]) = reduce (+) (0, 0) A");
    assert_mentions(&msg, &["`R`", "`(R, R)`"]);
    let msg = front_error("def f(A: [R; n]) = foldl (acc, y. (acc, y)) 0 A");
    assert_mentions(&msg, &["`R`", "`(R, R)`"]);
    let msg = front_error("def f() = concat([1], [[1]])");
    assert_mentions(&msg, &["`R`", "`[R; 1]`"]);
    let msg = front_error("def f(x: R) = iota(x)");
    assert_mentions(&msg, &["iota", "size"]);
    let msg = front_error("def f(x: R) = let v: [R; 2] = [1, 2, 3] in x");
    assert_mentions(&msg, &["`[R; 2]`", "`[R; 3]`"]);
    let msg = front_error("def f(x: R, x: R) = x");
    assert_mentions(&msg, &["`x`"]);
    let msg = front_error("def f(x: R) = x\ndef f(y: R) = y");
    assert_mentions(&msg, &["`f`"]);
    let msg = front_error("def f(x: R) = let g = (y. y) in g(x)");
    assert_mentions(&msg, &["fun"]);
    let msg = front_error("def f(x: R) = if x < 1 < 2 then 1 else 0");
    assert_mentions(&msg, &["chain"]);
    let msg = front_error("def sq(x: R) = x * x\ndef f(x: R) = sq");
    assert_mentions(&msg, &["`sq`"]);
    let msg = front_error("def f(x: R) = map exp(x)");
    assert!(!msg.is_empty());
}

// ---- printer round trips ----

/// Parses `text`, prints it, parses the printed form, and checks that the
/// two trees are the same and that printing is stable.
#[track_caller]
fn round_trip(text: &str) {
    let e = parse_expr(text).unwrap_or_else(|err| panic!("{text}: {err}"));
    let printed = e.to_string();
    let again = parse_expr(&printed)
        .unwrap_or_else(|err| panic!("{text} printed as {printed}, which does not parse: {err}"));
    assert!(
        again.same(&e),
        "{text} printed as {printed}, which reads back as {again}"
    );
    assert_eq!(again.to_string(), printed, "printing {text} is not stable");
}

#[test]
fn round_trip_negations() {
    for text in [
        "-(1.5)",
        "- -1.5",
        "-1.5",
        "- 1.5",
        "x - -1",
        "x - - 1",
        "-x",
        "- -x",
        "-(-x)",
        "-(x - 1)",
        "-x * y",
        "-(x * y)",
        "-p.0",
        "-(1.5).0",
        "-(2)[0]",
        "2 * -3",
        "-0",
        "-(0)",
        "-inf",
        "-(inf)",
        "-nan",
        "-(nan)",
        "x - (-1)",
        "-reduce (+) 0 A",
        "reduce max (-inf) A",
        "map2 (*) (-1) (- x)",
    ] {
        round_trip(text);
    }
    // `-(1.5)` is a negation, `-1.5` a constant.
    let neg = parse_expr("-(1.5)").unwrap();
    let lit = parse_expr("-1.5").unwrap();
    assert!(!neg.same(&lit));
    assert!(parse_expr("-(1.5)").unwrap().to_string().contains('('));
}

#[test]
fn round_trip_projections_and_lambdas() {
    for text in [
        "(x.0)",
        "(x. 0)",
        "map (x. 0) A",
        "map (x.0) A",
        "p.0.1",
        "(p.0).1",
        "((a, b). a * b)",
        "map ((a, b). a) P",
        "foldl ((p, s), y. (p * y, s + y)) (1, 0) A",
        "map (_. 1) A",
        "fst p.1",
        "snd (fst p)",
        "(1, 2, 3).2",
    ] {
        round_trip(text);
    }
    // `(x.0)` projects, `(x. 0)` is a lambda.
    assert!(!parse_expr("(x.0)")
        .unwrap()
        .same(&parse_expr("(x. 0)").unwrap()));
}

#[test]
fn round_trip_conditions() {
    for text in [
        "if a < b and not (c > d) then 1 else 0",
        "if not a < b then 1 else 0",
        "if (a < b or c < d) and e < f then 1 else 0",
        "if a < b or c < d and e < f then 1 else 0",
        "if not (a < b or c < d) then 1 else 0",
        "if not not a < b then 1 else 0",
        "if (a + b) < c then 1 else 0",
        "if a == b then 1 else if a != b then 2 else 3",
        "1 + if x > 0 then x else 0 + 2",
        "1 + (if x > 0 then x else 0) + 2",
        "(if x > 0 then x else 0) * 2",
        "if (if a < b then c else d) < e then 1 else 0",
    ] {
        round_trip(text);
    }
}

#[test]
fn round_trip_lets() {
    for text in [
        "1 + let x = 2 in x * 3",
        "(let x = 2 in x) + 1",
        "2 * let x = 1 in x + 1",
        "let x = (let y = 1 in y) in x",
        "let (a, (_, c)) = (1, (2, 3)) in a + c",
        "let v: [R; n + 1] = A in v[-1]",
        "[let x = 1 in x, 2]",
        "f(let x = 1 in x, 2)",
        "map (x. let y = x in y) A",
        "-let x = 1 in x",
        "let x = 1 in let y = 2 in x - y",
        "(let x = 1 in x).0",
    ] {
        round_trip(text);
    }
}

#[test]
fn round_trip_target_forms() {
    for text in [
        "fun (x: R, y: R) -> x * y",
        "let g = fun (x: R, y: R) -> x * y in g(3, 4)",
        "(fun (x: R) -> x)(3)",
        "f(x)(y)",
        "f(x)(y)(z)",
        "(fun (x: R) -> fun (y: R) -> x + y)(1)(2)",
        "fun (p: (R, [R; n]), a: [[R; 2]; m]) -> p.0",
        "1 + (fun (x: R) -> x)(2)",
        "map (fun (x: R) -> x) A",
        "scanl (+) 0 (shift1L x)",
        "scanr (x, y. 2 * x + y) 0 (shift1R y)",
        "concat([x[0]], map2 (*) (shift1L x) (shift1R y))",
        "replicate(n + 1, (1, 0))",
        "iota(len(A) - 1)",
    ] {
        round_trip(text);
    }
}

#[test]
fn round_trip_modules() {
    let text = "
def sq(x: R) -> R = x * x
def f(x: [R; n], s: size) -> [R; n] =
  let h = 2 / s in
  foldl (y, _. map (v. v + h * sq(v)) y) replicate(n, 0) iota(s)
def g(a: R, b: R) = if a < b and not (a > -1) then (a, - -b) else (-(1.5), a - -1)
";
    let m = parse_module(text).unwrap();
    let printed = m.to_string();
    let again = parse_module(&printed).unwrap_or_else(|e| panic!("{printed}: {e}"));
    assert!(again.same(&m), "{text}\nprinted as\n{printed}");
    assert_eq!(again.to_string(), printed);
    // And the printed program means the same.
    let args = [reals(&[1.0, 2.0]), r(2.0)];
    let a = interp::call(&check_source("a", text).unwrap(), 1, &args).unwrap();
    let b = interp::call(&check_source("b", &printed).unwrap(), 1, &args).unwrap();
    assert_same(&printed, &b, &a);
}

// ---- limits ----

#[test]
fn a_size_no_argument_determines_is_a_type_error() {
    let msg = front_error("def f(a: [R; 2*n]) -> R = len(a)");
    assert_mentions(&msg, &["`n`", "cannot be determined"]);
    // Determined through another parameter, it is fine.
    checked("def f(a: [R; n], b: [R; 2*n]) -> R = len(b)");
    checked("def f(a: [R; n+1], b: [R; n]) -> R = len(b)");
}

#[test]
fn sizes_beyond_the_limit_are_type_errors() {
    assert_mentions(
        &front_error("def f() = iota(100000000000000 * 100000000000000)"),
        &["size"],
    );
    assert_mentions(
        &front_error("def f(a: [R; 9223372036854775807]) -> R = 0"),
        &["exceeds"],
    );
    let mut doubling = String::from("def f(a: [R; n]) -> R =\n");
    for _ in 0..64 {
        doubling.push_str("  let a = concat(a, a) in\n");
    }
    doubling.push_str("  len(a)\n");
    assert_mentions(&front_error(&doubling), &["exceeds"]);
}

#[test]
fn the_interpreter_bounds_total_allocation() {
    let m = checked("def f(s: size) -> R = reduce (+) 0 (map (i. len(replicate(s, 0))) iota(s))");
    let limits = interp::Limits {
        max_array_len: 1000,
        max_total_elements: 20_000,
        ..Default::default()
    };
    // 100 arrays of 100 elements fit; 200 of 200 do not, though each does.
    assert!(interp::call_with_limits(&m, 0, &[r(100.0)], limits).is_ok());
    let e = interp::call_with_limits(&m, 0, &[r(200.0)], limits).unwrap_err();
    assert_mentions(&e.to_string(), &["limit"]);
}

#[test]
fn take_and_drop() {
    check_value("take(2, [1, 2, 3])", reals(&[1.0, 2.0]));
    check_value("drop(2, [1, 2, 3])", reals(&[3.0]));
    check_value("drop(3, [1, 2, 3])", reals(&[]));
    let m = checked("def f(A: [R; n], k: size) -> [R; k] = take(k, A)");
    let e = interp::call(&m, 0, &[reals(&[1.0, 2.0]), r(3.0)]).unwrap_err();
    assert_mentions(&e.to_string(), &["take", "3", "2"]);
    assert_mentions(&front_error("def f(A: [R; n]) = take(1.5, A)"), &["size"]);
}
