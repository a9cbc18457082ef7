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
//!
//! ## Files
//!
//! `mod.rs` (loops, stores, copies, indexing, literals, dispatch),
//! `map.rs` (`map`, `map2`, the folds riding along them), `pairs.rs`
//! (loops of reals two elements at a time), `fold.rs`
//! (`reduce`, `foldl`, scans), `source.rs` (what a loop reads), `peel.rs`
//! (peeled loops), `place.rs` (lowering into a place, `select`s),
//! `builtins.rs`.
//!
//! ## The decisions this backend makes, and their contract
//!
//! The simplifier decides what is computed; these decide only *where*
//! (which loop, which buffer), never the order of the operations on reals,
//! so every one keeps native == interpreter bit for bit. Each reads the
//! term as the simplifier leaves it:
//!
//! | decision | where | when (the contract) |
//! | --- | --- | --- |
//! | a `map`/`map2` argument is computed in its consumer's loop (vertical fusion) | `source.rs` `source` | the term is written in place, so it has one use |
//! | a range, a shift or `take` of a fused array, a `concat` of reals, a shifted `scanl` of reals, a one-hot map are computed where read | `source.rs` `source_read` | their elements cannot fail (`fused_elements_cannot_fail`), so the ones skipped hide no error; a carried scan is read in order |
//! | a stored map computes the folds over it later in its `let` chain (horizontal fusion) | chosen in `horizontal.rs`, run by `map.rs` | the folds cannot fail and read nothing bound after the map |
//! | a fold of the result rides along a map of the result | `map.rs` `riding_folds` | the map's loop reads the fold's array in full, in order |
//! | a `reduce` of reals by `(+)`, `(*)`, `max`, `min` runs in lanes | `fold.rs` `reduce_in_lanes` | always: the order is `gradlift_lang::reduce_order`'s, which the interpreter follows too; such a reduce never rides along a map (`horizontal::in_lanes`) |
//! | a `map`/`map2` of reals, or a `reduce` in lanes, computes two elements at once in an `f64x2` | `pairs.rs` | it reads pair sources (arrays of reals, ranges, one-hots, maps written in place over them, shifts, `take`) and computes its element by a pair term (primitives on reals, comparisons, connectives, integer `+ - *`, `let`, `if`; nothing that can fail: `pairs.rs`). Each lane has the scalar bits (`prims::lower_prim_pair`), and a reduce keeps `reduce_order`'s lanes |
//! | a loop in pairs is a kernel run in chunks, on the thread pool from eight chunks on | `pairs.rs` `write_mapping_in_pairs`, `fold.rs` `reduce_in_lanes`, `split.rs` | `may_split`: not inside another loop, the code runs in this process with a pool of more than one thread; a map with no fold riding along and not of a constant length below `PARALLEL_MIN`, or a reduce in lanes of a pair source not of a constant length of one chunk. The chunks are `reduce_order`'s, fixed by the length |
//! | a fold's array accumulator is updated in place | `fold.rs` `in_place_step` | the step's map reads the accumulator as its array and nothing else does |
//! | a term is lowered into its destination (a result row, a buffer, the output) | `place.rs` | it ends, through `let`s, tuples and `if`s, in what builds the destination |
//! | an `if` is both sides and a `select` | `place.rs` `cheap_branch` | both sides are at most `MAX_SELECT_NODES` (6) nodes of primitives the table marks `cheap`, which cannot fail |
//! | a loop is peeled | `peel.rs` | a source tests the index with an answer fixed but for a few iterations at an end; not for loops of constant length up to `MIN_PEELED_LEN` (32); one-hots from index `MAX_ONE_HOT_EDGE` (8) on are tested at every element |
//! | a `let` chain's scalars are stored on a tape in the workspace, those read far away loaded back | `tape.rs` | the chain has more than `TAPE_DISTANCE` (32) bindings and the code has a workspace (not a kernel); a load for a variable last mentioned more than 32 bindings after its own, or a variable from before the chain mentioned after its first 32 |

use crate::abi::Status;
use crate::lower::{unsupported, Translator};
use crate::values::{load, mem, unchecked_bytes, ArrayVal, Shape, Values};
use crate::workspace::Bytes;
use crate::JitError;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, BlockArg, InstBuilder, MemFlagsData, Value};
use gradlift_lang::syntax::{ArrayOp, Builtin, Expr, ExprKind, Param, Size, Type};

mod builtins;
mod fold;
mod map;
mod pairs;
mod peel;
mod place;
mod source;
mod while_loop;

