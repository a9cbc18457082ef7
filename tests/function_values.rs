//! Function values bound by `let`, applied where written, or bound to a
//! primitive are differentiated (inlining β-reduces them): every route,
//! forward mode and Hessian-vector products agree with central differences.
//! Those that are data (in a tuple, chosen by `if`) are refused with the
//! position of the function, never a panic.

use gradlift::{ErrorKind, GradOptions, Jit, Program, Route, Value};

fn central(f: &dyn Fn(f64) -> f64, x: f64) -> f64 {
    let h = 1e-6 * (1.0 + x.abs());
    (f(x + h) - f(x - h)) / (2.0 * h)
}

#[test]
fn let_bound_and_applied_functions_are_differentiated() {
    let jit = Jit::new().unwrap();
    let programs = [
        "def f(x: R) -> R = let g = fun (y: R) -> y * y in g(x)",
        "def f(x: R) -> R = let a = 2 * x in let g = fun (y: R) -> a * sin(y) in let a = 100 in g(x) + a",
        "def f(x: R) -> R = let g = let k = 3 in fun (y: R) -> k * y * y in g(x) + g(g(x))",
        "def f(x: R) -> R = (fun (y: R, z: R) -> y * z)(x, exp(x)) + (fun ((a, b): (R, R)) -> a - b)((x, x * x))",
        "def f(x: R) -> R = let g = sin in let h = max in g(x) + h(x, 1) + (cos)(x)",
        "def f(x: R) -> R = let g = fun (y: R) -> exp(y * x) in let h = g in reduce (+) 0 (map h [1, 2, 3])",
        "def f(x: R) -> R = let outer = fun (u: R) -> (fun (v: R) -> v * u)(u + 1) in outer(x) * outer(2 * x)",
        "def sq(a: R) -> R = let twice = fun (b: R) -> b + b in twice(a) * a\ndef f(x: R) -> R = sq(x) + sq(sin(x))",
    ];
    for text in programs {
        let program = Program::parse("fv.grad", text).unwrap();
        let f = program.last_function().unwrap();
        let value = |x: f64| f.eval(&[Value::Real(x)]).unwrap().as_real().unwrap();
        for x in [0.3, 1.7] {
            let want = central(&value, x);
            let close = |got: f64| (got - want).abs() <= 1e-6 * (1.0 + want.abs());
            for route in [Route::Unf, Route::Direct] {
                let options = GradOptions {
                    route,
                    ..GradOptions::default()
                };
                let g = f.gradient(None, options).unwrap();
                let (v, grad) = g.compile(&jit).unwrap().call(&[Value::Real(x)]).unwrap();
                assert_eq!(v, value(x), "{text}");
                let got = grad[0].as_real().unwrap();
                assert!(
                    close(got),
                    "{text} at {x} by {route:?}: {got}, differences {want}"
                );
                let (_, interpreted) = g.eval(&[Value::Real(x)]).unwrap();
                assert_eq!(interpreted[0].as_real(), Some(got), "{text}");
            }
            let (_, tangent) = f
                .jvp(&[Value::Real(x)], &[Value::Real(1.0)], Some(&jit))
                .unwrap();
            assert!(close(tangent.as_real().unwrap()), "{text}: jvp {tangent}");
            let h = f.hvp(&[Value::Real(x)], &[Value::Real(1.0)], None).unwrap();
            let slope = |y: f64| {
                let g = f.gradient(None, GradOptions::default()).unwrap();
                g.eval(&[Value::Real(y)]).unwrap().1[0].as_real().unwrap()
            };
            let second = central(&slope, x);
            let got = h.hvp[0].as_real().unwrap();
            assert!(
                (got - second).abs() <= 1e-5 * (1.0 + second.abs()),
                "{text}: hvp {got}, differences {second}"
            );
        }
    }
}

#[test]
fn function_values_that_are_data_are_refused_where_they_are() {
    let cases = [
        (
            "def f(x: R) -> R = let p = (fun (y: R) -> y * y, 2) in p.0(x) * p.1",
            "fun (y: R) -> y * y",
            "stored in a tuple",
        ),
        (
            "def f(x: R) -> R = let g = if x > 0 then (fun (y: R) -> y * y) else (fun (y: R) -> y) in g(x)",
            "fun (y: R) -> y * y",
            "chosen by `if`",
        ),
    ];
    for (text, at, why) in cases {
        let program = Program::parse("fv.grad", text).unwrap();
        let f = program.last_function().unwrap();
        // It runs, on the interpreter.
        assert!(f.eval(&[Value::Real(2.0)]).is_ok(), "{text}");
        for route in [Route::Unf, Route::Direct] {
            let options = GradOptions {
                route,
                ..GradOptions::default()
            };
            let e = f.gradient(None, options).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Differentiate, "{e}");
            assert!(e.message().contains(why), "{e}");
            let span = e.span().expect("a position");
            assert_eq!(&text[span.start as usize..span.end as usize], at, "{e}");
            assert!(e.to_string().starts_with("fv.grad:1:"), "{e}");
        }
        let e = f
            .jvp(&[Value::Real(2.0)], &[Value::Real(1.0)], None)
            .unwrap_err();
        assert!(e.message().contains(why), "{e}");
        assert!(f.source_unf().is_err());
    }
}
