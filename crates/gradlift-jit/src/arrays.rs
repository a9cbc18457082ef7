//! Loops for the array constructs: `map`, `map2`, `reduce`, `foldl`,
//! `scanl`, `scanr`, and the builtins (`iota`, `replicate`, `concat`,
//! `take`, `drop`, `shift1L`, `shift1R`, `len`), array literals and
//! indexing.
//!
//! A loop is rotated: `0 < n ? body : exit` once, then `body; i += 1;
//! i < n ? body : exit` (one branch an iteration); its index and any
//! accumulator are Cranelift `Variable`s, everything else is SSA. The
//! address of a row of a nested array is opaque to instruction selection
//! ([`crate::values::opaque`]), so loops over the row do not recompute it.
//! A loop reads the values it uses from before it through copies made at
//! its entry, and its fold results leave through copies made at its exit
//! (`LoopEntry` in `lower.rs`), so the register allocator spills outside
//! the loop. A stored map carries the folds over it that can ride along
//! ([`Translator::map_with_folds`], chosen in `horizontal.rs`), and a map
//! that is a part of the function's result the folds of the result over
//! an array it reads in full ([`Translator::riding_folds`]). The lambda's body is
//! lowered inline in the loop body with its parameters bound to the loaded
//! elements. Results are written to fresh workspace memory, element `i` at
//! `ptr + i·stride`; slicing builtins return views (no copy). A `map` or
//! `map2` written in place as the argument of another array operation is
//! not stored: its elements are computed in the consumer's loop (loop
//! fusion, [`Translator::source`]); a map whose body ends in a map writes
//! the inner elements into its own result row ([`Translator::lower_into`]);
//! `(scanr …)[0]` and `(scanl …)[-1]` are folds that store no states
//! ([`Translator::scan_end`]). A loop also computes in place, instead of
//! reading them from memory: `iota(n)`; a `shift1L`, `shift1R` or `take`
//! of a fused array whose elements cannot fail; a `concat` of reals; and,
//! when it reads its elements in order, a shifted `scanl` of reals, whose
//! state it carries; and a one-hot map of a range, by comparing integers
//! ([`Source`]). A loop whose sources test its index where the answer is
//! the same for all but a few iterations at the start or the end (a
//! `concat` with a part of constant length, a one-hot) is peeled: its
//! interior runs a copy of the body with the tests decided
//! ([`Translator::for_range_peeled`]). An index into a map of a range computes
//! the one element ([`Translator::index_source`]); a stored `concat` writes
//! a map part straight into its result. A loop's accumulator lives in
//! variables and, for its arrays, two buffers ([`Translator::lower_to`],
//! `checkpoint.rs`) — one, updated in place, when the step rewrites the
//! array element by element (`in_place_step`); a stored scan of reals
//! carries its state in variables too. Arrays stored into a row are checked to have the
//! row's shape, and every index, length and count is checked before memory
//! is touched.

use crate::abi::Status;
use crate::lower::{unsupported, Translator};
use crate::values::{load, mem, unchecked_bytes, ArrayVal, Shape, Values};
use crate::workspace::Bytes;
use crate::JitError;
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{types, BlockArg, InstBuilder, MemFlagsData, Value};
use gradlift_lang::syntax::{ArrayOp, Builtin, Expr, ExprKind, Param, Size, Type};

impl Translator<'_, '_> {
    /// Runs `body(i)` for `i` in `0..n`.
    pub fn for_range(
        &mut self,
        n: Value,
        body: &mut dyn FnMut(&mut Self, Value) -> Result<(), JitError>,
    ) -> Result<(), JitError> {
        self.for_range_out(n, &[], body)
    }

    /// [`Translator::for_range`], with `results` (loop-carried variables
    /// read after the loop) passed to the exit block as its parameters: the
    /// values after the loop are then new SSA values, so the register
    /// allocator can keep the loop's own value in a register and spill the
    /// one after the loop (around a call, which clobbers every float
    /// register) outside the loop, not at each iteration.
    pub fn for_range_out(
        &mut self,
        n: Value,
        results: &[cranelift_frontend::Variable],
        body: &mut dyn FnMut(&mut Self, Value) -> Result<(), JitError>,
    ) -> Result<(), JitError> {
        self.for_range_peeled(n, results, None, body)
    }

    /// [`Translator::for_range_out`], with the body emitted twice when
    /// there is an `interior`: once for the indices in `lo..hi`, with the
    /// tests the sources make on the index decided (`Translator::interior`),
    /// and once, as it is, for the others, at the edges. The iterations run
    /// in order, `0` to `n - 1`:
    ///
    /// ```text
    /// edge(i):  i == lo && lo < hi ? main(i) : (body; i + 1 < n ? edge(i + 1) : exit)
    /// main(i):  body decided; i + 1 < hi ? main(i + 1) : (hi < n ? edge(hi) : exit)
    /// ```
    fn for_range_peeled(
        &mut self,
        n: Value,
        results: &[cranelift_frontend::Variable],
        interior: Option<Interior>,
        body: &mut dyn FnMut(&mut Self, Value) -> Result<(), JitError>,
    ) -> Result<(), JitError> {
        let index = self.b.declare_var(types::I64);
        let zero = self.iconst(0);
        self.b.def_var(index, zero);
        let (block, exit) = (self.b.create_block(), self.b.create_block());
        let outs =
            |t: &mut Self| -> Vec<Value> { results.iter().map(|v| t.b.use_var(*v)).collect() };
        let args =
            |vs: &[Value]| -> Vec<BlockArg> { vs.iter().map(|v| BlockArg::Value(*v)).collect() };
        // Rotated: one test before the first iteration, then one at the
        // end of each, branching back.
        let any = self.b.ins().icmp(IntCC::SignedLessThan, zero, n);
        let before = outs(self);
        let branch = self.b.ins().brif(any, block, &[], exit, &args(&before));
        self.loops.push(crate::lower::LoopEntry {
            first: block,
            branch,
            copies: Default::default(),
        });
        // The loop's own copy of its bound (see `LoopEntry`).
        let n = self.entry_copy(n);
        self.b.switch_to_block(block);
        let i = self.b.use_var(index);
        if let Some(interior) = &interior {
            let r = self.peeled(interior, index, n, block, exit, results, body);
            if r.is_err() {
                self.loops.pop();
            }
            r?;
        }
        let r = self.repeated("a loop's step", |t| body(t, i));
        self.loops.pop();
        r?;
        let next = self.b.ins().iadd_imm_s(i, 1);
        self.b.def_var(index, next);
        let more = self.b.ins().icmp(IntCC::SignedLessThan, next, n);
        let outs = outs(self);
        self.b.ins().brif(more, block, &[], exit, &args(&outs));
        self.b.switch_to_block(exit);
        // Every parameter before any instruction in the block.
        let params: Vec<Value> = outs
            .iter()
            .map(|x| {
                let ty = self.b.func.dfg.value_type(*x);
                self.b.append_block_param(exit, ty)
            })
            .collect();
        for (v, p) in results.iter().zip(params) {
            let ty = self.b.func.dfg.value_type(p);
            let p = if ty == types::F64 { self.pin(p) } else { p };
            self.b.def_var(*v, p);
        }
        Ok(())
    }

