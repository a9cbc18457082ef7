//! Each rule of the table (Figure 12 and the rules of App. A.6) on a small
//! term, text in and text out, asserting the rule fired by name. The free
//! variable `zero` in a test text stands for a structural zero.

mod simplify_support;

use gradlift_ad::simplify::{Options, Rule};
use gradlift_lang::syntax::ExprKind;
use gradlift_lang::{Prim, Value};
use simplify_support::*;

// ---- Algebraic simplifications

#[test]
fn structural_zeros_are_dropped() {
    rewrites("zero * x + y", "y", Rule::ZeroProduct);
    rewrites("x * zero + y", "y", Rule::ZeroProduct);
    rewrites("zero / x - y", "0 - y", Rule::ZeroProduct);
    rewrites("-zero + x", "x", Rule::NegZero);
    rewrites("x + zero", "x", Rule::AddZero);
}

#[test]
fn units_are_dropped_where_exact() {
    rewrites("-0 + x", "x", Rule::AddZero);
    rewrites("x - 0", "x", Rule::SubZero);
    rewrites("1 * x * 1", "x", Rule::MulOne);
    rewrites("x / 1", "x", Rule::DivOne);
}

#[test]
fn constants_fold_as_the_interpreter_computes() {
    let expected = format!("{:?} + x", 1f64.sin() * 2.0);
    rewrites("sin(1) * 2 + x", &expected, Rule::ConstFold);
    rewrites("pow(2, 10) - min(nan, 1)", "nan", Rule::ConstFold);
}

#[test]
fn user_zeros_are_kept_without_the_algebraic_flag() {
    // 0 * x is nan at x = inf, 0 + x is 0 at x = -0: neither may go.
    let (out, stats) = simp(&term("0 * x + (0 + y)"));
    assert_eq!(out.to_string(), "0.0 * x + (0.0 + y)");
    assert_eq!(
        stats.count(Rule::ZeroProduct) + stats.count(Rule::AddZero),
        0
    );
    let v = eval(
        &out,
        &values(&[("x", Value::Real(f64::INFINITY)), ("y", Value::Real(1.0))]),
    );
    assert!(v.unwrap().as_real().unwrap().is_nan());
    // Folding 0 * inf gives nan, as evaluating it does.
    let (out, _) = simp(&term("0 * inf"));
    assert!(matches!(out.kind, ExprKind::Const(c) if c.is_nan()));
    // With the flag, they go.
    let algebraic = Options {
        algebraic: true,
        ..Options::default()
    };
    rewrites_with("0 * x + (0 + y)", "y", Rule::ZeroProduct, &algebraic);
    rewrites_with(
        "map2 (*) A (map (a. 0) B)",
        "map (a. 0) B",
        Rule::Map2MulZeros,
        &algebraic,
    );
    // Without it, the product with the user's zero stays (specialized to
    // the constant, which is exact).
    let (out, _) = simp(&term("map2 (*) A (map (a. 0) B)"));
    assert_eq!(out.to_string(), "map (a_1. a_1 * 0.0) A");
}

// ---- Conditionals

#[test]
fn known_conditions_choose_a_branch() {
    rewrites("if 1 < 2 then x else y", "x", Rule::IfKnown);
    rewrites(
        "if 1 < 2 and x > 0 then x else y",
        "if x > 0 then x else y",
        Rule::CondFold,
    );
    rewrites(
        "if not (1 < 2) or 3 >= 3 then x else y",
        "x",
        Rule::CondFold,
    );
}

#[test]
fn equal_branches_merge() {
    rewrites(
        "if x < y then (let a = x * y in a + 1) else (let b = x * y in b + 1)",
        "x * y + 1",
        Rule::IfSame,
    );
}

#[test]
fn branches_the_same_but_for_dead_bindings_are_one_in_one_round() {
    // Partial evaluation binds `a` before its only reader, a component
    // of a tuple no one reads, folds away: the branch's block keeps a
    // binding its result does not read, which must not hide that both
    // branches are 1.
    let e = term("if x < y then (let a = x + y in (a, 1.0).1) else (let b = x * y in (b, 1.0).1)");
    let (out, report) =
        gradlift_ad::simplify::run(e.clone(), &Options::default(), &[], None, None).unwrap();
    assert_eq!(out.to_string(), "1.0");
    assert_eq!(report.rounds, 1, "{report:?}");
    assert!(report.stats.count(Rule::IfSame) >= 1);
}

// ---- η and the array rules

#[test]
fn lambdas_contract_to_primitives() {
    rewrites("map (x. sin(x)) A", "map sin A", Rule::Eta);
    rewrites("map2 (a, b. a * b) A B", "map2 (*) A B", Rule::Eta);
    rewrites("map2 (a, b. b + a) A B", "map2 (+) A B", Rule::Eta);
    rewrites(
        "reduce (a, b. max(a, b)) (-inf) A",
        "reduce max (-inf) A",
        Rule::Eta,
    );
    // Subtraction does not commute, and (-) is not negation.
    let (out, _) = simp(&term("map2 (a, b. b - a) A B"));
    assert_eq!(out.to_string(), "map2 (a, b. b - a) A B");
    let (out, _) = simp(&term("map (a. -a) A"));
    assert_eq!(out.to_string(), "map (a. -a) A");
}

#[test]
fn identity_and_projection_maps_vanish() {
    rewrites("map (x. x) A", "A", Rule::MapIdentity);
    rewrites("map2 (a, b. (a, b).0) A B", "A", Rule::Map2First);
    rewrites("map2 (a, b. let c = b in c) A B", "B", Rule::Map2Second);
    rewrites("map2 (a, b. 1) A B", "map (_. 1) A", Rule::Map2Const);
    rewrites("map2 (a, b. sin(b)) A B", "map sin B", Rule::Map2UnusedArg);
}

#[test]
fn ones_and_zeros_are_recognised_in_every_form() {
    rewrites("map2 (*) A (map (x. 1) B)", "A", Rule::Map2MulOnes);
    rewrites("map2 (*) (replicate(n, 1)) A", "A", Rule::Map2MulOnes);
    rewrites("map2 (*) A (map2 (a, b. 1) B C)", "A", Rule::Map2MulOnes);
    rewrites(
        "map2 (*) A (map (x. zero) B)",
        "map (x. 0) B",
        Rule::Map2MulZeros,
    );
    rewrites("map2 (+) (map (x. zero) B) A", "A", Rule::Map2AddZeros);
    rewrites("map2 (-) A (replicate(n, 0))", "A", Rule::Map2SubZeros);
    // Through a variable.
    rewrites(
        "let O = map (x. 1) B in (map2 (*) A O, O)",
        "(A, map (x. 1) B)",
        Rule::Map2MulOnes,
    );
}

#[test]
fn constant_arrays_become_constants_in_map2() {
    // An array holding one variable everywhere (the cotangent of a sum).
    rewrites(
        "let Z = map (x. w) B in map2 (a, b. a * b) A Z",
        "map (a. a * w) A",
        Rule::Map2FillArg,
    );
    rewrites(
        "map2 (a, b. b - a) replicate(n, w) A",
        "map (b. b - w) A",
        Rule::Map2FillArg,
    );
    rewrites(
        "map2 (a, b. a * b + b) A (map (x. 2) B)",
        "map (a. a * 2 + 2) A",
        Rule::Map2FillArg,
    );
    rewrites(
        "map2 (g, z. g.0 * z) P (map (x. 1) C)",
        "map (g. g.0) P",
        Rule::Map2FillArg,
    );
}

