//! The pipeline: every pass of differentiation, in order, in one list.
//!
//! ```text
//! Source ─inline─▶ closed Source ─unf─▶ Source UNF ─reverse─▶ Target UNF
//!        ─unf-inverse─▶ Target ─simplify─▶ first-order Target
//! ```
//!
//! Stage names (for `emit --stage`): `source`, `unf`, `target-unf`,
//! `target`, `opt`.
//!
//! `--via direct` replaces `unf`, `reverse` and `unf-inverse` by the one
//! pass `direct` (Figure 5). Reading [`PASSES`] tells the whole compiler;
//! `gradlift emit --stage` stops after any pass, and [`verify`] checks the
//! invariants of the Target after the passes that produce it.

use crate::direct::{self, AdError, Construction, Route};
use crate::inline::{first_order, inline, Closed};
use crate::reverse_unf::{reverse_unf, TargetUnf};
use crate::simplify::{is_first_order, simplify_avoiding, Options as SimplifyOptions};
use crate::unf::{unf, Unf};
use crate::unf_inverse;
use gradlift_lang::syntax::*;
use gradlift_lang::types::check_expr;
use gradlift_lang::CheckedModule;

/// A pass: its name, what it does, and what it implements.
#[derive(Clone, Copy, Debug)]
pub struct Pass {
    /// The name `emit --stage` uses for its output.
    pub name: &'static str,
    /// One line.
    pub description: &'static str,
    /// The figure or section of Huot & Shaikhha it implements.
    pub source: &'static str,
}

/// Every pass, in order.
pub const PASSES: &[Pass] = &[
    Pass {
        name: "source",
        description: "inline calls, make every function argument a lambda, rename binders apart",
        source: "§2 (calls are inlined before differentiation)",
    },
    Pass {
        name: "unf",
        description: "sequentialize Source into a stack program of var, op, proj",
        source: "Figure 9 (with the weakening of §4.4, erratum E1)",
    },
    Pass {
        name: "target-unf",
        description: "pair every primitive with its transposed Jacobian, F(P, Jᵀ P)",
        source: "Figure 8",
    },
    Pass {
        name: "target",
        description: "name the stack entries and build the continuation chain: (value, gradient)",
        source: "Figure 10 (or Figure 5 by --via direct)",
    },
    Pass {
        name: "opt",
        description:
            "partial evaluation, the rewrites of Figure 12, CSE and DCE: a first-order program",
        source: "§5.1, Figure 12, Lemma 5.3",
    },
];

/// Options of differentiation.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// UNF (default) or direct.
    pub route: Route,
    /// Sparse continuations (default) or literal ones.
    pub construction: Construction,
    /// Run the `opt` pass (default): partial evaluation and simplification.
    pub optimize: bool,
    /// The checkpoint schedule of every `foldl` that names none
    /// (`--checkpoint`); `None` keeps every state of such loops.
    pub checkpoint: Option<Schedule>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            route: Route::default(),
            construction: Construction::default(),
            optimize: true,
            checkpoint: None,
        }
    }
}

/// A gradient program: a Target term over the function's parameters and
/// size variables returning `(value, gradient)`.
#[derive(Clone, Debug)]
pub struct Gradient {
    /// The function, inlined.
    pub closed: Closed,
    /// The parameters differentiated, with their types, in order.
    pub wrt: Vec<(Name, Type)>,
    /// The Target term.
    pub term: Expr,
}