    /// The interior of a peeled loop (see [`Translator::for_range_peeled`]),
    /// emitted from the edge block `edge` (the current block, where the
    /// index is `i`): the test for entering it, and its own rotated loop.
    /// Leaves the builder in the block of the edge iterations' body.
    #[allow(clippy::too_many_arguments)]
    fn peeled(
        &mut self,
        interior: &Interior,
        index: cranelift_frontend::Variable,
        n: Value,
        edge: cranelift_codegen::ir::Block,
        exit: cranelift_codegen::ir::Block,
        results: &[cranelift_frontend::Variable],
        body: &mut dyn FnMut(&mut Self, Value) -> Result<(), JitError>,
    ) -> Result<(), JitError> {
        let (main, after, edge_body) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        let (lo, hi) = (self.entry_copy(interior.lo), self.entry_copy(interior.hi));
        let enter = self.entry_copy(interior.enter);
        let i = self.b.use_var(index);
        let at_lo = self.b.ins().icmp(IntCC::Equal, i, lo);
        let go = self.b.ins().band(at_lo, enter);
        self.b.ins().brif(go, main, &[], edge_body, &[]);
        self.b.switch_to_block(main);
        let j = self.b.use_var(index);
        for (node, side) in &interior.sides {
            self.interior.insert(*node, *side);
        }
        let r = self.repeated("a loop's step", |t| body(t, j));
        for (node, _) in &interior.sides {
            self.interior.remove(node);
        }
        r?;
        let next = self.b.ins().iadd_imm_s(j, 1);
        self.b.def_var(index, next);
        let more = self.b.ins().icmp(IntCC::SignedLessThan, next, hi);
        self.b.ins().brif(more, main, &[], after, &[]);
        self.b.switch_to_block(after);
        let rest = self.b.ins().icmp(IntCC::SignedLessThan, hi, n);
        let outs: Vec<BlockArg> = results
            .iter()
            .map(|v| BlockArg::Value(self.b.use_var(*v)))
            .collect();
        self.b.ins().brif(rest, edge, &[], exit, &outs);
        self.b.switch_to_block(edge_body);
        Ok(())
    }

