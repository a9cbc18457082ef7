//! `revfold`, the reverse of a checkpointed fold, and the loop-carried
//! values that let a loop reuse its workspace.
//!
//! `@checkpoint(…) revfold VJP STEP v A z f` runs the schedule of
//! [`gradlift_lang::schedule`]: the machine's state lives in the workspace
//! and native code asks the runtime for one action at a time
//! ([`schedule_start`], [`schedule_next`], the only functions generated
//! code calls besides the `libm` shims). The current state, the cotangent
//! of the state and the accumulator are [`Carried`] values; snapshots are
//! `slots` rows of the state's layout; the elements' cotangents are written
//! to the result array at their step.
//!
//! Workspace: each step's temporaries are released when the step ends, so
//! the workspace holds the snapshots, two copies of each carried value and
//! one step's temporaries — not one state per step.

use crate::abi::Status;
use crate::lower::{unsupported, Translator};
use crate::values::{load, ArrayVal, Shape, Values};
use crate::JitError;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, FuncRef, InstBuilder, Value};
use cranelift_frontend::Variable;
use gradlift_lang::schedule::{Machine, Schedule};
use gradlift_lang::syntax::{Expr, Type};

/// The runtime functions generated code imports: their symbols and
/// addresses.
pub(crate) const RUNTIME: [(&str, *const u8); 2] = [
    ("gradlift_schedule_start", schedule_start as *const u8),
    ("gradlift_schedule_next", schedule_next as *const u8),
];

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

/// A loop-carried value. Scalars live in Cranelift variables; a value with
/// arrays is copied at each update into the one of two buffers it does not
/// occupy, so the step's temporaries can be released.
pub(crate) struct Carried {
    template: Values,
    vars: Vec<Variable>,
    shape: Shape,
    /// (the buffer the next update writes, the other one).
    buffers: Option<(Variable, Variable)>,
}

fn has_arrays(s: &Shape) -> bool {
    match s {
        Shape::Real => false,
        Shape::Tuple(ss) => ss.iter().any(has_arrays),
        Shape::Array(..) => true,
    }
}

impl Translator<'_, '_> {
    /// A loop-carried value starting at `init`.
    pub fn carried(&mut self, init: &Values) -> Result<Carried, JitError> {
        let Some(shape) = init.shape() else {
            return unsupported("a loop-carried condition");
        };
        let vars = init
            .to_vec()
            .into_iter()
            .map(|v| {
                let ty = self.b.func.dfg.value_type(v);
                let var = self.b.declare_var(ty);
                self.b.def_var(var, v);
                var
            })
            .collect();
        let buffers = if has_arrays(&shape) {
            let bytes = self.bytes(&shape)?;
            let (first, second) = (self.alloc(bytes), self.alloc(bytes));
            let (a, b) = (
                self.b.declare_var(types::I64),
                self.b.declare_var(types::I64),
            );
            self.b.def_var(a, first);
            self.b.def_var(b, second);
            Some((a, b))
        } else {
            None
        };
        Ok(Carried {
            template: init.clone(),
            vars,
            shape,
            buffers,
        })
    }

    /// The current value.
    pub fn get(&mut self, c: &Carried) -> Values {
        let current: Vec<Value> = c.vars.iter().map(|v| self.b.use_var(*v)).collect();
        c.template.rebuild(&mut current.into_iter())
    }

    /// Makes `v` the value, copying its arrays out of the temporaries.
    pub fn set(&mut self, c: &Carried, v: &Values) -> Result<(), JitError> {
        let v = match c.buffers {
            Some((next, other)) => {
                let at = self.b.use_var(next);
                self.store(at, v, &c.shape)?;
                let spare = self.b.use_var(other);
                self.b.def_var(next, spare);
                self.b.def_var(other, at);
                load(self.b, at, &c.shape)
            }
            None => v.clone(),
        };
        let flat = v.to_vec();
        if flat.len() != c.vars.len() {
            return Err(JitError::Internal("a carried value changes layout".into()));
        }
        for (var, x) in c.vars.iter().zip(flat) {
            self.b.def_var(*var, x);
        }
        Ok(())
    }

