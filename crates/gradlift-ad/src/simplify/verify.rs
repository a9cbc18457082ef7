//! The verifier of Lemma 5.3: after partial evaluation a Target term is
//! first order — the restricted Target on which the cost model of Figure 11
//! is defined and which the backend lowers.
//!
//! Checked: every lambda is the function argument of an array operation
//! (`map`, `map2`, `reduce`, `foldl`, `scanl`, `scanr`); no application
//! `f(…)` remains (a call of a definition included: calls are inlined
//! before differentiation); no primitive is used as a value outside that
//! function position; no variable stands in function position (it would be
//! of function type); no annotation (of a `let` or a lambda parameter)
//! mentions a function type. Given ground free variables, a term passing
//! these checks has no variable of function type.

use gradlift_lang::deep::guard;
use gradlift_lang::syntax::*;
use gradlift_lang::Span;

/// Checks that `e` is first order (Lemma 5.3); the error names the first
/// offending subterm and says what is wrong with it.
pub fn is_first_order(e: &Expr) -> Result<(), (Span, String)> {
    check(e, false)
}

fn mentions_function(t: &Type) -> bool {
    match t {
        Type::Fun(..) => true,
        Type::Real | Type::Int | Type::Bool => false,
        Type::Tuple(ts) => ts.iter().any(mentions_function),
        Type::Array(t, _) => mentions_function(t),
    }
}

fn check(e: &Expr, function_position: bool) -> Result<(), (Span, String)> {
    guard(|| {
        let mut e = e;
        while let ExprKind::Let {
            ty, value, body, ..
        } = &e.kind
        {
            if let Some(t) = ty.as_ref().filter(|t| mentions_function(t)) {
                return Err((
                    e.span,
                    format!("a `let` binds a value of function type `{t}`"),
                ));
            }
            check(value, false)?;
            e = body;
        }
        match &e.kind {
            ExprKind::Lambda(params, body) => {
                if !function_position {
                    return Err((
                        e.span,
                        "a lambda outside the function argument of an array operation".into(),
                    ));
                }
                for p in params {
                    if let Some(t) = p.ty.as_ref().filter(|t| mentions_function(t)) {
                        return Err((
                            p.pat.span(),
                            format!("a lambda parameter of function type `{t}`"),
                        ));
                    }
                }
                check(body, false)
            }
            ExprKind::PrimFn(p) if !function_position => Err((
                e.span,
                format!("the primitive `{p}` used as a value outside the function argument of an array operation"),
            )),
            ExprKind::Var(n) if function_position => Err((
                e.span,
                format!("the variable `{n}` of function type as the function argument of an array operation"),
            )),
            ExprKind::Apply(..) => Err((e.span, "an application `f(…)`".into())),
            ExprKind::ArrayOp(op, f, args) => {
                check(f, true)?;
                // `revfold`'s and `revwhile`'s step function is their first
                // argument.
                let step = matches!(op, ArrayOp::Revfold(_) | ArrayOp::Revwhile(_));
                args.iter()
                    .enumerate()
                    .try_for_each(|(i, a)| check(a, step && i == 0))
            }
            _ => e.children().try_for_each(|c| check(c, false)),
        }
    })
}
