//! Array constructs without a function argument.
//!
//! | forward | reverse, for the cotangent `Z` of the result |
//! | --- | --- |
//! | `r = [e₁, …, eₖ]` | `ēᵢ += Z[i]` |
//! | `r = A[k]`, `A : [T; n]` | `Ā += map (i. if i == k then Z else 0_T) (iota(n))` (`k < 0` counts from the end; integer comparison) |
//! | `r = A[i]`, `i` computed | `Ā += Z at i`: a sparse cotangent ([`Adj::Sparse`]), one `reduce_by_index` when it becomes a term |
//! | `r = transpose(c, M)` | `M̄ += transpose(len(M), Z)` |
//! | `r = matmul(n, A, B)` | `Ā += matmul(len(B), Z, transpose(n, B))`, `B̄ += matmul(n, transpose(len(B), A), Z)` |
//! | `r = replicate(n, e)` | `ē += reduce (+̂) 0 Z` |
//! | `r = concat(A, B)` | `Ā += take(len(A), Z)`, `B̄ += drop(len(A), Z)` |
//! | `r = take(k, A)` | `Ā += concat(Z, drop(k, ZerosLike(A)))` |
//! | `r = drop(k, A)` | `Ā += concat(take(k, ZerosLike(A)), Z)` |
//! | `r = shift1L A` | `Ā += if len(A) == 0 then ZerosLike(A) else concat([0_T], Z)` |
//! | `r = shift1R A` | `Ā += if len(A) == 0 then ZerosLike(A) else concat(Z, [0_T])` |
//!
//! The shifts leave an empty array empty (Figure 3), so their reverse
//! checks for it: `concat([0], Z)` would have length 1 there.

use crate::adjoint::{one_hot, zeros, Adj};
use crate::direct::{Arg, Deriver, Sweep};
use gradlift_lang::build::*;
use gradlift_lang::syntax::*;
use gradlift_lang::Prim;

impl Deriver {
    pub(crate) fn index_backward(
        &mut self,
        sw: &mut Sweep,
        (of, of_ty): Arg,
        k: i64,
        ty: &Type,
        z: Adj,
    ) {
        if matches!(&of.kind, ExprKind::Var(n) if self.sparse_scope.contains(n)) {
            // `reduce_by_index` reads a negative position from the end.
            let z = self.atomize_val(sw, ty, z);
            self.add(sw, &of, &of_ty, Adj::Sparse(vec![(int(k), z)]));
            return;
        }
        let position = if k >= 0 {
            int(k)
        } else {
            prim(
                Prim::IAdd,
                vec![builtin(Builtin::Len, vec![of.clone()]), int(k)],
            )
        };
        self.one_hot_backward(sw, (of, of_ty), position, ty, z);
    }

    /// `Ā += map (j. if j == position then Z else 0_T) (iota(n))`.
    fn one_hot_backward(
        &mut self,
        sw: &mut Sweep,
        (of, of_ty): Arg,
        position: Expr,
        ty: &Type,
        z: Adj,
    ) {
        let Type::Array(elem, n) = &of_ty else {
            unreachable!("indexing an array")
        };
        let z = self.atomize_val(sw, ty, z);
        let hot = one_hot(elem, n, position, z, &mut self.names);
        self.add(sw, &of, &of_ty, Adj::Val(hot));
    }

    /// `r = A[i]`: the cotangent `Z` at `i`, kept sparse ([`Adj::Sparse`]).
    /// The index stays as it is: `reduce_by_index`, which the sparse
    /// cotangent becomes, reads a negative index from the end as indexing
    /// does, and `i` was in range for `A[i]` to have a value.
    pub(crate) fn get_backward(&mut self, sw: &mut Sweep, args: Vec<Arg>, ty: &Type, z: Adj) {
        let ((a, a_ty), i) = (args[0].clone(), args[1].0.clone());
        let z = self.atomize_val(sw, ty, z);
        self.add(sw, &a, &a_ty, Adj::Sparse(vec![(i, z)]));
    }

    /// The cotangent as an atom.
    fn atomize_val(&mut self, sw: &mut Sweep, ty: &Type, z: Adj) -> Expr {
        let e = z.into_expr(ty);
        self.bind(&mut sw.rev, "z", e)
    }

