//! The native lowering of every scalar primitive ([`lower_prim`]), from the
//! `lowering` column of the primitive table.
//!
//! The row of each primitive (`gradlift_lang::prim`) says how: an
//! [`Instruction`]; an inline [`Sequence`] — `min`, `max` and `sign` are
//! comparisons and `select`s that reproduce [`Prim::eval_real`] exactly
//! (`min(a, b) = if b < a then b else a`, so a tie or a NaN keeps the first
//! argument — not `fmin`), `exp` and `tanh` the operations of
//! [`gradlift_lang::exp::exp`] and [`gradlift_lang::exp::tanh`] one by one
//! with their table (the process's own for the JIT, a data object in object
//! files); or a call of the row's shim, the very function the interpreter
//! evaluates, so results are bit-identical (object files import the C
//! library's function of the same name). The matches below have no
//! wildcard: a lowering added to the table without its code here does not
//! compile.
//! Comparisons give an `i8` condition; `and`, `or`, `not` combine them
//! (both operands are evaluated, as in the interpreter: they are pure).

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    types, BlockArg, FuncRef, GlobalValue, InstBuilder, MemFlagsData, Value,
};
use cranelift_frontend::FunctionBuilder;
use gradlift_lang::prim::{Comparison, Connective, Instruction, IntOp, Lowering, Sequence};
use gradlift_lang::syntax::{Expr, ExprKind};
use gradlift_lang::Prim;
use std::collections::BTreeSet;

/// The primitives `e` applies, each once, with those their inline
/// sequences call.
pub(crate) fn prims_used(e: &Expr) -> BTreeSet<Prim> {
    let mut used = BTreeSet::new();
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        if let ExprKind::Prim(p, _) = &e.kind {
            used.insert(*p);
            if let Lowering::Inline(seq) = p.info().lowering {
                used.extend(seq.calls());
            }
        }
        stack.extend(e.children());
    }
    used
}

/// Whether any of `prims` reads the table of `exp`.
pub(crate) fn reads_exp_table(prims: &BTreeSet<Prim>) -> bool {
    prims
        .iter()
        .any(|p| matches!(p.info().lowering, Lowering::Inline(s) if s.reads_exp_table()))
}

/// The symbol of the table and constants of `exp` and `tanh`
/// ([`gradlift_lang::exp::DATA`]): imported by the JIT's code (the
/// process's own), a local data object of object files.
pub(crate) const EXP_TABLE_SYMBOL: &str = "gradlift_exp_table";

/// The bytes of that data object (little-endian reals).
pub(crate) fn exp_table_bytes() -> Vec<u8> {
    gradlift_lang::exp::DATA
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect()
}

/// Emits `exp(x)`: the operations of [`gradlift_lang::exp::exp`], in its
/// order, so the result has the interpreter's bits. The common case (|k|
/// below [`FAST_K`](gradlift_lang::exp::FAST_K)) runs straight through;
/// the rest (large, infinite, NaN) in a cold block.
fn lower_exp(b: &mut FunctionBuilder, table: GlobalValue, x: Value) -> Value {
    use gradlift_lang::exp as e;
    let fast = b.create_block();
    let slow = b.create_block();
    let join = b.create_block();
    b.set_cold_block(slow);
    let result = b.append_block_param(join, REAL);
    let data = b.ins().symbol_value(types::I64, table);
    let (shifted, bits, hi, lo) = lower_table_entry(b, data, x);
    let key = b
        .ins()
        .iadd_imm_s(bits, e::FAST_K.wrapping_sub(e::SHIFT.to_bits()) as i64);
    let small = b
        .ins()
        .icmp_imm_s(IntCC::UnsignedLessThan, key, 2 * e::FAST_K as i64);
    b.ins().brif(small, fast, &[], slow, &[]);

    b.switch_to_block(fast);
    b.seal_block(fast);
    let y = lower_times_exp_reduced(b, data, x, shifted, hi, lo);
    let scale = lower_scale(b, bits);
    let y = b.ins().fmul(y, scale);
    b.ins().jump(join, &[BlockArg::Value(y)]);

    b.switch_to_block(slow);
    b.seal_block(slow);
    let (hi_bound, lo_bound) = (b.ins().f64const(e::CLAMP_HI), b.ins().f64const(e::CLAMP_LO));
    let above = b.ins().fcmp(FloatCC::GreaterThan, x, hi_bound);
    let x = b.ins().select(above, hi_bound, x);
    let below = b.ins().fcmp(FloatCC::LessThan, x, lo_bound);
    let x = b.ins().select(below, lo_bound, x);
    let (shifted, bits, hi, lo) = lower_table_entry(b, data, x);
    let mut y = lower_times_exp_reduced(b, data, x, shifted, hi, lo);
    let k = b
        .ins()
        .iadd_imm_s(bits, (e::SHIFT.to_bits() as i64).wrapping_neg());
    let m = b.ins().sshr_imm_s(k, e::TABLE_BITS);
    let m1 = b.ins().sshr_imm_s(m, 1);
    let m2 = b.ins().isub(m, m1);
    for m in [m1, m2] {
        let biased = b.ins().iadd_imm_s(m, 1023);
        let field = b.ins().band_imm_s(biased, 0x7ff);
        let bits = b.ins().ishl_imm_s(field, 52);
        let scale = b.ins().bitcast(REAL, MemFlagsData::new(), bits);
        y = b.ins().fmul(y, scale);
    }
    b.ins().jump(join, &[BlockArg::Value(y)]);

    b.switch_to_block(join);
    b.seal_block(join);
    result
}

