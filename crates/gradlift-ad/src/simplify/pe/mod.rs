//! PE — partial evaluation (§5.1; Figure 12 "Inlining and forward
//! substitution", "Tuple partial evaluation", "Let normalisation",
//! "Conditionals"): Target → first-order Target.
//!
//! Input: a well-typed Target term. It may contain `fun` lambdas bound by
//! `let` and applied with `Apply` (continuations, linear or not), lambdas
//! applied where they are written, tuples, tuple patterns, projections,
//! nested `let`s, `if`, array operations whose function argument is a
//! lambda, a primitive or a function value, and binders that shadow each
//! other. Its free variables are the function's parameters, its size
//! variables and possibly names of definitions (calls stay calls).
//!
//! Output: an equivalent term in which
//! - no lambda occurs except as the function argument of an array
//!   operation, and no primitive is used as a value (Lemma 5.3), unless the
//!   input stores functions in arrays or returns them from an `if`, which is
//!   reported as [`SimplifyError::HigherOrder`];
//! - every binder has a name used by no other binder and by no free
//!   variable, so later passes need no capture checks;
//! - `let`s sit at the top of their block (the whole term, a branch of `if`,
//!   a lambda body) and bind non-trivial values: variables, constants and
//!   tuples are substituted, tuples are split into components;
//! - every node was built through the matchers of `rewrite.rs`, so the
//!   algebraic and array rules of Figure 12 have been applied bottom-up.
//!
//! Method: normalization by evaluation. One traversal evaluates the term in
//! an environment from source names to static values ([`Val`]): a constant,
//! a residual variable, residual code, a tuple of values, or a function (a
//! closure: lambda, parameters and the values of its free variables, or a
//! primitive). Substitution happens through the environment, never on
//! terms, and residual code that must be shared is bound once, by a `let`
//! emitted into the current block. Applying a closure evaluates its body in
//! place (β-reduction); `let` chains and calls in tail position are walked by
//! a loop (a trampoline), so a chain of 100,000 continuations each calling
//! the previous one needs no native stack. Everything else recurses through
//! [`guard`]. Work is linear in the size of the output.
//!
//! Relies on: typing (arities, tuple shapes; violations are reported as
//! [`SimplifyError::IllTyped`], never a panic) and purity: evaluation order
//! does not matter, and code whose value is unused may be dropped.

mod build;
mod cond;
mod free;
mod fuse;
pub(crate) use fuse::is_zip;

use super::fill::Facts;
use super::names::{Env, FxMap, Names};
use super::rules::{Rule, Stats};
use super::term::*;
use super::{Options, SimplifyError};
use cond::Cond;
use free::FreeNames;
use gradlift_lang::deep::guard;
use gradlift_lang::prim::PrimKind;
use gradlift_lang::syntax::*;
use gradlift_lang::{Prim, Span};
use std::rc::Rc;
use std::sync::Arc;

/// A static value: what partial evaluation knows about a term.
#[derive(Clone, Debug)]
pub(super) enum Val {
    /// A constant, and whether it is a structural zero.
    Const(f64, bool),
    /// An integer constant.
    Int(i64),
    /// A residual variable (an output name).
    Var(Name),
    /// Residual code of ground type, not a variable or constant, used once.
    Code(Box<Expr>),
    /// A tuple of values.
    Tuple(Rc<Vec<Val>>),
    /// A function.
    Fun(Rc<Fun>),
}

/// A function value.
#[derive(Debug)]
pub(super) enum Fun {
    /// A source lambda with the values of its free variables.
    Closure {
        params: Vec<Param>,
        body: Arc<Expr>,
        captured: Vec<(Name, Val)>,
    },
    /// A primitive used as a function.
    Prim(Prim),
}

/// The result of evaluating a term in tail position: a value, or a call
/// still to be made (so the caller's loop makes it, not the native stack).
enum Step {
    Done(Val),
    Call(Rc<Fun>, Vec<Val>, Span),
}

type Res<T> = Result<T, SimplifyError>;

const FUNCTION_AS_DATA: &str = "a function value is used as data (stored in a tuple or an array, \
    returned by a branch of `if`, or returned as the result); only functions that are applied \
    can be removed";

