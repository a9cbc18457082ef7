//! Sibling maps merged (rule `map-merge`, not in the paper): first-order
//! Target → Target whose merged body the next round's CSE shares; bit for
//! bit the same values.
//!
//! Reverse mode through a map computes the map's body twice: once for the
//! primal value (`reduce (+) 0 (map2 (x, y. log(1 + exp(-y * dot(w, x))))
//! X Y)`) and once for the partial derivatives (`let P = map2 (x, y. let t
//! = dot(w, x) in …) X Y`), each a loop over the same arrays. Here, in a
//! block of `let`s,
//!
//! ```text
//! let P = mapₖ (x⃗. let … in (e₀..eₙ)) A⃗ in … C[mapₖ (x⃗'. e) A⃗] …
//! ```
//!
//! becomes
//!
//! ```text
//! let P = mapₖ (x⃗. let … in (e₀..eₙ, e[x⃗/x⃗'])) A⃗ in … C[map (g. g.(n+1)) P] …
//! ```
//!
//! when the sibling (same operation, same array variables), among the next
//! [`LOOKAHEAD`] bindings or in the block's body when they reach it, is
//! evaluated unconditionally after `P` (not under a lambda or a branch), mentions
//! nothing bound after `P`, cannot fail (so computing it earlier changes
//! no error), and shares work with `P`'s body: a subterm that is a loop or
//! calls a transcendental function, equal up to names to a subterm of the
//! body or to the value of one of its `let`s written out (small values
//! only: `sin(a * c)` against `let x = a * c in … sin(x)`). (Where `P`'s
//! elements are not tuples, or are read whole somewhere, `P` stores the
//! pairs of its old element and the sibling's instead, and its other uses
//! read `map (g. g.0) P`.) CSE then computes
//! that subterm once per element, and the consumer of the sibling reads a
//! stored real instead of running the loop again. Each element is computed
//! by the same operations on the same operands as before.

use super::alpha::Alpha;
use super::names::Names;
use super::reuse::{rename, replace_first};
use super::rules::{Rule, Stats};
use super::split::{binders, param_of};
use super::tails::tail_arity;
use super::term::*;
use gradlift_lang::deep::guard;
use gradlift_lang::syntax::*;
use gradlift_lang::Span;
use std::sync::Arc;

/// Merges the sibling maps of `e`; whether it merged any.
pub(super) fn run(e: Expr, stats: &mut Stats) -> (Expr, bool) {
    let mut changed = false;
    // The parameter of each `map (g. g.k) P` written is a name the term
    // does not use, so that it shadows no binder where it is written.
    let mut used = Vec::new();
    names_in(&e, &mut used);
    let mut names = Names::avoiding(used, 0);
    let e = each_block(e, &mut |bindings, body| {
        for t in 0..bindings.len() {
            while merge_one(bindings, body, t, &mut names) {
                stats.fire(Rule::MapMerge);
                changed = true;
            }
        }
    });
    (e, changed)
}

/// The map bound at `bindings[t]`, taken apart: its operation, parameters,
/// arrays (variables) and body.
fn map_parts(value: &Expr) -> Option<(ArrayOp, &[Param], &[Expr], &Expr)> {
    let ExprKind::ArrayOp(op @ (ArrayOp::Map | ArrayOp::Map2), f, args) = &value.kind else {
        return None;
    };
    let ExprKind::Lambda(params, body) = &f.kind else {
        return None;
    };
    let vars = args.iter().all(|a| matches!(a.kind, ExprKind::Var(_)));
    let names = params.iter().all(|q| matches!(q.pat, Pattern::Var(..)));
    (vars && names).then_some((*op, params.as_slice(), args.as_slice(), &**body))
}

/// How many bindings after a map are searched for siblings (the search is
/// linear in this, per map; the body is searched when they reach it).
const LOOKAHEAD: usize = super::limits::LIMITS.merge_lookahead;

