//! The pipeline: every pass, in order, in one list ([`PASSES`]), which
//! [`compile`] runs, `gradlift emit --stage NAME` stops after, the
//! filetests use, and `--time-passes` times.
//!
//! ```text
//! Source ─source─▶ closed Source ─first-order─▶ ─checkpoint─▶
//!        ─target─▶ Target ─opt─▶ first-order Target ─forward─▶ ─forward-opt─▶
//! ```
//!
//! What runs depends on the [`Goal`]: a function's own program is
//! `source, opt`; its gradient `source, first-order, checkpoint, target,
//! opt`; its forward-mode program `source, first-order, forward,
//! forward-opt`; a Hessian-vector product the gradient's passes, then
//! `forward, forward-opt` (forward over reverse). `unf` and `target-unf`
//! are views: the stack programs of Figures 9 and 8, built only when their
//! stage is asked for, since `target` fuses UNF, D_ρ and UNF⁻¹ into one
//! walk. `opt` and `forward-opt` are the simplifier's fixpoint group
//! ([`crate::simplify::PASSES`]), whose members are stages too (the term
//! after that pass in the first round).
//!
//! In debug builds (and so in tests) the term is verified after every pass
//! and every member of the group ([`verify_term`]): it type-checks with the
//! program's type; no binder shadows a name in scope in the forms that
//! promise it — the closed Source, and the Target every member of the
//! simplifier's group leaves, which substitution without capture relies on
//! — but not in a Target term fresh from reverse or forward mode, which may
//! rebind a name (partial evaluation renames every binder); and it is first
//! order where the pass promises it. A failure panics naming the pass that
//! broke the term.

use crate::direct::{self, AdError, Construction, Route};
use crate::inline::{first_order, inline, Closed};
use crate::reverse_unf::{reverse_unf, TargetUnf};
use crate::simplify::{self, is_first_order, Options as SimplifyOptions};
use crate::unf::{unf, Unf};
use crate::unf_inverse;
use gradlift_lang::syntax::*;
use gradlift_lang::types::check_expr;
use gradlift_lang::CheckedModule;
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// What is being compiled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Goal {
    /// The function itself, simplified.
    Primal,
    /// `(value, gradient)` by reverse mode.
    Gradient,
    /// `(value, tangent)` by forward mode.
    Jvp,
    /// `((value, gradient), (⟨gradient, direction⟩, Hessian·direction))`:
    /// forward mode over the optimized gradient.
    Hvp,
}

/// The form of the term a pass reads or writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ir {
    /// A closed Source term (calls inlined, binders distinct).
    Source,
    /// Source UNF (Figure 6).
    SourceUnf,
    /// Target UNF.
    TargetUnf,
    /// A Target term.
    Target,
    /// A first-order Target term (Lemma 5.3).
    FirstOrder,
}

