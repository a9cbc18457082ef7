//! Building residual nodes: every primitive application, projection,
//! index, array operation and built-in partial evaluation emits goes
//! through one of these constructors, which ask the matchers of
//! `rewrite.rs` for the first rule of the table that applies (Figure 12)
//! and build its outcome instead. Function arguments of array operations
//! are evaluated here into residual lambdas (η-contracted where a primitive
//! says the same), `map` over a `map` or `map2` written in place is fused,
//! and so is `reduce` or `foldl` over a `map` written in place.

use super::{code, ill_typed, val_of, Fun, Pe, Res, Val};
use crate::simplify::fill::var_fill_of;
use crate::simplify::rewrite::{self, ArrayRewrite, IndexRewrite, Scalar, ShiftRewrite};
use crate::simplify::rules::Rule;
use crate::simplify::term::*;
use crate::simplify::zeros;
use gradlift_lang::prim::PrimKind;
use gradlift_lang::syntax::*;
use gradlift_lang::{Prim, Span};
use std::rc::Rc;
use std::sync::Arc;

impl Pe<'_> {
    pub(super) fn prim(&mut self, p: Prim, mut vals: Vec<Val>, span: Span) -> Res<Val> {
        if vals.len() != p.info().arity {
            return ill_typed(
                span,
                gradlift_lang::span::arity_message(&format!("`{p}`"), p.info().arity, vals.len()),
            );
        }
        if let Some(v) = self.integer(p, &vals) {
            self.stats.fire(Rule::ConstFold);
            return Ok(v);
        }
        if let Some((rule, out)) = rewrite::scalar(p, &vals, self.opts) {
            self.stats.fire(rule);
            return Ok(match out {
                Scalar::Arg(i) => vals.swap_remove(i),
                Scalar::Zero(structural) => Val::Const(0.0, structural),
                Scalar::Const(c) => Val::Const(c, false),
            });
        }
        Ok(code(
            ExprKind::Prim(p, self.residual_all(vals, span)?),
            span,
        ))
    }

    /// An integer operation of constants folded, with the semantics of the
    /// primitive table (a division by zero is left for run time, where it
    /// is an error); `real` of a constant (`k as f64` rounds to nearest,
    /// as the interpreter and the native code do).
    fn integer(&self, p: Prim, vals: &[Val]) -> Option<Val> {
        let ks: Option<Vec<i64>> = vals
            .iter()
            .map(|v| match v {
                Val::Int(k) => Some(*k),
                _ => None,
            })
            .collect();
        let ks = ks?;
        match p.info().kind() {
            PrimKind::Int => p.eval_int(&ks).map(Val::Int),
            PrimKind::ToReal => Some(Val::Const(ks[0] as f64, false)),
            _ => None,
        }
    }

    pub(super) fn project(&mut self, v: Val, k: usize, span: Span) -> Res<Val> {
        match v {
            Val::Tuple(vs) if k < vs.len() => {
                self.stats.fire(Rule::TupleProj);
                Ok(match Rc::try_unwrap(vs) {
                    Ok(mut parts) => parts.swap_remove(k),
                    Err(shared) => shared[k].clone(),
                })
            }
            Val::Var(_) | Val::Code(_) => {
                let inner = Box::new(self.residual(v, span)?);
                Ok(code(ExprKind::Proj(inner, k), span))
            }
            _ => ill_typed(
                span,
                format!("projection `.{k}` of a value without component {k}"),
            ),
        }
    }

    pub(super) fn index(&mut self, v: Val, k: i64, span: Span) -> Res<Val> {
        if let Some((rule, out)) = rewrite::index(&v, k, &self.facts) {
            self.stats.fire(rule);
            return Ok(match (out, v) {
                (IndexRewrite::Const(c, s), _) => Val::Const(c, s),
                (IndexRewrite::Tuple(c), _) => val_of(c),
                (IndexRewrite::Element(i), Val::Code(e)) => match into_kind(*e) {
                    ExprKind::ArrayLit(mut es) => val_of(es.swap_remove(i)),
                    _ => unreachable!("index-known matched an array literal"),
                },
                (IndexRewrite::Element(_), _) => unreachable!("index-known matched residual code"),
            });
        }
        let inner = Box::new(self.residual(v, span)?);
        Ok(code(ExprKind::Index(inner, k), span))
    }

    /// The residual function argument of an array operation.
    pub(super) fn function(&mut self, f: &Expr, arity: usize) -> Res<Expr> {
        let check = |n: usize| {
            if n == arity {
                Ok(())
            } else {
                ill_typed(
                    f.span,
                    gradlift_lang::span::arity_message("the function", arity, n),
                )
            }
        };
        if let ExprKind::Lambda(params, body) = &f.kind {
            check(params.len())?;
            return self.residual_lambda(params, body);
        }
        match self.eval(f)? {
            Val::Fun(fun) => match &*fun {
                Fun::Prim(p) => {
                    check(p.info().arity)?;
                    Ok(Expr::new(ExprKind::PrimFn(*p), f.span))
                }
                Fun::Closure {
                    params,
                    body,
                    captured,
                } => {
                    check(params.len())?;
                    let mark = self.env.mark();
                    for (n, v) in captured {
                        self.env.push(n.clone(), v.clone());
                    }
                    let r = self.residual_lambda(params, body);
                    self.env.pop_to(mark);
                    r
                }
            },
            // A definition passed by name.
            Val::Var(n) => Ok(var(&n)),
            _ => ill_typed(
                f.span,
                "the function argument of an array operation is not a function",
            ),
        }
    }

    /// A lambda in the current environment, its body evaluated as a block.
    pub(super) fn residual_lambda(&mut self, params: &[Param], body: &Expr) -> Res<Expr> {
        let mark = self.env.mark();
        let outer = std::mem::take(&mut self.block);
        let params: Vec<Param> = params
            .iter()
            .map(|p| Param {
                pat: self.rename(&p.pat),
                ty: None,
            })
            .collect();
        let r = self.eval(body).and_then(|v| self.residual(v, body.span));
        let inner = std::mem::replace(&mut self.block, outer);
        self.env.pop_to(mark);
        let body = wrap(inner, r?);
        Ok(self.lambda(params, body))
    }

    pub(super) fn lambda(&mut self, params: Vec<Param>, body: Expr) -> Expr {
        if let Some(p) = rewrite::eta(&params, &body) {
            self.stats.fire(Rule::Eta);
            params.iter().for_each(|q| self.names.release(&q.pat));
            return mk(ExprKind::PrimFn(p));
        }
        mk(ExprKind::Lambda(params, Arc::new(body)))
    }

    pub(super) fn array_op(
        &mut self,
        op: ArrayOp,
        f: Expr,
        mut vals: Vec<Val>,
        span: Span,
    ) -> Res<Val> {
        if vals.len() != op.arity() {
            return ill_typed(
                span,
                format!("`{}` with {} arguments", op.name(), vals.len()),
            );
        }
        if let Some((rule, out)) = rewrite::array(op, &f, &vals, &self.facts, self.opts) {
            self.stats.fire(rule);
            return match out {
                ArrayRewrite::Arg(i) => Ok(vals.swap_remove(i)),
                ArrayRewrite::ConstMap {
                    value,
                    structural,
                    arg,
                } => {
                    let a = self.residual(vals.swap_remove(arg), span)?;
                    Ok(val_of(rewrite::const_map(value, structural, a)))
                }
                ArrayRewrite::Replicate { size, elem } => {
                    let z = self.residual(vals.swap_remove(elem), span)?;
                    let n = rewrite::size_plus_one(size);
                    Ok(code(
                        ExprKind::Builtin(Builtin::Replicate, vec![n, z]),
                        span,
                    ))
                }
                ArrayRewrite::Map { f, arg } => {
                    let a = vals.swap_remove(arg);
                    let f = match into_kind(f) {
                        ExprKind::Lambda(params, body) => self.lambda(params, unshare(body)),
                        other => mk(other),
                    };
                    self.array_op(ArrayOp::Map, f, vec![a], span)
                }
                ArrayRewrite::Specialize {
                    keep,
                    value,
                    structural,
                } => {
                    let a = vals.swap_remove(keep);
                    self.specialize(f, keep, Val::Const(value, structural), a, span)
                }
            };
        }
        if let Some(carried) = zeros::carried(op, &f, &vals, &self.facts) {
            self.stats.fire(Rule::ZeroCarry);
            let start = vals.swap_remove(0);
            return match carried {
                zeros::Carried::Fold => Ok(start),
                zeros::Carried::Scan(len) => {
                    let z = self.residual(start, span)?;
                    Ok(code(
                        ExprKind::Builtin(Builtin::Replicate, vec![len, z]),
                        span,
                    ))
                }
            };
        }
        // A `map2` argument holding one variable everywhere: the variable in
        // the body (`map2-fill-arg` for a variable).
        if op == ArrayOp::Map2 && !matches!(f.kind, ExprKind::Var(_)) {
            let fill = |i: usize| var_fill_of(&vals[i], &self.facts);
            let found = match (fill(1), fill(0)) {
                (Some(v), _) => Some((0, v)),
                (None, Some(v)) => Some((1, v)),
                (None, None) => None,
            };
            if let Some((keep, v)) = found {
                self.stats.fire(Rule::Map2FillArg);
                let a = vals.swap_remove(keep);
                return self.specialize(f, keep, Val::Var(v), a, span);
            }
        }
        if op == ArrayOp::Map {
            if let Some((rule, out)) = rewrite::project_map(&f, &vals[0], &self.facts) {
                self.stats.fire(rule);
                return Ok(val_of(out));
            }
        }
        if let Some(t) = rewrite::tuple_arg(op, &f, &vals, &self.facts) {
            self.stats.fire(Rule::TupleArg);
            return self.read_through(f, vals, t, span);
        }
        if op == ArrayOp::Map2 && matches!(f.kind, ExprKind::PrimFn(Prim::Add)) {
            if let Some(v) = self.add_into_if(&mut vals, span)? {
                return Ok(v);
            }
        }
        if op == ArrayOp::Map2 {
            if let Some(k) = super::fuse::fusable_map2_arg(&f, &vals) {
                return self.fuse_map2_arg(f, vals, k, span);
            }
        }
        let fusable = |e: &Expr| !matches!(e.kind, ExprKind::Var(_));
        if op == ArrayOp::Map && fusable(&f) {
            if let Val::Code(inner) = &vals[0] {
                if let ExprKind::ArrayOp(ArrayOp::Map | ArrayOp::Map2, g, _) = &inner.kind {
                    if fusable(g) {
                        let Some(Val::Code(inner)) = vals.pop() else {
                            unreachable!("checked above")
                        };
                        return self.fuse(f, *inner, span);
                    }
                }
            }
        }
        // A `reduce` in lanes (gradlift_lang::reduce_order) keeps its map:
        // a left fold would change its order. The backends compute the
        // map's elements in its loop anyway.
        let in_lanes =
            op == ArrayOp::Reduce && gradlift_lang::reduce_order::lane_prim(&f).is_some();
        if matches!(op, ArrayOp::Reduce | ArrayOp::Foldl(_)) && fusable(&f) && !in_lanes {
            if let Val::Code(inner) = &vals[1] {
                if let ExprKind::ArrayOp(inner_op @ (ArrayOp::Map | ArrayOp::Map2), g, _) =
                    &inner.kind
                {
                    // A `foldl` over a `map2` is fused when the map's
                    // elements are arrays built by a `map` (the step then
                    // builds only its own array, the two maps fused,
                    // rather than each element and then the step); a
                    // `map2` of reals is read in the fold's loop anyway. A
                    // `reduce` keeps its `map2` for the rules that fuse the
                    // map's arguments into its function (`map2-arg-fusion`,
                    // `zero-split`: kmeans' one-hot cotangent). Never a
                    // zip, which is what the fusion builds.
                    let map2_ok = matches!(op, ArrayOp::Foldl(_))
                        && matches!(f.kind, ExprKind::Lambda(..))
                        && super::fuse::builds_array(g)
                        && !super::fuse::is_zip(g);
                    if fusable(g) && (*inner_op == ArrayOp::Map || map2_ok) {
                        let Some(Val::Code(inner)) = vals.pop() else {
                            unreachable!("checked above")
                        };
                        let start = vals.pop().expect("a fold has a start");
                        let schedule = match op {
                            ArrayOp::Foldl(s) => s,
                            _ => None,
                        };
                        return self.fuse_fold(f, schedule, start, *inner, span);
                    }
                }
            }
        }
        let args = self.residual_all(vals, span)?;
        Ok(code(ExprKind::ArrayOp(op, Box::new(f), args), span))
    }

    pub(super) fn builtin(&mut self, b: Builtin, mut vals: Vec<Val>, span: Span) -> Res<Val> {
        if vals.len() != b.arity() {
            return ill_typed(
                span,
                format!("`{}` with {} arguments", b.name(), vals.len()),
            );
        }
        if let (Builtin::Len, [Val::Code(e)]) = (b, vals.as_slice()) {
            if let Some((x, offset)) = length_of(e) {
                self.stats.fire(Rule::LenOfOp);
                return Ok(val_of(len_plus(x, offset)));
            }
        }
        if let (Builtin::Get, [_, Val::Int(k)]) = (b, vals.as_slice()) {
            let k = *k;
            self.stats.fire(Rule::IndexConstant);
            let a = vals.swap_remove(0);
            return self.index(a, k, span);
        }
        if matches!(b, Builtin::Shift1L | Builtin::Shift1R) {
            if let Some((rule, out)) = rewrite::shift(&vals[0], &self.facts) {
                self.stats.fire(rule);
                return Ok(match out {
                    ShiftRewrite::ConstMap {
                        value,
                        structural,
                        like,
                    } => {
                        let shifted = Expr::new(ExprKind::Builtin(b, vec![like]), span);
                        val_of(rewrite::const_map(value, structural, shifted))
                    }
                    ShiftRewrite::Replicate {
                        value,
                        structural,
                        len,
                    } => {
                        let n = mk(ExprKind::Int(len));
                        let args = vec![n, constant(value, structural)];
                        code(ExprKind::Builtin(Builtin::Replicate, args), span)
                    }
                });
            }
        }
        let args = std::mem::take(&mut vals);
        Ok(code(
            ExprKind::Builtin(b, self.residual_all(args, span)?),
            span,
        ))
    }
}