/// Merges into the map bound at `bindings[t]` the first sibling found
/// after it; whether it found one.
fn merge_one(bindings: &mut [Binding], body: &mut Expr, t: usize, fresh: &mut Names) -> bool {
    let Pattern::Var(p, _) = &bindings[t].pat else {
        return false;
    };
    let p = p.clone();
    let Some((op, params, arrays, map_body)) = map_parts(&bindings[t].value) else {
        return false;
    };
    let names: Vec<Name> = params
        .iter()
        .map(|q| match &q.pat {
            Pattern::Var(n, _) => n.clone(),
            _ => unreachable!("checked by `map_parts`"),
        })
        .collect();
    // The bindings searched, and the body if they reach it.
    let end = (t + 1 + LOOKAHEAD).min(bindings.len());
    let reaches_body = end == bindings.len();
    // Names bound after `P` (up to the sibling, which cannot mention a
    // name bound after it): a sibling mentioning one cannot move up.
    let mut after = vec![p.clone()];
    for b in &bindings[t + 1..end] {
        b.pat.names(&mut after);
        binders(&b.value, &mut after);
    }
    if reaches_body {
        binders(body, &mut after);
    }
    let written_out = let_values(map_body);
    let want = Want {
        op,
        arrays,
        names: &names,
        map_body,
        written_out: &written_out,
        after: &after,
    };
    let mut found = None;
    for b in &bindings[t + 1..end] {
        found = find(&b.value, &want);
        if found.is_some() {
            break;
        }
    }
    if found.is_none() && reaches_body {
        found = find(body, &want);
    }
    let Some((sibling, element)) = found else {
        return false;
    };
    // Elements that are tuples get one more component, when every use of
    // `P` only projects them (a tuple with one more component read whole
    // would change the result); others become the pairs of the old
    // element and the sibling's, `P` read through `map (g. g.0) P`.
    let projected = bindings[t + 1..]
        .iter()
        .all(|b| projects_only(&b.value, &p))
        && projects_only(body, &p);
    let tuple = projected && ends_in_tuple(map_body);
    let arity = match tail_arity(map_body) {
        Some(k) if tuple => k,
        _ => 1,
    };
    // The sibling reads component `arity` of `P` instead.
    let read = component(&p, arity, fresh);
    if !tuple {
        // The other uses of `P` read component 0.
        let old = component(&p, 0, fresh);
        for b in bindings[t + 1..].iter_mut() {
            substitute(&mut b.value, &p, &old);
        }
        substitute(body, &p, &old);
    }
    let mut done = false;
    for b in bindings[t + 1..].iter_mut() {
        done = done || replace_first(&mut b.value, &sibling, &read);
    }
    if !done {
        done = replace_first(body, &sibling, &read);
    }
    assert!(done, "the sibling was found");
    let ExprKind::ArrayOp(_, f, _) = &mut bindings[t].value.kind else {
        unreachable!("checked by `map_parts`")
    };
    let ExprKind::Lambda(_, map_body) = &mut f.kind else {
        unreachable!("checked by `map_parts`")
    };
    let map_body = Arc::make_mut(map_body);
    if tuple {
        push_component(map_body, element);
    } else {
        let old = std::mem::replace(map_body, mk(ExprKind::Const(0.0)));
        *map_body = mk(ExprKind::Tuple(vec![old, element]));
    }
    true
}

/// Whether `e` reads the elements of the array `p` only by projections:
/// `p` is only the array of `map`s, `map2`s and `foldl`s (or half of a zip,
/// `map2 (a, b. (a, b))`, one of theirs) whose function uses its element
/// only as `q.k` (for a zip, `q.j` only as `q.j.k`). A component appended
/// to `p`'s elements then changes nothing `e` computes.
fn projects_only(e: &Expr, p: &Name) -> bool {
    let is_p = |e: &Expr| matches!(&e.kind, ExprKind::Var(n) if n == p);
    guard(|| match &e.kind {
        ExprKind::Var(n) => n != p,
        ExprKind::ArrayOp(op, f, args) => {
            let element_reads = matches!(op, ArrayOp::Map | ArrayOp::Map2 | ArrayOp::Foldl(_));
            let ExprKind::Lambda(params, body) = &f.kind else {
                return args.iter().all(|a| projects_only(a, p));
            };
            for (k, a) in args.iter().enumerate() {
                // Where `p`'s element sits in the function's parameter.
                let path = if is_p(a) {
                    Some(None)
                } else {
                    match &a.kind {
                        ExprKind::ArrayOp(ArrayOp::Map2, z, xs) if super::pe::is_zip(z) => match xs
                            .iter()
                            .position(is_p)
                        {
                            Some(j)
                                if xs.iter().filter(|x| !is_p(x)).all(|x| projects_only(x, p)) =>
                            {
                                Some(Some(j))
                            }
                            Some(_) => return false,
                            None => None,
                        },
                        _ => None,
                    }
                };
                let Some(path) = path else {
                    if !projects_only(a, p) {
                        return false;
                    }
                    continue;
                };
                let Some(Pattern::Var(q, _)) = (element_reads.then(|| param_of(*op, k)).flatten())
                    .and_then(|j| params.get(j))
                    .map(|x| &x.pat)
                else {
                    return false;
                };
                if !projected_at(body, q, path) {
                    return false;
                }
            }
            projects_only(body, p)
        }
        _ => e.children().all(|c| projects_only(c, p)),
    })
}

