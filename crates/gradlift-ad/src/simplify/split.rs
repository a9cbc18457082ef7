//! Map splitting (rule `map-split`, not in the paper): first-order Target
//! → Target whose duplicated lambdas still need fresh names (the next
//! partial evaluation gives them). The value is unchanged bit for bit: the
//! copies compute what the shared map computed.
//!
//! Reverse mode leaves arrays of tuples of partial derivatives — `let P =
//! map2 (x, y. (map (b. b * s) x, map (a. a * s) w, r)) X Y` — read by
//! several loops, each taking some components: a fold summing `.0` (the
//! cotangent of a free variable), a map reading `.1`, … Stored, the arrays
//! in `P` cost their whole size in memory traffic twice, where a fold only
//! needs each one for a moment. Here each reduction (`reduce`, `foldl`)
//! that reads a component built by an array operation gets its own copy of
//! the map, restricted to the components it reads and written in place as
//! its array, which the JIT then computes inside the fold's loop: those
//! arrays are never stored, at the price of computing the body's shared
//! part once more per such fold. The other consumers share what is left
//! of `P`. (Maps are not given copies: they write an array of the same
//! size anyway, and recomputing a body with loops of its own — a layer of
//! an MLP — cost more than it saved when measured.)
//!
//! Applies to `let P = map/map2 (…. e) A⃗ in b` when every tail of `e` is a
//! tuple, every use of `P` in `b` is the array argument of an array
//! operation (not inside a lambda the binding is not in) whose function
//! reads its element only by projections, at least one of them is a
//! reduction reading an array-built component, and there are two uses or
//! more.
//!
//! Before that, a component of such a `P` that is a small function of the
//! others is not stored (rule `derived-component`): when the body's tuple
//! is `(-1.0 * x, x)` (the partial derivatives of `exp(v − a)` with
//! respect to `a` and `v`), `P` keeps `x` alone and each consumer reading
//! `.0` computes `-1.0 * x` itself — the same operation on the same
//! operand, so the same bits — which halves what `P` writes and each
//! consumer reads. A component is derived when it is built by primitives
//! cheaper to recompute than to store (`remat.rs`) from constants, variables
//! bound outside the map, and at least one other component that is a
//! variable. Likewise an array component `map (a. E) W` — `W` bound outside
//! the map, `E` a few operations on `a` and reals of the element — is
//! stored as those reals and rebuilt where it is read (rule
//! `rebuilt-component`); `W` may also be the map's own element of an
//! array `A` (the cotangent `map (b. b * s) x` of `w` in `w · x`), and the
//! consumers then read the pairs of `P` and `A`. Neither rule is in the
//! paper; both compute the same operations on the same operands as the
//! stored term did.

use super::remat::Recompute;
use super::rules::{Rule, Stats};
use super::tails::{keep_components, numbering, projected, renumber, tail_arity};
use super::term::{children_mut, var};
use gradlift_lang::deep::guard;
use gradlift_lang::syntax::*;
use std::sync::Arc;

/// Splits the maps of `e` as described; whether it split any.
pub(super) fn run(mut e: Expr, stats: &mut Stats) -> (Expr, bool) {
    let mut changed = false;
    walk(&mut e, stats, &mut changed);
    (e, changed)
}

fn walk(e: &mut Expr, stats: &mut Stats, changed: &mut bool) {
    guard(|| {
        if let ExprKind::Let {
            pat: Pattern::Var(p, _),
            ty: None,
            value,
            body,
        } = &mut e.kind
        {
            while narrow(p, value, body) {
                stats.fire(Rule::DerivedComponent);
                *changed = true;
            }
            while rebuild(p, value, body) {
                stats.fire(Rule::RebuiltComponent);
                *changed = true;
            }
            if split(p, value, body) {
                stats.fire(Rule::MapSplit);
                *changed = true;
            }
        }
        for c in children_mut(e) {
            walk(c, stats, changed);
        }
    })
}

