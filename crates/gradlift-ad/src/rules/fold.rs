//! `reduce` and `foldl` (Figure 5 for known monoids with E5's fix at n = 0;
//! Appendix A.3, Figure 16, with the free-variable term of the corrected
//! Figure 13, for every other fold).
//!
//! Forward: `r = foldl (x, y. e) v A`; the forward pass keeps the states
//! `S = scanl (x, y. e) v A` (`S₀ = v`, `Sᵢ = e(Sᵢ₋₁, Aᵢ)`) and takes
//! `r = S[-1]`. A `reduce` is a left fold, so it is differentiated the same
//! way unless `(F, z)` is a known monoid.
//!
//! Known monoids, for the cotangent `z` of `r`:
//! - `(acc, x. max(acc, x))` or `min`, from any `v`: `z` goes to the first
//!   element equal to `r` if one beats `v`, else to `v`
//!   ([`Deriver::extremum_backward`]); a `reduce` or unscheduled `foldl`
//!   finds that position in its forward loop
//!   ([`Deriver::extremum_with_position`]).
//! - `(+, 0)`: `Ā += map (x. z) A` (OnesLike(A) · z).
//! - `(*, 1)`: `Ā += z · map2 (*) (shift1L (scanr (*) 1 A)) (shift1R (scanl (*) 1 A))`,
//!   the product of all other elements without a division (exact with zeros).
//!
//! Scalar accumulator and elements (Figure 16; Figure 13 corrected):
//!
//! ```text
//! A₀ = shift1R S                         -- [S₀ … Sₙ₋₁]
//! P  = map2 (x, y. ∇_{Γ',x,y} e) A₀ A    -- per step (∂Γ', ∂x, ∂y)
//! A₁ = map (.x) P,  A₂ = map (.y) P
//! S₃ = scanr (*) 1 A₁,  A₃ = shift1L S₃  -- A₃[i] = ∏_{j>i} A₁[j]
//! Ā  += map2 (u, w. u * w * z) A₂ A₃
//! v̄  += S₃[0] * z                        -- ∏ A₁ · z
//! Γ̄' += z ·̂ reduce (+̂) 0 (map2 (c, p. c ·̂ p.Γ') A₃ P)
//! ```
//!
//! Other accumulators (tuples, arrays): the suffix products of Jacobians
//! (Figure 17's ×̃) become a right scan of vector–Jacobian products, which
//! gives the same cotangents without forming Jacobians:
//!
//! ```text
//! X = zip A₀ A
//! W = scanr ((g, c, _), (x, y). let (γ, ξ, η) = ∇_{Γ',x,y} e · g in (ξ, c +̂ γ, η))
//!           (z, 0_Γ', 0_y) X
//! Ā += map (.2) (shift1R W),  v̄ += W[0].0,  Γ̄' += W[0].1
//! ```
//!
//! `W[i].0` is the cotangent of `Sᵢ` (`W[n].0 = z`), `W[i].1` the sum of
//! the free variables' terms of steps `i … n-1` and `W[i].2` the
//! cotangent of `Aᵢ`. Each step's gradient is taken once (not in the
//! paper: a scan of state cotangents followed by a separate map of
//! vector–Jacobian products, Figure 16's shape, would run every step's
//! reverse pass a second time). The same function reverses scans
//! ([`Deriver::reverse_step`], `scan.rs`).
//!
//! Not in the paper: a free array read at computed positions is not summed
//! in `W`'s (or `P`'s) `Γ'` part; each step's positions and values are
//! scattered once after the loop, as for `map` ([`Deriver::scatter_records`];
//! for `W`, arrays of a size the program writes stay summed,
//! [`Deriver::scattered_by_scans`]).

use crate::adjoint::{plus, scale, zeros, Adj};
use crate::direct::{AdResult, Arg, Deriver, Gradient, Sweep};
use gradlift_lang::build::*;
use gradlift_lang::syntax::*;
use gradlift_lang::Prim;

/// The known monoids with a fast path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Monoid {
    Sum,
    Product,
    /// `(acc, x. max(acc, x))` from any start.
    Max,
    /// `(acc, x. min(acc, x))` from any start.
    Min,
}

