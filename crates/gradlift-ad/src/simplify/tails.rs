//! Tuple tails: the tuples at the ends of a value's `let` chains and `if`
//! branches, and a binder of such a value used only by projections — what
//! the passes that remove or rewrite components (`demand`, `prune`,
//! `merge`, `split`) share. Removing component `i` of every tail and
//! renumbering every projection of the binder keeps the term well-typed.

use super::term::{children_mut, into_kind};
use gradlift_lang::deep::guard;
use gradlift_lang::syntax::*;
use gradlift_lang::Span;

/// The number of components of every tail of `e`, when every tail is a
/// tuple literal (of the same length).
pub(super) fn tail_arity(e: &Expr) -> Option<usize> {
    guard(|| match &e.kind {
        ExprKind::Tuple(es) => Some(es.len()),
        ExprKind::Let { body, .. } => tail_arity(body),
        ExprKind::If(_, t, f) => {
            let k = tail_arity(t)?;
            (tail_arity(f)? == k).then_some(k)
        }
        _ => None,
    })
}

/// `e` with only the components `keep` of its tails (a single component
/// is not a tuple).
pub(super) fn keep_components(e: Expr, keep: &[bool]) -> Expr {
    map_tails(e, &mut |es, span| {
        let mut kept: Vec<Expr> = es
            .into_iter()
            .zip(keep)
            .filter(|(_, k)| **k)
            .map(|(e, _)| e)
            .collect();
        if kept.len() == 1 {
            kept.pop().expect("one component")
        } else {
            Expr::new(ExprKind::Tuple(kept), span)
        }
    })
}

/// `e` with each of its tails — the tuples at the ends of its `let`
/// chains and `if` branches — replaced by `f` of its components and span.
pub(super) fn map_tails(e: Expr, f: &mut dyn FnMut(Vec<Expr>, Span) -> Expr) -> Expr {
    guard(|| {
        let span = e.span;
        match into_kind(e) {
            ExprKind::Tuple(es) => f(es, span),
            ExprKind::Let {
                pat,
                ty,
                value,
                body,
            } => Expr::new(
                ExprKind::Let {
                    pat,
                    ty,
                    value,
                    body: Box::new(map_tails(*body, f)),
                },
                span,
            ),
            ExprKind::If(c, t, e) => {
                let t = map_tails(*t, f);
                let e = map_tails(*e, f);
                Expr::new(ExprKind::If(c, Box::new(t), Box::new(e)), span)
            }
            _ => unreachable!("tail_arity checked every tail"),
        }
    })
}

/// Marks the components of `x` that `e` projects; false when `e` uses `x`
/// otherwise than by a projection.
pub(super) fn projected(e: &Expr, x: &Name, used: &mut [bool]) -> bool {
    guard(|| match &e.kind {
        ExprKind::Proj(inner, i) if matches!(&inner.kind, ExprKind::Var(n) if n == x) => {
            match used.get_mut(*i) {
                Some(u) => {
                    *u = true;
                    true
                }
                None => false,
            }
        }
        ExprKind::Var(n) => n != x,
        _ => e.children().all(|c| projected(c, x, used)),
    })
}

/// The new index of each kept component (`keep`), and whether one is
/// left (a single component is not a tuple).
pub(super) fn numbering(keep: &[bool]) -> (Vec<Option<usize>>, bool) {
    let mut next = 0;
    let map = keep
        .iter()
        .map(|k| {
            k.then(|| {
                next += 1;
                next - 1
            })
        })
        .collect();
    (map, next == 1)
}

/// Reads `x.i` as component `map[i]` of the pruned `x` (`x` itself when
/// one component is left).
pub(super) fn renumber(e: &mut Expr, x: &Name, map: &[Option<usize>], single: bool) {
    guard(|| {
        if let ExprKind::Proj(inner, i) = &mut e.kind {
            if matches!(&inner.kind, ExprKind::Var(n) if n == x) {
                let j = map[*i].expect("a used component");
                if single {
                    let v = std::mem::replace(&mut **inner, Expr::synth(ExprKind::Const(0.0)));
                    *e = v;
                } else {
                    *i = j;
                }
                return;
            }
        }
        for c in children_mut(e) {
            renumber(c, x, map, single);
        }
    })
}
