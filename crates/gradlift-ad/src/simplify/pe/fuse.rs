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
    /// Only for a `reduce` that is evaluated as a left fold from `z` (not
    /// one in lanes, `gradlift_lang::reduce_order`), so the result is the
    /// same bit for bit; the mapped array is never built. Only after differentiation: a `reduce (+) 0` keeps the
    /// fast path of reverse mode that a `foldl` would lose.
    pub(super) fn fuse_fold(
        &mut self,
        f: Expr,
        schedule: Option<gradlift_lang::Schedule>,
        start: Val,
        inner: Expr,
        span: Span,
    ) -> Res<Val> {
        let ExprKind::ArrayOp(inner_op @ (ArrayOp::Map | ArrayOp::Map2), g, args) =
            into_kind(inner)
        else {
            unreachable!("fusion of a map")
        };
        self.stats.fire(Rule::FoldFusion);
        self.release_params(&g);
        self.release_params(&f);
        let zip = inner_op == ArrayOp::Map2;
        let acc = param_names(&f)
            .and_then(|names| names.into_iter().next())
            .unwrap_or_else(|| Name::from("acc"));
        let elem = if zip {
            Name::from("q")
        } else {
            param_names(&g)
                .and_then(|names| names.into_iter().next())
                .unwrap_or_else(|| Name::from("x"))
        };
        let step = self.rebuild(&[acc, elem], span, |pe, mut ys| {
            let y = ys.pop().expect("two parameters");
            let acc = ys.pop().expect("two parameters");
            // A `map2`'s elements are read from the pair of its arrays.
            let inner_args = if zip {
                vec![pe.project(y.clone(), 0, span)?, pe.project(y, 1, span)?]
            } else {
                vec![y]
            };
            let mid = pe.apply_residual(&g, inner_args, span)?;
            pe.apply_residual(&f, vec![acc, mid], span)
        })?;
        let array = self.fused_array(zip, args, span);
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

/// Whether `f` is `(a, b. (a, b))`, the function of a zip.
/// Whether the function `f`'s body ends (through `let`s) in a `map` or
/// `map2`.
pub(super) fn builds_array(f: &Expr) -> bool {
    let ExprKind::Lambda(_, body) = &f.kind else {
        return false;
    };
    let mut e: &Expr = body;
    while let ExprKind::Let { body, .. } = &e.kind {
        e = body;
    }
    matches!(e.kind, ExprKind::ArrayOp(ArrayOp::Map | ArrayOp::Map2, ..))
}

pub(crate) fn is_zip(f: &Expr) -> bool {
    let ExprKind::Lambda(ps, body) = &f.kind else {
        return false;
    };
    let (
        [Param {
            pat: Pattern::Var(a, _),
            ..
        }, Param {
            pat: Pattern::Var(b, _),
            ..
        }],
        ExprKind::Tuple(es),
    ) = (ps.as_slice(), &body.kind)
    else {
        return false;
    };
    matches!(es.as_slice(), [x, y]
        if matches!(&x.kind, ExprKind::Var(n) if n == a) && matches!(&y.kind, ExprKind::Var(n) if n == b))
}

/// The argument of a `map2` that [`Pe::fuse_map2_arg`] fuses: a `map` or
/// `map2` written in place, with a lambda that is not a zip.
pub(super) fn fusable_map2_arg(f: &Expr, vals: &[Val]) -> Option<usize> {
    if !matches!(f.kind, ExprKind::Lambda(..)) || is_zip(f) {
        return None;
    }
    (0..vals.len()).find(|&k| {
        matches!(&vals[k], Val::Code(e) if matches!(&e.kind,
            ExprKind::ArrayOp(ArrayOp::Map | ArrayOp::Map2, g, _)
                if matches!(g.kind, ExprKind::Lambda(..)) && !is_zip(g)))
    })
}

/// The most nodes in a function [`Pe::fuse_map2_arg`] evaluates twice.
const MAX_SPLIT_NODES: usize = super::super::limits::LIMITS.split_nodes;

fn nodes(e: &Expr, budget: &mut usize) -> bool {
    if *budget == 0 {
        return false;
    }
    *budget -= 1;
    e.children().all(|c| nodes(c, budget))
}

/// `if c then v else 0ₛ` (or `if c then 0ₛ else v`) as residual code: the
/// condition, `v`, and whether the zero is the `then` branch.
fn conditional_zero(v: &Val) -> Option<(Expr, Expr, bool)> {
    let Val::Code(e) = v else { return None };
    let ExprKind::If(c, t, f) = &e.kind else {
        return None;
    };
    let zero =
        |x: &Expr| matches!(x.kind, ExprKind::Const(z) if z == 0.0) && x.is_structural_zero();
    if zero(f) {
        Some(((**c).clone(), (**t).clone(), false))
    } else if zero(t) {
        Some(((**c).clone(), (**f).clone(), true))
    } else {
        None
    }
}

impl Pe<'_> {
    /// `map2 f X (map g A) ⇝ map2 (x, a. f(x, g(a))) X A`, and
    /// `map2 f X (map2 g A B) ⇝ map2 (x, q. f(x, g(q.0, q.1))) X (zip A B)`
    /// (either position; rule `map2-arg-fusion`): the consumer's function
    /// sees how its argument's elements are made. When `g`'s element is
    /// `if c then v else 0ₛ` and `f` is small, `f` is applied to each
    /// branch (rule `zero-split`): `if c then f(x, v) else f(x, 0ₛ)`,
    /// where the structural zero then simplifies (a one-hot cotangent
    /// scaling a row becomes a branch that builds the row only for the
    /// one element). The JIT computes a `map`'s elements in its
    /// consumer's loop either way; the same operations on the same
    /// operands, bit for bit.
    pub(super) fn fuse_map2_arg(
        &mut self,
        f: Expr,
        mut vals: Vec<Val>,
        k: usize,
        span: Span,
    ) -> Res<Val> {
        let Val::Code(inner) = std::mem::replace(&mut vals[k], Val::Const(0.0, false)) else {
            unreachable!("checked by fusable_map2_arg")
        };
        let ExprKind::ArrayOp(inner_op, g, args) = into_kind(*inner) else {
            unreachable!("checked by fusable_map2_arg")
        };
        self.stats.fire(Rule::Map2ArgFusion);
        self.release_params(&g);
        self.release_params(&f);
        let hints = param_names(&f)
            .filter(|n| n.len() == 2)
            .unwrap_or_else(|| vec![Name::from("a"), Name::from("b")]);
        let zip = inner_op == ArrayOp::Map2;
        let splits = {
            let mut budget = MAX_SPLIT_NODES;
            nodes(&f, &mut budget)
        };
        let fused = self.rebuild(&hints, span, |pe, mut ys| {
            let y = ys[k].clone();
            let inner_args = if zip {
                vec![pe.project(y.clone(), 0, span)?, pe.project(y, 1, span)?]
            } else {
                vec![y]
            };
            let mid = pe.apply_residual(&g, inner_args, span)?;
            if let Some((c, v, zero_first)) = conditional_zero(&mid).filter(|_| splits) {
                pe.stats.fire(Rule::ZeroSplit);
                let branch = |pe: &mut Self, x: Val| {
                    let mut with = ys.clone();
                    with[k] = x;
                    pe.block_with(|pe| pe.apply_residual(&f, with, span), span)
                };
                let value = branch(pe, val_of(v))?;
                let zero = branch(pe, Val::Const(0.0, true))?;
                let (t, e) = if zero_first {
                    (zero, value)
                } else {
                    (value, zero)
                };
                return Ok(super::code(
                    ExprKind::If(Box::new(c), Box::new(t), Box::new(e)),
                    span,
                ));
            }
            ys[k] = mid;
            pe.apply_residual(&f, ys, span)
        })?;
        vals[k] = self.fused_array(zip, args, span);
        self.array_op(ArrayOp::Map2, fused, vals, span)
    }

    /// The array a fused function now reads: the one array of a `map`,
    /// or (`zip`) the pairs of a `map2`'s two, `map2 (a, b. (a, b)) A B`.
    fn fused_array(&mut self, zip: bool, mut args: Vec<Expr>, span: Span) -> Val {
        if !zip {
            return val_of(args.pop().expect("a map has an array"));
        }
        let (a, b) = (
            self.names.fresh(&Name::from("a")),
            self.names.fresh(&Name::from("b")),
        );
        let pair = mk(ExprKind::Tuple(vec![var(&a), var(&b)]));
        let params = [a, b]
            .into_iter()
            .map(|n| Param {
                pat: Pattern::Var(n, Span::DUMMY),
                ty: None,
            })
            .collect();
        let lambda = mk(ExprKind::Lambda(params, std::sync::Arc::new(pair)));
        super::code(
            ExprKind::ArrayOp(ArrayOp::Map2, Box::new(lambda), args),
            span,
        )
    }

    /// The residual block `body` builds: its own `let`s, then its value.
    pub(super) fn block_with(
        &mut self,
        body: impl FnOnce(&mut Self) -> Res<Val>,
        span: Span,
    ) -> Res<Expr> {
        let outer = std::mem::take(&mut self.block);
        let r = body(self).and_then(|v| self.residual(v, span));
        let inner = std::mem::replace(&mut self.block, outer);
        Ok(wrap(inner, r?))
    }

    /// `map2 (+) S (if c then A else Zeros)` (either order, either branch)
    /// `⇝ if c then map2 (+) S A else S` for a variable `S` (rule
    /// `add-into-if`): the branch that adds zeros is `S` itself.
    pub(super) fn add_into_if(&mut self, vals: &mut [Val], span: Span) -> Res<Option<Val>> {
        let found = (0..2).find_map(|k| {
            let (Val::Var(s), Val::Code(e)) = (&vals[1 - k], &vals[k]) else {
                return None;
            };
            let ExprKind::If(_, t, f) = &e.kind else {
                return None;
            };
            let zeros = |x: &Expr| {
                crate::simplify::fill::fill_of_expr(x, &self.facts)
                    .is_some_and(|z| z.structural && z.value == 0.0)
                    || zeros_by_map(x)
            };
            match (zeros(t), zeros(f)) {
                (false, true) => Some((k, s.clone(), false)),
                (true, false) => Some((k, s.clone(), true)),
                _ => None,
            }
        });
        let Some((k, s, zero_first)) = found else {
            return Ok(None);
        };
        self.stats.fire(Rule::AddIntoIf);
        let Val::Code(e) = std::mem::replace(&mut vals[k], Val::Const(0.0, false)) else {
            unreachable!("matched above")
        };
        let ExprKind::If(c, t, f) = into_kind(*e) else {
            unreachable!("matched above")
        };
        let other = if zero_first { *f } else { *t };
        let sum = self.block_with(
            |pe| {
                let mut args = vec![Val::Var(s.clone()), val_of(other)];
                if k == 0 {
                    args.swap(0, 1);
                }
                pe.array_op(
                    ArrayOp::Map2,
                    mk(ExprKind::PrimFn(gradlift_lang::Prim::Add)),
                    args,
                    span,
                )
            },
            span,
        )?;
        let (t, f) = if zero_first {
            (var(&s), sum)
        } else {
            (sum, var(&s))
        };
        Ok(Some(super::code(
            ExprKind::If(c, Box::new(t), Box::new(f)),
            span,
        )))
    }
}

/// Whether `e` is a `map` or `map2` whose function ends, after `let`s, in
/// a structural zero (its dead `let`s not yet removed).
fn zeros_by_map(e: &Expr) -> bool {
    let ExprKind::ArrayOp(ArrayOp::Map | ArrayOp::Map2, f, _) = &e.kind else {
        return false;
    };
    let ExprKind::Lambda(_, body) = &f.kind else {
        return false;
    };
    let mut tail: &Expr = body;
    while let ExprKind::Let { body, .. } = &tail.kind {
        tail = body;
    }
    matches!(tail.kind, ExprKind::Const(z) if z == 0.0) && tail.is_structural_zero()
}
