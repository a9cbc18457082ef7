//! The workspace and its byte counts checked once, at entry, instead of
//! at each allocation.
//!
//! The lowering counts every allocation as a formula in the size
//! variables (`workspace.rs`), and the high-water marks of those formulas
//! are the function's [`WorkspaceBound`](crate::WorkspaceBound). When it
//! also knows each allocation's byte count *as the same formula* — built
//! from the lengths the count is computed from, each of which it knows
//! as a size expression, and not from the types — the entry check stands
//! for every per-allocation check:
//!
//! - **The guard.** After the size variables are loaded and checked to be
//!   in `0 ..= 2⁴⁰`, the function evaluates the bound from them, checking
//!   that no part of the formula (each length, product and sum) reaches
//!   2⁶³ (`SizeOverflow`), and that the workspace holds it
//!   (`WorkspaceTooSmall`, `*info` the bound).
//! - **Why that suffices.** Each covered allocation's bytes are, by
//!   construction, the value of its formula at the call's sizes: the
//!   lengths are the values of size expressions (loaded and checked, or
//!   clamped at 0, or constants, or copies of those), and the count is
//!   their product with the element's bytes, mirrored term by term by
//!   [`Translator::exact_bytes`] and `SizeVars::bytes`. Every product and
//!   sum the code computes for it is a part of that formula, below 2⁶³ by
//!   the guard, so none overflows. The bump pointer only moves up by
//!   allocations and back down to a mark when a loop step or region ends,
//!   as `Usage` mirrors, so the bytes in use at any allocation are a sum
//!   of live formulas, at most one high-water mark, at most the bound,
//!   which the workspace holds.
//! - **All or nothing.** If any allocation is not covered (its count is a
//!   bound rather than the number, as a checkpoint schedule's slots, or a
//!   length is not known as a size expression), or the function has no
//!   bound, or the bound has a part it cannot state, every allocation
//!   keeps its own checks and there is no guard: an uncovered allocation
//!   could take more than its formula and leave a covered one without
//!   room.
//!
//! The checks are emitted as before while lowering; the guard's branches
//! are recorded ([`Guard::allocation`]) and, once the function is
//! complete and covered, rewritten into plain jumps
//! ([`Lowered::elide`](crate::lower::Lowered)); Cranelift removes the
//! arithmetic that fed them. A call now needs the whole bound before it
//! starts, where it used to fail at the first allocation that did not
//! fit: a bound counts both sides of an `if`.

use crate::abi::Status;
use crate::lower::Translator;
use crate::values::Shape;
use crate::workspace::{sum, Bytes};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    types, BlockArg, Inst, InstBuilder, InstructionData, Opcode, Value, ValueDef,
};
use cranelift_frontend::FunctionBuilder;
use std::collections::HashMap;

/// What the lowering learns for the guard.
#[derive(Default)]
pub(crate) struct Guard {
    /// Lengths known as formulas in the sizes (`max(0, size)`), by value.
    lengths: HashMap<Value, Bytes>,
    /// The checks of covered allocations, to elide under the guard.
    checks: Vec<Inst>,
    /// Whether some allocation is not covered.
    uncovered: bool,
}

impl Guard {
    /// `v` is the length `formula` (a checked or clamped size).
    pub fn length(&mut self, v: Value, formula: Bytes) {
        self.lengths.entry(v).or_insert(formula);
    }

    /// `copy` holds the value `v` holds.
    pub fn same_length(&mut self, v: Value, copy: Value) {
        if let Some(f) = self.lengths.get(&v).cloned() {
            self.lengths.entry(copy).or_insert(f);
        }
    }

    /// An allocation's `checks`; `covered` when its bytes are its formula.
    pub fn allocation(&mut self, covered: bool, checks: impl IntoIterator<Item = Inst>) {
        if covered {
            self.checks.extend(checks);
        } else {
            self.uncovered = true;
        }
    }

    /// The checks the guard stands for, when they are more than its own
    /// and `bound` (the function's workspace formula) can guard them all.
    pub fn elidable(&self, bound: Option<&Bytes>) -> Option<&[Inst]> {
        let bound = bound?;
        // The guard is two branches (overflow, room): worth it when it
        // stands for more.
        (!self.uncovered && self.checks.len() > 2 && stated(bound)).then_some(&self.checks[..])
    }
}

