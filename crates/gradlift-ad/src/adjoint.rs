//! Cotangents: the monoid (G, +̂, 0_G) of Figure 4 on every ground type, as
//! terms, and [`Adj`], a cotangent kept symbolic while it is known to be
//! zero or a tuple, so that structural zeros never reach the output.
//!
//! - `0_R = 0`, `0_(G1×…×Gk) = (0_G1, …, 0_Gk)`, `0_[G; n] = replicate(n, 0_G)`.
//! - Integers are not differentiated: the cotangent of a `Z` is a `Z`, and
//!   always `0` (activity analysis keeps every integer inactive, so these
//!   zeros only fill the integer components of tuples); `i +̂ j = i + j`
//!   and `c ·̂ i = i`.
//! - `a +̂ b = a + b` on reals, componentwise on tuples,
//!   `map2 (x, y. x +̂ y) a b` on arrays.
//! - `c ·̂ g` scales a ground value by a real (Figure 4's "map2 * Z G" reading).

use gradlift_lang::build::*;
use gradlift_lang::syntax::*;

use gradlift_lang::names::NameSupply;

/// The structural zero of type `ty`.
pub fn zeros(ty: &Type) -> Expr {
    match ty {
        Type::Real => Expr::structural_zero(),
        Type::Int => int(0),
        Type::Tuple(ts) => Expr::synth(ExprKind::Tuple(ts.iter().map(zeros).collect())),
        Type::Array(t, n) => builtin(Builtin::Replicate, vec![size(n), zeros(t)]),
        Type::Bool | Type::Fun(..) => unreachable!("cotangents have ground types, not {ty}"),
    }
}

/// The zero of the shape of `value` (of type `ty`): Figure 4's
/// `ZerosLike(A) = map (x. 0) A` on arrays. Unlike [`zeros`] it needs no
/// size, so it is right where a size such as `n-1` of `shift1L` would be
/// negative (the shifts leave an empty array empty).
pub fn zeros_like(ty: &Type, value: &Expr, names: &mut NameSupply) -> Expr {
    match ty {
        Type::Real => Expr::structural_zero(),
        Type::Int => int(0),
        Type::Tuple(ts) => Expr::synth(ExprKind::Tuple(
            ts.iter()
                .enumerate()
                .map(|(k, t)| zeros_like(t, &proj(value.clone(), k), names))
                .collect(),
        )),
        Type::Array(t, _) => {
            let x = names.fresh("x");
            let body = zeros_like(t, &var(&x), names);
            array_op(
                ArrayOp::Map,
                lambda(vec![pvar(&x)], body),
                vec![value.clone()],
            )
        }
        Type::Bool | Type::Fun(..) => unreachable!("cotangents have ground types, not {ty}"),
    }
}

/// `a +̂ b` at type `ty`.
pub fn plus(ty: &Type, a: Expr, b: Expr, names: &mut NameSupply) -> Expr {
    match ty {
        Type::Real => add(a, b),
        Type::Int => prim(gradlift_lang::Prim::IAdd, vec![a, b]),
        Type::Tuple(ts) => {
            let parts = ts
                .iter()
                .enumerate()
                .map(|(k, t)| plus(t, proj(a.clone(), k), proj(b.clone(), k), names))
                .collect();
            Expr::synth(ExprKind::Tuple(parts))
        }
        Type::Array(t, _) => {
            let (x, y) = (names.fresh("x"), names.fresh("y"));
            let body = plus(t, var(&x), var(&y), names);
            array_op(
                ArrayOp::Map2,
                lambda(vec![pvar(&x), pvar(&y)], body),
                vec![a, b],
            )
        }
        Type::Bool | Type::Fun(..) => unreachable!("cotangents have ground types, not {ty}"),
    }
}