/// A pass of the pipeline.
pub struct Pass {
    /// Its name, the stage `gradlift emit --stage` stops after.
    pub name: &'static str,
    /// What it does.
    pub description: &'static str,
    /// The figure or section of Huot & Shaikhha it implements, or "not in
    /// the paper".
    pub implements: &'static str,
    /// The form it reads.
    pub input: Ir,
    /// The form it writes.
    pub output: Ir,
    /// Built only when its stage is asked for (a printed form the
    /// following passes do not read).
    pub view: bool,
    run: fn(&mut Compilation<'_>) -> Result<(), AdError>,
    when: fn(&Compilation<'_>) -> bool,
}

/// Every pass, in order.
pub const PASSES: &[Pass] = &[
    Pass {
        name: "source",
        description: "inline calls, make every function argument a lambda, β-reduce let-bound function values, rename binders apart",
        implements: "§2 (calls are inlined before differentiation)",
        input: Ir::Source,
        output: Ir::Source,
        view: false,
        run: |c| {
            c.program = Some(inline(c.module, c.index));
            Ok(())
        },
        when: |_| true,
    },
    Pass {
        name: "derivatives",
        description: "expand every derivative operator (grad, vjp, jvp, jacfwd, jacrev, jacobian), innermost first, into the program that computes it",
        implements: "not in the paper (nested derivatives: each expansion runs the passes below on its own closed function)",
        input: Ir::Source,
        output: Ir::Source,
        view: false,
        run: |c| {
            let expanded = crate::derivatives::expand(c.module, c.program(), c.options)?;
            c.program = Some(expanded);
            Ok(())
        },
        when: |c| crate::derivatives::has_derivatives(&c.program().body),
    },
    Pass {
        name: "first-order",
        description: "check that every lambda is an array operation's function and nothing else is applied (a function that is data is refused, with its position)",
        implements: "not in the paper (its Source has no function values)",
        input: Ir::Source,
        output: Ir::Source,
        view: false,
        run: |c| first_order(&c.program().body),
        when: |c| c.goal != Goal::Primal,
    },
    Pass {
        name: "reversed-loops",
        description: "write each checkpointed loop's reverse an inner derivative left (revfold) as the scans it computes, for reverse mode to differentiate (a term holding a revwhile is differentiated by forward mode in `target`)",
        implements: "not in the paper (reverse over the reverse of a loop: the states stored, rules/fold.rs on the scans)",
        input: Ir::Source,
        output: Ir::Source,
        view: false,
        run: |c| {
            let rewritten = crate::reversed_loops::as_scans(c.program())?;
            c.program = Some(rewritten);
            Ok(())
        },
        when: |c| {
            c.differentiates() && crate::reversed_loops::has_revfold(&c.program().body)
        },
    },
    Pass {
        name: "checkpoint",
        description: "give every foldl without a schedule the one of --checkpoint",
        implements: "not in the paper (Griewank's checkpointing)",
        input: Ir::Source,
        output: Ir::Source,
        view: false,
        run: |c| {
            let schedule = c.options.checkpoint.expect("the pass runs with a schedule");
            let program = c.program_mut();
            program.body = with_checkpoints(&program.body, schedule);
            Ok(())
        },
        when: |c| c.options.checkpoint.is_some() && c.differentiates(),
    },
    Pass {
        name: "unf",
        description: "sequentialize Source into a stack program of var, op, proj",
        implements: "Figure 9 (with the weakening of §4.4, erratum E1)",
        input: Ir::Source,
        output: Ir::SourceUnf,
        view: true,
        run: |c| {
            c.unf = Some(source_unf(c.program())?);
            Ok(())
        },
        when: |c| c.differentiates(),
    },
    Pass {
        name: "target-unf",
        description: "pair every primitive with its transposed Jacobian, F(P, Jᵀ P)",
        implements: "Figure 8",
        input: Ir::Source,
        output: Ir::TargetUnf,
        view: true,
        run: |c| {
            c.target_unf = Some(target_unf(c.program())?);
            Ok(())
        },
        when: |c| c.differentiates(),
    },
    Pass {
        name: "target",
        description: "the gradient program (value, gradient): UNF, D_ρ and UNF⁻¹ in one walk, or the direct transform with --via direct",
        implements: "Figures 8–10, or Figure 5 (--via direct)",
        input: Ir::Source,
        output: Ir::Target,
        view: false,
        run: |c| {
            // The source program moves to `c.source`, where later passes
            // read it, and the gradient takes its place: a long chain's
            // tree is not copied. (On an error the compilation ends.)
            let source = c.program.take().expect("`source` runs first");
            // By default, every parameter that holds reals.
            let wrt_names = c.wrt.clone().unwrap_or_else(|| {
                direct::differentiated(&source.context(), None)
                    .into_iter()
                    .map(|(n, _)| n)
                    .collect()
            });
            let wrt = direct::check_wrt(&source, &wrt_names)?;
            let term = if crate::reversed_loops::has_revwhile(&source.body) {
                // A `while` loop's reverse, which reverse mode cannot
                // reverse: this gradient is taken by forward mode.
                crate::derivatives::forward_gradient(c.module, &source, &wrt, c.options)?
            } else {
                match c.options.route {
                    Route::Unf => {
                        unf_inverse::reverse(&source, &wrt_names, c.options.construction)?
                    }
                    Route::Direct => direct::reverse(&source, &wrt_names, c.options.construction)?,
                }
            };
            let grads: Vec<Type> = wrt.iter().map(|(_, t)| t.clone()).collect();
            let grad_ty = if grads.len() == 1 {
                grads[0].clone()
            } else {
                Type::Tuple(grads)
            };
            c.program = Some(Closed {
                name: Name::from(format!("{}_grad", source.name)),
                params: source.params.clone(),
                size_vars: source.size_vars.clone(),
                ret: Type::Tuple(vec![Type::Real, grad_ty]),
                body: term,
            });
            c.source = Some(source);
            c.wrt_params = wrt;
            Ok(())
        },
        when: |c| c.differentiates(),
    },
    Pass {
        name: "opt",
        description: "partial evaluation, the rewrites of Figure 12, CSE, DCE and the passes of the simplifier, to a fixpoint: a first-order program",
        implements: "§5.1, Figure 12, Lemma 5.3",
        input: Ir::Target,
        output: Ir::FirstOrder,
        view: false,
        run: |c| c.simplify(),
        when: |c| match c.goal {
            Goal::Primal | Goal::Hvp => true,
            Goal::Gradient => c.options.optimize,
            Goal::Jvp => false,
        },
    },
    Pass {
        name: "forward",
        description: "the tangent semantics as a transformation: every real paired with its tangent",
        implements: "not in the paper (forward mode; papers/forward-mode-semantics-blog.txt)",
        input: Ir::FirstOrder,
        output: Ir::Target,
        view: false,
        run: |c| {
            let program = crate::forward::jvp(c.program())?;
            c.program = Some(program);
            Ok(())
        },
        when: |c| matches!(c.goal, Goal::Jvp | Goal::Hvp),
    },
    Pass {
        name: "forward-opt",
        description: "the simplifier again, on the forward-mode program",
        implements: "§5.1, Figure 12, Lemma 5.3",
        input: Ir::Target,
        output: Ir::FirstOrder,
        view: false,
        run: |c| c.simplify(),
        when: |c| matches!(c.goal, Goal::Jvp | Goal::Hvp),
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

/// The time a pass took.
#[derive(Clone, Debug)]
pub struct PassTime {
    /// The pass (`opt.pe` for a member of the simplifier's group).
    pub name: String,
    /// How long it ran, in all.
    pub time: Duration,
    /// How often it ran (a member of the simplifier's group runs once a
    /// round).
    pub runs: usize,
}

/// A compilation in progress: the program the next pass reads, and what
/// the passes so far reported.
pub struct Compilation<'m> {
    module: &'m CheckedModule,
    index: usize,
    goal: Goal,
    options: Options,
    wrt: Option<Vec<Name>>,
    stop_at: Option<&'m str>,
    /// The stage asked for was reached.
    done: bool,
    /// The program: the function inlined, then its gradient program, …
    pub program: Option<Closed>,
    /// The function inlined, once `target` replaced it by its gradient.
    pub source: Option<Closed>,
    /// The `unf` view.
    pub unf: Option<Unf>,
    /// The `target-unf` view.
    pub target_unf: Option<TargetUnf>,
    /// The parameters differentiated, with their types.
    pub wrt_params: Vec<(Name, Type)>,
    /// Every pass run, with its time.
    pub times: Vec<PassTime>,
    /// Why each run of the simplifier stopped, and after how many rounds.
    pub simplifier: Vec<(simplify::Stop, usize)>,
}

impl Compilation<'_> {
    /// The program the next pass reads.
    pub fn program(&self) -> &Closed {
        self.program.as_ref().expect("`source` runs first")
    }

    fn program_mut(&mut self) -> &mut Closed {
        self.program.as_mut().expect("`source` runs first")
    }

    fn differentiates(&self) -> bool {
        matches!(self.goal, Goal::Gradient | Goal::Hvp)
    }

    /// The simplifier's group on the program, stopping after one of its
    /// members when that is the stage asked for.
    fn simplify(&mut self) -> Result<(), AdError> {
        let stop_after = self
            .stop_at
            .filter(|s| simplify::PASSES.iter().any(|p| p.name == *s));
        // The body is handed over, not copied (a long chain's tree is
        // large); on an error the compilation ends with it.
        let unsimplified = std::mem::replace(
            &mut self.program_mut().body,
            Expr::synth(ExprKind::Tuple(Vec::new())),
        );
        let program = self.program();
        let context = program.context();
        let check = simplify::Check {
            context: &context,
            size_vars: &program.size_vars,
            ty: &program.ret,
        };
        let (body, report) = simplify::run(
            unsimplified,
            &SimplifyOptions::default(),
            &program.size_vars,
            cfg!(debug_assertions).then_some(&check),
            stop_after,
        )?;
        for (name, time, runs) in report.times {
            if runs > 0 {
                self.times.push(PassTime {
                    name: format!("  {name}"),
                    time,
                    runs,
                });
            }
        }
        self.simplifier.push((report.stop, report.rounds));
        self.program_mut().body = body;
        // A stage inside the group ends the compilation there.
        self.done |= stop_after.is_some();
        Ok(())
    }
}

/// Runs the passes of `goal` on definition `index` of `module`, with
/// respect to `wrt` (every value parameter when `None`), stopping after the
/// pass `stop_at` (a name of [`PASSES`] or of the simplifier's passes) when
/// given.
///
/// # Panics
///
/// In debug builds, when a pass breaks an invariant of its output form
/// (a bug, named with the pass).
pub fn compile<'m>(
    module: &'m CheckedModule,
    index: usize,
    goal: Goal,
    wrt: Option<&[Name]>,
    options: Options,
    stop_at: Option<&'m str>,
) -> Result<Compilation<'m>, AdError> {
    let mut c = Compilation::new(module, index, goal, wrt, options, stop_at, None);
    run_passes(&mut c, PASSES)?;
    Ok(c)
}

