//! UNF⁻¹ (Figure 10): Target UNF → Target.
//!
//! A stack `[A₁,…,A_k]` is read as the context `x₁:A₁,…,x_k:A_k`; each
//! primitive that pushes a value becomes a binding of the next variable:
//!
//! ```text
//! UNF⁻¹(var_{Γ;i})        = xᵢ                          -- let x_{k+1} = xᵢ
//! UNF⁻¹(op_{Γ;m})         = op(x_{k+1},…,x_{k+m})       -- on the top m entries
//! UNF⁻¹(e₁ ; e₂)          = let x_{k+1} = UNF⁻¹(e₁) in UNF⁻¹(e₂)
//! UNF⁻¹(proj_{T₁;T₂;T₃})  = the variables of T₁ then T₃ (a renaming)
//! UNF⁻¹(e₁ ∘ e₂)          = fun (y⃗) → UNF⁻¹(e₁)(UNF⁻¹(e₂)[y⃗/x⃗])
//! UNF⁻¹(Jᵀ var_{Γ;i})     = (…, xᵢ + x_{k+1}, …)
//! UNF⁻¹(Jᵀ op_{Γ;m})      = (x⃗, x_{k+j} + ∂ⱼop(p⃗)·x_{k+m+1} …)
//! UNF⁻¹(Jᵀ proj_{T₁;T₂;T₃}) = (x⃗_{T₁}, 0_{T₂}, x⃗_{T₃})
//! UNF⁻¹(Jᵀ map2), UNF⁻¹(Jᵀ reduce): Figure 5's rules (E3, E8)
//! ```
//!
//! The primal half of every `F(P, Jᵀ P)` becomes a binding and a step of
//! the forward tape shared with the direct route (`direct.rs`); the
//! transposes become the continuation chain `Yᵢ = Yᵢ₋₁ ∘ Jᵀ Pᵢ`, built
//! literally (one `fun` per primitive, as ∘ prints) or sparsely (the
//! updates applied as they are built, `Construction::Sparse`). A `proj`
//! forgets entries, so the transposes pass zero for them: in the sparse
//! construction nothing is emitted, since a forgotten entry is never read
//! again. The transposes of the primitives are the rules of `rules/`, so the
//! two routes share them; Proposition 6.14 — UNF⁻¹(D_ρ(UNF(e))) has the
//! semantics of D(e) — is checked by the tests on every construct.
//!
//! Figure 10's garbled indices are read as figures.md §3 restates them; the
//! missing `Ā +̂`, `B̄ +̂` terms of Jᵀ map2 and Jᵀ reduce are present (the
//! rules add into the incoming cotangents).

use crate::direct::{check_wrt, AdResult, Construction, Deriver, Route, StepKind, Tape};
use crate::inline::Closed;
use crate::reverse_unf::{reverse_unf, TargetUnf};
use crate::unf::{unf, OpKind, UnfPrim};
use gradlift_lang::build::*;
use gradlift_lang::syntax::*;

/// The gradient of `closed` with respect to `wrt` by the UNF route:
/// UNF⁻¹(D_ρ(UNF(e))) applied to `(0, 1)`, a term returning `(value, gradient)`.
pub fn reverse(closed: &Closed, wrt: &[Name], construction: Construction) -> AdResult<Expr> {
    let wrt = check_wrt(closed, wrt)?;
    let mut d = Deriver::new(closed, Route::Unf);
    d.differentiate_only(closed, &wrt);
    let mut tape = Tape::default();
    let (value, _) = d.unf_forward(&mut tape, &closed.context(), &closed.body)?;
    d.finish(tape, value, closed, &wrt, construction)
}

impl Deriver {
    /// UNF, D_ρ and the primal half of UNF⁻¹ for `body` over `ctx`: emits
    /// the bindings and steps into `tape` and returns the result's atom.
    pub(crate) fn unf_forward(
        &mut self,
        tape: &mut Tape,
        ctx: &[(Name, Type)],
        body: &Expr,
    ) -> AdResult<(Expr, Type)> {
        let size_vars: Vec<Name> = Vec::new();
        let target = reverse_unf(unf(ctx, &size_vars, body));
        self.unf_inverse(tape, ctx, &target)
    }

