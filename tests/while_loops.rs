//! `while` loops (`loop s = v while c do e`): every engine agrees on their
//! values and gradients (the pipeline oracle: the interpreter, native code,
//! both routes of reverse mode, with finite differences); forward mode and
//! Hessian-vector products through them match finite differences; a loop
//! that does not stop is stopped by the iteration limit, in both engines;
//! loops nest, sit in maps and hold derivatives.

mod support;

use gradlift::{Jit, Program, Value};
use support::pipeline_oracle::check_program;

fn r(x: f64) -> Value {
    Value::Real(x)
}

/// Every engine agrees on `text`'s last function, finite differences
/// included.
fn everywhere(text: &str, args: &[Value]) {
    let jit = Jit::new().unwrap().verify(true);
    let outcome = check_program(text, args, false, &jit);
    assert!(outcome.native && outcome.gradients, "{text}");
    assert!(outcome.finite_differences > 0, "{text}");
}

fn value(text: &str, args: &[Value]) -> Value {
    let program = Program::parse("w.grad", text).unwrap_or_else(|e| panic!("{e}"));
    let f = program.last_function().unwrap();
    let interpreted = f.eval(args).unwrap();
    let native = f.compile(&Jit::new().unwrap()).unwrap().call(args).unwrap();
    assert!(interpreted.same(&native), "{interpreted} vs {native}");
    interpreted
}

#[test]
fn loops_of_scalars_tuples_and_arrays() {
    // Newton's method for √a, until the residual is small.
    let newton =
        "def f(a: R) -> R = loop x = a while abs(x * x - a) > 1e-12 * a do 0.5 * (x + a / x)";
    let root = value(newton, &[r(2.0)]).as_real().unwrap();
    assert!((root - 2f64.sqrt()).abs() < 1e-15, "{root}");
    everywhere(newton, &[r(2.0)]);
    // A falling body with drag, stepped until it reaches the ground: the
    // state is a tuple, and the trip count depends on the parameters.
    let fall = "def f(c: R, v0: R) -> R =
  let (x, v) = loop (x, v) = (10, v0) while x > 0 do (x + 0.01 * v, v - 0.01 * (9.81 + c * v)) in v * v + x";
    everywhere(fall, &[r(0.1), r(1.0)]);
    // An array state shrunk until its norm is below 1, and a counter.
    let shrink = "def f(w: [R; n]) -> R =
  let (u, k) = loop (u, k) = (w, int(0)) while reduce (+) 0 (map (a. a * a) u) > 1 do (map (a. a * 0.9) u, k + 1) in
  reduce (+) 0 (map (a. a * a * a) u) + real(k)";
    everywhere(shrink, &[Value::reals(&[1.0, 2.0, -3.0])]);
    // A loop that takes no step: the state is the start.
    let none = "def f(x: R) -> R = let y = loop y = x * x while y > 100 do y / 2 in y * 3";
    assert_eq!(value(none, &[r(2.0)]).as_real(), Some(12.0));
    everywhere(none, &[r(2.0)]);
    // `_` in the pattern of the state.
    let wild =
        "def f(x: R) -> R = let (y, _) = loop (y, _) = (x, x) while y < 10 do (y * 2, y) in y";
    assert_eq!(value(wild, &[r(1.5)]).as_real(), Some(12.0));
}

#[test]
fn loops_nest_sit_in_maps_and_read_free_variables() {
    // An inner loop per outer step, in a map over the elements.
    let text = "def f(xs: [R; n], t: R) -> R =
  reduce (+) 0 (map (x. loop y = x while y < t do y + loop z = 0.1 while z < y do z * 1.5) xs)";
    everywhere(text, &[Value::reals(&[0.5, 1.0, 2.0]), r(5.0)]);
    // A fixed-point iteration reading a free array.
    let text = "def f(a: [R; n], b: R) -> R =
  let s = loop s = 0 while abs(b - s * reduce (+) 0 a) > 1e-9 do s + 0.5 * (b - s * reduce (+) 0 a) / reduce (+) 0 a in
  s * reduce (+) 0 (map (v. v * v) a)";
    everywhere(text, &[Value::reals(&[0.4, 0.3, 0.2]), r(2.0)]);
}