impl<'m> Compilation<'m> {
    fn new(
        module: &'m CheckedModule,
        index: usize,
        goal: Goal,
        wrt: Option<&[Name]>,
        options: Options,
        stop_at: Option<&'m str>,
        program: Option<Closed>,
    ) -> Compilation<'m> {
        Compilation {
            module,
            index,
            goal,
            options,
            wrt: wrt.map(|w| w.to_vec()),
            stop_at,
            done: false,
            program,
            source: None,
            unf: None,
            target_unf: None,
            wrt_params: Vec::new(),
            times: Vec::new(),
            simplifier: Vec::new(),
        }
    }
}

/// The program of `goal` for the closed function `closed` (a function the
/// `derivatives` pass made, whose own derivatives are expanded): the
/// passes after `derivatives`, up to `stop_at`.
pub fn compile_closed(
    module: &CheckedModule,
    closed: Closed,
    goal: Goal,
    wrt: Option<&[Name]>,
    options: Options,
    stop_at: Option<&str>,
) -> Result<Closed, AdError> {
    let mut c = Compilation::new(
        module,
        usize::MAX,
        goal,
        wrt,
        options,
        stop_at,
        Some(closed),
    );
    let after = PASSES
        .iter()
        .position(|p| p.name == "derivatives")
        .expect("the pass exists");
    run_passes(&mut c, &PASSES[after + 1..])?;
    Ok(c.program.expect("the passes keep a program"))
}

