//! A fold that recomputes the elements of a map reads them instead (rule
//! `fold-reads-map`, not in the paper): first-order Target → first-order
//! Target, bit for bit the same values.
//!
//! Fold fusion turns the primal's `reduce (+) 0 (map (v. exp(v − a)) x)`
//! into `foldl (acc, v. acc + exp(v − a)) 0 x`, which stores nothing. The
//! reverse pass then needs the same `exp(v − a)` per element and builds
//! `let P = map (v. exp(v − a)) x` for it: each `exp` is computed twice.
//! Here, in a block of `let`s,
//!
//! ```text
//! let t = foldl (acc, v. F[E]) z X in … let P = map (v'. E') X in …
//! ```
//!
//! with `E` equal to `E'` (up to the names of binders, `v` for `v'`)
//! becomes
//!
//! ```text
//! let P = map (v'. E') X in let t = foldl (acc, v. F[v]) z P in …
//! ```
//!
//! when `E` calls a transcendental function (reading a stored element is
//! then cheaper than computing it again), `v` occurs in `F` only inside
//! `E`, `E'` cannot fail (constants, variables, primitives and `let`s, so
//! computing `P` earlier changes no error) and mentions nothing bound
//! between the two bindings, so `P` can move up. `t` then reads each
//! element `E` computed for `P`: the same operations on the same operands.
//!
//! Input and output: every binder has a name of its own (as after partial
//! evaluation).

use super::alpha::Alpha;
use super::rules::{Rule, Stats};
use super::term::*;
use gradlift_lang::deep::guard;
use gradlift_lang::syntax::*;
use std::sync::Arc;

/// Makes the folds of `e` read the maps that recompute their elements;
/// whether it changed any.
pub(super) fn run(e: Expr, stats: &mut Stats) -> (Expr, bool) {
    let mut changed = false;
    let e = each_block(e, &mut |bindings, _| {
        for t in 0..bindings.len() {
            if reuse(bindings, t) {
                stats.fire(Rule::FoldReadsMap);
                changed = true;
            }
        }
    });
    (e, changed)
}

/// Applies the rule to the fold bound at `bindings[t]`, with the first
/// map after it that fits; whether it did.
fn reuse(bindings: &mut Vec<Binding>, t: usize) -> bool {
    let ExprKind::ArrayOp(ArrayOp::Foldl(_), f, args) = &bindings[t].value.kind else {
        return false;
    };
    let (ExprKind::Lambda(params, fold_body), [_, array]) = (&f.kind, args.as_slice()) else {
        return false;
    };
    let (ExprKind::Var(x), [_, v]) = (&array.kind, params.as_slice()) else {
        return false;
    };
    let Pattern::Var(v, _) = &v.pat else {
        return false;
    };
    let mut between: Vec<Name> = Vec::new();
    for p in t + 1..bindings.len() {
        bindings[p - 1].pat.names(&mut between);
        let (Pattern::Var(..), Some((param, elem))) =
            (&bindings[p].pat, map_of(&bindings[p].value, x))
        else {
            continue;
        };
        if mentions(elem, &between) || !cannot_fail(elem) || !calls(elem) {
            continue;
        }
        let wanted = rename(elem.clone(), param, v);
        let mut body = (**fold_body).clone();
        if !replace_first(&mut body, &wanted, &var(v)) || count_var(&body, v) != 1 {
            continue;
        }
        // Rewrite the fold to read P, and bind P first.
        let Pattern::Var(p_name, _) = &bindings[p].pat else {
            unreachable!("matched above")
        };
        let p_name = p_name.clone();
        let ExprKind::ArrayOp(_, f, args) = &mut bindings[t].value.kind else {
            unreachable!("matched above")
        };
        let ExprKind::Lambda(_, fold_body) = &mut f.kind else {
            unreachable!("matched above")
        };
        *fold_body = Arc::new(body);
        args[1] = var(&p_name);
        let map = bindings.remove(p);
        bindings.insert(t, map);
        return true;
    }
    false
}

/// For `map (v'. E') X` over the variable `x`: `v'` and `E'`.
fn map_of<'a>(e: &'a Expr, x: &Name) -> Option<(&'a Name, &'a Expr)> {
    let ExprKind::ArrayOp(ArrayOp::Map, f, args) = &e.kind else {
        return None;
    };
    if !matches!(args.as_slice(), [a] if matches!(&a.kind, ExprKind::Var(n) if n == x)) {
        return None;
    }
    let ExprKind::Lambda(params, body) = &f.kind else {
        return None;
    };
    match params.as_slice() {
        [Param {
            pat: Pattern::Var(n, _),
            ..
        }] => Some((n, &**body)),
        _ => None,
    }
}

/// Whether evaluating `e` cannot raise an error: built from constants,
/// variables, primitives and `let`s of those.
fn cannot_fail(e: &Expr) -> bool {
    guard(|| match &e.kind {
        ExprKind::Const(_) | ExprKind::Int(_) | ExprKind::Var(_) => true,
        ExprKind::Prim(p, _) if p.can_fail() => false,
        ExprKind::Prim(_, args) => args.iter().all(cannot_fail),
        ExprKind::Let {
            pat, value, body, ..
        } => matches!(pat, Pattern::Var(..)) && cannot_fail(value) && cannot_fail(body),
        _ => false,
    })
}

/// Whether `e` calls a transcendental function (whose result is worth
/// storing rather than computing twice).
fn calls(e: &Expr) -> bool {
    guard(|| match &e.kind {
        ExprKind::Prim(p, args) => transcendental(*p) || args.iter().any(calls),
        _ => e.children().any(calls),
    })
}

/// `e` with the variable `from` renamed `to` (neither is bound in `e`).
pub(super) fn rename(e: Expr, from: &Name, to: &Name) -> Expr {
    guard(|| {
        if matches!(&e.kind, ExprKind::Var(n) if n == from) {
            return var(to);
        }
        map_children(e, &mut |c| rename(c, from, to))
    })
}

/// Replaces the first subterm of `e` equal to `wanted` (up to the names of
/// binders) by `by`; whether it found one.
pub(super) fn replace_first(e: &mut Expr, wanted: &Expr, by: &Expr) -> bool {
    guard(|| {
        if Alpha::new(false).eq(e, wanted) {
            *e = by.clone();
            return true;
        }
        super::term::children_mut(e)
            .into_iter()
            .any(|c| replace_first(c, wanted, by))
    })
}

/// How many times `e` mentions the variable `v`.
fn count_var(e: &Expr, v: &Name) -> usize {
    guard(|| match &e.kind {
        ExprKind::Var(n) => usize::from(n == v),
        _ => e.children().map(|c| count_var(c, v)).sum(),
    })
}
