//! Arguments that do not fit are explained in terms of the user's
//! function — its name, its parameters, "`A` (direction)" — not of the
//! programs derived from it (`dot_grad`, `dot_grad_jvp`, `A_dot`).

use gradlift::{ErrorKind, GradOptions, Jit, Program, Value};

const DOT: &str = "def dot(A: [R; n], B: [R; n]) -> R = reduce (+) 0 (map2 (*) A B)";

fn no_internal_names(message: &str) {
    for internal in ["dot_grad", "_jvp", "A_dot", "B_dot"] {
        assert!(!message.contains(internal), "{message}");
    }
    assert!(message.contains("`dot`"), "{message}");
}

#[test]
fn gradients_name_the_function() {
    let jit = Jit::new().unwrap();
    let program = Program::parse("dot.grad", DOT).unwrap();
    let f = program.function("dot").unwrap();
    let args = [Value::reals(&[1.0, 2.0]), Value::reals(&[3.0])];
    let g = f.gradient(None, GradOptions::default()).unwrap();
    let native = g.compile(&jit).unwrap().call(&args).unwrap_err();
    assert_eq!(native.kind(), ErrorKind::Arguments);
    no_internal_names(native.message());
    assert!(native.message().contains("`B` has length 1"), "{native}");
    let interpreted = g.eval(&args).unwrap_err();
    no_internal_names(interpreted.message());
    let mut out = Value::Real(0.0);
    let into = g
        .compile(&jit)
        .unwrap()
        .call_into(&args, &mut out)
        .unwrap_err();
    no_internal_names(into.message());
}

#[test]
fn directions_name_the_parameter_they_go_with() {
    let jit = Jit::new().unwrap();
    let program = Program::parse("dot.grad", DOT).unwrap();
    let f = program.function("dot").unwrap();
    let args = [Value::reals(&[1.0, 2.0]), Value::reals(&[3.0, 4.0])];
    let dirs = [Value::reals(&[1.0, 0.0, 0.0]), Value::reals(&[0.0, 0.0])];
    for jit in [Some(&jit), None] {
        let jvp = f.jvp(&args, &dirs, jit).unwrap_err();
        no_internal_names(jvp.message());
        assert!(
            jvp.message().contains("`A (direction)` has length 3"),
            "{jvp}"
        );
        let hvp = f.hvp(&args, &dirs, jit).unwrap_err();
        no_internal_names(hvp.message());
    }
    let pair = f.compile_hvp(&jit).unwrap().call(&args, &dirs).unwrap_err();
    no_internal_names(pair.message());
    let pair = f.compile_jvp(&jit).unwrap().call(&args, &dirs).unwrap_err();
    no_internal_names(pair.message());
}