/// The definition `index` of `module` inlined, with its derivative
/// operators expanded: the program the interpreter runs for a definition
/// that uses `grad`, `jvp`, ….
pub fn expanded(module: &CheckedModule, index: usize) -> Result<Closed, AdError> {
    let c = compile(
        module,
        index,
        Goal::Primal,
        None,
        Options::default(),
        Some("derivatives"),
    )?;
    Ok(c.program.expect("the passes make a program"))
}

fn run_passes(c: &mut Compilation<'_>, passes: &[Pass]) -> Result<(), AdError> {
    for pass in passes {
        if !(pass.when)(c) {
            // A stage that has nothing to do ends the compilation all the
            // same: its output is its input.
            if c.stop_at == Some(pass.name) {
                break;
            }
            continue;
        }
        if pass.view && c.stop_at != Some(pass.name) {
            continue;
        }
        let (start, before) = (Instant::now(), c.times.len());
        (pass.run)(c)?;
        // The pass before the members of its group, if it is one.
        c.times.insert(
            before,
            PassTime {
                name: pass.name.to_string(),
                time: start.elapsed(),
                runs: 1,
            },
        );
        if cfg!(debug_assertions) && !pass.view {
            verify_pass(pass, c);
        }
        if c.done || c.stop_at == Some(pass.name) {
            break;
        }
    }
    Ok(())
}