/// A use of `P` as the array argument of an array operation.
struct Consumer {
    /// The operation.
    op: ArrayOp,
    /// The components its function reads.
    reads: Vec<bool>,
    /// Whether it is a reduction (`reduce`, `foldl`).
    folds: bool,
}

/// Whether component `i` of every tail of `e` is built by an array
/// operation.
fn array_built(e: &Expr, i: usize) -> bool {
    guard(|| match &e.kind {
        ExprKind::Tuple(es) => matches!(
            es.get(i).map(|c| &c.kind),
            Some(
                ExprKind::ArrayOp(..)
                    | ExprKind::ArrayLit(_)
                    | ExprKind::Builtin(Builtin::Replicate | Builtin::Concat | Builtin::Iota, _)
            )
        ),
        ExprKind::Let { body, .. } => array_built(body, i),
        ExprKind::If(_, t, f) => array_built(t, i) && array_built(f, i),
        _ => false,
    })
}

/// The parameter through which an array operation's function reads its
/// argument `k`.
pub(super) fn param_of(op: ArrayOp, k: usize) -> Option<usize> {
    match op {
        ArrayOp::Map | ArrayOp::Map2 => Some(k),
        ArrayOp::Reduce | ArrayOp::Foldl(_) | ArrayOp::Scanl | ArrayOp::Scanr => {
            (k == 1).then_some(1)
        }
        ArrayOp::Revfold(_) | ArrayOp::While | ArrayOp::Revwhile(_) => None,
    }
}

/// Collects the consumers of `p` in `e`; false if some use of `p` is not
/// one.
fn consumers(e: &Expr, p: &Name, arity: usize, out: &mut Vec<Consumer>) -> bool {
    guard(|| match &e.kind {
        ExprKind::Var(n) => n != p,
        ExprKind::ArrayOp(op, f, args)
            if args
                .iter()
                .any(|a| matches!(&a.kind, ExprKind::Var(n) if n == p)) =>
        {
            let ExprKind::Lambda(params, body) = &f.kind else {
                return false;
            };
            for (k, a) in args.iter().enumerate() {
                if !matches!(&a.kind, ExprKind::Var(n) if n == p) {
                    if !consumers(a, p, arity, out) {
                        return false;
                    }
                    continue;
                }
                let Some(Pattern::Var(q, _)) =
                    param_of(*op, k).and_then(|j| params.get(j)).map(|x| &x.pat)
                else {
                    return false;
                };
                let mut reads = vec![false; arity];
                if !projected(body, q, &mut reads) {
                    return false;
                }
                out.push(Consumer {
                    op: *op,
                    reads,
                    folds: matches!(op, ArrayOp::Reduce | ArrayOp::Foldl(_)),
                });
            }
            // `p` inside the function itself would be read per element.
            let mut none = Vec::new();
            consumers(body, p, arity, &mut none) && none.is_empty()
        }
        ExprKind::Lambda(_, body) => {
            // A use inside another lambda would compute the map per element
            // of that lambda's operation.
            let mut inner = Vec::new();
            consumers(body, p, arity, &mut inner) && inner.is_empty()
        }
        _ => e.children().all(|c| consumers(c, p, arity, out)),
    })
}