fn ill_typed<T>(span: Span, message: impl Into<String>) -> Res<T> {
    Err(SimplifyError::IllTyped {
        message: message.into(),
        span,
    })
}

fn code(kind: ExprKind, span: Span) -> Val {
    Val::Code(Box::new(Expr::new(kind, span)))
}

/// The value of residual code.
fn val_of(e: Expr) -> Val {
    guard(|| match &e.kind {
        ExprKind::Const(c) => Val::Const(*c, e.is_structural_zero()),
        ExprKind::Int(k) => Val::Int(*k),
        ExprKind::Var(n) => Val::Var(n.clone()),
        ExprKind::Tuple(_) => {
            let ExprKind::Tuple(es) = into_kind(e) else {
                unreachable!("checked to be a tuple")
            };
            Val::Tuple(Rc::new(es.into_iter().map(val_of).collect()))
        }
        _ => Val::Code(Box::new(e)),
    })
}

fn components(vs: Rc<Vec<Val>>) -> Vec<Val> {
    Rc::try_unwrap(vs).unwrap_or_else(|shared| (*shared).clone())
}

/// Partially evaluates `e`; also returns the names handed out (every
/// binder of the result, and the free variables).
pub(super) fn run(
    e: &Expr,
    opts: &Options,
    reserved: &[Name],
    stats: &mut Stats,
) -> Res<(Expr, Names)> {
    let mut pe = Pe {
        opts,
        stats,
        names: Names::default(),
        env: Env::default(),
        block: Vec::new(),
        facts: Facts::default(),
        free_vars: FxMap::default(),
        walked: 0,
    };
    // Fresh names avoid the free variables. Finding them walks every
    // lambda once; the walk remembers each lambda's free variables, which
    // the closures made later need.
    let mut free = FreeNames::default();
    pe.collect_free(e, &mut Env::default(), 0, &mut free);
    let size = pe.walked;
    let mut avoid = free.list;
    avoid.extend(reserved.iter().cloned());
    pe.names = Names::avoiding(avoid, size);
    pe.env = Env::with_capacity(size);
    let v = pe.eval(e)?;
    let body = pe.residual(v, e.span)?;
    Ok((wrap(std::mem::take(&mut pe.block), body), pe.names))
}

struct Pe<'a> {
    opts: &'a Options,
    stats: &'a mut Stats,
    names: Names,
    /// Source name → value.
    env: Env<Val>,
    /// The `let`s of the block being built.
    block: Vec<Binding>,
    facts: Facts,
    /// Free variables of each lambda met, by the address of its body (the
    /// body is kept alive here, so the address is not reused).
    free_vars: FxMap<usize, (Arc<Expr>, Rc<[Name]>)>,
    /// Nodes walked while finding free variables (to size the tables).
    walked: usize,
}

