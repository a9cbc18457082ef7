//! Non-finite values and huge sizes through the safe API.
//!
//! Every primitive and the common reductions, at NaN, ±∞, ±0, the extremes
//! of the doubles and ordinary numbers: the native value equals the
//! interpreter's bit for bit (NaN equal to NaN), and so does the native
//! gradient; the IEEE results documented in docs/reliability.md hold.
//! Sizes whose workspace byte count would overflow are an error on both
//! engines, never a wrap-around.

use gradlift::{GradOptions, Jit, Program, Value};

const SPECIAL: [f64; 12] = [
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    0.0,
    -0.0,
    1.0,
    -1.0,
    2.5,
    -0.5,
    f64::MAX,
    f64::MIN_POSITIVE,
    5e-324,
];

const UNARY: [&str; 11] = [
    "-x", "sin(x)", "cos(x)", "tan(x)", "exp(x)", "log(x)", "sqrt(x)", "tanh(x)", "abs(x)",
    "sign(x)", "1 / x",
];

const BINARY: [&str; 10] = [
    "x + y",
    "x - y",
    "x * y",
    "x / y",
    "pow(x, y)",
    "min(x, y)",
    "max(x, y)",
    "if x < y then x * y else x - y",
    "if x == y then 1 else y",
    "x * log(y) + sqrt(x) / y",
];

const ARRAYS: [&str; 5] = [
    "reduce (+) 0 A",
    "reduce (*) 1 A",
    "reduce max (-inf) A",
    "reduce min inf A",
    "foldl (acc, a. acc * 0.5 + exp(a)) 0 A",
];

fn bits_equal(a: &[Value], b: &[Value]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.same(y))
}

/// Interpreter against native code, for the value and the gradient.
fn agree(text: &str, args: &[Value], jit: &Jit) -> (Value, f64, Vec<Value>) {
    let program = Program::parse("ieee.grad", text).unwrap();
    let f = program.last_function().unwrap();
    let want = f.eval(args).unwrap();
    let got = f.compile(jit).unwrap().call(args).unwrap();
    assert!(
        got.same(&want),
        "{text} at {args:?}: JIT {got}, interpreter {want}"
    );
    let g = f.gradient(None, GradOptions::default()).unwrap();
    let (v1, g1) = g.eval(args).unwrap();
    let (v2, g2) = g.compile(jit).unwrap().call(args).unwrap();
    assert!(
        v1.to_bits() == v2.to_bits() || (v1.is_nan() && v2.is_nan()),
        "{text} at {args:?}: gradient value {v1} interpreted, {v2} native"
    );
    assert!(
        bits_equal(&g1, &g2),
        "{text} at {args:?}: gradient {g1:?} interpreted, {g2:?} native"
    );
    assert!(
        Value::Real(v1).same(&want),
        "{text} at {args:?}: the gradient program's value {v1}, the function's {want}"
    );
    (want, v1, g1)
}

#[test]
fn engines_agree_on_special_values() {
    let jit = Jit::new().unwrap();
    let mut cases = 0;
    for body in UNARY {
        let text = format!("def f(x: R) -> R = {body}");
        for x in SPECIAL {
            agree(&text, &[Value::Real(x)], &jit);
            cases += 1;
        }
    }
    for body in BINARY {
        let text = format!("def f(x: R, y: R) -> R = {body}");
        for x in SPECIAL {
            for y in SPECIAL {
                agree(&text, &[Value::Real(x), Value::Real(y)], &jit);
                cases += 1;
            }
        }
    }
    for body in ARRAYS {
        let text = format!("def f(A: [R; n]) -> R = {body}");
        for x in SPECIAL {
            for y in SPECIAL {
                agree(&text, &[Value::reals(&[x, 1.5, y])], &jit);
                cases += 1;
            }
        }
    }
    assert_eq!(cases, 11 * 12 + 10 * 144 + 5 * 144);
}

/// The value and the derivative of `body` at `x` (both engines agree).
fn at(body: &str, x: f64) -> (f64, f64) {
    let jit = Jit::new().unwrap();
    let (v, _, g) = agree(
        &format!("def f(x: R) -> R = {body}"),
        &[Value::Real(x)],
        &jit,
    );
    (v.as_real().unwrap(), g[0].as_real().unwrap())
}

#[track_caller]
fn check(body: &str, x: f64, value: f64, derivative: f64) {
    let (v, d) = at(body, x);
    let same = |a: f64, b: f64| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
    assert!(
        same(v, value) && same(d, derivative),
        "{body} at {x}: ({v}, {d}), expected ({value}, {derivative})"
    );
}

#[test]
fn ieee_results_of_the_primitives() {
    let nan = f64::NAN;
    let inf = f64::INFINITY;
    check("log(x)", -1.0, nan, -1.0);
    check("log(x)", 0.0, -inf, inf);
    check("log(x)", inf, inf, 0.0);
    check("sqrt(x)", -1.0, nan, nan);
    check("sqrt(x)", 0.0, 0.0, inf);
    check("1 / x", 0.0, inf, -inf);
    check("1 / x", -0.0, -inf, -inf);
    check("x / 0", 1.0, inf, inf);
    check("x / 0", 0.0, nan, inf);
    check("exp(x)", inf, inf, inf);
    check("exp(x)", -inf, 0.0, 0.0);
    check("exp(x)", 1000.0, inf, inf);
    check("tanh(x)", inf, 1.0, 0.0);
    check("x * x", nan, nan, nan);
    check("x * x", inf, inf, inf);
    check("x - x", inf, nan, 0.0);
    check("abs(x)", -inf, inf, -1.0);
    check("sign(x)", nan, nan, 0.0);
}

/// `s`×`s` reals: at s = 2³² the byte count (2⁶⁷) overflows 64 bits, at
/// s = 2⁴⁰ so does the element count, beyond 2⁴⁰ the size is refused on
/// entry. The value and the gradient are errors on both engines.
#[test]
fn a_workspace_that_would_overflow_is_an_error() {
    let text = "def f(s: size, x: R) -> R =\n  reduce (+) 0 (map (r. reduce (+) 0 r) (replicate(s, replicate(s, x))))";
    let program = Program::parse("square.grad", text).unwrap();
    let f = program.last_function().unwrap();
    let jit = Jit::new().unwrap();
    let primal = f.compile(&jit).unwrap();
    let g = f.gradient(None, GradOptions::default()).unwrap();
    let gradient = g.compile(&jit).unwrap();
    for s in [
        (1u64 << 32) as f64,
        (1u64 << 40) as f64,
        ((1u64 << 40) + 1) as f64,
        9.007_199_254_740_992e15,
    ] {
        let args = [Value::Real(s), Value::Real(1.0)];
        let errors = [
            f.eval(&args).err(),
            primal.call(&args).err(),
            g.eval(&args).err(),
            gradient.call(&args).err(),
        ];
        for (engine, e) in [
            "interpreter",
            "JIT",
            "interpreted gradient",
            "native gradient",
        ]
        .iter()
        .zip(errors)
        {
            match e {
                Some(e) if e.is_runtime() || e.kind() == gradlift::ErrorKind::Arguments => {
                    assert!(e.to_string().contains("error"), "{e}")
                }
                other => panic!("s = {s}, {engine}: {other:?}"),
            }
        }
    }
    let args = [Value::Real(3.0), Value::Real(1.0)];
    assert_eq!(primal.call(&args).unwrap().as_real(), Some(9.0));
    let (v, grads) = gradient.call(&args).unwrap();
    assert_eq!((v, grads[0].as_real()), (9.0, Some(9.0)));
}
