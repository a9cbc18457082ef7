//! `revfold`, the reverse of a checkpointed fold (the values it carries
//! are `carried.rs`'s).
//!
//! `@checkpoint(…) revfold VJP STEP v A z f` runs the schedule of
//! [`gradlift_lang::schedule`]: the machine's state lives in the workspace
//! and native code asks the runtime for one action at a time
//! ([`schedule_start`], [`schedule_next`], runtime functions of
//! `runtime.rs`). The current state, the cotangent
//! of the state and the accumulator are [`Carried`] values; snapshots are
//! `slots` rows of the state's layout; the elements' cotangents are written
//! to the result array at their step.
//!
//! Workspace: each step's temporaries are released when the step ends, so
//! the workspace holds the snapshots, two copies of each array of a carried
//! value (its reals live in registers) and one step's temporaries — not one state per step.

use crate::abi::Status;
use crate::carried::Carried;
use crate::lower::{unsupported, Translator};
use crate::values::{load, ArrayVal, Shape, Values};
use crate::workspace::Bytes;
use crate::JitError;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, InstBuilder, Value};
use gradlift_lang::schedule::{Machine, Schedule};
use gradlift_lang::syntax::{Expr, Param, Type};

/// Starts a schedule (`kind` 0: every `param` steps, 1: binomial with
/// `param` slots) for `n` steps in the `words`-word buffer `buf`.
///
/// # Safety
/// `buf` points to `words` writable, 8-byte aligned words.
pub(crate) unsafe extern "C" fn schedule_start(
    buf: *mut i64,
    words: i64,
    kind: i64,
    param: i64,
    n: i64,
) {
    let param = u32::try_from(param).unwrap_or(1).max(1);
    let schedule = if kind == 0 {
        Schedule::Every(param)
    } else {
        Schedule::Binomial(param)
    };
    let (n, words) = (n.max(0) as u64, words.max(0) as usize);
    // SAFETY: the caller provides `words` words at `buf`.
    let buf = unsafe { std::slice::from_raw_parts_mut(buf, words) };
    if (words as u64) < schedule.words(n) {
        // Generated code always sizes the buffer; never start an unsafe machine.
        buf.fill(0);
        return;
    }
    Machine::start(schedule, n, buf);
}

/// Writes the next action of the machine in `buf` to `out[0..3]` (see
/// [`Action::encode`]).
///
/// # Safety
/// `buf` holds `words` words of a machine started by [`schedule_start`];
/// `out` points to 3 writable words.
pub(crate) unsafe extern "C" fn schedule_next(buf: *mut i64, words: i64, out: *mut i64) {
    // SAFETY: as documented.
    let (buf, out) = unsafe {
        (
            std::slice::from_raw_parts_mut(buf, words.max(0) as usize),
            std::slice::from_raw_parts_mut(out, 3),
        )
    };
    out.copy_from_slice(&Machine::resume(buf).next().encode());
}

