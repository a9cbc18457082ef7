//! The simplifier on what differentiation produces: gradient programs of
//! generated programs, by both routes (UNF and direct, Figures 8–10 and 5)
//! and both constructions (sparse, and literal continuations over the whole
//! context as Figure 5 prints them). Each simplified program must be first
//! order, keep its type, and compute the same values as the program before
//! simplification: bit for bit, except that a zero may change sign (adding
//! a structural zero is licensed to drop a `-0.0`).

mod simplify_support;

use gradlift_ad::direct::{Construction, Route};
use gradlift_ad::inline::{inline, Closed};
use gradlift_ad::simplify::{is_first_order, simplify_with_stats, Options, Rule, Stats};
use gradlift_lang::syntax::{ArrayOp, Expr, ExprKind};
use gradlift_lang::testing::{generate, Config};
use gradlift_lang::types::check_expr;
use gradlift_lang::value::bind_sizes;
use gradlift_lang::{check_module, check_source, interp, CheckedModule, Name, Prim, Type, Value};
use simplify_support::count_prim;

const ROUTES: [(Route, Construction); 4] = [
    (Route::Unf, Construction::Sparse),
    (Route::Unf, Construction::Literal),
    (Route::Direct, Construction::Sparse),
    (Route::Direct, Construction::Literal),
];

/// The gradient program of `closed` with respect to all its parameters.
fn differentiate(closed: &Closed, route: Route, construction: Construction) -> Expr {
    let wrt: Vec<Name> = closed.context().into_iter().map(|(n, _)| n).collect();
    match route {
        Route::Direct => gradlift_ad::direct::reverse(closed, &wrt, construction),
        Route::Unf => gradlift_ad::unf_inverse::reverse(closed, &wrt, construction),
    }
    .unwrap_or_else(|e| panic!("{e}"))
}

/// The simplified gradient programs of the last definition of `source`,
/// by every route: a description and the gradient part of the final pair
/// (after the program's `let`s).
fn simplified_gradients(source: &str) -> Vec<(String, Expr)> {
    let m: CheckedModule = check_source("<test>", source).expect("the program checks");
    let closed = inline(&m, m.module.defs.len() - 1);
    ROUTES
        .iter()
        .map(|&(route, construction)| {
            let term = differentiate(&closed, route, construction);
            let (out, _) = simplify_with_stats(&term, &Options::default()).expect("simplifies");
            assert!(is_first_order(&out).is_ok(), "{out}");
            let what = format!("{route:?}/{construction:?}: {out}");
            let mut body = &out;
            while let ExprKind::Let { body: rest, .. } = &body.kind {
                body = rest;
            }
            let gradient = match &body.kind {
                ExprKind::Tuple(parts) => parts[1].clone(),
                _ => panic!("{what}: not a pair"),
            };
            (what, gradient)
        })
        .collect()
}

/// Example 5.5: ∇sum(A) = OnesLike(A).
#[test]
fn the_gradient_of_sum_is_ones_like() {
    for (what, g) in simplified_gradients("def sum(A: [R; n]) -> R = reduce (+) 0 A") {
        let ExprKind::ArrayOp(ArrayOp::Map, f, args) = &g.kind else {
            panic!("{what}")
        };
        let ExprKind::Lambda(_, body) = &f.kind else {
            panic!("{what}")
        };
        assert!(
            matches!(body.kind, ExprKind::Const(c) if c == 1.0),
            "{what}"
        );
        assert!(
            matches!(&args[0].kind, ExprKind::Var(a) if &**a == "A"),
            "{what}"
        );
    }
}

/// Example 5.5 and Lemma A.6: ∇_{A,B} dot(A, B) = (B, A).
#[test]
fn the_gradient_of_dot_is_the_other_vector() {
    let dot = "def dot(A: [R; n], B: [R; n]) -> R = reduce (+) 0 (map2 (*) A B)";
    for (what, g) in simplified_gradients(dot) {
        assert_eq!(g.to_string(), "(B, A)", "{what}");
    }
}

/// Example 5.5 with erratum E5: ∇prod(A) = map2 (*) (shift1L (scanr (*) 1
/// A)) (shift1R (scanl (*) 1 A)), for every n.
#[test]
fn the_gradient_of_prod_is_the_closed_form() {
    for (what, g) in simplified_gradients("def prod(A: [R; n]) -> R = reduce (*) 1 A") {
        assert_eq!(
            g.to_string(),
            "map2 (*) (shift1L (scanr (*) 1.0 A)) (shift1R (scanl (*) 1.0 A))",
            "{what}"
        );
    }
}