    pub(crate) fn builtin_backward(
        &mut self,
        sw: &mut Sweep,
        b: Builtin,
        args: Vec<Arg>,
        ty: &Type,
        z: Adj,
    ) {
        let z = self.atomize_val(sw, ty, z);
        let Type::Array(elem, _) = ty else {
            unreachable!("these built-ins return arrays")
        };
        match b {
            Builtin::Replicate => {
                let (e, t) = &args[1];
                let total = crate::adjoint::sum(t, z, &mut self.names);
                self.add(sw, e, t, Adj::Val(total));
            }
            Builtin::Concat => {
                let (a, at) = args[0].clone();
                let (bb, bt) = args[1].clone();
                let n = builtin(Builtin::Len, vec![a.clone()]);
                self.add(
                    sw,
                    &a,
                    &at,
                    Adj::Val(builtin(Builtin::Take, vec![n.clone(), z.clone()])),
                );
                self.add(sw, &bb, &bt, Adj::Val(builtin(Builtin::Drop, vec![n, z])));
            }
            Builtin::Take | Builtin::Drop => {
                let k = args[0].0.clone();
                let (a, at) = args[1].clone();
                let none = crate::adjoint::zeros_like(&at, &a, &mut self.names);
                let adj = if b == Builtin::Take {
                    builtin(
                        Builtin::Concat,
                        vec![z, builtin(Builtin::Drop, vec![k, none])],
                    )
                } else {
                    builtin(
                        Builtin::Concat,
                        vec![builtin(Builtin::Take, vec![k, none]), z],
                    )
                };
                self.add(sw, &a, &at, Adj::Val(adj));
            }
            Builtin::Shift1L | Builtin::Shift1R => {
                let (a, at) = args[0].clone();
                let pad = Expr::synth(ExprKind::ArrayLit(vec![zeros(elem)]));
                let parts = if b == Builtin::Shift1L {
                    vec![pad, z]
                } else {
                    vec![z, pad]
                };
                // `take(len a, …)`: an empty `a` has an empty shift, and
                // the padded cotangent `[0]` is cut back to nothing. No
                // branch, so a loop reading it computes it in place.
                let n = builtin(Builtin::Len, vec![a.clone()]);
                let adj = builtin(Builtin::Take, vec![n, builtin(Builtin::Concat, parts)]);
                self.add(sw, &a, &at, Adj::Val(adj));
            }
            Builtin::Len | Builtin::Iota => {}
            // `transpose(c, M)`: `M̄ += transpose(len(M), Z)`.
            Builtin::Transpose => {
                let (m, mt) = args[1].clone();
                let rows = builtin(Builtin::Len, vec![m.clone()]);
                self.add(
                    sw,
                    &m,
                    &mt,
                    Adj::Val(builtin(Builtin::Transpose, vec![rows, z])),
                );
            }
            // `C = matmul(n, A, B)`, `A : [[R; k]; m]`, `B : [[R; n]; k]`:
            // `Ā += matmul(k, Z, Bᵀ)`, `B̄ += matmul(n, Aᵀ, Z)`, with
            // `k = len(B)` (also when `A` has no rows).
            Builtin::MatMul => {
                let n = args[0].0.clone();
                let (a, at) = args[1].clone();
                let (bm, bt) = args[2].clone();
                let k = builtin(Builtin::Len, vec![bm.clone()]);
                let b_t = builtin(Builtin::Transpose, vec![n.clone(), bm.clone()]);
                let a_t = builtin(Builtin::Transpose, vec![k.clone(), a.clone()]);
                self.add(
                    sw,
                    &a,
                    &at,
                    Adj::Val(builtin(Builtin::MatMul, vec![k, z.clone(), b_t])),
                );
                self.add(
                    sw,
                    &bm,
                    &bt,
                    Adj::Val(builtin(Builtin::MatMul, vec![n, a_t, z])),
                );
            }
            Builtin::Get | Builtin::Gather | Builtin::ReduceByIndex(_) => {
                unreachable!("rules of their own")
            }
        }
    }
}
