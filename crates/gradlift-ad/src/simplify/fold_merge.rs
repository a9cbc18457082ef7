//! Fold merging (rule `fold-merge`, not in the paper): the folds of one
//! `let` block over the same array become one fold whose accumulator is
//! the tuple of theirs, so the next round's CSE computes what their steps
//! share once per element.
//!
//! Reverse mode sums the cotangent of each parameter read inside a `map`
//! over the map's elements, and `map-split` (split.rs) gives each such sum
//! its own copy of the map's body, so that the per-element partial
//! derivatives are never stored. A layer's gradient is then one fold per
//! parameter over the rows of the data, each computing the whole forward
//! pass of a row again: a classifier's weight and bias gradients ran its
//! forward pass five times. Merged, the fold computes each row's forward
//! pass once and updates every accumulator from it.
//!
//! Applies in a block `let b₁ in … let bₙ in body` to two or more folds
//! (`foldl` without a checkpoint schedule, or a `reduce` that is a left
//! fold — not one in lanes, `gradlift_lang::reduce_order`) with a lambda,
//! over α-equal arrays, each found in a binding's value or in `body` at a
//! position that is always evaluated when they are: through tuples,
//! projections, primitives' operands, array literals and indexing, the
//! arguments of array operations and builtins — not under a binder (a
//! `let` or a lambda), not in a branch of `if`, and not inside another
//! such fold. (Reverse mode leaves the sum over the rows of one
//! parameter's cotangent as an argument of the map that adds its prior's
//! terms: a GMM's are under `map2`s in the tuple the gradient returns.)
//! The merged fold is bound before the binding the first of them is in
//! (or before `body`), so every fold merged must read only names bound
//! before that point: none reads another's result. Each fold's
//! operations on reals are those it did, in the same order, so the value
//! is unchanged bit for bit; a fold that fails now fails before the
//! bindings it was moved ahead of, with the same error.
//!
//! ```text
//! let r = foldl (a, x. e₁) z₁ A in … (foldl (b, y. e₂) z₂ A, …)
//! ⇝ let m = foldl (s, q. (let a = s.0 in let x = q in e₁,
//!                          let b = s.1 in let y = q in e₂)) (z₁, z₂) A in
//!   let r = m.0 in … (m.1, …)
//! ```

use super::alpha::Alpha;
use super::names::Names;
use super::rules::{Rule, Stats};
use super::term::*;
use gradlift_lang::deep::guard;
use gradlift_lang::syntax::*;
use gradlift_lang::Span;
use std::sync::Arc;

/// Merges the folds of every block of `e`; whether it merged any.
pub(super) fn run(e: Expr, stats: &mut Stats) -> (Expr, bool) {
    let mut used = Vec::new();
    names_in(&e, &mut used);
    let mut names = Names::avoiding(used, 0);
    let mut changed = false;
    let top_is_block = matches!(e.kind, ExprKind::Let { .. });
    let mut e = each_block(e, &mut |bindings, body| {
        while merge_one(bindings, body, &mut names, stats) {
            changed = true;
        }
    });
    if !top_is_block {
        // A block without bindings: the tuple the function returns.
        let mut bindings = Vec::new();
        while merge_one(&mut bindings, &mut e, &mut names, stats) {
            changed = true;
        }
        e = wrap(bindings, e);
    }
    (e, changed)
}

/// Where a fold is in a block: in the value of binding `i`, or in the
/// body (`None`), by the path of [`strict_children`] positions to it.
#[derive(Clone, Debug)]
struct Site {
    binding: Option<usize>,
    path: Vec<usize>,
}

/// Merges one group of folds in the block; whether it found one.
fn merge_one(
    bindings: &mut Vec<Binding>,
    body: &mut Expr,
    names: &mut Names,
    stats: &mut Stats,
) -> bool {
    let mut sites: Vec<(Site, usize)> = Vec::new();
    let mut path = Vec::new();
    for (i, b) in bindings.iter().enumerate() {
        folds_in(&b.value, &mut path, &mut |path| {
            sites.push((
                Site {
                    binding: Some(i),
                    path,
                },
                i,
            ));
        });
    }
    folds_in(body, &mut path, &mut |path| {
        sites.push((
            Site {
                binding: None,
                path,
            },
            bindings.len(),
        ));
    });
    if sites.len() < 2 {
        return false;
    }
    // The names each binding of the block binds, for the point from which
    // a fold can be computed.
    let bound: Vec<Vec<Name>> = bindings
        .iter()
        .map(|b| {
            let mut out = Vec::new();
            b.pat.names(&mut out);
            out
        })
        .collect();
    let ready = |e: &Expr| -> usize {
        (0..bound.len())
            .rev()
            .find(|&j| mentions(e, &bound[j]))
            .map_or(0, |j| j + 1)
    };
    let folds: Vec<(&Expr, usize, usize)> = sites
        .iter()
        .map(|(site, at)| {
            let e = site_expr(bindings, body, site);
            (e, *at, ready(e))
        })
        .collect();
    for first in 0..folds.len() {
        let (e0, at0, ready0) = folds[first];
        if ready0 > at0 {
            continue;
        }
        let group: Vec<usize> = (first..folds.len())
            .filter(|&k| {
                let (e, _, ready) = folds[k];
                ready <= at0 && Alpha::new(false).eq(array_of(e), array_of(e0))
            })
            .collect();
        if group.len() < 2 {
            continue;
        }
        let members: Vec<Site> = group.iter().map(|&k| sites[k].0.clone()).collect();
        merge(bindings, body, &members, at0, names);
        stats.fire(Rule::FoldMerge);
        return true;
    }
    false
}