/// 2^(k div N) from `bits` (`scale` of [`gradlift_lang::exp`]).
fn lower_scale(b: &mut FunctionBuilder, bits: Value) -> Value {
    let m = b.ins().ushr_imm_s(bits, gradlift_lang::exp::TABLE_BITS);
    let biased = b.ins().iadd_imm_s(m, 1023);
    let field = b.ins().ishl_imm_s(biased, 52);
    b.ins().bitcast(REAL, MemFlagsData::new(), field)
}

/// The real at index `at` of [`gradlift_lang::exp::DATA`] (`data` its
/// address): a read-only load Cranelift can fold into its user.
fn constant(b: &mut FunctionBuilder, data: Value, at: usize) -> Value {
    let flags = MemFlagsData::trusted().with_readonly();
    b.ins().load(REAL, flags, data, (8 * at) as i32)
}

/// `shifted` = x · N / ln 2 + 1.5 · 2^52 (one fused operation), its bits
/// (those of 1.5 · 2^52 + k), and the table's pair for k mod N.
fn lower_table_entry(
    b: &mut FunctionBuilder,
    data: Value,
    x: Value,
) -> (Value, Value, Value, Value) {
    use gradlift_lang::exp as e;
    let inv_step = constant(b, data, e::AT_INV_STEP);
    let shift = b.ins().f64const(e::SHIFT);
    let shifted = b.ins().fma(x, inv_step, shift);
    let bits = b.ins().bitcast(types::I64, MemFlagsData::new(), shifted);
    let j = b.ins().band_imm_s(bits, (1 << e::TABLE_BITS) - 1);
    let offset = b.ins().ishl_imm_s(j, 4);
    let at = b.ins().iadd(data, offset);
    let flags = MemFlagsData::trusted().with_readonly();
    let hi = b.ins().load(REAL, flags, at, 0);
    let lo = b.ins().load(REAL, flags, at, 8);
    (shifted, bits, hi, lo)
}

/// `hi + (lo + hi · (e^r − 1))` (`times_exp_reduced` of
/// [`gradlift_lang::exp`]).
fn lower_times_exp_reduced(
    b: &mut FunctionBuilder,
    data: Value,
    x: Value,
    shifted: Value,
    hi: Value,
    lo: Value,
) -> Value {
    let p = lower_expm1_reduced(b, data, x, shifted);
    let t = b.ins().fma(hi, p, lo);
    b.ins().fadd(hi, t)
}

/// e^r − 1 (`expm1_reduced` of [`gradlift_lang::exp`]): the reduction and
/// the polynomial, fused.
fn lower_expm1_reduced(b: &mut FunctionBuilder, data: Value, x: Value, shifted: Value) -> Value {
    use gradlift_lang::exp as e;
    let shift = b.ins().f64const(e::SHIFT);
    let kd = b.ins().fsub(shifted, shift);
    let minus_kd = b.ins().fneg(kd);
    let step_hi = constant(b, data, e::AT_STEP_HI);
    let r = b.ins().fma(minus_kd, step_hi, x);
    let step_lo = constant(b, data, e::AT_STEP_LO);
    let r = b.ins().fma(minus_kd, step_lo, r);
    let r2 = b.ins().fmul(r, r);
    let (c5, c4) = (constant(b, data, e::AT_C5), b.ins().f64const(e::C4));
    let high = b.ins().fma(r, c5, c4);
    let (c3, c2) = (constant(b, data, e::AT_C3), b.ins().f64const(e::C2));
    let low = b.ins().fma(r, c3, c2);
    let q = b.ins().fma(r2, high, low);
    b.ins().fma(r2, q, r)
}

