//! Derivatives inside programs: `grad`, `vjp`, `jvp`, `jacfwd`, `jacrev`
//! and `jacobian` expanded into ordinary terms (the `derivatives` pass).
//!
//! Input: a closed Source term, as `source` leaves it: calls inlined,
//! binders distinct, and the function of every derivative operator a
//! lambda. Output: the same term with each operator replaced by the program
//! that computes it. Nothing after this pass — reverse and forward mode, the
//! simplifier, the cost model, the JIT, the interpreter running an expanded
//! program — sees a derivative operator.
//!
//! **Innermost first.** The walk expands the body of an operator's lambda
//! before the operator itself, so a `grad` inside a `grad` is an ordinary
//! term by the time the outer one is differentiated. A lambda
//! `(p₁, …, p_k. body)` whose free variables are `v₁ … v_m` (names of the
//! enclosing scope) becomes the closed function `(q₁, …, q_k, v₁, …, v_m) ↦
//! let p₁ = q₁ in … body`, and the passes after `source` differentiate it
//! with respect to the fresh `q₁ … q_k` alone, the `vᵢ` held constant. Its
//! result replaces the operator, each `qᵢ` bound by `let` to its argument
//! and every binder renamed apart from the enclosing term. The `vᵢ` stay
//! the enclosing scope's variables, so an outer derivative differentiates
//! through them; and since each expansion differentiates only its own fresh
//! parameters, the perturbations of two nested derivatives are never
//! confused (Siskind & Pearlmutter's d/dx (x · d/dy (x + y)) = 1 is the
//! first test of tests/derivatives.rs).
//!
//! **What each operator becomes:**
//! - `grad(F, a₁, …, a_k)`: the gradient program of `F` (`target`, `opt`:
//!   reverse mode, Figures 8–10 and §5.1), its gradient part.
//! - `vjp(F, a, u)`: the gradient of `⟨F(a), u⟩` with respect to `a`, `u`
//!   a constant: reverse mode seeded with `u`, the inner product's forward
//!   part removed by the simplifier.
//! - `jvp(F, a, d)`: the forward-mode program (`forward`, `forward-opt`),
//!   the tangents `d` for the `qᵢ` and zeros for the `vᵢ`.
//! - `jacfwd(F, x)` for `x : [R; n]`: `map (j. jvp(F, x, e_j).1)
//!   (iota(n))`, one forward pass per input, the columns (transposed into
//!   rows for a result `[R; m]`; for a result `R` they are the gradient);
//!   for `x : R`, the one pass `jvp(F, x, 1).1`.
//! - `jacrev(F, x)` for a result `[R; m]`: `map (i. vjp(F, x, e_i))
//!   (iota(m))`, one reverse pass per output, the rows; for a result `R`,
//!   the one pass `vjp(F, x, 1)`. (`e_j` is the one-hot vector.)
//! - `jacobian(F, x)`: `jacfwd` when it takes no more passes than `jacrev`
//!   (n ≤ m, a real counting as one), else `jacrev`; when the sizes are not
//!   known before the call, both, chosen at run time.
//!
//! The last three are rewritten into the first three, which the same walk
//! then expands. Each expansion's cost is that of the program it inserts,
//! so the cost model's bound of a nested program is the bound of the
//! expanded term (docs/cost-model.md): a gradient inside a gradient costs a
//! constant factor of a constant factor, and a Jacobian n (or m) passes.

use crate::adjoint;
use crate::direct::AdError;
use crate::inline::Closed;
use crate::pipeline::{self, Goal, Options};
use gradlift_lang::build;
use gradlift_lang::deep::guard;
use gradlift_lang::names::NameSupply;
use gradlift_lang::scope::Scope;
use gradlift_lang::syntax::*;
use gradlift_lang::types::Typer;
use gradlift_lang::{CheckedModule, Prim, Span};
use std::collections::HashSet;
use std::sync::Arc;

/// Whether `e` holds a derivative operator.
pub fn has_derivatives(e: &Expr) -> bool {
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        if matches!(e.kind, ExprKind::Derive(..)) {
            return true;
        }
        stack.extend(e.children());
    }
    false
}