#[test]
fn projections_of_arrays_of_tuples_read_the_arrays() {
    // The transposed Jacobian of `map2 (*) A B` (App. A.6): the partials
    // are (b, a), so the adjoints are B and A, and the tuples die.
    rewrites(
        "let P = map2 (a, b. (b, a)) A B in (map (p. p.0) P, map (p. p.1) P)",
        "(B, A)",
        Rule::MapProj,
    );
    // A computed component is not recomputed: here the first projection
    // goes, the array is then used once and fuses.
    rewrites(
        "let P = map2 (a, b. (b, a * b)) A B in (map (p. p.0) P, map (p. p.1) P)",
        "(B, map2 (*) A B)",
        Rule::MapProj,
    );
    // A component bound by a tuple pattern of the lambda is not free (and
    // the map, which only moves values, is not stored: each use reads `Q`).
    let input = "let P = map ((u, v). (v, w)) Q in (map (p. p.0) P, map (p. p.1) P, P)";
    rewrites(
        input,
        "(map ((u, v). v) Q, map (_. w) Q, map ((u_1, v_1). (v_1, w)) Q)",
        Rule::MapProj,
    );
    rewrites(
        "let P = map2 (a, b. (b, a * b)) A B in (map (p. p.0) P, map (p. p.1) P, P)",
        "let P = map2 (a, b. (b, a * b)) A B in (B, map (p_1. p_1.1) P, P)",
        Rule::MapProj,
    );
}

#[test]
fn consumers_of_arrays_of_tuples_read_the_components() {
    // Constant partial derivatives: the array of pairs is never read.
    rewrites(
        "let P = map (a. (1, 2)) A in (map2 (p, z. p.0 * z) P Z, map2 (p, z. p.1 * z) P Z)",
        "(Z, map (z_2. 2.0 * z_2) Z)",
        Rule::TupleArg,
    );
    // A component that is a parameter is read from its array, one that is
    // bound outside the function as it is.
    rewrites(
        "let P = map2 (a, b. (b, w, sin(a))) A B in (map2 (p, z. p.0 * p.1 * z) P Z, P)",
        "(map2 (b, z. b * w * z) B Z, map2 (a, b_1. (b_1, w, sin(a))) A B)",
        Rule::TupleArg,
    );
    rewrites(
        "let P = map (a. (w, sin(a))) A in reduce (+) 0 (map (p. p.0 * 2) P)",
        "reduce (+) 0.0 (map (p. w * 2.0) A)",
        Rule::TupleArg,
    );
    // Not when a computed component is read, nor two parameters, nor the
    // whole tuple.
    never_fires(
        &[
            "let P = map2 (a, b. (b, sin(a))) A B in map2 (p, z. p.1 * z) P Z",
            "let P = map2 (a, b. (b, a)) A B in map2 (p, z. p.0 * p.1 * z) P Z",
            "let P = map2 (a, b. (b, 1)) A B in map2 (p, z. (p, z)) P Z",
        ],
        Rule::TupleArg,
    );
}

#[test]
fn loops_reading_arrays_of_a_shared_array_of_tuples_compute_them() {
    // The fold reading an array component gets its own map, written in
    // place; the other consumers share what is left. (The component is
    // too costly to rebuild where it is read: three operations.)
    let input = "let P = map2 (x, y. let s = reduce (+) 0 (map2 (*) w x) * y in \
                 (map (b. b * s * s * s) x, map (a. a * s) w, s)) X Y in \
                 (reduce (u, v. map2 (+) u v) zw (map (g. g.0) P), map (g. g.1) P, map (g. g.2) P, map (g. g.2 + 1) P)";
    let (out, stats) = simp(&term(input));
    assert_eq!(stats.count(Rule::MapSplit), 1, "{out}");
    let text = out.to_string();
    assert_eq!(
        text.matches("reduce (+) 0.0 (map2 (*) w").count(),
        2,
        "{text}"
    );
    // The fold's own map builds arrays: it is fused into the fold, which
    // reads the pairs of `X` and `Y` and builds only its accumulator.
    assert!(
        text.contains("map2 (+) u (map (") && text.contains("zw (map2 (a, b. (a, b)) X Y)"),
        "{text}"
    );
    // Not when every consumer reads scalars, nor with one consumer, nor when
    // the array is read whole.
    never_fires(
        &[
            "let P = map (x. (x, sin(x))) A in (map (g. g.0) P, map (g. g.1) P)",
            "let P = map (x. (map (b. b * x) A, x)) A in map (g. g.0) P",
            "let P = map (x. (map (b. b * x) A, x)) A in (map (g. g.0) P, P)",
            // Maps are not given copies.
            "let P = map (x. (map (b. b * x) A, x)) A in (map (g. g.0) P, map (g. g.1) P)",
        ],
        Rule::MapSplit,
    );
}

#[test]
fn reductions_of_ones_and_zeros_fold() {
    rewrites("reduce (*) 1 (map (x. 1) A)", "1", Rule::ReduceMulOnes);
    rewrites(
        "reduce (+) 0 (map2 (a, b. zero) A B)",
        "0",
        Rule::ReduceAddZeros,
    );
    rewrites("foldl (*) x (replicate(n, 1))", "x", Rule::ReduceMulOnes);
    // A user's +0.0 zeros keep a variable unit (it could be -0.0).
    let (out, _) = simp(&term("reduce (+) x (replicate(n, 0))"));
    assert_eq!(out.to_string(), "reduce (+) x replicate(n, 0.0)");
}

#[test]
fn shifts_and_scans_of_ones_stay_ones() {
    rewrites(
        "shift1L (map (x. 1) A)",
        "map (_. 1) (shift1L A)",
        Rule::ShiftFill,
    );
    rewrites(
        "shift1R (replicate(3, 1))",
        "replicate(2, 1)",
        Rule::ShiftFill,
    );
    rewrites(
        "scanr (*) 1 (map (x. 1) A)",
        "replicate(len(A) + 1, 1)",
        Rule::ScanFill,
    );
    rewrites(
        "scanl (*) 1 (replicate(n, 1))",
        "replicate(n + 1, 1)",
        Rule::ScanFill,
    );
    rewrites("map2 (*) X (shift1L (map (x. 1) A))", "X", Rule::ShiftFill);
    rewrites(
        "scanr (*) 1 (shift1L (map (x. 1) A))",
        "replicate(len(shift1L A) + 1, 1)",
        Rule::ScanFill,
    );
}

