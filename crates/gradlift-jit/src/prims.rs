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
    let y = lower_exp_clamped(b, data, x);
    b.ins().jump(join, &[BlockArg::Value(y)]);

    b.switch_to_block(join);
    b.seal_block(join);
    result
}

/// `exp(x)` by the other branch of [`gradlift_lang::exp::exp`]: `x`
/// clamped, reduced again and scaled in two steps (`data` the table's
/// address). It has `exp`'s bits for every `x`, not only those outside the
/// fast range: in the fast range the clamps leave `x` as it is, and the
/// result and its half-scaled intermediate are normal numbers, so the two
/// multiplications by powers of two are exact, as the fast branch's one is.
fn lower_exp_clamped(b: &mut FunctionBuilder, data: Value, x: Value) -> Value {
    use gradlift_lang::exp as e;
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
    y
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

/// `x` as a value of type `ty`: itself for [`REAL`], in both lanes for
/// [`PAIR`].
fn as_type(b: &mut FunctionBuilder, x: Value, ty: types::Type) -> Value {
    if ty == PAIR {
        b.ins().splat(PAIR, x)
    } else {
        x
    }
}

/// [`constant`] as a value of type `ty`.
fn constant_as(b: &mut FunctionBuilder, data: Value, at: usize, ty: types::Type) -> Value {
    let c = constant(b, data, at);
    as_type(b, c, ty)
}

/// The real `c` as a value of type `ty`.
fn f64const_as(b: &mut FunctionBuilder, c: f64, ty: types::Type) -> Value {
    let c = b.ins().f64const(c);
    as_type(b, c, ty)
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
/// the polynomial, fused; of reals or of pairs (`x`'s type), the constants
/// the same in both lanes.
fn lower_expm1_reduced(b: &mut FunctionBuilder, data: Value, x: Value, shifted: Value) -> Value {
    use gradlift_lang::exp as e;
    let ty = b.func.dfg.value_type(x);
    let shift = f64const_as(b, e::SHIFT, ty);
    let kd = b.ins().fsub(shifted, shift);
    let minus_kd = b.ins().fneg(kd);
    let step_hi = constant_as(b, data, e::AT_STEP_HI, ty);
    let r = b.ins().fma(minus_kd, step_hi, x);
    let step_lo = constant_as(b, data, e::AT_STEP_LO, ty);
    let r = b.ins().fma(minus_kd, step_lo, r);
    let r2 = b.ins().fmul(r, r);
    let (c5, c4) = (
        constant_as(b, data, e::AT_C5, ty),
        f64const_as(b, e::C4, ty),
    );
    let high = b.ins().fma(r, c5, c4);
    let (c3, c2) = (
        constant_as(b, data, e::AT_C3, ty),
        f64const_as(b, e::C2, ty),
    );
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
    let quotient = lower_tanh_ratio(b, data, y, shifted, (hi, lo), scale);
    let signed = b.ins().fcopysign(quotient, x);
    b.ins().jump(join, &[BlockArg::Value(signed)]);

    b.switch_to_block(join);
    b.seal_block(join);
    result
}

/// The lanes of a pair, as reals.
fn lanes(b: &mut FunctionBuilder, v: Value) -> [Value; 2] {
    [b.ins().extractlane(v, 0), b.ins().extractlane(v, 1)]
}

/// A pair of reals from its lanes.
fn pair(b: &mut FunctionBuilder, lo: Value, hi: Value) -> Value {
    let v = b.ins().scalar_to_vector(PAIR, lo);
    b.ins().insertlane(v, hi, 1)
}

/// `if take_second then c else a`, lane by lane (`take_second` a lane
/// mask, as `fcmp` of pairs gives).
fn select_pair(b: &mut FunctionBuilder, take_second: Value, c: Value, a: Value) -> Value {
    let mask = b.ins().bitcast(PAIR, MemFlagsData::new(), take_second);
    b.ins().bitselect(mask, c, a)
}

/// The table pair (`hi`, `lo`) of each lane of `bits` (those of
/// `shifted`), as two pairs: the lookups are one lane at a time. The
/// index is masked, so every lookup is in the table whatever the lane
/// holds.
fn table_pairs(b: &mut FunctionBuilder, data: Value, bits: [Value; 2]) -> (Value, Value) {
    let flags = MemFlagsData::trusted().with_readonly();
    let mut his = [bits[0]; 2];
    let mut los = [bits[0]; 2];
    for (lane, &k) in bits.iter().enumerate() {
        let j = b
            .ins()
            .band_imm_s(k, (1 << gradlift_lang::exp::TABLE_BITS) - 1);
        let offset = b.ins().ishl_imm_s(j, 4);
        let at = b.ins().iadd(data, offset);
        his[lane] = b.ins().load(REAL, flags, at, 0);
        los[lane] = b.ins().load(REAL, flags, at, 8);
    }
    (pair(b, his[0], his[1]), pair(b, los[0], los[1]))
}

/// `shifted` = x · N / ln 2 + SHIFT of a pair, its bits as a pair of
/// integers and lane by lane, and the table pairs ([`lower_table_entry`]
/// of each lane).
fn lower_table_entry_pair(
    b: &mut FunctionBuilder,
    data: Value,
    x: Value,
) -> (Value, Value, [Value; 2], Value, Value) {
    use gradlift_lang::exp as e;
    let inv_step = constant_as(b, data, e::AT_INV_STEP, PAIR);
    let shift = f64const_as(b, e::SHIFT, PAIR);
    let shifted = b.ins().fma(x, inv_step, shift);
    let bits = b.ins().bitcast(types::I64X2, MemFlagsData::new(), shifted);
    let lane_bits = [b.ins().extractlane(bits, 0), b.ins().extractlane(bits, 1)];
    let (hi, lo) = table_pairs(b, data, lane_bits);
    (shifted, bits, lane_bits, hi, lo)
}

/// [`lower_scale`] of a pair of integer bits.
fn lower_scale_pair(b: &mut FunctionBuilder, bits: Value) -> Value {
    let m = b.ins().ushr_imm_s(bits, gradlift_lang::exp::TABLE_BITS);
    let bias = b.ins().iconst(types::I64, 1023);
    let bias = b.ins().splat(types::I64X2, bias);
    let biased = b.ins().iadd(m, bias);
    let field = b.ins().ishl_imm_s(biased, 52);
    b.ins().bitcast(PAIR, MemFlagsData::new(), field)
}

/// `exp` of a pair, each lane with [`lower_exp`]'s bits: when both lanes
/// are in the fast range, its operations on both lanes at once (the table
/// read one lane at a time); otherwise, in a cold block,
/// [`lower_exp_clamped`] of each lane, which needs no test of its own.
fn lower_exp_pair(b: &mut FunctionBuilder, table: GlobalValue, x: Value) -> Value {
    use gradlift_lang::exp as e;
    let fast = b.create_block();
    let slow = b.create_block();
    let join = b.create_block();
    b.set_cold_block(slow);
    let result = b.append_block_param(join, PAIR);
    let data = b.ins().symbol_value(types::I64, table);
    let (shifted, bits, lane_bits, hi, lo) = lower_table_entry_pair(b, data, x);
    let mut both = None;
    for k in lane_bits {
        let key = b
            .ins()
            .iadd_imm_s(k, e::FAST_K.wrapping_sub(e::SHIFT.to_bits()) as i64);
        let small = b
            .ins()
            .icmp_imm_s(IntCC::UnsignedLessThan, key, 2 * e::FAST_K as i64);
        both = Some(match both {
            None => small,
            Some(s) => b.ins().band(s, small),
        });
    }
    let both = both.expect("two lanes");
    b.ins().brif(both, fast, &[], slow, &[]);

    b.switch_to_block(fast);
    b.seal_block(fast);
    let p = lower_expm1_reduced(b, data, x, shifted);
    let t = b.ins().fma(hi, p, lo);
    let y = b.ins().fadd(hi, t);
    let scale = lower_scale_pair(b, bits);
    let y = b.ins().fmul(y, scale);
    b.ins().jump(join, &[BlockArg::Value(y)]);

    b.switch_to_block(slow);
    b.seal_block(slow);
    let [x0, x1] = lanes(b, x);
    let (y0, y1) = (
        lower_exp_clamped(b, data, x0),
        lower_exp_clamped(b, data, x1),
    );
    let y = pair(b, y0, y1);
    b.ins().jump(join, &[BlockArg::Value(y)]);

    b.switch_to_block(join);
    b.seal_block(join);
    result
}

/// The magnitude of `m` with the sign of `s`, lane by lane (as
/// `fcopysign` of reals): `(m & !sign) | (s & sign)`.
fn copysign_pair(b: &mut FunctionBuilder, m: Value, s: Value) -> Value {
    let sign = f64const_as(b, -0.0, PAIR);
    let magnitude = b.ins().band_not(m, sign);
    let signs = b.ins().band(s, sign);
    b.ins().bor(magnitude, signs)
}

/// `tanh` of a pair, each lane with [`lower_tanh`]'s bits, without a
/// branch: both lanes compute the inside formula (its table index masked,
/// so in range whatever the lane holds) and the outside value, and each
/// keeps its own.
fn lower_tanh_pair(b: &mut FunctionBuilder, table: GlobalValue, x: Value) -> Value {
    use gradlift_lang::exp as e;
    let a = b.ins().fabs(x);
    let bound = f64const_as(b, e::TANH_BOUND, PAIR);
    let one = f64const_as(b, 1.0, PAIR);
    let unit = copysign_pair(b, one, x);
    let large = b.ins().fcmp(FloatCC::GreaterThanOrEqual, a, bound);
    let outside = select_pair(b, large, unit, x);

    let data = b.ins().symbol_value(types::I64, table);
    let y = b.ins().fadd(a, a);
    let (shifted, bits, _, hi, lo) = lower_table_entry_pair(b, data, y);
    let scale = lower_scale_pair(b, bits);
    let quotient = lower_tanh_ratio(b, data, y, shifted, (hi, lo), scale);
    let inside = copysign_pair(b, quotient, x);

    let small = b.ins().fcmp(FloatCC::GreaterThan, bound, a);
    select_pair(b, small, inside, outside)
}

/// t / (t + 2) for t = e^y − 1 (`expm1_small` of [`gradlift_lang::exp`]),
/// given y's reduction (`shifted`), its table pair and `scale` =
/// 2^(k div N): the part of `tanh` shared by reals and pairs (`y`'s type).
fn lower_tanh_ratio(
    b: &mut FunctionBuilder,
    data: Value,
    y: Value,
    shifted: Value,
    (hi, lo): (Value, Value),
    scale: Value,
) -> Value {
    let ty = b.func.dfg.value_type(y);
    let hi = b.ins().fmul(hi, scale);
    let lo = b.ins().fmul(lo, scale);
    let p = lower_expm1_reduced(b, data, y, shifted);
    let one = f64const_as(b, 1.0, ty);
    let minus_one = b.ins().fsub(hi, one);
    let correction = b.ins().fma(hi, p, lo);
    let t = b.ins().fadd(minus_one, correction);
    let two = f64const_as(b, 2.0, ty);
    let denominator = b.ins().fadd(t, two);
    b.ins().fdiv(t, denominator)
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

/// Emits primitive `p`, of kind [`PrimKind::Real`](gradlift_lang::prim::PrimKind),
/// applied lane by lane to two-lane vectors of reals ([`types::F64X2`],
/// elements `i` and `i + 1` of a loop, see `arrays/pairs.rs`). Each lane
/// gets exactly the bits [`lower_prim`] gives it: the arithmetic
/// instructions act on both lanes at once (IEEE operations, rounded per
/// lane); `min` and `max` compare both lanes and select bit by bit, in the
/// scalar sequence's order (a tie or a NaN keeps the first argument); every
/// other primitive — the inline sequences of `exp` and `tanh`, the calls,
/// `floor` and `ceil` — runs [`lower_prim`] on each lane and puts the two
/// results back together.
pub(crate) fn lower_prim_pair(
    b: &mut FunctionBuilder,
    calls: &dyn Fn(Prim) -> FuncRef,
    table: Option<GlobalValue>,
    p: Prim,
    args: &[Value],
) -> Value {
    let select = select_pair;
    let table_if_declared = table;
    let table = || table.expect("the caller declares the table of `exp`");
    match p.info().lowering {
        Lowering::Instruction(Instruction::Fadd) => b.ins().fadd(args[0], args[1]),
        Lowering::Instruction(Instruction::Fsub) => b.ins().fsub(args[0], args[1]),
        Lowering::Instruction(Instruction::Fmul) => b.ins().fmul(args[0], args[1]),
        Lowering::Instruction(Instruction::Fdiv) => b.ins().fdiv(args[0], args[1]),
        Lowering::Instruction(Instruction::Fneg) => b.ins().fneg(args[0]),
        Lowering::Instruction(Instruction::Sqrt) => b.ins().sqrt(args[0]),
        Lowering::Instruction(Instruction::Fabs) => b.ins().fabs(args[0]),
        Lowering::Inline(Sequence::Min) => {
            let (a, c) = (args[0], args[1]);
            let take_second = b.ins().fcmp(FloatCC::LessThan, c, a);
            select(b, take_second, c, a)
        }
        Lowering::Inline(Sequence::Max) => {
            let (a, c) = (args[0], args[1]);
            let take_second = b.ins().fcmp(FloatCC::GreaterThan, c, a);
            select(b, take_second, c, a)
        }
        Lowering::Inline(Sequence::Exp) => lower_exp_pair(b, table(), args[0]),
        Lowering::Inline(Sequence::Tanh) => lower_tanh_pair(b, table(), args[0]),
        Lowering::Inline(Sequence::Sigmoid) => {
            let x = args[0];
            let a = b.ins().fabs(x);
            let minus = b.ins().fneg(a);
            let e = lower_exp_pair(b, table(), minus);
            let one = f64const_as(b, 1.0, PAIR);
            let t = b.ins().fadd(one, e);
            let above = b.ins().fdiv(one, t);
            let below = b.ins().fdiv(e, t);
            let zero = f64const_as(b, 0.0, PAIR);
            let positive = b.ins().fcmp(FloatCC::GreaterThanOrEqual, x, zero);
            select(b, positive, above, below)
        }
        _ => {
            let table = table_if_declared;
            let split: Vec<[Value; 2]> = args.iter().map(|&v| lanes(b, v)).collect();
            let mut out = [args[0]; 2];
            for (lane, y) in out.iter_mut().enumerate() {
                let xs: Vec<Value> = split.iter().map(|l| l[lane]).collect();
                *y = lower_prim(b, calls, table, p, &xs);
            }
            pair(b, out[0], out[1])
        }
    }
}

/// Two reals, elements `i` and `i + 1`, in one vector register.
pub(crate) const PAIR: types::Type = types::F64X2;

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
