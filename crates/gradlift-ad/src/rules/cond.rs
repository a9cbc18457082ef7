//! `if` by the "Solution" of §7.2.
//!
//! Forward: `r = if c then e₂ else e₃`, the condition not differentiated.
//! Reverse, for the cotangent `z` of `r`, with Γ' the free variables of the
//! branches:
//!
//! ```text
//! Γ̄' += if c then ∇_{Γ'} e₂ · z else ∇_{Γ'} e₃ · z
//! ```
//!
//! The continuation is called once, on the gradient of the whole branch,
//! so it stays linear, as the Solution requires. The paper blends the two
//! gradients arithmetically, `∇e₂·b +̂ ∇e₃·(1−b)` with `b ∈ {0, 1}`; this
//! selects instead, which is the same value wherever both gradients are
//! finite and avoids `0 · inf = nan` from the branch not taken (the
//! gradient of `if x > 0 then log(x) else 0` at `x = 0`).
//!
//! Not in the paper: an array the enclosing loop keeps sparse
//! (`Deriver::sparse_scope`) keeps its records through the `if`, each
//! branch padded to the other's number of them (see `rules/mod.rs`).

use crate::adjoint::{zeros, Adj};
use crate::direct::{AdResult, Deriver, Part, Sweep};
use gradlift_lang::build::*;
use gradlift_lang::syntax::*;

impl Deriver {
    pub(crate) fn if_backward(
        &mut self,
        sw: &mut Sweep,
        c: Expr,
        then_branch: Expr,
        else_branch: Expr,
        ty: &Type,
        z: Adj,
    ) -> AdResult<()> {
        let mut fv = self.free_slots(&then_branch, &[]);
        for slot in self.free_slots(&else_branch, &[]) {
            if !fv.iter().any(|(n, _)| *n == slot.0) {
                fv.push(slot);
            }
        }
        if fv.is_empty() {
            return Ok(());
        }
        fv.sort_by(|a, b| a.0.cmp(&b.0));
        let z = z.into_expr(ty);
        let z = self.bind(&mut sw.rev, "z", z);
        // Arrays the enclosing loop keeps sparse (`Deriver::sparse_scope`),
        // read at computed positions in both branches, stay sparse: each
        // branch returns as many records as the other, padded with zeros
        // at position 0 (never scattered into an empty array; see
        // `adjoint::scatter`), so that the loop scatters once.
        let sparse: Vec<Name> = fv
            .iter()
            .filter(|(n, t)| matches!(t, Type::Array(..)) && self.sparse_scope.contains(n))
            .map(|(n, _)| n.clone())
            .collect();
        let (t_then, g_then) =
            self.gradient_with(&fv, &then_branch, Adj::Val(z.clone()), &sparse)?;
        let (t_else, g_else) = self.gradient_with(&fv, &else_branch, Adj::Val(z), &sparse)?;
        let (gt, ge) = (self.names.fresh("gt"), self.names.fresh("ge"));
        let (pt, pe) = (g_then.parts(&fv, &var(&gt)), g_else.parts(&fv, &var(&ge)));
        let (mut then_out, mut else_out) = (Vec::new(), Vec::new());
        let (mut then_records, mut else_records) = (Vec::new(), Vec::new());
        // For each variable: a dense slot, or a number of records.
        let mut layout: Vec<Option<usize>> = Vec::with_capacity(fv.len());
        for ((_, t), (a, b)) in fv.iter().zip(pt.into_iter().zip(pe)) {
            let dense = |part: Part| match part {
                Part::Dense(e) => e,
                Part::Sparse(at) if at.is_empty() => zeros(t),
                Part::Sparse(at) => crate::adjoint::scatter(zeros(t), at),
            };
            match (a, b, t) {
                (Part::Sparse(x), Part::Sparse(y), Type::Array(elem, _)) => {
                    let r = x.len().max(y.len());
                    let pad = |mut at: Vec<(Expr, Expr)>| {
                        at.resize_with(r, || (int(0), zeros(elem)));
                        at
                    };
                    then_records.extend(pad(x));
                    else_records.extend(pad(y));
                    layout.push(Some(r));
                }
                (a, b, _) => {
                    then_out.push(dense(a));
                    else_out.push(dense(b));
                    layout.push(None);
                }
            }
        }
        let flat = |out: &mut Vec<Expr>, records: Vec<(Expr, Expr)>| {
            out.extend(records.into_iter().flat_map(|(p, v)| [p, v]));
        };
        let dense_count = then_out.len();
        flat(&mut then_out, then_records);
        flat(&mut else_out, else_records);
        let len = then_out.len();
        if len == 0 {
            return Ok(());
        }
        let then_term = let_in(pvar(&gt), t_then, tuple(then_out));
        let else_term = let_in(pvar(&ge), t_else, tuple(else_out));
        let g = self.bind(&mut sw.rev, "branch_adj", cond(c, then_term, else_term));
        let (mut slot, mut record) = (0, dense_count);
        for ((n, t), kind) in fv.iter().zip(layout) {
            match kind {
                None => {
                    let part = Self::component(g.clone(), slot, len);
                    self.add(sw, &var(n), t, Adj::Val(part));
                    slot += 1;
                }
                Some(0) => {}
                Some(r) => {
                    let mut at = Vec::with_capacity(r);
                    for _ in 0..r {
                        let p =
                            self.bind(&mut sw.rev, "p", Self::component(g.clone(), record, len));
                        let v = self.bind(
                            &mut sw.rev,
                            "v",
                            Self::component(g.clone(), record + 1, len),
                        );
                        at.push((p, v));
                        record += 2;
                    }
                    self.add(sw, &var(n), t, Adj::Sparse(at));
                }
            }
        }
        Ok(())
    }
}