/// Example 1.1: the final form (w₁ + x₂*x₁, x₁*x₁, 0), with x₂*x₁ = w₁.
#[test]
fn example_1_1_through_differentiation() {
    let f = "def f(x1: R, x2: R, x3: R) -> R = let w1 = x1 * x2 in let w2 = w1 * x1 in w2";
    for (what, g) in simplified_gradients(f) {
        let ExprKind::Tuple(parts) = &g.kind else {
            panic!("{what}")
        };
        assert_eq!(parts.len(), 3, "{what}");
        assert!(parts[2].is_structural_zero(), "{what}");
        assert_eq!(parts[1].to_string(), "x1 * x1", "{what}");
        assert_eq!(count_prim(&parts[0], Prim::Add), 1, "{what}");
        assert_eq!(count_prim(&parts[0], Prim::Mul), 0, "{what}: x₂*x₁ is w₁");
    }
}

const SEEDS: u64 = 300;

/// Equal bit for bit, or both NaN, or both zeros of either sign.
fn agrees(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Real(x), Value::Real(y)) => {
            x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()) || (*x == 0.0 && *y == 0.0)
        }
        (Value::Tuple(xs), Value::Tuple(ys)) | (Value::Array(xs), Value::Array(ys)) => {
            xs.len() == ys.len() && xs.iter().zip(ys.iter()).all(|(x, y)| agrees(x, y))
        }
        _ => false,
    }
}

#[test]
fn gradient_programs_simplify_to_the_same_values() {
    let mut stats = Stats::default();
    let mut tested = 0;
    for seed in 0..SEEDS {
        let case = generate(seed, &Config::default());
        let checked = check_module(case.module.clone()).expect("generated programs type-check");
        let index = checked.module.defs.len() - 1;
        let sig = &checked.sigs[index];
        if sig.ret != Type::Real || sig.params.iter().all(|(_, t)| t.is_none()) {
            continue;
        }
        let closed = inline(&checked, index);
        let sizes = bind_sizes(&closed.name, sig, &case.args).expect("the case's arguments fit");
        let mut vars: Vec<(Name, Value)> =
            sizes.into_iter().map(|(n, v)| (n, Value::Int(v))).collect();
        for ((p, _), a) in sig.params.iter().zip(&case.args) {
            vars.push((p.clone(), a.clone()));
        }
        for (route, construction) in ROUTES {
            let term = differentiate(&closed, route, construction);
            let Ok(before) = interp::eval_expr(&checked, &vars, &term) else {
                continue;
            };
            let what = format!("seed {seed} ({route:?}/{construction:?})");
            let (after, s) = simplify_with_stats(&term, &Options::default())
                .unwrap_or_else(|e| panic!("{what}: {e}\n{term}"));
            stats.merge(&s);
            if let Err((_, message)) = is_first_order(&after) {
                panic!("{what}: {message}\n{after}");
            }
            let context = closed.context();
            let want =
                check_expr(&context, &closed.size_vars, &term).expect("the gradient type-checks");
            let got = check_expr(&context, &closed.size_vars, &after)
                .unwrap_or_else(|e| panic!("{what}: {e}\n{after}"));
            assert_eq!(want, got, "{what}");
            let value = interp::eval_expr(&checked, &vars, &after)
                .unwrap_or_else(|e| panic!("{what}: {e}\n{after}"));
            assert!(
                agrees(&before, &value),
                "{what}: {before} ≠ {value}\nbefore:\n{term}\nafter:\n{after}"
            );
            tested += 1;
        }
    }
    println!("{tested} gradient programs; {stats}");
    assert!(tested > 100, "only {tested} gradient programs");
    for rule in [
        Rule::InlineFun,
        Rule::AddZero,
        Rule::ZeroProduct,
        Rule::MapFusion,
    ] {
        assert!(stats.count(rule) > 0, "{rule} never fired: {stats}");
    }
}

/// The ODE example's gradient builds arrays of partial derivatives whose
/// length alone is read, from sums of the stages (`k1 + k4`, `k2 + k3`):
/// `length-only` drops every layer of those sums in one round, and the
/// simplifier settles in four rounds (six before the rule).
#[test]
fn arrays_read_for_their_length_lose_their_sums_in_one_round() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/ode.grad");
    let text = std::fs::read_to_string(path).unwrap();
    let m: CheckedModule = check_source("ode.grad", &text).expect("the example checks");
    let index = m
        .module
        .defs
        .iter()
        .position(|d| &*d.name == "last")
        .expect("`last` is defined");
    let closed = inline(&m, index);
    let term = differentiate(&closed, Route::Unf, Construction::Sparse);
    let (out, report) =
        gradlift_ad::simplify::run(term.clone(), &Options::default(), &[], None, None).unwrap();
    assert!(report.stats.count(Rule::LengthOnly) > 0, "{}", report.stats);
    assert!(report.rounds <= 4, "{} rounds", report.rounds);
    assert!(is_first_order(&out).is_ok());
}
