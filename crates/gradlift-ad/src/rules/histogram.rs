//! `gather` and `reduce_by_index`, each the other's transpose; the rules of
//! `*`, `min` and `max` follow "Reverse-Mode AD of Reduce-by-Index and Scan
//! in Futhark" (Schenck et al.).
//!
//! Forward `R = reduce_by_index(D, op, I, V)`, `Rⱼ = Dⱼ op (op of Vᵢ, Iᵢ = j)`;
//! `D : [T; k]`, `I : [Z; m]`, `V : [T; m]`. Reverse, for the cotangent `Z`
//! of the result (`G[I]` is `gather(G, I)`):
//!
//! | forward | reverse |
//! | --- | --- |
//! | `r = gather(A, I)` | `Ā += reduce_by_index(0_A, +, I, Z)` |
//! | `R`, `op = +` | `D̄ += Z`, `V̄ += Z[I]` |
//! | `R`, `op = max` (`min`) | `W = reduce_by_index(∞, min, I, map (i. if Vᵢ == R[Iᵢ] ∧ D[Iᵢ] ≠ R[Iᵢ] then i else ∞) (iota m))`; `D̄ⱼ += if Dⱼ == Rⱼ then Zⱼ else 0`; `V̄ᵢ += if W[Iᵢ] == i then Z[Iᵢ] else 0` |
//! | `R`, `op = *` | `C = reduce_by_index([Dⱼ == 0], +, I, [Vᵢ == 0])` (zeros per bin), `P = reduce_by_index(nz(D), *, I, nz(V))` (the product of the non-zeros, `nz(x) = if x == 0 then 1 else x`); for a contributor `x` of bin `j`, `x̄ += Zⱼ · (if Cⱼ == 0 then Pⱼ / x else if Cⱼ == 1 ∧ x == 0 then Pⱼ else 0)`, the zeros of the last case written so that their derivatives are right ([`product_share`]) |
//!
//! Every rule costs O(k + m): the cotangent of `m` lookups into `n`
//! elements is one scatter, never `m` one-hot arrays.
//!
//! An extremum's cotangent goes to one contributor of each bin, the first
//! in the order of the fold (`D` first, then `V` in index order), so ties
//! are not counted twice: a subgradient. A bin whose value is a NaN passes
//! no cotangent. Positions are compared as reals, exact below 2⁵³ values.

use crate::adjoint::{zeros, Adj};
use crate::direct::{Arg, Deriver, Sweep};
use gradlift_lang::build::*;
use gradlift_lang::names::NameSupply;
use gradlift_lang::syntax::*;
use gradlift_lang::Prim;

/// The position (a real, `∞` for none) of the first value of each bin of
/// `r = reduce_by_index(d, op, idx, v)` that equals the bin's result, in
/// the bins whose initial value does not: where an extremum's derivative
/// goes. `d`, `idx`, `v`, `r` are atoms.
pub(crate) fn first_winners(
    d: &Expr,
    idx: &Expr,
    v: &Expr,
    r: &Expr,
    names: &mut NameSupply,
) -> Expr {
    let i = names.fresh("i");
    let bin = get(idx.clone(), var(&i));
    let wins = prim(
        Prim::And,
        vec![
            prim(
                Prim::Eq,
                vec![get(v.clone(), var(&i)), get(r.clone(), bin.clone())],
            ),
            prim(
                Prim::Ne,
                vec![get(d.clone(), bin.clone()), get(r.clone(), bin)],
            ),
        ],
    );
    let candidates = map1(
        &i,
        cond(wins, prim(Prim::ToReal, vec![var(&i)]), real(f64::INFINITY)),
        builtin(
            Builtin::Iota,
            vec![builtin(Builtin::Len, vec![idx.clone()])],
        ),
    );
    let none = builtin(
        Builtin::Replicate,
        vec![builtin(Builtin::Len, vec![d.clone()]), real(f64::INFINITY)],
    );
    reduce_by_index(Prim::Min, none, idx.clone(), candidates)
}

/// `map (x. if x == 0 then 1 else f(x)) a`.
fn zero_as_one(a: &Expr, f: &dyn Fn(&Name) -> Expr, names: &mut NameSupply) -> Expr {
    let x = names.fresh("x");
    let is_zero = prim(Prim::Eq, vec![var(&x), real(0.0)]);
    map1(&x, cond(is_zero, real(1.0), f(&x)), a.clone())
}

/// The number of zeros (a real) in each bin of `reduce_by_index(d, *, idx, v)`,
/// the initial value included.
pub(crate) fn zero_counts(d: &Expr, idx: &Expr, v: &Expr, names: &mut NameSupply) -> Expr {
    let (zd, zv) = (
        zero_as_one(d, &|_| real(0.0), names),
        zero_as_one(v, &|_| real(0.0), names),
    );
    reduce_by_index(Prim::Add, zd, idx.clone(), zv)
}

/// The product of the non-zero contributors of each bin.
pub(crate) fn nonzero_products(d: &Expr, idx: &Expr, v: &Expr, names: &mut NameSupply) -> Expr {
    let (nd, nv) = (zero_as_one(d, &var, names), zero_as_one(v, &var, names));
    reduce_by_index(Prim::Mul, nd, idx.clone(), nv)
}

