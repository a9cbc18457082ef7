//! `reduce`, `foldl`, `scanl`, `scanr`: the loop carrying the accumulator
//! (in variables, and two buffers for its arrays, or one updated in place),
//! and the ends of scans read as folds.

use super::*;
use gradlift_lang::reduce_order::{CHUNK, LANES};

impl Translator<'_, '_> {
    /// A [`Fold`] starting from the value of `start`.
    pub(crate) fn fold_from<'e>(
        &mut self,
        params: &'e [Param],
        body: &'e Expr,
        start: &Expr,
        tys: [Type; 2],
        reads: Reads,
    ) -> Result<Fold<'e>, JitError> {
        let start = self.lower(start)?;
        // An array accumulator (the riders let only those through) is
        // updated in place, in a buffer of its own.
        let in_place = match &start {
            Values::Array(a) => {
                let rows = match &a.elem {
                    e if e.reals_only() => false,
                    Shape::Array(_, e) if e.reals_only() => true,
                    _ => return unsupported("a fold in a map's loop with this accumulator"),
                };
                if !in_place_step(params, body, rows) {
                    return unsupported("a fold in a map's loop with this accumulator");
                }
                let c = self.carried(&start, &tys[0])?;
                self.own(&c)?;
                Some(c)
            }
            _ => None,
        };
        let vars = match &in_place {
            Some(c) => c.vars().to_vec(),
            None => self.variables(&start),
        };
        Ok(Fold {
            params,
            body,
            tys,
            start,
            vars,
            reads,
            in_place,
        })
    }

    /// `(scanr f z A)[0]` or `(scanl f z A)[-1]`: the last state of the
    /// scan, computed as a fold (from the last element for `scanr`) without
    /// storing the others. The reverse of a loop is such a right scan when
    /// only its final cotangents are read.
    pub fn scan_end(&mut self, op: ArrayOp, f: &Expr, args: &[Expr]) -> Result<Values, JitError> {
        let (params, body) = self.lambda(f, 2)?;
        let acc_ty = self.type_of(&args[0])?;
        let Type::Array(elem, _) = self.type_of(&args[1])? else {
            return Err(JitError::Internal("expected an array type".into()));
        };
        let z = self.lower(&args[0])?;
        let a = self.source_read(&args[1], op != ArrayOp::Scanr)?;
        let tys = [acc_ty, *elem];
        let size = Size::lit(0); // no states are stored
        self.fold(
            ArrayOp::Foldl(None),
            params,
            body,
            z,
            a,
            &tys,
            &size,
            op == ArrayOp::Scanr,
        )
    }

    /// A `reduce` of reals by `(+)`, `(*)`, `max` or `min`, in the chunks
    /// and lanes of `gradlift_lang::reduce_order` (the interpreter's
    /// order): a loop over the chunks (none when the length is a constant
    /// of at most one chunk) folds their results from the left, the first
    /// taken as it is.
    pub(super) fn reduce_in_lanes(
        &mut self,
        p: gradlift_lang::Prim,
        params: &[Param],
        body: &Expr,
        z: Values,
        a: Source<'_>,
        tys: &[Type; 2],
    ) -> Result<Values, JitError> {
        let Values::Real(z) = z else {
            return Err(JitError::Internal("a reduce in lanes of non-reals".into()));
        };
        let n = a.len();
        let s = if self.constant(n).is_some_and(|n| n <= CHUNK as i64) {
            let zero = self.iconst(0);
            self.chunk_in_lanes(p, params, body, &a, tys, zero, n)?
        } else if self.pair_source(&a) && self.may_split() {
            // A kernel run in chunks, on the thread pool when the array is
            // long (`split.rs`): the same chunks in the same order.
            let count = self.chunk_count(n);
            self.split_reduce(p, params, body, &a, tys, count)?
        } else {
            let count = self.chunk_count(n);
            self.chunks_here(p, params, body, &a, tys, count)?
        };
        Ok(Values::Real(self.lane_op(params, body, tys, z, s)?))
    }

    /// The chunks of a `reduce` in lanes, `count` of them, in a loop of
    /// this function: their results from the left, the first as it is.
    fn chunks_here(
        &mut self,
        p: gradlift_lang::Prim,
        params: &[Param],
        body: &Expr,
        a: &Source<'_>,
        tys: &[Type; 2],
        count: Value,
    ) -> Result<Value, JitError> {
        let n = a.len();
        let shift = CHUNK.trailing_zeros() as i64;
        let s = {
            let s = self.b.declare_var(types::F64);
            let zero = self.b.ins().f64const(0.0);
            self.b.def_var(s, zero);
            self.for_range_uncopied(count, &[s], &mut |t, c| {
                let start = t.b.ins().ishl_imm_s(c, shift);
                let rest = t.b.ins().isub(n, start);
                let chunk = t.iconst(CHUNK as i64);
                let len = t.b.ins().smin(rest, chunk);
                let r = t.chunk_in_lanes(p, params, body, a, tys, start, len)?;
                let before = t.b.use_var(s);
                let folded = t.lane_op(params, body, tys, before, r)?;
                let first = t.b.ins().icmp_imm_s(IntCC::Equal, c, 0);
                let next = t.b.ins().select(first, r, folded);
                t.b.def_var(s, next);
                Ok(())
            })?;
            self.b.use_var(s)
        };
        Ok(s)
    }

    /// `x op y` for reals, by a reduce's own function.
    fn lane_op(
        &mut self,
        params: &[Param],
        body: &Expr,
        tys: &[Type; 2],
        x: Value,
        y: Value,
    ) -> Result<Value, JitError> {
        match self.apply(params, body, vec![Values::Real(x), Values::Real(y)], tys)? {
            Values::Real(v) => Ok(v),
            _ => Err(JitError::Internal(
                "a reduce in lanes returned a non-real".into(),
            )),
        }
    }

    /// One chunk of a `reduce` in lanes: elements `start .. start + n` of
    /// `a` combined from the identity, `((l0 op l2) op (l1 op l3)) op t`.
    ///
    /// When an element costs a few instructions, a loop over blocks of
    /// [`LANES`] elements holds each lane in a loop-carried variable (or
    /// two lanes in a vector, `pairs.rs`), so that the lanes' operations
    /// overlap, and a second loop folds the last `n mod LANES` elements
    /// (the body is emitted `LANES + 1` times). When computing an element
    /// runs a loop of its own ([`runs_loops`]), overlapping gains nothing
    /// and the copies would multiply the code: one loop over all the
    /// elements adds each to its lane, or to the tail, kept in a small
    /// stack array.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn chunk_in_lanes(
        &mut self,
        p: gradlift_lang::Prim,
        params: &[Param],
        body: &Expr,
        a: &Source<'_>,
        tys: &[Type; 2],
        start: Value,
        n: Value,
    ) -> Result<Value, JitError> {
        let Some(identity) = gradlift_lang::reduce_order::lane_identity(p) else {
            return Err(JitError::Internal(
                "a reduce in lanes without an identity".into(),
            ));
        };
        // `acc op A[start + i]`, the element's temporaries released after it.
        let step = |t: &mut Self, acc: Value, i: Value| -> Result<Value, JitError> {
            let mark = t.mark();
            let start = t.entry_copy(start);
            let i = t.b.ins().iadd(start, i);
            let x = match t.element(a, i)? {
                Values::Real(x) => x,
                _ => {
                    return Err(JitError::Internal(
                        "a reduce in lanes read a non-real".into(),
                    ))
                }
            };
            let next = t.lane_op(params, body, tys, acc, x)?;
            t.release(mark);
            Ok(next)
        };
        let shift = LANES.trailing_zeros() as i64;
        let (lanes, tail) = if runs_loops(a) {
            // Slots 0..LANES hold the lanes, slot LANES the tail.
            let slot = self
                .b
                .create_sized_stack_slot(cranelift_codegen::ir::StackSlotData::new(
                    cranelift_codegen::ir::StackSlotKind::ExplicitSlot,
                    8 * (LANES as u32 + 1),
                    3,
                ));
            let e = self.b.ins().f64const(identity);
            let at = self.b.ins().stack_addr(types::I64, slot, 0);
            for k in 0..=LANES {
                self.b.ins().store(mem(), e, at, 8 * k as i32);
            }
            let full = self.b.ins().band_imm_s(n, -(LANES as i64));
            self.for_range(n, &mut |t, i| {
                let full = t.entry_copy(full);
                let within = t.b.ins().icmp(IntCC::UnsignedLessThan, i, full);
                let lane = t.b.ins().band_imm_s(i, LANES as i64 - 1);
                let last = t.iconst(LANES as i64);
                let k = t.b.ins().select(within, lane, last);
                let offset = t.b.ins().ishl_imm_s(k, 3);
                let base = t.b.ins().stack_addr(types::I64, slot, 0);
                let at = t.b.ins().iadd(base, offset);
                let acc = t.b.ins().load(types::F64, mem(), at, 0);
                let next = step(t, acc, i)?;
                t.b.ins().store(mem(), next, at, 0);
                Ok(())
            })?;
            let at = self.b.ins().stack_addr(types::I64, slot, 0);
            let lanes: Vec<Value> = (0..LANES)
                .map(|k| self.b.ins().load(types::F64, mem(), at, 8 * k as i32))
                .collect();
            let tail = self.b.ins().load(types::F64, mem(), at, 8 * LANES as i32);
            (lanes, tail)
        } else {
            let var = |t: &mut Self| {
                let v = t.b.declare_var(types::F64);
                let e = t.b.ins().f64const(identity);
                t.b.def_var(v, e);
                v
            };
            let blocks = self.b.ins().ushr_imm_s(n, shift);
            let lanes: Vec<Value> = if self.pair_source(a) {
                // Lanes 0 and 1 in one vector, 2 and 3 in another.
                self.lanes_in_pairs(p, identity, a, start, blocks)?.to_vec()
            } else {
                let lanes: Vec<cranelift_frontend::Variable> =
                    (0..LANES).map(|_| var(self)).collect();
                self.for_range_out(blocks, &lanes, &mut |t, b| {
                    let base = t.b.ins().ishl_imm_s(b, shift);
                    for (j, lane) in lanes.iter().enumerate() {
                        let i = t.b.ins().iadd_imm_s(base, j as i64);
                        let acc = t.b.use_var(*lane);
                        let next = step(t, acc, i)?;
                        t.b.def_var(*lane, next);
                    }
                    Ok(())
                })?;
                lanes.iter().map(|v| self.b.use_var(*v)).collect()
            };
            let tail = var(self);
            let base = self.b.ins().ishl_imm_s(blocks, shift);
            let rest = self.b.ins().isub(n, base);
            self.for_range_short(rest, &[tail], &mut |t, k| {
                let base = t.entry_copy(base);
                let i = t.b.ins().iadd(base, k);
                let acc = t.b.use_var(tail);
                let next = step(t, acc, i)?;
                t.b.def_var(tail, next);
                Ok(())
            })?;
            (lanes, self.b.use_var(tail))
        };
        let lanes: [Value; LANES] = lanes
            .try_into()
            .map_err(|_| JitError::Internal("the lanes of a reduce".into()))?;
        let s = gradlift_lang::reduce_order::combine_lanes(&lanes, &mut |x, y| {
            self.lane_op(params, body, tys, x, y)
        })?;
        self.lane_op(params, body, tys, s, tail)
    }

    /// The left folds and scans: the accumulator is loop-carried.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn fold(
        &mut self,
        op: ArrayOp,
        params: &[Param],
        body: &Expr,
        z: Values,
        a: Source<'_>,
        tys: &[Type],
        size: &Size,
        from_the_end: bool,
    ) -> Result<Values, JitError> {
        let len = a.len();
        let Some(shape) = z.shape() else {
            return unsupported("an accumulator that is a condition");
        };
        let scan = matches!(op, ArrayOp::Scanl | ArrayOp::Scanr);
        // A fold's accumulator is copied out of each iteration's
        // temporaries (a scan's lives in its result), so every iteration
        // releases them.
        let carried = if scan {
            None
        } else {
            Some(self.carried(&z, &tys[0])?)
        };
        let vars = self.variables(&z);
        // A fold whose accumulator is one array that its step rewrites
        // element by element updates it in place (see `in_place_step`).
        let in_place = !scan
            && match &z {
                // Elements of reals (or tuples of them), or rows of them.
                Values::Array(a) => match &a.elem {
                    e if e.reals_only() => in_place_step(params, body, false),
                    Shape::Array(_, e) if e.reals_only() => in_place_step(params, body, true),
                    _ => false,
                },
                _ => false,
            };
        if let Some(c) = carried.as_ref().filter(|_| in_place) {
            // Written in place from the first step: the start is copied
            // into the loop's own buffer first.
            self.own(c)?;
        }
        let out = if scan {
            let n = self.b.ins().iadd_imm_s(len, 1);
            let counted = self.counts().array(&size.offset(1), &tys[0]);
            let (ptr, stride) = self.alloc_array(n, &shape, counted)?;
            let last = if op == ArrayOp::Scanl {
                ptr
            } else {
                self.element_addr(ptr, len, stride)
            };
            self.store(last, &z, &shape)?;
            Some((ptr, stride, n))
        } else {
            None
        };
        // Only for accumulators of reals: with arrays in the accumulator
        // (its pointers in integer registers) it made the reverse of
        // logistic growth 11% slower.
        let results: Vec<cranelift_frontend::Variable> = match &carried {
            Some(c) if shape.reals_only() => c.vars().to_vec(),
            _ => Vec::new(),
        };
        let interior = self.interior(&[&a], len, from_the_end);
        self.for_range_peeled(len, &results, interior, &mut |t, k| {
            // scanr walks from the last element to the first.
            let i = if from_the_end {
                let last = t.b.ins().iadd_imm_s(len, -1);
                t.b.ins().isub(last, k)
            } else {
                k
            };
            let mark = t.mark();
            let acc = match &carried {
                Some(c) => t.get(c),
                None => {
                    let current: Vec<Value> = vars.iter().map(|v| t.b.use_var(*v)).collect();
                    z.rebuild(&mut current.into_iter())
                }
            };
            let x = t.element(&a, i)?;
            if in_place {
                // The step rewrites the accumulator's array element by
                // element, where it is: the loop's variables (its view)
                // do not change.
                let Values::Array(current) = &acc else {
                    return Err(JitError::Internal("an in-place accumulator".into()));
                };
                let (at, shape) = (
                    current.ptr,
                    Shape::Array(current.len, Box::new(current.elem.clone())),
                );
                for ((p, v), ty) in params.iter().zip([acc.clone(), x]).zip(tys) {
                    t.bind(&p.pat, v, ty)?;
                }
                t.lower_into(body, at, &shape)?;
                t.release(mark);
                return Ok(());
            }
            if let Some(c) = carried.as_ref().filter(|c| c.has_buffers()) {
                // The next accumulator is written into its buffer.
                for ((p, v), ty) in params.iter().zip([acc, x]).zip(tys) {
                    t.bind(&p.pat, v, ty)?;
                }
                t.set_written(c, &mut |t, dest| t.lower_to(body, dest))?;
                t.release(mark);
                return Ok(());
            }
            if let Some((ptr, stride, _)) = out {
                // A scan writes the next state into its slot of the result.
                for ((p, v), ty) in params.iter().zip([acc, x]).zip(tys) {
                    t.bind(&p.pat, v, ty)?;
                }
                let slot = if op == ArrayOp::Scanl {
                    t.b.ins().iadd_imm_s(i, 1)
                } else {
                    i
                };
                let ptr = t.entry_copy(ptr);
                let at = t.element_addr(ptr, slot, stride);
                let next = if shape.reals_only() {
                    // A state of reals is carried in registers and stored
                    // (reading it back would put a store and a load on
                    // the loop's critical path).
                    let v = t.lower(body)?;
                    t.store(at, &v, &shape)?;
                    v
                } else {
                    // The next iteration reads the state from the result.
                    t.lower_into(body, at, &shape)?;
                    load(t.b, at, &shape)
                };
                let next = next.to_vec();
                if next.len() != vars.len() {
                    return Err(JitError::Internal("a scan's state changes layout".into()));
                }
                for (var, v) in vars.iter().zip(next) {
                    t.b.def_var(*var, v);
                }
                t.release(mark);
                return Ok(());
            }
            let next = t.apply(params, body, vec![acc, x], tys)?;
            if next.to_vec().len() != vars.len() {
                return Err(JitError::Internal("accumulator layout changes".into()));
            }
            if let Some(c) = &carried {
                t.set(c, &next)?;
            }
            t.release(mark);
            Ok(())
        })?;
        if let Some((ptr, _, n)) = out {
            return Ok(Values::Array(ArrayVal {
                ptr,
                len: n,
                elem: shape,
            }));
        }
        match &carried {
            Some(c) => Ok(self.get(c)),
            None => unreachable!("a scan returned above"),
        }
    }
}