#[test]
fn known_arrays_are_indexed() {
    rewrites("[x, y, z][-1]", "z", Rule::IndexKnown);
    rewrites("(map (x. 1) A)[0] * y", "y", Rule::IndexKnown);
    // Parts of structural zeros, and their `concat`, are zeros: the
    // cotangent of a `concat` whose parts had none (a product by it goes).
    rewrites(
        "let Z = concat(take(m, map (x. zero) A), map (x. zero) B) in drop(n, Z)[0] * y",
        "0.0",
        Rule::IndexKnown,
    );
    // A tuple of constants replicated (a scan's states whose cotangents
    // are all zero), indexed: the tuple.
    rewrites(
        "let S = replicate(n, (zero, zero)) in S[-1].0 * y + S[0].1",
        "0.0",
        Rule::IndexKnown,
    );
}

#[test]
fn maps_fuse() {
    rewrites(
        "map sin (map2 (a, b. a * b) A B)",
        "map2 (a, b. sin(a * b)) A B",
        Rule::MapFusion,
    );
    rewrites(
        "map (x. x + 1) (map exp A)",
        "map (x. exp(x) + 1) A",
        Rule::MapFusion,
    );
    rewrites(
        "map (x. x * x) (map2 (a, b. a - b) A B)",
        "map2 (a, b. let x = a - b in x * x) A B",
        Rule::MapFusion,
    );
    // A shared intermediate array is not fused (it would be computed twice).
    let (out, stats) = simp(&term("let C = map exp A in (map sin C, C)"));
    assert_eq!(stats.count(Rule::MapFusion), 0, "{out}");
}

#[test]
fn reductions_of_maps_are_folds() {
    rewrites(
        "reduce (a, b. a + b + a * b) 0 (map exp A)",
        "foldl (a, x. let b = exp(x) in a + b + a * b) 0.0 A",
        Rule::FoldFusion,
    );
    // A reduce in lanes (gradlift_lang::reduce_order) keeps its map: a
    // left fold would change its order.
    let (out, stats) = simp(&term("reduce (+) 0 (map exp A)"));
    assert_eq!(stats.count(Rule::FoldFusion), 0, "{out}");
    assert_eq!(out.to_string(), "reduce (+) 0.0 (map exp A)");
    rewrites(
        "foldl (s, y. s * y + 1) 2 (map (a. a * a) A)",
        "foldl (s, a. s * (a * a) + 1.0) 2.0 A",
        Rule::FoldFusion,
    );
    // A map used once, bound by a `let`, is inlined and then fused, however
    // long its body.
    rewrites(
        "let M = map (a. let b = sin(a) in let c = cos(b) in let d = exp(c) in let e = sin(d) in let f = cos(e) in let g = exp(f) in g * g) A in foldl max 0 M",
        "foldl (acc, a. let g_1 = exp(cos(sin(exp(cos(sin(a)))))) in max(acc, g_1 * g_1)) 0.0 A",
        Rule::FoldFusion,
    );
    // A shared array is not fused.
    let (out, stats) = simp(&term("let C = map exp A in (reduce (+) 0 C, C)"));
    assert_eq!(stats.count(Rule::FoldFusion), 0, "{out}");
    // A reduction of a `map2` of reals stays (its loop reads the pairs).
    let (out, stats) = simp(&term("reduce (+) 0 (map2 (a, b. a * b) A B)"));
    assert_eq!(stats.count(Rule::FoldFusion), 0, "{out}");
    // A fold over a `map2` whose elements are arrays reads the pairs of
    // its arrays, and the element's map is fused with the step's.
    rewrites(
        "foldl (u, v. map2 (+) u v) Z (map2 (x, y. map (b. b * y) x) X Y)",
        "foldl (u, q. let y = q.1 in map2 (+) u (map (b_1. b_1 * y) q.0)) Z (map2 (a, b. (a, b)) X Y)",
        Rule::FoldFusion,
    );
    // Not a `reduce`, whose `map2` is left to the rules that fuse the
    // map's arguments into its function.
    let (out, stats) = simp(&term(
        "reduce (u, v. map2 (+) u v) Z (map2 (x, y. map (b. b * y) x) X Y)",
    ));
    assert_eq!(stats.count(Rule::FoldFusion), 0, "{out}");
    // A zip shared by two folds is not stored: each reads the pairs (and
    // the two folds, over the same pairs, become one, `fold-merge`).
    let (out, stats) = simp(&term(
        "let P = map2 (a, b. (a, b)) X Y in \
         (foldl (s, p. s + p.0 * p.1) 0 P, foldl (s, p. s * p.0 - p.1) 1 P)",
    ));
    assert!(stats.count(Rule::InlineCheapMap) >= 1, "{out}");
    assert!(stats.count(Rule::FoldMerge) >= 1, "{out}");
    let text = out.to_string();
    assert!(!text.contains("let P"), "{text}");
    assert_eq!(text.matches("map2 (a, b. (a, b)) X Y").count(), 1, "{text}");
    assert_eq!(text.matches("foldl").count(), 1, "{text}");
    // Nor is a map that regroups components (the cotangent of a `zip`
    // inside a `map` over three arrays): each reader projects the array
    // it came from.
    let (out, stats) = simp(&term(
        "let Q = map (g. (g.0.0, g.0.1)) P in (map (q. q.0) Q, map (q. q.1 * 2) Q)",
    ));
    assert!(stats.count(Rule::InlineCheapMap) >= 1, "{out}");
    let text = out.to_string();
    assert!(!text.contains("let "), "{text}");
}

// ---- Dead code and common subexpressions

#[test]
fn dead_lets_are_dropped_and_single_uses_inlined() {
    rewrites(
        "let a = x * y in let b = sin(x) in b",
        "sin(x)",
        Rule::DeadLet,
    );
    rewrites("let a = x * y in a + 1", "x * y + 1", Rule::InlineOnce);
    rewrites("let (a, b) = p in b", "let (_, b) = p in b", Rule::DeadLet);
    // A value used inside a lambda stays bound: inlining would repeat it.
    let (out, _) = simp(&term("let s = sin(w) in map (a. a * s) A"));
    assert_eq!(flat(&out.to_string()), "let s = sin(w) in map (a. a * s) A");
}

#[test]
fn common_subexpressions_are_bound_once() {
    rewrites(
        "sin(x) * y + sin(x)",
        "let t = sin(x) in t * y + t",
        Rule::Cse,
    );
    rewrites(
        "(reduce (+) 0 (map2 (a, b. a * b) A B), reduce (+) 0 (map2 (c, d. c * d) A B))",
        "let t = reduce (+) 0 (map2 (*) A B) in (t, t)",
        Rule::Cse,
    );
    // A computation in scope is reused inside a lambda.
    rewrites(
        "sin(w) + reduce (+) 0 (map2 (a, b. a * b * sin(w)) A B)",
        "let t = sin(w) in t + reduce (+) 0 (map2 (a, b. a * b * t) A B)",
        Rule::Cse,
    );
    // Nothing is hoisted out of a branch.
    let (out, stats) = simp(&term("(if x > 0 then sin(x) else 0) + sin(x)"));
    assert_eq!(stats.count(Rule::Cse), 0, "{out}");
    // Without the option, nothing is shared.
    let (out, _) = simp_with(
        &term("sin(x) * y + sin(x)"),
        &Options {
            cse: false,
            ..Options::default()
        },
    );
    assert_eq!(out.to_string(), "sin(x) * y + sin(x)");
}

// ---- Sums moved into branches