    /// The interior of a loop over `n` elements reading `sources` (element
    /// `i` at iteration `i`, or at iteration `n - 1 - i` if `reversed`):
    /// the iterations where every `concat` with a part of constant length
    /// reads the same part, and every one-hot source its zero — all but a
    /// few at the start and the end. `None` if no source tests the index
    /// so. The bounds are computed here, before the loop.
    fn interior(&mut self, sources: &[&Source<'_>], n: Value, reversed: bool) -> Option<Interior> {
        // A short loop is not worth a second copy of its body.
        if self.constant(n).is_some_and(|n| n <= MIN_PEELED_LEN) {
            return None;
        }
        let mut found = Vec::new();
        for s in sources {
            boundaries(s, &mut Vec::new(), &mut found, self);
        }
        if found.is_empty() {
            return None;
        }
        let zero = self.iconst(0);
        let (mut lo, mut hi) = (zero, n);
        let mut sides = Vec::with_capacity(found.len());
        for b in found {
            // The decision changes at element `split - offset` of the loop.
            let mut at = b.split;
            for (x, add) in b.offset {
                at = if add {
                    self.b.ins().isub(at, x)
                } else {
                    self.b.ins().iadd(at, x)
                };
            }
            if b.starts {
                lo = self.b.ins().smax(lo, at);
            } else {
                hi = self.b.ins().smin(hi, at);
            }
            sides.push((b.node, b.side));
        }
        // 0 <= lo <= hi <= n.
        let lo = self.b.ins().smin(lo, n);
        let hi = self.b.ins().smax(hi, lo);
        let (lo, hi) = if reversed {
            (self.b.ins().isub(n, hi), self.b.ins().isub(n, lo))
        } else {
            (lo, hi)
        };
        let enter = self.b.ins().icmp(IntCC::SignedLessThan, lo, hi);
        Some(Interior {
            lo,
            hi,
            enter,
            sides,
        })
    }

    /// Address of element `i` of an array whose elements take `stride` bytes.
    fn element_addr(&mut self, ptr: Value, i: Value, stride: Value) -> Value {
        let offset = self.b.ins().imul(i, stride);
        self.b.ins().iadd(ptr, offset)
    }

    /// Fails with `status` unless `a` and `b` have the same lengths.
    pub(crate) fn check_same_shape(
        &mut self,
        a: &Shape,
        b: &Shape,
        status: Status,
    ) -> Result<(), JitError> {
        match (a, b) {
            (Shape::Real, Shape::Real) => Ok(()),
            (Shape::Tuple(xs), Shape::Tuple(ys)) if xs.len() == ys.len() => {
                for (x, y) in xs.iter().zip(ys) {
                    self.check_same_shape(x, y, status)?;
                }
                Ok(())
            }
            (Shape::Array(n, x), Shape::Array(m, y)) => {
                if n != m {
                    let same = self.b.ins().icmp(IntCC::Equal, *n, *m);
                    self.check(same, status, *n);
                }
                self.check_same_shape(x, y, status)
            }
            _ => Err(JitError::Internal("layouts of different types".into())),
        }
    }

    /// Stores `v` at `addr` as an element of layout `shape` (checking that
    /// `v`'s arrays have the lengths of `shape`).
    pub fn store(&mut self, addr: Value, v: &Values, shape: &Shape) -> Result<(), JitError> {
        match (v, shape) {
            (Values::Real(x), Shape::Real) => {
                self.b.ins().store(mem(), *x, addr, 0);
            }
            (Values::Tuple(vs), Shape::Tuple(ss)) if vs.len() == ss.len() => {
                let mut at = addr;
                for (v, s) in vs.iter().zip(ss) {
                    self.store(at, v, s)?;
                    let k = unchecked_bytes(self.b, s);
                    at = self.b.ins().iadd(at, k);
                }
            }
            (Values::Array(a), Shape::Array(..)) => {
                let own = Shape::Array(a.len, Box::new(a.elem.clone()));
                self.check_same_shape(&own, shape, Status::ShapeMismatch)?;
                let bytes = unchecked_bytes(self.b, &own);
                // An array stored where it already is (a row an in-place
                // step leaves unchanged) is not copied onto itself.
                let elsewhere = self.b.ins().icmp(IntCC::NotEqual, addr, a.ptr);
                let (copy, done) = (self.b.create_block(), self.b.create_block());
                self.b.ins().brif(elsewhere, copy, &[], done, &[]);
                self.b.switch_to_block(copy);
                self.region(|t| t.copy(addr, a.ptr, bytes))?;
                self.b.ins().jump(done, &[]);
                self.b.switch_to_block(done);
            }
            _ => {
                return Err(JitError::Internal(
                    "storing a value of another layout".into(),
                ))
            }
        }
        Ok(())
    }

    /// Copies `bytes` (a multiple of 8) from `src` to `dst`, front to back:
    /// 32 bytes an iteration (two 16-byte vector moves, which need no
    /// alignment beyond the reals' 8 bytes), then the last 8, 16 or 24
    /// bytes a real at a time. As a copy of one real at a time, it is
    /// correct when the regions are the same or `dst` is below `src`.
    fn copy(&mut self, dst: Value, src: Value, bytes: Value) -> Result<(), JitError> {
        // Vector moves of reals: no trap, no alignment promised.
        let unaligned = MemFlagsData::new().with_notrap();
        let blocks = self.b.ins().ushr_imm_s(bytes, 5);
        self.for_range(blocks, &mut |t, i| {
            let offset = t.b.ins().ishl_imm_s(i, 5);
            let from = t.b.ins().iadd(src, offset);
            let to = t.b.ins().iadd(dst, offset);
            let x = t.b.ins().load(types::F64X2, unaligned, from, 0);
            let y = t.b.ins().load(types::F64X2, unaligned, from, 16);
            t.b.ins().store(unaligned, x, to, 0);
            t.b.ins().store(unaligned, y, to, 16);
            Ok(())
        })?;
        let done = self.b.ins().band_imm_s(bytes, !31);
        let rest = self.b.ins().isub(bytes, done);
        let words = self.b.ins().ushr_imm_s(rest, 3);
        let (src, dst) = (self.b.ins().iadd(src, done), self.b.ins().iadd(dst, done));
        self.for_range(words, &mut |t, i| {
            let offset = t.b.ins().ishl_imm_s(i, 3);
            let from = t.b.ins().iadd(src, offset);
            let to = t.b.ins().iadd(dst, offset);
            let x = t.b.ins().load(types::F64, mem(), from, 0);
            t.b.ins().store(mem(), x, to, 0);
            Ok(())
        })
    }

    /// New workspace memory for `n` elements of `shape`: (pointer, stride).
    /// `counted` is its size in bytes as a formula in the sizes.
    pub(crate) fn alloc_array(
        &mut self,
        n: Value,
        shape: &Shape,
        counted: Bytes,
    ) -> Result<(Value, Value), JitError> {
        let stride = self.bytes_deferred(shape)?;
        let total = self.mul_deferred(n, stride);
        self.flush_overflow();
        Ok((self.alloc(total, counted), stride))
    }

    /// The count `e` (of `iota`, `replicate`) as a size expression.
    fn count_size(&mut self, e: &Expr) -> Result<Size, JitError> {
        self.typer
            .size(e)
            .map_err(|err| JitError::Internal(format!("a count: {err}")))
    }

    /// Element `k` (negative counts from the end), bounds checked.
    pub fn index(&mut self, a: &ArrayVal, k: i64) -> Result<Values, JitError> {
        let i = self.checked_index(a.len, k);
        let stride = unchecked_bytes(self.b, &a.elem);
        let addr = self.element_addr(a.ptr, i, stride);
        Ok(load(self.b, addr, &a.elem))
    }

    /// Element `k` (from the end if negative) of `e`, an array whose
    /// elements a loop would compute where it reads them and which cannot
    /// fail ([`fused_elements_cannot_fail`]): only that element is
    /// computed, after the bounds check [`Translator::index`] makes.
    pub fn index_source(&mut self, e: &Expr, k: i64) -> Result<Values, JitError> {
        let s = self.source(e)?;
        let i = self.checked_index(s.len(), k);
        self.element(&s, i)
    }

    /// The position of element `k` (negative counts from the end) of an
    /// array of length `len`, checked to be in bounds.
    fn checked_index(&mut self, len: Value, k: i64) -> Value {
        let i = if k < 0 {
            self.b.ins().iadd_imm_s(len, k)
        } else {
            self.iconst(k)
        };
        let zero = self.iconst(0);
        let above = self.b.ins().icmp(IntCC::SignedGreaterThanOrEqual, i, zero);
        let below = self.b.ins().icmp(IntCC::SignedLessThan, i, len);
        let ok = self.b.ins().band(above, below);
        self.check(ok, Status::IndexOutOfBounds, i);
        i
    }

    /// `[e1, ..., ek]`.
    pub fn array_literal(&mut self, e: &Expr, es: &[Expr]) -> Result<Values, JitError> {
        let vs = es
            .iter()
            .map(|x| self.lower(x))
            .collect::<Result<Vec<_>, _>>()?;
        let shape = match vs.first() {
            Some(v) => v.shape(),
            None => match self.type_of(e)? {
                Type::Array(elem, _) => Some(self.shape_of_type(&elem, false)?),
                _ => None,
            },
        };
        let Some(shape) = shape else {
            return unsupported("an array of conditions");
        };
        let n = self.iconst(vs.len() as i64);
        let counted = match vs.first() {
            Some(_) => {
                let ty = self.type_of(e)?;
                self.counts().bytes(&ty)
            }
            None => Bytes::Const(0),
        };
        let (ptr, stride) = self.alloc_array(n, &shape, counted)?;
        let mut at = ptr;
        for v in &vs {
            self.store(at, v, &shape)?;
            at = self.b.ins().iadd(at, stride);
        }
        Ok(Values::Array(ArrayVal {
            ptr,
            len: n,
            elem: shape,
        }))
    }

    /// A real used as a count: a whole number in `0..=MAX_LEN`.
    fn count(&mut self, e: &Expr) -> Result<Value, JitError> {
        // A constant count is checked here, once.
        if let ExprKind::Const(c) = e.kind {
            if c >= 0.0 && c == c.floor() && c <= crate::abi::MAX_LEN as f64 {
                return Ok(self.iconst(c as i64));
            }
        }
        let x = self.real(e)?;
        let whole = self.b.ins().floor(x);
        let is_whole = self.b.ins().fcmp(FloatCC::Equal, whole, x);
        let zero = self.b.ins().f64const(0.0);
        let limit = self.b.ins().f64const(crate::abi::MAX_LEN as f64);
        let above = self.b.ins().fcmp(FloatCC::GreaterThanOrEqual, x, zero);
        let below = self.b.ins().fcmp(FloatCC::LessThanOrEqual, x, limit);
        let ok = self.b.ins().band(is_whole, above);
        let ok = self.b.ins().band(ok, below);
        let info = self.iconst(-1);
        self.check(ok, Status::BadSize, info);
        Ok(self.b.ins().fcvt_to_sint(types::I64, x))
    }

    /// The builtins.
    pub fn builtin(&mut self, bi: Builtin, args: &[Expr]) -> Result<Values, JitError> {
        match bi {
            Builtin::Len => {
                let a = self.array(&args[0])?;
                Ok(Values::Real(self.b.ins().fcvt_from_sint(types::F64, a.len)))
            }
            Builtin::Iota => {
                let n = self.count(&args[0])?;
                let size = self.count_size(&args[0])?;
                let counted = self.counts().array(&size, &Type::Real);
                let (ptr, _) = self.alloc_array(n, &Shape::Real, counted)?;
                self.for_range(n, &mut |t, i| {
                    let x = t.b.ins().fcvt_from_sint(types::F64, i);
                    let offset = t.b.ins().ishl_imm_s(i, 3);
                    let at = t.b.ins().iadd(ptr, offset);
                    t.b.ins().store(mem(), x, at, 0);
                    Ok(())
                })?;
                Ok(Values::Array(ArrayVal {
                    ptr,
                    len: n,
                    elem: Shape::Real,
                }))
            }
            Builtin::Replicate => {
                let n = self.count(&args[0])?;
                let v = self.lower(&args[1])?;
                let Some(shape) = v.shape() else {
                    return unsupported("replicate of a condition");
                };
                let size = self.count_size(&args[0])?;
                let elem = self.type_of(&args[1])?;
                let counted = self.counts().array(&size, &elem);
                let (ptr, stride) = self.alloc_array(n, &shape, counted)?;
                self.for_range(n, &mut |t, i| {
                    let at = t.element_addr(ptr, i, stride);
                    t.store(at, &v, &shape)
                })?;
                Ok(Values::Array(ArrayVal {
                    ptr,
                    len: n,
                    elem: shape,
                }))
            }
            Builtin::Concat => self.concat(args),
            Builtin::Take | Builtin::Drop => {
                let k = self.count(&args[0])?;
                let a = self.array(&args[1])?;
                let fits = self.b.ins().icmp(IntCC::SignedLessThanOrEqual, k, a.len);
                self.check(fits, Status::TakeDropOutOfRange, k);
                Ok(Values::Array(if bi == Builtin::Take {
                    ArrayVal { len: k, ..a }
                } else {
                    let stride = unchecked_bytes(self.b, &a.elem);
                    let ptr = self.element_addr(a.ptr, k, stride);
                    let len = self.b.ins().isub(a.len, k);
                    ArrayVal { ptr, len, ..a }
                }))
            }
            Builtin::Shift1L | Builtin::Shift1R => {
                // An empty array stays empty.
                let a = self.array(&args[0])?;
                let nonempty = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, a.len, 0);
                let dropped = self.b.ins().uextend(types::I64, nonempty);
                let len = self.b.ins().isub(a.len, dropped);
                let ptr = if bi == Builtin::Shift1L {
                    let stride = unchecked_bytes(self.b, &a.elem);
                    self.element_addr(a.ptr, dropped, stride)
                } else {
                    a.ptr
                };
                Ok(Values::Array(ArrayVal { ptr, len, ..a }))
            }
        }
    }