impl Translator<'_, '_> {
    /// `@checkpoint(schedule) revfold VJP STEP v A z f`, and
    /// `@checkpoint(binomial:C) revwhile VJP STEP v k z f` (`steps`): the
    /// same over `k` steps whose elements are `()`s, which take no memory,
    /// without the elements' cotangents in its result.
    pub fn revfold(
        &mut self,
        schedule: Schedule,
        f: &Expr,
        args: &[Expr],
        steps: bool,
    ) -> Result<Values, JitError> {
        let (vparams, vbody) = self.lambda(f, 4)?;
        let (sparams, sbody) = self.lambda(&args[0], 2)?;
        let s_ty = self.type_of(&args[1])?;
        let f_ty = self.type_of(&args[4])?;
        let unit = Type::Tuple(Vec::new());
        let (e_ty, n_size) = if steps {
            if !matches!(schedule, Schedule::Binomial(_)) {
                return Err(JitError::Internal(
                    "revwhile takes a binomial schedule".into(),
                ));
            }
            (Box::new(unit.clone()), gradlift_lang::Size::lit(0))
        } else {
            let Type::Array(e_ty, n_size) = self.type_of(&args[2])? else {
                return Err(JitError::Internal("revfold over a non-array".into()));
            };
            (e_ty, n_size)
        };
        let v = self.lower(&args[1])?;
        let a = if steps {
            // The trip count, as an array of `()`s: no memory.
            let Values::Int(k) = self.lower(&args[2])? else {
                return Err(JitError::Internal(
                    "revwhile's trip count is an integer".into(),
                ));
            };
            let zero = self.iconst(0);
            let k = self.b.ins().smax(k, zero);
            ArrayVal {
                ptr: zero,
                len: k,
                elem: Shape::Tuple(Vec::new()),
            }
        } else {
            self.array(&args[2])?
        };
        let z = self.lower(&args[3])?;
        let f0 = self.lower(&args[4])?;
        let Some(state_shape) = v.shape() else {
            return unsupported("a condition as a loop state");
        };
        if let Some(zs) = z.shape() {
            self.check_same_shape(&zs, &state_shape, Status::ShapeMismatch)?;
        }
        let n = a.len;
        let one = self.b.ins().iconst(types::I64, 1);
        // Snapshot slots, as Schedule::slots.
        let slots = match schedule {
            Schedule::Every(k) => {
                let k = i64::from(k.max(1));
                let up = self.b.ins().iadd_imm_s(n, k - 1);
                let blocks = self.b.ins().sdiv_imm_s(up, k);
                let kv = self.b.ins().iconst(types::I64, k);
                let block = self.b.ins().smin(n, kv);
                let s = self.b.ins().iadd(blocks, block);
                let s = self.b.ins().iadd_imm_s(s, -1);
                self.b.ins().smax(s, one)
            }
            Schedule::Binomial(c) => {
                let n1 = self.b.ins().smax(n, one);
                let c = self.b.ins().iconst(types::I64, i64::from(c.max(1)));
                self.b.ins().smin(n1, c)
            }
        };
        // At most ⌈n/k⌉ + k slots, or c.
        let slots_counted = match schedule {
            Schedule::Every(k) => {
                let k = u64::from(k.max(1));
                Bytes::CeilDiv(Box::new(self.counts().len(&n_size)), k).plus(Bytes::Const(k))
            }
            Schedule::Binomial(c) => Bytes::Const(u64::from(c.max(1))),
        };
        let state_bytes = self.bytes(&state_shape)?;
        let slot_bytes = self.mul_deferred(slots, state_bytes);
        self.flush_overflow();
        let counted = slots_counted.clone().times(self.counts().bytes(&s_ty));
        // `slots` is at most its count: a bound, not the number.
        let slot_mem = self.alloc(slot_bytes, counted, None);
        // The elements' cotangents: of the elements' type, or `()`.
        let mark = self.typer.mark();
        let vjp_tys = [s_ty.clone(), (*e_ty).clone(), s_ty.clone(), f_ty.clone()];
        for (p, t) in vparams.iter().zip(&vjp_tys) {
            crate::arrays::bind_types(&mut self.typer, &p.pat, t);
        }
        let out_ty = self.type_of(vbody);
        self.typer.pop_to(mark);
        let Type::Tuple(parts) = out_ty? else {
            return Err(JitError::Internal(
                "revfold's function returns a triple".into(),
            ));
        };
        let e_shape = self.shape_of_type(&parts[1], false)?;
        let (out_ptr, out_stride) = if steps {
            if parts[1] != unit {
                return Err(JitError::Internal("revwhile's elements are `()`".into()));
            }
            let zero = self.iconst(0);
            (zero, zero)
        } else {
            let counted = self.counts().array(&n_size, &parts[1]);
            self.alloc_array(n, &e_shape, counted)?
        };
        let in_stride = crate::values::unchecked_bytes(self.b, &a.elem);
        let state = self.carried(&v, &s_ty)?;
        let cot = self.carried(&z, &s_ty)?;
        let acc = self.carried(&f0, &f_ty)?;
        let r = Reversal {
            step: (sparams, sbody),
            vjp: (vparams, vbody),
            tys: [s_ty, *e_ty, f_ty],
            a,
            in_stride,
            state_shape,
            state_bytes,
            slot_mem,
            slots,
            e_shape: e_shape.clone(),
            out_ptr,
            out_stride,
            state,
            cot,
            acc,
        };
        match schedule {
            Schedule::Every(k) => self.fixed_blocks(&r, i64::from(k.max(1)))?,
            Schedule::Binomial(c) => self.binomial(&r, i64::from(c.max(1)))?,
        }
        let g = self.get(&r.cot);
        let f = self.get(&r.acc);
        if steps {
            return Ok(Values::Tuple(vec![g, f]));
        }
        Ok(Values::Tuple(vec![
            g,
            Values::Array(ArrayVal {
                ptr: out_ptr,
                len: n,
                elem: e_shape,
            }),
            f,
        ]))
    }

