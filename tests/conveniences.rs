//! The conveniences of `gradlift_lang::sugar`: `map` over several arrays,
//! `zip`, `max(A)` and `min(A)`, and the library definitions `sum` and
//! `logsumexp`. Each program goes through every engine (the interpreter,
//! native code, both routes of reverse mode, finite differences: the
//! `pipeline` oracle) and its values are checked against numbers computed
//! by hand.

mod support;

use gradlift::{Jit, Program, Value};
use support::pipeline_oracle::check_program;

fn three() -> Vec<Value> {
    vec![
        Value::reals(&[1.0, 2.0, 3.0]),
        Value::reals(&[4.0, 5.0, 6.0]),
        Value::reals(&[0.1, 0.2, 0.3]),
    ]
}

fn value(text: &str, args: &[Value]) -> f64 {
    let program = Program::parse("t.grad", text).unwrap_or_else(|e| panic!("{e}"));
    let f = program.last_function().unwrap();
    f.eval(args).unwrap().as_real().unwrap()
}

/// Every engine agrees on `text`'s last function, with finite differences
/// checked.
fn everywhere(text: &str, args: &[Value]) {
    let jit = Jit::new().unwrap().verify(true);
    let outcome = check_program(text, args, false, &jit);
    assert!(outcome.native && outcome.gradients, "{text}");
    assert!(outcome.finite_differences > 0, "{text}");
}

const MAP3: &str = "def f(a: [R; n], b: [R; n], c: [R; n]) -> R =
  sum(map (x, y, z. x * y + sin(z)) a b c)";

#[test]
fn map_over_three_arrays() {
    let want = 4.0 + 10.0 + 18.0 + 0.1f64.sin() + 0.2f64.sin() + 0.3f64.sin();
    assert_eq!(value(MAP3, &three()), want);
    everywhere(MAP3, &three());
}

#[test]
fn map_over_four_arrays_with_a_definition() {
    let text = "def fma2(a: R, b: R, c: R, d: R) -> R = a * b + c * d
def h(a: [R; n], b: [R; n], c: [R; n], d: [R; n]) -> R = sum(map fma2 a b c d)";
    let mut args = three();
    args.push(Value::reals(&[1.0, -1.0, 2.0]));
    assert_eq!(value(text, &args), 32.0 + 0.1 - 0.2 + 0.6);
    everywhere(text, &args);
    // A primitive of two arguments over two arrays is `map2`.
    let text = "def g(a: [R; n], b: [R; n]) -> R = sum(map max a b)";
    assert_eq!(value(text, &three()[..2]), 15.0);
}

#[test]
fn zip_of_three_arrays_and_logsumexp() {
    let text = "def g(a: [R; n], b: [R; n], c: [R; n]) -> R =
  logsumexp(map (p. p.0 * p.1 - p.2) (zip(a, b, c))) + max(a) - min(b)";
    let lse = 17.7 + ((3.9f64 - 17.7).exp() + (9.8f64 - 17.7).exp() + 1.0).ln();
    assert!((value(text, &three()) - (lse + 3.0 - 4.0)).abs() < 1e-12);
    everywhere(text, &three());
}

#[test]
fn logsumexp_at_the_edges() {
    let lse = "def f(x: [R; n]) -> R = logsumexp(x)";
    let at = |xs: &[f64]| value(lse, &[Value::reals(xs)]);
    // The empty sum is 0, its log −∞; so are sums of nothing but −∞.
    assert_eq!(at(&[]), f64::NEG_INFINITY);
    assert_eq!(
        at(&[f64::NEG_INFINITY, f64::NEG_INFINITY]),
        f64::NEG_INFINITY
    );
    assert_eq!(at(&[f64::INFINITY, 1.0]), f64::INFINITY);
    // No overflow where exp alone would.
    assert!((at(&[1000.0, 1000.0]) - (1000.0 + 2f64.ln())).abs() < 1e-12);
    everywhere(lse, &[Value::reals(&[0.5, -1.0, 2.0])]);
    // Its gradient is the softmax.
    let program = Program::parse("t.grad", lse).unwrap();
    let g = program
        .last_function()
        .unwrap()
        .gradient(None, Default::default())
        .unwrap();
    let (_, grad) = g.eval(&[Value::reals(&[0.0, 2f64.ln()])]).unwrap();
    let mut flat = Vec::new();
    grad[0].flatten(&mut flat);
    assert!((flat[0] - 1.0 / 3.0).abs() < 1e-15 && (flat[1] - 2.0 / 3.0).abs() < 1e-15);
}

