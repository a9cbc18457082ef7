//! The simplifier, text in and text out: partial evaluation of
//! continuations (Figure 5 shapes, Example 1.1, Example 3.1), capture
//! avoidance, errors, and the first-order verifier. The rules of Figure 12
//! one by one are in `simplify_rules.rs`. The free variable `zero` in a test
//! text stands for a structural zero.

mod simplify_support;

use gradlift_ad::simplify::{is_first_order, simplify, Options, Rule, SimplifyError};
use gradlift_lang::syntax::ExprKind;
use gradlift_lang::{parse_expr, Prim, Value};
use simplify_support::*;

// ---- Partial evaluation (§5.1)

#[test]
fn beta_reduces_an_applied_lambda() {
    rewrites(
        "(fun (a: R, b: R) -> a * b + a)(x, y * 2)",
        "x * (y * 2) + x",
        Rule::Beta,
    );
}

#[test]
fn let_bound_functions_are_inlined_even_when_used_twice() {
    rewrites(
        "let f = fun (a: R) -> a * a in f(x) + f(y)",
        "x * x + y * y",
        Rule::InlineFun,
    );
}

#[test]
fn variables_and_constants_are_substituted_forward() {
    rewrites(
        "let a = x in let b = 2 in a * b",
        "x * 2",
        Rule::ForwardSubst,
    );
}

#[test]
fn tuple_lets_are_split_into_components() {
    rewrites(
        "let p = (x * y, z) in p.0 + p.1 * p.0",
        "let p = x * y in p + z * p",
        Rule::TupleSplit,
    );
    rewrites("let (a, b) = (x, y) in a - b", "x - y", Rule::TupleSplit);
}

#[test]
fn lets_float_out_of_let_values() {
    rewrites(
        "let a = (let b = x * y in b + 1) in a * a",
        "let a = x * y + 1 in a * a",
        Rule::LetFloat,
    );
}

#[test]
fn projections_of_tuples_are_evaluated() {
    rewrites("(x, y * 2).1", "y * 2", Rule::TupleProj);
}

#[test]
fn binders_are_renamed_so_nothing_is_captured() {
    // `f` refers to the free `y`, not to the `y` bound where it is called.
    rewrites(
        "let f = fun (a: R) -> a + y in let y = 3 in f(y)",
        "3 + y",
        Rule::InlineFun,
    );
    // A closure keeps the values of its free variables.
    rewrites(
        "let G = fun (a: R) -> fun (b: R) -> a * b in let g1 = G(x) in let g2 = G(y) in g1(2) + g2(3)",
        "x * 2 + y * 3",
        Rule::InlineFun,
    );
    // Shadowed binders stay apart.
    rewrites(
        "let x = x * 2 in let x = x + 1 in x * x",
        "let x_2 = x * 2 + 1 in x_2 * x_2",
        Rule::InlineOnce,
    );
}

#[test]
fn functions_passed_as_arguments_are_inlined() {
    rewrites(
        "let k = fun (r: R) -> r * 2 in let twice = fun (f: (R) -> R, v: R) -> f(f(v)) in twice(k, x)",
        "x * 2 * 2",
        Rule::InlineFun,
    );
    rewrites(
        "let Y = fun ((a, b): (R, R), z: R) -> (a * z, b * z) in Y((x, y), 1)",
        "(x, y)",
        Rule::MulOne,
    );
}

#[test]
fn functions_are_inlined_into_branches_and_lambdas() {
    rewrites(
        "let Y = fun (a: R) -> a * 2 in if x > 0 then Y(x) else Y(y)",
        "if x > 0 then x * 2 else y * 2",
        Rule::InlineFun,
    );
    rewrites(
        "let f = fun (a: R, b: R) -> a * b in map2 f A B",
        "map2 (*) A B",
        Rule::Eta,
    );
    rewrites(
        "let Y = fun (a: R, z: R) -> a + w * z in map (e. Y(zero, e)) A",
        "map (e. w * e) A",
        Rule::AddZero,
    );
}