/// Whether `q` occurs in `e` only as `q.k` (`path` is `None`), or, for the
/// pair `q` of a zip with the element at `.j`, with `q.j` only as `q.j.k`.
fn projected_at(e: &Expr, q: &Name, path: Option<usize>) -> bool {
    let is_q = |e: &Expr| matches!(&e.kind, ExprKind::Var(n) if n == q);
    guard(|| match (&e.kind, path) {
        (ExprKind::Var(n), _) => n != q,
        (ExprKind::Proj(x, _), None) if is_q(x) => true,
        (ExprKind::Proj(x, i), Some(j)) if is_q(x) => *i != j,
        (ExprKind::Proj(x, _), Some(j)) => match &x.kind {
            ExprKind::Proj(y, i) if is_q(y) && *i == j => true,
            _ => projected_at(x, q, path),
        },
        _ => e.children().all(|c| projected_at(c, q, path)),
    })
}

/// Whether `e` ends in a tuple after its `let`s.
fn ends_in_tuple(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Let { body, .. } => ends_in_tuple(body),
        ExprKind::Tuple(_) => true,
        _ => false,
    }
}

/// `map (g. g.k) P`, `g` a fresh name.
fn component(p: &Name, k: usize, fresh: &mut Names) -> Expr {
    let g = fresh.fresh("g");
    mk(ExprKind::ArrayOp(
        ArrayOp::Map,
        Box::new(mk(ExprKind::Lambda(
            vec![Param {
                pat: Pattern::Var(g.clone(), Span::DUMMY),
                ty: None,
            }],
            Arc::new(mk(ExprKind::Proj(Box::new(var(&g)), k))),
        ))),
        vec![var(p)],
    ))
}

/// Replaces every occurrence of the variable `p` in `e` by `by` (`p` is
/// bound once, outside `e`).
fn substitute(e: &mut Expr, p: &Name, by: &Expr) {
    guard(|| {
        if matches!(&e.kind, ExprKind::Var(n) if n == p) {
            *e = by.clone();
            return;
        }
        for c in super::term::children_mut(e) {
            substitute(c, p, by);
        }
    })
}

/// Appends `c` to the tuple at the end of `e`'s `let`s.
fn push_component(e: &mut Expr, c: Expr) {
    match &mut e.kind {
        ExprKind::Let { body, .. } => push_component(body, c),
        ExprKind::Tuple(es) => es.push(c),
        _ => unreachable!("checked by `map_parts`"),
    }
}

/// What a sibling of `P` must be.
struct Want<'a> {
    op: ArrayOp,
    arrays: &'a [Expr],
    /// `P`'s parameters.
    names: &'a [Name],
    map_body: &'a Expr,
    /// The values of `P`'s `let`s written out ([`let_values`]).
    written_out: &'a [Expr],
    after: &'a [Name],
}

/// The first sibling in `e`, evaluated unconditionally, and its body
/// over `P`'s parameters.
fn find(e: &Expr, want: &Want) -> Option<(Expr, Expr)> {
    guard(|| {
        match &e.kind {
            ExprKind::Lambda(..) => return None,
            ExprKind::If(c, _, _) => return find(c, want),
            ExprKind::ArrayOp(op, f, args) if *op == want.op && same_vars(args, want.arrays) => {
                if let Some(element) = sibling(e, f, want) {
                    return Some((e.clone(), element));
                }
            }
            _ => {}
        }
        let mut out = None;
        for_each_child(e, &mut |c| {
            if out.is_none() {
                out = find(c, want);
            }
        });
        out
    })
}

fn same_vars(a: &[Expr], b: &[Expr]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(
            |(x, y)| matches!((&x.kind, &y.kind), (ExprKind::Var(m), ExprKind::Var(n)) if m == n),
        )
}

/// The body of the sibling `e` (function `f`) over `P`'s parameters, if it
/// may merge.
fn sibling(e: &Expr, f: &Expr, want: &Want) -> Option<Expr> {
    let ExprKind::Lambda(params, body) = &f.kind else {
        return None;
    };
    if params.len() != want.names.len() || !total(body) {
        return None;
    }
    // Free names bound after `P` (its own binders are fresh names too, so
    // they are not among them unless it mentions one from outside).
    let mut own = Vec::new();
    binders(e, &mut own);
    let outside: Vec<Name> = want
        .after
        .iter()
        .filter(|n| !own.contains(n))
        .cloned()
        .collect();
    if mentions(body, &outside) {
        return None;
    }
    let mut element = (**body).clone();
    for (q, n) in params.iter().zip(want.names) {
        let Pattern::Var(m, _) = &q.pat else {
            return None;
        };
        element = rename(element, m, n);
    }
    shares_work(&element, want.map_body, want.written_out).then_some(element)
}

