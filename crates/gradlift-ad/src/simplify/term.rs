//! Term utilities shared by the simplification passes: `let` blocks,
//! constructors, taking owned terms apart, visiting children, and a few
//! facts about primitives and built-ins.
//!
//! Every walk here goes through [`guard`] and walks `let` chains with a
//! loop, so terms of any depth are safe.

use gradlift_lang::deep::guard;
use gradlift_lang::syntax::*;
use gradlift_lang::{Prim, Span};
use std::sync::Arc;

/// One `let pat = value` of a block.
#[derive(Debug)]
pub(super) struct Binding {
    pub pat: Pattern,
    pub value: Expr,
}

/// A node without a source position.
pub(super) fn mk(kind: ExprKind) -> Expr {
    Expr::synth(kind)
}

/// The variable `name`.
pub(super) fn var(name: &Name) -> Expr {
    mk(ExprKind::Var(name.clone()))
}

/// A constant; a zero marked `structural` carries [`Span::STRUCTURAL`].
pub(super) fn constant(value: f64, structural: bool) -> Expr {
    if structural && value == 0.0 {
        Expr::new(ExprKind::Const(value), Span::STRUCTURAL)
    } else {
        mk(ExprKind::Const(value))
    }
}

/// `let b₁ in … let bₙ in body`; a block ending `let x = e in x` ends in
/// `e` (nothing before the last binding can mention `x`).
pub(super) fn wrap(mut bindings: Vec<Binding>, body: Expr) -> Expr {
    let mut out = body;
    if let (
        Some(Binding {
            pat: Pattern::Var(x, _),
            ..
        }),
        ExprKind::Var(y),
    ) = (bindings.last(), &out.kind)
    {
        if x == y {
            out = bindings.pop().expect("checked above").value;
        }
    }
    for b in bindings.into_iter().rev() {
        out = mk(ExprKind::Let {
            pat: b.pat,
            ty: None,
            value: Box::new(b.value),
            body: Box::new(out),
        });
    }
    out
}

/// The node's kind, taken out of an owned term (`Expr` has a `Drop`, so
/// its fields cannot be moved out directly).
pub(super) fn into_kind(mut e: Expr) -> ExprKind {
    std::mem::replace(&mut e.kind, ExprKind::Const(0.0))
}

/// The body of a lambda, unshared if possible.
pub(super) fn unshare(body: Arc<Expr>) -> Expr {
    Arc::try_unwrap(body).unwrap_or_else(|shared| (*shared).clone())
}

/// Splits a `let` chain into its bindings and its final body.
pub(super) fn split_lets(mut e: Expr) -> (Vec<Binding>, Expr) {
    let mut bindings = Vec::new();
    while matches!(e.kind, ExprKind::Let { .. }) {
        let ExprKind::Let {
            pat, value, body, ..
        } = into_kind(e)
        else {
            unreachable!("checked to be a let")
        };
        bindings.push(Binding { pat, value: *value });
        e = *body;
    }
    (bindings, e)
}

/// The result of a chain of `let`s: its innermost body.
pub(super) fn result(mut e: &Expr) -> &Expr {
    while let ExprKind::Let { body, .. } = &e.kind {
        e = body;
    }
    e
}

/// The `let` chain `e` without the bindings that neither its result nor
/// a binding kept reads (the dead-let rule, on one chain). Conservative
/// where names are reused: a binding is dropped only if none of its names
/// occurs after it at all.
pub(super) fn live_only(e: Expr) -> Expr {
    let (bindings, body) = split_lets(e);
    let mut read = Vec::new();
    names_in(&body, &mut read);
    let mut read: crate::simplify::names::FxSet<Name> = read.into_iter().collect();
    let mut kept = Vec::with_capacity(bindings.len());
    let mut bound = Vec::new();
    for b in bindings.into_iter().rev() {
        bound.clear();
        b.pat.names(&mut bound);
        if bound.iter().any(|x| read.contains(x)) {
            let mut names = Vec::new();
            names_in(&b.value, &mut names);
            read.extend(names);
            kept.push(b);
        }
    }
    kept.reverse();
    wrap(kept, body)
}