/// Verifies the program after `pass` (see the module documentation).
fn verify_pass(pass: &Pass, c: &Compilation<'_>) {
    let program = c.program();
    // Reverse and forward mode may rebind a name in scope (forward mode's
    // `let A = map2 (x, y. (x, y)) A A_dot`); partial evaluation renames
    // every binder.
    let unique = matches!(pass.output, Ir::Source | Ir::FirstOrder);
    let mut result = verify_term(
        &program.context(),
        &program.size_vars,
        &program.body,
        &program.ret,
        unique,
    );
    let first_order_promised = match pass.output {
        Ir::FirstOrder => true,
        Ir::Source => c.goal != Goal::Primal && pass.name != "source",
        _ => false,
    };
    if result.is_ok() && first_order_promised {
        result = match pass.output {
            Ir::FirstOrder => is_first_order(&program.body).map_err(|(_, m)| m),
            _ => first_order(&program.body).map_err(|e| e.to_string()),
        };
    }
    if let Err(e) = result {
        panic!(
            "the pass `{}` broke `{}`: {e}\n{}",
            pass.name, program.name, program.body
        );
    }
}

/// The invariants every form has: `e` type-checks over `context` and
/// `size_vars` with type `ty`, and, with `unique`, no binder shadows a name
/// in scope (a free variable, or a binder around it) — what substitution
/// without capture needs. (The same name bound in two disjoint scopes, as
/// copies of a cheap map substituted at its uses are, is no shadowing.)
pub fn verify_term(
    context: &[(Name, Type)],
    size_vars: &[Name],
    e: &Expr,
    ty: &Type,
    unique: bool,
) -> Result<(), String> {
    let got = check_expr(context, size_vars, e).map_err(|e| e.to_string())?;
    if got != *ty {
        return Err(format!("the term has type `{got}`, expected `{ty}`"));
    }
    if unique {
        let mut scope: HashSet<Name> = context
            .iter()
            .map(|(n, _)| n.clone())
            .chain(size_vars.iter().cloned())
            .collect();
        no_shadowing(e, &mut scope)?;
    }
    Ok(())
}

/// Every stage name: the passes', and the members of the simplifier's
/// group (the term after that member in the first round).
pub fn stage_names() -> impl Iterator<Item = &'static str> {
    PASSES
        .iter()
        .map(|p| p.name)
        .chain(simplify::PASSES.iter().map(|p| p.name))
}

/// Fails with the first binder of `e` that binds a name of `scope`.
fn no_shadowing(e: &Expr, scope: &mut HashSet<Name>) -> Result<(), String> {
    gradlift_lang::deep::guard(|| {
        let bind = |pat: &Pattern, scope: &mut HashSet<Name>, bound: &mut Vec<Name>| {
            let mut names = Vec::new();
            pat.names(&mut names);
            for n in names {
                if !scope.insert(n.clone()) {
                    return Err(format!("`{n}` is bound where it is already in scope"));
                }
                bound.push(n);
            }
            Ok(())
        };
        let mut bound = Vec::new();
        let result = match &e.kind {
            ExprKind::Let { .. } => {
                let mut cur = e;
                let mut result = Ok(());
                while let ExprKind::Let {
                    pat, value, body, ..
                } = &cur.kind
                {
                    result = no_shadowing(value, scope).and_then(|()| bind(pat, scope, &mut bound));
                    if result.is_err() {
                        break;
                    }
                    cur = body;
                }
                result.and_then(|()| no_shadowing(cur, scope))
            }
            ExprKind::Lambda(params, body) => params
                .iter()
                .try_for_each(|p| bind(&p.pat, scope, &mut bound))
                .and_then(|()| no_shadowing(body, scope)),
            _ => e.children().try_for_each(|c| no_shadowing(c, scope)),
        };
        for n in bound {
            scope.remove(&n);
        }
        result
    })
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
    /// The passes run, with their times (`--time-passes`).
    pub times: Vec<PassTime>,
    /// Why each run of the simplifier stopped, and after how many rounds.
    pub simplifier: Vec<(simplify::Stop, usize)>,
}