/// Differentiates definition `index` of `module` with respect to `wrt`
/// (all value parameters when `None`).
pub fn gradient(
    module: &CheckedModule,
    index: usize,
    wrt: Option<&[Name]>,
    options: Options,
) -> Result<Gradient, AdError> {
    let mut closed = inline(module, index);
    first_order(&closed.body)?;
    if let Some(schedule) = options.checkpoint {
        closed.body = with_checkpoints(&closed.body, schedule);
    }
    let all: Vec<Name> = closed.context().into_iter().map(|(n, _)| n).collect();
    let wrt_names = wrt.map(|w| w.to_vec()).unwrap_or(all);
    let term = match options.route {
        Route::Unf => unf_inverse::reverse(&closed, &wrt_names, options.construction)?,
        Route::Direct => direct::reverse(&closed, &wrt_names, options.construction)?,
    };
    let wrt = direct::check_wrt(&closed, &wrt_names)?;
    let mut g = Gradient { closed, wrt, term };
    if cfg!(debug_assertions) {
        if let Err(e) = verify(&g) {
            panic!(
                "the gradient of `{}` fails verification after `target`: {e}\n{}",
                g.closed.name, g.term
            );
        }
    }
    if options.optimize {
        g.term = simplify_avoiding(&g.term, &SimplifyOptions::default(), &g.closed.size_vars)?;
        if cfg!(debug_assertions) {
            if let Err(e) = verify(&g).and_then(|()| is_first_order(&g.term).map_err(|(_, m)| m)) {
                panic!(
                    "the gradient of `{}` fails verification after `opt`: {e}\n{}",
                    g.closed.name, g.term
                );
            }
        }
    }
    Ok(g)
}

/// `e` with `schedule` on every `foldl` that has no schedule of its own.
pub fn with_checkpoints(e: &Expr, schedule: Schedule) -> Expr {
    gradlift_lang::deep::guard(|| match &e.kind {
        ExprKind::ArrayOp(ArrayOp::Foldl(None), f, args) => Expr::new(
            ExprKind::ArrayOp(
                ArrayOp::Foldl(Some(schedule)),
                Box::new(with_checkpoints(f, schedule)),
                args.iter().map(|a| with_checkpoints(a, schedule)).collect(),
            ),
            e.span,
        ),
        _ => e.map_children(&mut |c| with_checkpoints(c, schedule)),
    })
}

/// The Source UNF of definition `index` (the `unf` stage).
pub fn source_unf(closed: &Closed) -> Result<Unf, AdError> {
    first_order(&closed.body)?;
    Ok(unf(&closed.context(), &closed.size_vars, &closed.body))
}

/// The Target UNF (the `target-unf` stage).
pub fn target_unf(closed: &Closed) -> Result<TargetUnf, AdError> {
    Ok(reverse_unf(source_unf(closed)?))
}

/// The invariants of a gradient program: it type-checks over the
/// parameters and size variables, with type `(R, gradient types)`.
pub fn verify(g: &Gradient) -> Result<(), String> {
    let ty =
        check_expr(&g.closed.context(), &g.closed.size_vars, &g.term).map_err(|e| e.to_string())?;
    let grads: Vec<Type> = g.wrt.iter().map(|(_, t)| t.clone()).collect();
    let grad_ty = if grads.len() == 1 {
        grads[0].clone()
    } else {
        Type::Tuple(grads)
    };
    let want = Type::Tuple(vec![Type::Real, grad_ty]);
    if ty != want {
        return Err(format!(
            "the gradient program has type `{ty}`, expected `{want}`"
        ));
    }
    Ok(())
}

/// The forward-mode program of definition `index` (simplified): the
/// parameters, then one tangent per value parameter; result
/// `(value, tangent)`.
pub fn jvp_program(module: &CheckedModule, index: usize) -> Result<Closed, AdError> {
    let closed = inline(module, index);
    first_order(&closed.body)?;
    let mut j = crate::forward::jvp(&closed)?;
    j.body = simplify_avoiding(&j.body, &SimplifyOptions::default(), &j.size_vars)?;
    verify_closed(&j);
    Ok(j)
}

/// `closed` with its body simplified, for compiling a function itself.
pub fn optimized(mut closed: Closed) -> Result<Closed, AdError> {
    closed.body = simplify_avoiding(&closed.body, &SimplifyOptions::default(), &closed.size_vars)?;
    verify_closed(&closed);
    Ok(closed)
}

/// In debug builds, checks that a derived program type-checks with its
/// declared result type.
fn verify_closed(c: &Closed) {
    if cfg!(debug_assertions) {
        match check_expr(&c.context(), &c.size_vars, &c.body) {
            Ok(t) if t == c.ret => {}
            Ok(t) => panic!(
                "`{}` has type `{t}`, expected `{}`\n{}",
                c.name, c.ret, c.body
            ),
            Err(e) => panic!("`{}` does not type-check: {e}\n{}", c.name, c.body),
        }
    }
}