/// Whether the `map`/`map2` ending a fold's step `(acc, y. body)` can be
/// written over the accumulator's own array: the map reads the
/// accumulator `acc` as one of its arrays, and that is the only mention of
/// `acc` in the whole step. Element `i` of the result is then computed
/// from element `i` of the accumulator and values that do not depend on
/// the accumulator at all, so writing it where element `i` was changes
/// nothing that is still to be read; the step writes no copy of the rows
/// it leaves unchanged (a row that is the accumulator's own is not
/// copied onto itself, `Translator::store`).
///
/// With `rows` (the accumulator's elements are rows of reals or of tuples
/// of reals), the row a
/// map's function is given is a view of the accumulator: the function may
/// then only return it as it is or read it element by element, as the
/// array of a `map` or `map2` that builds its result (reading it anywhere
/// else, a shifted element say, could read what the step already wrote).
pub(crate) fn in_place_step(params: &[Param], body: &Expr, rows: bool) -> bool {
    let Some(gradlift_lang::Pattern::Var(acc, _)) = params.first().map(|p| &p.pat) else {
        return false;
    };
    let mut tail = body;
    while let ExprKind::Let { body, .. } = &tail.kind {
        tail = body;
    }
    let ExprKind::ArrayOp(ArrayOp::Map | ArrayOp::Map2, f, args) = &tail.kind else {
        return false;
    };
    let Some(k) = args
        .iter()
        .position(|a| matches!(&a.kind, ExprKind::Var(x) if x == acc))
    else {
        return false;
    };
    if mentions_of(body, acc) != 1 {
        return false;
    }
    if !rows {
        return true;
    }
    match &f.kind {
        ExprKind::Lambda(ps, row_body) => match ps.get(k).map(|p| &p.pat) {
            Some(gradlift_lang::Pattern::Var(row, _)) => builds_from(row_body, row),
            _ => false,
        },
        _ => false,
    }
}