/// `c ·̂ g`: every real in `g` (of type `ty`) multiplied by the real `c`.
pub fn scale(ty: &Type, c: Expr, g: Expr, names: &mut NameSupply) -> Expr {
    match ty {
        Type::Real => mul(g, c),
        Type::Int => g,
        Type::Tuple(ts) => {
            let parts = ts
                .iter()
                .enumerate()
                .map(|(k, t)| scale(t, c.clone(), proj(g.clone(), k), names))
                .collect();
            Expr::synth(ExprKind::Tuple(parts))
        }
        Type::Array(t, _) => {
            let x = names.fresh("x");
            let body = scale(t, c, var(&x), names);
            array_op(ArrayOp::Map, lambda(vec![pvar(&x)], body), vec![g])
        }
        Type::Bool | Type::Fun(..) => unreachable!("cotangents have ground types, not {ty}"),
    }
}

/// `reduce (+̂) 0_G A` for `A : [G; n]`: the sum of a cotangent array.
pub fn sum(elem: &Type, array: Expr, names: &mut NameSupply) -> Expr {
    let (x, y) = (names.fresh("x"), names.fresh("y"));
    let body = plus(elem, var(&x), var(&y), names);
    array_op(
        ArrayOp::Reduce,
        lambda(vec![pvar(&x), pvar(&y)], body),
        vec![zeros(elem), array],
    )
}

/// A cotangent as the sweep holds it.
#[derive(Clone, Debug)]
pub enum Adj {
    /// Nothing has flowed in: the structural zero.
    Zero,
    /// A term, usually a variable or a constant.
    Val(Expr),
    /// A tuple whose components are kept apart (some may be zero).
    Tuple(Vec<Adj>),
    /// The cotangent of an array that is zero but at a few positions: the
    /// sum of `zᵢ` at position `pᵢ` (integer atoms, each in range), as
    /// indexing leaves it. Kept symbolic so that the reverse of a `map`
    /// whose body reads an array at computed positions scatters the
    /// positions of all its elements once (`Deriver::map_backward`)
    /// rather than summing one array per element.
    Sparse(Vec<(Expr, Expr)>),
}

impl Adj {
    /// Whether nothing has flowed in.
    pub fn is_zero(&self) -> bool {
        match self {
            Adj::Zero => true,
            Adj::Val(_) => false,
            Adj::Tuple(parts) => parts.iter().all(Adj::is_zero),
            Adj::Sparse(at) => at.is_empty(),
        }
    }

    /// The cotangent as a term of type `ty`.
    pub fn into_expr(self, ty: &Type) -> Expr {
        match (self, ty) {
            (Adj::Zero, _) => zeros(ty),
            (Adj::Val(e), _) => e,
            (Adj::Sparse(at), _) => scatter(zeros(ty), at),
            (Adj::Tuple(parts), Type::Tuple(ts)) => Expr::synth(ExprKind::Tuple(
                parts
                    .into_iter()
                    .zip(ts)
                    .map(|(p, t)| p.into_expr(t))
                    .collect(),
            )),
            (Adj::Tuple(_), _) => unreachable!("a tuple cotangent has a tuple type, not {ty}"),
        }
    }

    /// The cotangent of `value` (of type `ty`) as a term, zeros shaped
    /// like `value`.
    pub fn into_expr_like(self, ty: &Type, value: &Expr, names: &mut NameSupply) -> Expr {
        match (self, ty) {
            (Adj::Zero, _) => zeros_like(ty, value, names),
            (Adj::Val(e), _) => e,
            (Adj::Sparse(at), _) => scatter(zeros_like(ty, value, names), at),
            (Adj::Tuple(parts), Type::Tuple(ts)) => Expr::synth(ExprKind::Tuple(
                parts
                    .into_iter()
                    .zip(ts)
                    .enumerate()
                    .map(|(k, (p, t))| p.into_expr_like(t, &proj(value.clone(), k), names))
                    .collect(),
            )),
            (Adj::Tuple(_), _) => unreachable!("a tuple cotangent has a tuple type, not {ty}"),
        }
    }

