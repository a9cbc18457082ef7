//! η-expansion of primitive function arguments: `map2 (*) A B` ⇝
//! `map2 (a, b. a * b) A B`. Simplification contracts lambdas to sections
//! (so printed programs read like the paper); the lowering reads the
//! function argument of every array operation as a lambda.

use gradlift_lang::build::{lambda, prim, pvar, var};
use gradlift_lang::closed::Closed;
use gradlift_lang::deep::guard;
use gradlift_lang::names::NameSupply;
use gradlift_lang::syntax::*;

/// `closed` with every primitive function argument written as a lambda.
pub fn expand(closed: &Closed) -> Closed {
    let mut names = closed.name_supply();
    Closed {
        body: expand_expr(&closed.body, &mut names),
        ..closed.clone()
    }
}

fn expand_expr(e: &Expr, names: &mut NameSupply) -> Expr {
    guard(|| match &e.kind {
        ExprKind::ArrayOp(op, f, args) => {
            let f = match &f.kind {
                ExprKind::PrimFn(p) => {
                    let params: Vec<Name> = ["a", "b"][..p.info().arity]
                        .iter()
                        .map(|b| names.fresh(b))
                        .collect();
                    let body = prim(*p, params.iter().map(var).collect());
                    lambda(params.iter().map(pvar).collect(), body)
                }
                _ => expand_expr(f, names),
            };
            let args = args.iter().map(|a| expand_expr(a, names)).collect();
            Expr::new(ExprKind::ArrayOp(*op, Box::new(f), args), e.span)
        }
        _ => e.map_children(&mut |c| expand_expr(c, names)),
    })
}