/// Rebuilds an owned node with `f` applied to each child (binders kept).
/// `let` chains should be taken apart with [`split_lets`] first; a `let`
/// met here is treated as one node.
pub(super) fn map_children(e: Expr, f: &mut dyn FnMut(Expr) -> Expr) -> Expr {
    let span = e.span;
    let mut all = |xs: Vec<Expr>| xs.into_iter().map(&mut *f).collect::<Vec<_>>();
    let kind = match into_kind(e) {
        k @ (ExprKind::Const(_)
        | ExprKind::Int(_)
        | ExprKind::Literal(_)
        | ExprKind::Var(_)
        | ExprKind::PrimFn(_)) => k,
        ExprKind::Prim(p, xs) => ExprKind::Prim(p, all(xs)),
        ExprKind::Tuple(xs) => ExprKind::Tuple(all(xs)),
        ExprKind::ArrayLit(xs) => ExprKind::ArrayLit(all(xs)),
        ExprKind::Builtin(b, xs) => ExprKind::Builtin(b, all(xs)),
        ExprKind::Let {
            pat,
            ty,
            value,
            body,
        } => ExprKind::Let {
            pat,
            ty,
            value: Box::new(f(*value)),
            body: Box::new(f(*body)),
        },
        ExprKind::Proj(x, k) => ExprKind::Proj(Box::new(f(*x)), k),
        ExprKind::Index(x, k) => ExprKind::Index(Box::new(f(*x)), k),
        ExprKind::If(c, t, e) => ExprKind::If(Box::new(f(*c)), Box::new(f(*t)), Box::new(f(*e))),
        ExprKind::Lambda(ps, body) => ExprKind::Lambda(ps, Arc::new(f(unshare(body)))),
        ExprKind::Apply(g, xs) => {
            let g = f(*g);
            ExprKind::Apply(Box::new(g), xs.into_iter().map(&mut *f).collect())
        }
        ExprKind::ArrayOp(op, g, xs) => {
            let g = f(*g);
            ExprKind::ArrayOp(op, Box::new(g), xs.into_iter().map(&mut *f).collect())
        }
        ExprKind::Derive(d, g, xs) => {
            let g = f(*g);
            ExprKind::Derive(d, Box::new(g), xs.into_iter().map(&mut *f).collect())
        }
    };
    Expr::new(kind, span)
}

/// Calls `f` on each child of `e`, left to right, without allocating
/// ([`Expr::children`]).
pub(super) fn for_each_child<'a>(e: &'a Expr, f: &mut dyn FnMut(&'a Expr)) {
    e.children().for_each(f)
}

/// A variable or a constant.
pub(super) fn is_atom(e: &Expr) -> bool {
    matches!(
        e.kind,
        ExprKind::Var(_) | ExprKind::Const(_) | ExprKind::Int(_)
    )
}

/// Whether argument `i` of built-in `b` is a size expression (it must stay
/// one: never bound by `let`, never replaced by a variable).
pub(super) fn is_size_arg(b: Builtin, i: usize) -> bool {
    i == 0 && b.size_first()
}

/// Whether a real primitive is commutative bit for bit (`a + b` and
/// `b + a` round alike; `min`/`max` are not, ties follow the first
/// argument).
pub(super) fn is_commutative(p: Prim) -> bool {
    matches!(p, Prim::Add | Prim::Mul)
}

/// Applies `f` to every block of `let`s in `e` (its bindings and body),
/// inner blocks first.
pub(super) fn each_block(e: Expr, f: &mut dyn FnMut(&mut Vec<Binding>, &mut Expr)) -> Expr {
    guard(|| {
        if !matches!(e.kind, ExprKind::Let { .. }) {
            return map_children(e, &mut |c| each_block(c, f));
        }
        let (mut bindings, body) = split_lets(e);
        for b in &mut bindings {
            let v = std::mem::replace(&mut b.value, mk(ExprKind::Const(0.0)));
            b.value = each_block(v, f);
        }
        let mut body = each_block(body, f);
        f(&mut bindings, &mut body);
        wrap(bindings, body)
    })
}