#[test]
fn forward_mode_and_second_derivatives_through_loops() {
    let text = "def f(a: R, b: R) -> R =
  let (x, _k) = loop (x, k) = (a, int(0)) while k < 30 and x < 50 do (x * (1 + 0.1 * b) + sin(x), k + 1) in x * x";
    let program = Program::parse("w.grad", text).unwrap();
    let f = program.last_function().unwrap();
    let at = |a: f64, b: f64| f.eval(&[r(a), r(b)]).unwrap().as_real().unwrap();
    let (a, b) = (0.7, 0.3);
    // jvp against central differences along (1, -2).
    let jit = Jit::new().unwrap();
    let (_, t) = f
        .jvp(&[r(a), r(b)], &[r(1.0), r(-2.0)], Some(&jit))
        .unwrap();
    let h = 1e-6;
    let fd = (at(a + h, b - 2.0 * h) - at(a - h, b + 2.0 * h)) / (2.0 * h);
    let t = t.as_real().unwrap();
    assert!(
        (t - fd).abs() <= 1e-6 * (1.0 + fd.abs()),
        "{t} against {fd}"
    );
    // The Hessian along (1, -2): forward over the reverse of the loop,
    // against central differences of the gradient.
    let hv = f
        .hvp(&[r(a), r(b)], &[r(1.0), r(-2.0)], Some(&jit))
        .unwrap();
    let g = f.gradient(None, Default::default()).unwrap();
    let grad = |a: f64, b: f64| -> Vec<f64> {
        let (_, gs) = g.eval(&[r(a), r(b)]).unwrap();
        gs.iter().map(|v| v.as_real().unwrap()).collect()
    };
    let (gp, gm) = (grad(a + h, b - 2.0 * h), grad(a - h, b + 2.0 * h));
    for k in 0..2 {
        let fd = (gp[k] - gm[k]) / (2.0 * h);
        let got = hv.hvp[k].as_real().unwrap();
        assert!(
            (got - fd).abs() <= 1e-5 * (1.0 + fd.abs()),
            "H·v[{k}] = {got} against {fd}"
        );
    }
}

