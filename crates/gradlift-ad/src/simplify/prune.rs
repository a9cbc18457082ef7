//! Dead tuple components (rule `dead-component`): first-order Target →
//! first-order Target.
//!
//! A gradient often binds a tuple and reads only some of its components:
//! the reverse of an `if` returns the cotangents of everything the branch
//! read, and a loop's right scan of state cotangents projects out only the
//! state's. DCE removes dead `let`s but not dead components. Here, for
//! `let x = e in b` where `b` uses `x` only as `x.i`, and for
//! `let (p₀, …, pₖ) = e in b` with wildcards, the unused components are
//! removed from every tail of `e` — the tuples at the ends of its `let`
//! chains and `if` branches — and the projections renumbered. The
//! computations that fed only those components become dead `let`s, which
//! the next DCE removes.
//!
//! Input and output: every binder has a name of its own (as after partial
//! evaluation); no binder is added.

use super::rules::{Rule, Stats};
use super::term::into_kind;
use gradlift_lang::deep::guard;
use gradlift_lang::syntax::*;
use std::sync::Arc;

/// Removes the dead components of tuple-valued bindings in `e`; whether
/// it removed any.
pub(super) fn run(mut e: Expr, stats: &mut Stats) -> (Expr, bool) {
    let mut p = Prune {
        stats,
        changed: false,
    };
    // Pruning inside a body can leave fewer projections of an outer
    // binding: a few passes reach the fixed point on gradients.
    for _ in 0..MAX_PASSES {
        let before = p.changed;
        p.changed = false;
        p.expr(&mut e);
        let again = p.changed;
        p.changed |= before;
        if !again {
            break;
        }
    }
    (e, p.changed)
}

/// The most passes over a term.
const MAX_PASSES: usize = 4;

struct Prune<'a> {
    stats: &'a mut Stats,
    changed: bool,
}

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
    guard(|| {
        let span = e.span;
        match into_kind(e) {
            ExprKind::Tuple(es) => {
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
            }
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
                    body: Box::new(keep_components(*body, keep)),
                },
                span,
            ),
            ExprKind::If(c, t, f) => Expr::new(
                ExprKind::If(
                    c,
                    Box::new(keep_components(*t, keep)),
                    Box::new(keep_components(*f, keep)),
                ),
                span,
            ),
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
        _ => e.children().into_iter().all(|c| projected(c, x, used)),
    })
}

/// The children of `e`, to rewrite in place.
pub(super) fn children_mut(e: &mut Expr) -> Vec<&mut Expr> {
    match &mut e.kind {
        ExprKind::Const(_) | ExprKind::Var(_) | ExprKind::PrimFn(_) => Vec::new(),
        ExprKind::Prim(_, xs)
        | ExprKind::Tuple(xs)
        | ExprKind::ArrayLit(xs)
        | ExprKind::Builtin(_, xs) => xs.iter_mut().collect(),
        ExprKind::Let { value, body, .. } => vec![&mut **value, &mut **body],
        ExprKind::Proj(x, _) | ExprKind::Index(x, _) => vec![&mut **x],
        ExprKind::If(c, t, f) => vec![&mut **c, &mut **t, &mut **f],
        ExprKind::Lambda(_, body) => vec![Arc::make_mut(body)],
        ExprKind::Apply(f, xs) | ExprKind::ArrayOp(_, f, xs) => {
            std::iter::once(&mut **f).chain(xs.iter_mut()).collect()
        }
    }
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

impl Prune<'_> {
    /// Outer bindings first: pruning a binding's tails can leave an inner
    /// binding (in a tail) with dead components in turn.
    fn expr(&mut self, e: &mut Expr) {
        guard(|| {
            if let ExprKind::Let {
                pat,
                ty: None,
                value,
                body,
            } = &mut e.kind
            {
                self.binding(pat, value, body);
            }
            for c in children_mut(e) {
                self.expr(c);
            }
        })
    }

    /// Prunes one binding when some component is dead.
    fn binding(&mut self, pat: &mut Pattern, value: &mut Box<Expr>, body: &mut Box<Expr>) {
        let Some(k) = tail_arity(value).filter(|k| *k >= 2) else {
            return;
        };
        let used: Vec<bool> = match &*pat {
            Pattern::Var(x, _) => {
                let mut used = vec![false; k];
                if !projected(body, x, &mut used) {
                    return;
                }
                used
            }
            Pattern::Tuple(ps, _) if ps.len() == k => {
                ps.iter().map(|p| !matches!(p, Pattern::Wild(_))).collect()
            }
            _ => return,
        };
        if used.iter().all(|u| *u) || !used.contains(&true) {
            return;
        }
        self.stats.fire(Rule::DeadComponent);
        self.changed = true;
        let v = std::mem::replace(&mut **value, Expr::synth(ExprKind::Const(0.0)));
        **value = keep_components(v, &used);
        match pat {
            Pattern::Var(x, _) => {
                let (map, single) = numbering(&used);
                renumber(body, x, &map, single);
            }
            Pattern::Tuple(ps, _) => {
                let mut kept: Vec<Pattern> = std::mem::take(ps)
                    .into_iter()
                    .filter(|p| !matches!(p, Pattern::Wild(_)))
                    .collect();
                if kept.len() == 1 {
                    *pat = kept.pop().expect("one component");
                } else {
                    *ps = kept;
                }
            }
            _ => unreachable!("matched above"),
        }
    }
}