/// Whether an allocation of `exact` bytes (its formula, when known) is
/// the `counted` the bound adds up.
pub(crate) fn covers(exact: Option<&Bytes>, counted: &Bytes) -> bool {
    exact.is_some_and(|e| {
        let e = normal(e.clone());
        stated(&e) && e == normal(counted.clone())
    })
}

/// `x` in a normal form of the same value, so that two formulas of the
/// same bytes built along different routes (an array's bytes as its
/// parts', `(n + m) · 8` as `n · 8 + m · 8`) compare equal: each length's
/// terms in one order, a length times a constant `k ≥ 0` as the length of
/// `k` times its form (`max(0, f) · k = max(0, k·f)`), a sum times a
/// constant as the sum of the products, and the lengths of a sum whose
/// forms cannot be negative added into one (`max(0, f) + max(0, g) =
/// max(0, f + g)` when `f, g ≥ 0`).
pub(crate) fn normal(x: Bytes) -> Bytes {
    match x {
        Bytes::Len(c, terms) => length(c, terms),
        Bytes::Sum(xs) => {
            let mut merged: Option<(i64, Vec<(usize, i64)>)> = None;
            let mut rest = Vec::new();
            for x in xs.into_iter().map(normal) {
                let form = match &x {
                    Bytes::Const(k) => i64::try_from(*k).ok().map(|k| (k, Vec::new())),
                    Bytes::Len(c, t) if *c >= 0 && t.iter().all(|&(_, k)| k >= 0) => {
                        Some((*c, t.clone()))
                    }
                    _ => None,
                };
                let added = form.and_then(|(c, t)| match merged.take() {
                    None => Some((c, t)),
                    Some((c0, mut t0)) => {
                        t0.extend(t);
                        Some((c0.checked_add(c)?, t0))
                    }
                });
                match added {
                    Some(f) => merged = Some(f),
                    None => rest.push(x),
                }
            }
            if let Some((c, t)) = merged {
                rest.push(length(c, t));
            }
            sum(rest)
        }
        Bytes::Max(xs) => Bytes::Max(xs.into_iter().map(normal).collect()),
        Bytes::Product(a, b) => match (normal(*a), normal(*b)) {
            (Bytes::Sum(xs), Bytes::Const(k)) | (Bytes::Const(k), Bytes::Sum(xs)) => {
                normal(sum(xs
                    .into_iter()
                    .map(|x| x.times(Bytes::Const(k)))
                    .collect()))
            }
            (Bytes::Len(c, t), Bytes::Const(k)) | (Bytes::Const(k), Bytes::Len(c, t)) => {
                let scaled = i64::try_from(k).ok().and_then(|k| {
                    let t = t
                        .iter()
                        .map(|&(i, x)| Some((i, x.checked_mul(k)?)))
                        .collect::<Option<Vec<_>>>()?;
                    Some((c.checked_mul(k)?, t))
                });
                match scaled {
                    Some((c, t)) => length(c, t),
                    None => Bytes::Len(c, t).times(Bytes::Const(k)),
                }
            }
            (a, b) => a.times(b),
        },
        Bytes::CeilDiv(a, k) => Bytes::CeilDiv(Box::new(normal(*a)), k),
        c @ Bytes::Const(_) => c,
    }
}

/// `max(0, c + Σ k·size)` with its terms by size variable, repeated ones
/// added and zero ones dropped (a constant when none is left); a
/// coefficient past 64 bits makes it `u64::MAX`, which [`covers`] never
/// matches.
fn length(c: i64, terms: Vec<(usize, i64)>) -> Bytes {
    let mut by: std::collections::BTreeMap<usize, i64> = Default::default();
    for (i, k) in terms {
        let e = by.entry(i).or_insert(0);
        match e.checked_add(k) {
            Some(x) => *e = x,
            None => return Bytes::Const(u64::MAX),
        }
    }
    let terms: Vec<_> = by.into_iter().filter(|&(_, k)| k != 0).collect();
    if terms.is_empty() {
        Bytes::Const(c.max(0) as u64)
    } else {
        Bytes::Len(c, terms)
    }
}

