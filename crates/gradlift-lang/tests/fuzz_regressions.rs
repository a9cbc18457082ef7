//! Inputs found by the fuzz targets in `fuzz/` (see docs/reliability.md),
//! reduced by hand, each checked for the property that failed.

use gradlift_lang::{check_module, parse_module};

/// What the `front_end` fuzz target checks: a module that parses prints to
/// text that parses back to the same module and type-checks alike.
#[track_caller]
fn round_trips(text: &str) {
    let module = parse_module(text).unwrap_or_else(|e| panic!("{text}\ndoes not parse: {e}"));
    let printed = module.to_string();
    let reparsed = parse_module(&printed)
        .unwrap_or_else(|e| panic!("{printed}\n(printed) does not parse: {e}"));
    assert!(reparsed.same(&module), "{text}\nprints as\n{printed}");
    assert_eq!(
        check_module(module).is_ok(),
        check_module(reparsed).is_ok(),
        "{printed}"
    );
}

/// A primitive called with a space before `(` outside argument position
/// parsed as an application of the primitive as a function value, which
/// printed as the adjacent call `tanh(…)` and read back as a different
/// term (the primitive applied).
#[test]
fn spaced_call_of_a_primitive() {
    round_trips("def f(A: [R; n]) -> R = reduce (+) 0p(  tanh (map exp A))\n");
    round_trips("def f(x: R) -> R = exp (x) + (sin)(x)\n");
    let spaced = parse_module("def f(x: R) -> R = tanh (x)").unwrap();
    let adjacent = parse_module("def f(x: R) -> R = tanh(x)").unwrap();
    assert!(spaced.same(&adjacent));
}

/// A spaced call of a one-argument primitive on two arguments parsed (as
/// an application of a function value) and printed as `exp(a, b)`, which
/// does not parse. It is now the arity error it reads as.
#[test]
fn spaced_call_of_a_primitive_with_two_arguments() {
    let e = parse_module("def f(a: R, b: R) -> R = exp (a, b)").unwrap_err();
    assert!(e.to_string().contains("`exp` takes 1 argument"), "{e}");
    let e = parse_module("def f(a: R, b: R) -> R = exp(a, b)").unwrap_err();
    assert!(e.to_string().contains("`exp` takes 1 argument"), "{e}");
}

/// A size with a negative leading term printed as `-1` or `-n`, which the
/// size grammar did not accept; a size may now start with `-`.
#[test]
fn size_with_a_negative_leading_term() {
    for size in ["0-1", "0-n", "n-n", "2*n-3*n", "1-n+m", "-n+2", "-2*n"] {
        round_trips(&format!(
            "def f(A: [R; n], B: [R; m], obs: [R; {size}]) -> R = 0"
        ));
    }
}

/// A call of a lambda without parameter types written with `fun` prints as
/// `f((x. e))`, which the message for a lambda given to a misspelt array
/// operation (`mpa (v. e) A`) took for one: a lambda in parentheses is an
/// argument like any other (found by the `front_end` fuzz target, its run 3).
#[test]
fn a_parenthesized_lambda_as_an_argument() {
    round_trips("def f(x: R, s: size) -> R =\n  fo(fun(ioctsize) -> s) * x\n");
    let e =
        parse_module("def f(A: [R; n]) -> R = reduce (+) 0 (mpa ((a, b). a * b) A)").unwrap_err();
    assert!(e.to_string().contains("did you mean `map`"), "{e}");
}