/// `(a, b. a + b)` with `0`, or `(a, b. a * b)` with `1` (either operand
/// order).
pub(crate) fn known_monoid(params: &[Name], body: &Expr, init: &Expr) -> Option<Monoid> {
    let ExprKind::Prim(p, args) = &body.kind else {
        return None;
    };
    let (ExprKind::Var(a), ExprKind::Var(b)) = (&args.first()?.kind, &args.get(1)?.kind) else {
        return None;
    };
    let operands = (a == &params[0] && b == &params[1]) || (a == &params[1] && b == &params[0]);
    // `max(acc, x)` keeps the accumulator on a tie and ignores a NaN element
    // (only `x > acc` replaces it): the operand order matters.
    let in_order = a == &params[0] && b == &params[1];
    match p {
        Prim::Max if in_order => return Some(Monoid::Max),
        Prim::Min if in_order => return Some(Monoid::Min),
        _ => {}
    }
    let ExprKind::Const(unit) = init.kind else {
        return None;
    };
    match p {
        Prim::Add if operands && unit == 0.0 => Some(Monoid::Sum),
        Prim::Mul if operands && unit == 1.0 => Some(Monoid::Product),
        _ => None,
    }
}

/// Whether the fold has a fast path (its states need not be kept).
pub(crate) fn is_known_monoid(params: &[Name], body: &Expr, init: &Expr) -> bool {
    known_monoid(params, body, init).is_some()
}

