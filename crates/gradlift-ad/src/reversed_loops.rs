//! The reverse of a loop inside a program that reverse mode differentiates
//! again (the `reversed-loops` pass): each `revfold` that an inner
//! derivative left (`derivatives`) becomes the scans it computes, which the
//! fold rules (`rules/fold.rs`) differentiate.
//!
//! `revfold VJP STEP v A z f` reverses the steps of `foldl STEP v A` from
//! the last, recomputing the states from snapshots. Written without a
//! schedule it is:
//!
//! ```text
//! S = scanl STEP v A                          -- the states S₀ … Sₙ
//! X = map2 (s, a. (s, a)) (shift1R S) A        -- each step's state and element
//! C = scanr ((g, f), (s, a). let r = VJP(s, a, g, f) in (r.0, r.2)) (z, f) X
//! Ā = map2 ((s, a), (g, f). VJP(s, a, g, f).1) X (shift1L C)
//! (C[0].0, Ā, C[0].1)
//! ```
//!
//! `C[i]` is the cotangent of `Sᵢ` and the accumulator after the steps
//! `i … n-1` have been reversed, as `revfold` computes them.
//!
//! **`revwhile` is left as it is**: its states would need an array as long
//! as the trip count, which is known only at run time, and an array's
//! length is a size (docs/language.md §2), not a computed integer. The
//! `target` pass takes the gradient of a term holding one by forward mode
//! instead (`derivatives::forward_gradient`), which runs `revwhile` as it
//! is.
//!
//! **What it guarantees.** The same values as the scheduled loop, the
//! operations of each step in the same order: only the free variables'
//! accumulator may differ in the last bits, since the scheduled loop and
//! this one both sum it from the last step. **What it costs.** The outer
//! reverse pass needs every state in both orders, so the states are stored:
//! memory grows with the trip count, where the inner gradient alone keeps
//! only its snapshots; each step's `VJP` runs twice (once for the
//! cotangents carried, once for the element's), and the outer reverse
//! differentiates both. Forward mode needs none of this: it
//! differentiates `revfold` as it is.

use crate::direct::AdError;
use crate::inline::Closed;
use gradlift_lang::build::*;
use gradlift_lang::deep::guard;
use gradlift_lang::names::NameSupply;
use gradlift_lang::scope::Scope;
use gradlift_lang::syntax::*;

/// Whether `e` holds a `revfold`.
pub fn has_revfold(e: &Expr) -> bool {
    holds(e, &|op| matches!(op, ArrayOp::Revfold(_)))
}

/// Whether `e` holds a `revwhile`.
pub fn has_revwhile(e: &Expr) -> bool {
    holds(e, &|op| matches!(op, ArrayOp::Revwhile(_)))
}

/// Whether `e` holds an array operation `op` with `wanted(op)`.
fn holds(e: &Expr, wanted: &dyn Fn(ArrayOp) -> bool) -> bool {
    let mut todo = vec![e];
    while let Some(e) = todo.pop() {
        if matches!(&e.kind, ExprKind::ArrayOp(op, ..) if wanted(*op)) {
            return true;
        }
        todo.extend(e.children());
    }
    false
}

/// `closed` with every `revfold` written as scans (module documentation).
pub fn as_scans(closed: &Closed) -> Result<Closed, AdError> {
    let mut names = closed.name_supply();
    Ok(Closed {
        body: rewrite(&closed.body, &mut names),
        ..closed.clone()
    })
}

fn rewrite(e: &Expr, names: &mut NameSupply) -> Expr {
    guard(|| {
        let e = e.map_children(&mut |c| rewrite(c, names));
        match &e.kind {
            ExprKind::ArrayOp(ArrayOp::Revfold(_), vjp, args) => {
                let [step, v, a, z, f] = &args[..] else {
                    return e.clone();
                };
                let mut out = scans(vjp, step, v, a, z, f, names);
                out.span = e.span;
                out
            }
            _ => e,
        }
    })
}

/// `f(args…)` with `f` a lambda (its parameters bound by `let`) or a
/// primitive.
fn call(f: &Expr, args: Vec<Expr>) -> Expr {
    match &f.kind {
        ExprKind::Lambda(params, body) => params
            .iter()
            .zip(args)
            .rev()
            .fold((**body).clone(), |b, (p, a)| let_in(p.pat.clone(), a, b)),
        ExprKind::PrimFn(p) => prim(*p, args),
        _ => apply(f.clone(), args),
    }
}

fn scans(
    vjp: &Expr,
    step: &Expr,
    v: &Expr,
    a: &Expr,
    z: &Expr,
    f: &Expr,
    names: &mut NameSupply,
) -> Expr {
    let mut fresh = |n: &str| names.fresh(n);
    let (states, steps, carried) = (fresh("states"), fresh("steps"), fresh("carried"));
    // S = scanl STEP v A.
    let (s0, a0) = (fresh("s"), fresh("a"));
    let forward = array_op(
        ArrayOp::Scanl,
        lambda(
            vec![pvar(&s0), pvar(&a0)],
            call(step, vec![var(&s0), var(&a0)]),
        ),
        vec![v.clone(), a.clone()],
    );
    // X = map2 (s, a. (s, a)) (shift1R S) A.
    let (s1, a1) = (fresh("s"), fresh("a"));
    let xs = array_op(
        ArrayOp::Map2,
        lambda(vec![pvar(&s1), pvar(&a1)], tuple(vec![var(&s1), var(&a1)])),
        vec![builtin(Builtin::Shift1R, vec![var(&states)]), a.clone()],
    );
    // C = scanr ((g, f), (s, a). let r = VJP(s, a, g, f) in (r.0, r.2)) (z, f) X.
    let (g, acc, r, s2, a2) = (fresh("g"), fresh("acc"), fresh("r"), fresh("s"), fresh("a"));
    let backward = array_op(
        ArrayOp::Scanr,
        lambda(
            vec![
                ptuple(vec![pvar(&g), pvar(&acc)]),
                ptuple(vec![pvar(&s2), pvar(&a2)]),
            ],
            let_in(
                pvar(&r),
                call(vjp, vec![var(&s2), var(&a2), var(&g), var(&acc)]),
                tuple(vec![proj(var(&r), 0), proj(var(&r), 2)]),
            ),
        ),
        vec![tuple(vec![z.clone(), f.clone()]), var(&steps)],
    );
    // Ā = map2 ((s, a), (g, f). VJP(s, a, g, f).1) X (shift1L C).
    let (g3, acc3, s3, a3) = (fresh("g"), fresh("acc"), fresh("s"), fresh("a"));
    let vjp = crate::derivatives::freshen(vjp, names, &mut Scope::new());
    let elements = array_op(
        ArrayOp::Map2,
        lambda(
            vec![
                ptuple(vec![pvar(&s3), pvar(&a3)]),
                ptuple(vec![pvar(&g3), pvar(&acc3)]),
            ],
            proj(
                call(&vjp, vec![var(&s3), var(&a3), var(&g3), var(&acc3)]),
                1,
            ),
        ),
        vec![var(&steps), builtin(Builtin::Shift1L, vec![var(&carried)])],
    );
    let first = index(var(&carried), 0);
    let result = tuple(vec![proj(first.clone(), 0), elements, proj(first, 1)]);
    let_in(
        pvar(&states),
        forward,
        let_in(pvar(&steps), xs, let_in(pvar(&carried), backward, result)),
    )
}