/// The reverse of `if` as differentiation builds it: the branch that does
/// not read `A` returns zeros for its cotangent, which the caller adds to
/// its running sum `S`.
const BRANCH_COTANGENTS: &str =
    "let x = if c < 1 then (map (a. a * y) A, y) else (map (a. zero) A, zero) in \
     (map2 (+) S x.0, x.1 * 3)";

#[test]
fn a_sum_moves_into_the_branches_and_meets_the_zeros_there() {
    let input = term(BRANCH_COTANGENTS);
    let (out, stats) = simp(&input);
    assert!(stats.count(Rule::SumIntoBranches) > 0, "fired: {stats}");
    assert!(stats.count(Rule::Map2AddZeros) > 0, "fired: {stats}");
    assert_eq!(
        flat(&out.to_string()),
        flat(
            &term(
                "let x = if c < 1.0 then (map2 (+) S (map (a. a * y) A), y) else (S, 0.0) in \
                 (x.0, x.1 * 3.0)"
            )
            .to_string()
        ),
    );
    let types = typed(&[("c", "R"), ("y", "R"), ("A", "[R; n]"), ("S", "[R; n]")]);
    for c in [0.0, 2.0] {
        let vals = values(&[
            ("c", Value::Real(c)),
            ("y", Value::Real(1.5)),
            ("A", Value::reals(&[1.0, -2.0, 0.25])),
            ("S", Value::reals(&[0.5, 4.0, 1e-3])),
        ]);
        assert_same_meaning(&structural(&input), &out, &types, &["n"], &vals);
    }
}

#[test]
fn a_sum_stays_where_it_is_not_on_every_path_or_not_in_scope() {
    // Added in one branch only: moving it would add on every path.
    let (_, stats) = simp(&term(
        "let x = if c < 1 then (map (a. a * y) A, y) else (map (a. zero) A, zero) in \
         if d < 1 then (map2 (+) S x.0, x.1) else (S, x.1)",
    ));
    assert_eq!(stats.count(Rule::SumIntoBranches), 0, "fired: {stats}");
    // The running sum is bound after the `let`.
    let (out, stats) = simp(&term(
        "let x = if c < 1 then (map (a. a * y) A, y) else (map (a. zero) A, zero) in \
         let T = map (b. exp(b) * y) S in (map2 (+) T x.0, T, x.1)",
    ));
    assert_eq!(stats.count(Rule::SumIntoBranches), 0, "fired: {stats}");
    assert!(
        flat(&out.to_string()).contains(&flat("(map2 (+) T x.0, T, x.1)")),
        "{out}"
    );
}

// ---- Derived components

#[test]
fn a_component_computed_from_another_is_not_stored() {
    // The partials of exp(v - a) with respect to a and v, read by a fold
    // and a map: the array keeps exp(v - a) alone.
    let input = "let P = map (v. let e = exp(v - a) in (-1 * e, e)) X in \
                 (foldl (s, g. s + g.0 * w) 0 P, map (h. h.1 * w) P)";
    rewrites(
        input,
        "let P = map (v. exp(v - a)) X in \
         (foldl (s, g. s + -1.0 * g * w) 0.0 P, map (h. h * w) P)",
        Rule::DerivedComponent,
    );
    let types = typed(&[("a", "R"), ("w", "R"), ("X", "[R; n]")]);
    let vals = values(&[
        ("a", Value::Real(0.75)),
        ("w", Value::Real(-1.5)),
        ("X", Value::reals(&[1.0, -2.0, 0.25, 3.5])),
    ]);
    let before = term(input);
    let (after, _) = simp(&before);
    assert_same_meaning(&before, &after, &types, &["n"], &vals);
}

#[test]
fn a_component_of_the_map_body_alone_is_stored() {
    // `e * b` reads `b`, bound inside the map: computed where it is read,
    // it would not be in scope. Three operations: too many to repeat.
    never_fires(
        &[
            "let P = map (v. let b = sin(v) in let e = exp(v) in (e * b, e)) X in \
             (foldl (s, g. s + g.0) 0 P, map (h. h.1) P)",
            "let P = map (v. let e = exp(v) in (e * a + e * a * a, e)) X in \
             (foldl (s, g. s + g.0) 0 P, map (h. h.1) P)",
        ],
        Rule::DerivedComponent,
    );
}

// ---- Folds reading maps

#[test]
fn a_fold_reads_the_elements_a_map_stores_instead_of_computing_them() {
    let input = "let t = foldl (acc, v. acc + exp(v - a)) 0 X in \
                 let u = 1 / t in \
                 let P = map (w. exp(w - a)) X in \
                 (t, map (p. p * u) P, map (q. q + a) P)";
    rewrites(
        input,
        "let P = map (w. exp(w - a)) X in \
         let t = foldl (+) 0.0 P in \
         let u = 1.0 / t in \
         (t, map (p. p * u) P, map (q. q + a) P)",
        Rule::FoldReadsMap,
    );
    let types = typed(&[("a", "R"), ("X", "[R; n]")]);
    let vals = values(&[
        ("a", Value::Real(0.75)),
        ("X", Value::reals(&[1.0, -2.0, 0.25, 800.0])),
    ]);
    let before = term(input);
    let (after, _) = simp(&before);
    assert_same_meaning(&before, &after, &types, &["n"], &vals);
}

#[test]
fn a_fold_keeps_computing_what_it_cannot_read() {
    never_fires(
        &[
            // The map reads `u`, bound after the fold from its result.
            "let t = foldl (acc, v. acc + exp(v - a)) 0 X in \
             let u = 1 / t in \
             let P = map (w. exp(w - u)) X in (t, P, map (q. q + 1) P)",
            // The fold reads its element outside `exp` too.
            "let t = foldl (acc, v. acc + exp(v - a) * v) 0 X in \
             let P = map (w. exp(w - a)) X in (t, t * 2, P, map (q. q + 1) P)",
            // Nothing to save: no transcendental function.
            "let t = foldl (acc, v. acc + (v - a) * 2) 0 X in \
             let P = map (w. (w - a) * 2) X in (t, t * 2, P, map (q. q + 1) P)",
            // The map's elements can fail (an index out of bounds).
            "let t = foldl (acc, v. acc + exp(v - Y[3])) 0 X in \
             let P = map (w. exp(w - Y[3])) X in (t, t * 2, P, map (q. q + 1) P)",
        ],
        Rule::FoldReadsMap,
    );
}

#[test]
fn an_array_component_is_rebuilt_from_the_reals_it_is_made_of() {
    // Per row: the cotangent of the row, `map (a. a * s) w`, and a real.
    let input = "let P = map (x. let t = reduce (+) 0 (map2 (*) w x) in \
                                 let s = exp(t) in (map (a. a * s) w, t * s)) X in \
                 (map (g. map (b. b * u) g.0) P, foldl (acc, h. acc + h.1) 0 P)";
    let (out, stats) = simp(&term(input));
    assert!(stats.count(Rule::RebuiltComponent) > 0, "fired: {stats}");
    // The stored tuple holds reals only.
    assert!(
        !flat(&out.to_string()).contains(&flat("(map (a. a * s) w")),
        "{out}"
    );
    let types = typed(&[("u", "R"), ("w", "[R; d]"), ("X", "[[R; d]; m]")]);
    let vals = values(&[
        ("u", Value::Real(0.5)),
        ("w", Value::reals(&[1.0, -2.0, 0.25])),
        ("X", two_rows()),
    ]);
    let before = term(input);
    assert_same_meaning(&before, &out, &types, &["d", "m"], &vals);
}