fn split(p: &Name, value: &mut Box<Expr>, body: &mut Box<Expr>) -> bool {
    let ExprKind::ArrayOp(op @ (ArrayOp::Map | ArrayOp::Map2), f, args) = &value.kind else {
        return false;
    };
    let ExprKind::Lambda(params, map_body) = &f.kind else {
        return false;
    };
    let Some(arity) = tail_arity(map_body).filter(|k| *k >= 2) else {
        return false;
    };
    let mut found = Vec::new();
    if !consumers(body, p, arity, &mut found) || found.len() < 2 {
        return false;
    }
    let arrays: Vec<bool> = (0..arity).map(|i| array_built(map_body, i)).collect();
    let reads_array = |c: &Consumer| c.folds && c.reads.iter().zip(&arrays).any(|(r, a)| *r && *a);
    if !found.iter().any(reads_array) {
        return false;
    }
    // What the consumers that keep reading `P` read.
    let mut rest = vec![false; arity];
    for c in found.iter().filter(|c| !reads_array(c)) {
        rest.iter_mut().zip(&c.reads).for_each(|(r, u)| *r |= *u);
    }
    let (op, params, map_body, args) = (*op, params.clone(), map_body.clone(), args.clone());
    let restricted = |keep: &[bool]| {
        Expr::synth(ExprKind::ArrayOp(
            op,
            Box::new(Expr::synth(ExprKind::Lambda(
                params.clone(),
                Arc::new(keep_components((*map_body).clone(), keep)),
            ))),
            args.clone(),
        ))
    };
    rewrite(body, p, &mut |op2, f2, k| {
        let (q, b) = element_param(op2, f2, k);
        let q = &q;
        let mut reads = vec![false; arity];
        projected(b, q, &mut reads);
        let folds = matches!(op2, ArrayOp::Reduce | ArrayOp::Foldl(_));
        let own = folds && reads.iter().zip(&arrays).any(|(r, a)| *r && *a);
        let keep = if own { reads } else { rest.clone() };
        let (map, single) = numbering(&keep);
        renumber(b, q, &map, single);
        own.then(|| restricted(&keep))
    });
    if rest.contains(&true) {
        **value = restricted(&rest);
    }
    true
}

/// What [`narrow`] and [`rebuild`] need of `let P = map (… . e) A⃗ in
/// body`: `e`'s tuple (one tail, at the end of its `let`s), the names
/// bound in the map (its parameters and `e`'s binders) and, among them,
/// those `e`'s `let`s bind to a primitive or a constant (reals).
struct Elements<'a> {
    es: &'a [Expr],
    inner: Vec<Name>,
    reals: Vec<Name>,
    /// The map's parameters and its arrays.
    params: &'a [Param],
    arrays: &'a [Expr],
    /// The operations reading `P`.
    ops: Vec<ArrayOp>,
}

/// [`Elements`] of `value` when every use of `p` in `body` is the array
/// argument of an array operation that only projects its element.
fn elements<'a>(p: &Name, value: &'a Expr, body: &Expr) -> Option<Elements<'a>> {
    let ExprKind::ArrayOp(ArrayOp::Map | ArrayOp::Map2, f, arrays) = &value.kind else {
        return None;
    };
    let ExprKind::Lambda(params, map_body) = &f.kind else {
        return None;
    };
    let arity = tail_arity(map_body).filter(|k| *k >= 2)?;
    let mut reals = Vec::new();
    let mut tail = &**map_body;
    while let ExprKind::Let {
        pat, value, body, ..
    } = &tail.kind
    {
        if let (Pattern::Var(n, _), ExprKind::Prim(..) | ExprKind::Const(_)) = (pat, &value.kind) {
            reals.push(n.clone());
        }
        tail = body;
    }
    let ExprKind::Tuple(es) = &tail.kind else {
        return None;
    };
    let mut found = Vec::new();
    if !consumers(body, p, arity, &mut found) || found.is_empty() {
        return None;
    }
    let mut inner = Vec::new();
    for q in params {
        q.pat.names(&mut inner);
    }
    binders(map_body, &mut inner);
    Some(Elements {
        es,
        inner,
        reals,
        params,
        arrays,
        ops: found.iter().map(|c| c.op).collect(),
    })
}

/// Applies `f` to the function body of each consumer of `p` in `body`,
/// with the name of its element's parameter.
fn each_reader(body: &mut Expr, p: &Name, f: &mut dyn FnMut(&Name, &mut Expr)) {
    rewrite(body, p, &mut |op, g, k| {
        let (q, b) = element_param(op, g, k);
        f(&q, b);
        None
    });
}

