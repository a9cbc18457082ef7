//! Long `let` chains, whose native code stores what each binding computes
//! on a tape in the workspace and reads the values used far away back
//! from it (`gradlift-jit/src/tape.rs`), give the interpreter's values and
//! gradients bit for bit: reals and integers read far from their binding,
//! parameters read at the chain's end, chains inside a map's step (a tape
//! per element, or none in a kernel split across threads, which has no
//! workspace) and chains too short to have a tape.

use gradlift::lang::testing::live_chain;
use gradlift::{GradOptions, Jit, Program, Value};

fn same(a: &[Value], b: &[Value]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.same(y))
}

/// The function's value and gradient, natively and in the interpreter,
/// compared bit for bit.
fn check(text: &str, args: &[Value]) {
    for threads in [1, 2] {
        check_on(&Jit::new().unwrap().threads(threads), text, args);
    }
}

fn check_on(jit: &Jit, text: &str, args: &[Value]) {
    let program = Program::parse("chain.grad", text).unwrap();
    let f = program.last_function().unwrap();
    let want = f.eval(args).unwrap();
    let got = f.compile(jit).unwrap().call(args).unwrap();
    assert!(
        got.same(&want),
        "value: native {got}, interpreter {want}\n{text}"
    );
    let g = f.gradient(None, GradOptions::default()).unwrap();
    let (v1, g1) = g.eval(args).unwrap();
    let (v2, g2) = g.compile(jit).unwrap().call(args).unwrap();
    assert_eq!(v1.to_bits(), v2.to_bits(), "{text}");
    assert!(same(&g1, &g2), "interpreter {g1:?}, native {g2:?}\n{text}");
}

#[test]
fn chains_with_values_live_far_away() {
    for n in [10, 33, 34, 100, 400] {
        for live in [2, 3, 4] {
            if n > live {
                check(&live_chain(n, live), &[Value::Real(0.7)]);
            }
        }
    }
}

/// A chain of `n` bindings that binds an integer and a boolean at its
/// start and reads them, and its parameters, at its end.
fn mixed(n: usize) -> String {
    let mut s = String::from("def f(a: R, b: [R; m]) -> R =\n");
    s.push_str(
        "  let k = len(b) in\n  let big = if a > 0.5 then 1 else 0 in\n  let y0 = a * 0.5 in\n",
    );
    for i in 1..n {
        s.push_str(&format!(
            "  let y{i} = y{} * 0.999 + 0.001 * tanh(y{}) in\n",
            i - 1,
            i.saturating_sub(2)
        ));
    }
    s.push_str(&format!(
        "  (if big == 1 then y{last} * real(k) else y{last} - a) + b[0] * a + reduce (+) 0 (map (v. v * y0) b)\n",
        last = n - 1
    ));
    s
}

#[test]
fn integers_booleans_and_parameters_read_at_the_end() {
    let b = Value::reals(&[0.25, -1.5, 2.0]);
    for n in [5, 40, 300] {
        for a in [0.3, 0.9] {
            check(&mixed(n), &[Value::Real(a), b.clone()]);
        }
    }
}

#[test]
fn chains_in_the_step_of_a_map() {
    // Each element runs a chain long enough for a tape of its own.
    let mut s = String::from("def f(xs: [R; n]) -> R =\n  reduce (+) 0 (map (x.\n");
    s.push_str("    let w0 = x in\n    let w1 = x * 0.75 in\n");
    for i in 2..120 {
        s.push_str(&format!(
            "    let w{i} = w{} + 0.001 * sin(w{}) in\n",
            i - 1,
            i - 2
        ));
    }
    s.push_str("    w119 * w0) xs)\n");
    check(&s, &[Value::reals(&[0.1, -0.4, 1.3, 2.2, -3.0])]);
}