#[test]
fn an_array_component_of_the_row_itself_is_rebuilt_from_the_row() {
    // `map (a. a * s) x` maps the row: its consumers read the pairs of `P`
    // and `X` and rebuild it from `s` and the row; nothing of size
    // `m × d` is stored, and the row's sum is computed once.
    let input = "let P = map (x. let s = exp(reduce (+) 0 x) in (map (a. a * s) x, s)) X in \
                 (map (g. g.0) P, foldl (acc, h. acc + h.1) 0 P, \
                  foldl (u, h. map2 (+) u h.0) w P)";
    let (out, stats) = simp(&term(input));
    assert!(stats.count(Rule::RebuiltComponent) > 0, "fired: {stats}");
    assert_eq!(stats.count(Rule::MapSplit), 0, "fired: {stats}");
    let text = out.to_string();
    assert_eq!(text.matches("reduce (+) 0.0").count(), 1, "{text}");
    assert!(text.contains("P X)"), "{text}");
    let types = typed(&[("w", "[R; d]"), ("X", "[[R; d]; m]")]);
    let vals = values(&[("w", Value::reals(&[1.0, -2.0, 0.25])), ("X", two_rows())]);
    assert_same_meaning(&term(input), &out, &types, &["d", "m"], &vals);
    // Not when a consumer is a `reduce` (its accumulator is an element of
    // `P` too).
    never_fires(
        &[
            "let P = map (x. let s = exp(reduce (+) 0 x) in (map (a. a * s) x, s)) X in \
             (reduce (g, h. (map2 (+) g.0 h.0, g.1 + h.1)) z P, map (g. g.1) P)",
        ],
        Rule::RebuiltComponent,
    );
}

#[test]
fn a_reduce_over_the_tuples_keeps_every_component() {
    // The reduce's accumulator is a tuple of the map's too: `-1.0 * e`,
    // derived from `e`, stays a component.
    let input = "let P = map (v. let e = exp(v) in (-1.0 * e, e)) X in \
                 (reduce (g, h. (g.0 + h.0, g.1 + h.1)) (0, 0) P, map (h. h.1 + 1) P)";
    let (out, stats) = simp(&term(input));
    assert_eq!(
        stats.count(Rule::DerivedComponent),
        0,
        "{out}\nfired: {stats}"
    );
    let types = typed(&[("X", "[R; n]")]);
    let vals = values(&[("X", Value::reals(&[1.0, -2.0, 0.25]))]);
    assert_same_meaning(&term(input), &out, &types, &["n"], &vals);
}

#[test]
fn a_layers_weight_cotangent_is_rebuilt_from_a_real_per_unit() {
    // A row's cotangent of a layer's weights, `map2 (g, a. map (c. c *
    // g.0 * a) x) D v`, is an `h × d` array per row; it sits in a tuple
    // nested in the row's value, which the fold reads beside the errors'
    // cotangents. Stored, it is `map (g. g.0) D`, `h` reals per row, and
    // the fold rebuilds the array from them and the row of `X`.
    let input = "let P = map (x. let D = map2 (row, bias. let t = tanh(reduce (+) 0 (map2 (*) row x) + bias) in (1 - t * t, t)) W b in \
                   (reduce (+) 0 (map2 (g, a. g.1 * a) D v), \
                    (map2 (g, a. map (c. c * g.0 * a) x) D v, map2 (g, a. g.0 * a) D v))) X in \
                 (map (q. q.0) P, \
                  foldl (acc, q. (map2 (r, s. map2 (+) r (map (c. c * q.1) s)) acc.0 q.0.0, \
                                  map2 (+) acc.1 (map (c. c * q.1) q.0.1))) \
                        (W, b) (map2 (a, e. (a, e)) (map (g. g.1) P) z))";
    let (out, stats) = simp(&term(input));
    assert!(stats.count(Rule::RebuiltComponent) > 0, "fired: {stats}");
    // What the rows' map stores is reals per unit: the products with the
    // row are computed in the fold only.
    let ExprKind::Let { value, body, .. } = &out.kind else {
        panic!("{out}")
    };
    assert!(!value.to_string().contains("map (c"), "{out}");
    assert!(body.to_string().contains("map (c"), "{out}");
    let types = typed(&[
        ("v", "[R; h]"),
        ("b", "[R; h]"),
        ("W", "[[R; d]; h]"),
        ("X", "[[R; d]; m]"),
        ("z", "[R; m]"),
    ]);
    let vals = values(&[
        ("v", Value::reals(&[0.5, -1.25])),
        ("b", Value::reals(&[0.1, -0.2])),
        ("W", two_rows()),
        ("X", two_rows()),
        ("z", Value::reals(&[0.75, -3.0])),
    ]);
    assert_same_meaning(&term(input), &out, &types, &["d", "h", "m"], &vals);
}

// ---- Sibling maps