/// The parameter through which the function `g` of a consumer reads its
/// argument `k` (checked by [`consumers`]), and the function's body.
fn element_param(op: ArrayOp, g: &mut Expr, k: usize) -> (Name, &mut Expr) {
    let j = param_of(op, k).expect("checked by `consumers`");
    let ExprKind::Lambda(ps, b) = &mut g.kind else {
        unreachable!("checked by `consumers`")
    };
    let Pattern::Var(q, _) = &ps[j].pat else {
        unreachable!("checked by `consumers`")
    };
    (q.clone(), Arc::make_mut(b))
}

/// The body of the map bound to `P`, to rewrite.
fn map_body_mut(value: &mut Expr) -> &mut Expr {
    let ExprKind::ArrayOp(_, f, _) = &mut value.kind else {
        unreachable!("checked by `elements`")
    };
    let ExprKind::Lambda(_, map_body) = &mut f.kind else {
        unreachable!("checked by `elements`")
    };
    Arc::make_mut(map_body)
}

/// Removes one derived component of `P`'s elements (see the module
/// documentation); whether it did.
fn narrow(p: &Name, value: &mut Box<Expr>, body: &mut Box<Expr>) -> bool {
    let Some(Elements { es, inner, .. }) = elements(p, value, body) else {
        return false;
    };
    let arity = es.len();
    // Only components computed from others: constants and outer variables
    // are read where they are by `tuple-arg`, and an array left holding
    // only a constant would become a `Fill`, whose structural zeros the
    // array rules drop where the stored numbers were opaque.
    let Some((i, derived)) = (0..arity).find_map(|i| {
        let d = derived_from(&es[i], i, es, &inner, &mut Recompute::element())?;
        reads_elem(&d).then_some((i, d))
    }) else {
        return false;
    };
    // Each consumer computes component `i` from the others.
    let keep: Vec<bool> = (0..arity).map(|j| j != i).collect();
    let (map, single) = numbering(&keep);
    each_reader(body, p, &mut |q, b| {
        substitute_proj(b, q, i, &derived);
        renumber(b, q, &map, single);
    });
    let b = map_body_mut(value);
    let old = std::mem::replace(b, Expr::synth(ExprKind::Const(0.0)));
    *b = keep_components(old, &keep);
    true
}

