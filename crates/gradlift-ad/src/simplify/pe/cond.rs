//! Conditions and conditionals (Figure 12 "Conditionals"): comparisons of
//! constants and connectives with a known operand are decided
//! (`cond-fold`); an `if` whose condition is unknown gets a block per
//! branch, and becomes its branch when both branches are the same term up
//! to the names of their binders, once the bindings no later one or the
//! result reads are left out (`if-same`). A known condition is taken by
//! the evaluator itself, in tail position (`if-known`).

use super::{code, ill_typed, val_of, Pe, Res, Val};
use crate::simplify::alpha::Alpha;
use crate::simplify::rules::Rule;
use crate::simplify::term::*;
use gradlift_lang::deep::guard;
use gradlift_lang::prim::PrimKind;
use gradlift_lang::syntax::*;
use gradlift_lang::{Prim, Span};

/// A condition: known, or residual.
pub(super) enum Cond {
    Known(bool),
    Code(Expr),
}

impl Pe<'_> {
    pub(super) fn cond(&mut self, e: &Expr) -> Res<Cond> {
        guard(|| {
            let ExprKind::Prim(p, args) = &e.kind else {
                return ill_typed(e.span, "expected a condition");
            };
            match p.info().kind() {
                PrimKind::Compare => {
                    let vals = self.eval_all(args)?;
                    if let [Val::Const(a, _), Val::Const(b, _)] = vals.as_slice() {
                        self.stats.fire(Rule::CondFold);
                        return Ok(Cond::Known(p.eval_compare(*a, *b)));
                    }
                    let args = self.residual_all(vals, e.span)?;
                    Ok(Cond::Code(Expr::new(ExprKind::Prim(*p, args), e.span)))
                }
                PrimKind::IntCompare => {
                    let vals = self.eval_all(args)?;
                    if let [Val::Int(a), Val::Int(b)] = vals.as_slice() {
                        self.stats.fire(Rule::CondFold);
                        return Ok(Cond::Known(p.eval_int_compare(*a, *b)));
                    }
                    let args = self.residual_all(vals, e.span)?;
                    Ok(Cond::Code(Expr::new(ExprKind::Prim(*p, args), e.span)))
                }
                PrimKind::Logic => {
                    let cs = args.iter().map(|a| self.cond(a)).collect::<Res<Vec<_>>>()?;
                    Ok(self.logic(*p, cs, e.span))
                }
                PrimKind::Real | PrimKind::Int | PrimKind::ToReal | PrimKind::ToInt => {
                    ill_typed(e.span, "expected a condition, found a number")
                }
            }
        })
    }

    pub(super) fn logic(&mut self, p: Prim, mut cs: Vec<Cond>, span: Span) -> Cond {
        use Cond::*;
        let absorbing = p == Prim::Or;
        if p == Prim::Not {
            return match cs.pop() {
                Some(Known(b)) => {
                    self.stats.fire(Rule::CondFold);
                    Known(!b)
                }
                Some(Code(c)) => Code(Expr::new(ExprKind::Prim(p, vec![c]), span)),
                None => unreachable!("`not` has one operand"),
            };
        }
        let b = cs.pop().expect("two operands");
        let a = cs.pop().expect("two operands");
        match (a, b) {
            (Known(x), _) | (_, Known(x)) if x == absorbing => {
                self.stats.fire(Rule::CondFold);
                Known(absorbing)
            }
            (Known(_), other) | (other, Known(_)) => {
                self.stats.fire(Rule::CondFold);
                other
            }
            (Code(a), Code(b)) => Code(Expr::new(ExprKind::Prim(p, vec![a, b]), span)),
        }
    }

    /// `if c then t else f` with `c` unknown: each branch a block of its own.
    pub(super) fn branch(&mut self, c: Expr, t: &Expr, f: &Expr, span: Span) -> Res<Val> {
        let mut then = self.block_of(t)?;
        let mut other = self.block_of(f)?;
        // A block holds what partial evaluation bound while building it,
        // some of which its result no longer reads (a sum whose only
        // reader folded away): those hide branches that are the same.
        // Looked for only where the results already agree.
        if !Alpha::new(false).eq(&then, &other)
            && Alpha::new(false).eq(result(&then), result(&other))
        {
            then = live_only(then);
            other = live_only(other);
        }
        if Alpha::new(false).eq(&then, &other) {
            self.stats.fire(Rule::IfSame);
            let (bindings, body) = split_lets(then);
            self.block.extend(bindings);
            return Ok(val_of(body));
        }
        let kind = ExprKind::If(Box::new(c), Box::new(then), Box::new(other));
        Ok(code(kind, span))
    }

    pub(super) fn block_of(&mut self, e: &Expr) -> Res<Expr> {
        self.block_with(|pe| pe.eval(e), e.span)
    }
}