    /// Fixed blocks as loops: the forward pass stores a snapshot every `k`
    /// steps; each block, from the last, is restored, replayed while its
    /// states are stored in the slots after the snapshots, and reversed.
    /// The same actions as [`Schedule::Every`]'s machine, without asking
    /// for them.
    fn fixed_blocks(&mut self, r: &Reversal, k: i64) -> Result<(), JitError> {
        let n = r.a.len;
        let up = self.b.ins().iadd_imm_s(n, k - 1);
        let blocks = self.b.ins().sdiv_imm_s(up, k);
        let kv = self.b.ins().iconst(types::I64, k);
        self.for_range(blocks, &mut |t, b| {
            t.store_slot(r, b)?;
            let last = t.b.ins().iadd_imm_s(b, 1);
            let more = t.b.ins().icmp(IntCC::SignedLessThan, last, blocks);
            let (advance, next) = (t.b.create_block(), t.b.create_block());
            t.b.ins().brif(more, advance, &[], next, &[]);
            t.b.switch_to_block(advance);
            t.region(|t| {
                let from = t.b.ins().imul_imm_s(b, k);
                t.advance(r, from, kv)
            })?;
            t.b.ins().jump(next, &[]);
            t.b.switch_to_block(next);
            Ok(())
        })?;
        self.for_range(blocks, &mut |t, back| {
            let last_block = t.b.ins().iadd_imm_s(blocks, -1);
            let b = t.b.ins().isub(last_block, back);
            let start = t.b.ins().imul_imm_s(b, k);
            let rest = t.b.ins().isub(n, start);
            let len = t.b.ins().smin(rest, kv);
            t.restore_slot(r, b)?;
            let recorded = t.b.ins().iadd_imm_s(len, -1);
            t.for_range(recorded, &mut |t, j| {
                let slot = t.b.ins().iadd(blocks, j);
                t.store_slot(r, slot)?;
                let i = t.b.ins().iadd(start, j);
                let one = t.b.ins().iconst(types::I64, 1);
                t.advance(r, i, one)
            })?;
            let i = t.b.ins().iadd(start, recorded);
            t.reverse(r, i)?;
            t.for_range(recorded, &mut |t, back| {
                let top = t.b.ins().iadd_imm_s(recorded, -1);
                let j = t.b.ins().isub(top, back);
                let slot = t.b.ins().iadd(blocks, j);
                t.restore_slot(r, slot)?;
                let i = t.b.ins().iadd(start, j);
                t.reverse(r, i)
            })
        })
    }

    /// The binomial schedule: the machine of [`gradlift_lang::schedule`]
    /// in the workspace, asked for one action at a time.
    fn binomial(&mut self, r: &Reversal, c: i64) -> Result<(), JitError> {
        let Some(crate::runtime::Runtime {
            schedule_start: start_fn,
            schedule_next: next_fn,
            ..
        }) = self.runtime
        else {
            return unsupported(
                "a loop on a binomial checkpoint schedule outside the JIT (it calls the runtime)",
            );
        };
        let n = r.a.len;
        // The machine's words, as Schedule::words.
        let frames = self.b.ins().imul_imm_s(r.slots, 6);
        let words = self.b.ins().iadd_imm_s(frames, 8);
        let word_bytes = self.b.ins().imul_imm_s(words, 8);
        // `slots` is at most `c`.
        let counted = Bytes::Const((6 * c.max(1) as u64 + 8) * 8);
        let machine = self.alloc(word_bytes, counted, None);
        let twentyfour = self.b.ins().iconst(types::I64, 24);
        let action = self.alloc(twentyfour, Bytes::Const(24), Some(Bytes::Const(24)));
        let (kind, param) = (
            self.b.ins().iconst(types::I64, 1),
            self.b.ins().iconst(types::I64, c),
        );
        self.b
            .ins()
            .call(start_fn, &[machine, words, kind, param, n]);
        let (header, exit) = (self.b.create_block(), self.b.create_block());
        self.b.ins().jump(header, &[]);
        self.b.switch_to_block(header);
        self.b.ins().call(next_fn, &[machine, words, action]);
        let mem = crate::values::mem();
        let what = self.b.ins().load(types::I64, mem, action, 0);
        let x = self.b.ins().load(types::I64, mem, action, 8);
        let y = self.b.ins().load(types::I64, mem, action, 16);
        let blocks: Vec<_> = (0..4).map(|_| self.b.create_block()).collect();
        // Dispatch: 1 advance, 2 store, 3 restore, 4 reverse, else done.
        for (k, block) in blocks.iter().enumerate() {
            let is = self.b.ins().icmp_imm_s(IntCC::Equal, what, k as i64 + 1);
            let next = self.b.create_block();
            self.b.ins().brif(is, *block, &[], next, &[]);
            self.b.switch_to_block(next);
        }
        self.b.ins().jump(exit, &[]);
        // Each action's block is its own region: what one establishes does
        // not hold in another.
        self.b.switch_to_block(blocks[0]);
        self.repeated("a checkpointed loop's action", |t| t.advance(r, x, y))?;
        self.b.ins().jump(header, &[]);
        self.b.switch_to_block(blocks[1]);
        self.repeated("a checkpointed loop's action", |t| t.store_slot(r, x))?;
        self.b.ins().jump(header, &[]);
        self.b.switch_to_block(blocks[2]);
        self.repeated("a checkpointed loop's action", |t| t.restore_slot(r, x))?;
        self.b.ins().jump(header, &[]);
        self.b.switch_to_block(blocks[3]);
        self.repeated("a checkpointed loop's action", |t| t.reverse(r, x))?;
        self.b.ins().jump(header, &[]);
        self.b.switch_to_block(exit);
        Ok(())
    }