    fn unf_inverse(
        &mut self,
        tape: &mut Tape,
        ctx: &[(Name, Type)],
        target: &TargetUnf,
    ) -> AdResult<(Expr, Type)> {
        // The stack, as atoms naming its entries.
        let mut stack: Vec<Expr> = ctx.iter().map(|(n, _)| var(n)).collect();
        for p in target.prims() {
            match p {
                UnfPrim::Var { index, .. } => {
                    let x = stack[*index].clone();
                    let (out, _) = self.emit(tape, "x", x.clone(), StepKind::Copy(x))?;
                    stack.push(out);
                }
                UnfPrim::Op { arity, kind, .. } => {
                    let args: Vec<Expr> = stack[stack.len() - arity..].to_vec();
                    let out = self.unf_op(tape, kind, args)?;
                    stack.push(out);
                }
                UnfPrim::Proj { keep, drop, .. } => {
                    stack.drain(*keep..keep + drop);
                }
                UnfPrim::Name(n) => {
                    // The top entry is the binding just made: it takes the name.
                    let top = stack.last_mut().expect("a value to name");
                    let ExprKind::Var(old) = &top.kind else {
                        unreachable!("every stack entry is a variable")
                    };
                    let old = old.clone();
                    let (pat, _) = tape.fwd.last_mut().expect("the value was bound");
                    assert!(
                        matches!(pat, Pattern::Var(m, _) if *m == old),
                        "the named entry is the last binding"
                    );
                    *pat = pvar(n);
                    if let Some(step) = tape.steps.last_mut().filter(|s| s.out == old) {
                        step.out = n.clone();
                    }
                    let ty = self.typer.lookup(&old).cloned().expect("bound");
                    self.typer.push(n.clone(), ty);
                    self.rename_activity(&old, n);
                    *top = var(n);
                }
            }
        }
        let result = stack.pop().expect("UNF leaves the value on top");
        let ty = self.type_of(&result);
        Ok((result, ty))
    }

    fn unf_op(&mut self, tape: &mut Tape, kind: &OpKind, args: Vec<Expr>) -> AdResult<Expr> {
        let typed: Vec<(Expr, Type)> = args.iter().map(|a| (a.clone(), self.type_of(a))).collect();
        let (value, step) = match kind {
            OpKind::Const(c) => (real(*c), StepKind::Constant),
            OpKind::Int(k) => (int(*k), StepKind::Constant),
            OpKind::Size(n) => (var(n), StepKind::Constant),
            OpKind::Prim(p) => (prim(*p, args.clone()), StepKind::Prim(*p, args)),
            OpKind::Tuple => (Expr::synth(ExprKind::Tuple(args)), StepKind::Tuple(typed)),
            OpKind::Component(k) => (
                proj(args[0].clone(), *k),
                StepKind::Proj(typed[0].clone(), *k),
            ),
            OpKind::ArrayLit => (
                Expr::synth(ExprKind::ArrayLit(args)),
                StepKind::ArrayLit(typed),
            ),
            OpKind::Index(k) => (
                index(args[0].clone(), *k),
                StepKind::Index(typed[0].clone(), *k),
            ),
            OpKind::Builtin(b, sizes) => {
                let mut all: Vec<(Expr, Type)> =
                    sizes.iter().map(|s| (s.clone(), Type::Int)).collect();
                all.extend(typed);
                let value = builtin(*b, all.iter().map(|a| a.0.clone()).collect());
                let step = match b {
                    Builtin::Len | Builtin::Iota => StepKind::Constant,
                    _ => StepKind::Builtin(*b, all),
                };
                (value, step)
            }
            OpKind::If(c, t, e) => (
                cond(c.clone(), t.clone(), e.clone()),
                StepKind::If(c.clone(), t.clone(), e.clone()),
            ),
            OpKind::ArrayOp(op, names, body) => {
                let (out, _) = self.array_op_step(tape, *op, names.clone(), body.clone(), typed)?;
                return Ok(out);
            }
        };
        let (out, _) = self.emit(tape, "x", value, step)?;
        Ok(out)
    }
}
