//! Helpers shared by the simplifier's tests: terms from text (with
//! structural zeros), typing and evaluation of single terms, counting of
//! constructs.
#![allow(dead_code)]

use gradlift_ad::simplify::{is_first_order, simplify_with_stats, Options, Rule, Stats};
use gradlift_lang::deep::guard;
use gradlift_lang::syntax::*;
use gradlift_lang::types::check_expr;
use gradlift_lang::{check_source, interp, parse_expr, parse_type, Value};

/// The name that stands for a structural zero in test texts.
pub const ZERO: &str = "zero";

/// `e` with every variable `zero` replaced by a structural zero.
pub fn structural(e: &Expr) -> Expr {
    guard(|| match &e.kind {
        ExprKind::Var(n) if &**n == ZERO => Expr::structural_zero(),
        _ => e.map_children(&mut |c| structural(c)),
    })
}

/// Parses `text`; the free variable `zero` is a structural zero, and
/// literal whole numbers are reals (integers where they count).
pub fn term(text: &str) -> Expr {
    let e = parse_expr(text).unwrap_or_else(|err| panic!("{err}\nin: {text}"));
    structural(&gradlift_lang::types::literals_as_reals(&e))
}

/// Parses `text` and elaborates it in a typing context (its literal whole
/// numbers integers where integers are needed); `zero` is a structural
/// zero.
pub fn term_in(text: &str, vars: &[(Name, Type)], sizes: &[&str]) -> Expr {
    let e = parse_expr(text).unwrap_or_else(|err| panic!("{err}\nin: {text}"));
    let sizes: Vec<Name> = sizes.iter().map(|s| Name::from(*s)).collect();
    let mut vars = vars.to_vec();
    vars.push((Name::from(ZERO), Type::Real));
    let (e, _) = gradlift_lang::types::elaborate_expr(&vars, &sizes, &e)
        .unwrap_or_else(|err| panic!("{err}\nin: {text}"));
    structural(&e)
}

/// Variables with types, from `name: type` pairs.
pub fn typed(vars: &[(&str, &str)]) -> Vec<(Name, Type)> {
    vars.iter()
        .map(|(n, t)| (Name::from(*n), parse_type(t).expect("a type")))
        .collect()
}

/// Simplifies with the default options, checking the result is first order.
pub fn simp(e: &Expr) -> (Expr, Stats) {
    simp_with(e, &Options::default())
}

/// Simplifies with `opts`, checking the result is first order.
pub fn simp_with(e: &Expr, opts: &Options) -> (Expr, Stats) {
    let (out, stats) = simplify_with_stats(e, opts).unwrap_or_else(|err| panic!("{err}\nin: {e}"));
    if let Err((_, message)) = is_first_order(&out) {
        panic!("not first order: {message}\n{out}");
    }
    (out, stats)
}

/// The type of `e` in the context `vars` and sizes `sizes`.
pub fn type_of(e: &Expr, vars: &[(Name, Type)], sizes: &[&str]) -> Type {
    let sizes: Vec<Name> = sizes.iter().map(|s| Name::from(*s)).collect();
    check_expr(vars, &sizes, e).unwrap_or_else(|err| panic!("{err}\nin: {e}"))
}

/// The value of `e` with `vars` bound.
pub fn eval(e: &Expr, vars: &[(Name, Value)]) -> Result<Value, interp::EvalError> {
    let empty = check_source("<none>", "").expect("the empty module");
    interp::eval_expr(&empty, vars, e)
}

/// Bindings from `name = value` pairs.
pub fn values(vars: &[(&str, Value)]) -> Vec<(Name, Value)> {
    vars.iter()
        .map(|(n, v)| (Name::from(*n), v.clone()))
        .collect()
}

/// Checks that `after` has the type of `before` and the same value,
/// bit for bit (NaN equal to NaN).
pub fn assert_same_meaning(
    before: &Expr,
    after: &Expr,
    types: &[(Name, Type)],
    sizes: &[&str],
    vals: &[(Name, Value)],
) {
    assert_eq!(type_of(before, types, sizes), type_of(after, types, sizes));
    let x = eval(before, vals).expect("the original evaluates");
    let y = eval(after, vals).expect("the simplified term evaluates");
    assert!(x.same(&y), "{x} ≠ {y}\nbefore: {before}\nafter: {after}");
}

/// How many nodes of `e` satisfy `pred`.
pub fn count(e: &Expr, pred: &dyn Fn(&Expr) -> bool) -> usize {
    guard(|| {
        let mut n = usize::from(pred(e));
        for c in e.children() {
            n += count(c, pred);
        }
        n
    })
}

/// How many applications of primitive `p` occur in `e`.
pub fn count_prim(e: &Expr, p: gradlift_lang::Prim) -> usize {
    count(e, &|x| matches!(&x.kind, ExprKind::Prim(q, _) if *q == p))
}

/// How many lambdas occur in `e`.
pub fn count_lambdas(e: &Expr) -> usize {
    count(e, &|x| matches!(x.kind, ExprKind::Lambda(..)))
}

pub fn flat(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Simplifies `input`, compares the printed result with `expected` (read
/// and printed again, whitespace aside) and checks that `rule` fired.
pub fn rewrites(input: &str, expected: &str, rule: Rule) {
    rewrites_with(input, expected, rule, &Options::default())
}

/// Simplifies each of `inputs` and checks that `rule` never fired.
pub fn never_fires(inputs: &[&str], rule: Rule) {
    for input in inputs {
        let (out, stats) = simp(&term(input));
        assert_eq!(stats.count(rule), 0, "{input} ⇝ {out}\nfired: {stats}");
    }
}

pub fn rewrites_with(input: &str, expected: &str, rule: Rule, opts: &Options) {
    let (out, stats) = simp_with(&term(input), opts);
    let want = term(expected).to_string();
    assert_eq!(
        flat(&out.to_string()),
        flat(&want),
        "input: {input}\nfired: {stats}"
    );
    assert!(
        stats.count(rule) > 0,
        "`{}` did not fire on {input}; fired: {stats}",
        rule.info().name
    );
}