// ---- Example 1.1 and Figure 5 continuations

/// Example 1.1, stage 1 of figures.md §6: `let w₁ = x₁*x₂ in let w₂ =
/// w₁*x₁ in w₂`, differentiated with continuations over the whole context,
/// applied to the structural zeros and the seed 1.
const EXAMPLE_1_1: &str = "
    let (w1, w1') = (x1 * x2, fun (y1: R, y2: R, y3: R, y4: R) -> (y1 + x2 * y4, y2 + x1 * y4, y3)) in
    let (w2, w2') = (w1 * x1, fun (y1: R, y2: R, y3: R, y4: R, y5: R) -> w1'(y1 + w1 * y5, y2, y3, y4 + x1 * y5)) in
    w2'(zero, zero, zero, zero, 1)";

#[test]
fn example_1_1_reaches_the_final_form() {
    let input = term(EXAMPLE_1_1);
    let vars = typed(&[("x1", "R"), ("x2", "R"), ("x3", "R")]);
    let vals = values(&[
        ("x1", Value::Real(1.5)),
        ("x2", Value::Real(-0.25)),
        ("x3", Value::Real(3.0)),
    ]);
    // Without CSE: the paper's final form (w₁ + x₂*x₁, x₁*x₁, 0), with
    // w₁ = x₁*x₂ inlined into its only use (w₂ is dead).
    let plain = Options {
        cse: false,
        ..Options::default()
    };
    let (out, _) = simp_with(&input, &plain);
    assert_eq!(out.to_string(), "(x1 * x2 + x2 * x1, x1 * x1, 0.0)");
    assert!(matches!(&out.kind, ExprKind::Tuple(es) if es[2].is_structural_zero()));
    assert_same_meaning(&input, &out, &vars, &[], &vals);
    // With CSE, x₂*x₁ is w₁.
    let (out, stats) = simp(&input);
    assert_eq!(
        flat(&out.to_string()),
        "let w1 = x1 * x2 in (w1 + w1, x1 * x1, 0.0)"
    );
    assert_eq!(count_lambdas(&out), 0);
    assert_eq!(count_prim(&out, Prim::Mul), 2);
    assert_eq!(count_prim(&out, Prim::Add), 1);
    assert_eq!(stats.count(Rule::InlineFun), 2);
    assert_same_meaning(&input, &out, &vars, &[], &vals);
}

#[test]
fn nested_continuations_become_lambda_free() {
    let input = term(
        "let Y0 = fun (a: R, b: R) -> (a, b) in
         let Y1 = fun (a: R, b: R, z: R) -> Y0(a + x2 * z, b + x1 * z) in
         let Y2 = fun (a: R, b: R, z: R) -> Y1(a + x1 * z, b, z * cos(x2)) in
         Y2(zero, zero, 1)",
    );
    let (out, stats) = simp(&input);
    assert_eq!(count_lambdas(&out), 0);
    assert_eq!(stats.count(Rule::InlineFun), 3);
    let vars = typed(&[("x1", "R"), ("x2", "R")]);
    let vals = values(&[("x1", Value::Real(0.75)), ("x2", Value::Real(2.0))]);
    assert_same_meaning(&input, &out, &vars, &[], &vals);
    assert_eq!(
        flat(&out.to_string()),
        flat("let z = cos(x2) in (x1 + x2 * z, x1 * z)")
    );
}

#[test]
fn example_3_1_literal_continuations_simplify() {
    // Figure 5 applied literally to Example 1.1 (figures.md §6, Ex 3.1),
    // with Y the identity on the adjoints.
    let input = term(
        "let Y = fun (y1: R, y2: R, y3: R) -> (y1, y2, y3) in
         let (w1, Y1) =
           let (y11, Y11) = (x1, fun (y1: R, y2: R, y3: R, z: R) -> Y(y1 + z, y2, y3)) in
           let (y12, Y12) = (x2, fun (y1: R, y2: R, y3: R, y4: R, z: R) -> Y11(y1, y2 + z, y3, y4)) in
           (y11 * y12, fun (y1: R, y2: R, y3: R, z: R) -> Y12(y1, y2, y3, y12 * z, y11 * z)) in
         let (w2, Y2) =
           let (y21, Y21) = (w1, fun (y1: R, y2: R, y3: R, y4: R, z: R) -> Y1(y1, y2, y3, y4 + z)) in
           let (y22, Y22) = (x1, fun (y1: R, y2: R, y3: R, y4: R, y5: R, z: R) -> Y21(y1 + z, y2, y3, y4, y5)) in
           (y21 * y22, fun (y1: R, y2: R, y3: R, y4: R, z: R) -> Y22(y1, y2, y3, y4, y22 * z, y21 * z)) in
         let (y, Y3) = (w2, fun (y1: R, y2: R, y3: R, y4: R, y5: R, z: R) -> Y2(y1, y2, y3, y4, y5 + z)) in
         let Y4 = fun (y1: R, y2: R, y3: R, y4: R, z: R) -> Y3(y1, y2, y3, y4, zero, z) in
         (y, (fun (y1: R, y2: R, y3: R, z: R) -> Y4(y1, y2, y3, zero, z))(zero, zero, zero, 1))",
    );
    let (out, _) = simp(&input);
    assert_eq!(count_lambdas(&out), 0);
    let vars = typed(&[("x1", "R"), ("x2", "R"), ("x3", "R")]);
    let vals = values(&[
        ("x1", Value::Real(1.5)),
        ("x2", Value::Real(-0.25)),
        ("x3", Value::Real(3.0)),
    ]);
    assert_same_meaning(&input, &out, &vars, &[], &vals);
    assert_eq!(
        flat(&out.to_string()),
        "let w1 = x1 * x2 in (w1 * x1, (w1 + w1, x1 * x1, 0.0))",
    );
}

// ---- Errors and the verifier

#[test]
fn functions_stored_in_data_are_reported() {
    let input = term("let f = if x > 0 then (fun (a: R) -> a) else (fun (a: R) -> -a) in f(1)");
    assert!(matches!(
        simplify(&input, &Options::default()),
        Err(SimplifyError::HigherOrder { .. })
    ));
    let input = term("let f = fun (a: R) -> a in (f, 1)");
    assert!(simplify(&input, &Options::default()).is_err());
}

#[test]
fn ill_typed_terms_are_errors_not_panics() {
    for text in [
        "(fun (a: R) -> a)(1, 2)",
        "(1, 2).5",
        "x(1)(2)",
        "(1, 2) + 1",
        "map 3 A",
    ] {
        let r = simplify(&term(text), &Options::default());
        assert!(
            r.is_ok() || matches!(r, Err(SimplifyError::IllTyped { .. })),
            "{text}: {r:?}"
        );
    }
}

#[test]
fn the_verifier_names_what_is_higher_order() {
    let ok = term("let a = map (x. x * w) A in reduce (+) 0 (map2 (*) a B)");
    assert!(is_first_order(&ok).is_ok());
    for (text, what) in [
        ("let f = fun (a: R) -> a in 1", "lambda"),
        ("(fun (a: R) -> a)(1)", "application"),
        ("1 + (fun (a: R) -> a)", "lambda"),
        ("f(1)", "application"),
        ("map f A", "function type"),
        ("let g = sin in 1", "primitive"),
        ("map (g. g) (replicate(2, sin))", "primitive"),
    ] {
        let err = is_first_order(&term(text)).expect_err(text);
        assert!(err.1.contains(what), "{text}: {}", err.1);
    }
}

#[test]
fn the_module_example_holds() {
    let input =
        parse_expr("let Y = fun (a: R, z: R) -> (a + x * z, z * y) in Y(0.0, 1.0)").unwrap();
    let out = simplify(&input, &Options::default()).unwrap();
    assert_eq!(out.to_string(), "(0.0 + x, y)");
}