/// Whether every constant of `x` is below 2⁶³: a formula with a part it
/// cannot state (`u64::MAX`) is never guarded.
fn stated(x: &Bytes) -> bool {
    match x {
        Bytes::Const(c) => *c <= i64::MAX as u64,
        Bytes::Len(..) => true,
        Bytes::Sum(xs) | Bytes::Max(xs) => xs.iter().all(stated),
        Bytes::Product(a, b) => stated(a) && stated(b),
        Bytes::CeilDiv(a, _) => stated(a),
    }
}

impl Translator<'_, '_> {
    /// The length `v` as a formula, when known: recorded, or computed by
    /// the code from known lengths by adding, subtracting, scaling and
    /// clamping at 0 ([`Translator::linear`]).
    fn exact_len(&self, v: Value) -> Option<Bytes> {
        if let Some(f) = self.guard.lengths.get(&v) {
            return Some(normal(f.clone()));
        }
        let dfg = &self.b.func.dfg;
        if let ValueDef::Result(inst, _) = dfg.value_def(v) {
            if let InstructionData::Binary {
                opcode: Opcode::Smax,
                args: [x, zero],
            } = dfg.insts[inst]
            {
                if self.constant(zero) == Some(0) {
                    let (c, terms) = self.linear(x, 0)?;
                    return Some(normal(Bytes::Len(c, terms)));
                }
            }
        }
        // Unclamped: exact only where it cannot be negative.
        if let Some((c, terms)) = self.linear(v, 0) {
            return (c >= 0 && terms.iter().all(|&(_, k)| k >= 0))
                .then(|| normal(Bytes::Len(c, terms)));
        }
        // A sum of lengths (each at least 0, so the sum is exact).
        if let ValueDef::Result(inst, _) = dfg.value_def(v) {
            if let InstructionData::Binary {
                opcode: Opcode::Iadd,
                args: [x, y],
            } = dfg.insts[inst]
            {
                let (x, y) = (self.exact_len(x)?, self.exact_len(y)?);
                return Some(normal(x.plus(y)));
            }
        }
        None
    }

    /// `v` as `c + Σ k·size` exactly (no clamping), when the code computes
    /// it so from constants and lengths known not to be negative.
    fn linear(&self, v: Value, depth: usize) -> Option<(i64, Vec<(usize, i64)>)> {
        if let Some(c) = self.constant(v) {
            return Some((c, Vec::new()));
        }
        if let Some(f) = self.guard.lengths.get(&v) {
            // `max(0, form)` is the form when the form is never negative.
            return match f {
                Bytes::Const(c) => Some((i64::try_from(*c).ok()?, Vec::new())),
                Bytes::Len(c, terms) if *c >= 0 && terms.iter().all(|&(_, k)| k >= 0) => {
                    Some((*c, terms.clone()))
                }
                _ => None,
            };
        }
        if depth > 8 {
            return None;
        }
        let dfg = &self.b.func.dfg;
        let ValueDef::Result(inst, _) = dfg.value_def(v) else {
            return None;
        };
        let combine =
            |(c1, t1): (i64, Vec<(usize, i64)>), (c2, t2): (i64, Vec<(usize, i64)>), sign: i64| {
                let mut terms = t1;
                for (i, k) in t2 {
                    terms.push((i, k.checked_mul(sign)?));
                }
                Some((c1.checked_add(c2.checked_mul(sign)?)?, terms))
            };
        let InstructionData::Binary {
            opcode,
            args: [a, b],
        } = dfg.insts[inst]
        else {
            return None;
        };
        match opcode {
            Opcode::Iadd => combine(self.linear(a, depth + 1)?, self.linear(b, depth + 1)?, 1),
            Opcode::Isub => combine(self.linear(a, depth + 1)?, self.linear(b, depth + 1)?, -1),
            Opcode::Imul => {
                let (x, k) = match (self.constant(a), self.constant(b)) {
                    (_, Some(k)) => (a, k),
                    (Some(k), None) => (b, k),
                    (None, None) => return None,
                };
                let (c, terms) = self.linear(x, depth + 1)?;
                Some((
                    c.checked_mul(k)?,
                    terms
                        .into_iter()
                        .map(|(i, t)| Some((i, t.checked_mul(k)?)))
                        .collect::<Option<_>>()?,
                ))
            }
            _ => None,
        }
    }

