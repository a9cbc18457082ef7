//! The reverse of a checkpointed `foldl` (`@checkpoint(…) foldl F v A`, or
//! every fold under `--checkpoint`).
//!
//! The forward pass computes `r = foldl F v A` and keeps no states. The
//! reverse is one `revfold`, which recomputes states from snapshots by the
//! loop's [`Schedule`] and reverses each step once, from the last:
//!
//! ```text
//! STEP = (x, y. e)
//! VJP  = (x, y, g, f. let r = ∇_{Γ',x,y} e · g in (r.x, r.y, f +̂ r.Γ'))
//! (v̄', Ā', Γ̄'') = revfold[schedule] VJP STEP v A z 0_Γ'
//! v̄ += v̄',  Ā += Ā',  Γ̄' += Γ̄''
//! ```
//!
//! When `e` does not read `y`, `VJP` returns `()` in place of `r.y`, so
//! `Ā'` is an array of empty tuples (no memory) and `A` gets no cotangent.
//!
//! This is the vector–Jacobian right scan of [`super::fold`] with the scan
//! and the per-step products fused into one backward loop, so that neither
//! the states nor the cotangents of the states are kept. The free
//! variables' cotangents are summed along the loop (from the last step), so
//! they may differ from the unscheduled rule's in the last bits.

use crate::adjoint::{plus, zeros_like, Adj};
use crate::direct::{AdResult, Arg, Deriver, Sweep};
use gradlift_lang::build::*;
use gradlift_lang::syntax::*;

impl Deriver {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn checkpoint_backward(
        &mut self,
        sw: &mut Sweep,
        schedule: Schedule,
        params: &[Name],
        body: &Expr,
        args: &[Arg],
        acc_ty: &Type,
        z: Expr,
    ) -> AdResult<()> {
        let (v, v_ty) = &args[0];
        let (a, a_ty) = &args[1];
        let ctx = self.step_context(params, body, acc_ty, a_ty);
        let fv = &ctx[..ctx.len() - 2];
        let (kx, ky, len) = (fv.len(), fv.len() + 1, fv.len() + 2);

        let (g, f, r) = (
            self.names.fresh("g"),
            self.names.fresh("f"),
            self.names.fresh("r"),
        );
        let grad = self.gradient(&ctx, body, Adj::Val(var(&g)))?;
        let part = |j: usize| Self::component(var(&r), j, len);
        let update = match fv {
            [(_, t)] => plus(t, var(&f), part(0), &mut self.names),
            _ => Expr::synth(ExprKind::Tuple(
                fv.iter()
                    .enumerate()
                    .map(|(j, (_, t))| plus(t, proj(var(&f), j), part(j), &mut self.names))
                    .collect(),
            )),
        };
        // Untyped lambdas, like every function argument of an array
        // operation, so that forward mode can lift them (Hessian-vector
        // products of checkpointed loops).
        // A step that ignores its element gives it no cotangent: the
        // elements' part of the result is then `()`s, which take no memory.
        let mut free = std::collections::HashSet::new();
        gradlift_lang::interp::free_vars(body, &mut gradlift_lang::scope::Scope::new(), &mut free);
        let elements = free.contains(&params[1]);
        let elem_part = if elements {
            part(ky)
        } else {
            Expr::synth(ExprKind::Tuple(Vec::new()))
        };
        let vjp = lambda(
            vec![pvar(&params[0]), pvar(&params[1]), pvar(&g), pvar(&f)],
            let_in(pvar(&r), grad, tuple(vec![part(kx), elem_part, update])),
        );
        let step = lambda(vec![pvar(&params[0]), pvar(&params[1])], body.clone());
        let init = match fv {
            [(n, t)] => zeros_like(t, &var(n), &mut self.names),
            _ => Expr::synth(ExprKind::Tuple(
                fv.iter()
                    .map(|(n, t)| zeros_like(t, &var(n), &mut self.names))
                    .collect(),
            )),
        };
        let reversed = array_op(
            ArrayOp::Revfold(schedule),
            vjp,
            vec![step, v.clone(), a.clone(), z, init],
        );
        let out = self.bind(&mut sw.rev, "reversed", reversed);
        self.add(sw, v, v_ty, Adj::Val(proj(out.clone(), 0)));
        if elements {
            self.add(sw, a, a_ty, Adj::Val(proj(out.clone(), 1)));
        }
        for (j, (n, t)) in fv.iter().enumerate() {
            let total = match fv.len() {
                1 => proj(out.clone(), 2),
                _ => proj(proj(out.clone(), 2), j),
            };
            self.add(sw, &var(n), t, Adj::Val(total));
        }
        Ok(())
    }
}