#[test]
fn a_sibling_map_becomes_a_component_of_the_stored_one() {
    // The primal's map and the map of partial derivatives both compute
    // `w · x` per row: one loop over `X` and `Y` computes it once.
    let input =
        "let P = map2 (x, y. let t = reduce (+) 0 (map2 (*) w x) in (t * y, exp(t))) X Y in \
                 (reduce (+) 0 (map2 (x, y. log(1 + exp(reduce (+) 0 (map2 (*) w x))) * y) X Y), \
                  map (g. g.0) P, map (g. g.1 + 1) P)";
    let (out, stats) = simp(&term(input));
    assert!(stats.count(Rule::MapMerge) > 0, "fired: {stats}");
    let text = out.to_string();
    assert_eq!(text.matches("map2 (*) w").count(), 1, "{text}");
    assert_eq!(count_prim(&out, Prim::Exp), 1, "{text}");
    let types = typed(&[("w", "[R; d]"), ("X", "[[R; d]; m]"), ("Y", "[R; m]")]);
    let vals = values(&[
        ("w", Value::reals(&[1.0, -2.0, 0.25])),
        ("X", two_rows()),
        ("Y", Value::reals(&[1.0, -1.0])),
    ]);
    assert_same_meaning(&term(input), &out, &types, &["d", "m"], &vals);
    // A map whose elements are not tuples becomes the pairs of its old
    // element and the sibling's.
    let input = "let H = map (x. tanh(reduce (+) 0 x)) X in \
                 let D = map (x. 1 - tanh(reduce (+) 0 x) * tanh(reduce (+) 0 x)) X in \
                 (map2 (*) H D, reduce (+) 0 D)";
    let (out, stats) = simp(&term(input));
    assert!(stats.count(Rule::MapMerge) > 0, "fired: {stats}");
    assert_eq!(count_prim(&out, Prim::Tanh), 1, "{out}");
    let types = typed(&[("X", "[[R; d]; m]")]);
    let vals = values(&[(
        "X",
        Value::Array(vec![Value::reals(&[0.5, 1.5]), Value::reals(&[2.0, -3.0])].into()),
    )]);
    assert_same_meaning(&term(input), &out, &types, &["d", "m"], &vals);
    // The work shared may be the value of one of the stored map's `let`s
    // written out: `sin(a * c)` where the partial derivatives bind
    // `x = a * c` and read `sin(x)` (a sum of a map's gradient).
    let input = "let t = map (a. sin(a * c) * a) A in \
                 let P = map (a. let x = a * c in let d = cos(x) * a in (a * d, sin(x) + c * d)) A in \
                 (reduce (+) 0 t, map (g. g.1) P, reduce (+) 0 (map (g. g.0) P))";
    let (out, stats) = simp(&term(input));
    assert!(stats.count(Rule::MapMerge) > 0, "fired: {stats}");
    assert_eq!(count_prim(&out, Prim::Sin), 1, "{out}");
    let types = typed(&[("A", "[R; n]"), ("c", "R")]);
    let vals = values(&[
        ("A", Value::reals(&[0.5, -1.0, 2.0])),
        ("c", Value::Real(0.7)),
    ]);
    assert_same_meaning(&term(input), &out, &types, &["n"], &vals);
    // A map whose tuples are also read whole (returned) keeps them as
    // they are: it stores the pairs of its old element and the sibling's.
    let input = "let P = map (x. (exp(x), x)) A in \
                 (P, map (p. (p.1, p.0)) P, map (x. exp(x) + 1) A)";
    let (out, stats) = simp(&term(input));
    assert!(stats.count(Rule::MapMerge) > 0, "fired: {stats}");
    assert_eq!(count_prim(&out, Prim::Exp), 1, "{out}");
    let types = typed(&[("A", "[R; n]")]);
    let vals = values(&[("A", Value::reals(&[0.5, -1.0, 2.0]))]);
    assert_same_meaning(&term(input), &out, &types, &["n"], &vals);
    // Not a sibling: under a lambda (computed per element of another
    // loop), in a branch, mentioning a name bound after `P`, able to fail
    // (an index), over other arrays, or sharing no costly work.
    never_fires(
        &[
            "let P = map (x. (exp(x), x)) A in \
             (map (g. g.0) P, map (v. reduce (+) 0 (map (x. exp(x) * v) A)) B)",
            "let P = map (x. (exp(x), x)) A in \
             (map (g. g.0) P, if c > 0 then map (x. exp(x) + 1) A else A)",
            "let P = map (x. (exp(x), x)) A in let k = reduce (+) 0 (map (g. g.1) P) in \
             (map (g. g.0) P, map (x. exp(x) * k) A)",
            "let P = map (x. (exp(x), x)) A in (map (g. g.0) P, map (x. exp(x) * B[0]) A)",
            "let P = map (x. (exp(x), x)) A in (map (g. g.0) P, map (x. exp(x)) B)",
            "let P = map (x. (exp(x), x)) A in (map (g. g.0) P, map (x. x * 2) A)",
        ],
        Rule::MapMerge,
    );
}

#[test]
fn a_component_read_only_where_nothing_is_demanded_is_removed_in_one_pass() {
    // `x.1` is read only by the accumulator's second component, which no
    // result reads: the one liveness analysis finds `x.1` undemanded, so
    // the first `demand` pass removes the component (and `sin`) and zeroes
    // the product that read it.
    let input = "let x = (if c > 0 then (a * b, sin(a)) else (a, b)) in \
                 let s = foldl (acc, e. (acc.0 + e, acc.1 * x.1)) (0, 1) A in \
                 s.0 + x.0";
    let (after, report) =
        gradlift_ad::simplify::run(term(input), &Options::default(), &[], None, Some("demand"))
            .unwrap();
    assert_eq!(report.stats.count(Rule::DeadComponent), 1, "{after}");
    assert_eq!(count_prim(&after, Prim::Sin), 0, "{after}");
    let (out, stats) = simp(&term(input));
    assert!(stats.count(Rule::DeadComponent) >= 1, "fired: {stats}");
    assert_eq!(count_prim(&out, Prim::Sin), 0, "{out}");
    let types = typed(&[("a", "R"), ("b", "R"), ("c", "R"), ("A", "[R; n]")]);
    for c in [1.0, -1.0] {
        let vals = values(&[
            ("a", Value::Real(0.5)),
            ("b", Value::Real(-2.0)),
            ("c", Value::Real(c)),
            ("A", Value::reals(&[1.0, 2.0, 4.0])),
        ]);
        assert_same_meaning(&term(input), &out, &types, &["n"], &vals);
    }
}

#[test]
fn a_merged_map_is_read_through_a_lambda_that_shadows_nothing() {
    // The uses of `H` read `map (g. g.0) H` once `D` is merged into it:
    // inside a lambda binding `g` itself, that parameter must be another
    // name (found by the `commands` fuzz target: the verifier after
    // `merge` refused the shadowing binder).
    let input = "map (g. let H = map (x. tanh(reduce (+) 0 x) * g) X in \
                 let D = map (x. 1 - tanh(reduce (+) 0 x) * tanh(reduce (+) 0 x)) X in \
                 reduce (+) 0 (map2 (*) H D) + reduce (+) 0 D + H[0]) B";
    let types = typed(&[("X", "[[R; d]; m]"), ("B", "[R; k]")]);
    let ty = type_of(&term(input), &types, &["d", "m", "k"]);
    let sizes: Vec<gradlift_lang::Name> = ["d", "m", "k"].iter().map(|s| (*s).into()).collect();
    let check = gradlift_ad::simplify::Check {
        context: &types,
        size_vars: &sizes,
        ty: &ty,
    };
    let (out, report) =
        gradlift_ad::simplify::run(term(input), &Options::default(), &[], Some(&check), None)
            .unwrap();
    assert!(
        report.stats.count(Rule::MapMerge) > 0,
        "fired: {}",
        report.stats
    );
    assert_eq!(count_prim(&out, Prim::Tanh), 1, "{out}");
    let vals = values(&[("X", two_rows()), ("B", Value::reals(&[0.5, -2.0]))]);
    assert_same_meaning(&term(input), &out, &types, &["d", "m", "k"], &vals);
}

/// A 2 × 3 matrix of reals.
fn two_rows() -> Value {
    Value::Array(
        vec![
            Value::reals(&[0.5, 1.5, -1.0]),
            Value::reals(&[2.0, 0.0, 3.0]),
        ]
        .into(),
    )
}

// ---- Ranges and their maps