#[test]
fn derivatives_inside_loops_and_loops_inside_derivatives() {
    // Gradient descent until the gradient is small (the step holds a
    // `grad`), and the outer gradient through it; then the gradient of a
    // function whose value comes from a loop, taken inside the program.
    let text = "def q(x: [R; 2], c: [R; 2]) -> R =
  (x[0] - c[0]) * (x[0] - c[0]) + 2 * (x[1] - c[1]) * (x[1] - c[1]) + 0.1 * x[0] * x[1]
def norm2(g: [R; 2]) -> R = g[0] * g[0] + g[1] * g[1]
def argmin(c: [R; 2]) -> [R; 2] =
  loop x = [0, 0] while norm2(grad((y. q(y, c)), x)) > 1e-16 do map2 (a, b. a - 0.2 * b) x (grad((y. q(y, c)), x))
def f(c: [R; 2]) -> R = let x = argmin(c) in x[0] + 3 * x[1]";
    everywhere(text, &[Value::reals(&[1.0, -0.5])]);
    let text = "def root(a: R) -> R = loop x = a while abs(x * x * x - a) > 1e-13 do x - (x * x * x - a) / (3 * x * x)
def f(a: R) -> R = grad(root, a) * a";
    // d/da a^(1/3) · a = a^(1/3) / 3.
    let got = value(text, &[r(8.0)]).as_real().unwrap();
    assert!((got - 2.0 / 3.0).abs() < 1e-12, "{got}");
    // Its derivative by forward mode over the loop's reverse: (1/9)·a^(-2/3).
    let program = Program::parse("w.grad", text).unwrap();
    let f = program.last_function().unwrap();
    let (_, t) = f
        .jvp(&[r(8.0)], &[r(1.0)], Some(&Jit::new().unwrap()))
        .unwrap();
    let t = t.as_real().unwrap();
    assert!((t - 1.0 / 36.0).abs() < 1e-12, "{t}");
    // Its gradient: reverse mode cannot reverse the loop's reverse (its
    // states would need an array as long as the trip count), so this
    // gradient is taken by forward mode, in every engine.
    let (_, g) = f
        .gradient(None, Default::default())
        .unwrap()
        .eval(&[r(8.0)])
        .unwrap();
    let g = g[0].as_real().unwrap();
    assert!((g - 1.0 / 36.0).abs() < 1e-12, "{g}");
    everywhere(text, &[r(8.0)]);
    everywhere(text, &[r(0.3)]);
    // The same derivative written in the program: a gradient of a
    // gradient through the loop.
    let nested = "def root(a: R) -> R = loop x = a while abs(x * x * x - a) > 1e-13 do x - (x * x * x - a) / (3 * x * x)
def f(a: R) -> R = grad((b. grad(root, b) * b), a)";
    let got = value(nested, &[r(8.0)]).as_real().unwrap();
    assert!((got - 1.0 / 36.0).abs() < 1e-12, "{got}");
    // A gradient through a loop inside a gradient, with respect to arrays
    // and reals, and inside a map.
    let text = "def h(x: R, c: [R; 2]) -> R = loop s = x while s < 3 do s * (1.5 + 0.1 * sin(c[0] * s + c[1]))
def f(x: R, c: [R; 2]) -> R = grad((t. h(t, c)), x) * c[1] + reduce (+) 0 (map (y. grad((k. h(y, k)), c)[0]) [x, 2 * x])";
    everywhere(text, &[r(0.5), Value::reals(&[0.9, -0.2])]);
    // Matrices and tuples too: the gradient with respect to each row and
    // component.
    let text = "def h(x: R, c: [[R; 2]; 2], d: (R, [R; 2])) -> R = loop s = x while s < 3 do s * (1.5 + 0.1 * sin(c[0][0] * s + c[1][1] * d.0 + d.1[1]))
def f(x: R, c: [[R; 2]; 2], d: (R, [R; 2])) -> R = grad((t. h(t, c, d)), x) * c[0][1]";
    let matrix = Value::array(vec![Value::reals(&[0.9, -0.2]), Value::reals(&[0.4, 0.3])]);
    let pair = Value::tuple(vec![r(0.7), Value::reals(&[0.1, 0.2])]);
    everywhere(text, &[r(0.5), matrix, pair]);
    // A value holding an integer is refused, with the reason.
    let text =
        "def h(x: R, c: (R, Z)) -> R = loop s = x while s < 3 do s * (1.5 + 0.1 * sin(c.0 * s))
def f(x: R, c: (R, Z)) -> R = grad((t. h(t, c)), x)";
    let program = Program::parse("w.grad", text).unwrap();
    let e = program
        .last_function()
        .unwrap()
        .gradient(None, Default::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("by forward mode") && e.contains("`Z`"), "{e}");
}