/// Whether `e`, lowered into the place of the row `row`, reads `row` only
/// element by element as it writes it, or is `row` itself.
pub(super) fn builds_from(e: &Expr, row: &gradlift_lang::Name) -> bool {
    match &e.kind {
        ExprKind::Var(x) if x == row => true,
        ExprKind::If(c, t, f) => {
            mentions_of(c, row) == 0 && builds_from(t, row) && builds_from(f, row)
        }
        ExprKind::Let { value, body, .. } => mentions_of(value, row) == 0 && builds_from(body, row),
        ExprKind::ArrayOp(ArrayOp::Map | ArrayOp::Map2, f, args) => {
            mentions_of(f, row) == 0
                && args.iter().all(|a| {
                    matches!(&a.kind, ExprKind::Var(x) if x == row) || mentions_of(a, row) == 0
                })
        }
        _ => mentions_of(e, row) == 0,
    }
}

/// A fold computed in a map's loop: its function, the types of its
/// parameters, its start (the layout of its accumulator) and the
/// variables holding the accumulator.
pub(crate) struct Fold<'e> {
    pub(super) params: &'e [Param],
    pub(super) body: &'e Expr,
    pub(super) tys: [Type; 2],
    pub(super) start: Values,
    pub(super) vars: Vec<cranelift_frontend::Variable>,
    /// What the fold reads at iteration `i`.
    pub(super) reads: Reads,
    /// An accumulator that is one array its step rewrites element by
    /// element (see `in_place_step`): updated where it is, in its own
    /// buffer.
    pub(super) in_place: Option<crate::carried::Carried>,
}

/// The element a fold computed in a map's loop reads at iteration `i`.
pub(crate) enum Reads {
    /// Element `i` of the map's result.
    Own,
    /// Element `i` of an array the map's loop reads in full (with its
    /// stride).
    Array(ArrayVal, Value),
    /// The pair of element `i` of the map's result and element `i` of
    /// such an array (`zip(P, A)`), or with `.2`, the pair the other way
    /// round (`zip(A, P)`).
    Zip(ArrayVal, Value, bool),
}

/// Whether computing an element of `a` runs a loop: a fused map whose
/// function (or a fused map it reads) holds an array operation or a
/// builtin that builds an array.
fn runs_loops(a: &Source<'_>) -> bool {
    fn builds(e: &Expr) -> bool {
        gradlift_lang::deep::guard(|| match &e.kind {
            ExprKind::ArrayOp(..) => true,
            ExprKind::Builtin(b, _) if !matches!(b, Builtin::Len | Builtin::Get) => true,
            _ => e.children().any(builds),
        })
    }
    match a {
        Source::Mapped { body, inputs, .. } => builds(body) || inputs.iter().any(runs_loops),
        _ => false,
    }
}
