//! `scanl` and `scanr` (not in the paper; derived like the general fold of
//! `fold.rs`). The cotangent `Z̄` of a scan has one entry per state, so each
//! state's total cotangent is its own entry of `Z̄` plus what flows back
//! from the next step.
//!
//! `S = scanl (x, y. e) v A`: `S₀ = v`, `Sᵢ₊₁ = e(Sᵢ, Aᵢ)`.
//!
//! ```text
//! X = zip (shift1R S) A                                  -- step i reads (Sᵢ, Aᵢ)
//! W = scanr ((g, c, _), ((x, y), ζ). let (γ, ξ, η) = ∇_{Γ',x,y} e · g in (ζ +̂ ξ, c +̂ γ, η))
//!           (Z̄[n], 0_Γ', 0_y) (zip X (shift1R Z̄))
//!                           -- W[i].0 = Z̄[i] + ∇ₓ e(Sᵢ, Aᵢ)·W[i+1].0, W[i].2 = Āᵢ
//! Ā += map (.2) (shift1R W),  v̄ += W[0].0,  Γ̄' += W[0].1
//! ```
//!
//! `S = scanr (x, y. e) v A`: `Sₙ = v`, `Sᵢ = e(Sᵢ₊₁, Aᵢ)`; the cotangents
//! flow left to right:
//!
//! ```text
//! X = zip (shift1L S) A                                  -- step i reads (Sᵢ₊₁, Aᵢ)
//! H = scanl ((h, c, _), ((x, y), ζ). let (γ, ξ, η) = ∇_{Γ',x,y} e · h in (ζ +̂ ξ, c +̂ γ, η))
//!           (Z̄[0], 0_Γ', 0_y) (zip X (shift1L Z̄))
//!                           -- H[i].0 = cotangent of Sᵢ, H[i+1].2 = Āᵢ
//! Ā += map (.2) (shift1L H),  v̄ += H[n].0,  Γ̄' += H[n].1
//! ```
//!
//! As for folds, each step's gradient is taken once, in the scan.

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
        let v_ty = &args[0].1;
        let (a, a_ty) = &args[1];
        let Type::Array(elem_ty, _) = a_ty else {
            unreachable!("a scan over an array")
        };
        let fv = self.free_slots(body, params);
        let mut ctx = fv.clone();
        ctx.push((params[0].clone(), v_ty.clone()));
        ctx.push((params[1].clone(), (**elem_ty).clone()));
        // Step i of a left scan reads (Sᵢ, Aᵢ) and owns Z̄[i]; its reverse
        // writes Āᵢ into W[i]. A right scan's step reads (Sᵢ₊₁, Aᵢ), owns
        // Z̄[i+1] and writes Āᵢ into H[i+1].
        let shift = if left {
            Builtin::Shift1R
        } else {
            Builtin::Shift1L
        };
        let x = self.zip(builtin(shift, vec![out.clone()]), a.clone());
        let x = self.bind(&mut sw.rev, "steps", x);
        let with_z = self.zip(x, builtin(shift, vec![z.clone()]));

        // One scan against the direction of the states: each step's
        // gradient is taken once (see `Deriver::reverse_step`).
        let first = if left {
            index(z.clone(), -1)
        } else {
            index(z.clone(), 0)
        };
        // Free arrays read at computed positions: scattered once after.
        let sparse = Self::scattered_by_scans(&fv);
        let (back, start, grad) =
            self.reverse_step(&ctx, params, body, first, Some(v_ty), &sparse)?;
        let fv = Self::kept(fv, &grad.kept[..ctx.len() - 2]);
        let scan = if left { ArrayOp::Scanr } else { ArrayOp::Scanl };
        let cot = self.bind(
            &mut sw.rev,
            "dstates",
            array_op(scan, back, vec![start, with_z]),
        );
        let last = self.bind(
            &mut sw.rev,
            "dfirst",
            index(cot.clone(), if left { 0 } else { -1 }),
        );
        let steps = self.bind(&mut sw.rev, "dsteps", builtin(shift, vec![cot]));
        let reversed = crate::rules::fold::ReverseScan {
            grad: &grad,
            params,
            body,
            ctx: &ctx,
            fv: &fv,
        };
        self.add_reverse_scan(sw, reversed, &last, &steps, (&args[0], &args[1]));
        Ok(())
    }
}