/// Emits `tanh(x)`: the operations of [`gradlift_lang::exp::tanh`], in its
/// order. |x| below [`TANH_BOUND`](gradlift_lang::exp::TANH_BOUND) runs
/// straight through; the rest (±1, or NaN) is a `select`.
fn lower_tanh(b: &mut FunctionBuilder, table: GlobalValue, x: Value) -> Value {
    use gradlift_lang::exp as e;
    let inside = b.create_block();
    let join = b.create_block();
    let result = b.append_block_param(join, REAL);
    let a = b.ins().fabs(x);
    let bound = b.ins().f64const(e::TANH_BOUND);
    let small = b.ins().fcmp(FloatCC::GreaterThan, bound, a);
    // Outside: ±1 at and past the bound, x itself for NaN.
    let one = b.ins().f64const(1.0);
    let unit = b.ins().fcopysign(one, x);
    let large = b.ins().fcmp(FloatCC::GreaterThanOrEqual, a, bound);
    let outside = b.ins().select(large, unit, x);
    b.ins()
        .brif(small, inside, &[], join, &[BlockArg::Value(outside)]);

    b.switch_to_block(inside);
    b.seal_block(inside);
    let data = b.ins().symbol_value(types::I64, table);
    let y = b.ins().fadd(a, a);
    let (shifted, bits, hi, lo) = lower_table_entry(b, data, y);
    let scale = lower_scale(b, bits);
    let hi = b.ins().fmul(hi, scale);
    let lo = b.ins().fmul(lo, scale);
    let p = lower_expm1_reduced(b, data, y, shifted);
    let minus_one = b.ins().fsub(hi, one);
    let correction = b.ins().fma(hi, p, lo);
    let t = b.ins().fadd(minus_one, correction);
    let two = b.ins().f64const(2.0);
    let denominator = b.ins().fadd(t, two);
    let quotient = b.ins().fdiv(t, denominator);
    let signed = b.ins().fcopysign(quotient, x);
    b.ins().jump(join, &[BlockArg::Value(signed)]);

    b.switch_to_block(join);
    b.seal_block(join);
    result
}