#[test]
fn max_and_min_of_an_array() {
    let text = "def f(x: [R; n]) -> R = max(x) - 2 * min(x)";
    assert_eq!(value(text, &[Value::reals(&[3.0, -1.0, 4.0])]), 6.0);
    assert_eq!(value(text, &[Value::reals(&[])]), f64::NEG_INFINITY);
    everywhere(text, &[Value::reals(&[3.0, -1.0, 4.0])]);
}

#[test]
fn a_definition_of_the_users_takes_the_place_of_the_librarys() {
    let text = "def sum(x: [R; n]) -> R = 2 * reduce (+) 0 x
def f(x: [R; n]) -> R = sum(x)";
    assert_eq!(value(text, &[Value::reals(&[1.0, 2.0])]), 6.0);
    // What is used is added, before the definitions that use it.
    let program = Program::parse("t.grad", "def f(x: [R; n]) -> R = sum(x)").unwrap();
    let names: Vec<&str> = program
        .module()
        .module
        .defs
        .iter()
        .map(|d| &*d.name)
        .collect();
    assert_eq!(names, vec!["sum", "f"]);
}

#[test]
fn misuses_are_errors_with_positions() {
    let err = |text: &str| Program::parse("t.grad", text).unwrap_err().to_string();
    let e = err("def f(a: [R; n], b: [R; n], c: [R; n]) -> R = sum(map (x, y. x * y) a b c)");
    assert!(
        e.contains("`map` over 3 arrays takes a function of 3 parameters, one per array; this lambda has 2"),
        "{e}"
    );
    assert!(e.contains("t.grad:1:"), "{e}");
    let e = err("def f(a: [R; n]) -> R = sum(map (p. p.0) (zip(a)))");
    assert!(e.contains("`zip` takes two arrays or more, found 1"), "{e}");
    let e = err("def f(a: [R; n], b: [R; m], c: [R; n]) -> R = sum(map (x, y, z. x) a b c)");
    assert!(e.contains("same size"), "{e}");
    let e = err("def f(a: [R; n], b: [R; n], c: [R; n]) -> R = sum(map max a b c)");
    assert!(
        e.contains(
            "`map` over 3 arrays takes a function of 3 parameters, one per array; `max` takes 2"
        ),
        "{e}"
    );
    let e =
        err("def g(x: R) -> R = x\ndef f(a: [R; n], b: [R; n], c: [R; n]) -> R = sum(map g a b c)");
    assert!(e.contains("`g` takes 1 argument, but 3 were given"), "{e}");
    let e = err("def zip(a: R) -> R = a");
    assert!(e.contains("zip"), "{e}");
}

#[test]
fn the_written_forms_print_and_parse_back() {
    // The property of the `front_end` fuzz target, on the conveniences.
    for text in [
        MAP3,
        "def g(a: R, b: R, c: R) -> R = a\ndef f(a: [R; n], b: [R; n], c: [R; n]) -> R = sum(map g a b c)",
        "def f(a: [R; n], b: [R; n], c: [R; n]) -> R = sum(map (fun (x: R, y: R, z: R) -> x * y * z) a b c)",
        "def f(a: [R; n], b: [R; n]) -> [(R, R); n] = zip(a, b)",
        "def f(a: [R; n]) -> R = max(a) + min(a) + logsumexp(a)",
    ] {
        let module = gradlift::lang::parse_module(text).unwrap();
        let printed = module.to_string();
        let again = gradlift::lang::parse_module(&printed)
            .unwrap_or_else(|e| panic!("{e}\n{printed}"));
        assert!(again.same(&module), "{printed}\nfrom\n{text}");
        let checked = Program::parse("t.grad", text).is_ok();
        assert!(checked, "{text}");
        assert!(Program::parse("t.grad", &printed).is_ok(), "{printed}");
    }
}

fn matrix(rows: &[&[f64]]) -> Value {
    Value::array(rows.iter().map(|r| Value::reals(r)).collect())
}