    /// The workspace's bump pointer, to release a step's temporaries with
    /// [`Translator::release`].
    pub fn mark(&mut self) -> Value {
        self.b.use_var(self.top)
    }

    /// Releases everything allocated since `mark`.
    pub fn release(&mut self, mark: Value) {
        self.b.def_var(self.top, mark);
    }

    /// `@checkpoint(schedule) revfold VJP STEP v A z f`.
    pub fn revfold(
        &mut self,
        schedule: Schedule,
        f: &Expr,
        args: &[Expr],
    ) -> Result<Values, JitError> {
        let Some((start_fn, next_fn)) = self.runtime else {
            return unsupported("a checkpointed loop outside the JIT (it calls the runtime)");
        };
        let (vparams, vbody) = self.lambda(f, 4)?;
        let (sparams, sbody) = self.lambda(&args[0], 2)?;
        let s_ty = self.type_of(&args[1])?;
        let Type::Array(e_ty, _) = self.type_of(&args[2])? else {
            return Err(JitError::Internal("revfold over a non-array".into()));
        };
        let (e_ty, g_ty, f_ty) = (*e_ty, s_ty.clone(), self.type_of(&args[4])?);
        let v = self.lower(&args[1])?;
        let a = self.array(&args[2])?;
        let z = self.lower(&args[3])?;
        let f0 = self.lower(&args[4])?;
        let Some(state_shape) = v.shape() else {
            return unsupported("a condition as a loop state");
        };
        let n = a.len;

        // Snapshot slots and the machine's words, as Schedule::slots/words.
        let (kind, param) = match schedule {
            Schedule::Every(k) => (0, i64::from(k.max(1))),
            Schedule::Binomial(c) => (1, i64::from(c.max(1))),
        };
        let slots = if kind == 0 {
            let up = self.b.ins().iadd_imm_s(n, param - 1);
            let blocks = self.b.ins().sdiv_imm_s(up, param);
            let s = self.b.ins().iadd_imm_s(blocks, param - 1);
            let one = self.b.ins().iconst(types::I64, 1);
            self.b.ins().smax(s, one)
        } else {
            let one = self.b.ins().iconst(types::I64, 1);
            let n1 = self.b.ins().smax(n, one);
            let c = self.b.ins().iconst(types::I64, param);
            self.b.ins().smin(n1, c)
        };
        let words = if kind == 0 {
            self.b.ins().iconst(types::I64, 8)
        } else {
            let frames = self.b.ins().imul_imm_s(slots, 6);
            self.b.ins().iadd_imm_s(frames, 8)
        };
        let state_bytes = self.bytes(&state_shape)?;
        let slot_bytes = self.mul_checked(slots, state_bytes);
        let slot_mem = self.alloc(slot_bytes);
        let word_bytes = self.b.ins().imul_imm_s(words, 8);
        let machine = self.alloc(word_bytes);
        let twentyfour = self.b.ins().iconst(types::I64, 24);
        let action = self.alloc(twentyfour);
        let e_shape = self.shape_of_type(&e_ty, false)?;
        let (out_ptr, out_stride) = self.alloc_array(n, &e_shape)?;
        let in_stride = crate::values::unchecked_bytes(self.b, &a.elem);
        let (kind_v, param_v) = (
            self.b.ins().iconst(types::I64, kind),
            self.b.ins().iconst(types::I64, param),
        );
        self.b
            .ins()
            .call(start_fn, &[machine, words, kind_v, param_v, n]);

        let state = self.carried(&v)?;
        let z_shape = z.shape();
        if let Some(zs) = &z_shape {
            self.check_same_shape(zs, &state_shape, Status::ShapeMismatch)?;
        }
        let cot = self.carried(&z)?;
        let acc = self.carried(&f0)?;

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

        // Advance: `y` steps from step `x`. Indices come from the schedule,
        // which keeps them below n; check anyway, memory is at stake.
        self.b.switch_to_block(blocks[0]);
        let last = self.b.ins().iadd(x, y);
        let in_range = self.b.ins().icmp(IntCC::UnsignedLessThanOrEqual, last, n);
        self.check(in_range, Status::IndexOutOfBounds, last);
        let step_tys = [s_ty.clone(), e_ty.clone()];
        self.for_range(y, &mut |t, k| {
            let mark = t.mark();
            let i = t.b.ins().iadd(x, k);
            let offset = t.b.ins().imul(i, in_stride);
            let at = t.b.ins().iadd(a.ptr, offset);
            let elem = load(t.b, at, &a.elem);
            let current = t.get(&state);
            let next = t.apply(sparams, sbody, vec![current, elem], &step_tys)?;
            t.set(&state, &next)?;
            t.release(mark);
            Ok(())
        })?;
        self.b.ins().jump(header, &[]);

        // Store and restore: slot `x`.
        for (block, store) in [(blocks[1], true), (blocks[2], false)] {
            self.b.switch_to_block(block);
            let ok = self.b.ins().icmp(IntCC::UnsignedLessThan, x, slots);
            self.check(ok, Status::IndexOutOfBounds, x);
            let offset = self.b.ins().imul(x, state_bytes);
            let at = self.b.ins().iadd(slot_mem, offset);
            if store {
                let current = self.get(&state);
                self.store(at, &current, &state_shape)?;
            } else {
                let saved = load(self.b, at, &state_shape);
                self.set(&state, &saved)?;
            }
            self.b.ins().jump(header, &[]);
        }

        // Reverse step `x`.
        self.b.switch_to_block(blocks[3]);
        let ok = self.b.ins().icmp(IntCC::UnsignedLessThan, x, n);
        self.check(ok, Status::IndexOutOfBounds, x);
        let mark = self.mark();
        let offset = self.b.ins().imul(x, in_stride);
        let at = self.b.ins().iadd(a.ptr, offset);
        let elem = load(self.b, at, &a.elem);
        let inputs = vec![self.get(&state), elem, self.get(&cot), self.get(&acc)];
        let tys = [s_ty, e_ty, g_ty, f_ty];
        let r = self.apply(vparams, vbody, inputs, &tys)?;
        let Values::Tuple(parts) = r else {
            return Err(JitError::Internal(
                "revfold's function returns a triple".into(),
            ));
        };
        let [g, e, f] = &parts[..] else {
            return Err(JitError::Internal(
                "revfold's function returns a triple".into(),
            ));
        };
        let offset = self.b.ins().imul(x, out_stride);
        let at = self.b.ins().iadd(out_ptr, offset);
        self.store(at, e, &e_shape)?;
        self.set(&cot, g)?;
        self.set(&acc, f)?;
        self.release(mark);
        self.b.ins().jump(header, &[]);

        self.b.switch_to_block(exit);
        let g = self.get(&cot);
        let f = self.get(&acc);
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
}

/// Imports the runtime functions into a function (start, next).
pub(crate) fn runtime_signatures(
    call_conv: cranelift_codegen::isa::CallConv,
) -> [cranelift_codegen::ir::Signature; 2] {
    use cranelift_codegen::ir::{AbiParam, Signature};
    let mut start = Signature::new(call_conv);
    for _ in 0..5 {
        start.params.push(AbiParam::new(types::I64));
    }
    let mut next = Signature::new(call_conv);
    for _ in 0..3 {
        next.params.push(AbiParam::new(types::I64));
    }
    [start, next]
}

/// The imported runtime functions of one function.
pub(crate) type Runtime = Option<(FuncRef, FuncRef)>;
