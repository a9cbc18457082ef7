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

/// The projections `q.π` that `e` is, when it is a variable `q` under
/// zero or more projections (outermost last in `π`).
pub(super) fn chain(e: &Expr) -> Option<(&Name, Vec<usize>)> {
    match &e.kind {
        ExprKind::Var(n) => Some((n, Vec::new())),
        ExprKind::Proj(x, i) => {
            let (n, mut path) = chain(x)?;
            path.push(*i);
            Some((n, path))
        }
        _ => None,
    }
}

/// Where an array operation's argument `a` shows the tuple at path `t` of
/// the elements of `p`: `p` itself (at `t`), a projection map `map (g.
/// g.π) p` with `π` a prefix of `t` (at `t` less `π`), or the pairs
/// `map2 (a, b. (a, b)) x y` of such arguments and an array that does not
/// read `p` (at `.0` or `.1` before the path of the side). The paths, from
/// the element the operation's function reads, at which that tuple is
/// found; `None` when `a` is not such an argument (it may still read `p`
/// some other way, or be an operation reading `p` itself).
pub(super) fn views(a: &Expr, p: &Name, t: &[usize]) -> Option<Vec<Vec<usize>>> {
    guard(|| match &a.kind {
        ExprKind::Var(n) if n == p => Some(vec![t.to_vec()]),
        ExprKind::ArrayOp(ArrayOp::Map, f, args) => {
            let ([x], ExprKind::Lambda(ps, body)) = (args.as_slice(), &f.kind) else {
                return None;
            };
            let [Param {
                pat: Pattern::Var(g, _),
                ..
            }] = ps.as_slice()
            else {
                return None;
            };
            let (n, pi) = chain(body)?;
            if n != g || !matches!(&x.kind, ExprKind::Var(m) if m == p) {
                return None;
            }
            t.strip_prefix(pi.as_slice())
                .map(|rest| vec![rest.to_vec()])
        }
        ExprKind::ArrayOp(ArrayOp::Map2, f, args) if super::pe::is_zip(f) => {
            let sides: Vec<Option<Vec<Vec<usize>>>> = args.iter().map(|x| views(x, p, t)).collect();
            if sides.iter().all(Option::is_none) {
                return None;
            }
            let mut out = Vec::new();
            for (k, (x, side)) in args.iter().zip(sides).enumerate() {
                match side {
                    Some(paths) => out.extend(paths.into_iter().map(|mut path| {
                        path.insert(0, k);
                        path
                    })),
                    None if super::term::mentions(x, std::slice::from_ref(p)) => return None,
                    None => {}
                }
            }
            Some(out)
        }
        _ => None,
    })
}

/// Marks the components of the tuple that `e` reads at the paths `at` from
/// `q` (`q.τ.k` reads component `k`, for `τ` in `at`); false when `e` reads
/// that tuple, or a tuple holding it, whole (`q.τ` itself, or `q`), or a
/// component beyond `reads`. Other parts of `q` are free to read.
pub(super) fn reads_at(e: &Expr, q: &Name, at: &[Vec<usize>], reads: &mut [bool]) -> bool {
    guard(|| {
        if let Some((n, pi)) = chain(e) {
            if n != q {
                return true;
            }
            for tau in at {
                if pi.len() > tau.len() && pi.starts_with(tau) {
                    return match reads.get_mut(pi[tau.len()]) {
                        Some(r) => {
                            *r = true;
                            true
                        }
                        None => false,
                    };
                }
                if tau.starts_with(&pi) {
                    return false;
                }
            }
            return true;
        }
        e.children().all(|c| reads_at(c, q, at, reads))
    })
}

/// Replaces each read `x.k` in `e` of the tuple at the paths `at` from `q`
/// (`x` is `q.τ`) by `f(k, x)`; the replacement is not walked again.
pub(super) fn rewrite_reads(
    e: &mut Expr,
    q: &Name,
    at: &[Vec<usize>],
    f: &dyn Fn(usize, &Expr) -> Expr,
) {
    guard(|| {
        if let ExprKind::Proj(x, k) = &e.kind {
            if matches!(chain(x), Some((n, pi)) if n == q && at.contains(&pi)) {
                *e = f(*k, x);
                return;
            }
        }
        for c in children_mut(e) {
            rewrite_reads(c, q, at, f);
        }
    })
}