/// Emits primitive `p` applied to `args` (reals, or conditions for the
/// logical primitives), as the `lowering` column of its row says. `calls`
/// gives the function imported for each primitive lowered to a call,
/// `table` the table of `exp` (present when a sequence reads it).
pub(crate) fn lower_prim(
    b: &mut FunctionBuilder,
    calls: &dyn Fn(Prim) -> FuncRef,
    table: Option<GlobalValue>,
    p: Prim,
    args: &[Value],
) -> Value {
    match p.info().lowering {
        Lowering::Instruction(i) => match i {
            Instruction::Fadd => b.ins().fadd(args[0], args[1]),
            Instruction::Fsub => b.ins().fsub(args[0], args[1]),
            Instruction::Fmul => b.ins().fmul(args[0], args[1]),
            Instruction::Fdiv => b.ins().fdiv(args[0], args[1]),
            Instruction::Fneg => b.ins().fneg(args[0]),
            Instruction::Sqrt => b.ins().sqrt(args[0]),
            Instruction::Fabs => b.ins().fabs(args[0]),
            Instruction::Floor => b.ins().floor(args[0]),
            Instruction::Ceil => b.ins().ceil(args[0]),
        },
        Lowering::Inline(seq) => {
            let table = || table.expect("the caller declares the table of `exp`");
            match seq {
                Sequence::Exp => lower_exp(b, table(), args[0]),
                Sequence::Tanh => lower_tanh(b, table(), args[0]),
                Sequence::Min => {
                    let (a, c) = (args[0], args[1]);
                    let take_second = b.ins().fcmp(FloatCC::LessThan, c, a);
                    b.ins().select(take_second, c, a)
                }
                Sequence::Max => {
                    let (a, c) = (args[0], args[1]);
                    let take_second = b.ins().fcmp(FloatCC::GreaterThan, c, a);
                    b.ins().select(take_second, c, a)
                }
                Sequence::Sigmoid => {
                    let x = args[0];
                    let a = b.ins().fabs(x);
                    let minus = b.ins().fneg(a);
                    let e = lower_exp(b, table(), minus);
                    let one = b.ins().f64const(1.0);
                    let t = b.ins().fadd(one, e);
                    let above = b.ins().fdiv(one, t);
                    let below = b.ins().fdiv(e, t);
                    let zero = b.ins().f64const(0.0);
                    let positive = b.ins().fcmp(FloatCC::GreaterThanOrEqual, x, zero);
                    b.ins().select(positive, above, below)
                }
                Sequence::Softplus => {
                    let x = args[0];
                    let a = b.ins().fabs(x);
                    let minus = b.ins().fneg(a);
                    let e = lower_exp(b, table(), minus);
                    let inst = b.ins().call(calls(Prim::Log1p), &[e]);
                    let tail = b.inst_results(inst)[0];
                    // max(x, 0) = if 0 > x then 0 else x
                    let zero = b.ins().f64const(0.0);
                    let take_zero = b.ins().fcmp(FloatCC::GreaterThan, zero, x);
                    let head = b.ins().select(take_zero, zero, x);
                    b.ins().fadd(head, tail)
                }
                Sequence::Sign => {
                    // if a > 0 then 1 else if a < 0 then -1 else a * 0
                    let a = args[0];
                    let zero = b.ins().f64const(0.0);
                    let one = b.ins().f64const(1.0);
                    let minus_one = b.ins().f64const(-1.0);
                    let same_zero = b.ins().fmul(a, zero);
                    let negative = b.ins().fcmp(FloatCC::LessThan, a, zero);
                    let rest = b.ins().select(negative, minus_one, same_zero);
                    let positive = b.ins().fcmp(FloatCC::GreaterThan, a, zero);
                    b.ins().select(positive, one, rest)
                }
            }
        }
        Lowering::Call { .. } => {
            let inst = b.ins().call(calls(p), args);
            b.inst_results(inst)[0]
        }
        Lowering::Compare(c) => {
            let cc = match c {
                Comparison::Lt => FloatCC::LessThan,
                Comparison::Le => FloatCC::LessThanOrEqual,
                Comparison::Gt => FloatCC::GreaterThan,
                Comparison::Ge => FloatCC::GreaterThanOrEqual,
                Comparison::Eq => FloatCC::Equal,
                Comparison::Ne => FloatCC::NotEqual,
            };
            b.ins().fcmp(cc, args[0], args[1])
        }
        Lowering::Logic(c) => match c {
            Connective::And => b.ins().band(args[0], args[1]),
            Connective::Or => b.ins().bor(args[0], args[1]),
            Connective::Not => b.ins().bxor_imm_s(args[0], 1),
        },
        Lowering::Int(op) => match op {
            IntOp::Add => b.ins().iadd(args[0], args[1]),
            IntOp::Sub => b.ins().isub(args[0], args[1]),
            IntOp::Mul => b.ins().imul(args[0], args[1]),
            IntOp::Neg => b.ins().ineg(args[0]),
            IntOp::Min => b.ins().smin(args[0], args[1]),
            IntOp::Max => b.ins().smax(args[0], args[1]),
            IntOp::Div => floor_div_mod(b, args[0], args[1]).0,
            IntOp::Mod => floor_div_mod(b, args[0], args[1]).1,
        },
        Lowering::IntCompare(c) => {
            let cc = match c {
                Comparison::Lt => IntCC::SignedLessThan,
                Comparison::Le => IntCC::SignedLessThanOrEqual,
                Comparison::Gt => IntCC::SignedGreaterThan,
                Comparison::Ge => IntCC::SignedGreaterThanOrEqual,
                Comparison::Eq => IntCC::Equal,
                Comparison::Ne => IntCC::NotEqual,
            };
            b.ins().icmp(cc, args[0], args[1])
        }
        Lowering::ToReal => b.ins().fcvt_from_sint(REAL, args[0]),
        // In range, checked by the caller; saturating, so it cannot trap
        // whatever it is given.
        Lowering::ToInt => b.ins().fcvt_to_sint_sat(types::I64, args[0]),
    }
}

/// `(a // d, a % d)` rounded down, for `d ≠ 0` (checked by the caller):
/// the truncated quotient and remainder, moved down by one (and the
/// remainder up by `d`) where the remainder is not 0 and its sign is not
/// `d`'s. `d = -1` is given to the instructions as 1 (`i64::MIN / -1`
/// traps), its quotient being `-a` (wrapping) and its remainder 0.
fn floor_div_mod(b: &mut FunctionBuilder, a: Value, d: Value) -> (Value, Value) {
    let minus_one = b.ins().icmp_imm_s(IntCC::Equal, d, -1);
    let one = b.ins().iconst(types::I64, 1);
    let safe = b.ins().select(minus_one, one, d);
    let q = b.ins().sdiv(a, safe);
    let r = b.ins().srem(a, safe);
    let nonzero = b.ins().icmp_imm_s(IntCC::NotEqual, r, 0);
    let signs = b.ins().bxor(r, safe);
    let differ = b.ins().icmp_imm_s(IntCC::SignedLessThan, signs, 0);
    let adjust = b.ins().band(nonzero, differ);
    let q_down = b.ins().iadd_imm_s(q, -1);
    let r_up = b.ins().iadd(r, safe);
    let q = b.ins().select(adjust, q_down, q);
    let r = b.ins().select(adjust, r_up, r);
    let negated = b.ins().ineg(a);
    (b.ins().select(minus_one, negated, q), r)
}

/// The Cranelift type of a real.
pub(crate) const REAL: types::Type = types::F64;
