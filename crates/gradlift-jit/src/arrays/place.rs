//! Lowering into a place: a term whose value is written where it belongs —
//! a map's result row, a loop's accumulator buffer, the output — rather
//! than built and copied; an `if` whose sides are cheap is a `select`.

use super::*;

impl Translator<'_, '_> {
    /// Lowers `e` and stores its value at `at` as an element of layout
    /// `shape`. Through `let`s and tuples, a `map` or `map2` that ends the
    /// term writes its elements at `at` directly instead of into the
    /// workspace and then being copied.
    pub(crate) fn lower_into(
        &mut self,
        e: &Expr,
        at: Value,
        shape: &Shape,
    ) -> Result<(), JitError> {
        match (&e.kind, shape) {
            (ExprKind::Let { .. }, _) => self.let_chain_into(e, at, shape),
            (ExprKind::Tuple(es), Shape::Tuple(ss)) if es.len() == ss.len() => {
                let mut addrs = Vec::with_capacity(es.len());
                let mut a = at;
                for s in ss {
                    addrs.push(a);
                    let k = unchecked_bytes(self.b, s);
                    a = self.b.ins().iadd(a, k);
                }
                // Outside loops, a fold of an array that a `map` among the
                // parts reads in full, in order, is computed in the map's
                // loop (see `Translator::riding_folds`).
                let mut waiting = if self.loops.is_empty() {
                    self.riding_folds(es)?
                } else {
                    Vec::new()
                };
                for (k, (e, s)) in es.iter().zip(ss).enumerate() {
                    if waiting.iter().any(|r| r.part == k) {
                        continue;
                    }
                    match &e.kind {
                        ExprKind::ArrayOp(op @ (ArrayOp::Map | ArrayOp::Map2), f, args)
                            if !waiting.is_empty() && matches!(s, Shape::Array(..)) =>
                        {
                            let (params, body) = self.lambda(f, op.fn_arity())?;
                            let done = self.labelled(
                                || crate::annotate::one_line(e),
                                |t| t.map_into_riding(params, body, args, (addrs[k], s), &waiting),
                            )?;
                            for (part, v) in done {
                                self.store(addrs[part], &v, &ss[part])?;
                                waiting.retain(|r| r.part != part);
                            }
                        }
                        _ => self.lower_into(e, addrs[k], s)?,
                    }
                }
                for r in waiting {
                    self.lower_into(&es[r.part], addrs[r.part], &ss[r.part])?;
                }
                Ok(())
            }
            (ExprKind::ArrayOp(op @ (ArrayOp::Map | ArrayOp::Map2), f, args), Shape::Array(..)) => {
                let (params, body) = self.lambda(f, op.fn_arity())?;
                self.labelled(
                    || crate::annotate::one_line(e),
                    |t| t.map_into(params, body, args, Some((at, shape))),
                )?;
                Ok(())
            }
            _ => {
                let v = self.lower(e)?;
                self.store(at, &v, shape)
            }
        }
    }

    /// Lowers `e`, putting its value where `dest` says: through `let`s,
    /// tuples and the branches of `if`s, each part bound for memory is
    /// written there by [`Translator::lower_into`] (a `map` ending the term
    /// builds it there) or, if it is the accumulator's current array, kept
    /// where it is ([`Translator::put`]).
    pub(crate) fn lower_to(
        &mut self,
        e: &Expr,
        dest: &crate::carried::Dest,
    ) -> Result<Values, JitError> {
        use crate::carried::Dest;
        match (&e.kind, dest) {
            (_, Dest::Value) => self.lower(e),
            (ExprKind::If(c, then, other), _) => self.lower_if_to(c, then, other, dest),
            (
                ExprKind::Let {
                    pat,
                    ty,
                    value,
                    body,
                },
                _,
            ) => {
                self.bind_let(pat, ty.as_ref(), value)?;
                self.lower_to(body, dest)
            }
            (ExprKind::Tuple(es), Dest::Tuple(ds)) if es.len() == ds.len() => Ok(Values::Tuple(
                es.iter()
                    .zip(ds)
                    .map(|(e, d)| self.lower_to(e, d))
                    .collect::<Result<_, _>>()?,
            )),
            (ExprKind::ArrayOp(ArrayOp::Map | ArrayOp::Map2, ..), Dest::At(at, shape, _)) => {
                self.lower_into(e, *at, shape)?;
                Ok(load(self.b, *at, shape))
            }
            _ => {
                let v = self.lower(e)?;
                self.put(&v, dest)
            }
        }
    }