/// `closed` with every derivative operator expanded (see the module
/// documentation); `options` are those of the enclosing compilation (its
/// route and construction), and `module` the one the term came from.
pub fn expand(
    module: &CheckedModule,
    closed: &Closed,
    options: Options,
) -> Result<Closed, AdError> {
    let names = closed.name_supply();
    let mut typer = Typer::new(&closed.size_vars);
    for (n, t) in closed.context() {
        typer.push(n, t);
    }
    let mut x = Expander {
        module,
        options: Options {
            checkpoint: None,
            ..options
        },
        size_vars: &closed.size_vars,
        names,
        typer,
    };
    let body = x.expr(&closed.body)?;
    Ok(Closed {
        body,
        ..closed.clone()
    })
}

/// The gradient program `(value, gradient)` of `closed` with respect to
/// `wrt` by forward mode, one pass per real differentiated: for a
/// parameter `p : R`, `jvp((q. body[q/p]), p, 1).1`; for `p : [R; n]`,
/// `jacfwd((q. body[q/p]), p)`, whose columns are the gradient; for an
/// array of other elements, a `map` over its indices of the gradient with
/// respect to each element (the array rebuilt with that element
/// replaced); for a tuple, the gradient with respect to each component.
/// Reverse mode takes this route for a term holding a `revwhile` (the
/// reverse of a `while` loop, left by a gradient taken through one inside
/// the program), which it cannot reverse: its states would need an array
/// as long as the trip count (`reversed_loops.rs`). Forward mode runs the
/// loop's reverse as it is.
pub fn forward_gradient(
    module: &CheckedModule,
    closed: &Closed,
    wrt: &[(Name, Type)],
    options: Options,
) -> Result<Expr, AdError> {
    let mut names = closed.name_supply();
    let span = closed.body.span;
    let mut grads = Vec::new();
    for (p, t) in wrt {
        // The program with `p` replaced by the term `e` (bound to a fresh
        // name, which `e` may not capture: it reads the parameter `p`).
        let with = |e: Expr, names: &mut NameSupply| {
            let fresh = names.fresh(p);
            let mut renames = Scope::new();
            renames.push(p.clone(), fresh.clone());
            let body = freshen(&closed.body, names, &mut renames);
            build::let_in(build::pvar(&fresh), e, body)
        };
        grads.push(forward_part(t, build::var(p), &with, &mut names, span)?);
    }
    let value = names.fresh("value");
    let body = build::let_in(
        build::pvar(&value),
        closed.body.clone(),
        build::tuple(vec![build::var(&value), build::tuple(grads)]),
    );
    let ret = Type::Tuple(vec![
        closed.ret.clone(),
        Type::Tuple(wrt.iter().map(|(_, t)| t.clone()).collect()),
    ]);
    let term = Closed {
        body,
        ret,
        ..closed.clone()
    };
    Ok(expand(module, &term, options)?.body)
}

/// The gradient, by forward mode, of the program `with(at)` with respect
/// to the value `at` of type `ty` ([`forward_gradient`]); `with(e)` is the
/// program with that value replaced by the term `e`.
fn forward_part(
    ty: &Type,
    at: Expr,
    with: &dyn Fn(Expr, &mut NameSupply) -> Expr,
    names: &mut NameSupply,
    span: Span,
) -> Result<Expr, AdError> {
    let lambda = |names: &mut NameSupply| {
        let q = names.fresh("q");
        build::lambda(vec![build::pvar(&q)], with(build::var(&q), names))
    };
    Ok(match ty {
        Type::Real => {
            let f = lambda(names);
            proj(derive(Derivative::Jvp, f, vec![at, build::real(1.0)], span), 1)
        }
        Type::Array(e, _) if **e == Type::Real => {
            let f = lambda(names);
            derive(Derivative::JacFwd, f, vec![at], span)
        }
        Type::Array(e, n) => {
            // Element i: the array with element i replaced.
            let (i, j) = (names.fresh("i"), names.fresh("j"));
            let len = build::size(n);
            let (outer, at_i, indices) = (at.clone(), i.clone(), len.clone());
            let replaced = move |x: Expr, names: &mut NameSupply| {
                let rebuilt = build::map1(
                    &j,
                    build::cond(
                        build::prim(Prim::IEq, vec![build::var(&j), build::var(&at_i)]),
                        x,
                        build::get(outer.clone(), build::var(&j)),
                    ),
                    build::builtin(Builtin::Iota, vec![indices.clone()]),
                );
                with(rebuilt, names)
            };
            let element = build::get(at.clone(), build::var(&i));
            let inner = forward_part(e, element, &replaced, names, span)?;
            build::map1(&i, inner, build::builtin(Builtin::Iota, vec![len]))
        }
        Type::Tuple(ts) => {
            let mut parts = Vec::new();
            for (k, t) in ts.iter().enumerate() {
                let whole = at.clone();
                let arity = ts.len();
                let replaced = move |x: Expr, names: &mut NameSupply| {
                    let mut x = Some(x);
                    let parts = (0..arity)
                        .map(|c| match c == k {
                            true => x.take().expect("one component replaced"),
                            false => proj(whole.clone(), c),
                        })
                        .collect();
                    with(build::tuple(parts), names)
                };
                parts.push(forward_part(t, proj(at.clone(), k), &replaced, names, span)?);
            }
            build::tuple(parts)
        }
        _ => {
            return error(
                format!(
                    "this gradient reverses a `while` loop's reverse (a gradient taken through a `while` loop inside the program), which gradlift does by forward mode, for values made of reals; this one has type `{ty}`: differentiate with respect to other parameters (`--wrt`), or take this derivative by forward mode (`jvp`, `hvp`)"
                ),
                span,
            )
        }
    })
}