    /// Component `k` of a tuple cotangent of type `ty`.
    pub fn component(&self, k: usize) -> Adj {
        match self {
            Adj::Zero => Adj::Zero,
            Adj::Val(e) => Adj::Val(proj(e.clone(), k)),
            Adj::Tuple(parts) => parts[k].clone(),
            Adj::Sparse(_) => unreachable!("an array cotangent has no components"),
        }
    }

    /// The cotangent of a tuple of `arity` components that is `self` at
    /// position `k` and zero elsewhere (`[k] z` of Figure 4).
    pub fn at(self, k: usize, arity: usize) -> Adj {
        let mut parts = vec![Adj::Zero; arity];
        parts[k] = self;
        Adj::Tuple(parts)
    }
}

/// `c ·̂ z` for a symbolic cotangent.
pub fn scale_adj(ty: &Type, c: Expr, z: &Adj, names: &mut NameSupply) -> Adj {
    match (z, ty) {
        (Adj::Zero, _) => Adj::Zero,
        (Adj::Val(e), _) => Adj::Val(scale(ty, c, e.clone(), names)),
        (Adj::Tuple(parts), Type::Tuple(ts)) => Adj::Tuple(
            parts
                .iter()
                .zip(ts)
                .map(|(p, t)| scale_adj(t, c.clone(), p, names))
                .collect(),
        ),
        (Adj::Tuple(_), _) => unreachable!("a tuple cotangent has a tuple type, not {ty}"),
        (Adj::Sparse(at), Type::Array(elem, _)) => Adj::Sparse(
            at.iter()
                .map(|(p, z)| (p.clone(), scale(elem, c.clone(), z.clone(), names)))
                .collect(),
        ),
        (Adj::Sparse(_), _) => unreachable!("a sparse cotangent has an array type, not {ty}"),
    }
}

/// Figure 4's cotangent of an element read at `position` of an array of
/// `n` elements of type `elem`: `map (i. if i == position then z else 0)
/// (iota(n))`, which the simplifier and the native backend read element by
/// element without storing it.
pub fn one_hot(elem: &Type, n: &Size, position: Expr, z: Expr, names: &mut NameSupply) -> Expr {
    let i = names.fresh("i");
    let pick = cond(
        prim(gradlift_lang::Prim::IEq, vec![var(&i), position]),
        z,
        zeros(elem),
    );
    map1(&i, pick, builtin(Builtin::Iota, vec![size(n)]))
}

/// `base` (an array) plus the sparse cotangent `at`: one
/// `reduce_by_index`, O(len(base) + positions). An empty `base` is
/// returned as it is: no read of an empty array succeeded, so its only
/// positions are the zeros an `if` pads its branches' records with
/// (`rules/cond.rs`), which have nowhere to go.
pub fn scatter(base: Expr, at: Vec<(Expr, Expr)>) -> Expr {
    let (ps, zs): (Vec<Expr>, Vec<Expr>) = at.into_iter().unzip();
    scatter_arrays(
        base,
        Expr::synth(ExprKind::ArrayLit(ps)),
        Expr::synth(ExprKind::ArrayLit(zs)),
    )
}

/// `reduce_by_index(base, (+), positions, values)`, unless `base` is
/// empty (see [`scatter`]). `base` is duplicated: an atom or a zero array.
pub fn scatter_arrays(base: Expr, positions: Expr, values: Expr) -> Expr {
    let empty = prim(
        gradlift_lang::Prim::IEq,
        vec![builtin(Builtin::Len, vec![base.clone()]), int(0)],
    );
    let added = reduce_by_index(gradlift_lang::Prim::Add, base.clone(), positions, values);
    cond(empty, base, added)
}

/// Whether `e` is an atom: a variable or a constant (safe to duplicate).
pub fn is_atom(e: &Expr) -> bool {
    matches!(
        e.kind,
        ExprKind::Var(_) | ExprKind::Const(_) | ExprKind::Int(_)
    )
}