pub(crate) use fold::*;
use map::*;
pub(crate) use peel::Side;
pub(crate) use source::*;

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

    /// Address of element `i` of an array whose elements take `stride` bytes.
    pub(super) fn element_addr(&mut self, ptr: Value, i: Value, stride: Value) -> Value {
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
            (Shape::Real, Shape::Real) | (Shape::Int, Shape::Int) => Ok(()),
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
            (Values::Real(x), Shape::Real) | (Values::Int(x), Shape::Int) => {
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
    pub(super) fn copy(&mut self, dst: Value, src: Value, bytes: Value) -> Result<(), JitError> {
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
        let overflow = self.flush_overflow();
        let exact = self.exact_array_bytes(n, shape);
        let covered = crate::guard::covers(exact.as_ref(), &counted);
        self.guard.allocation(covered, overflow);
        Ok((self.alloc(total, counted, exact), stride))
    }

    /// The count `e` (of `iota`, `replicate`) as a size expression.
    pub(super) fn count_size(&mut self, e: &Expr) -> Result<Size, JitError> {
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
    pub(super) fn checked_index(&mut self, len: Value, k: i64) -> Value {
        let i = if k < 0 {
            self.b.ins().iadd_imm_s(len, k)
        } else {
            self.iconst(k)
        };
        self.check_in_bounds(len, i);
        i
    }

    /// The position a computed index `i` names in an array of length
    /// `len` (`len + i` for a negative `i`), checked to be in bounds: the
    /// reading of every computed index (`interp::position`).
    pub(crate) fn checked_position(&mut self, len: Value, i: Value) -> Value {
        let negative = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, i, 0);
        let wrapped = self.b.ins().iadd(i, len);
        let p = self.b.ins().select(negative, wrapped, i);
        self.check_in_bounds(len, p);
        p
    }

    /// Fails with `IndexOutOfBounds` unless `0 ≤ i < len`.
    fn check_in_bounds(&mut self, len: Value, i: Value) {
        let zero = self.iconst(0);
        let above = self.b.ins().icmp(IntCC::SignedGreaterThanOrEqual, i, zero);
        let below = self.b.ins().icmp(IntCC::SignedLessThan, i, len);
        let ok = self.b.ins().band(above, below);
        self.check(ok, Status::IndexOutOfBounds, i);
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

    /// An integer used as a count, checked to be in `0..=MAX_LEN`.
    pub(super) fn count(&mut self, e: &Expr) -> Result<Value, JitError> {
        // A constant count is checked here, once.
        if let ExprKind::Int(c) = e.kind {
            if (0..=crate::abi::MAX_LEN).contains(&c) {
                return Ok(self.iconst(c));
            }
        }
        let n = match self.lower(e)? {
            Values::Int(n) => n,
            _ => return Err(JitError::Internal("a count that is not an integer".into())),
        };
        let info = self.iconst(-1);
        self.check_size(n, info);
        Ok(n)
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
        match op {
            ArrayOp::Revfold(schedule) => return self.revfold(schedule, f, args, false),
            ArrayOp::Revwhile(schedule) => return self.revfold(schedule, f, args, true),
            ArrayOp::While => return self.while_loop(f, &args[0]),
            _ => {}
        }
        let (params, body) = self.lambda(f, op.fn_arity())?;
        let elem_ty = |t: Type| match t {
            Type::Array(elem, _) => Ok(*elem),
            _ => Err(JitError::Internal("expected an array type".into())),
        };
        match op {
            ArrayOp::Map | ArrayOp::Map2 => self.map_into(params, body, args, None),
            ArrayOp::Revfold(_) | ArrayOp::Revwhile(_) | ArrayOp::While => {
                unreachable!("lowered above")
            }
            ArrayOp::Reduce | ArrayOp::Foldl(_) | ArrayOp::Scanl | ArrayOp::Scanr => {
                let acc_ty = self.type_of(&args[0])?;
                let a_ty = self.type_of(&args[1])?;
                let size = match &a_ty {
                    Type::Array(_, n) => n.clone(),
                    _ => Size::lit(0),
                };
                let tys = [acc_ty, elem_ty(a_ty)?];
                if op == ArrayOp::Reduce && tys == [Type::Real, Type::Real] {
                    if let Some(p) = gradlift_lang::reduce_order::lane_prim(f) {
                        let z = self.lower(&args[0])?;
                        let a = self.source_read(&args[1], true)?;
                        return self.reduce_in_lanes(p, params, body, z, a, &tys);
                    }
                }
                let z = self.lower(&args[0])?;
                let a = self.source_read(&args[1], op != ArrayOp::Scanr)?;
                let from_the_end = op == ArrayOp::Scanr;
                self.fold(op, params, body, z, a, &tys, &size, from_the_end)
            }
        }
    }
}

/// How many times `e` mentions the variable `name`.
pub(super) fn mentions_of(e: &Expr, name: &gradlift_lang::Name) -> usize {
    gradlift_lang::deep::guard(|| match &e.kind {
        ExprKind::Var(x) => usize::from(x == name),
        _ => e.children().map(|c| mentions_of(c, name)).sum(),
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

/// Whether a value of type `t` is reals and conditions only (no arrays).
pub(super) fn scalars_only(t: &Type) -> bool {
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
        ExprKind::Const(_) | ExprKind::Int(_) | ExprKind::Var(_) | ExprKind::PrimFn(_) => true,
        ExprKind::Prim(p, _) if p.can_fail() => false,
        ExprKind::Prim(_, args) | ExprKind::Tuple(args) => args.iter().all(cannot_fail),
        ExprKind::Let { value, body, .. } => cannot_fail(value) && cannot_fail(body),
        ExprKind::Proj(x, _) => cannot_fail(x),
        ExprKind::If(c, a, b) => cannot_fail(c) && cannot_fail(a) && cannot_fail(b),
        _ => false,
    }
}