    /// The bytes of one element of `shape` as a formula, built as
    /// `SizeVars::bytes` builds a type's, when every length is known.
    pub(crate) fn exact_bytes(&self, shape: &Shape) -> Option<Bytes> {
        Some(match shape {
            Shape::Real | Shape::Int => Bytes::Const(8),
            Shape::Tuple(ss) => sum(ss
                .iter()
                .map(|s| self.exact_bytes(s))
                .collect::<Option<Vec<_>>>()?),
            Shape::Array(len, elem) => self.exact_len(*len)?.times(self.exact_bytes(elem)?),
        })
    }

    /// The bytes of `n` elements of `shape`, as `SizeVars::array` builds
    /// them, when known.
    pub(crate) fn exact_array_bytes(&self, n: Value, shape: &Shape) -> Option<Bytes> {
        Some(self.exact_len(n)?.times(self.exact_bytes(shape)?))
    }
}

/// Emits the guard at the current point: fails with `SizeOverflow` unless
/// every length and product of `bound` at `sizes` (the size variables'
/// values, checked in range) is below 2⁶³, and with `WorkspaceTooSmall`
/// (`info` the bound) unless `workspace` bytes hold it. Sums and maxima
/// saturate at 2⁶⁴ − 1, which no workspace holds.
pub(crate) fn emit(
    b: &mut FunctionBuilder,
    bound: &Bytes,
    sizes: &[Value],
    workspace: Value,
    fail: cranelift_codegen::ir::Block,
) {
    let mut e = Emitter {
        b,
        sizes,
        ok: None,
        memo: HashMap::new(),
        prefixes: HashMap::new(),
    };
    let need = e.value(bound);
    if let Some(ok) = e.ok {
        let zero = e.b.ins().iconst(types::I64, 0);
        branch(e.b, ok, Status::SizeOverflow, zero, fail);
    }
    let fits =
        e.b.ins()
            .icmp(IntCC::UnsignedLessThanOrEqual, need, workspace);
    branch(e.b, fits, Status::WorkspaceTooSmall, need, fail);
}

fn branch(
    b: &mut FunctionBuilder,
    ok: Value,
    status: Status,
    info: Value,
    fail: cranelift_codegen::ir::Block,
) {
    let cont = b.create_block();
    let code = b.ins().iconst(types::I64, status as i64);
    let args = [BlockArg::from(code), BlockArg::from(info)];
    b.ins().brif(ok, cont, &[], fail, &args);
    // In the layout where the guard is, before the body it continues to.
    let here = b.current_block().expect("the guard's block");
    b.insert_block_after(cont, here);
    b.switch_to_block(cont);
    b.seal_block(cont);
}

/// Evaluates a formula once per distinct part: the high-water marks
/// share the allocations live under them, so a sum is continued from the
/// longest prefix already summed.
struct Emitter<'b, 'f, 's> {
    b: &'b mut FunctionBuilder<'f>,
    sizes: &'s [Value],
    /// The conjunction of the conditions (each part below 2⁶³), `None`
    /// while there is none.
    ok: Option<Value>,
    memo: HashMap<Bytes, Value>,
    /// Sums already begun, as a trie: (prefix, next term) ↦ (the longer
    /// prefix, its sum). Prefix 0 is the empty one.
    prefixes: HashMap<(usize, Bytes), (usize, Value)>,
}