/// Whether `p` is a transcendental function (a library call or a sequence
/// with branches of its own, whose result is worth storing rather than
/// computing twice): not `cheap` in the primitive table.
pub(super) fn transcendental(p: Prim) -> bool {
    !p.info().cheap
}

/// Whether `e` mentions any of `names` free.
pub(super) fn mentions(e: &Expr, names: &[Name]) -> bool {
    guard(|| {
        let mut e = e;
        while let ExprKind::Let { value, body, .. } = &e.kind {
            if mentions(value, names) {
                return true;
            }
            e = body;
        }
        match &e.kind {
            ExprKind::Var(n) => names.contains(n),
            _ => {
                let mut found = false;
                for_each_child(e, &mut |c| found = found || mentions(c, names));
                found
            }
        }
    })
}

/// The length of the array `e` as `len(x) + offset`, for a variable `x`
/// that `e` is computed from elementwise (through `map`, `map2`, shifts
/// and scans), without computing `e`.
pub(super) fn length_of(e: &Expr) -> Option<(Name, i64)> {
    guard(|| match &e.kind {
        ExprKind::Var(n) => Some((n.clone(), 0)),
        ExprKind::ArrayOp(ArrayOp::Map | ArrayOp::Map2, _, xs) => xs.iter().find_map(length_of),
        ExprKind::ArrayOp(ArrayOp::Scanl | ArrayOp::Scanr, _, xs) => {
            length_of(&xs[1]).map(|(x, k)| (x, k + 1))
        }
        ExprKind::Builtin(Builtin::Shift1L | Builtin::Shift1R, xs) => {
            length_of(&xs[0]).map(|(x, k)| (x, k - 1))
        }
        ExprKind::Builtin(Builtin::Gather | Builtin::MatMul, xs) => length_of(&xs[1]),
        ExprKind::Builtin(Builtin::ReduceByIndex(_), xs) => length_of(&xs[0]),
        _ => None,
    })
}

/// `len(x) + offset`, a size expression.
pub(super) fn len_plus(x: Name, offset: i64) -> Expr {
    let len = mk(ExprKind::Builtin(Builtin::Len, vec![var(&x)]));
    match offset {
        0 => len,
        k => {
            let op = if k > 0 { Prim::IAdd } else { Prim::ISub };
            mk(ExprKind::Prim(op, vec![len, mk(ExprKind::Int(k.abs()))]))
        }
    }
}

/// The children of `e`, to rewrite in place.
pub(super) fn children_mut(e: &mut Expr) -> Vec<&mut Expr> {
    match &mut e.kind {
        ExprKind::Const(_)
        | ExprKind::Int(_)
        | ExprKind::Literal(_)
        | ExprKind::Var(_)
        | ExprKind::PrimFn(_) => Vec::new(),
        ExprKind::Prim(_, xs)
        | ExprKind::Tuple(xs)
        | ExprKind::ArrayLit(xs)
        | ExprKind::Builtin(_, xs) => xs.iter_mut().collect(),
        ExprKind::Let { value, body, .. } => vec![&mut **value, &mut **body],
        ExprKind::Proj(x, _) | ExprKind::Index(x, _) => vec![&mut **x],
        ExprKind::If(c, t, f) => vec![&mut **c, &mut **t, &mut **f],
        ExprKind::Lambda(_, body) => vec![Arc::make_mut(body)],
        ExprKind::Apply(f, xs) | ExprKind::ArrayOp(_, f, xs) | ExprKind::Derive(_, f, xs) => {
            std::iter::once(&mut **f).chain(xs.iter_mut()).collect()
        }
    }
}

/// Every name `e` binds or reads.
pub(super) fn names_in(e: &Expr, out: &mut Vec<Name>) {
    guard(|| {
        match &e.kind {
            ExprKind::Var(x) => out.push(x.clone()),
            ExprKind::Let { pat, .. } => pat.names(out),
            ExprKind::Lambda(params, _) => params.iter().for_each(|q| q.pat.names(out)),
            _ => {}
        }
        for c in e.children() {
            names_in(c, out);
        }
    })
}