#[test]
fn a_cheap_map_of_a_range_is_substituted_at_its_uses() {
    // The cotangent of a scan's first state: a one-hot map of a range,
    // read at index 0 and shifted. Both uses get their own copy, which the
    // native backend computes where it reads it.
    let input = "let Q = map (i. if i == 0 then g else 0) iota(m + 1) in \
                 (Q[0], map2 (+) (shift1L Q) X)";
    let types = typed(&[("g", "R"), ("X", "[R; m]")]);
    let (out, stats) = simp(&term_in(input, &types, &["m"]));
    assert!(stats.count(Rule::InlineIota) > 0, "fired: {stats}");
    assert!(!out.to_string().contains("let Q"), "{out}");
    let vals = values(&[
        ("g", Value::Real(2.5)),
        ("X", Value::reals(&[1.0, -2.0, 0.25])),
        ("m", Value::Int(3)),
    ]);
    assert_same_meaning(&term_in(input, &types, &["m"]), &out, &types, &["m"], &vals);
    // A body that can fail (an index) is stored once.
    let (out, _) = simp(&term_in(
        "let Q = map (i. X[1] * i) iota(m + 1) in (Q[0], map2 (+) (shift1L Q) X)",
        &types,
        &["m"],
    ));
    assert!(out.to_string().contains("let Q"), "{out}");
}

// ---- Accumulators that stay zero

#[test]
fn a_scan_started_and_fed_with_structural_zeros_stays_zero() {
    // The reverse of a scan whose states have no cotangent: multiplying
    // the zeros by the partial derivatives would make 0 * inf = nan.
    let input = "scanl ((g, h), (b, z). (z + b * g, g * b / b)) (zero, zero) \
                 (map (b. (b, zero)) B)";
    let (out, stats) = simp(&term(input));
    assert_eq!(stats.count(Rule::ZeroCarry), 1, "fired: {stats}");
    assert_eq!(
        flat(&out.to_string()),
        flat("replicate(len(B) + 1, (0.0, 0.0))")
    );
    rewrites(
        "foldl (g, b. if b > 0 then -(g * b) else zero) zero B + y",
        "y",
        Rule::ZeroCarry,
    );
    rewrites(
        "scanr (g, b. b * g) zero (shift1L B)",
        "replicate(len(B), 0.0)",
        Rule::ZeroCarry,
    );
    let types = typed(&[("B", "[R; n]")]);
    // (The rule may change the sign of a zero: here no element is negative.)
    let vals = values(&[("B", Value::reals(&[1.0, 2.0, 0.25]))]);
    let before = term(input);
    let (after, _) = simp(&before);
    assert_same_meaning(&before, &after, &types, &["n"], &vals);
}

#[test]
fn an_accumulator_that_can_leave_zero_is_kept() {
    never_fires(
        &[
            // The element is added in.
            "scanl (g, b. g + b) zero B",
            // A constant is added.
            "foldl (g, b. g * b + 1) zero B",
            // A zero the user wrote: 0 * inf is nan.
            "foldl (g, b. g * b) 0 B",
            // One branch leaves zero.
            "foldl (g, b. if b > 0 then g * b else b) zero B",
            // The element's zero is only in some of the array's elements.
            "scanl (g, p. g * p.0 + p.1) zero (map (b. (b, if b > 0 then zero else b)) B)",
        ],
        Rule::ZeroCarry,
    );
}

#[test]
fn lengths_are_read_from_the_array_an_operation_ranges_over() {
    rewrites(
        "real(len(map (x. x * 2) (shift1L X))) + y",
        "real(len(X) - 1) + y",
        Rule::LenOfOp,
    );
    rewrites(
        "len(scanl (+) 0 (map2 (+) X Y))",
        "len(X) + 1",
        Rule::LenOfOp,
    );
}

#[test]
fn a_map_written_in_place_builds_only_the_components_its_consumer_reads() {
    rewrites(
        "foldl (s, g. s + g.1) 0 (map2 (a, b. (a * b, a - b, exp(a))) A B)",
        "foldl (s, g. s + g) 0.0 (map2 (a, b. a - b) A B)",
        Rule::DeadElementComponent,
    );
    rewrites(
        "scanl (s, g. s + g.2 * g.0) 0 (map (a. let t = a * a in (t, sin(a), t + 1)) A)",
        "scanl (s, g. s + g.1 * g.0) 0.0 (map (a. let t = a * a in (t, t + 1.0)) A)",
        Rule::DeadElementComponent,
    );
    // The parameter used whole: nothing to remove.
    let (_, stats) = simp(&term("map (g. (g, g.0)) (map (a. (a, sin(a))) A)"));
    assert_eq!(stats.count(Rule::DeadElementComponent), 0, "fired: {stats}");
    // A `reduce`'s elements have its accumulator's type: kept whole.
    let input = "reduce (s, g. (s.0 + g.0, s.1)) (0, 0) (map2 (a, b. (a * b, sin(a))) A A)";
    let (out, stats) = simp(&term(input));
    assert_eq!(stats.count(Rule::DeadElementComponent), 0, "fired: {stats}");
    let types = typed(&[("A", "[R; n]")]);
    let vals = values(&[("A", Value::reals(&[1.0, -2.0]))]);
    assert_same_meaning(&term(input), &out, &types, &["n"], &vals);
}

#[test]
fn a_cheap_map_of_a_variable_is_computed_where_it_is_read() {
    // A scaled cotangent read by two loops: each computes it.
    rewrites(
        "let t = map (z. h * z) g in (map2 (+) t A, reduce (+) 0 t)",
        "(map2 (+) (map (z. h * z) g) A, reduce (+) 0.0 (map (z. h * z) g))",
        Rule::InlineCheapMap,
    );
    never_fires(
        &[
            // A transcendental function: stored once, not recomputed.
            "let t = map (z. exp(z)) g in (map2 (+) t A, reduce (+) 0 t)",
            // Three operations.
            "let t = map (z. h * z * z + 1) g in (map2 (+) t A, reduce (+) 0 t)",
            // A use inside a lambda would compute the whole map per element.
            "let t = map (z. h * z) g in map (a. reduce (+) a t) A",
        ],
        Rule::InlineCheapMap,
    );
}

#[test]
fn a_component_constant_in_every_tuple_a_map_builds_is_read_as_the_constant() {
    // The tangent of a one-hot cotangent: zero in both branches.
    let (out, stats) = simp(&structural(&term(
        "foldl (s, q. s + q.0 * q.1) 0 (map2 (i, g. if i == k then (g, zero) else (0, zero)) I G)",
    )));
    assert_eq!(stats.count(Rule::ConstComponent), 1, "fired: {stats}");
    assert_eq!(
        flat(&out.to_string()),
        flat("foldl (s, q. s) 0.0 (map2 (i, g. if i == k then g else 0.0) I G)")
    );
    // Different constants in the two branches: kept.
    let (_, stats) = simp(&term(
        "foldl (s, q. s + q.0 * q.1) 0 (map2 (i, g. if i == k then (g, 2) else (0, 3)) I G)",
    ));
    assert_eq!(stats.count(Rule::ConstComponent), 0, "fired: {stats}");
}

