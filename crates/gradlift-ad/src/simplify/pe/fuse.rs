//! Functions rebuilt from residual functions: map fusion (Figure 12
//! "Classic array simplification"), and, not in the paper, fold fusion
//! (`reduce`/`foldl` of a `map`), the specialization of a `map2` whose
//! argument is a constant array (`map2-fill-arg`) and reading the
//! components of an array of tuples where they come from (`tuple-arg`).
//! Each gives the same value as the node it replaces, bit for bit: the
//! operations on reals and their order are unchanged.
//!
//! All build a new lambda whose body applies residual functions — lambdas
//! and primitives already evaluated — to the new parameters. Residual code
//! uses output names only, so it is evaluated with no source name in
//! scope. The lambdas consumed give their parameter names back, so the new
//! one reads like the ones written: `map sin (map2 (a, b. a * b) A B)`
//! becomes `map2 (a, b. sin(a * b)) A B`.

use super::{val_of, Pe, Res, Val};
use crate::simplify::rewrite;
use crate::simplify::rules::Rule;
use crate::simplify::term::*;
use gradlift_lang::syntax::*;
use gradlift_lang::Span;

/// The parameter names of a lambda whose parameters are all names.
fn param_names(f: &Expr) -> Option<Vec<Name>> {
    match &f.kind {
        ExprKind::Lambda(ps, _) => ps
            .iter()
            .map(|p| match &p.pat {
                Pattern::Var(n, _) => Some(n.clone()),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

impl Pe<'_> {
    /// `map f (map g A) ⇝ map (y. f(g(y))) A`, and likewise over `map2`.
    pub(super) fn fuse(&mut self, outer: Expr, inner: Expr, span: Span) -> Res<Val> {
        let ExprKind::ArrayOp(inner_op, g, args) = into_kind(inner) else {
            unreachable!("fusion of an array operation")
        };
        self.stats.fire(Rule::MapFusion);
        self.release_params(&g);
        self.release_params(&outer);
        let arity = inner_op.fn_arity();
        let hints = match param_names(&g).or_else(|| param_names(&outer)) {
            Some(names) if names.len() == arity => names,
            _ => vec![Name::from("a"), Name::from("b")],
        };
        let f = self.rebuild(&hints[..arity], span, |pe, ys| {
            let mid = pe.apply_residual(&g, ys, span)?;
            pe.apply_residual(&outer, vec![mid], span)
        })?;
        self.array_op(inner_op, f, args.into_iter().map(val_of).collect(), span)
    }

    /// `reduce f z (map g A) ⇝ foldl (acc, y. f(acc, g(y))) z A`, and the
    /// same for `foldl f z (map g A)` (keeping its checkpoint schedule).
    /// `reduce` is evaluated as a left fold from `z` (the interpreter and the
    /// JIT agree), so the result is the same bit for bit; the mapped array is
    /// never built. Only after differentiation: a `reduce (+) 0` keeps the
    /// fast path of reverse mode that a `foldl` would lose.
    pub(super) fn fuse_fold(
        &mut self,
        f: Expr,
        schedule: Option<gradlift_lang::Schedule>,
        start: Val,
        inner: Expr,
        span: Span,
    ) -> Res<Val> {
        let ExprKind::ArrayOp(ArrayOp::Map, g, mut args) = into_kind(inner) else {
            unreachable!("fusion of a map")
        };
        self.stats.fire(Rule::FoldFusion);
        self.release_params(&g);
        self.release_params(&f);
        let acc = param_names(&f)
            .and_then(|names| names.into_iter().next())
            .unwrap_or_else(|| Name::from("acc"));
        let elem = param_names(&g)
            .and_then(|names| names.into_iter().next())
            .unwrap_or_else(|| Name::from("x"));
        let step = self.rebuild(&[acc, elem], span, |pe, mut ys| {
            let y = ys.pop().expect("two parameters");
            let acc = ys.pop().expect("two parameters");
            let mid = pe.apply_residual(&g, vec![y], span)?;
            pe.apply_residual(&f, vec![acc, mid], span)
        })?;
        let array = val_of(args.pop().expect("a map has an array"));
        self.array_op(ArrayOp::Foldl(schedule), step, vec![start, array], span)
    }

    /// `map2 f A Fill(c) ⇝ map (a. f(a, c)) A` (`keep` = 0), or
    /// `map2 f Fill(c) B ⇝ map (b. f(c, b)) B` (`keep` = 1).
    pub(super) fn specialize(
        &mut self,
        f: Expr,
        keep: usize,
        constant: Val,
        array: Val,
        span: Span,
    ) -> Res<Val> {
        self.release_params(&f);
        let hint = param_names(&f)
            .map(|mut names| names.swap_remove(keep))
            .unwrap_or_else(|| Name::from("a"));
        let g = self.rebuild(&[hint], span, |pe, mut ys| {
            let y = ys.pop().expect("one parameter");
            let args = if keep == 0 {
                vec![y, constant]
            } else {
                vec![constant, y]
            };
            pe.apply_residual(&f, args, span)
        })?;
        self.array_op(ArrayOp::Map, g, vec![array], span)
    }

    /// `map2 (p, ζ. e) P Z ⇝ map (ζ. e[(c₀…cₖ)/p]) Z`, or
    /// `⇝ map2 (x, ζ. e[(c₀…x…cₖ)/p]) Aₖ Z` when `e` reads the component
    /// that is the parameter `xₖ` of `P`'s function (see
    /// [`rewrite::TupleArg`]); likewise for `map`.
    pub(super) fn read_through(
        &mut self,
        f: Expr,
        mut vals: Vec<Val>,
        t: rewrite::TupleArg,
        span: Span,
    ) -> Res<Val> {
        self.release_params(&f);
        let mut hints = param_names(&f).unwrap_or_else(|| vec![Name::from("a"); vals.len()]);
        let replaced = match t.param {
            Some(k) => {
                vals[t.pos] = val_of(t.tuple.args[k].clone());
                if let Some(n) = &t.tuple.params[k] {
                    hints[t.pos] = n.clone();
                }
                true
            }
            None if vals.len() == 1 => {
                vals[0] = val_of(t.tuple.args[0].clone());
                true
            }
            None => {
                vals.remove(t.pos);
                hints.remove(t.pos);
                false
            }
        };
        let components = t.tuple.components;
        let params = t.tuple.params;
        let pos = t.pos;
        let g = self.rebuild(&hints, span, |pe, mut ys| {
            let x = if replaced { Some(ys.remove(pos)) } else { None };
            let read = components
                .iter()
                .map(|c| match c.as_ref().map(|c| &c.kind) {
                    // As a plain constant: a structural zero read here
                    // would let `zero-product` drop its product with a
                    // cotangent that may be NaN, which the program without
                    // this rule keeps (it multiplies `p.i * ζ` elementwise).
                    Some(ExprKind::Const(v)) => Val::Const(*v, false),
                    // The parameter read (`tuple_arg` checked that the
                    // components read name one parameter at most); the
                    // components of other parameters are not read.
                    Some(ExprKind::Var(n)) if params.contains(&Some(n.clone())) => {
                        x.clone().unwrap_or(Val::Const(f64::NAN, false))
                    }
                    Some(ExprKind::Var(n)) => Val::Var(n.clone()),
                    // Never read: `tuple_arg` checked the projections.
                    _ => Val::Const(f64::NAN, false),
                })
                .collect();
            ys.insert(pos, Val::Tuple(std::rc::Rc::new(read)));
            pe.apply_residual(&f, ys, span)
        })?;
        let op = if vals.len() == 1 {
            ArrayOp::Map
        } else {
            ArrayOp::Map2
        };
        self.array_op(op, g, vals, span)
    }

    fn release_params(&mut self, f: &Expr) {
        if let ExprKind::Lambda(ps, _) = &f.kind {
            ps.iter().for_each(|p| self.names.release(&p.pat));
        }
    }

    /// A lambda with parameters named after `hints` and the body `body`
    /// builds from their values, evaluated with no source names in scope.
    fn rebuild(
        &mut self,
        hints: &[Name],
        span: Span,
        body: impl FnOnce(&mut Self, Vec<Val>) -> Res<Val>,
    ) -> Res<Expr> {
        let ys: Vec<Name> = hints.iter().map(|h| self.names.fresh(h)).collect();
        let env = std::mem::take(&mut self.env);
        let block = std::mem::take(&mut self.block);
        let args = ys.iter().map(|y| Val::Var(y.clone())).collect();
        let r = body(self, args).and_then(|v| self.residual(v, span));
        let inner = std::mem::replace(&mut self.block, block);
        self.env = env;
        let body = wrap(inner, r?);
        let params = ys
            .into_iter()
            .map(|y| Param {
                pat: Pattern::Var(y, Span::DUMMY),
                ty: None,
            })
            .collect();
        Ok(self.lambda(params, body))
    }

    /// Applies a residual function argument (a primitive or a lambda).
    fn apply_residual(&mut self, f: &Expr, args: Vec<Val>, span: Span) -> Res<Val> {
        match &f.kind {
            ExprKind::PrimFn(p) => self.prim(*p, args, span),
            ExprKind::Lambda(params, body) => {
                let mark = self.env.mark();
                let r = self
                    .bind_params(params, args, span)
                    .and_then(|()| self.eval(body));
                self.env.pop_to(mark);
                r
            }
            _ => unreachable!("only lambdas and primitives are rebuilt"),
        }
    }
}
