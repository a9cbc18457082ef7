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
//! A free array of a symbolic size that `e` reads at computed positions is
//! not in `Γ'`: `VJP` returns the step's positions and values in it beside
//! `r.y` (`(r.y, p₁, z₁, …)`), and they are scattered into the array once
//! after the loop (`Deriver::scatter_records`), so that a step costs what
//! it reads, not the array's size: m lookups into n elements cost
//! O(m + n), where summing one-hot arrays in `f` cost O(m·n). `revwhile`
//! keeps no per-step results, so a `while` loop sums them in `f`.
//!
//! **`while` loops** take the same reverse, over the steps the loop took.
//! The forward pass counts them — `while F v` becomes
//! `while ((s, k). let r = F(s) in if r.0 == 0 then (0, (s, k)) else (1, (r.1, k + 1))) (v, 0)`,
//! whose first component is the result and second the trip count `n` —
//! and the reverse is `revwhile`, `revfold` over `n` steps without
//! elements, on Griewank's binomial schedule with [`WHILE_SNAPSHOTS`]
//! snapshots: memory for that many states whatever `n` (known only once
//! the loop has run), and about `r·n` steps recomputed where
//! `n ≤ C(WHILE_SNAPSHOTS + r, r)`. Each step reversed is `F`'s step, the
//! branch its condition took while the loop went on: the trip count is
//! data, so its derivative is zero, and so is that of the condition.
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

/// The snapshots of the reverse of a `while` loop (module documentation):
/// at most this many states are kept, whatever the trip count.
pub const WHILE_SNAPSHOTS: u32 = 32;

/// What a reversed loop steps over: the elements of an array (`revfold`),
/// or a number of steps without elements (`revwhile`).
pub(crate) enum Steps<'a> {
    /// The fold's array.
    Over(&'a Arg),
    /// The trip count.
    Count(Expr),
}

impl Deriver {
    /// The forward pass of `while (s. body) v` for its reverse: the loop
    /// with its steps counted, `(result, trip count)`.
    pub(crate) fn counted_while(&mut self, param: &Name, body: &Expr, v: Expr) -> Expr {
        let (s, k, r) = (
            self.names.fresh("s"),
            self.names.fresh("k"),
            self.names.fresh("r"),
        );
        let step = let_in(pvar(param), var(&s), body.clone());
        let stays = prim(gradlift_lang::Prim::IEq, vec![proj(var(&r), 0), int(0)]);
        let next = tuple(vec![
            proj(var(&r), 1),
            prim(gradlift_lang::Prim::IAdd, vec![var(&k), int(1)]),
        ]);
        let f = lambda(
            vec![ptuple(vec![pvar(&s), pvar(&k)])],
            let_in(
                pvar(&r),
                step,
                cond(
                    stays,
                    tuple(vec![int(0), tuple(vec![var(&s), var(&k)])]),
                    tuple(vec![int(1), next]),
                ),
            ),
        );
        array_op(ArrayOp::While, f, vec![tuple(vec![v, int(0)])])
    }