struct Expander<'a> {
    module: &'a CheckedModule,
    options: Options,
    size_vars: &'a [Name],
    names: NameSupply,
    typer: Typer,
}

fn error<T>(message: impl Into<String>, span: Span) -> Result<T, AdError> {
    Err(AdError::Derivative {
        message: message.into(),
        span,
    })
}

impl Expander<'_> {
    fn infer(&mut self, e: &Expr) -> Result<Type, AdError> {
        self.typer.infer(e).map_err(|err| AdError::Derivative {
            message: format!("expanding a derivative: {err}"),
            span: e.span,
        })
    }

    /// Binds the names of `pat` to the parts of `ty`.
    fn bind(&mut self, pat: &Pattern, ty: &Type) {
        match (pat, ty) {
            (Pattern::Var(n, _), t) => self.typer.push(n.clone(), t.clone()),
            (Pattern::Wild(_), _) => {}
            (Pattern::Tuple(ps, _), Type::Tuple(ts)) if ps.len() == ts.len() => {
                for (p, t) in ps.iter().zip(ts) {
                    self.bind(p, t);
                }
            }
            (Pattern::Tuple(..), _) => unreachable!("a checked pattern matches its type"),
        }
    }

    fn expr(&mut self, e: &Expr) -> Result<Expr, AdError> {
        guard(|| self.expr_inner(e))
    }

    fn all(&mut self, es: &[Expr]) -> Result<Vec<Expr>, AdError> {
        es.iter().map(|x| self.expr(x)).collect()
    }

    fn expr_inner(&mut self, e: &Expr) -> Result<Expr, AdError> {
        let span = e.span;
        match &e.kind {
            ExprKind::Let { .. } => {
                let mark = self.typer.mark();
                let mut bindings = Vec::new();
                let mut cur = e;
                while let ExprKind::Let {
                    pat,
                    ty,
                    value,
                    body,
                } = &cur.kind
                {
                    let value = self.expr(value)?;
                    let t = self.infer(&value)?;
                    self.bind(pat, &t);
                    bindings.push((cur.span, pat.clone(), ty.clone(), value));
                    cur = body;
                }
                let out = self.expr(cur)?;
                self.typer.pop_to(mark);
                Ok(let_chain(bindings, out))
            }
            ExprKind::ArrayOp(op, f, args) => {
                let args = self.all(args)?;
                let elem = |t: Type| match t {
                    Type::Array(e, _) => *e,
                    _ => unreachable!("a checked array operation takes arrays"),
                };
                let tys = match op {
                    ArrayOp::Map => vec![elem(self.infer(&args[0])?)],
                    ArrayOp::Map2 => vec![elem(self.infer(&args[0])?), elem(self.infer(&args[1])?)],
                    ArrayOp::Reduce | ArrayOp::Foldl(_) | ArrayOp::Scanl | ArrayOp::Scanr => {
                        vec![self.infer(&args[0])?, elem(self.infer(&args[1])?)]
                    }
                    ArrayOp::While => vec![self.infer(&args[0])?],
                    ArrayOp::Revfold(_) | ArrayOp::Revwhile(_) => {
                        return if has_derivatives(e) {
                            error("a derivative inside a checkpointed reverse loop", span)
                        } else {
                            Ok(e.clone())
                        };
                    }
                };
                let f = self.lambda(f, &tys)?;
                Ok(Expr::new(ExprKind::ArrayOp(*op, Box::new(f), args), span))
            }
            ExprKind::Lambda(params, _) => {
                let tys: Option<Vec<Type>> = params.iter().map(|p| p.ty.clone()).collect();
                match tys {
                    Some(tys) => self.lambda(e, &tys),
                    None if has_derivatives(e) => error(
                        "a derivative inside a function value whose parameters have no types: write `fun (x: T) -> …`",
                        span,
                    ),
                    None => Ok(e.clone()),
                }
            }
            ExprKind::Derive(d, f, args) => {
                let args = self.all(args)?;
                let k = d.fn_arity(args.len()).expect("checked");
                let mut tys = Vec::with_capacity(k);
                for a in &args[..k] {
                    tys.push(self.infer(a)?);
                }
                let f = self.lambda(f, &tys)?;
                let ExprKind::Lambda(params, body) = &f.kind else {
                    return error(
                        format!(
                            "the function of `{}` must be a lambda or a definition",
                            d.name()
                        ),
                        f.span,
                    );
                };
                self.derive(*d, params, body, args, tys, span)
            }
            _ => {
                let mut failure = None;
                let out = e.map_children(&mut |c| match self.expr(c) {
                    Ok(c) => c,
                    Err(err) => {
                        failure.get_or_insert(err);
                        Expr::structural_zero()
                    }
                });
                match failure {
                    Some(err) => Err(err),
                    None => Ok(out),
                }
            }
        }
    }

    /// The lambda `f` (of parameters of types `tys`) with its body expanded.
    fn lambda(&mut self, f: &Expr, tys: &[Type]) -> Result<Expr, AdError> {
        let ExprKind::Lambda(params, body) = &f.kind else {
            return Ok(f.clone());
        };
        let mark = self.typer.mark();
        for (p, t) in params.iter().zip(tys) {
            self.bind(&p.pat, t);
        }
        let body = self.expr(body);
        self.typer.pop_to(mark);
        Ok(Expr::new(
            ExprKind::Lambda(params.clone(), Arc::new(body?)),
            f.span,
        ))
    }

    /// The expansion of `d` applied to the lambda `(params. body)` (its
    /// body expanded) and `args`, the first of which have types `tys`.
    fn derive(
        &mut self,
        d: Derivative,
        params: &[Param],
        body: &Expr,
        mut args: Vec<Expr>,
        tys: Vec<Type>,
        span: Span,
    ) -> Result<Expr, AdError> {
        let k = tys.len();
        match d {
            Derivative::Grad | Derivative::Vjp | Derivative::Jvp => {}
            Derivative::JacFwd | Derivative::JacRev | Derivative::Jacobian => {
                let lambda = Expr::new(
                    ExprKind::Lambda(params.to_vec(), Arc::new(body.clone())),
                    span,
                );
                let x = args.pop().expect("one point");
                let term = self.jacobian(d, lambda, x, &tys[0], span)?;
                // The rewritten term holds `jvp` and `vjp` nodes: expand them.
                return self.expr(&term);
            }
        }
        // The lambda as a closed function of fresh parameters and of its
        // free variables.
        let qs: Vec<Name> = (0..k).map(|_| self.names.fresh("arg")).collect();
        let mut inner = body.clone();
        for (p, q) in params.iter().zip(&qs).rev() {
            inner = build::let_in(p.pat.clone(), build::var(q), inner);
        }
        let mark = self.typer.mark();
        for (q, t) in qs.iter().zip(&tys) {
            self.typer.push(q.clone(), t.clone());
        }
        let ret = self.infer(&inner);
        self.typer.pop_to(mark);
        let ret = ret?;
        let mut free = HashSet::new();
        let mut scope = Scope::new();
        for q in &qs {
            scope.push(q.clone(), ());
        }
        gradlift_lang::interp::free_vars(&inner, &mut scope, &mut free);
        let mut free: Vec<(Name, Type)> =
            free.into_iter()
                .filter(|n| !self.size_vars.contains(n))
                .map(|n| {
                    let t =
                        self.typer.lookup(&n).cloned().unwrap_or_else(|| {
                            unreachable!("`{n}` is bound around the derivative")
                        });
                    (n, t)
                })
                .collect();
        free.sort_by(|a, b| a.0.cmp(&b.0));
        let mut params: Vec<(Name, Option<Type>)> = qs
            .iter()
            .zip(&tys)
            .map(|(q, t)| (q.clone(), Some(t.clone())))
            .collect();
        params.extend(free.iter().map(|(n, t)| (n.clone(), Some(t.clone()))));
        let mut closed = Closed {
            name: Name::from(d.name()),
            params,
            size_vars: self.size_vars.to_vec(),
            ret: ret.clone(),
            body: inner,
        };
        let mut lets: Vec<(Name, Expr)> = qs.iter().cloned().zip(args.drain(..k)).collect();
        let result = match d {
            Derivative::Grad | Derivative::Vjp => {
                if d == Derivative::Vjp {
                    // ⟨F(a), u⟩, u a parameter held constant.
                    let u = self.names.fresh("cotangent");
                    let y = self.names.fresh("result");
                    let dot = inner_product(&ret, build::var(&y), build::var(&u), &mut self.names);
                    closed.body = build::let_in(
                        build::pvar(&y),
                        std::mem::replace(&mut closed.body, Expr::structural_zero()),
                        dot,
                    );
                    closed.ret = Type::Real;
                    closed.params.push((u.clone(), Some(ret.clone())));
                    lets.push((u, args.pop().expect("a cotangent")));
                }
                let program = pipeline::compile_closed(
                    self.module,
                    closed,
                    Goal::Gradient,
                    Some(&qs),
                    self.options,
                    None,
                )?;
                build::proj(program.body, 1)
            }
            Derivative::Jvp => {
                let value_params = closed.params.len();
                let mut program = pipeline::compile_closed(
                    self.module,
                    closed,
                    Goal::Jvp,
                    None,
                    self.options,
                    Some("forward"),
                )?;
                // The parameters, then one tangent per value parameter: the
                // arguments' tangents are given; the free variables' are
                // zeros, bound before the simplifier runs so that it
                // removes what they would have carried.
                let tangents = program.params.split_off(value_params);
                let mut zeros = Vec::new();
                let mut given = std::mem::take(&mut args).into_iter();
                let mut renames = Scope::new();
                for (i, (t, ty)) in tangents.into_iter().enumerate() {
                    let ty = ty.expect("a tangent is a value");
                    if i < k {
                        // Forward mode's names, renamed to fresh ones.
                        let fresh = self.names.fresh(&t);
                        renames.push(t.clone(), fresh.clone());
                        program.params.push((t, Some(ty)));
                        lets.push((fresh, given.next().expect("a tangent per argument")));
                    } else {
                        zeros.push((build::pvar(&t), adjoint::zeros(&ty)));
                    }
                }
                program.body = crate::direct::lets(zeros, program.body);
                let program = pipeline::optimized(program)?;
                let out = freshen(&program.body, &mut self.names, &mut renames);
                return Ok(wrap(lets, out, span));
            }
            _ => unreachable!("rewritten above"),
        };
        let out = freshen(&result, &mut self.names, &mut Scope::new());
        Ok(wrap(lets, out, span))
    }

    /// `jacfwd`, `jacrev` or `jacobian` of `f` at `x : tx`, as `jvp` and
    /// `vjp` nodes (module documentation).
    fn jacobian(
        &mut self,
        d: Derivative,
        f: Expr,
        x: Expr,
        tx: &Type,
        span: Span,
    ) -> Result<Expr, AdError> {
        let ExprKind::Lambda(params, body) = &f.kind else {
            unreachable!("a lambda")
        };
        let mark = self.typer.mark();
        self.bind(&params[0].pat, tx);
        let ty = self.infer(body);
        self.typer.pop_to(mark);
        // The sizes of the input and the output; `None` for a real.
        let size = |t: &Type| match t {
            Type::Array(_, n) => Some(n.clone()),
            _ => None,
        };
        let (n, m) = (size(tx), size(&ty?));
        let point = self.names.fresh("point");
        let pv = || build::var(&point);
        let iota = |n: &Size| build::builtin(Builtin::Iota, vec![build::size(n)]);
        // One forward pass per input: the columns.
        let forward = |this: &mut Self| match &n {
            None => proj(
                derive(
                    Derivative::Jvp,
                    f.clone(),
                    vec![pv(), build::real(1.0)],
                    span,
                ),
                1,
            ),
            Some(n) => {
                let j = this.names.fresh("j");
                let e_j = this.one_hot(n, &j);
                let column = proj(derive(Derivative::Jvp, f.clone(), vec![pv(), e_j], span), 1);
                let columns = build::map1(&j, column, iota(n));
                match &m {
                    None => columns,
                    Some(m) => build::builtin(Builtin::Transpose, vec![build::size(m), columns]),
                }
            }
        };
        // One reverse pass per output: the rows.
        let reverse = |this: &mut Self| match &m {
            None => derive(
                Derivative::Vjp,
                f.clone(),
                vec![pv(), build::real(1.0)],
                span,
            ),
            Some(m) => {
                let i = this.names.fresh("i");
                let e_i = this.one_hot(m, &i);
                let row = derive(Derivative::Vjp, f.clone(), vec![pv(), e_i], span);
                build::map1(&i, row, iota(m))
            }
        };
        let passes = |s: &Option<Size>| s.clone().unwrap_or(Size::lit(1));
        let (inputs, outputs) = (passes(&n), passes(&m));
        let body = match d {
            Derivative::JacFwd => forward(self),
            Derivative::JacRev => reverse(self),
            _ => match (inputs.as_literal(), outputs.as_literal()) {
                (Some(a), Some(b)) if a <= b => forward(self),
                (Some(_), Some(_)) => reverse(self),
                _ => {
                    let fewer_inputs =
                        build::prim(Prim::ILe, vec![build::size(&inputs), build::size(&outputs)]);
                    let (fw, rv) = (forward(self), reverse(self));
                    build::cond(fewer_inputs, fw, rv)
                }
            },
        };
        Ok(build::let_in(build::pvar(&point), x, body))
    }

    /// `map (k. if k == j then 1 else 0) (iota(n))`.
    fn one_hot(&mut self, n: &Size, j: &Name) -> Expr {
        let k = self.names.fresh("k");
        let hit = build::prim(Prim::IEq, vec![build::var(&k), build::var(j)]);
        build::map1(
            &k,
            build::cond(hit, build::real(1.0), build::real(0.0)),
            build::builtin(Builtin::Iota, vec![build::size(n)]),
        )
    }
}