/// A fold that may be merged: `foldl` without a schedule or a `reduce`
/// folded from the left, with a lambda of two parameters.
fn mergeable(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::ArrayOp(op @ (ArrayOp::Foldl(None) | ArrayOp::Reduce), f, args) => {
            let lambda = matches!(&f.kind, ExprKind::Lambda(ps, _) if ps.len() == 2);
            let lanes =
                *op == ArrayOp::Reduce && gradlift_lang::reduce_order::lane_prim(f).is_some();
            lambda && !lanes && args.len() == 2
        }
        _ => false,
    }
}

/// The mergeable folds of `e` at positions always evaluated with it (see
/// the module's doc), by path; not those inside another.
fn folds_in(e: &Expr, path: &mut Vec<usize>, found: &mut dyn FnMut(Vec<usize>)) {
    guard(|| {
        if mergeable(e) {
            found(path.clone());
            return;
        }
        for (k, c) in strict_children(e).into_iter().enumerate() {
            path.push(k);
            folds_in(c, path, found);
            path.pop();
        }
    })
}

/// The sub-terms of `e` evaluated whenever `e` is, outside any binder:
/// the positions [`folds_in`] looks through, in the order
/// [`strict_children_mut`] gives them.
fn strict_children(e: &Expr) -> Vec<&Expr> {
    match &e.kind {
        ExprKind::Tuple(xs) | ExprKind::ArrayLit(xs) | ExprKind::Prim(_, xs) => xs.iter().collect(),
        ExprKind::Builtin(_, xs) | ExprKind::ArrayOp(_, _, xs) => xs.iter().collect(),
        ExprKind::Proj(x, _) | ExprKind::Index(x, _) => vec![&**x],
        _ => Vec::new(),
    }
}

/// [`strict_children`], mutable.
fn strict_children_mut(e: &mut Expr) -> Vec<&mut Expr> {
    match &mut e.kind {
        ExprKind::Tuple(xs) | ExprKind::ArrayLit(xs) | ExprKind::Prim(_, xs) => {
            xs.iter_mut().collect()
        }
        ExprKind::Builtin(_, xs) | ExprKind::ArrayOp(_, _, xs) => xs.iter_mut().collect(),
        ExprKind::Proj(x, _) | ExprKind::Index(x, _) => vec![&mut **x],
        _ => Vec::new(),
    }
}

fn site_expr<'a>(bindings: &'a [Binding], body: &'a Expr, site: &Site) -> &'a Expr {
    let root = site.binding.map_or(body, |i| &bindings[i].value);
    site.path
        .iter()
        .fold(root, |e, &k| strict_children(e).swap_remove(k))
}

fn site_mut<'a>(bindings: &'a mut [Binding], body: &'a mut Expr, site: &Site) -> &'a mut Expr {
    let root = match site.binding {
        Some(i) => &mut bindings[i].value,
        None => body,
    };
    site.path
        .iter()
        .fold(root, |e, &k| strict_children_mut(e).swap_remove(k))
}

fn array_of(fold: &Expr) -> &Expr {
    match &fold.kind {
        ExprKind::ArrayOp(_, _, args) => &args[1],
        _ => unreachable!("a fold"),
    }
}

/// Replaces the folds at `members` by components of one fold, bound before
/// binding `at` (or before the body).
fn merge(
    bindings: &mut Vec<Binding>,
    body: &mut Expr,
    members: &[Site],
    at: usize,
    names: &mut Names,
) {
    let merged = names.fresh("folds");
    let (accs, q) = (names.fresh("accs"), names.fresh("q"));
    let mut starts = Vec::new();
    let mut steps = Vec::new();
    let mut array = None;
    for (k, site) in members.iter().enumerate() {
        let slot = site_mut(bindings, body, site);
        let projection = mk(ExprKind::Proj(Box::new(var(&merged)), k));
        let fold = std::mem::replace(slot, projection);
        let ExprKind::ArrayOp(_, f, mut args) = into_kind(fold) else {
            unreachable!("a fold")
        };
        let a = args.pop().expect("a fold's array");
        let z = args.pop().expect("a fold's start");
        array.get_or_insert(a);
        starts.push(z);
        let ExprKind::Lambda(params, step) = into_kind(*f) else {
            unreachable!("a fold's lambda")
        };
        let mut params = params.into_iter();
        let (acc, elem) = (params.next().expect("two"), params.next().expect("two"));
        // let acc = accs.k in let elem = q in step
        steps.push(wrap(
            vec![
                Binding {
                    pat: acc.pat,
                    value: mk(ExprKind::Proj(Box::new(var(&accs)), k)),
                },
                Binding {
                    pat: elem.pat,
                    value: var(&q),
                },
            ],
            unshare(step),
        ));
    }
    let param = |n: &Name| Param {
        pat: Pattern::Var(n.clone(), Span::DUMMY),
        ty: None,
    };
    let lambda = mk(ExprKind::Lambda(
        vec![param(&accs), param(&q)],
        Arc::new(mk(ExprKind::Tuple(steps))),
    ));
    let fold = mk(ExprKind::ArrayOp(
        ArrayOp::Foldl(None),
        Box::new(lambda),
        vec![
            mk(ExprKind::Tuple(starts)),
            array.expect("two folds or more"),
        ],
    ));
    bindings.insert(
        at,
        Binding {
            pat: Pattern::Var(merged, Span::DUMMY),
            value: fold,
        },
    );
}