/// Replaces one component of `P`'s elements that is `map (a. E) W` —
/// `W` bound outside the map, `E` primitives within [`Recompute`]'s budget
/// over `a`, constants, variables bound outside and at most two reals
/// bound in the body — by those reals: each consumer reading it rebuilds
/// the map from them where it reads it (rule `rebuilt-component`). The
/// gradient of `log(1 + exp(-y·(w·x)))` with respect to a row `x` is
/// `map (a. a * s) w` for a real `s` of the row: stored, it is an `m × d`
/// array written once and read once; rebuilt, each consumer computes the
/// same products in the same order from `s`. Likewise the gradient with
/// respect to `w`, `map (b. b * s) x` of the row `x` itself: its
/// consumers (maps and `foldl`s, whose element is a parameter of its own)
/// then read `zip(P, X)`, and a fold summing it over the rows reads `X`
/// beside `s` instead of an `m × d` array or a copy of the map computing
/// `w · x` again (`map-split`). Components of an outer `W` go first: after
/// a row, the consumers no longer only project `P`'s element.
fn rebuild(p: &Name, value: &mut Box<Expr>, body: &mut Box<Expr>) -> bool {
    let Some(Elements {
        es,
        inner,
        reals,
        params,
        arrays,
        ops,
    }) = elements(p, value, body)
    else {
        return false;
    };
    let arity = es.len();
    // Each consumer reads its element through one parameter of its own
    // (not a `reduce`, whose accumulator is an element too), so it can
    // read the pairs of `P` and a row.
    let pairs_ok = ops
        .iter()
        .all(|op| matches!(op, ArrayOp::Map | ArrayOp::Map2 | ArrayOp::Foldl(_)));
    let candidate = |(i, c): (usize, &Expr)| {
        let ExprKind::ArrayOp(ArrayOp::Map, g, args) = &c.kind else {
            return None;
        };
        let [w] = args.as_slice() else {
            return None;
        };
        let ExprKind::Var(n) = &w.kind else {
            return None;
        };
        // `W` is bound outside the map, or it is the map's element of an
        // array `A` (a variable) that the consumers then read beside `P`.
        let row = if inner.contains(n) {
            let j = params
                .iter()
                .position(|q| matches!(&q.pat, Pattern::Var(m, _) if m == n))?;
            let a = arrays
                .get(j)
                .filter(|a| matches!(a.kind, ExprKind::Var(_)))?;
            if !pairs_ok {
                return None;
            }
            Some(a.clone())
        } else {
            None
        };
        let w = match row {
            Some(_) => Expr::synth(ExprKind::Var(Name::from(ROW))),
            None => w.clone(),
        };
        let ExprKind::Lambda(ps, e) = &g.kind else {
            return None;
        };
        let [Param {
            pat: Pattern::Var(a, _),
            ..
        }] = ps.as_slice()
        else {
            return None;
        };
        let mut scalars: Vec<Name> = Vec::new();
        let e = over_scalars(
            e,
            a,
            &inner,
            &reals,
            &mut scalars,
            &mut Recompute::element(),
        )?;
        (!scalars.is_empty() && scalars.len() <= 2).then(|| {
            let g = Expr::synth(ExprKind::Lambda(ps.clone(), Arc::new(e)));
            let map = Expr::synth(ExprKind::ArrayOp(ArrayOp::Map, Box::new(g), vec![w]));
            (i, map, scalars, row)
        })
    };
    // Rows last: a consumer reading `zip(P, A)` no longer only projects
    // its element, so no rule rewrites `P` after that.
    let mut found: Vec<_> = es.iter().enumerate().filter_map(candidate).collect();
    let Some(k) = found
        .iter()
        .position(|c| c.3.is_none())
        .or((!found.is_empty()).then_some(0))
    else {
        return false;
    };
    let (i, rebuilt, scalars, row) = found.swap_remove(k);
    // Consumers: `q.i` becomes the map over `q`'s new components; the
    // others are renumbered (component `i` removed, the reals appended).
    let keep: Vec<bool> = (0..arity).map(|j| j != i).collect();
    let (map, _) = numbering(&keep);
    // Where each real is read: a component that is that variable already,
    // or a new one at the end.
    let mut appended = Vec::new();
    let slots: Vec<usize> = scalars
        .iter()
        .map(|s| {
            let same = |c: &Expr| matches!(&c.kind, ExprKind::Var(n) if n == s);
            match (0..arity).find(|j| *j != i && same(&es[*j])) {
                Some(j) => map[j].expect("kept"),
                None => {
                    appended.push(s.clone());
                    arity - 2 + appended.len()
                }
            }
        })
        .collect();
    rewrite(body, p, &mut |op, g, k| {
        let (q, b) = element_param(op, g, k);
        let q = &q;
        substitute_proj(b, q, i, &rebuilt);
        renumber(b, q, &map, false);
        for (s, k) in scalars.iter().zip(&slots) {
            rename_scalar(b, s, q, *k);
        }
        // With a row: the consumer reads `zip(P, A)`, `P`'s element as
        // `q.0` and the row as `q.1`.
        let a = row.as_ref()?;
        read_pairs(b, q);
        Some(zip(var(p), a.clone()))
    });
    let mut tail = map_body_mut(value);
    while let ExprKind::Let { ref mut body, .. } = tail.kind {
        tail = body;
    }
    let ExprKind::Tuple(es) = &mut tail.kind else {
        unreachable!("checked by `elements`")
    };
    es.remove(i);
    es.extend(appended.iter().map(var));
    true
}

/// The placeholder for the row a consumer reads beside `P`'s element in a
/// rebuilt component; no program can bind it (not an identifier).
const ROW: &str = "·row";