/// The sum of the contributors of each bin that are zero: 0, whose
/// tangent (or cotangent) is theirs, so that [`product_share`] stays
/// exact one derivative further (a Hessian through a product of bins).
pub(crate) fn zero_values(d: &Expr, idx: &Expr, v: &Expr, names: &mut NameSupply) -> Expr {
    let mut zeros_only = |a: &Expr| {
        let x = names.fresh("x");
        let is_zero = prim(Prim::Eq, vec![var(&x), real(0.0)]);
        map1(&x, cond(is_zero, var(&x), real(0.0)), a.clone())
    };
    let (zd, zv) = (zeros_only(d), zeros_only(v));
    reduce_by_index(Prim::Add, zd, idx.clone(), zv)
}

/// `∂(bin product)/∂x` for a contributor `x` of a bin with `c` zeros, the
/// product `p` of its non-zeros and the zero contributors summing to `z`
/// ([`zero_values`]): `p / x` without zeros; with one zero, `p` for the
/// zero and `p / x · z` (a zero) for the others; with two, `p · (z - x)`
/// (a zero) for each zero; 0 otherwise. The zeros written as products
/// with `z` carry the derivative of the product with respect to the zero
/// contributors, so the second derivatives are exact too.
pub(crate) fn product_share(x: Expr, c: Expr, p: Expr, z: Expr) -> Expr {
    let is = |e: &Expr, k: f64| prim(Prim::Eq, vec![e.clone(), real(k)]);
    let x_is_zero = is(&x, 0.0);
    let one_zero = cond(
        x_is_zero.clone(),
        p.clone(),
        mul(prim(Prim::Div, vec![p.clone(), x.clone()]), z.clone()),
    );
    let two_zeros = cond(
        x_is_zero,
        mul(p.clone(), prim(Prim::Sub, vec![z, x.clone()])),
        real(0.0),
    );
    cond(
        is(&c, 0.0),
        prim(Prim::Div, vec![p, x]),
        cond(
            is(&c, 1.0),
            one_zero,
            cond(is(&c, 2.0), two_zeros, real(0.0)),
        ),
    )
}

impl Deriver {
    /// `r = gather(A, I)`: a scatter-add of the cotangent.
    pub(crate) fn gather_backward(&mut self, sw: &mut Sweep, args: Vec<Arg>, z: Expr) {
        let ((a, a_ty), (idx, _)) = (args[0].clone(), args[1].clone());
        let scattered = reduce_by_index(Prim::Add, zeros(&a_ty), idx, z);
        self.add(sw, &a, &a_ty, Adj::Val(scattered));
    }

    /// `R = reduce_by_index(D, op, I, V)`, `out` naming `R`.
    pub(crate) fn reduce_by_index_backward(
        &mut self,
        sw: &mut Sweep,
        op: Prim,
        args: Vec<Arg>,
        out: &Expr,
        z: Expr,
    ) {
        let ((d, d_ty), (idx, _), (v, v_ty)) = (args[0].clone(), args[1].clone(), args[2].clone());
        let m = builtin(Builtin::Len, vec![idx.clone()]);
        let k = builtin(Builtin::Len, vec![d.clone()]);
        let bin = |i: &Name| get(idx.clone(), var(i));
        let (to_d, to_v) = match op {
            Prim::Add => (z.clone(), builtin(Builtin::Gather, vec![z, idx])),
            Prim::Max | Prim::Min => {
                let first = first_winners(&d, &idx, &v, out, &mut self.names);
                let first = self.bind(&mut sw.rev, "w", first);
                let j = self.names.fresh("j");
                let initial_wins = prim(
                    Prim::Eq,
                    vec![get(d.clone(), var(&j)), get(out.clone(), var(&j))],
                );
                let to_d = map1(
                    &j,
                    cond(initial_wins, get(z.clone(), var(&j)), real(0.0)),
                    builtin(Builtin::Iota, vec![k]),
                );
                let i = self.names.fresh("i");
                let wins = prim(
                    Prim::Eq,
                    vec![get(first, bin(&i)), prim(Prim::ToReal, vec![var(&i)])],
                );
                let to_v = map1(
                    &i,
                    cond(wins, get(z, bin(&i)), real(0.0)),
                    builtin(Builtin::Iota, vec![m]),
                );
                (to_d, to_v)
            }
            Prim::Mul => {
                let counts = zero_counts(&d, &idx, &v, &mut self.names);
                let counts = self.bind(&mut sw.rev, "c", counts);
                let products = nonzero_products(&d, &idx, &v, &mut self.names);
                let products = self.bind(&mut sw.rev, "p", products);
                let zero = zero_values(&d, &idx, &v, &mut self.names);
                let zero = self.bind(&mut sw.rev, "z", zero);
                // The cotangent of a contributor `x` of bin `j`.
                let share = |x: Expr, j: Expr| {
                    let factor = product_share(
                        x,
                        get(counts.clone(), j.clone()),
                        get(products.clone(), j.clone()),
                        get(zero.clone(), j.clone()),
                    );
                    mul(get(z.clone(), j), factor)
                };
                let j = self.names.fresh("j");
                let to_d = map1(
                    &j,
                    share(get(d.clone(), var(&j)), var(&j)),
                    builtin(Builtin::Iota, vec![k]),
                );
                let i = self.names.fresh("i");
                let to_v = map1(
                    &i,
                    share(get(v.clone(), var(&i)), bin(&i)),
                    builtin(Builtin::Iota, vec![m]),
                );
                (to_d, to_v)
            }
            _ => unreachable!("the type checker admits + * min max"),
        };
        self.add(sw, &d, &d_ty, Adj::Val(to_d));
        self.add(sw, &v, &v_ty, Adj::Val(to_v));
    }
}
