//! Derivative operators inside programs (`grad`, `vjp`, `jvp`, `jacfwd`,
//! `jacrev`, `jacobian`): perturbation confusion, nested derivatives in the
//! four mode combinations against finite differences of finite
//! differences, derivatives inside maps and loop bodies, Jacobians against
//! hand-derived references, and positioned errors. Every program runs on
//! the interpreter and natively, which agree bit for bit, and its own
//! gradient is checked by the pipeline oracle.

mod support;

use gradlift::{Jit, Program, Value};
use support::pipeline_oracle::check_program;

fn reals(xs: &[f64]) -> Value {
    Value::reals(xs)
}

fn r(x: f64) -> Value {
    Value::Real(x)
}

/// The value of `name` in `text` at `args`: interpreted and native, which
/// must agree bit for bit.
fn eval(text: &str, name: &str, args: &[Value]) -> Value {
    let program = Program::parse("t.grad", text).unwrap_or_else(|e| panic!("{e}"));
    let f = program.function(name).unwrap();
    let interpreted = f.eval(args).unwrap_or_else(|e| panic!("{name}: {e}"));
    let native = f
        .compile(&Jit::new().unwrap().verify(true))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .call(args)
        .unwrap();
    assert!(
        interpreted.same(&native),
        "{name}: interpreted {interpreted}, native {native}"
    );
    interpreted
}

fn flat(v: &Value) -> Vec<f64> {
    let mut out = Vec::new();
    v.flatten(&mut out);
    out
}

fn assert_close(got: &[f64], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: {got:?} vs {want:?}");
    for (a, b) in got.iter().zip(want) {
        assert!(
            (a - b).abs() <= tol * (1.0 + b.abs()),
            "{what}: {got:?} vs {want:?}"
        );
    }
}

/// Every engine agrees on `text`'s last function, and its gradient matches
/// finite differences.
fn everywhere(text: &str, args: &[Value]) {
    let jit = Jit::new().unwrap().verify(true);
    let outcome = check_program(text, args, false, &jit);
    assert!(outcome.native && outcome.gradients, "{text}");
    assert!(outcome.finite_differences > 0, "{text}");
}

#[test]
fn perturbations_are_not_confused() {
    // Siskind & Pearlmutter: d/dx (x · d/dy (x + y)) = 1. A derivative
    // that confused the two perturbations would give 2.
    let text = "def f(x: R) -> R = x * grad((y. x + y), 1)
def d(x: R) -> R = grad(f, x)
def forward(x: R) -> R = (jvp(f, x, 1)).1
def inner_forward(x: R) -> R = (jvp((z. z * (jvp((y. z + y), 1, 1)).1), x, 1)).1";
    for x in [0.0, 3.0, -7.25] {
        assert_eq!(eval(text, "f", &[r(x)]).as_real(), Some(x));
        assert_eq!(eval(text, "d", &[r(x)]).as_real(), Some(1.0));
        assert_eq!(eval(text, "forward", &[r(x)]).as_real(), Some(1.0));
        assert_eq!(eval(text, "inner_forward", &[r(x)]).as_real(), Some(1.0));
    }
    // The outer gradient of a function holding an inner one.
    let program = Program::parse("t.grad", text).unwrap();
    let f = program.function("f").unwrap();
    let (value, grads) = f
        .gradient(None, Default::default())
        .unwrap()
        .eval(&[r(2.0)])
        .unwrap();
    assert_eq!(value, 2.0);
    assert_eq!(grads[0].as_real(), Some(1.0));
}

const H: &str = "def h(x: [R; 3]) -> R =
  x[0] * x[0] * x[1] + sin(x[1] * x[2]) + exp(x[0] * x[2]) / (1 + x[1] * x[1])";
const X: [f64; 3] = [0.7, -1.3, 0.4];

/// h's Hessian by finite differences of finite differences of h itself.
fn hessian_by_differences() -> Vec<f64> {
    let program = Program::parse("t.grad", H).unwrap();
    let f = program.function("h").unwrap();
    let at = |x: &[f64]| f.eval(&[reals(x)]).unwrap().as_real().unwrap();
    let eps = 1e-4;
    let mut out = Vec::new();
    for i in 0..3 {
        for j in 0..3 {
            let shifted = |di: f64, dj: f64| {
                let mut x = X.to_vec();
                x[i] += di;
                x[j] += dj;
                at(&x)
            };
            let d = (shifted(eps, eps) - shifted(eps, -eps) - shifted(-eps, eps)
                + shifted(-eps, -eps))
                / (4.0 * eps * eps);
            out.push(d);
        }
    }
    out
}