/// In a consumer's function body reading its element `q` of `zip(P, A)`:
/// `q.k` (of `P`) becomes `q.0.k` and the row placeholder `q.1`.
fn read_pairs(e: &mut Expr, q: &Name) {
    guard(|| {
        let of_q = |e: &Expr| matches!(&e.kind, ExprKind::Var(n) if n == q);
        match &mut e.kind {
            ExprKind::Proj(inner, _) if of_q(inner) => {
                let inner = std::mem::replace(&mut **inner, Expr::synth(ExprKind::Const(0.0)));
                if let ExprKind::Proj(x, _) = &mut e.kind {
                    **x = Expr::synth(ExprKind::Proj(Box::new(inner), 0));
                }
                return;
            }
            ExprKind::Var(n) if &**n == ROW => {
                *e = Expr::synth(ExprKind::Proj(Box::new(var(q)), 1));
                return;
            }
            _ => {}
        }
        for c in children_mut(e) {
            read_pairs(c, q);
        }
    })
}

/// `map2 (a, b. (a, b)) x y`: the pairs of `x` and `y`, which the JIT reads
/// without building. The binders are names no program can write (as
/// [`ROW`]), so they never shadow a variable in scope (a parameter `b`);
/// the next partial evaluation names them afresh.
fn zip(x: Expr, y: Expr) -> Expr {
    let (a, b) = (Name::from("·a"), Name::from("·b"));
    let params = [&a, &b]
        .into_iter()
        .map(|n| Param {
            pat: Pattern::Var(n.clone(), gradlift_lang::Span::DUMMY),
            ty: None,
        })
        .collect();
    let pair = Expr::synth(ExprKind::Tuple(vec![var(&a), var(&b)]));
    Expr::synth(ExprKind::ArrayOp(
        ArrayOp::Map2,
        Box::new(Expr::synth(ExprKind::Lambda(params, Arc::new(pair)))),
        vec![x, y],
    ))
}

/// `e` (the body of `map (a. e) W`) when it is primitives within
/// [`Recompute`]'s budget over `a`, constants, variables not in `inner`, and variables
/// in `reals` (collected into `scalars`, which the consumers will read as
/// components of their element, see [`rename_scalar`]).
fn over_scalars(
    e: &Expr,
    a: &Name,
    inner: &[Name],
    reals: &[Name],
    scalars: &mut Vec<Name>,
    budget: &mut Recompute,
) -> Option<Expr> {
    match &e.kind {
        ExprKind::Const(c) => Some(Expr::synth(ExprKind::Const(*c))),
        ExprKind::Var(n) if n == a || !inner.contains(n) => Some(e.clone()),
        ExprKind::Var(n) if reals.contains(n) => {
            if !scalars.contains(n) {
                scalars.push(n.clone());
            }
            Some(e.clone())
        }
        ExprKind::Prim(p, args) if budget.spend(*p) => {
            let args = args
                .iter()
                .map(|x| over_scalars(x, a, inner, reals, scalars, budget))
                .collect::<Option<Vec<_>>>()?;
            Some(Expr::synth(ExprKind::Prim(*p, args)))
        }
        _ => None,
    }
}

/// Reads the variable `s` as component `k` of `q` in `e`.
fn rename_scalar(e: &mut Expr, s: &Name, q: &Name, k: usize) {
    guard(|| {
        if matches!(&e.kind, ExprKind::Var(n) if n == s) {
            *e = Expr::synth(ExprKind::Proj(
                Box::new(Expr::synth(ExprKind::Var(q.clone()))),
                k,
            ));
            return;
        }
        for c in children_mut(e) {
            rename_scalar(c, s, q, k);
        }
    })
}

/// The names bound by `let`s and lambdas in `e`.
pub(super) fn binders(e: &Expr, out: &mut Vec<Name>) {
    guard(|| {
        match &e.kind {
            ExprKind::Let { pat, .. } => pat.names(out),
            ExprKind::Lambda(params, _) => params.iter().for_each(|q| q.pat.names(out)),
            _ => {}
        }
        for c in e.children() {
            binders(c, out);
        }
    })
}

