//! Messages for the mistakes a newcomer makes: each says what was probably
//! meant, at the right place.

use gradlift_lang::{check_source, Spanned};

/// The message and the text under the span of the error `text` gives.
fn error(text: &str) -> (String, String) {
    let e = check_source("<test>", text).expect_err("an error");
    let span = e.span();
    let under = text[span.start as usize..span.end as usize].to_string();
    (e.to_string(), under)
}

#[test]
fn a_while_loop_says_how_to_loop() {
    let (m, at) = error("def f(x: R) -> R = while x < 10 do x * 2");
    assert!(
        m.contains("`loop x = start while condition do step`"),
        "{m}"
    );
    assert_eq!(at, "while");
    let (m, _) = error("def f(x: R) -> R = for i in iota(3) x");
    assert!(m.contains("there is no `for` loop"), "{m}");
}

#[test]
fn a_misspelt_array_operation_is_named() {
    let (m, at) = error("def f(A: [R; n]) -> R = reduce (+) 0 (mpa (v. v * 2) A)");
    assert!(
        m.contains("`mpa` is not an array operation; did you mean `map`?"),
        "{m}"
    );
    assert_eq!(at, "mpa");
    let (m, _) = error("def f(A: [R; n]) -> R = redcue (+) 0 A");
    assert!(m.contains("did you mean `reduce`?"), "{m}");
    let (m, _) = error("def f(A: [R; n]) -> R = redcue max (-inf) A");
    assert!(m.contains("did you mean `reduce`?"), "{m}");
    // A definition whose name is close to an operation, used as one is
    // meant to be, is not an error.
    assert!(check_source(
        "<test>",
        "def mpa(x: R) -> R = x\ndef f(A: [R; n]) -> [R; n] = map mpa A"
    )
    .is_ok());
    assert!(check_source("<test>", "def f(x: [R; n], v: R) -> R = reduce max v x").is_ok());
}

#[test]
fn a_power_operator_says_pow() {
    let (m, at) = error("def f(x: R) -> R = x ** 2");
    assert!(
        m.contains("there is no `**` operator: a power is `pow(x, 2)`"),
        "{m}"
    );
    assert_eq!(at, "**");
    let (m, at) = error("def f(x: R) -> R = (x + 1) ** (x - 1)");
    assert!(m.contains("`pow(x + 1, x - 1)`"), "{m}");
    assert_eq!(at, "**");
    let (m, _) = error("def f(x: R) -> R = x ^ 2");
    assert!(
        m.contains("there is no `^` operator: a power is `pow(a, b)`"),
        "{m}"
    );
    let (m, _) = error("def f(x: R) -> R = if x > 0 && x < 1 then x else 0");
    assert!(m.contains("join conditions with `and`"), "{m}");
}

#[test]
fn a_function_called_as_an_argument_says_juxtapose() {
    let (m, at) = error("def f(x: [R; n]) -> [R; n] = map exp(x)");
    assert!(m.contains("write `map exp x`"), "{m}");
    assert_eq!(at, "exp(x)");
    let (m, _) = error("def sq(a: R) -> R = a * a\ndef f(x: [R; n]) -> [R; n] = map sq(x)");
    assert!(m.contains("write `map sq x`"), "{m}");
}

#[test]
fn unknown_names_get_the_closest_name_in_scope() {
    let (m, at) = error("def f(weights: R) -> R = wieghts * 2");
    assert!(
        m.contains("unknown variable `wieghts`; did you mean `weights`?"),
        "{m}"
    );
    assert_eq!(at, "wieghts");
    let (m, _) = error("def f(x: R) -> R = sine(x)");
    assert!(
        m.contains("unknown function `sine`; did you mean `sin`?"),
        "{m}"
    );
    let (m, _) = error("def helper(x: R) -> R = x\ndef f(x: R) -> R = helpr(x)");
    assert!(m.contains("did you mean `helper`?"), "{m}");
    let (m, _) = error("def f(x: R) -> R = let total = x in totl");
    assert!(m.contains("did you mean `total`?"), "{m}");
    let (m, _) = error("def f(x: R) -> R = zzz");
    assert!(!m.contains("did you mean"), "{m}");
    let (m, _) = error("def f(x: [R; rows]) -> [R; rowz] = x");
    assert!(
        m.contains("unknown size variable `rowz`; did you mean `rows`?"),
        "{m}"
    );
    // One letter is too short to guess from.
    let (m, _) = error("def f(x: [R; n]) -> [R; m] = x");
    assert!(!m.contains("did you mean"), "{m}");
}

#[test]
fn text_after_a_definition_says_what_ended_it() {
    let (m, at) = error("def f(x: R) -> R = x * 2\nx + 1");
    assert!(
        m.contains("expected `def` to start a definition, found identifier `x`; the body of `f` ends before it"),
        "{m}"
    );
    assert_eq!(at, "x");
}

#[test]
fn a_primitive_built_with_the_wrong_number_of_arguments_is_refused() {
    // The parser never builds one; a program that builds terms might.
    use gradlift_lang::syntax::{Expr, ExprKind};
    let mut module = gradlift_lang::parse_module("def f(x: R) -> R = sin(x)").unwrap();
    let ExprKind::Prim(p, args) = &module.defs[0].body.kind else {
        panic!("a call of sin")
    };
    let (p, x) = (*p, args[0].clone());
    module.defs[0].body = Expr::synth(ExprKind::Prim(p, vec![x.clone(), x]));
    let e = gradlift_lang::check_module(module).expect_err("an error");
    assert!(
        e.to_string()
            .contains("`sin` takes 1 argument, but 2 were given"),
        "{e}"
    );
}