#[test]
fn hessians_in_every_mode_combination() {
    // Reverse over reverse, forward over reverse, reverse over forward and
    // forward over forward, each written in the language.
    let g = "def g(x: [R; 3]) -> [R; 3] = grad(h, x)";
    let forward_g = "def fg(x: [R; 3]) -> [R; 3] =
  map (i. (jvp(h, x, map (k. if k == i then 1.0 else 0.0) (iota(3)))).1) (iota(3))";
    let text = format!(
        "{H}\n{g}\n{forward_g}
def rr(x: [R; 3]) -> [[R; 3]; 3] = jacrev(g, x)
def fr(x: [R; 3]) -> [[R; 3]; 3] = jacfwd(g, x)
def rf(x: [R; 3]) -> [[R; 3]; 3] = jacrev(fg, x)
def ff(x: [R; 3]) -> [[R; 3]; 3] = jacfwd(fg, x)
def auto(x: [R; 3]) -> [[R; 3]; 3] = jacobian(g, x)"
    );
    let want = hessian_by_differences();
    let mut exact = None;
    for name in ["rr", "fr", "rf", "ff", "auto"] {
        let got = flat(&eval(&text, name, &[reals(&X)]));
        assert_close(&got, &want, 1e-5, name);
        // The four agree to rounding: each is exact arithmetic on h.
        let first = exact.get_or_insert_with(|| got.clone());
        assert_close(&got, first, 1e-12, name);
    }
    // The Hessian-vector product of the API (forward over reverse, from
    // outside) agrees with the one written in the language.
    let program = Program::parse("t.grad", &text).unwrap();
    let h = program.function("h").unwrap();
    let v = [0.3, -0.2, 1.1];
    let hv = h.hvp(&[reals(&X)], &[reals(&v)], None).unwrap();
    let hessian = exact.unwrap();
    let by_matrix: Vec<f64> = (0..3)
        .map(|i| (0..3).map(|j| hessian[3 * i + j] * v[j]).sum())
        .collect();
    assert_close(&flat(&hv.hvp[0]), &by_matrix, 1e-12, "hvp");
}

#[test]
fn third_derivatives_and_gradients_through_inner_ones() {
    let text = "def cube(z: R) -> R = z * z * z * sin(z)
def d1(y: R) -> R = grad(cube, y)
def d2(x: R) -> R = grad(d1, x)
def d3(x: R) -> R = grad(d2, x)";
    let x = 0.8_f64;
    let (s, c) = x.sin_cos();
    let want_d2 = 6.0 * x * s + 6.0 * x * x * c - x * x * x * s;
    let want_d3 = 6.0 * s + 18.0 * x * c - 9.0 * x * x * s - x * x * x * c;
    assert_close(&flat(&eval(text, "d2", &[r(x)])), &[want_d2], 1e-12, "d2");
    assert_close(&flat(&eval(text, "d3", &[r(x)])), &[want_d3], 1e-12, "d3");
    // The outer gradient of each, against finite differences.
    everywhere(text, &[r(x)]);
    everywhere(
        &format!("{H}\ndef s(x: [R; 3]) -> R = let g = grad(h, x) in g[0] * g[1] + exp(g[2])"),
        &[reals(&X)],
    );
}

#[test]
fn derivatives_inside_maps_and_loop_bodies() {
    // A gradient per element, and gradient descent written as a fold whose
    // step takes the gradient of a quadratic with a minimum at c.
    let text = "def q(x: [R; 2], c: [R; 2]) -> R =
  (x[0] - c[0]) * (x[0] - c[0]) + 3 * (x[1] - c[1]) * (x[1] - c[1]) + x[0] * x[1] * 0.1
def slopes(xs: [R; n]) -> [R; n] = map (x. grad((z. z * z * sin(z)), x)) xs
def descend(c: [R; 2]) -> [R; 2] =
  foldl (x, _. let g = grad((y. q(y, c)), x) in map2 (a, b. a - 0.1 * b) x g) [0, 0] (iota(60))
def loss(c: [R; 2]) -> R = let x = descend(c) in x[0] * x[0] + x[1]";
    let xs = [0.5, -1.0, 2.0];
    let got = flat(&eval(text, "slopes", &[reals(&xs)]));
    let want: Vec<f64> = xs
        .iter()
        .map(|z| 2.0 * z * z.sin() + z * z * z.cos())
        .collect();
    assert_close(&got, &want, 1e-14, "slopes");
    // Gradient descent converges to q's minimum: 2(x₀ - 1) + 0.1·x₁ = 0
    // and 6(x₁ - 2) + 0.1·x₀ = 0.
    let x = flat(&eval(text, "descend", &[reals(&[1.0, 2.0])]));
    let x0 = 1.8 / (2.0 - 1.0 / 600.0);
    assert_close(&x, &[x0, 2.0 - x0 / 60.0], 1e-5, "descend");
    // The outer gradient, through sixty inner gradients.
    everywhere(text, &[reals(&[1.0, 2.0])]);
}

