//! The copies a loop makes of the values it reads from before it, and of
//! its results (`LoopEntry` and `Translator::pin` in `lower.rs`), are
//! there for values live across a call. A function that makes no call
//! keeps none of them; one that calls keeps them; either way the results
//! are the interpreter's, bit for bit.

use gradlift_ad::inline::inline;
use gradlift_jit::Jit;
use gradlift_lang::{check_source, interp, Value};

/// The number of `stack_addr` and `call` instructions in the Cranelift
/// IR of `source`'s last function, after checking its value on `args`
/// against the interpreter.
fn counts(source: &str, args: &[Value]) -> (usize, usize) {
    let checked = check_source("<test>", source).unwrap();
    let last = checked.module.defs.len() - 1;
    let closed = inline(&checked, last);
    // One thread: no loop is split into a kernel called through the pool.
    let jit = Jit::new().unwrap().verify(true).threads(1);
    let got = jit.compile(&closed).unwrap().call(args).unwrap();
    let want = interp::call(&checked, last, args).unwrap();
    assert!(got.same(&want), "JIT {got}, interpreter {want}");
    let clif = jit.clif(&closed).unwrap();
    let count = |what: &str| clif.lines().filter(|l| l.contains(what)).count();
    (count("stack_addr"), count(" call "))
}

fn matrix(rows: usize, cols: usize) -> Value {
    Value::array(
        (0..rows)
            .map(|r| {
                Value::reals(
                    &(0..cols)
                        .map(|c| (r * cols + c) as f64 * 0.25 - 3.0)
                        .collect::<Vec<_>>(),
                )
            })
            .collect(),
    )
}

#[test]
fn a_function_without_calls_keeps_no_copies() {
    // Three nested loops reading values from before them, and a `reduce`
    // whose result leaves each loop: every copy would be a `stack_addr`.
    let source = "
        def dist2(a: [R; d], b: [R; d]) -> R =
          reduce (+) 0 (map2 (ai, bi. (ai - bi) * (ai - bi)) a b)
        def f(P: [[R; d]; n], C: [[R; d]; k]) -> R =
          reduce (+) 0 (map (p. reduce min inf (map (c. dist2(c, p)) C)) P)";
    let (stack_addrs, calls) = counts(source, &[matrix(7, 5), matrix(3, 5)]);
    assert_eq!(calls, 0);
    // Three at the entry and in the failure block (where `info` and `out`
    // are kept), and three for each of the two `reduce`s whose lanes are
    // on the stack (filled, updated, combined). A copy would be one more.
    assert_eq!(stack_addrs, 9, "stack addresses");
}

#[test]
fn a_function_with_calls_keeps_its_copies() {
    // `sin` is a call of the C library's; the loop's values live across it.
    let source = "
        def f(P: [[R; d]; n], w: [R; d]) -> R =
          reduce (+) 0 (map (p. sin(reduce (+) 0 (map2 (*) p w))) P)";
    let w = Value::reals(&[0.5, -1.0, 2.0, 0.25, 1.5]);
    let (stack_addrs, calls) = counts(source, &[matrix(9, 5), w]);
    assert!(calls >= 1);
    assert!(stack_addrs > 9, "{stack_addrs} stack addresses");
}
