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
    let mut names = NameSupply::new();
    for (n, _) in &closed.params {
        names.reserve(n);
    }
    for n in &closed.size_vars {
        names.reserve(n);
    }
    reserve(&closed.body, &mut names);
    Closed {
        body: expand_expr(&closed.body, &mut names),
        ..closed.clone()
    }
}

fn reserve(e: &Expr, names: &mut NameSupply) {
    let mut todo = vec![e];
    while let Some(e) = todo.pop() {
        match &e.kind {
            ExprKind::Var(n) => names.reserve(n),
            ExprKind::Let { pat, .. } => pattern_names(pat, names),
            ExprKind::Lambda(ps, _) => ps.iter().for_each(|p| pattern_names(&p.pat, names)),
            _ => {}
        }
        todo.extend(e.children());
    }
}

fn pattern_names(p: &Pattern, names: &mut NameSupply) {
    let mut ns = Vec::new();
    p.names(&mut ns);
    ns.iter().for_each(|n| names.reserve(n));
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