/// Forward over reverse: the forward-mode program of the optimized
/// gradient program. Parameters, then one direction per value parameter;
/// result `((value, gradient), (⟨gradient, direction⟩, Hessian·direction))`.
pub fn hvp_program(
    module: &CheckedModule,
    index: usize,
    options: Options,
) -> Result<Closed, AdError> {
    hvp_program_wrt(module, index, None, options)
}

/// [`hvp_program`] with respect to the parameters `wrt` only (all value
/// parameters when `None`): the gradient and the Hessian-vector product
/// are those of `wrt`; the program still takes a direction for every value
/// parameter (give zeros for the others).
pub fn hvp_program_wrt(
    module: &CheckedModule,
    index: usize,
    wrt: Option<&[Name]>,
    options: Options,
) -> Result<Closed, AdError> {
    let mut h = hvp_unsimplified(module, index, wrt, options)?;
    h.body = simplify_avoiding(&h.body, &SimplifyOptions::default(), &h.size_vars)?;
    verify_closed(&h);
    Ok(h)
}

/// [`hvp_program_wrt`] without the value and its derivative: the result is
/// `(gradient, Hessian·direction)`, and the simplifier drops what only the
/// value needed (for a Newton step, `gradient ⊘ Hessian·ones`; in k-means'
/// cost, a pass over every point and centroid).
pub fn gradient_hvp_program_wrt(
    module: &CheckedModule,
    index: usize,
    wrt: Option<&[Name]>,
    options: Options,
) -> Result<Closed, AdError> {
    let mut h = hvp_unsimplified(module, index, wrt, options)?;
    let Type::Tuple(parts) = &h.ret else {
        unreachable!("a Hessian-vector product program returns a pair")
    };
    let Type::Tuple(value_grad) = &parts[0] else {
        unreachable!("its first part is (value, gradient)")
    };
    let grad_ty = value_grad[1].clone();
    // A name no parameter has (the binders inside the body are out of
    // its scope).
    let mut supply = gradlift_lang::names::NameSupply::new();
    for (p, _) in &h.params {
        supply.reserve(p);
    }
    for v in &h.size_vars {
        supply.reserve(v);
    }
    let r = supply.fresh("gradient_hvp");
    let var = || Expr::synth(ExprKind::Var(r.clone()));
    let pick = |k: usize| {
        let part = Expr::synth(ExprKind::Proj(Box::new(var()), k));
        Expr::synth(ExprKind::Proj(Box::new(part), 1))
    };
    h.body = Expr::synth(ExprKind::Let {
        pat: Pattern::Var(r.clone(), gradlift_lang::Span::DUMMY),
        ty: None,
        value: Box::new(std::mem::replace(&mut h.body, Expr::structural_zero())),
        body: Box::new(Expr::synth(ExprKind::Tuple(vec![pick(0), pick(1)]))),
    });
    h.ret = Type::Tuple(vec![grad_ty.clone(), grad_ty]);
    h.body = simplify_avoiding(&h.body, &SimplifyOptions::default(), &h.size_vars)?;
    verify_closed(&h);
    Ok(h)
}

/// The forward-mode program of the optimized gradient program, before
/// simplification.
fn hvp_unsimplified(
    module: &CheckedModule,
    index: usize,
    wrt: Option<&[Name]>,
    options: Options,
) -> Result<Closed, AdError> {
    let g = gradient(
        module,
        index,
        wrt,
        Options {
            optimize: true,
            ..options
        },
    )?;
    let grads: Vec<Type> = g.wrt.iter().map(|(_, t)| t.clone()).collect();
    let grad_ty = if grads.len() == 1 {
        grads[0].clone()
    } else {
        Type::Tuple(grads)
    };
    let program = Closed {
        name: Name::from(format!("{}_grad", g.closed.name)),
        params: g.closed.params.clone(),
        size_vars: g.closed.size_vars.clone(),
        ret: Type::Tuple(vec![Type::Real, grad_ty]),
        body: g.term,
    };
    crate::forward::jvp(&program)
}