/// `let n₁ = v₁ in … out`, at `span`.
fn wrap(mut lets: Vec<(Name, Expr)>, mut out: Expr, span: Span) -> Expr {
    while let Some((n, value)) = lets.pop() {
        out = build::let_in(build::pvar(&n), value, out);
    }
    out.span = span;
    out
}

fn derive(d: Derivative, f: Expr, args: Vec<Expr>, span: Span) -> Expr {
    Expr::new(ExprKind::Derive(d, Box::new(f), args), span)
}

fn proj(e: Expr, k: usize) -> Expr {
    build::proj(e, k)
}

/// `⟨a, b⟩` for values of a type made of reals: the sum of the products
/// of their components.
fn inner_product(ty: &Type, a: Expr, b: Expr, names: &mut NameSupply) -> Expr {
    match ty {
        Type::Real => build::mul(a, b),
        Type::Tuple(ts) if ts.is_empty() => build::real(0.0),
        Type::Tuple(ts) => {
            let (x, y) = (names.fresh("left"), names.fresh("right"));
            let mut sum = None;
            for (i, t) in ts.iter().enumerate() {
                let term = inner_product(
                    t,
                    build::proj(build::var(&x), i),
                    build::proj(build::var(&y), i),
                    names,
                );
                sum = Some(match sum {
                    None => term,
                    Some(s) => build::add(s, term),
                });
            }
            build::let_in(
                build::pvar(&x),
                a,
                build::let_in(build::pvar(&y), b, sum.expect("a component")),
            )
        }
        Type::Array(elem, _) => {
            let (x, y) = (names.fresh("left"), names.fresh("right"));
            let products = build::array_op(
                ArrayOp::Map2,
                build::lambda(
                    vec![build::pvar(&x), build::pvar(&y)],
                    inner_product(elem, build::var(&x), build::var(&y), names),
                ),
                vec![a, b],
            );
            let (s, t) = (names.fresh("s"), names.fresh("t"));
            build::array_op(
                ArrayOp::Reduce,
                build::lambda(
                    vec![build::pvar(&s), build::pvar(&t)],
                    build::add(build::var(&s), build::var(&t)),
                ),
                vec![build::real(0.0), products],
            )
        }
        Type::Int | Type::Bool | Type::Fun(..) => unreachable!("checked: made of reals"),
    }
}