impl Pe<'_> {
    fn eval(&mut self, e: &Expr) -> Res<Val> {
        guard(|| {
            let mut step = self.eval_tail(e)?;
            loop {
                match step {
                    Step::Done(v) => return Ok(v),
                    Step::Call(fun, args, span) => {
                        let Fun::Closure {
                            params,
                            body,
                            captured,
                        } = &*fun
                        else {
                            unreachable!("only closures are called in tail position")
                        };
                        // The closure's free variables, all captured, hide
                        // the caller's bindings of the same names.
                        let mark = self.env.mark();
                        for (n, v) in captured {
                            self.env.push(n.clone(), v.clone());
                        }
                        let r = self
                            .bind_params(params, args, span)
                            .and_then(|()| self.eval_tail(body));
                        self.env.pop_to(mark);
                        step = r?;
                    }
                }
            }
        })
    }

    fn eval_tail(&mut self, e: &Expr) -> Res<Step> {
        let mark = self.env.mark();
        let r = self.eval_tail_at(e);
        self.env.pop_to(mark);
        r
    }

    fn eval_tail_at(&mut self, mut e: &Expr) -> Res<Step> {
        loop {
            match &e.kind {
                ExprKind::Let {
                    pat, value, body, ..
                } => {
                    if matches!(value.kind, ExprKind::Let { .. }) {
                        self.stats.fire(Rule::LetFloat);
                    }
                    let v = self.eval(value)?;
                    match (&v, pat) {
                        (Val::Const(..) | Val::Int(_) | Val::Var(_), Pattern::Var(..)) => {
                            self.stats.fire(Rule::ForwardSubst)
                        }
                        (Val::Tuple(_), _) => self.stats.fire(Rule::TupleSplit),
                        _ => {}
                    }
                    self.bind(pat, v, value.span)?;
                    e = body;
                }
                ExprKind::Apply(f, args) => {
                    let vals = self.eval_all(args)?;
                    if let ExprKind::Lambda(params, body) = &f.kind {
                        self.stats.fire(Rule::Beta);
                        self.bind_params(params, vals, e.span)?;
                        e = body;
                        continue;
                    }
                    return match self.eval(f)? {
                        Val::Fun(fun) => match *fun {
                            Fun::Prim(p) => Ok(Step::Done(self.prim(p, vals, e.span)?)),
                            Fun::Closure { .. } => {
                                self.stats.fire(Rule::InlineFun);
                                Ok(Step::Call(fun, vals, e.span))
                            }
                        },
                        // A definition, called by name.
                        Val::Var(name) => {
                            let args = self.residual_all(vals, e.span)?;
                            let callee = Box::new(var(&name));
                            Ok(Step::Done(code(ExprKind::Apply(callee, args), e.span)))
                        }
                        _ => ill_typed(f.span, "this is not a function"),
                    };
                }
                ExprKind::If(c, t, f) => match self.cond(c)? {
                    Cond::Known(b) => {
                        self.stats.fire(Rule::IfKnown);
                        e = if b { t } else { f };
                    }
                    Cond::Code(c) => return Ok(Step::Done(self.branch(c, t, f, e.span)?)),
                },
                _ => return Ok(Step::Done(self.node(e)?)),
            }
        }
    }

    fn eval_all(&mut self, es: &[Expr]) -> Res<Vec<Val>> {
        es.iter().map(|e| self.eval(e)).collect()
    }

    fn node(&mut self, e: &Expr) -> Res<Val> {
        let span = e.span;
        match &e.kind {
            ExprKind::Const(c) => Ok(Val::Const(*c, e.is_structural_zero())),
            ExprKind::Int(k) => Ok(Val::Int(*k)),
            ExprKind::Literal(_) => ill_typed(span, "a literal whose type is not decided"),
            ExprKind::Derive(d, ..) => ill_typed(
                span,
                format!(
                    "`{}` before its expansion (the simplifier reads expanded programs)",
                    d.name()
                ),
            ),
            ExprKind::Var(n) => Ok(self
                .env
                .get(n)
                .cloned()
                .unwrap_or_else(|| Val::Var(n.clone()))),
            ExprKind::PrimFn(p) => Ok(Val::Fun(Rc::new(Fun::Prim(*p)))),
            ExprKind::Prim(p, args) => {
                if matches!(
                    p.info().kind(),
                    PrimKind::Compare | PrimKind::IntCompare | PrimKind::Logic
                ) {
                    return ill_typed(span, format!("the condition `{p}` is used as a value"));
                }
                let vals = self.eval_all(args)?;
                self.prim(*p, vals, span)
            }
            ExprKind::Tuple(es) => Ok(Val::Tuple(Rc::new(self.eval_all(es)?))),
            ExprKind::Proj(inner, k) => {
                let v = self.eval(inner)?;
                self.project(v, *k, span)
            }
            ExprKind::ArrayLit(es) => {
                let vals = self.eval_all(es)?;
                Ok(code(
                    ExprKind::ArrayLit(self.residual_all(vals, span)?),
                    span,
                ))
            }
            ExprKind::Index(inner, k) => {
                let v = self.eval(inner)?;
                self.index(v, *k, span)
            }
            ExprKind::Lambda(params, body) => Ok(self.closure(params, body)),
            ExprKind::ArrayOp(op @ (ArrayOp::Revfold(_) | ArrayOp::Revwhile(_)), f, args) => {
                // The step function is an argument: it stays a lambda.
                let step = self.function(&args[0], 2)?;
                let vals = self.eval_all(&args[1..])?;
                let f = self.function(f, op.fn_arity())?;
                let mut rest = self.residual_all(vals, span)?;
                rest.insert(0, step);
                Ok(code(ExprKind::ArrayOp(*op, Box::new(f), rest), span))
            }
            ExprKind::ArrayOp(op, f, args) => {
                let vals = self.eval_all(args)?;
                let f = self.function(f, op.fn_arity())?;
                self.array_op(*op, f, vals, span)
            }
            ExprKind::Builtin(b, args) => {
                let vals = self.eval_all(args)?;
                self.builtin(*b, vals, span)
            }
            ExprKind::Let { .. } | ExprKind::Apply(..) | ExprKind::If(..) => {
                unreachable!("eval_tail handles let, application and if")
            }
        }
    }

    /// Binds `pat` to `v` in the environment; residual code is bound once
    /// by a `let` of the current block.
    fn bind(&mut self, pat: &Pattern, v: Val, span: Span) -> Res<()> {
        guard(|| match pat {
            Pattern::Var(n, _) => {
                let v = self.atomize(v, n);
                self.env.push(n.clone(), v);
                Ok(())
            }
            Pattern::Wild(_) => Ok(()),
            Pattern::Tuple(ps, _) => match v {
                Val::Tuple(vs) if vs.len() == ps.len() => {
                    for (p, v) in ps.iter().zip(components(vs)) {
                        self.bind(p, v, span)?;
                    }
                    Ok(())
                }
                Val::Var(_) | Val::Code(_) => {
                    let value = self.residual(v, span)?;
                    let pat = self.rename(pat);
                    self.block.push(Binding { pat, value });
                    Ok(())
                }
                _ => ill_typed(
                    span,
                    "a tuple pattern binds a value that is not a tuple of its size",
                ),
            },
        })
    }

    fn bind_params(&mut self, params: &[Param], args: Vec<Val>, span: Span) -> Res<()> {
        if params.len() != args.len() {
            return ill_typed(
                span,
                gradlift_lang::span::arity_message("the function", params.len(), args.len()),
            );
        }
        for (p, v) in params.iter().zip(args) {
            self.bind(&p.pat, v, span)?;
        }
        Ok(())
    }

    /// A fresh output pattern for `pat`, its names bound in the environment.
    fn rename(&mut self, pat: &Pattern) -> Pattern {
        guard(|| match pat {
            Pattern::Var(n, s) => {
                let fresh = self.names.fresh(n);
                self.env.push(n.clone(), Val::Var(fresh.clone()));
                Pattern::Var(fresh, *s)
            }
            Pattern::Wild(s) => Pattern::Wild(*s),
            Pattern::Tuple(ps, s) => {
                Pattern::Tuple(ps.iter().map(|p| self.rename(p)).collect(), *s)
            }
        })
    }

    /// `v` with its residual code bound to fresh variables.
    fn atomize(&mut self, v: Val, hint: &str) -> Val {
        guard(|| match v {
            Val::Code(e) => {
                let name = self.names.fresh(hint);
                self.facts.record(&name, &e);
                self.block.push(Binding {
                    pat: Pattern::Var(name.clone(), Span::DUMMY),
                    value: *e,
                });
                Val::Var(name)
            }
            Val::Tuple(vs) if vs.iter().any(|v| matches!(v, Val::Code(_) | Val::Tuple(_))) => {
                let parts = components(vs)
                    .into_iter()
                    .map(|v| self.atomize(v, hint))
                    .collect();
                Val::Tuple(Rc::new(parts))
            }
            other => other,
        })
    }

    /// The residual term of a ground value.
    fn residual(&self, v: Val, span: Span) -> Res<Expr> {
        guard(|| match v {
            Val::Const(c, s) => Ok(constant(c, s)),
            Val::Int(k) => Ok(Expr::new(ExprKind::Int(k), span)),
            Val::Var(n) => Ok(var(&n)),
            Val::Code(e) => Ok(*e),
            Val::Tuple(vs) => {
                let parts = self.residual_all(components(vs), span)?;
                Ok(Expr::new(ExprKind::Tuple(parts), span))
            }
            Val::Fun(_) => Err(SimplifyError::HigherOrder {
                message: FUNCTION_AS_DATA.into(),
                span,
            }),
        })
    }

    fn residual_all(&self, vs: Vec<Val>, span: Span) -> Res<Vec<Expr>> {
        vs.into_iter().map(|v| self.residual(v, span)).collect()
    }
}