    /// The reverse of `while (s. body) v`, whose counted forward pass is
    /// `counted` (module documentation).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn while_backward(
        &mut self,
        sw: &mut Sweep,
        params: &[Name],
        body: &Expr,
        args: &[Arg],
        counted: &Name,
        acc_ty: &Type,
        z: Expr,
    ) -> AdResult<()> {
        let unit = self.names.fresh("unit");
        let step_params = [params[0].clone(), unit];
        let step = proj(body.clone(), 1);
        let count = proj(var(counted), 1);
        self.checkpoint_backward(
            sw,
            Schedule::Binomial(WHILE_SNAPSHOTS),
            &step_params,
            &step,
            &args[0],
            Steps::Count(count),
            acc_ty,
            z,
        )
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn checkpoint_backward(
        &mut self,
        sw: &mut Sweep,
        schedule: Schedule,
        params: &[Name],
        body: &Expr,
        start: &Arg,
        steps: Steps<'_>,
        acc_ty: &Type,
        z: Expr,
    ) -> AdResult<()> {
        let (v, v_ty) = start;
        let ctx = match &steps {
            Steps::Over((_, a_ty)) => self.step_context(params, body, acc_ty, a_ty),
            Steps::Count(_) => {
                let unit = Type::Tuple(Vec::new());
                self.step_context(params, body, acc_ty, &Type::array(unit, Size::lit(0)))
            }
        };
        // Free arrays of a symbolic size that the step reads at computed
        // positions keep their cotangents sparse: each step returns its
        // positions and values beside its element's cotangent, and they
        // are scattered once after the loop, so that a step costs what it
        // reads, not the array's size (the policy of the unscheduled
        // folds, `Deriver::scattered_by_scans`). A `while` loop keeps no
        // per-step results, so its free arrays are summed.
        let sparse = match &steps {
            Steps::Over(_) => Self::scattered_by_scans(&ctx[..ctx.len() - 2]),
            Steps::Count(_) => Vec::new(),
        };
        let (g, f, r) = (
            self.names.fresh("g"),
            self.names.fresh("f"),
            self.names.fresh("r"),
        );
        let (grad, layout) = self.gradient_with(&ctx, body, Adj::Val(var(&g)), &sparse)?;
        let all_fv = &ctx[..ctx.len() - 2];
        let fv = &Self::kept(all_fv.to_vec(), &layout.kept[..all_fv.len()]);
        let (kx, ky) = (fv.len(), fv.len() + 1);
        let len = fv.len() + 2 + 2 * layout.records.len();
        let part = |j: usize| Self::component(var(&r), j, len);
        let update = match &fv[..] {
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
        // elements' part of the result is then `()`s, which take no memory
        // (or the records alone).
        let mut free = std::collections::HashSet::new();
        gradlift_lang::interp::free_vars(body, &mut gradlift_lang::scope::Scope::new(), &mut free);
        let elements = free.contains(&params[1]);
        let mut per_step = Vec::new();
        if elements {
            per_step.push(part(ky));
        }
        per_step.extend((ky + 1..len).map(part));
        let elem_part = tuple(per_step);
        let vjp = lambda(
            vec![pvar(&params[0]), pvar(&params[1]), pvar(&g), pvar(&f)],
            let_in(pvar(&r), grad, tuple(vec![part(kx), elem_part, update])),
        );
        let step = lambda(vec![pvar(&params[0]), pvar(&params[1])], body.clone());
        let init = match &fv[..] {
            [(n, t)] => zeros_like(t, &var(n), &mut self.names),
            _ => Expr::synth(ExprKind::Tuple(
                fv.iter()
                    .map(|(n, t)| zeros_like(t, &var(n), &mut self.names))
                    .collect(),
            )),
        };
        let (reversed, acc_at) = match &steps {
            Steps::Over((a, _)) => (
                array_op(
                    ArrayOp::Revfold(schedule),
                    vjp,
                    vec![step.clone(), v.clone(), a.clone(), z, init],
                ),
                2,
            ),
            Steps::Count(count) => (
                array_op(
                    ArrayOp::Revwhile(schedule),
                    vjp,
                    vec![step.clone(), v.clone(), count.clone(), z, init],
                ),
                1,
            ),
        };
        let out = self.bind(&mut sw.rev, "reversed", reversed);
        self.add(sw, v, v_ty, Adj::Val(proj(out.clone(), 0)));
        let records = layout.records.len();
        if let (true, Steps::Over((a, a_ty))) = (elements, &steps) {
            let cotangents = match records {
                0 => proj(out.clone(), 1),
                _ => {
                    let e = self.names.fresh("e");
                    map1(&e, proj(var(&e), 0), proj(out.clone(), 1))
                }
            };
            self.add(sw, a, a_ty, Adj::Val(cotangents));
        }
        if records > 0 {
            let per_step = self.bind(&mut sw.rev, "steps", proj(out.clone(), 1));
            let first = usize::from(elements);
            self.scatter_records(
                sw,
                &layout,
                &step,
                &ctx,
                &per_step,
                first,
                first + 2 * records,
                None,
            );
        }
        for (j, (n, t)) in fv.iter().enumerate() {
            let total = match fv.len() {
                1 => proj(out.clone(), acc_at),
                _ => proj(proj(out.clone(), acc_at), j),
            };
            self.add(sw, &var(n), t, Adj::Val(total));
        }
        Ok(())
    }
}
