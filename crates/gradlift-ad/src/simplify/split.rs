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
//! consumers then read the pairs of `P` and `A`. One level down, a map over
//! an array `D` the body binds of such maps — a layer's weight cotangent,
//! `map2 (g, a. map (b. b * g.0 * a) x) D v` — is stored as `map (g. g.0)
//! D` and rebuilt over it. Both rules rewrite the element's tuple or a
//! tuple literal inside it (the partials a merged map returns beside its
//! value), and the consumers may read it through views: `P`, a projection
//! map of it, or the pairs of such an argument and another array
//! (`tails::views`); a map a `reduce` reads is left as it is (the
//! accumulator is an element too). Neither rule is in the paper; both
//! compute the same operations on the same operands as the stored term did.

use super::alpha::Alpha;
use super::remat::Recompute;
use super::rules::{Rule, Stats};
use super::tails::{
    keep_components, numbering, projected, reads_at, renumber, rewrite_reads, tail_arity, views,
};
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
            while targets(value).iter().any(|t| narrow(p, value, body, t)) {
                stats.fire(Rule::DerivedComponent);
                *changed = true;
            }
            while targets(value).iter().any(|t| rebuild(p, value, body, t)) {
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
    /// The components of the target tuple its function reads.
    reads: Vec<bool>,
    /// Whether it is a reduction (`reduce`, `foldl`).
    folds: bool,
    /// Whether the argument is `P` itself (not a view of it, see
    /// [`views`]).
    direct: bool,
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

/// Collects the consumers of `p` in `e` that read the tuple at path `t`
/// of its elements (of `arity` components) through [`views`]; false if
/// some use of `p` is not one, or reads that tuple whole.
fn consumers(e: &Expr, p: &Name, t: &[usize], arity: usize, out: &mut Vec<Consumer>) -> bool {
    guard(|| match &e.kind {
        ExprKind::Var(n) => n != p,
        ExprKind::ArrayOp(op, f, args)
            if matches!(f.kind, ExprKind::Lambda(..))
                && args.iter().any(|a| views(a, p, t).is_some()) =>
        {
            let ExprKind::Lambda(params, body) = &f.kind else {
                unreachable!("matched above")
            };
            for (k, a) in args.iter().enumerate() {
                let Some(at) = views(a, p, t) else {
                    if !consumers(a, p, t, arity, out) {
                        return false;
                    }
                    continue;
                };
                let Some(Pattern::Var(q, _)) =
                    param_of(*op, k).and_then(|j| params.get(j)).map(|x| &x.pat)
                else {
                    return false;
                };
                let mut reads = vec![false; arity];
                if !reads_at(body, q, &at, &mut reads) {
                    return false;
                }
                out.push(Consumer {
                    op: *op,
                    reads,
                    folds: matches!(op, ArrayOp::Reduce | ArrayOp::Foldl(_)),
                    direct: matches!(a.kind, ExprKind::Var(_)),
                });
            }
            // `p` inside the function itself would be read per element.
            let mut none = Vec::new();
            consumers(body, p, t, arity, &mut none) && none.is_empty()
        }
        ExprKind::Lambda(_, body) => {
            // A use inside another lambda would compute the map per element
            // of that lambda's operation.
            let mut inner = Vec::new();
            consumers(body, p, t, arity, &mut inner) && inner.is_empty()
        }
        _ => e.children().all(|c| consumers(c, p, t, arity, out)),
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
    if !consumers(body, p, &[], arity, &mut found)
        || found.len() < 2
        || !found.iter().all(|c| c.direct)
    {
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
    rewrite(body, p, &[], &mut |op2, f2, k, _, _| {
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
/// body` and a target tuple of `P`'s elements: the target's components
/// (in `e`'s one tail, at the end of its `let`s: the tail itself, or a
/// tuple literal in it), the names bound in the map (its parameters and
/// `e`'s binders) and, among `e`'s `let`s, those binding a primitive or a
/// constant (reals) and those binding an array operation (arrays).
struct Elements<'a> {
    es: &'a [Expr],
    inner: Vec<Name>,
    reals: Vec<Name>,
    arrays: Vec<Name>,
    /// The map's parameters and its arrays.
    params: &'a [Param],
    args: &'a [Expr],
    /// The operations reading `P`.
    consumers: Vec<Consumer>,
}

/// The paths of the tuples of `value`'s elements that [`narrow`] and
/// [`rebuild`] rewrite: its tail (`[]`) and each component of the tail
/// that is a tuple literal (`[j]`, the partial derivatives a merged map
/// returns beside its value).
fn targets(value: &Expr) -> Vec<Vec<usize>> {
    let mut out = vec![Vec::new()];
    if let Some(es) = map_tail(value) {
        out.extend(
            es.iter()
                .enumerate()
                .filter(|(_, c)| matches!(c.kind, ExprKind::Tuple(_)))
                .map(|(j, _)| vec![j]),
        );
    }
    out
}

/// The components of the tuple ending the body of the map `value`, after
/// its `let`s.
fn map_tail(value: &Expr) -> Option<&[Expr]> {
    let ExprKind::ArrayOp(ArrayOp::Map | ArrayOp::Map2, f, _) = &value.kind else {
        return None;
    };
    let ExprKind::Lambda(_, body) = &f.kind else {
        return None;
    };
    let mut tail: &Expr = body;
    while let ExprKind::Let { body, .. } = &tail.kind {
        tail = body;
    }
    match &tail.kind {
        ExprKind::Tuple(es) => Some(es),
        _ => None,
    }
}

/// [`Elements`] of `value` and the tuple at path `t` when every use of `p`
/// in `body` is the array argument of an array operation that reads that
/// tuple only by projections.
fn elements<'a>(p: &Name, value: &'a Expr, body: &Expr, t: &[usize]) -> Option<Elements<'a>> {
    let ExprKind::ArrayOp(ArrayOp::Map | ArrayOp::Map2, f, args) = &value.kind else {
        return None;
    };
    let ExprKind::Lambda(params, map_body) = &f.kind else {
        return None;
    };
    let (mut reals, mut arrays) = (Vec::new(), Vec::new());
    let mut tail = &**map_body;
    while let ExprKind::Let {
        pat, value, body, ..
    } = &tail.kind
    {
        match (pat, &value.kind) {
            (Pattern::Var(n, _), ExprKind::Prim(..) | ExprKind::Const(_)) => reals.push(n.clone()),
            (Pattern::Var(n, _), ExprKind::ArrayOp(..)) => arrays.push(n.clone()),
            _ => {}
        }
        tail = body;
    }
    let ExprKind::Tuple(top) = &tail.kind else {
        return None;
    };
    let es = match t {
        [] => top,
        [j] => match &top.get(*j)?.kind {
            ExprKind::Tuple(es) => es,
            _ => return None,
        },
        _ => return None,
    };
    if es.len() < 2 {
        return None;
    }
    let mut found = Vec::new();
    // A `reduce`'s accumulator is an element of its array too, and its
    // operator returns one: the tuple cannot change under it.
    if !consumers(body, p, t, es.len(), &mut found)
        || found.is_empty()
        || found.iter().any(|c| matches!(c.op, ArrayOp::Reduce))
    {
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
        arrays,
        params,
        args,
        consumers: found,
    })
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

/// The tuple at path `t` of the elements of the map `value` (checked by
/// [`elements`]).
fn target_mut<'a>(value: &'a mut Expr, t: &[usize]) -> &'a mut Expr {
    let ExprKind::ArrayOp(_, f, _) = &mut value.kind else {
        unreachable!("checked by `elements`")
    };
    let ExprKind::Lambda(_, map_body) = &mut f.kind else {
        unreachable!("checked by `elements`")
    };
    let mut tail = Arc::make_mut(map_body);
    while let ExprKind::Let { ref mut body, .. } = tail.kind {
        tail = body;
    }
    for j in t {
        let ExprKind::Tuple(es) = &mut tail.kind else {
            unreachable!("checked by `elements`")
        };
        tail = &mut es[*j];
    }
    tail
}

/// Rewrites the target tuple of `P`'s elements: component `i` goes (or
/// becomes `replacement`'s components when given), `appended` components
/// are added at the end; a single component left is not a tuple.
fn reshape(value: &mut Expr, t: &[usize], i: usize, appended: Vec<Expr>) {
    let tuple = target_mut(value, t);
    let ExprKind::Tuple(es) = &mut tuple.kind else {
        unreachable!("checked by `elements`")
    };
    es.remove(i);
    es.extend(appended);
    if es.len() == 1 {
        let one = es.pop().expect("one component");
        *tuple = one;
    }
}

/// `x.k` of the target tuple after a rewrite leaving `single` component
/// (then `x` itself).
fn read(x: &Expr, k: usize, single: bool) -> Expr {
    if single {
        x.clone()
    } else {
        Expr::synth(ExprKind::Proj(Box::new(x.clone()), k))
    }
}

/// `term` read at `x`: each `ELEM.k` becomes `x.k` ([`read`]).
fn instantiate(term: &Expr, x: &Expr, single: bool) -> Expr {
    let mut e = term.clone();
    fn go(e: &mut Expr, x: &Expr, single: bool) {
        guard(|| {
            if let ExprKind::Proj(y, k) = &e.kind {
                if matches!(&y.kind, ExprKind::Var(n) if &**n == ELEM) {
                    *e = read(x, *k, single);
                    return;
                }
            }
            for c in children_mut(e) {
                go(c, x, single);
            }
        })
    }
    go(&mut e, x, single);
    e
}

/// Renumbers each `ELEM.j` in `e` to `ELEM.map[j]`.
fn renumber_elem(e: &mut Expr, map: &[Option<usize>]) {
    guard(|| {
        if let ExprKind::Proj(y, j) = &mut e.kind {
            if matches!(&y.kind, ExprKind::Var(n) if &**n == ELEM) {
                *j = map[*j].expect("a kept component");
                return;
            }
        }
        for c in children_mut(e) {
            renumber_elem(c, map);
        }
    })
}

/// Removes one derived component of the target tuple (see the module
/// documentation); whether it did.
fn narrow(p: &Name, value: &mut Box<Expr>, body: &mut Box<Expr>, t: &[usize]) -> bool {
    let Some(Elements { es, inner, .. }) = elements(p, value, body, t) else {
        return false;
    };
    let arity = es.len();
    // Only components computed from others: constants and outer variables
    // are read where they are by `tuple-arg`, and an array left holding
    // only a constant would become a `Fill`, whose structural zeros the
    // array rules drop where the stored numbers were opaque.
    let Some((i, mut derived)) = (0..arity).find_map(|i| {
        let d = derived_from(&es[i], i, es, &inner, &mut Recompute::element())?;
        reads_elem(&d).then_some((i, d))
    }) else {
        return false;
    };
    // Each consumer computes component `i` from the others.
    let keep: Vec<bool> = (0..arity).map(|j| j != i).collect();
    let (map, single) = numbering(&keep);
    renumber_elem(&mut derived, &map);
    rewrite(body, p, t, &mut |op, g, k, at, _| {
        let (q, b) = element_param(op, g, k);
        rewrite_reads(b, &q, at, &|j, x| match map[j] {
            Some(k) => read(x, k, single),
            None => instantiate(&derived, x, single),
        });
        None
    });
    reshape(value, t, i, Vec::new());
    true
}

/// Replaces one component of the target tuple that is an array rebuilt
/// cheaply from a few values of the element — `map (a. E) W`, `W` bound
/// outside the map, `E` primitives within [`Recompute`]'s budget over `a`,
/// constants, variables bound outside and at most two reals bound in the
/// body — by those values: each consumer reading it rebuilds the array
/// from them where it reads it (rule `rebuilt-component`). The gradient
/// of `log(1 + exp(-y·(w·x)))` with respect to a row `x` is `map (a. a *
/// s) w` for a real `s` of the row: stored, it is an `m × d` array written
/// once and read once; rebuilt, each consumer computes the same products
/// in the same order from `s`. Likewise the gradient with respect to `w`,
/// `map (b. b * s) x` of the row `x` itself: its consumers (maps and
/// `foldl`s, whose element is a parameter of its own) then read `zip(P,
/// X)`, and a fold summing it over the rows reads `X` beside `s` instead
/// of an `m × d` array or a copy of the map computing `w · x` again
/// (`map-split`). One level down, the cotangent of a layer's weights,
/// `map2 (g, a. map (b. b * g.0 * a) x) D v` for an array `D` the body
/// binds (a real `g.0` per unit), is stored as `map (g. g.0) D` — a real
/// per unit, not a row per unit — and rebuilt over it. Components of an
/// outer `W` go first.
fn rebuild(p: &Name, value: &mut Box<Expr>, body: &mut Box<Expr>, t: &[usize]) -> bool {
    let Some(el) = elements(p, value, body, t) else {
        return false;
    };
    let arity = el.es.len();
    // A consumer that reads the rebuilt component beside the row reads its
    // element through one parameter of its own (not a `reduce`, whose
    // accumulator is an element too), so it can read the pairs of `P` and
    // the row's array.
    let pairs_ok = |i: usize| {
        el.consumers.iter().all(|c| {
            !c.reads[i] || matches!(c.op, ArrayOp::Map | ArrayOp::Map2 | ArrayOp::Foldl(_))
        })
    };
    let mut found: Vec<(usize, Template)> = (0..arity)
        .filter_map(|i| {
            let found = Template::of(&el, &el.es[i])?;
            (found.row.is_none() || pairs_ok(i)).then_some((i, found))
        })
        .collect();
    let Some(k) = found
        .iter()
        .position(|c| c.1.row.is_none())
        .or((!found.is_empty()).then_some(0))
    else {
        return false;
    };
    let (i, Template { term, stored, row }) = found.swap_remove(k);
    // Component `i` goes; each stored value is read from a component that
    // is that value already, or from a new one at the end.
    let keep: Vec<bool> = (0..arity).map(|j| j != i).collect();
    let (map, _) = numbering(&keep);
    let mut appended: Vec<Expr> = Vec::new();
    let mut slots = Vec::new();
    for (_, value) in &stored {
        let same = (0..arity).find(|j| *j != i && Alpha::new(false).eq(&el.es[*j], value));
        slots.push(match same {
            Some(j) => map[j].expect("kept"),
            None => {
                appended.push(value.clone());
                arity - 2 + appended.len()
            }
        });
    }
    let single = arity - 1 + appended.len() == 1;
    let mut term = term;
    for ((name, _), slot) in stored.iter().zip(&slots) {
        let at = Expr::synth(ExprKind::Proj(Box::new(var(&Name::from(ELEM))), *slot));
        substitute_var(&mut term, name, &at);
    }
    rewrite(body, p, t, &mut |op, g, k, at, arg| {
        let (q, b) = element_param(op, g, k);
        let mut reads = vec![false; arity];
        reads_at(b, &q, at, &mut reads);
        rewrite_reads(b, &q, at, &|j, x| match map[j] {
            Some(k) => read(x, k, single),
            None => instantiate(&term, x, single),
        });
        // With a row: the consumer reads `zip(arg, A)`, its element as
        // `q.0` and the row as `q.1`.
        let a = row.as_ref().filter(|_| reads[i])?;
        read_pairs(b, &q);
        Some(zip(arg.clone(), a.clone()))
    });
    reshape(value, t, i, appended);
    true
}

/// A component of the target tuple as a term over what it is rebuilt
/// from (see [`rebuild`]).
struct Template {
    /// The component, reading each stored value as its placeholder, and
    /// the row as [`ROW`].
    term: Expr,
    /// Each stored value's placeholder and the term computing it in the
    /// map's body: a real the body binds, or `map (g. g.j) D` of an array
    /// `D` the body binds.
    stored: Vec<(Name, Expr)>,
    /// The array whose element the map reads as the row, when it does.
    row: Option<Expr>,
}

/// What [`Template::of`] has found so far.
struct Builder<'a, 'b> {
    el: &'a Elements<'b>,
    /// Parameters of the template's own lambdas over outer arrays or the
    /// row: read freely.
    locals: Vec<Name>,
    /// The parameters of the template's lambdas over arrays `D` the body
    /// binds, `D`, and the component of its elements read (`None` while
    /// unread, `Some(None)` for the element itself).
    over: Vec<(Name, Name, Option<Option<usize>>)>,
    reals: Vec<Name>,
    row: Option<Expr>,
    budget: Recompute,
}

impl Template {
    /// The template of component `c`, when it is rebuilt from fewer
    /// values than it holds: an array (at least one level more than any
    /// stored array) built by `map`s and `map2`s over outer arrays, the
    /// row, and arrays the body binds, of primitives within the budget.
    fn of(el: &Elements<'_>, c: &Expr) -> Option<Template> {
        let mut b = Builder {
            el,
            locals: Vec::new(),
            over: Vec::new(),
            reals: Vec::new(),
            row: None,
            budget: Recompute::element(),
        };
        let (term, depth) = b.array(c)?;
        let over_arrays = !b.over.is_empty();
        if b.reals.len() > 2 || b.over.len() > 2 || b.reals.is_empty() && !over_arrays {
            return None;
        }
        if over_arrays && depth < 2 {
            return None;
        }
        let mut stored: Vec<(Name, Expr)> = b.reals.iter().map(|s| (s.clone(), var(s))).collect();
        for (k, (g, d, read)) in b.over.into_iter().enumerate() {
            let value = match read? {
                None => var(&d),
                Some(j) => projection_map(&g, j, var(&d)),
            };
            stored.push((Name::from(format!("{ARRAY}{k}")), value));
        }
        Some(Template {
            term,
            stored,
            row: b.row,
        })
    }
}

impl Builder<'_, '_> {
    /// An array-valued term: a `map` or `map2`, and its depth.
    fn array(&mut self, e: &Expr) -> Option<(Expr, usize)> {
        let ExprKind::ArrayOp(op @ (ArrayOp::Map | ArrayOp::Map2), f, args) = &e.kind else {
            return None;
        };
        let ExprKind::Lambda(ps, body) = &f.kind else {
            return None;
        };
        let mut new_args = Vec::new();
        for (q, a) in ps.iter().zip(args) {
            let (Pattern::Var(q, _), ExprKind::Var(n)) = (&q.pat, &a.kind) else {
                return None;
            };
            if self.locals.contains(n) || !self.el.inner.contains(n) {
                self.locals.push(q.clone());
                new_args.push(a.clone());
            } else if let Some(array) = self.row_of(n) {
                if self
                    .row
                    .as_ref()
                    .is_some_and(|r| !Alpha::new(false).eq(r, &array))
                {
                    return None;
                }
                self.row = Some(array);
                self.locals.push(q.clone());
                new_args.push(var(&Name::from(ROW)));
            } else if self.el.arrays.contains(n) {
                new_args.push(var(&Name::from(format!("{ARRAY}{}", self.over.len()))));
                self.over.push((q.clone(), n.clone(), None));
            } else {
                return None;
            }
        }
        let (body, depth) = match &body.kind {
            ExprKind::ArrayOp(..) => self.array(body)?,
            _ => (self.real(body)?, 0),
        };
        let f = Expr::synth(ExprKind::Lambda(ps.clone(), Arc::new(body)));
        Some((
            Expr::synth(ExprKind::ArrayOp(*op, Box::new(f), new_args)),
            depth + 1,
        ))
    }

    /// The array whose element the map's parameter `n` is, when it is a
    /// variable.
    fn row_of(&self, n: &Name) -> Option<Expr> {
        let j = self
            .el
            .params
            .iter()
            .position(|q| matches!(&q.pat, Pattern::Var(m, _) if m == n))?;
        self.el
            .args
            .get(j)
            .filter(|a| matches!(a.kind, ExprKind::Var(_)))
            .cloned()
    }

    /// A real-valued term.
    fn real(&mut self, e: &Expr) -> Option<Expr> {
        match &e.kind {
            ExprKind::Const(c) => Some(Expr::synth(ExprKind::Const(*c))),
            ExprKind::Var(n) => {
                if let Some(read) = self.over_read(n) {
                    return self.note(read, None).then(|| e.clone());
                }
                if self.locals.contains(n) || !self.el.inner.contains(n) {
                    return Some(e.clone());
                }
                if !self.el.reals.contains(n) {
                    return None;
                }
                if !self.reals.contains(n) {
                    self.reals.push(n.clone());
                }
                Some(e.clone())
            }
            ExprKind::Proj(x, j) => {
                let ExprKind::Var(g) = &x.kind else {
                    return None;
                };
                let read = self.over_read(g)?;
                self.note(read, Some(*j)).then(|| var(g))
            }
            ExprKind::Prim(p, args) if self.budget.spend(*p) => {
                let args = args
                    .iter()
                    .map(|x| self.real(x))
                    .collect::<Option<Vec<_>>>()?;
                Some(Expr::synth(ExprKind::Prim(*p, args)))
            }
            _ => None,
        }
    }

    /// Which of the template's lambdas over a bound array `n` is a
    /// parameter of.
    fn over_read(&self, n: &Name) -> Option<usize> {
        self.over.iter().position(|(g, _, _)| g == n)
    }

    /// Records that parameter `k` over a bound array is read as `read`
    /// (its element, or a component); false when it is read two ways.
    fn note(&mut self, k: usize, read: Option<usize>) -> bool {
        let seen = &mut self.over[k].2;
        match seen {
            None => {
                *seen = Some(read);
                true
            }
            Some(r) => *r == read,
        }
    }
}

/// `map (g. g.j) a`.
fn projection_map(g: &Name, j: usize, a: Expr) -> Expr {
    let param = Param {
        pat: Pattern::Var(g.clone(), gradlift_lang::Span::DUMMY),
        ty: None,
    };
    let body = Expr::synth(ExprKind::Proj(Box::new(var(g)), j));
    Expr::synth(ExprKind::ArrayOp(
        ArrayOp::Map,
        Box::new(Expr::synth(ExprKind::Lambda(vec![param], Arc::new(body)))),
        vec![a],
    ))
}

/// Replaces each `Var(n)` in `e` by `by` (`n` is a placeholder or a name
/// bound once, outside `e`'s binders).
fn substitute_var(e: &mut Expr, n: &Name, by: &Expr) {
    guard(|| {
        if matches!(&e.kind, ExprKind::Var(m) if m == n) {
            *e = by.clone();
            return;
        }
        for c in children_mut(e) {
            substitute_var(c, n, by);
        }
    })
}

/// The placeholder of a template's `k`th stored array (`·over0`, …); no
/// program can bind it (not an identifier).
const ARRAY: &str = "·over";

/// The placeholder for the row a consumer reads beside `P`'s element in a
/// rebuilt component; no program can bind it (not an identifier).
const ROW: &str = "·row";

/// In a consumer's function body reading its element `q` of `zip(P, A)`:
/// `q` (of `P`) becomes `q.0` and the row placeholder `q.1`.
fn read_pairs(e: &mut Expr, q: &Name) {
    guard(|| match &mut e.kind {
        ExprKind::Var(n) if n == q => {
            *e = Expr::synth(ExprKind::Proj(Box::new(var(q)), 0));
        }
        ExprKind::Var(n) if &**n == ROW => {
            *e = Expr::synth(ExprKind::Proj(Box::new(var(q)), 1));
        }
        _ => {
            for c in children_mut(e) {
                read_pairs(c, q);
            }
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

/// What [`rewrite`] does to each consumer: `f(op, function, k, at,
/// argument)`.
type Reader<'a> = dyn FnMut(ArrayOp, &mut Expr, usize, &[Vec<usize>], &Expr) -> Option<Expr> + 'a;

/// Rewrites each consumer of `p` in `e` that reads the tuple at path `t`
/// of its elements (as [`consumers`] finds them): `f(op, function, k, at,
/// argument)` rewrites the function, whose element reads that tuple at the
/// paths `at`, and gives the term to read instead of the argument (or
/// `None` to keep it).
fn rewrite(e: &mut Expr, p: &Name, t: &[usize], f: &mut Reader<'_>) {
    guard(|| {
        if let ExprKind::ArrayOp(op, g, args) = &mut e.kind {
            if matches!(g.kind, ExprKind::Lambda(..)) {
                let op = *op;
                let mut replaced = vec![false; args.len()];
                for (k, a) in args.iter_mut().enumerate() {
                    if let Some(at) = views(a, p, t) {
                        if let Some(replacement) = f(op, g, k, &at, a) {
                            *a = replacement;
                        }
                        replaced[k] = true;
                    }
                }
                // A replacement reads `p` itself (a zip): not a consumer.
                rewrite(g, p, t, f);
                for (a, r) in args.iter_mut().zip(replaced) {
                    if !r {
                        rewrite(a, p, t, f);
                    }
                }
                return;
            }
        }
        for c in children_mut(e) {
            rewrite(c, p, t, f);
        }
    })
}