#[test]
fn transpose_of_a_matrix() {
    let text = "def f(m: [[R; c]; r], w: [R; r]) -> R =
  let t = transpose(m) in
  sum(map (col. sum(map2 (*) col w) * col[0]) t) + sum(map (row. row[1]) (transpose(t)))";
    let m = matrix(&[&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]]);
    let w = Value::reals(&[0.5, -1.0]);
    // Columns (1, 4), (2, 5), (3, 6): Σ (0.5a − b)·a, then Σ m[i][1].
    let want = (0.5 - 4.0) * 1.0 + (1.0 - 5.0) * 2.0 + (1.5 - 6.0) * 3.0 + 2.0 + 5.0;
    assert_eq!(value(text, &[m.clone(), w.clone()]), want);
    everywhere(text, &[m, w]);
    // A matrix of tuples, and a matrix of no rows: its c columns are empty.
    let text = "def g(m: [[(R, R); c]; r]) -> ([[(R, R); r]; c], R) =
  let t = transpose(m) in (t, sum(map (col. sum(map (p. p.0 * p.1) col)) t))";
    let program = Program::parse("t.grad", text).unwrap();
    let f = program.last_function().unwrap();
    let native = f.compile(&Jit::new().unwrap()).unwrap();
    let pair = |a: f64, b: f64| Value::tuple(vec![Value::Real(a), Value::Real(b)]);
    let m = Value::array(vec![
        Value::array(vec![pair(1.0, 2.0), pair(3.0, 4.0)]),
        Value::array(vec![pair(5.0, 6.0), pair(7.0, 8.0)]),
        Value::array(vec![pair(9.0, 1.0), pair(2.0, 3.0)]),
    ]);
    let got = f.eval(std::slice::from_ref(&m)).unwrap();
    assert!(got.same(&native.call(&[m]).unwrap()));
    let Value::Tuple(parts) = &got else { panic!() };
    let Value::Array(cols) = &parts[0] else {
        panic!()
    };
    assert_eq!(cols.len(), 2);
    assert!(cols[1].same(&Value::array(vec![
        pair(3.0, 4.0),
        pair(7.0, 8.0),
        pair(2.0, 3.0)
    ])));
    let text = "def h(m: [[R; 3]; r]) -> [[R; r]; 3] = transpose(m)";
    let program = Program::parse("t.grad", text).unwrap();
    let f = program.last_function().unwrap();
    let native_empty = f.compile(&Jit::new().unwrap()).unwrap();
    let args = [Value::array(vec![])];
    let want = Value::array(vec![Value::array(vec![]); 3]);
    assert!(f.eval(&args).unwrap().same(&want));
    assert!(native_empty.call(&args).unwrap().same(&want));
}

#[test]
fn unzip_of_pairs_and_triples() {
    let text = "def f(ps: [(R, R, R); n]) -> R =
  let (a, b, c) = unzip(ps) in sum(map2 (*) a b) + sum(map (x. x * x) c)";
    let triple =
        |a: f64, b: f64, c: f64| Value::tuple(vec![Value::Real(a), Value::Real(b), Value::Real(c)]);
    let ps = Value::array(vec![triple(1.0, 2.0, 3.0), triple(4.0, 5.0, 6.0)]);
    assert_eq!(
        value(text, std::slice::from_ref(&ps)),
        2.0 + 20.0 + 9.0 + 36.0
    );
    everywhere(text, &[ps]);
    // Of an empty array: empty arrays of the components.
    let text = "def g(ps: [(R, R); n]) -> ([R; n], [R; n]) = unzip(ps)";
    let program = Program::parse("t.grad", text).unwrap();
    let f = program.last_function().unwrap();
    let empty = [Value::array(vec![])];
    let want = Value::tuple(vec![Value::array(vec![]), Value::array(vec![])]);
    assert!(f.eval(&empty).unwrap().same(&want));
    assert!(f
        .compile(&Jit::new().unwrap())
        .unwrap()
        .call(&empty)
        .unwrap()
        .same(&want));
    // A definition named `unzip` is the program's own.
    let text = "def unzip(x: R) -> R = 2 * x
def g(y: R) -> R = unzip(y)";
    assert_eq!(value(text, &[Value::Real(1.5)]), 3.0);
    // Errors say what unzip and transpose take.
    for (text, says) in [
        (
            "def f(a: [R; n]) -> R = unzip(a)",
            "`unzip` takes an array of tuples",
        ),
        (
            "def f(a: [R; n]) -> [R; n] = transpose(a)",
            "`transpose` takes a matrix",
        ),
    ] {
        let err = gradlift::lang::check_source("t.grad", text).expect_err("refused");
        assert!(err.to_string().contains(says), "{text}: {err}");
    }
    // Both print and read back.
    let text = "def f(m: [[R; c]; r], ps: [(R, R); k]) -> R =
  let (a, b) = unzip(ps) in sum(a) * sum(b) + sum(map (row. sum(row)) (transpose(m)))";
    let checked = gradlift::lang::check_source("t.grad", text).unwrap();
    let printed = checked.module.to_string();
    let again = gradlift::lang::check_source("t.grad", &printed).unwrap();
    assert!(again.module.same(&checked.module), "{printed}");
}