impl Emitter<'_, '_, '_> {
    fn require(&mut self, cond: Value) {
        self.ok = Some(match self.ok {
            None => cond,
            Some(all) => self.b.ins().band(all, cond),
        });
    }

    fn below_2_63(&mut self, v: Value) {
        let c = self
            .b
            .ins()
            .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, v, 0);
        self.require(c);
    }

    fn saturating_add(&mut self, x: Value, y: Value) -> Value {
        let (v, over) = self.b.ins().uadd_overflow(x, y);
        let max = self.b.ins().iconst(types::I64, -1);
        self.b.ins().select(over, max, v)
    }

    fn value(&mut self, x: &Bytes) -> Value {
        if let Some(&v) = self.memo.get(x) {
            return v;
        }
        let v = self.emit(x);
        self.memo.insert(x.clone(), v);
        v
    }

    fn emit(&mut self, x: &Bytes) -> Value {
        match x {
            Bytes::Const(c) => {
                let v = self.b.ins().iconst(types::I64, *c as i64);
                if *c > i64::MAX as u64 {
                    self.below_2_63(v);
                }
                v
            }
            Bytes::Len(c, terms) => self.length(*c, terms),
            Bytes::Sum(xs) => {
                // Along the trie while the prefix was summed before, then
                // on from there: one addition per term not shared.
                let (mut prefix, mut acc) = (0, None);
                for x in xs {
                    let key = (prefix, x.clone());
                    let (next, v) = match self.prefixes.get(&key) {
                        Some(&seen) => seen,
                        None => {
                            let v = self.value(x);
                            let v = match acc {
                                None => v,
                                Some(a) => self.saturating_add(a, v),
                            };
                            let next = self.prefixes.len() + 1;
                            self.prefixes.insert(key, (next, v));
                            (next, v)
                        }
                    };
                    (prefix, acc) = (next, Some(v));
                }
                acc.unwrap_or_else(|| self.b.ins().iconst(types::I64, 0))
            }
            Bytes::Product(x, y) => {
                let (x, y) = (self.value(x), self.value(y));
                let high = self.b.ins().umulhi(x, y);
                let v = self.b.ins().imul(x, y);
                let high_zero = self.b.ins().icmp_imm_s(IntCC::Equal, high, 0);
                self.require(high_zero);
                self.below_2_63(v);
                v
            }
            Bytes::Max(xs) => {
                let mut acc = self.value(&xs[0]);
                for x in &xs[1..] {
                    let v = self.value(x);
                    acc = self.b.ins().umax(acc, v);
                }
                acc
            }
            Bytes::CeilDiv(x, k) => {
                let v = self.value(x);
                let q = self.b.ins().udiv_imm_u(v, *k as i64);
                let r = self.b.ins().urem_imm_u(v, *k as i64);
                let rest = self.b.ins().icmp_imm_s(IntCC::NotEqual, r, 0);
                let rest = self.b.ins().uextend(types::I64, rest);
                self.b.ins().iadd(q, rest)
            }
        }
    }

    /// `max(0, c + Σ k·size)`, the form required to fit in 64 bits.
    /// Sizes are in `0 ..= 2⁴⁰`: when the coefficients are small enough
    /// that no partial sum leaves 62 bits, in 64-bit arithmetic, fitting
    /// by construction; otherwise in 128 bits, and checked.
    fn length(&mut self, c: i64, terms: &[(usize, i64)]) -> Value {
        let reach = terms
            .iter()
            .fold(u128::from(c.unsigned_abs()), |acc, &(_, k)| {
                acc + u128::from(k.unsigned_abs()) * (1u128 << 40)
            });
        if let ([(i, 1)], 0) = (terms, c) {
            return self.sizes[*i];
        }
        if reach < 1u128 << 62 {
            let mut acc = self.b.ins().iconst(types::I64, c);
            for &(i, k) in terms {
                let term = match k {
                    1 => self.sizes[i],
                    _ => self.b.ins().imul_imm_s(self.sizes[i], k),
                };
                acc = self.b.ins().iadd(acc, term);
            }
            let zero = self.b.ins().iconst(types::I64, 0);
            return self.b.ins().smax(acc, zero);
        }
        let wide = |b: &mut FunctionBuilder, v: Value| b.ins().sextend(types::I128, v);
        let c = self.b.ins().iconst(types::I64, c);
        let mut acc = wide(self.b, c);
        for &(i, k) in terms {
            let s = wide(self.b, self.sizes[i]);
            let k = self.b.ins().iconst(types::I64, k);
            let k = wide(self.b, k);
            let term = self.b.ins().imul(s, k);
            acc = self.b.ins().iadd(acc, term);
        }
        // The form must fit in 64 bits, negative or not: the code
        // computes it modulo 2⁶⁴, so only then is its value the form's
        // (and `max(0, ·)` of it below 2⁶³).
        let (lo, hi) = self.b.ins().isplit(acc);
        let sign = self.b.ins().sshr_imm_s(lo, 63);
        let fits = self.b.ins().icmp(IntCC::Equal, hi, sign);
        self.require(fits);
        let zero = self.b.ins().iconst(types::I64, 0);
        self.b.ins().smax(lo, zero)
    }
}