impl Deriver {
    fn times(&mut self) -> Expr {
        let (a, b) = (self.names.fresh("a"), self.names.fresh("b"));
        lambda(vec![pvar(&a), pvar(&b)], mul(var(&a), var(&b)))
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn monoid_backward(
        &mut self,
        sw: &mut Sweep,
        params: &[Name],
        body: &Expr,
        args: &[Arg],
        unit: &Expr,
        out: &Expr,
        z: Expr,
    ) -> AdResult<()> {
        let (a, a_ty) = &args[1];
        let contribution = match known_monoid(params, body, unit).expect("fast path") {
            m @ (Monoid::Max | Monoid::Min) => {
                return self.extremum_backward(sw, m == Monoid::Max, args, out, z, None)
            }
            Monoid::Sum => {
                let x = self.names.fresh("x");
                array_op(ArrayOp::Map, lambda(vec![pvar(&x)], z), vec![a.clone()])
            }
            Monoid::Product => {
                let suffix = array_op(ArrayOp::Scanr, self.times(), vec![real(1.0), a.clone()]);
                let prefix = array_op(ArrayOp::Scanl, self.times(), vec![real(1.0), a.clone()]);
                let others = array_op(
                    ArrayOp::Map2,
                    self.times(),
                    vec![
                        builtin(Builtin::Shift1L, vec![suffix]),
                        builtin(Builtin::Shift1R, vec![prefix]),
                    ],
                );
                let g = self.names.fresh("g");
                array_op(
                    ArrayOp::Map,
                    lambda(vec![pvar(&g)], mul(var(&g), z)),
                    vec![others],
                )
            }
        };
        self.add(sw, a, a_ty, Adj::Val(contribution));
        Ok(())
    }

    /// `r = foldl (acc, x. max(acc, x)) v A` (or `min`): the result is the
    /// start `v` unless some element beats it strictly (`r > v`; false when
    /// either is NaN), and then it is the first element equal to `r`, since
    /// every earlier one is smaller and no later one is larger. So:
    ///
    /// ```text
    /// k  = if r > v then reduce min n (map2 (i, x. if x == r then i else n) (iota n) A) else n
    /// Ā += map (i. if i == k then z else 0) (iota n)
    /// v̄ += if r > v then 0 else z
    /// ```
    ///
    /// (`<` for `min`). Three passes over `A`, no states. Where the
    /// forward sweep kept the position with the extremum (`ext`, built by
    /// [`Deriver::extremum_with_position`]), `k` is `ext.1`: one pass.
    pub(crate) fn extremum_backward(
        &mut self,
        sw: &mut Sweep,
        is_max: bool,
        args: &[Arg],
        out: &Expr,
        z: Expr,
        ext: Option<&Name>,
    ) -> AdResult<()> {
        let (v, v_ty) = &args[0];
        let (a, a_ty) = &args[1];
        let beats = |r: Expr, v: Expr| {
            if is_max {
                prim(Prim::Gt, vec![r, v])
            } else {
                prim(Prim::Lt, vec![r, v])
            }
        };
        let iota = self.bind(
            &mut sw.rev,
            "positions",
            builtin(Builtin::Iota, vec![builtin(Builtin::Len, vec![a.clone()])]),
        );
        let k = match ext {
            Some(ext) => proj(var(ext), 1),
            None => self.search_extremum(sw, a, out, v, &iota, beats),
        };
        let j = self.names.fresh("i");
        let elems = array_op(
            ArrayOp::Map,
            lambda(
                vec![pvar(&j)],
                cond(
                    prim(Prim::IEq, vec![var(&j), k]),
                    z.clone(),
                    Expr::structural_zero(),
                ),
            ),
            vec![iota],
        );
        self.add(sw, a, a_ty, Adj::Val(elems));
        let start = cond(beats(out.clone(), v.clone()), Expr::structural_zero(), z);
        self.add(sw, v, v_ty, Adj::Val(start));
        Ok(())
    }

    /// `r = foldl (acc, x. max(acc, x)) v A` (or `min`) together with the
    /// position the reverse sends `r`'s cotangent to:
    ///
    /// ```text
    /// foldl ((m, j), (i, x). if x > m then (x, i) else (m, j)) (v, n) (zip (iota n) A)
    /// ```
    ///
    /// (`<` for `min`). `max(m, x)` is `if x > m then x else m`, so the
    /// first component is `r` bit for bit; the second is the last position
    /// where the running extremum changed, or `n` if it never did — the
    /// first element equal to `r` when one beats `v`, as
    /// [`Deriver::extremum_backward`] searches for (an earlier element
    /// equal to `r` would have made the running extremum `r` already, and
    /// nothing equal to it beats it later).
    pub(crate) fn extremum_with_position(&mut self, is_max: bool, args: &[Expr]) -> Expr {
        let (v, a) = (&args[0], &args[1]);
        let n = builtin(Builtin::Len, vec![a.clone()]);
        let (m, j, i, x) = (
            self.names.fresh("m"),
            self.names.fresh("j"),
            self.names.fresh("i"),
            self.names.fresh("x"),
        );
        let beats = prim(
            if is_max { Prim::Gt } else { Prim::Lt },
            vec![var(&x), var(&m)],
        );
        let step = lambda(
            vec![
                ptuple(vec![pvar(&m), pvar(&j)]),
                ptuple(vec![pvar(&i), pvar(&x)]),
            ],
            cond(
                beats,
                tuple(vec![var(&x), var(&i)]),
                tuple(vec![var(&m), var(&j)]),
            ),
        );
        let (i2, x2) = (self.names.fresh("i"), self.names.fresh("x"));
        let pairs = array_op(
            ArrayOp::Map2,
            lambda(vec![pvar(&i2), pvar(&x2)], tuple(vec![var(&i2), var(&x2)])),
            vec![builtin(Builtin::Iota, vec![n.clone()]), a.clone()],
        );
        array_op(
            ArrayOp::Foldl(None),
            step,
            vec![tuple(vec![v.clone(), n]), pairs],
        )
    }

    /// The position `k` of [`Deriver::extremum_backward`], searched for in
    /// the reverse sweep.
    fn search_extremum(
        &mut self,
        sw: &mut Sweep,
        a: &Expr,
        out: &Expr,
        v: &Expr,
        iota: &Expr,
        beats: impl Fn(Expr, Expr) -> Expr,
    ) -> Expr {
        let n = self.bind(&mut sw.rev, "n", builtin(Builtin::Len, vec![a.clone()]));
        let (i, x) = (self.names.fresh("i"), self.names.fresh("x"));
        let candidates = array_op(
            ArrayOp::Map2,
            lambda(
                vec![pvar(&i), pvar(&x)],
                cond(
                    prim(Prim::Eq, vec![var(&x), out.clone()]),
                    var(&i),
                    n.clone(),
                ),
            ),
            vec![iota.clone(), a.clone()],
        );
        let (p, q) = (self.names.fresh("p"), self.names.fresh("q"));
        let first = array_op(
            ArrayOp::Reduce,
            lambda(
                vec![pvar(&p), pvar(&q)],
                prim(Prim::IMin, vec![var(&p), var(&q)]),
            ),
            vec![n.clone(), candidates],
        );
        self.bind(
            &mut sw.rev,
            "argext",
            cond(beats(out.clone(), v.clone()), first, n),
        )
    }

    /// The context a fold step's gradient is taken in: the free variables
    /// of `(x, y. body)` that carry cotangents, then the accumulator `x`
    /// and the element `y`.
    pub(crate) fn step_context(
        &mut self,
        params: &[Name],
        body: &Expr,
        acc_ty: &Type,
        array_ty: &Type,
    ) -> Vec<(Name, Type)> {
        let Type::Array(elem_ty, _) = array_ty else {
            unreachable!("a fold over an array")
        };
        let fv = self.free_slots(body, params);
        let mut ctx = fv.clone();
        ctx.push((params[0].clone(), acc_ty.clone()));
        ctx.push((params[1].clone(), (**elem_ty).clone()));
        ctx
    }

    /// The function of the one right (or left) scan that reverses a fold
    /// or a scan, and its start: accumulator `(g, c₀ … cₘ₋₁, _)` (the
    /// state's cotangent, the free variables' sums, the last element's
    /// cotangent), element `(x, y)` (a step's state and element) or, with
    /// `own` (a scan's reverse), `((x, y), ζ)` where ζ is the state's own
    /// cotangent, added to what flows back. Returns
    /// `(ξ (+̂ ζ), c +̂ γ, η)` for `(γ, ξ, η) = ∇_{Γ',x,y} e · g`.
    pub(crate) fn reverse_step(
        &mut self,
        ctx: &[(Name, Type)],
        params: &[Name],
        body: &Expr,
        z: Expr,
        own: Option<&Type>,
        sparse: &[Name],
    ) -> AdResult<(Expr, Expr, Gradient)> {
        let elem_ty = &ctx[ctx.len() - 1].1;
        let (g, q, r) = (
            self.names.fresh("g"),
            self.names.fresh("q"),
            self.names.fresh("r"),
        );
        let (term, grad) = self.gradient_with(ctx, body, Adj::Val(var(&g)), sparse)?;
        let all_fv = &ctx[..ctx.len() - 2];
        let fv = Self::kept(all_fv.to_vec(), &grad.kept[..all_fv.len()]);
        let (kx, ky) = (fv.len(), fv.len() + 1);
        let len = fv.len() + 2 + 2 * grad.records.len();
        let step_pattern = ptuple(vec![pvar(&params[0]), pvar(&params[1])]);
        let sums: Vec<Name> = fv.iter().map(|_| self.names.fresh("c")).collect();
        let back_state = Self::component(var(&r), kx, len);
        let (elem_pattern, back_state) = match own {
            None => (pvar(&q), back_state),
            Some(state_ty) => {
                let zeta = self.names.fresh("zeta");
                let total = plus(state_ty, var(&zeta), back_state, &mut self.names);
                (ptuple(vec![pvar(&q), pvar(&zeta)]), total)
            }
        };
        let mut next = vec![back_state];
        for (j, (c, (_, t))) in sums.iter().zip(&fv).enumerate() {
            let term = Self::component(var(&r), j, len);
            next.push(plus(t, var(c), term, &mut self.names));
        }
        // The element's cotangent, then the step's sparse records: not
        // summed, each state holds its own step's.
        next.extend((ky..len).map(|k| Self::component(var(&r), k, len)));
        let mut acc_pattern = vec![pvar(&g)];
        acc_pattern.extend(sums.iter().map(pvar));
        acc_pattern.extend((ky..len).map(|_| Pattern::Wild(Default::default())));
        let back = lambda(
            vec![ptuple(acc_pattern), elem_pattern],
            let_in(
                step_pattern,
                var(&q),
                let_in(pvar(&r), term, Expr::synth(ExprKind::Tuple(next))),
            ),
        );
        let mut start = vec![z];
        start.extend(fv.iter().map(|(_, t)| zeros(t)));
        start.push(zeros(elem_ty));
        for (_, elem) in &grad.records {
            start.extend([int(0), zeros(elem)]);
        }
        Ok((back, Expr::synth(ExprKind::Tuple(start)), grad))
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn fold_backward(
        &mut self,
        sw: &mut Sweep,
        params: &[Name],
        body: &Expr,
        args: &[Arg],
        states: &Name,
        acc_ty: &Type,
        z: Expr,
    ) -> AdResult<()> {
        let (v, v_ty) = &args[0];
        let (a, a_ty) = &args[1];
        let ctx = self.step_context(params, body, acc_ty, a_ty);
        let fv = &ctx[..ctx.len() - 2];
        let Type::Array(elem_ty, _) = a_ty else {
            unreachable!("a fold over an array")
        };
        let a0 = self.bind(
            &mut sw.rev,
            "before",
            builtin(Builtin::Shift1R, vec![var(states)]),
        );

        // A real state and real elements (Figure 16). A fold over indices
        // takes the one reverse scan below, which measured faster for it.
        if *acc_ty == Type::Real && **elem_ty == Type::Real {
            // Free arrays read at computed positions: scattered once.
            let sparse = Self::free_arrays(fv);
            let (term, grad) = self.gradient_with(&ctx, body, Adj::Val(real(1.0)), &sparse)?;
            let fv = Self::kept(fv.to_vec(), &grad.kept[..fv.len()]);
            let (kx, ky) = (fv.len(), fv.len() + 1);
            let len = fv.len() + 2 + 2 * grad.records.len();
            let function = lambda(params.iter().map(pvar).collect(), body.clone());
            let per_step = array_op(
                ArrayOp::Map2,
                lambda(params.iter().map(pvar).collect(), term),
                vec![a0, a.clone()],
            );
            let p = self.bind(&mut sw.rev, "partials", per_step);
            let pick = |d: &mut Deriver, k: usize| {
                let g = d.names.fresh("g");
                array_op(
                    ArrayOp::Map,
                    lambda(vec![pvar(&g)], Self::component(var(&g), k, len)),
                    vec![p.clone()],
                )
            };
            let a1 = pick(self, kx);
            let a1 = self.bind(&mut sw.rev, "dstate", a1);
            let s3 = array_op(ArrayOp::Scanr, self.times(), vec![real(1.0), a1]);
            let s3 = self.bind(&mut sw.rev, "suffix", s3);
            let a3 = self.bind(
                &mut sw.rev,
                "after",
                builtin(Builtin::Shift1L, vec![s3.clone()]),
            );
            let a2 = pick(self, ky);
            let a2 = self.bind(&mut sw.rev, "delem", a2);
            let (u, w) = (self.names.fresh("u"), self.names.fresh("w"));
            let elem_adj = array_op(
                ArrayOp::Map2,
                lambda(
                    vec![pvar(&u), pvar(&w)],
                    mul(mul(var(&u), var(&w)), z.clone()),
                ),
                vec![a2, a3.clone()],
            );
            self.add(sw, a, a_ty, Adj::Val(elem_adj));
            self.add(sw, v, v_ty, Adj::Val(mul(index(s3, 0), z.clone())));
            for (j, (n, t)) in fv.iter().enumerate() {
                let (c, g) = (self.names.fresh("c"), self.names.fresh("g"));
                let part = Self::component(var(&g), j, len);
                let scaled = scale(t, var(&c), part, &mut self.names);
                let terms = array_op(
                    ArrayOp::Map2,
                    lambda(vec![pvar(&c), pvar(&g)], scaled),
                    vec![a3.clone(), p.clone()],
                );
                let total = crate::adjoint::sum(t, terms, &mut self.names);
                let contribution = scale(t, z.clone(), total, &mut self.names);
                self.add(sw, &var(n), t, Adj::Val(contribution));
            }
            if !grad.records.is_empty() {
                // Step i's records weigh ∏_{j>i} ∂Sⱼ/∂Sⱼ₋₁ · z.
                let c = self.names.fresh("c");
                let weights = map1(&c, mul(var(&c), z.clone()), a3);
                let weights = self.bind(&mut sw.rev, "weights", weights);
                self.scatter_records(sw, &grad, &function, &ctx, &p, kx + 2, len, Some(&weights));
            }
            return Ok(());
        }

        // Vector–Jacobian products along one right scan: each step's
        // gradient is taken once, and gives the cotangent of the state
        // before it, the step's term of the free variables' cotangents
        // (summed in the scan's accumulator) and the element's cotangent.
        let (s, e) = (self.names.fresh("s"), self.names.fresh("e"));
        let zipped = array_op(
            ArrayOp::Map2,
            lambda(vec![pvar(&s), pvar(&e)], tuple(vec![var(&s), var(&e)])),
            vec![a0, a.clone()],
        );
        let x = self.bind(&mut sw.rev, "steps", zipped);
        // Free arrays read at computed positions: their records are
        // scattered once after the scan, not summed in its states.
        let sparse = Self::scattered_by_scans(fv);
        let (back, start, grad) = self.reverse_step(&ctx, params, body, z, None, &sparse)?;
        let fv = Self::kept(fv.to_vec(), &grad.kept[..fv.len()]);
        let cot = self.bind(
            &mut sw.rev,
            "dstates",
            array_op(ArrayOp::Scanr, back, vec![start, x]),
        );
        let first = self.bind(&mut sw.rev, "dfirst", index(cot.clone(), 0));
        let steps = self.bind(&mut sw.rev, "dsteps", builtin(Builtin::Shift1R, vec![cot]));
        let scan = ReverseScan {
            grad: &grad,
            params,
            body,
            ctx: &ctx,
            fv: &fv,
        };
        self.add_reverse_scan(sw, scan, &first, &steps, (&args[0], &args[1]));
        Ok(())
    }

    /// The cotangents a reverse scan of [`Deriver::reverse_step`] gives:
    /// `first` the state holding the initial value's and the free
    /// variables' sums, `steps` each step's state (the element's
    /// cotangent, then the step's sparse records, which are scattered).
    pub(crate) fn add_reverse_scan(
        &mut self,
        sw: &mut Sweep,
        scan: ReverseScan<'_>,
        first: &Expr,
        steps: &Expr,
        ((v, v_ty), (a, a_ty)): (&Arg, &Arg),
    ) {
        let fv = scan.fv;
        let width = fv.len() + 2 + 2 * scan.grad.records.len();
        let t = self.names.fresh("t");
        let elem = Self::component(var(&t), fv.len() + 1, width);
        let elem_adj = map1(&t, elem, steps.clone());
        self.add(sw, a, a_ty, Adj::Val(elem_adj));
        self.add(sw, v, v_ty, Adj::Val(proj(first.clone(), 0)));
        for (j, (n, t)) in fv.iter().enumerate() {
            self.add(sw, &var(n), t, Adj::Val(proj(first.clone(), 1 + j)));
        }
        if !scan.grad.records.is_empty() {
            let function = lambda(scan.params.iter().map(pvar).collect(), scan.body.clone());
            self.scatter_records(
                sw,
                scan.grad,
                &function,
                scan.ctx,
                steps,
                fv.len() + 2,
                width,
                None,
            );
        }
    }
}

/// What [`Deriver::add_reverse_scan`] reads of the step it reversed: its
/// gradient's layout, its function, its context and the free variables
/// whose cotangents the scan sums.
pub(crate) struct ReverseScan<'a> {
    pub grad: &'a Gradient,
    pub params: &'a [Name],
    pub body: &'a Expr,
    pub ctx: &'a [(Name, Type)],
    pub fv: &'a [(Name, Type)],
}
