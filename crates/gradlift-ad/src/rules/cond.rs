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

use crate::adjoint::Adj;
use crate::direct::{AdResult, Deriver, Sweep};
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
        let g_then = self.gradient(&fv, &then_branch, Adj::Val(z.clone()))?;
        let g_else = self.gradient(&fv, &else_branch, Adj::Val(z))?;
        let g = self.bind(&mut sw.rev, "branch_adj", cond(c, g_then, g_else));
        let len = fv.len();
        for (j, (n, t)) in fv.iter().enumerate() {
            self.add(sw, &var(n), t, Adj::Val(Self::component(g.clone(), j, len)));
        }
        Ok(())
    }
}