    /// The lambda of an array operation.
    pub(crate) fn lambda<'e>(
        &self,
        f: &'e Expr,
        arity: usize,
    ) -> Result<(&'e [Param], &'e Expr), JitError> {
        match &f.kind {
            ExprKind::Lambda(ps, body) if ps.len() == arity => Ok((ps, body)),
            _ => unsupported("an array operation whose function is not a lambda"),
        }
    }

    /// Binds the lambda's parameters and lowers its body.
    pub(crate) fn apply(
        &mut self,
        params: &[Param],
        body: &Expr,
        args: Vec<Values>,
        tys: &[Type],
    ) -> Result<Values, JitError> {
        for ((p, v), t) in params.iter().zip(args).zip(tys) {
            self.bind(&p.pat, v, t)?;
        }
        self.lower(body)
    }

    /// `map`, `map2`, `reduce`, `foldl`, `scanl`, `scanr`.
    pub fn array_op(&mut self, op: ArrayOp, f: &Expr, args: &[Expr]) -> Result<Values, JitError> {
        if let ArrayOp::Revfold(schedule) = op {
            return self.revfold(schedule, f, args);
        }
        let (params, body) = self.lambda(f, op.fn_arity())?;
        let elem_ty = |t: Type| match t {
            Type::Array(elem, _) => Ok(*elem),
            _ => Err(JitError::Internal("expected an array type".into())),
        };
        match op {
            ArrayOp::Map | ArrayOp::Map2 => self.map_into(params, body, args, None),
            ArrayOp::Revfold(_) => unreachable!("lowered above"),
            ArrayOp::Reduce | ArrayOp::Foldl(_) | ArrayOp::Scanl | ArrayOp::Scanr => {
                let acc_ty = self.type_of(&args[0])?;
                let a_ty = self.type_of(&args[1])?;
                let size = match &a_ty {
                    Type::Array(_, n) => n.clone(),
                    _ => Size::lit(0),
                };
                let tys = [acc_ty, elem_ty(a_ty)?];
                let z = self.lower(&args[0])?;
                let a = self.source_read(&args[1], op != ArrayOp::Scanr)?;
                let from_the_end = op == ArrayOp::Scanr;
                self.fold(op, params, body, z, a, &tys, &size, from_the_end)
            }
        }
    }

    /// `map`/`map2 (params. body) args`, written to fresh workspace memory
    /// or, with `dest` (an address and the shape of an array there), into
    /// `dest` after checking that the lengths agree.
    fn map_into(
        &mut self,
        params: &[Param],
        body: &Expr,
        args: &[Expr],
        dest: Option<(Value, &Shape)>,
    ) -> Result<Values, JitError> {
        let (array, _) = self.map_folding(params, body, args, dest, &mut |_, _| Ok(Vec::new()))?;
        Ok(array)
    }

    /// [`Translator::map_into`], with the folds `folds` makes from the
    /// map's [`Mapping`] computed in the map's loop: the array and the
    /// folds' results.
    #[allow(clippy::type_complexity)]
    fn map_folding<'e>(
        &mut self,
        params: &[Param],
        body: &Expr,
        args: &[Expr],
        dest: Option<(Value, &Shape)>,
        folds: &mut dyn FnMut(&mut Self, &Mapping<'_>) -> Result<Vec<Fold<'e>>, JitError>,
    ) -> Result<(Values, Vec<Values>), JitError> {
        let m = self.mapping(params, body, args)?;
        let (ptr, stride) = match dest {
            Some((at, want)) => {
                let own = Shape::Array(m.len, Box::new(m.shape.clone()));
                self.check_same_shape(&own, want, Status::ShapeMismatch)?;
                (at, unchecked_bytes(self.b, &m.shape))
            }
            None => {
                let counted = self.counts().array(&m.size, &m.out_ty);
                self.alloc_array(m.len, &m.shape, counted)?
            }
        };
        let folds = folds(self, &m)?;
        self.write_mapping_with(&m, ptr, stride, &folds)?;
        let results = self.fold_results(&folds);
        let array = Values::Array(ArrayVal {
            ptr,
            len: m.len,
            elem: m.shape,
        });
        Ok((array, results))
    }

    /// [`Translator::map_into`] at `dest`, with the folds of `waiting` whose
    /// array the map's loop reads in full, in order, computed in that loop:
    /// their parts and values.
    fn map_into_riding(
        &mut self,
        params: &[Param],
        body: &Expr,
        args: &[Expr],
        dest: (Value, &Shape),
        waiting: &[TupleRider<'_>],
    ) -> Result<Vec<(usize, Values)>, JitError> {
        let mut parts = Vec::new();
        let (_, results) = self.map_folding(params, body, args, Some(dest), &mut |t, m| {
            let mut folds = Vec::new();
            for r in waiting {
                let Some(Values::Array(v)) = t.env.get(r.array).cloned() else {
                    continue;
                };
                let Some(read) = m.sources.iter().find_map(|s| reads_all_of(s, v.ptr, t)) else {
                    continue;
                };
                let tys = [r.ty.clone(), r.elem.clone()];
                let (a, stride) = read;
                folds.push(t.fold_from(r.params, r.body, r.start, tys, Reads::Array(a, stride))?);
                parts.push(r.part);
            }
            Ok(folds)
        })?;
        Ok(parts.into_iter().zip(results).collect())
    }

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

    /// The values of `folds` after their loop.
    fn fold_results(&mut self, folds: &[Fold<'_>]) -> Vec<Values> {
        folds
            .iter()
            .map(|f| match &f.in_place {
                Some(c) => self.get(c),
                None => {
                    let current: Vec<Value> = f.vars.iter().map(|v| self.b.use_var(*v)).collect();
                    f.start.rebuild(&mut current.into_iter())
                }
            })
            .collect()
    }

    /// The parts of a tuple that are folds of reals over an array variable
    /// (`reduce`/`foldl` without a schedule, whose function's body and
    /// start cannot fail): deferred, they may ride along a `map` among the
    /// parts that reads their array (prod's gradient: the product rides
    /// along the loop of the `map2` that reads the prefix products of the
    /// same array). A fold that cannot fail gives its value whenever it is
    /// computed, and the loop gives it the same elements in the same
    /// order: the result is bit for bit the same.
    fn riding_folds<'e>(&mut self, es: &'e [Expr]) -> Result<Vec<TupleRider<'e>>, JitError> {
        let maps = es
            .iter()
            .filter(|e| matches!(e.kind, ExprKind::ArrayOp(ArrayOp::Map | ArrayOp::Map2, ..)))
            .count();
        let mut out = Vec::new();
        if maps == 0 {
            return Ok(out);
        }
        for (part, e) in es.iter().enumerate() {
            let ExprKind::ArrayOp(ArrayOp::Reduce | ArrayOp::Foldl(None), f, args) = &e.kind else {
                continue;
            };
            if self.computed.contains_key(&(e as *const Expr)) {
                // Computed already, in the loop of an earlier map.
                continue;
            }
            let ([start, array], ExprKind::Lambda(params, body)) = (args.as_slice(), &f.kind)
            else {
                continue;
            };
            let ExprKind::Var(name) = &array.kind else {
                continue;
            };
            if params.len() != 2 || !cannot_fail(body) || !cannot_fail(start) {
                continue;
            }
            let ty = self.type_of(start)?;
            let Type::Array(elem, _) = self.type_of(array)? else {
                continue;
            };
            if !matches!(self.shape_of_type(&ty, false), Ok(s) if s.reals_only()) {
                continue;
            }
            out.push(TupleRider {
                part,
                array: name,
                params,
                body,
                start,
                ty,
                elem: *elem,
            });
        }
        Ok(out)
    }

    /// A `map`/`map2` up to its loop: its sources (their arrays computed),
    /// its length and the layout of its elements.
    fn mapping<'e>(
        &mut self,
        params: &'e [Param],
        body: &'e Expr,
        args: &'e [Expr],
    ) -> Result<Mapping<'e>, JitError> {
        // `write_mapping` reads its sources in order.
        let (tys, sources, len, size) = self.sources(args, true)?;
        let mark = self.typer.mark();
        for (p, t) in params.iter().zip(&tys) {
            bind_types(&mut self.typer, &p.pat, t);
        }
        let out_ty = self.type_of(body)?;
        self.typer.pop_to(mark);
        let shape = self.shape_of_type(&out_ty, false)?;
        Ok(Mapping {
            params,
            body,
            tys,
            out_ty,
            sources,
            len,
            size,
            shape,
        })
    }

    /// A `map`/`map2` stored in fresh workspace memory, with folds over
    /// its result computed in its loop (see `horizontal.rs`): the array
    /// and the folds' results.
    pub(crate) fn map_with_folds(
        &mut self,
        params: &[Param],
        body: &Expr,
        args: &[Expr],
        riders: &[crate::horizontal::Rider<'_>],
    ) -> Result<(Values, Vec<Values>), JitError> {
        self.map_folding(params, body, args, None, &mut |t, m| {
            riders
                .iter()
                .map(|r| {
                    let Some((a, own_first)) = r.zip else {
                        let tys = [r.ty.clone(), m.out_ty.clone()];
                        return t.fold_from(r.params, r.body, r.start, tys, Reads::Own);
                    };
                    // `A`, an array of the map, has the map's length.
                    let Some(Values::Array(av)) = t.env.get(a).cloned() else {
                        return Err(JitError::Internal(format!("the array `{a}`")));
                    };
                    let Type::Array(a_ty, _) = t.type_of(&Expr::synth(ExprKind::Var(a.clone())))?
                    else {
                        return Err(JitError::Internal(format!("the type of `{a}`")));
                    };
                    let a_ty = *a_ty;
                    let pair = if own_first {
                        vec![m.out_ty.clone(), a_ty]
                    } else {
                        vec![a_ty, m.out_ty.clone()]
                    };
                    let tys = [r.ty.clone(), Type::Tuple(pair)];
                    let stride = unchecked_bytes(t.b, &av.elem);
                    let reads = Reads::Zip(av, stride, own_first);
                    t.fold_from(r.params, r.body, r.start, tys, reads)
                })
                .collect()
        })
    }

    /// The loop of a [`Mapping`], writing element `i` at `ptr + i·stride`.
    fn write_mapping(
        &mut self,
        m: &Mapping<'_>,
        ptr: Value,
        stride: Value,
    ) -> Result<(), JitError> {
        self.write_mapping_with(m, ptr, stride, &[])
    }

    /// [`Translator::write_mapping`], also updating `folds` with each
    /// element written.
    fn write_mapping_with(
        &mut self,
        m: &Mapping<'_>,
        ptr: Value,
        stride: Value,
        folds: &[Fold<'_>],
    ) -> Result<(), JitError> {
        // (An accumulator updated in place keeps its view.)
        let results: Vec<cranelift_frontend::Variable> = folds
            .iter()
            .filter(|f| f.in_place.is_none())
            .flat_map(|f| f.vars.iter().copied())
            .collect();
        let sources: Vec<&Source<'_>> = m.sources.iter().collect();
        let interior = self.interior(&sources, m.len, false);
        self.for_range_peeled(m.len, &results, interior, &mut |t, i| {
            // The element is written into the result (its arrays built
            // there directly where the body ends in a map): the body's
            // temporaries die with the iteration.
            let mark = t.mark();
            let mut xs = Vec::new();
            for s in &m.sources {
                xs.push(t.element(s, i)?);
            }
            for ((p, v), ty) in m.params.iter().zip(xs).zip(&m.tys) {
                t.bind(&p.pat, v, ty)?;
            }
            let to = t.entry_copy(ptr);
            let at = t.element_addr(to, i, stride);
            t.lower_into(m.body, at, &m.shape)?;
            if !folds.is_empty() {
                let x = folds
                    .iter()
                    .any(|f| !matches!(f.reads, Reads::Array(..)))
                    .then(|| load(t.b, at, &m.shape));
                for f in folds {
                    let mut other = |a: &ArrayVal, stride: Value| {
                        let ptr = t.entry_copy(a.ptr);
                        let at = t.element_addr(ptr, i, stride);
                        load(t.b, at, &a.elem)
                    };
                    let own = || x.clone().expect("loaded for the folds over the map");
                    let y = match &f.reads {
                        Reads::Array(a, stride) => other(a, *stride),
                        Reads::Own => own(),
                        Reads::Zip(a, stride, own_first) => {
                            let (p, q) = (own(), other(a, *stride));
                            Values::Tuple(if *own_first { vec![p, q] } else { vec![q, p] })
                        }
                    };
                    if let Some(c) = &f.in_place {
                        // The step rewrites the accumulator where it is.
                        let acc = t.get(c);
                        let Values::Array(current) = &acc else {
                            return Err(JitError::Internal("an in-place accumulator".into()));
                        };
                        let (to, shape) = (
                            current.ptr,
                            Shape::Array(current.len, Box::new(current.elem.clone())),
                        );
                        for ((p, v), ty) in f.params.iter().zip([acc.clone(), y]).zip(&f.tys) {
                            t.bind(&p.pat, v, ty)?;
                        }
                        t.lower_into(f.body, to, &shape)?;
                        continue;
                    }
                    let current: Vec<Value> = f.vars.iter().map(|v| t.b.use_var(*v)).collect();
                    let acc = f.start.rebuild(&mut current.into_iter());
                    let next = t.apply(f.params, f.body, vec![acc, y], &f.tys)?;
                    let next = next.to_vec();
                    if next.len() != f.vars.len() {
                        return Err(JitError::Internal("accumulator layout changes".into()));
                    }
                    for (var, v) in f.vars.iter().zip(next) {
                        t.b.def_var(*var, v);
                    }
                }
            }
            t.release(mark);
            Ok(())
        })
    }

    /// `concat(a, b)`: each part that is a `map`/`map2` writes its elements
    /// into the result directly; the others are copied.
    fn concat(&mut self, args: &[Expr]) -> Result<Values, JitError> {
        let mut parts = Vec::with_capacity(2);
        let mut counted = Vec::with_capacity(2);
        for e in &args[..2] {
            parts.push(match &e.kind {
                ExprKind::ArrayOp(op @ (ArrayOp::Map | ArrayOp::Map2), f, xs) => {
                    let (params, body) = self.lambda(f, op.fn_arity())?;
                    let m = self.mapping(params, body, xs)?;
                    counted.push(self.counts().array(&m.size, &m.out_ty));
                    Part::Mapped(m)
                }
                _ => {
                    let ty = self.type_of(e)?;
                    counted.push(self.counts().bytes(&ty));
                    Part::Array(self.array(e)?)
                }
            });
        }
        let (first, second) = (parts[0].len_shape(), parts[1].len_shape());
        self.check_same_shape(first.1, second.1, Status::LengthMismatch)?;
        let shape = first.1.clone();
        let n = self.b.ins().iadd(first.0, second.0);
        let (ptr, stride) = self.alloc_array(n, &shape, crate::workspace::sum(counted))?;
        let mut at = ptr;
        for part in &parts {
            let len = part.len_shape().0;
            match part {
                Part::Mapped(m) => self.write_mapping(m, at, stride)?,
                Part::Array(a) => {
                    let bytes = self.b.ins().imul(a.len, stride);
                    self.copy(at, a.ptr, bytes)?;
                }
            }
            let bytes = self.b.ins().imul(len, stride);
            at = self.b.ins().iadd(at, bytes);
        }
        Ok(Values::Array(ArrayVal {
            ptr,
            len: n,
            elem: shape,
        }))
    }

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
        dest: &crate::checkpoint::Dest,
    ) -> Result<Values, JitError> {
        use crate::checkpoint::Dest;
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
        dest: &crate::checkpoint::Dest,
    ) -> Result<Values, JitError> {
        let cond = match self.lower(c)? {
            Values::Bool(v) => v,
            _ => return Err(JitError::Internal("condition of `if`".into())),
        };
        if matches!(dest, crate::checkpoint::Dest::Value)
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
    fn branches(
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

    /// The elements an array operation reads: an array, or a `map`/`map2`
    /// written in place as its argument, whose elements are computed in the
    /// consumer's loop instead of being stored (loop fusion). A term written
    /// in place is used once, so nothing is computed twice; the order of the
    /// operations on reals is the same, so the results are bit for bit
    /// those of the unfused loops.
    fn source<'e>(&mut self, e: &'e Expr) -> Result<Source<'e>, JitError> {
        self.source_read(e, false)
    }

    /// [`Translator::source`], for a consumer that reads element `0`, then
    /// `1`, … up to the last, each once, if `in_order`: then a shift of a
    /// `scanl` of reals is computed in the consumer's loop too, its state
    /// carried from one element to the next (every state is computed, as
    /// it would be to store the scan).
    fn source_read<'e>(&mut self, e: &'e Expr, in_order: bool) -> Result<Source<'e>, JitError> {
        if let Some(s) = self.one_hot(e)? {
            return Ok(s);
        }
        if let ExprKind::ArrayOp(op @ (ArrayOp::Map | ArrayOp::Map2), f, args) = &e.kind {
            if let ExprKind::Lambda(params, body) = &f.kind {
                if params.len() == op.fn_arity() {
                    let (tys, inputs, len, _) = self.sources(args, in_order)?;
                    return Ok(Source::Mapped {
                        expr: e,
                        inputs,
                        params,
                        body,
                        tys,
                        len,
                    });
                }
            }
        }
        // `iota(n)[i]` is `i`: the range is not stored, so it takes no
        // workspace, whatever its length (a valid size: a whole number in
        // 0 ..= 2⁴⁰). So is a variable bound to one.
        if let Some(size) = self.range_size(e) {
            return Ok(Source::Iota(self.count(&size)?));
        }
        // `shift1L`/`shift1R` of a map whose elements cannot fail: the
        // consumer computes only the elements it reads (all but the first
        // or the last), so the one skipped must not hide an error.
        if let ExprKind::Builtin(bi @ (Builtin::Shift1L | Builtin::Shift1R), args) = &e.kind {
            if let [inner] = args.as_slice() {
                if fused_elements_cannot_fail(inner) {
                    let inner = self.source(inner)?;
                    let n = inner.len();
                    let nonempty = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, n, 0);
                    let dropped = self.b.ins().uextend(types::I64, nonempty);
                    let len = self.b.ins().isub(n, dropped);
                    let offset = (*bi == Builtin::Shift1L).then_some(dropped);
                    return Ok(Source::Shifted {
                        inner: Box::new(inner),
                        offset,
                        len,
                    });
                }
            }
        }
        // `shift1L (scanl f z A)` (the states after each element) or
        // `shift1R (scanl f z A)` (before each element), read in order:
        // the state is carried in variables through the consumer's loop.
        if let ExprKind::Builtin(bi @ (Builtin::Shift1L | Builtin::Shift1R), args) = &e.kind {
            if let [inner] = args.as_slice() {
                if let ExprKind::ArrayOp(ArrayOp::Scanl, f, scan_args) = &inner.kind {
                    if in_order {
                        if let Some(s) = self.scan_source(*bi == Builtin::Shift1R, f, scan_args)? {
                            return Ok(s);
                        }
                    }
                }
            }
        }
        // `take(k, S)` of a source whose elements cannot fail: its first
        // `k` elements, checked as a stored `take` is.
        if let ExprKind::Builtin(Builtin::Take, args) = &e.kind {
            if let [k, inner] = args.as_slice() {
                if fused_elements_cannot_fail(inner) {
                    let k = self.count(k)?;
                    let inner = self.source(inner)?;
                    let fits = self
                        .b
                        .ins()
                        .icmp(IntCC::SignedLessThanOrEqual, k, inner.len());
                    self.check(fits, Status::TakeDropOutOfRange, k);
                    return Ok(Source::Shifted {
                        inner: Box::new(inner),
                        offset: None,
                        len: k,
                    });
                }
            }
        }
        // `concat(A, B)` of reals: element `i` is `A[i]` below `len A`,
        // else `B[i - len A]`; each part is a source itself, so a map in it
        // is computed in the consumer's loop too. Both parts are built
        // before the loop, as they would be to store them; every element is
        // still computed once, in order.
        if let ExprKind::Builtin(Builtin::Concat, args) = &e.kind {
            if let ([first, second], Type::Array(elem, _)) = (args.as_slice(), self.type_of(e)?) {
                if *elem == Type::Real {
                    let first = self.source_read(first, in_order)?;
                    let second = self.source_read(second, in_order)?;
                    let split = first.len();
                    let len = self.b.ins().iadd(split, second.len());
                    return Ok(Source::Concat {
                        parts: Box::new((first, second)),
                        split,
                        len,
                    });
                }
            }
        }
        let a = self.array(e)?;
        let stride = unchecked_bytes(self.b, &a.elem);
        Ok(Source::Array(a, stride))
    }

    /// The size of `e` if it is an index range: `iota(n)`, or a variable
    /// bound to one.
    fn range_size(&self, e: &Expr) -> Option<Expr> {
        let range = match &e.kind {
            ExprKind::Var(x) => self.ranges.get(x)?,
            _ => e,
        };
        match &range.kind {
            ExprKind::Builtin(Builtin::Iota, args) => args.first().cloned(),
            _ => None,
        }
    }

    /// `map (p. if p == c then A else B) R` for an index range `R`, a
    /// whole constant `c >= 0` and reals `A` and `B` that do not mention
    /// `p` and cannot fail — the reverse of reading `x[c]` — as a
    /// [`Source::OneHot`]: `A` and `B` are computed once, before the loop,
    /// and the loop compares integers.
    fn one_hot<'e>(&mut self, e: &'e Expr) -> Result<Option<Source<'e>>, JitError> {
        let ExprKind::ArrayOp(ArrayOp::Map, f, args) = &e.kind else {
            return Ok(None);
        };
        let ExprKind::Lambda(params, body) = &f.kind else {
            return Ok(None);
        };
        let ([param], [range]) = (params.as_slice(), args.as_slice()) else {
            return Ok(None);
        };
        let (gradlift_lang::Pattern::Var(p, _), ExprKind::If(test, hit, miss)) =
            (&param.pat, &body.kind)
        else {
            return Ok(None);
        };
        let ExprKind::Prim(gradlift_lang::Prim::Eq, xs) = &test.kind else {
            return Ok(None);
        };
        let c = match (&xs[0].kind, &xs[1].kind) {
            (ExprKind::Var(x), ExprKind::Const(c)) | (ExprKind::Const(c), ExprKind::Var(x))
                if x == p =>
            {
                *c
            }
            _ => return Ok(None),
        };
        // Indices below 2^53 are exact reals.
        if !(c >= 0.0 && c == c.floor() && c < (1u64 << 53) as f64) {
            return Ok(None);
        }
        let sides = [hit.as_ref(), miss.as_ref()];
        if !sides.iter().all(|x| {
            cannot_fail(x) && mentions_of(x, p) == 0 && !matches!(x.kind, ExprKind::Tuple(_))
        }) {
            return Ok(None);
        }
        let Some(size) = self.range_size(range) else {
            return Ok(None);
        };
        let (Values::Real(hit), Values::Real(miss)) = (self.lower(hit)?, self.lower(miss)?) else {
            return Ok(None);
        };
        let len = self.count(&size)?;
        Ok(Some(Source::OneHot {
            at: c as i64,
            hit,
            miss,
            len,
        }))
    }

    /// The [`Source::Scan`] of `scanl f z A` when its state is reals (an
    /// array state would live in the consumer's per-element temporaries).
    fn scan_source<'e>(
        &mut self,
        before: bool,
        f: &'e Expr,
        args: &'e [Expr],
    ) -> Result<Option<Source<'e>>, JitError> {
        let (params, body) = self.lambda(f, 2)?;
        let acc_ty = self.type_of(&args[0])?;
        let Type::Array(elem, _) = self.type_of(&args[1])? else {
            return Err(JitError::Internal("expected an array type".into()));
        };
        let elem = *elem;
        if !matches!(self.shape_of_type(&acc_ty, false), Ok(s) if s.reals_only()) {
            return Ok(None);
        }
        let z = self.lower(&args[0])?;
        let input = self.source_read(&args[1], true)?;
        let vars = self.variables(&z);
        let len = input.len();
        Ok(Some(Source::Scan {
            state: z,
            vars,
            params,
            body,
            tys: [acc_ty, elem],
            input: Box::new(input),
            before,
            len,
        }))
    }

    /// The element types and sources of a `map`'s or `map2`'s arrays, and
    /// their common length.
    fn sources<'e>(
        &mut self,
        args: &'e [Expr],
        in_order: bool,
    ) -> Result<(Vec<Type>, Vec<Source<'e>>, Value, Size), JitError> {
        let mut tys = Vec::new();
        let mut sources = Vec::new();
        let mut size = None;
        for a in args {
            match self.type_of(a)? {
                Type::Array(elem, n) => {
                    tys.push(*elem);
                    size.get_or_insert(n);
                }
                _ => return Err(JitError::Internal("expected an array type".into())),
            }
            sources.push(self.source_read(a, in_order)?);
        }
        let n = self.same_lengths(&sources)?;
        let size = size.ok_or_else(|| JitError::Internal("a map of no array".into()))?;
        Ok((tys, sources, n, size))
    }

    /// The common length of the sources of a `map2` (checked), or of a
    /// `map`'s one source.
    fn same_lengths(&mut self, sources: &[Source<'_>]) -> Result<Value, JitError> {
        let n = sources[0].len();
        if let [_, second] = sources {
            let m = second.len();
            // Lengths that are one value (the same size expression) or
            // equal constants need no check.
            let known_equal = n == m
                || matches!((self.constant(n), self.constant(m)), (Some(x), Some(y)) if x == y);
            if !known_equal {
                let same = self.b.ins().icmp(IntCC::Equal, n, m);
                self.check(same, Status::LengthMismatch, m);
            }
        }
        Ok(n)
    }

    /// Element `i` of a source (`i` below its length).
    fn element(&mut self, s: &Source<'_>, i: Value) -> Result<Values, JitError> {
        match s {
            Source::Array(a, stride) => {
                let ptr = self.entry_copy(a.ptr);
                let at = self.element_addr(ptr, i, *stride);
                Ok(load(self.b, at, &a.elem))
            }
            Source::Mapped {
                expr,
                inputs,
                params,
                body,
                tys,
                ..
            } => {
                let mut xs = Vec::with_capacity(inputs.len());
                for s in inputs {
                    xs.push(self.element(s, i)?);
                }
                // `emit --stage clif` labels the fused map's instructions
                // with its term, inside the consumer's loop.
                self.labelled(
                    || crate::annotate::one_line(expr),
                    |t| t.apply(params, body, xs, tys),
                )
            }
            Source::Iota(_) => Ok(Values::Real(self.b.ins().fcvt_from_sint(types::F64, i))),
            Source::Shifted { inner, offset, .. } => {
                let i = match offset {
                    Some(k) => self.b.ins().iadd(i, *k),
                    None => i,
                };
                self.element(inner, i)
            }
            Source::Scan {
                state,
                vars,
                params,
                body,
                tys,
                input,
                before,
                ..
            } => {
                let current: Vec<Value> = vars.iter().map(|v| self.b.use_var(*v)).collect();
                let acc = state.rebuild(&mut current.into_iter());
                let x = self.element(input, i)?;
                let next = self.apply(params, body, vec![acc.clone(), x], tys)?;
                let flat = next.to_vec();
                if flat.len() != vars.len() {
                    return Err(JitError::Internal("a scan's state changes layout".into()));
                }
                for (var, v) in vars.iter().zip(flat) {
                    self.b.def_var(*var, v);
                }
                Ok(if *before { acc } else { next })
            }
            Source::OneHot { at, hit, miss, .. } => {
                let miss = self.entry_copy(*miss);
                if let Some(Side::Second) = self.interior.get(&(s as *const Source<'_> as usize)) {
                    return Ok(Values::Real(miss));
                }
                let hit = self.entry_copy(*hit);
                let is_at = self.b.ins().icmp_imm_s(IntCC::Equal, i, *at);
                Ok(Values::Real(self.b.ins().select(is_at, hit, miss)))
            }
            Source::Concat { parts, split, .. }
                if self
                    .interior
                    .contains_key(&(s as *const Source<'_> as usize)) =>
            {
                match self.interior[&(s as *const Source<'_> as usize)] {
                    Side::First => self.element(&parts.0, i),
                    Side::Second => {
                        let j = self.b.ins().isub(i, *split);
                        self.element(&parts.1, j)
                    }
                }
            }
            Source::Concat { parts, split, .. } => {
                let in_first = self.b.ins().icmp(IntCC::SignedLessThan, i, *split);
                let split = *split;
                self.branches(
                    in_first,
                    "parts of `concat` differ in layout",
                    &mut |t| t.element(&parts.0, i),
                    &mut |t| {
                        let j = t.b.ins().isub(i, split);
                        t.element(&parts.1, j)
                    },
                )
            }
        }
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

    /// The left folds and scans: the accumulator is loop-carried.
    #[allow(clippy::too_many_arguments)]
    fn fold(
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
fn builds_from(e: &Expr, row: &gradlift_lang::Name) -> bool {
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

/// How many times `e` mentions the variable `name`.
fn mentions_of(e: &Expr, name: &gradlift_lang::Name) -> usize {
    gradlift_lang::deep::guard(|| match &e.kind {
        ExprKind::Var(x) => usize::from(x == name),
        _ => e.children().into_iter().map(|c| mentions_of(c, name)).sum(),
    })
}

/// Pushes the types a pattern binds.
pub(crate) fn bind_types(
    typer: &mut gradlift_lang::types::Typer,
    pat: &gradlift_lang::Pattern,
    ty: &Type,
) {
    use gradlift_lang::Pattern;
    match (pat, ty) {
        (Pattern::Var(n, _), t) => typer.push(n.clone(), t.clone()),
        (Pattern::Tuple(ps, _), Type::Tuple(ts)) => {
            for (p, t) in ps.iter().zip(ts) {
                bind_types(typer, p, t)
            }
        }
        _ => {}
    }
}

/// A `map`/`map2` whose loop is yet to run (see [`Translator::mapping`]).
struct Mapping<'e> {
    params: &'e [Param],
    body: &'e Expr,
    tys: Vec<Type>,
    /// The type of an element of the result.
    out_ty: Type,
    sources: Vec<Source<'e>>,
    len: Value,
    /// The length as a size expression.
    size: Size,
    shape: Shape,
}

/// A fold computed in a map's loop: its function, the types of its
/// parameters, its start (the layout of its accumulator) and the
/// variables holding the accumulator.
pub(crate) struct Fold<'e> {
    params: &'e [Param],
    body: &'e Expr,
    tys: [Type; 2],
    start: Values,
    vars: Vec<cranelift_frontend::Variable>,
    /// What the fold reads at iteration `i`.
    reads: Reads,
    /// An accumulator that is one array its step rewrites element by
    /// element (see `in_place_step`): updated where it is, in its own
    /// buffer.
    in_place: Option<crate::checkpoint::Carried>,
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

/// A fold that is a part of a tuple, waiting to ride along the loop of a
/// `map` among the parts (see [`Translator::riding_folds`]).
struct TupleRider<'e> {
    part: usize,
    array: &'e gradlift_lang::Name,
    params: &'e [Param],
    body: &'e Expr,
    start: &'e Expr,
    ty: Type,
    elem: Type,
}

/// The array (and its stride) whose address is `ptr`, when the loop over
/// `s` reads its element `i` at iteration `i` for every `i`: `s` is that
/// array, or a map or a carried scan that reads it so.
fn reads_all_of(s: &Source<'_>, ptr: Value, t: &Translator<'_, '_>) -> Option<(ArrayVal, Value)> {
    match s {
        Source::Array(a, stride) => {
            let dfg = &t.b.func.dfg;
            (dfg.resolve_aliases(a.ptr) == dfg.resolve_aliases(ptr)).then(|| (a.clone(), *stride))
        }
        Source::Mapped { inputs, .. } => inputs.iter().find_map(|s| reads_all_of(s, ptr, t)),
        Source::Scan { input, .. } => reads_all_of(input, ptr, t),
        _ => None,
    }
}

/// A part of a `concat`.
enum Part<'e> {
    Mapped(Mapping<'e>),
    Array(ArrayVal),
}

impl Part<'_> {
    fn len_shape(&self) -> (Value, &Shape) {
        match self {
            Part::Mapped(m) => (m.len, &m.shape),
            Part::Array(a) => (a.len, &a.elem),
        }
    }
}

/// Where an array operation's elements come from (see
/// [`Translator::source`]).
enum Source<'e> {
    /// An array in memory and its element stride in bytes.
    Array(ArrayVal, Value),
    /// `map`/`map2 (params. body) inputs`, computed per element.
    Mapped {
        expr: &'e Expr,
        inputs: Vec<Source<'e>>,
        params: &'e [Param],
        body: &'e Expr,
        tys: Vec<Type>,
        len: Value,
    },
    /// `iota(n)`, of length `n`: element `i` is `i`.
    Iota(Value),
    /// `shift1L`/`shift1R`/`take` of a source computed in the loop: element
    /// `i` is the inner source's element `i + offset` (`offset` is 1 for a
    /// non-empty `shift1L`, absent for `shift1R` and `take`).
    Shifted {
        inner: Box<Source<'e>>,
        offset: Option<Value>,
        len: Value,
    },
    /// `shift1L`/`shift1R (scanl (params. body) z A)` read in order: the
    /// state (reals, in `vars`, laid out as `state`) is updated at each
    /// element; element `i` is the state after (`shift1L`) or before
    /// (`shift1R`, `before`) the step on `A[i]`.
    Scan {
        state: Values,
        vars: Vec<cranelift_frontend::Variable>,
        params: &'e [Param],
        body: &'e Expr,
        tys: [Type; 2],
        input: Box<Source<'e>>,
        before: bool,
        len: Value,
    },
    /// `concat(A, B)`: element `i` is `A[i]` for `i < split` (the length
    /// of `A`), else `B[i - split]`.
    Concat {
        parts: Box<(Source<'e>, Source<'e>)>,
        split: Value,
        len: Value,
    },
    /// `map (p. if p == at then hit else miss) iota(len)`, `hit` and
    /// `miss` reals computed before the loop: element `i` is `hit` if
    /// `i == at`, else `miss`.
    OneHot {
        at: i64,
        hit: Value,
        miss: Value,
        len: Value,
    },
}

/// The longest loop of a constant length that is not peeled.
const MIN_PEELED_LEN: i64 = 32;

/// One-hot sources whose `at` is below this are decided in the interior of
/// a peeled loop (those beyond are tested at every element): the edge runs
/// `at + 1` iterations.
const MAX_ONE_HOT_EDGE: i64 = 8;

/// Which way a test on the index goes in the interior of a peeled loop
/// (see [`Translator::for_range_peeled`]): a `concat` reads its first
/// part or its second; a one-hot source is its `miss` (`Second`).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Side {
    First,
    Second,
}

/// The interior `lo..hi` of a peeled loop's iterations (`enter` is
/// `lo < hi`) and the sides its sources' tests take there, by the
/// address of the source.
struct Interior {
    lo: Value,
    hi: Value,
    enter: Value,
    sides: Vec<(usize, Side)>,
}

/// A test a source makes on the index of the loop reading it: the
/// element `i` of the loop takes `side` for every `i >= split - offset`
/// (`starts`), or every `i < split - offset`; `offset` is a sum of values
/// added (`true`) or subtracted.
struct Boundary {
    node: usize,
    split: Value,
    offset: Vec<(Value, bool)>,
    starts: bool,
    side: Side,
}

/// The tests on the index that `s` makes and a peeled loop decides: those
/// of a `concat` one of whose parts has a constant length (the test
/// changes near the start of the loop, or near its end) and of one-hot
/// sources. `offset` is what is added to the loop's index to get `s`'s.
fn boundaries(
    s: &Source<'_>,
    offset: &mut Vec<(Value, bool)>,
    out: &mut Vec<Boundary>,
    t: &mut Translator<'_, '_>,
) {
    let node = s as *const Source<'_> as usize;
    match s {
        Source::Array(..) | Source::Iota(_) => {}
        Source::OneHot { at, .. } if *at >= MAX_ONE_HOT_EDGE => {}
        Source::Mapped { inputs, .. } => {
            for s in inputs {
                boundaries(s, offset, out, t);
            }
        }
        Source::Scan { input, .. } => boundaries(input, offset, out, t),
        Source::Shifted {
            inner, offset: k, ..
        } => {
            if let Some(k) = k {
                offset.push((*k, true));
            }
            boundaries(inner, offset, out, t);
            if k.is_some() {
                offset.pop();
            }
        }
        Source::Concat { parts, split, .. } => {
            let first = t.constant(parts.0.len()).is_some();
            let second = t.constant(parts.1.len()).is_some();
            if first != second {
                out.push(Boundary {
                    node,
                    split: *split,
                    offset: offset.clone(),
                    starts: first,
                    side: if first { Side::Second } else { Side::First },
                });
            }
            boundaries(&parts.0, offset, out, t);
            offset.push((*split, false));
            boundaries(&parts.1, offset, out, t);
            offset.pop();
        }
        Source::OneHot { at, .. } => {
            let split = t.iconst(*at + 1);
            out.push(Boundary {
                node,
                split,
                offset: offset.clone(),
                starts: true,
                side: Side::Second,
            });
        }
    }
}

impl Source<'_> {
    fn len(&self) -> Value {
        match self {
            Source::Array(a, _) => a.len,
            Source::Iota(n) | Source::OneHot { len: n, .. } => *n,
            Source::Mapped { len, .. }
            | Source::Shifted { len, .. }
            | Source::Concat { len, .. }
            | Source::Scan { len, .. } => *len,
        }
    }
}

/// Whether `e`, read by a loop through [`Translator::source`], has its
/// elements computed in that loop (an `iota`, a `map`/`map2`, a `concat`,
/// a shift or `take` of such) and none of them can fail: the bodies of
/// the maps involved only compute with reals (no indexing, no array
/// operation, no call). The arrays they read may be anything: those are
/// computed, and checked, before the loop. A loop that skips some
/// elements (a shift, a `take`) may then skip them without hiding an
/// error.
pub(crate) fn fused_elements_cannot_fail(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Builtin(Builtin::Iota, _) => true,
        ExprKind::ArrayOp(op @ (ArrayOp::Map | ArrayOp::Map2), f, args) => {
            let ExprKind::Lambda(params, body) = &f.kind else {
                return false;
            };
            params.len() == op.fn_arity() && cannot_fail(body) && args.iter().all(read_safely)
        }
        ExprKind::Builtin(Builtin::Concat, parts) => parts.iter().all(read_safely),
        ExprKind::Builtin(Builtin::Shift1L | Builtin::Shift1R, args) => {
            args.iter().all(read_safely)
        }
        ExprKind::Builtin(Builtin::Take, args) => args.get(1).is_some_and(read_safely),
        _ => false,
    }
}

/// Whether the elements of `e`, an array a fused source reads, cannot fail
/// as the loop reads them: stored before the loop (loads), or computed in
/// it by a source whose elements cannot fail.
fn read_safely(e: &Expr) -> bool {
    let fused = matches!(
        e.kind,
        ExprKind::ArrayOp(ArrayOp::Map | ArrayOp::Map2, ..)
            | ExprKind::Builtin(
                Builtin::Iota
                    | Builtin::Concat
                    | Builtin::Shift1L
                    | Builtin::Shift1R
                    | Builtin::Take,
                _
            )
    );
    !fused || fused_elements_cannot_fail(e)
}

/// The most nodes in a side of an `if` lowered to a `select`.
const MAX_SELECT_NODES: u32 = 6;

/// Whether `e` is at most [`MAX_SELECT_NODES`] constants, variables,
/// projections and primitives that are instructions (not library calls, nor
/// the inline sequences of `exp` and `tanh` with their own branches): cheap,
/// and it cannot fail.
fn cheap_branch(e: &Expr, nodes: &mut u32) -> bool {
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

/// Whether a value of type `t` is reals and conditions only (no arrays).
fn scalars_only(t: &Type) -> bool {
    match t {
        Type::Real | Type::Bool => true,
        Type::Tuple(ts) => ts.iter().all(scalars_only),
        _ => false,
    }
}

/// Whether evaluating `e` cannot end in an error: it is built from
/// constants, variables, primitives, `let`, tuples, projections and `if`.
pub(crate) fn cannot_fail(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Const(_) | ExprKind::Var(_) | ExprKind::PrimFn(_) => true,
        ExprKind::Prim(_, args) | ExprKind::Tuple(args) => args.iter().all(cannot_fail),
        ExprKind::Let { value, body, .. } => cannot_fail(value) && cannot_fail(body),
        ExprKind::Proj(x, _) => cannot_fail(x),
        ExprKind::If(c, a, b) => cannot_fail(c) && cannot_fail(a) && cannot_fail(b),
        _ => false,
    }
}