/// `let p₁ = v₁ in … out`, each `let` at its own position.
fn let_chain(bindings: Vec<(Span, Pattern, Option<Type>, Expr)>, out: Expr) -> Expr {
    bindings
        .into_iter()
        .rev()
        .fold(out, |body, (span, pat, ty, value)| {
            Expr::new(
                ExprKind::Let {
                    pat,
                    ty,
                    value: Box::new(value),
                    body: Box::new(body),
                },
                span,
            )
        })
}

fn freshen_pattern(pat: &Pattern, names: &mut NameSupply, renames: &mut Scope<Name>) -> Pattern {
    match pat {
        Pattern::Var(n, s) => {
            let fresh = names.fresh(n);
            renames.push(n.clone(), fresh.clone());
            Pattern::Var(fresh, *s)
        }
        Pattern::Wild(s) => Pattern::Wild(*s),
        Pattern::Tuple(ps, s) => Pattern::Tuple(
            ps.iter()
                .map(|p| freshen_pattern(p, names, renames))
                .collect(),
            *s,
        ),
    }
}

/// A copy of the program `e` that can stand in a closed Source term: every
/// binder renamed to a fresh name (`renames` holds those renamed around
/// it), so that nothing is shadowed, and every array operation's function
/// a lambda.
pub(crate) fn freshen(e: &Expr, names: &mut NameSupply, renames: &mut Scope<Name>) -> Expr {
    guard(|| match &e.kind {
        ExprKind::Var(n) => match renames.get(n) {
            Some(r) => Expr::new(ExprKind::Var(r.clone()), e.span),
            None => e.clone(),
        },
        ExprKind::Let { .. } => {
            let mark = renames.mark();
            let mut bindings = Vec::new();
            let mut cur = e;
            while let ExprKind::Let {
                pat,
                ty,
                value,
                body,
            } = &cur.kind
            {
                let value = freshen(value, names, renames);
                let pat = freshen_pattern(pat, names, renames);
                bindings.push((cur.span, pat, ty.clone(), value));
                cur = body;
            }
            let out = freshen(cur, names, renames);
            renames.pop_to(mark);
            let_chain(bindings, out)
        }
        ExprKind::Lambda(params, body) => {
            let mark = renames.mark();
            let params = params
                .iter()
                .map(|p| Param {
                    pat: freshen_pattern(&p.pat, names, renames),
                    ty: p.ty.clone(),
                })
                .collect();
            let body = freshen(body, names, renames);
            renames.pop_to(mark);
            Expr::new(ExprKind::Lambda(params, Arc::new(body)), e.span)
        }
        // A closed Source term's array operations take lambdas: `(+)`
        // becomes `(a, b. a + b)`.
        ExprKind::ArrayOp(op, f, args) if matches!(f.kind, ExprKind::PrimFn(_)) => {
            let ExprKind::PrimFn(p) = f.kind else {
                unreachable!("matched a primitive")
            };
            let params: Vec<Name> = (0..op.fn_arity()).map(|_| names.fresh("a")).collect();
            let body = build::prim(p, params.iter().map(build::var).collect());
            let f = build::lambda(params.iter().map(build::pvar).collect(), body);
            let args = args.iter().map(|a| freshen(a, names, renames)).collect();
            Expr::new(ExprKind::ArrayOp(*op, Box::new(f), args), e.span)
        }
        _ => e.map_children(&mut |c| freshen(c, names, renames)),
    })
}