/// Whether `e` can be evaluated without a run-time error: no indexing,
/// no call, no built-in whose size argument may be wrong. (Sizes of
/// `map2` are equal by typing.)
fn total(e: &Expr) -> bool {
    guard(|| {
        let ok = match &e.kind {
            ExprKind::Index(..) | ExprKind::Apply(..) | ExprKind::ArrayLit(_) => false,
            ExprKind::Prim(p, _) if p.can_fail() => false,
            // A `while` loop may run into its iteration limit.
            ExprKind::ArrayOp(op, ..) => !matches!(
                op,
                ArrayOp::Revfold(_) | ArrayOp::While | ArrayOp::Revwhile(_)
            ),
            // `replicate(n, x)` and `iota(n)` of a size (a variable or a
            // length) cannot fail.
            ExprKind::Builtin(Builtin::Replicate | Builtin::Iota, args) => matches!(
                args.first().map(|n| &n.kind),
                Some(ExprKind::Var(_) | ExprKind::Builtin(Builtin::Len, _))
            ),
            ExprKind::Builtin(b, _) => {
                matches!(b, Builtin::Len | Builtin::Shift1L | Builtin::Shift1R)
            }
            _ => true,
        };
        ok && e.children().all(total)
    })
}

/// Whether a subterm of `element` that is a loop or calls a
/// transcendental function occurs in `map_body` too (up to names), or is
/// the value of one of its `let`s written out (`sin(a * c)` where the body
/// has `let x = a * c in … sin(x)`): the next round's CSE shares it then.
fn shares_work(element: &Expr, map_body: &Expr, written_out: &[Expr]) -> bool {
    guard(|| {
        let costly = match &element.kind {
            ExprKind::ArrayOp(..) => true,
            ExprKind::Prim(p, _) => transcendental(*p),
            _ => false,
        };
        if costly && (occurs(element, map_body) || written_out.iter().any(|v| occurs(element, v))) {
            return true;
        }
        element
            .children()
            .any(|c| shares_work(c, map_body, written_out))
    })
}

/// How many nodes a `let` value written out may have
/// ([`let_values`]): enough for the few operations a transcendental call
/// reads, without copying large terms.
const WRITTEN_OUT_NODES: usize = 64;

/// The values of the `let`s that open `body` (a name bound to each), and
/// the components of the tuple they end in, each with the names of the
/// `let`s replaced by their values written out: those of at most
/// [`WRITTEN_OUT_NODES`] nodes.
fn let_values(body: &Expr) -> Vec<Expr> {
    let mut env: Vec<(Name, Expr)> = Vec::new();
    let mut out = Vec::new();
    let mut cur = body;
    while let ExprKind::Let {
        pat, value, body, ..
    } = &cur.kind
    {
        let mut v = (**value).clone();
        for (n, by) in env.iter().rev() {
            substitute(&mut v, n, by);
        }
        if nodes(&v, WRITTEN_OUT_NODES + 1) <= WRITTEN_OUT_NODES {
            if let Pattern::Var(n, _) = pat {
                env.push((n.clone(), v.clone()));
            }
            out.push(v);
        }
        cur = body;
    }
    let tails = match &cur.kind {
        ExprKind::Tuple(es) => es.iter().collect(),
        _ => vec![cur],
    };
    for t in tails {
        let mut v = t.clone();
        for (n, by) in env.iter().rev() {
            substitute(&mut v, n, by);
        }
        if nodes(&v, WRITTEN_OUT_NODES + 1) <= WRITTEN_OUT_NODES {
            out.push(v);
        }
    }
    out
}

/// The number of nodes of `e`, counted up to `limit`.
fn nodes(e: &Expr, limit: usize) -> usize {
    let mut count = 0;
    let mut todo = vec![e];
    while let Some(e) = todo.pop() {
        count += 1;
        if count >= limit {
            break;
        }
        todo.extend(e.children());
    }
    count
}

/// Whether `wanted` occurs in `e` (up to the names of binders).
fn occurs(wanted: &Expr, e: &Expr) -> bool {
    guard(|| Alpha::new(false).eq(e, wanted) || e.children().any(|c| occurs(wanted, c)))
}