#[test]
fn reverse_over_the_reverse_of_checkpointed_loops() {
    // The inner gradients reverse a checkpointed fold (`revfold`), with
    // respect to its start, its elements and a free variable; the outer
    // gradient reverses those reverses.
    let text = "def h(x: R, c: R, a: [R; n]) -> R = @checkpoint(binomial 2) foldl (s, y. sin(s) * y + c * s) x a
def f(x: R, c: R, a: [R; n]) -> R =
  let ga = grad((b. h(x, c, b)), a) in
  grad((t. h(t, c, a)), x) * x + grad((k. h(x, k, a)), c) + reduce (+) 0 (map2 (*) ga a)";
    let a = Value::reals(&[0.7, -1.3, 0.4, 2.1, -0.2]);
    everywhere(text, &[r(0.5), r(0.9), a.clone()]);
    everywhere(text, &[r(-1.1), r(0.3), Value::reals(&[0.2])]);
    // With the outer folds checkpointed too, by either route.
    let program = Program::parse("w.grad", text).unwrap();
    let f = program.last_function().unwrap();
    let args = [r(0.5), r(0.9), a];
    let (v0, g0) = f
        .gradient(None, Default::default())
        .unwrap()
        .eval(&args)
        .unwrap();
    for route in [gradlift::Route::Unf, gradlift::Route::Direct] {
        let options = gradlift::GradOptions {
            route,
            checkpoint: Some(gradlift::lang::Schedule::Binomial(2)),
            ..Default::default()
        };
        let g = f.gradient(None, options).unwrap();
        let (v1, g1) = g
            .compile(&Jit::new().unwrap())
            .unwrap()
            .call(&args)
            .unwrap();
        assert_eq!(v0.to_bits(), v1.to_bits());
        for (x, y) in g0.iter().zip(&g1) {
            let (mut xs, mut ys) = (Vec::new(), Vec::new());
            x.flatten(&mut xs);
            y.flatten(&mut ys);
            for (p, q) in xs.iter().zip(&ys) {
                assert!((p - q).abs() <= 1e-12 * p.abs().max(1.0), "{p} vs {q}");
            }
        }
    }
}

#[test]
fn a_loop_that_does_not_stop_is_stopped() {
    let text = "def f(x: R) -> R = loop y = x while y > 0 do y + 1";
    let program = Program::parse("w.grad", text).unwrap();
    let f = program.last_function().unwrap();
    let jit = Jit::new().unwrap().max_iterations(1000);
    let e = f.compile(&jit).unwrap().call(&[r(1.0)]).unwrap_err();
    assert!(e.to_string().contains("iteration limit"), "{e}");
    let limits = gradlift::lang::interp::Limits {
        max_iterations: 1000,
        ..Default::default()
    };
    let e = f.eval_with(&[r(1.0)], limits).unwrap_err();
    assert!(e.to_string().contains("iteration limit"), "{e}");
    assert!(e.to_string().contains("w.grad:1:"), "{e}");
    // So is its gradient.
    let g = f.gradient(None, Default::default()).unwrap();
    let e = g.compile(&jit).unwrap().call(&[r(1.0)]).unwrap_err();
    assert!(e.to_string().contains("iteration limit"), "{e}");
    // 999 steps are within the limit.
    let text = "def f(x: R) -> R = loop y = x while y < 1000 do y + 1";
    let program = Program::parse("w.grad", text).unwrap();
    let f = program.last_function().unwrap();
    let v = f.compile(&jit).unwrap().call(&[r(1.0)]).unwrap();
    assert_eq!(v.as_real(), Some(1000.0));
}

#[test]
fn printed_loops_read_back_and_errors_say_what_to_write() {
    let text =
        "def f(x: R) -> R = let (y, _) = loop (y, _) = (x, x) while y < 10 do (y * 2, y) in y";
    let program = Program::parse("w.grad", text).unwrap();
    let printed = program.module().module.to_string();
    let again = Program::parse("p.grad", &printed).unwrap_or_else(|e| panic!("{e}\n{printed}"));
    assert!(
        program.module().module.same(&again.module().module),
        "{printed}"
    );
    for (text, says) in [
        ("def f(x: R) -> R = loop y = x while y > 0", "`do`"),
        ("def f(x: R) -> R = loop y = x do y", "`while`"),
        (
            "def f(x: R) -> R = loop y = x while y > 0 do (y, y)",
            "the step of a `while` loop (a state of the start's type)",
        ),
        ("def f(x: R) -> R = do", "`do` belongs to a loop"),
    ] {
        let e = Program::parse("w.grad", text).unwrap_err().to_string();
        assert!(e.contains(says), "{text}: {e}");
    }
}