    /// [`Translator::lower_to`] of `if c then a else b`: each branch puts
    /// its value where `dest` says, and the views are merged.
    pub(crate) fn lower_if_to(
        &mut self,
        c: &Expr,
        then: &Expr,
        other: &Expr,
        dest: &crate::carried::Dest,
    ) -> Result<Values, JitError> {
        let cond = match self.lower(c)? {
            Values::Bool(v) => v,
            _ => return Err(JitError::Internal("condition of `if`".into())),
        };
        if matches!(dest, crate::carried::Dest::Value)
            && cheap_branch(then, &mut 0)
            && cheap_branch(other, &mut 0)
            && scalars_only(&self.type_of(then)?)
        {
            // Both sides are a few operations that cannot fail: both are
            // computed and `select` picks one, without a branch (the
            // one-hot cotangent `if i == k then v else 0` of an index, in
            // the loop over `i`).
            let (yes, no) = (self.lower(then)?, self.lower(other)?);
            let (ys, ns) = (yes.to_vec(), no.to_vec());
            if ys.len() != ns.len() {
                return Err(JitError::Internal(
                    "branches of `if` differ in layout".into(),
                ));
            }
            let picked: Vec<Value> = ys
                .iter()
                .zip(&ns)
                .map(|(y, n)| self.b.ins().select(cond, *y, *n))
                .collect();
            return Ok(yes.rebuild(&mut picked.into_iter()));
        }
        self.branches(
            cond,
            "branches of `if` differ in layout",
            &mut |t| t.lower_to(then, dest),
            &mut |t| t.lower_to(other, dest),
        )
    }

    /// `if cond then (yes) else (no)`: each lowered in a block of its own
    /// (a region), their flattened values merged as block parameters;
    /// `mismatch` is the internal error if their layouts differ.
    pub(super) fn branches(
        &mut self,
        cond: Value,
        mismatch: &str,
        yes: &mut dyn FnMut(&mut Self) -> Result<Values, JitError>,
        no: &mut dyn FnMut(&mut Self) -> Result<Values, JitError>,
    ) -> Result<Values, JitError> {
        let (then_block, else_block, merge) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        self.b.ins().brif(cond, then_block, &[], else_block, &[]);
        self.b.switch_to_block(then_block);
        let t = self.region(|t| yes(t))?;
        let flat = t.to_vec();
        for v in &flat {
            let ty = self.b.func.dfg.value_type(*v);
            self.b.append_block_param(merge, ty);
        }
        let args: Vec<BlockArg> = flat.iter().map(|v| BlockArg::from(*v)).collect();
        self.b.ins().jump(merge, &args);
        self.b.switch_to_block(else_block);
        let f = self.region(|t| no(t))?;
        let args: Vec<BlockArg> = f.to_vec().into_iter().map(BlockArg::from).collect();
        if args.len() != flat.len() {
            return Err(JitError::Internal(mismatch.into()));
        }
        self.b.ins().jump(merge, &args);
        self.b.switch_to_block(merge);
        let params = self.b.block_params(merge).to_vec();
        Ok(t.rebuild(&mut params.into_iter()))
    }
}

/// The most nodes in a side of an `if` lowered to a `select`.
pub(super) const MAX_SELECT_NODES: u32 = 6;

/// Whether `e` is at most [`MAX_SELECT_NODES`] constants, variables,
/// projections and primitives that are instructions (not library calls, nor
/// the inline sequences of `exp` and `tanh` with their own branches): cheap,
/// and it cannot fail.
pub(super) fn cheap_branch(e: &Expr, nodes: &mut u32) -> bool {
    *nodes += 1;
    if *nodes > MAX_SELECT_NODES {
        return false;
    }
    match &e.kind {
        ExprKind::Const(_) | ExprKind::Var(_) => true,
        ExprKind::Proj(x, _) => cheap_branch(x, nodes),
        ExprKind::Prim(p, args) => p.info().cheap && args.iter().all(|a| cheap_branch(a, nodes)),
        _ => false,
    }
}