    /// Applies the step `count` times from step `from`.
    fn advance(&mut self, r: &Reversal, from: Value, count: Value) -> Result<(), JitError> {
        // The schedules keep steps below n; checked, since memory is at stake.
        let last = self.b.ins().iadd(from, count);
        let fits = self
            .b
            .ins()
            .icmp(IntCC::UnsignedLessThanOrEqual, last, r.a.len);
        self.check(fits, Status::IndexOutOfBounds, last);
        let tys = [r.tys[0].clone(), r.tys[1].clone()];
        self.for_range(count, &mut |t, k| {
            let mark = t.mark();
            let i = t.b.ins().iadd(from, k);
            let offset = t.b.ins().imul(i, r.in_stride);
            let at = t.b.ins().iadd(r.a.ptr, offset);
            let elem = load(t.b, at, &r.a.elem);
            let current = t.get(&r.state);
            let next = t.apply(r.step.0, r.step.1, vec![current, elem], &tys)?;
            t.set(&r.state, &next)?;
            t.release(mark);
            Ok(())
        })
    }

    fn slot_addr(&mut self, r: &Reversal, slot: Value) -> Value {
        let ok = self.b.ins().icmp(IntCC::UnsignedLessThan, slot, r.slots);
        self.check(ok, Status::IndexOutOfBounds, slot);
        let offset = self.b.ins().imul(slot, r.state_bytes);
        self.b.ins().iadd(r.slot_mem, offset)
    }

    fn store_slot(&mut self, r: &Reversal, slot: Value) -> Result<(), JitError> {
        let at = self.slot_addr(r, slot);
        let current = self.get(&r.state);
        self.store(at, &current, &r.state_shape)
    }

    /// The state becomes the slot's (a view: slots are only written by
    /// [`Translator::store_slot`], never while the state is one of them,
    /// except by storing it into itself).
    fn restore_slot(&mut self, r: &Reversal, slot: Value) -> Result<(), JitError> {
        let at = self.slot_addr(r, slot);
        let saved = load(self.b, at, &r.state_shape);
        self.set_view(&r.state, &saved)
    }

    /// Reverses step `i`; the current state is `Sᵢ`.
    fn reverse(&mut self, r: &Reversal, i: Value) -> Result<(), JitError> {
        let ok = self.b.ins().icmp(IntCC::UnsignedLessThan, i, r.a.len);
        self.check(ok, Status::IndexOutOfBounds, i);
        let mark = self.mark();
        let offset = self.b.ins().imul(i, r.in_stride);
        let at = self.b.ins().iadd(r.a.ptr, offset);
        let elem = load(self.b, at, &r.a.elem);
        let inputs = vec![self.get(&r.state), elem, self.get(&r.cot), self.get(&r.acc)];
        let tys = [
            r.tys[0].clone(),
            r.tys[1].clone(),
            r.tys[0].clone(),
            r.tys[2].clone(),
        ];
        let out = self.apply(r.vjp.0, r.vjp.1, inputs, &tys)?;
        let Values::Tuple(parts) = out else {
            return Err(JitError::Internal(
                "revfold's function returns a triple".into(),
            ));
        };
        let [g, e, f] = &parts[..] else {
            return Err(JitError::Internal(
                "revfold's function returns a triple".into(),
            ));
        };
        let offset = self.b.ins().imul(i, r.out_stride);
        let at = self.b.ins().iadd(r.out_ptr, offset);
        self.store(at, e, &r.e_shape)?;
        self.set(&r.cot, g)?;
        self.set(&r.acc, f)?;
        self.release(mark);
        Ok(())
    }
}

/// What the lowering of one `revfold` works with.
struct Reversal<'e> {
    step: (&'e [Param], &'e Expr),
    vjp: (&'e [Param], &'e Expr),
    /// The state's, the element's and the accumulator's types.
    tys: [Type; 3],
    a: ArrayVal,
    in_stride: Value,
    state_shape: Shape,
    state_bytes: Value,
    slot_mem: Value,
    slots: Value,
    e_shape: Shape,
    out_ptr: Value,
    out_stride: Value,
    state: Carried,
    cot: Carried,
    acc: Carried,
}