/// Differentiates definition `index` of `module` with respect to `wrt`
/// (all value parameters when `None`).
pub fn gradient(
    module: &CheckedModule,
    index: usize,
    wrt: Option<&[Name]>,
    options: Options,
) -> Result<Gradient, AdError> {
    let c = compile(module, index, Goal::Gradient, wrt, options, None)?;
    let program = c.program.expect("the passes make a program");
    Ok(Gradient {
        closed: c.source.expect("`target` keeps the source"),
        wrt: c.wrt_params,
        term: program.body,
        times: c.times,
        simplifier: c.simplifier,
    })
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

/// The Source UNF of a closed term (the `unf` view).
pub fn source_unf(closed: &Closed) -> Result<Unf, AdError> {
    first_order(&closed.body)?;
    Ok(unf(&closed.context(), &closed.size_vars, &closed.body))
}

/// The Target UNF (the `target-unf` view).
pub fn target_unf(closed: &Closed) -> Result<TargetUnf, AdError> {
    Ok(reverse_unf(source_unf(closed)?))
}

/// The invariants of a gradient program: it type-checks over the
/// parameters and size variables, with type `(R, gradient types)`.
pub fn verify(g: &Gradient) -> Result<(), String> {
    let grads: Vec<Type> = g.wrt.iter().map(|(_, t)| t.clone()).collect();
    let grad_ty = if grads.len() == 1 {
        grads[0].clone()
    } else {
        Type::Tuple(grads)
    };
    let want = Type::Tuple(vec![Type::Real, grad_ty]);
    verify_term(
        &g.closed.context(),
        &g.closed.size_vars,
        &g.term,
        &want,
        false,
    )
}

/// The program of `goal` for definition `index` (the passes' program).
fn program_of(
    module: &CheckedModule,
    index: usize,
    goal: Goal,
    wrt: Option<&[Name]>,
    options: Options,
) -> Result<Closed, AdError> {
    let c = compile(module, index, goal, wrt, options, None)?;
    Ok(c.program.expect("the passes make a program"))
}

/// The forward-mode program of definition `index` (simplified): the
/// parameters, then one tangent per value parameter; result
/// `(value, tangent)`.
pub fn jvp_program(module: &CheckedModule, index: usize) -> Result<Closed, AdError> {
    program_of(module, index, Goal::Jvp, None, Options::default())
}

/// The function's own program, simplified, for compiling it.
pub fn primal(module: &CheckedModule, index: usize) -> Result<Closed, AdError> {
    program_of(module, index, Goal::Primal, None, Options::default())
}

/// `closed` with its body simplified.
pub fn optimized(mut closed: Closed) -> Result<Closed, AdError> {
    closed.body =
        simplify::simplify_avoiding(&closed.body, &SimplifyOptions::default(), &closed.size_vars)?;
    Ok(closed)
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
    program_of(
        module,
        index,
        Goal::Hvp,
        wrt,
        Options {
            optimize: true,
            ..options
        },
    )
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
    let c = compile(
        module,
        index,
        Goal::Hvp,
        wrt,
        Options {
            optimize: true,
            ..options
        },
        Some("forward"),
    )?;
    let mut h = c.program.expect("the passes make a program");
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
    h.body = simplify::simplify_avoiding(&h.body, &SimplifyOptions::default(), &h.size_vars)?;
    Ok(h)
}