#[test]
fn jacobians_of_vector_functions() {
    // F(x) = (x0·x1, sin(x2), x0 + x1 + x2, x1²): 4 outputs, 3 inputs.
    let f =
        "def f(x: [R; 3]) -> [R; 4] = [x[0] * x[1], sin(x[2]), x[0] + x[1] + x[2], x[1] * x[1]]";
    let text = format!(
        "{f}
def jf(x: [R; 3]) -> [[R; 3]; 4] = jacfwd(f, x)
def jr(x: [R; 3]) -> [[R; 3]; 4] = jacrev(f, x)
def j(x: [R; 3]) -> [[R; 3]; 4] = jacobian(f, x)
def wide(x: [R; n]) -> [[R; n]; 2] = jacobian((v. [reduce (+) 0 v, reduce (*) 1 v]), x)
def scalar_in(t: R) -> [R; 2] = jacobian((s. [s * s, exp(s)]), t)
def scalar_out(x: [R; 2]) -> [R; 2] = jacobian((v. v[0] * v[1]), x)
def both(t: R) -> R = jacrev((s. s * s * s), t)
def v(x: [R; 3], u: [R; 4]) -> [R; 3] = vjp(f, x, u)
def t(x: [R; 3], d: [R; 3]) -> ([R; 4], [R; 4]) = jvp(f, x, d)"
    );
    let x: [f64; 3] = [0.5, -2.0, 1.25];
    let want = [
        x[1],
        x[0],
        0.0, //
        0.0,
        0.0,
        x[2].cos(), //
        1.0,
        1.0,
        1.0, //
        0.0,
        2.0 * x[1],
        0.0,
    ];
    for name in ["jf", "jr", "j"] {
        assert_close(&flat(&eval(&text, name, &[reals(&x)])), &want, 1e-15, name);
    }
    let w = [2.0, 3.0, -1.0, 0.5];
    assert_close(
        &flat(&eval(&text, "wide", &[reals(&w)])),
        &[1.0, 1.0, 1.0, 1.0, -1.5, -1.0, 3.0, -6.0],
        1e-15,
        "wide",
    );
    assert_close(
        &flat(&eval(&text, "scalar_in", &[r(0.5)])),
        &[1.0, 0.5f64.exp()],
        1e-15,
        "scalar_in",
    );
    assert_close(
        &flat(&eval(&text, "scalar_out", &[reals(&[3.0, 4.0])])),
        &[4.0, 3.0],
        1e-15,
        "scalar_out",
    );
    assert_close(
        &flat(&eval(&text, "both", &[r(2.0)])),
        &[12.0],
        1e-15,
        "both",
    );
    // vjp is uᵀJ, jvp is (F(x), J·d).
    let u = [1.0, -1.0, 0.5, 2.0];
    let vjp: Vec<f64> = (0..3)
        .map(|j| (0..4).map(|i| u[i] * want[3 * i + j]).sum())
        .collect();
    assert_close(
        &flat(&eval(&text, "v", &[reals(&x), reals(&u)])),
        &vjp,
        1e-15,
        "vjp",
    );
    let d = [1.0, 0.5, -2.0];
    let fx = [x[0] * x[1], x[2].sin(), x[0] + x[1] + x[2], x[1] * x[1]];
    let jd: Vec<f64> = (0..4)
        .map(|i| (0..3).map(|j| want[3 * i + j] * d[j]).sum())
        .collect();
    let mut both = fx.to_vec();
    both.extend(jd);
    assert_close(
        &flat(&eval(&text, "t", &[reals(&x), reals(&d)])),
        &both,
        1e-15,
        "jvp",
    );
}

#[test]
fn printed_programs_read_back() {
    let text = "def f(x: R) -> R = x * grad((y. x + y), 1)
def g(x: [R; 2]) -> [[R; 2]; 2] = jacobian((v. map (a. a * x[0]) v), x)
def k(x: R, y: R) -> (R, R) = jvp((a, b. a * b), x, y, 1, 0)";
    let program = Program::parse("t.grad", text).unwrap();
    let printed = program.module().module.to_string();
    let again =
        Program::parse("printed.grad", &printed).unwrap_or_else(|e| panic!("{e}\n{printed}"));
    assert!(
        program.module().module.same(&again.module().module),
        "{printed}"
    );
}

fn error_of(text: &str) -> String {
    match Program::parse("t.grad", text) {
        Ok(p) => match p.last_function().unwrap().eval(&[r(1.0)]) {
            Ok(v) => panic!("no error: {v}\n{text}"),
            Err(e) => e.to_string(),
        },
        Err(e) => e.to_string(),
    }
}

#[test]
fn errors_name_the_operator_and_its_position() {
    for (text, says) in [
        (
            "def f(x: R) -> R = grad((y. (y, y)), x)",
            "the result of the function of `grad`",
        ),
        ("def f(x: R) -> R = grad((y. y), x, x)", "this lambda has 1"),
        ("def f(x: R) -> R = grad(x)", "`grad` takes"),
        ("def f(x: R) -> R = jvp((y. y), x, 1, 2)", "`jvp` takes"),
        (
            "def f(x: R) -> R = grad((k. real(k)), int(x))",
            "made of reals",
        ),
        (
            "def f(x: R) -> R = vjp((y. y), x, (1, 2))",
            "the cotangent of `vjp`",
        ),
        (
            "def f(x: R) -> (R, R) = jacobian((y. (y, y)), x)",
            "from `R` or `[R; n]`",
        ),
        ("def f(x: R) -> R = grad", "`(` after `grad`"),
    ] {
        let message = error_of(text);
        assert!(message.contains(says), "{text}: {message}");
        assert!(
            message.contains("t.grad:1:"),
            "{text}: no position in {message}"
        );
    }
}
