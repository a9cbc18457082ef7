//! Integers (`Z`, `[Z; n]`): literals decided by the type checker,
//! integer arithmetic with the documented semantics of `//` and `%`,
//! conversions, sizes and `len` as integers. Each program goes through
//! every engine (the interpreter, native code, both routes of reverse mode,
//! finite differences over the reals: the `pipeline` oracle); integers are
//! never differentiated.

mod support;

use gradlift::{Args, Jit, Program, Value};
use support::pipeline_oracle::check_program;

fn ints(xs: &[i64]) -> Value {
    Value::array(xs.iter().map(|&k| Value::Int(k)).collect())
}

fn eval(text: &str, fn_name: &str, args: &[Value]) -> Value {
    let program = Program::parse("t.grad", text).unwrap_or_else(|e| panic!("{e}"));
    program.function(fn_name).unwrap().eval(args).unwrap()
}

/// Every engine agrees on `text`'s last function, with finite differences
/// checked.
fn everywhere(text: &str, args: &[Value]) {
    let jit = Jit::new().unwrap().verify(true);
    let outcome = check_program(text, args, false, &jit);
    assert!(outcome.native && outcome.gradients, "{text}");
    assert!(outcome.finite_differences > 0, "{text}");
}

const DIVISION: &str = "def d(a: Z, b: Z) -> (Z, Z, Z, Z, Z, Z) =
  (a // b, a % b, a * b - 3, -a, min(a, b), max(a, b))";

#[test]
fn division_rounds_down_natively_as_in_the_interpreter() {
    let program = Program::parse("t.grad", DIVISION).unwrap();
    let f = program.function("d").unwrap();
    let native = f.compile(&Jit::new().unwrap()).unwrap();
    let edges = [i64::MIN, i64::MIN + 1, -7, -2, -1, 1, 2, 3, 7, i64::MAX];
    for &a in edges.iter().chain(&[0]) {
        for &b in &edges {
            let args = [Value::Int(a), Value::Int(b)];
            let want = f.eval(&args).unwrap();
            let got = native.call(&args).unwrap();
            assert!(got.same(&want), "{a}, {b}: {got} vs {want}");
            let Value::Tuple(parts) = &want else { panic!() };
            let (q, r) = (parts[0].as_int().unwrap(), parts[1].as_int().unwrap());
            if b != -1 || a != i64::MIN {
                // Rounded down, the remainder of the divisor's sign.
                assert_eq!(q.wrapping_mul(b).wrapping_add(r), a, "{a}, {b}");
                assert!(r == 0 || (r < 0) == (b < 0), "{a} % {b} = {r}");
                assert!(r.unsigned_abs() < b.unsigned_abs(), "{a} % {b} = {r}");
            }
        }
        // A zero divisor is an error in both engines.
        let args = [Value::Int(a), Value::Int(0)];
        assert!(f.eval(&args).is_err());
        assert!(native.call(&args).is_err());
    }
    assert!(
        eval(DIVISION, "d", &[Value::Int(-7), Value::Int(2)]).same(&Value::tuple(
            [-4, 1, -17, 7, -7, 2].map(Value::Int).to_vec()
        ))
    );
}

#[test]
fn literals_are_reals_unless_an_integer_is_needed() {
    let text = "def f(x: R, k: Z, idx: [Z; m]) -> R =
  let s = reduce (+) 0 (map (i. real(i * k + 1) * x) idx) in
  s + real(k // 2) * x * x + real(len(idx) % 3) + real(-7 // 2) / (1 + x * x)";
    let args = [Value::Real(1.5), Value::Int(3), ints(&[0, 1, 2])];
    let v = eval(text, "f", &args).as_real().unwrap();
    let want = 12.0 * 1.5 + 1.0 * 2.25 + 0.0 + -4.0 / 3.25;
    assert!((v - want).abs() < 1e-12, "{v} vs {want}");
    everywhere(text, &args);
}

#[test]
fn sizes_len_and_iota_are_integers() {
    let text = "def f(A: [R; n], s: size) -> R =
  let w = map (i. A[0] * real(i) + real(n - i)) iota(n) in
  sum(w) / real(len(A)) + real(reduce (+) 0 (iota(s))) * A[1]
  + reduce (+) 0 (map2 (a, i. if i % 2 == 0 then a * a else -a) A iota(n))";
    let args = [Value::reals(&[0.5, -1.25, 2.0]), Value::Int(4)];
    everywhere(text, &args);
}

#[test]
fn integer_state_in_a_loop_is_not_differentiated() {
    // A counter carried beside a real state, and a tuple parameter with an
    // integer component: the gradient has the reals' cotangents only. (A
    // literal alone is a real: the counter starts at `int(0)`.)
    let text = "def f(p: (R, Z), A: [R; n]) -> R =
  let (acc, count) = foldl ((s, c), a. if a > 0 then (s + a * p.0, c + p.1) else (s * a, c)) (0, int(0)) A in
  acc * real(count)";
    let args = [
        Value::tuple(vec![Value::Real(0.75), Value::Int(2)]),
        Value::reals(&[0.5, -1.0, 2.0, 0.25]),
    ];
    everywhere(text, &args);
    let program = Program::parse("t.grad", text).unwrap();
    let f = program.function("f").unwrap();
    let g = f.gradient(None, Default::default()).unwrap();
    let (_, grads) = g.eval(&args).unwrap();
    // `p` has its real's cotangent and a zero for its integer.
    let Value::Tuple(p) = &grads[0] else {
        panic!("{}", grads[0])
    };
    assert_eq!(p[1].as_int(), Some(0));
}

#[test]
fn an_integer_parameter_cannot_be_differentiated() {
    let program = Program::parse("t.grad", "def f(x: R, k: Z) -> R = x * real(k)").unwrap();
    let f = program.function("f").unwrap();
    let err = f
        .gradient(Some(&[gradlift::Name::from("k")]), Default::default())
        .expect_err("refused");
    assert!(
        err.to_string().contains("integers are not differentiated"),
        "{err}"
    );
    // By default the gradient is with respect to the reals.
    let g = f.gradient(None, Default::default()).unwrap();
    let (v, grads) = g.eval(&[Value::Real(2.0), Value::Int(3)]).unwrap();
    assert_eq!((v, grads.len()), (6.0, 1));
    assert_eq!(grads[0].as_real(), Some(3.0));
}

#[test]
fn arguments_are_integers_where_the_parameter_is() {
    let program = Program::parse("t.grad", "def f(k: Z, x: R, v: [Z; n]) -> Z = k + v[0]").unwrap();
    let f = program.function("f").unwrap();
    let args = f
        .args(&Args::parse("--at", "k=-9223372036854775807, x=2, v=[1, 2]").unwrap())
        .unwrap();
    assert_eq!(f.eval(&args).unwrap().as_int(), Some(-9223372036854775806));
    let err = f
        .args(&Args::parse("--at", "k=1.5, x=2, v=[1, 2]").unwrap())
        .unwrap_err();
    assert!(err.to_string().contains("integer"), "{err}");
    let json = serde_json::json!({"k": 3, "x": 1, "v": [4]});
    let args = f.args(&Args::from_json(&json).unwrap()).unwrap();
    assert_eq!(f.eval(&args).unwrap().as_int(), Some(7));
}

#[test]
fn mixing_without_a_conversion_is_a_type_error_with_a_hint() {
    for (text, says) in [
        ("def f(x: R) -> Z = x", "expected `Z`, found `R`"),
        ("def f(k: Z, x: R) -> Z = k % x", "`%` divides integers"),
        ("def f(x: R) -> R = real(x)", "already a real"),
        ("def f(k: Z) -> Z = int(k)", "already an integer"),
    ] {
        let err = gradlift::lang::check_source("t.grad", text).expect_err("refused");
        assert!(err.to_string().contains(says), "{text}: {err}");
    }
}

#[test]
fn integer_programs_print_and_read_back() {
    let text = "def f(k: Z, x: R) -> (Z, R, Z) =
  let a = int(3) in
  let b: Z = 4 in
  let c = 5 in
  (k * b + 1, x * real(a) + 2 * c, if k > 0 then b else 0)";
    let checked = gradlift::lang::check_source("t.grad", text).unwrap();
    let printed = checked.module.to_string();
    let again = gradlift::lang::check_source("t.grad", &printed).unwrap();
    assert!(
        again.module.same(&checked.module),
        "{printed}\n---\n{}",
        again.module
    );
}

#[test]
fn hessian_vector_products_skip_the_integers() {
    // One cotangent per parameter that holds reals: the integer `k` has none.
    let text = "def f(x: [R; n], k: Z) -> R = reduce (+) 0 (map (a. a * a * real(k)) x)";
    let program = Program::parse("t.grad", text).unwrap();
    let f = program.function("f").unwrap();
    let args = [Value::reals(&[1.5, 2.0]), Value::Int(3)];
    let dirs = [Value::reals(&[1.0, 0.0]), Value::Int(0)];
    for jit in [None, Some(Jit::new().unwrap())] {
        let h = f.hvp(&args, &dirs, jit.as_ref()).unwrap();
        assert_eq!(h.value, 3.0 * (2.25 + 4.0));
        assert_eq!(h.gradient.len(), 1);
        assert!(
            h.gradient[0].same(&Value::reals(&[9.0, 12.0])),
            "{}",
            h.gradient[0]
        );
        assert!(h.hvp[0].same(&Value::reals(&[6.0, 0.0])), "{}", h.hvp[0]);
    }
}

/// An integer computed from reals where a construct needs one: the argmax
/// of the language reference (§2), a loop whose state holds an integer,
/// read as an index; and `int(floor(…))` as an index.
#[test]
fn integers_from_reals_index_arrays() {
    let text = "def argmax(a: [R; n]) -> Z =
  (foldl ((best, at), i. if a[i] > best then (a[i], i) else (best, at)) (-inf, int(0)) (iota(n))).1
def top(a: [R; n], b: [R; n], h: R) -> R = b[argmax(a)] * a[int(floor(h))]";
    let a = Value::reals(&[0.3, 2.5, -1.0, 2.4]);
    let b = Value::reals(&[10.0, 20.0, 30.0, 40.0]);
    assert!(eval(text, "argmax", std::slice::from_ref(&a)).same(&Value::Int(1)));
    let got = eval(text, "top", &[a.clone(), b.clone(), Value::Real(3.7)]);
    assert!(got.same(&Value::Real(20.0 * 2.4)), "{got}");
    everywhere(text, &[a, b, Value::Real(3.7)]);
}