const LIFTED: &str = "def squash(x: R) -> R = 1 / (1 + exp(-x))
def scale(x: R, c: R) -> R = c * x
def norm(v: [R; 3]) -> R = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2])
def blend(a: R, b: R, t: R) -> R = (1 - t) * a + t * b
def f(x: R, A: [R; n], M: [[R; n]; m], P: [[R; 3]; k], c: R) -> R =
  squash(x) + sum(squash(A)) + sum(map (r. sum(r)) (squash(M)))
  + sum(scale(A, c + 1)) + sum(norm(P))
  + sum(map (r. sum(r)) (scale(M, squash(c)))) + sum(blend(A, squash(A), c))";

/// A definition written for reals applies to arrays and matrices element
/// by element: `squash(A)` is `map squash A`, `squash(M)` a map of maps,
/// `scale(A, c)` maps over `A` with `c` the same for every element,
/// `blend(A, B, t)` maps over `A` and `B` together, and `norm(P)` maps a
/// definition over 3-vectors across the rows of `P`.
#[test]
fn definitions_apply_element_by_element() {
    let args = vec![
        Value::Real(0.3),
        Value::reals(&[1.0, -2.0]),
        matrix(&[&[1.0, 2.0], &[3.0, -4.0], &[0.5, 6.0]]),
        matrix(&[&[1.0, 2.0, 2.0], &[0.0, 3.0, 4.0]]),
        Value::Real(0.5),
    ];
    everywhere(LIFTED, &args);
    let s = |x: f64| 1.0 / (1.0 + (-x).exp());
    let (a, m) = ([1.0, -2.0], [1.0, 2.0, 3.0, -4.0, 0.5, 6.0]);
    let want = s(0.3)
        + a.iter().map(|&x| s(x)).sum::<f64>()
        + m.iter().map(|&x| s(x)).sum::<f64>()
        + a.iter().map(|&x| 1.5 * x).sum::<f64>()
        + 3.0
        + 5.0
        + m.iter().map(|&x| s(0.5) * x).sum::<f64>()
        + a.iter().map(|&x| 0.5 * x + 0.5 * s(x)).sum::<f64>();
    let got = value(LIFTED, &args);
    assert!((got - want).abs() < 1e-12, "{got} vs {want}");
    // What it is checked as: arrays of the callee's result.
    let program = Program::parse(
        "t.grad",
        "def g(x: R, y: R) -> R = x * y\ndef f(M: [[R; 2]; m], v: [R; 2]) -> [[R; 2]; m] = g(M, 2)",
    )
    .unwrap();
    let got = program
        .last_function()
        .unwrap()
        .eval(&[
            matrix(&[&[1.0, 2.0], &[3.0, 4.0]]),
            Value::reals(&[0.0, 0.0]),
        ])
        .unwrap();
    assert!(got.same(&matrix(&[&[2.0, 4.0], &[6.0, 8.0]])), "{got}");
}

#[test]
fn element_by_element_misuses_are_errors_with_positions() {
    let err = |text: &str| Program::parse("t.grad", text).unwrap_err().to_string();
    let e = err("def g(x: R, y: R) -> R = x * y\ndef f(a: [R; n], b: [R; m]) -> [R; n] = g(a, b)");
    assert!(
        e.contains("maps over arguments 1 and 2 together, but their lengths differ: `n` and `m`"),
        "{e}"
    );
    assert!(e.contains("t.grad:2:"), "{e}");
    let e = err(
        "def g(x: R, y: R) -> R = x * y\ndef f(a: [R; n], M: [[R; n]; n]) -> [R; n] = sum(g(a, M))",
    );
    assert!(e.contains("the same number of levels"), "{e}");
    // A wrong element type is still the mismatch it was.
    let e = err("def g(x: [R; 3]) -> R = x[0]\ndef f(a: [[R; 2]; n]) -> [R; n] = g(a)");
    assert!(e.contains("expected `[R; 3]`, found `[R; 2]`"), "{e}");
}
