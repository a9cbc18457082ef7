//! `scanl` and `scanr` (not in the paper; derived like the general fold of
//! `fold.rs`). The cotangent `Z̄` of a scan has one entry per state, so each
//! state's total cotangent is its own entry of `Z̄` plus what flows back
//! from the next step.
//!
//! `S = scanl (x, y. e) v A`: `S₀ = v`, `Sᵢ₊₁ = e(Sᵢ, Aᵢ)`.
//!
//! ```text
//! X = zip (shift1R S) A                                  -- step i reads (Sᵢ, Aᵢ)
//! G = scanr (g, ((x, y), ζ). ζ +̂ ∇ₓ e · g) Z̄[n] (zip X (shift1R Z̄))
//!                                                        -- G[i] = Z̄[i] + ∇ₓ e(Sᵢ, Aᵢ)·G[i+1]
//! Q = map2 ((x, y), g. ∇_{Γ',x,y} e · g) X (shift1L G)
//! Ā += map (.y) Q,  v̄ += G[0],  Γ̄' += reduce (+̂) 0 (map (.Γ') Q)
//! ```
//!
//! `S = scanr (x, y. e) v A`: `Sₙ = v`, `Sᵢ = e(Sᵢ₊₁, Aᵢ)`; the cotangents
//! flow left to right:
//!
//! ```text
//! X = zip (shift1L S) A                                  -- step i reads (Sᵢ₊₁, Aᵢ)
//! H = scanl (h, ((x, y), ζ). ζ +̂ ∇ₓ e · h) Z̄[0] (zip X (shift1L Z̄))
//!                                                        -- H[i] = cotangent of Sᵢ
//! Q = map2 ((x, y), h. ∇_{Γ',x,y} e · h) X (shift1R H)
//! Ā += map (.y) Q,  v̄ += H[n],  Γ̄' += reduce (+̂) 0 (map (.Γ') Q)
//! ```

use crate::adjoint::{plus, Adj};
use crate::direct::{AdResult, Arg, Deriver, Sweep};
use gradlift_lang::build::*;
use gradlift_lang::syntax::*;

impl Deriver {
    fn zip(&mut self, a: Expr, b: Expr) -> Expr {
        let (x, y) = (self.names.fresh("x"), self.names.fresh("y"));
        array_op(
            ArrayOp::Map2,
            lambda(vec![pvar(&x), pvar(&y)], tuple(vec![var(&x), var(&y)])),
            vec![a, b],
        )
    }

    /// The reverse of `scanl` (`left`) or `scanr`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn scan_backward(
        &mut self,
        sw: &mut Sweep,
        params: &[Name],
        body: &Expr,
        args: &[Arg],
        out: &Expr,
        z: Expr,
        left: bool,
    ) -> AdResult<()> {
        let (v, v_ty) = &args[0];
        let (a, a_ty) = &args[1];
        let Type::Array(elem_ty, _) = a_ty else {
            unreachable!("a scan over an array")
        };
        let fv = self.free_slots(body, params);
        let mut ctx = fv.clone();
        ctx.push((params[0].clone(), v_ty.clone()));
        ctx.push((params[1].clone(), (**elem_ty).clone()));
        let (kx, ky, len) = (fv.len(), fv.len() + 1, fv.len() + 2);
        let (read, own, feed) = if left {
            (Builtin::Shift1R, Builtin::Shift1R, Builtin::Shift1L)
        } else {
            (Builtin::Shift1L, Builtin::Shift1L, Builtin::Shift1R)
        };
        let x = self.zip(builtin(read, vec![out.clone()]), a.clone());
        let x = self.bind(&mut sw.rev, "steps", x);
        let with_z = self.zip(x.clone(), builtin(own, vec![z.clone()]));

        // The running cotangent of the states.
        let step_pattern = ptuple(vec![pvar(&params[0]), pvar(&params[1])]);
        let (g, w, q, zeta) = (
            self.names.fresh("g"),
            self.names.fresh("w"),
            self.names.fresh("q"),
            self.names.fresh("zeta"),
        );
        let grad_state = self.gradient(&ctx, body, Adj::Val(var(&g)))?;
        let total = plus(
            v_ty,
            var(&zeta),
            Self::component(grad_state, kx, len),
            &mut self.names,
        );
        let back = lambda(
            vec![pvar(&g), pvar(&w)],
            let_in(
                ptuple(vec![pvar(&q), pvar(&zeta)]),
                var(&w),
                let_in(step_pattern.clone(), var(&q), total),
            ),
        );
        let (scan, first) = if left {
            (ArrayOp::Scanr, index(z.clone(), -1))
        } else {
            (ArrayOp::Scanl, index(z.clone(), 0))
        };
        let cot = self.bind(
            &mut sw.rev,
            "dstates",
            array_op(scan, back, vec![first, with_z]),
        );

        // Per-step vector–Jacobian products.
        let (g2, q2) = (self.names.fresh("g"), self.names.fresh("q"));
        let full = self.gradient(&ctx, body, Adj::Val(var(&g2)))?;
        let per_step = array_op(
            ArrayOp::Map2,
            lambda(
                vec![pvar(&q2), pvar(&g2)],
                let_in(step_pattern, var(&q2), full),
            ),
            vec![x, builtin(feed, vec![cot.clone()])],
        );
        let qs = self.bind(&mut sw.rev, "vjps", per_step);
        let t = self.names.fresh("t");
        let elem_adj = array_op(
            ArrayOp::Map,
            lambda(vec![pvar(&t)], Self::component(var(&t), ky, len)),
            vec![qs.clone()],
        );
        self.add(sw, a, a_ty, Adj::Val(elem_adj));
        let init_adj = if left { index(cot, 0) } else { index(cot, -1) };
        self.add(sw, v, v_ty, Adj::Val(init_adj));
        self.add_free_sums(sw, &fv, &qs, 0, len);
        Ok(())
    }
}