#[test]
fn a_one_hot_scaling_of_rows_becomes_a_branch() {
    // The reverse of `min` over rows, added to a running sum of rows: only
    // the chosen row is built and added; the others are the sum's rows.
    let input = "map2 (s, y. map2 (+) s y) S \
                 (map2 (g, z. map (x. x * z) g) (map (c. map2 (a, b. a - b) c P) C) \
                 (map (i. if i == k then 1 else zero) I))";
    let (out, stats) = simp(&structural(&term(input)));
    for rule in [Rule::Map2ArgFusion, Rule::ZeroSplit, Rule::AddIntoIf] {
        assert!(stats.count(rule) > 0, "{rule} did not fire: {stats}");
    }
    assert_eq!(
        flat(&out.to_string()),
        flat("map2 (s, y. if y.1 == k then map2 (+) s (map2 (-) y.0 P) else s) S (map2 (a, b. (a, b)) C I)")
    );
    let types = typed(&[
        ("S", "[[R; d]; n]"),
        ("C", "[[R; d]; n]"),
        ("P", "[R; d]"),
        ("I", "[R; n]"),
        ("k", "R"),
    ]);
    let rows =
        |x: f64| Value::Array(vec![Value::reals(&[x, 2.0 * x]), Value::reals(&[-x, 0.5])].into());
    let vals = values(&[
        ("S", rows(1.0)),
        ("C", rows(3.0)),
        ("P", Value::reals(&[0.25, -1.0])),
        ("I", Value::reals(&[0.0, 1.0])),
        ("k", Value::Real(1.0)),
        ("zero", Value::Real(0.0)),
    ]);
    assert_same_meaning(&structural(&term(input)), &out, &types, &["n", "d"], &vals);
    // A user's zero (not structural) is a value like any other: no split.
    let (_, stats) = simp(&term(&input.replace("else zero", "else 0")));
    assert_eq!(stats.count(Rule::ZeroSplit), 0, "fired: {stats}");
}

#[test]
fn reals_no_result_reads_are_not_computed() {
    let types = typed(&[("A", "[R; n]")]);
    let vals = values(&[
        ("A", Value::reals(&[1.5, -2.0, 0.25, 3.0])),
        ("n", Value::Int(4)),
    ]);
    // Read through array elements and a loop accumulator: the search for
    // the smallest square carries each element's pair, but only the index
    // is read; the pairs' second components are never computed.
    let inputs = [
        "let ext = foldl ((m, j), (i, x). if x.0 < m.0 then (x, i) else (m, j)) ((inf, 0), 0)
             (map2 (i, c. (i, c)) iota(n) (map (a. (a * a, sin(a) * a)) A)) in ext.1",
        // A `reduce` of pairs of which the result reads one.
        "(reduce (s, g. (s.0 + g.0, s.1 + g.1)) (0, 0) (map (a. (a * a, exp(a) * 2)) A)).0",
        // The states of a scan, of which one component is read.
        "map (s. s.0) (scanl (s, a. (s.0 + a, s.1 * cos(a))) (0, 1) A)",
        // A stored map whose elements' second components no one reads.
        "let t = map (a. (a * 2, tanh(a) * a)) A in (len(t), map (p. p.0 + 1) t)",
    ];
    for input in inputs {
        let (out, stats) = simp(&term_in(input, &types, &["n"]));
        assert!(stats.count(Rule::DeadLeaf) > 0, "{input}: {stats}");
        for f in ["sin", "exp", "cos", "tanh"] {
            assert!(!out.to_string().contains(f), "{input} ⇝ {out}");
        }
        assert_same_meaning(&term_in(input, &types, &["n"]), &out, &types, &["n"], &vals);
    }
    // Read in the step's condition, by the step for a component that is
    // read, or whole: kept.
    never_fires(
        &[
            "map (s. s.0) (scanl (s, a. (s.0 + s.1, s.1 * cos(a))) (0, 1) A)",
            "let ext = foldl (m, x. if x.1 < m.1 then x else m) (inf, inf) (map (a. (a * a, a * 3)) A) in ext.0",
            "let t = map (a. (a * 2, a * 3)) A in (t, len(t))",
        ],
        Rule::DeadLeaf,
    );
}

#[test]
fn folds_over_one_array_are_merged_and_share_their_work() {
    // Two sums over the rows of A, each computing sin of the row's first
    // element: one loop, one sin per row.
    let input = "(foldl (a, x. a + sin(x[0]) * 2) 0 A, foldl (b, y. b * sin(y[0])) 1 A)";
    let (out, stats) = simp(&term(input));
    assert!(stats.count(Rule::FoldMerge) > 0, "fired: {stats}\n{out}");
    let text = out.to_string();
    assert_eq!(text.matches("foldl").count(), 1, "{text}");
    assert_eq!(text.matches("sin(").count(), 1, "{text}");
    // A fold bound by a `let` merges with one of the result.
    let input = "let r = foldl (a, x. a + x[0]) 0 A in (r * 2, r, foldl (b, y. b + y[1]) 0 A)";
    let (out, stats) = simp(&term(input));
    assert!(stats.count(Rule::FoldMerge) > 0, "fired: {stats}\n{out}");
    assert_eq!(out.to_string().matches("foldl").count(), 1, "{out}");
    never_fires(
        &[
            // The second fold reads the first's result.
            "let r = foldl (a, x. a + x[0]) 0 A in foldl (b, y. b + r * y[0]) 0 A",
            // Different arrays.
            "(foldl (a, x. a + x[0]) 0 A, foldl (b, y. b + y[0]) 0 B)",
            // A sum in lanes is not a left fold.
            "(reduce (+) 0 (map (x. x[0]) A), foldl (b, y. b + y[0]) 0 A)",
        ],
        Rule::FoldMerge,
    );
}

#[test]
fn folds_in_the_arguments_of_array_operations_are_merged() {
    // The shape reverse mode leaves: each parameter's sum over the rows is
    // an argument of the map that adds another term, in the result.
    let input =
        "(map2 (u, v. u + v) B (foldl (a, x. map2 (+) a (replicate(n, sin(x[0]) * x[1]))) Z A),
                  foldl (b, y. b + sin(y[0])) 1 A,
                  (map (w. w * 2) (foldl (c, z. map2 (*) c z) Z A))[0])";
    let types = typed(&[("A", "[[R; n]; m]"), ("B", "[R; n]"), ("Z", "[R; n]")]);
    let before = term_in(input, &types, &["n", "m"]);
    let (out, stats) = simp(&before);
    assert!(stats.count(Rule::FoldMerge) > 0, "fired: {stats}\n{out}");
    let text = out.to_string();
    assert_eq!(text.matches("foldl").count(), 1, "{text}");
    // Each row's sine once.
    assert_eq!(text.matches("sin(").count(), 1, "{text}");
    let vals = values(&[
        (
            "A",
            Value::Array(
                vec![
                    Value::reals(&[0.5, -1.25]),
                    Value::reals(&[2.0, 0.75]),
                    Value::reals(&[-0.3, 1.5]),
                ]
                .into(),
            ),
        ),
        ("B", Value::reals(&[1.0, -2.0])),
        ("Z", Value::reals(&[0.25, 1.0])),
        ("n", Value::Int(2)),
        ("m", Value::Int(3)),
    ]);
    assert_same_meaning(&before, &out, &types, &["n", "m"], &vals);
    never_fires(
        &[
            // In a branch: computed only when the condition holds.
            "(if B[0] > 0 then foldl (a, x. a + x[0]) 0 A else 0, foldl (b, y. b + y[1]) 0 A)",
            // One fold the start of the other.
            "foldl (a, x. a + x[0]) (foldl (b, y. b + y[1]) 0 A) A",
        ],
        Rule::FoldMerge,
    );
}