/// Component `i` (`e`) as a term over `ELEM.j` (written with the
/// placeholder variable [`ELEM`]) when it is derived: built by
/// primitives within [`Recompute`]'s budget from constants, variables not in
/// `inner`, and variables that are another component `j` of `es`.
fn derived_from(
    e: &Expr,
    i: usize,
    es: &[Expr],
    inner: &[Name],
    budget: &mut Recompute,
) -> Option<Expr> {
    match &e.kind {
        // Not structural where it is read: a stored zero was an ordinary
        // number to its consumers, and `0ₛ * inf ⇝ 0` must not start to
        // apply there.
        ExprKind::Const(c) => Some(Expr::synth(ExprKind::Const(*c))),
        ExprKind::Var(n) => {
            let other = es
                .iter()
                .enumerate()
                .position(|(j, c)| j != i && matches!(&c.kind, ExprKind::Var(m) if m == n));
            match other {
                Some(j) => Some(Expr::synth(ExprKind::Proj(
                    Box::new(Expr::synth(ExprKind::Var(Name::from(ELEM)))),
                    j,
                ))),
                None if !inner.contains(n) => Some(e.clone()),
                None => None,
            }
        }
        ExprKind::Prim(p, args) if budget.spend(*p) => {
            let args = args
                .iter()
                .map(|a| derived_from(a, i, es, inner, budget))
                .collect::<Option<Vec<_>>>()?;
            Some(Expr::synth(ExprKind::Prim(*p, args)))
        }
        _ => None,
    }
}

/// Whether `e` reads the placeholder [`ELEM`].
fn reads_elem(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Var(n) => &**n == ELEM,
        _ => e.children().any(reads_elem),
    }
}

/// The placeholder for a consumer's element in a derived component; no
/// program can bind it (not an identifier).
const ELEM: &str = "·elem";

/// Replaces each `q.i` in `e` by `derived` with the placeholder read as `q`.
fn substitute_proj(e: &mut Expr, q: &Name, i: usize, derived: &Expr) {
    guard(|| {
        if let ExprKind::Proj(inner, j) = &e.kind {
            if *j == i && matches!(&inner.kind, ExprKind::Var(n) if n == q) {
                let mut d = derived.clone();
                rename_elem(&mut d, q);
                *e = d;
                return;
            }
        }
        for c in children_mut(e) {
            substitute_proj(c, q, i, derived);
        }
    })
}

fn rename_elem(e: &mut Expr, q: &Name) {
    if let ExprKind::Var(n) = &mut e.kind {
        if &**n == ELEM {
            *n = q.clone();
        }
        return;
    }
    for c in children_mut(e) {
        rename_elem(c, q);
    }
}

/// Rewrites each consumer of `p` in `e`: `f(op, function, k)` renumbers
/// the function's projections and gives the term to read instead of `p`
/// (or `None` to keep reading `p`).
fn rewrite(e: &mut Expr, p: &Name, f: &mut dyn FnMut(ArrayOp, &mut Expr, usize) -> Option<Expr>) {
    guard(|| {
        if let ExprKind::ArrayOp(op, g, args) = &mut e.kind {
            let op = *op;
            let mut replaced = vec![false; args.len()];
            for (k, a) in args.iter_mut().enumerate() {
                if matches!(&a.kind, ExprKind::Var(n) if n == p) {
                    if let Some(replacement) = f(op, g, k) {
                        *a = replacement;
                        replaced[k] = true;
                    }
                }
            }
            // A replacement may read `p` itself (a zip): not a consumer.
            rewrite(g, p, f);
            for (a, r) in args.iter_mut().zip(replaced) {
                if !r {
                    rewrite(a, p, f);
                }
            }
            return;
        }
        for c in children_mut(e) {
            rewrite(c, p, f);
        }
    })
}
