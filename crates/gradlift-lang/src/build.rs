//! Constructors for terms built by passes (no source position).

use crate::prim::Prim;
use crate::syntax::*;
use std::sync::Arc;

/// A real constant.
pub fn real(x: f64) -> Expr {
    Expr::synth(ExprKind::Const(x))
}

/// A variable.
pub fn var(n: &Name) -> Expr {
    Expr::synth(ExprKind::Var(n.clone()))
}

/// A primitive applied to arguments.
pub fn prim(p: Prim, args: Vec<Expr>) -> Expr {
    Expr::synth(ExprKind::Prim(p, args))
}

/// `a + b`.
pub fn add(a: Expr, b: Expr) -> Expr {
    prim(Prim::Add, vec![a, b])
}

/// `a * b`.
pub fn mul(a: Expr, b: Expr) -> Expr {
    prim(Prim::Mul, vec![a, b])
}

/// `-a`.
pub fn neg(a: Expr) -> Expr {
    prim(Prim::Neg, vec![a])
}

/// `if c then t else f`.
pub fn cond(c: Expr, t: Expr, f: Expr) -> Expr {
    Expr::synth(ExprKind::If(Box::new(c), Box::new(t), Box::new(f)))
}

/// A pattern binding one name.
pub fn pvar(n: &Name) -> Pattern {
    Pattern::Var(n.clone(), Default::default())
}

/// A tuple pattern.
pub fn ptuple(ps: Vec<Pattern>) -> Pattern {
    Pattern::Tuple(ps, Default::default())
}

/// `let pat = value in body`.
pub fn let_in(pat: Pattern, value: Expr, body: Expr) -> Expr {
    Expr::synth(ExprKind::Let {
        pat,
        ty: None,
        value: Box::new(value),
        body: Box::new(body),
    })
}

/// An untyped lambda (the function argument of an array operation).
pub fn lambda(params: Vec<Pattern>, body: Expr) -> Expr {
    let params = params
        .into_iter()
        .map(|pat| Param { pat, ty: None })
        .collect();
    Expr::synth(ExprKind::Lambda(params, Arc::new(body)))
}

/// A lambda with typed parameters (a Target function value).
pub fn typed_lambda(params: Vec<(Name, Type)>, body: Expr) -> Expr {
    let params = params
        .into_iter()
        .map(|(n, t)| Param {
            pat: pvar(&n),
            ty: Some(t),
        })
        .collect();
    Expr::synth(ExprKind::Lambda(params, Arc::new(body)))
}

/// `f(args)`.
pub fn apply(f: Expr, args: Vec<Expr>) -> Expr {
    Expr::synth(ExprKind::Apply(Box::new(f), args))
}

/// A tuple; a single element is returned as is.
pub fn tuple(mut es: Vec<Expr>) -> Expr {
    if es.len() == 1 {
        es.pop().expect("one element")
    } else {
        Expr::synth(ExprKind::Tuple(es))
    }
}

/// `e.k`.
pub fn proj(e: Expr, k: usize) -> Expr {
    Expr::synth(ExprKind::Proj(Box::new(e), k))
}

/// `A[k]`.
pub fn index(a: Expr, k: i64) -> Expr {
    Expr::synth(ExprKind::Index(Box::new(a), k))
}

/// An array operation.
pub fn array_op(op: ArrayOp, f: Expr, args: Vec<Expr>) -> Expr {
    Expr::synth(ExprKind::ArrayOp(op, Box::new(f), args))
}

/// A built-in.
pub fn builtin(b: Builtin, args: Vec<Expr>) -> Expr {
    Expr::synth(ExprKind::Builtin(b, args))
}

/// `A[i]`, a computed index.
pub fn get(a: Expr, i: Expr) -> Expr {
    builtin(Builtin::Get, vec![a, i])
}

/// `reduce_by_index(dest, (p), idx, vals)`.
pub fn reduce_by_index(p: Prim, dest: Expr, idx: Expr, vals: Expr) -> Expr {
    builtin(Builtin::ReduceByIndex(p), vec![dest, idx, vals])
}

/// `map (x. body) A`.
pub fn map1(x: &Name, body: Expr, a: Expr) -> Expr {
    array_op(ArrayOp::Map, lambda(vec![pvar(x)], body), vec![a])
}

/// An integer constant.
pub fn int(k: i64) -> Expr {
    Expr::synth(ExprKind::Int(k))
}

/// A size as an integer expression (`n + 1`, `2*m`, `3`).
pub fn size(n: &Size) -> Expr {
    let mut acc: Option<Expr> = None;
    for (v, &k) in &n.terms {
        let (term, negative) = match k {
            1 => (var(v), false),
            -1 => (var(v), true),
            _ => (prim(Prim::IMul, vec![int(k.abs()), var(v)]), k < 0),
        };
        acc = Some(match (acc, negative) {
            (None, false) => term,
            (None, true) => prim(Prim::INeg, vec![term]),
            (Some(a), false) => prim(Prim::IAdd, vec![a, term]),
            (Some(a), true) => prim(Prim::ISub, vec![a, term]),
        });
    }
    match acc {
        None => int(n.constant),
        Some(a) if n.constant == 0 => a,
        Some(a) if n.constant > 0 => prim(Prim::IAdd, vec![a, int(n.constant)]),
        Some(a) => prim(Prim::ISub, vec![a, int(-n.constant)]),
    }
}
