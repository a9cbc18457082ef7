//! The workspace a call needs, as a function of its sizes.
//!
//! Every array the generated code builds is taken from the workspace by a
//! bump allocator, and the only memory ever given back is a loop step's
//! temporaries, released when the step ends ([`Translator::mark`] and
//! [`Translator::release`]). The lowering mirrors this as it emits the
//! code: each allocation pushes its size in bytes — a formula in the size
//! variables, read off the types, where every length is a size expression
//! — on a stack ([`Usage`]), each release pops back to its mark, and the
//! high-water marks are kept. Their maximum is a [`WorkspaceBound`]: an
//! upper bound of the bytes any call at given sizes uses, computed once at
//! compile time and evaluated at each new set of sizes.
//!
//! It is an upper bound, not the exact need: the two sides of an `if` are
//! both counted, and a branch not taken allocates nothing. A loop whose
//! step kept memory past its end would make the count wrong (the code
//! runs once per iteration, the lowering sees it once); the lowering never
//! does that, and [`Usage`] checks it: such a function gets no bound, and
//! callers fall back on growing the workspace when the code asks.
//!
//! [`Translator::mark`]: crate::lower::Translator::mark
//! [`Translator::release`]: crate::lower::Translator::release

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, InstBuilder, Value};
use gradlift_lang::syntax::{Name, Size, Type};

/// Bytes as a function of the size variables (by their index in the
/// function's size-variable order).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Bytes {
    /// A constant.
    Const(u64),
    /// `max(0, constant + Σ coefficient × size)`.
    Len(i64, Vec<(usize, i64)>),
    /// A sum.
    Sum(Vec<Bytes>),
    /// A product.
    Product(Box<Bytes>, Box<Bytes>),
    /// The largest.
    Max(Vec<Bytes>),
    /// `⌈x / k⌉`, `k > 0`.
    CeilDiv(Box<Bytes>, u64),
}

impl Bytes {
    /// The value at `sizes` (saturating: a count past `u64::MAX` is
    /// `u64::MAX`).
    pub fn eval(&self, sizes: &[i64]) -> u64 {
        match self {
            Bytes::Const(c) => *c,
            Bytes::Len(c, terms) => {
                let mut v = i128::from(*c);
                for &(k, a) in terms {
                    let s = sizes.get(k).copied().unwrap_or(0);
                    v = v.saturating_add(i128::from(a).saturating_mul(i128::from(s)));
                }
                u64::try_from(v.max(0)).unwrap_or(u64::MAX)
            }
            Bytes::Sum(xs) => xs.iter().fold(0u64, |a, x| a.saturating_add(x.eval(sizes))),
            Bytes::Product(a, b) => {
                let x = a.eval(sizes);
                if x == 0 {
                    0
                } else {
                    x.saturating_mul(b.eval(sizes))
                }
            }
            Bytes::Max(xs) => xs.iter().map(|x| x.eval(sizes)).max().unwrap_or(0),
            Bytes::CeilDiv(x, k) => x.eval(sizes).div_ceil(*k),
        }
    }

    /// `a + b`, constants folded.
    pub fn plus(self, other: Bytes) -> Bytes {
        sum(vec![self, other])
    }

    /// `a × b`, constants folded.
    pub fn times(self, other: Bytes) -> Bytes {
        match (self, other) {
            (Bytes::Const(0), _) | (_, Bytes::Const(0)) => Bytes::Const(0),
            (Bytes::Const(1), x) | (x, Bytes::Const(1)) => x,
            (Bytes::Const(a), Bytes::Const(b)) => Bytes::Const(a.saturating_mul(b)),
            (a, b) => Bytes::Product(Box::new(a), Box::new(b)),
        }
    }
}

/// The sum of `xs`, nested sums flattened and constants folded.
pub(crate) fn sum(xs: Vec<Bytes>) -> Bytes {
    let mut constant = 0u64;
    let mut rest = Vec::new();
    let push = |x: Bytes, rest: &mut Vec<Bytes>, constant: &mut u64| match x {
        Bytes::Const(c) => *constant = constant.saturating_add(c),
        x => rest.push(x),
    };
    for x in xs {
        match x {
            Bytes::Sum(ys) => ys
                .into_iter()
                .for_each(|y| push(y, &mut rest, &mut constant)),
            x => push(x, &mut rest, &mut constant),
        }
    }
    if constant > 0 {
        rest.push(Bytes::Const(constant));
    }
    match rest.len() {
        0 => Bytes::Const(0),
        1 => rest.pop().expect("one term"),
        _ => Bytes::Sum(rest),
    }
}

/// The size variables of a function, in ABI order: how [`Bytes`] refers
/// to them.
pub(crate) struct SizeVars<'a>(pub &'a [Name]);

impl SizeVars<'_> {
    /// `max(0, s)`.
    pub fn len(&self, s: &Size) -> Bytes {
        if s.terms.is_empty() {
            return Bytes::Const(s.constant.max(0) as u64);
        }
        let mut terms = Vec::with_capacity(s.terms.len());
        for (name, &k) in &s.terms {
            match self.0.iter().position(|v| v == name) {
                Some(i) => terms.push((i, k)),
                // Not a size variable of the function (cannot happen in a
                // checked term): a length this bound cannot state.
                None => return Bytes::Const(u64::MAX),
            }
        }
        Bytes::Len(s.constant, terms)
    }

    /// The bytes of a value of type `ty` (as [`crate::values::Shape`]
    /// lays it out: 8 a real, tuples and array elements inline).
    pub fn bytes(&self, ty: &Type) -> Bytes {
        match ty {
            Type::Real | Type::Int => Bytes::Const(8),
            Type::Tuple(ts) => sum(ts.iter().map(|t| self.bytes(t)).collect()),
            Type::Array(elem, n) => self.len(n).times(self.bytes(elem)),
            // No layout (the lowering refuses them).
            Type::Bool | Type::Fun(..) => Bytes::Const(0),
        }
    }

    /// The bytes of `n` elements of type `elem`.
    pub fn array(&self, n: &Size, elem: &Type) -> Bytes {
        self.len(n).times(self.bytes(elem))
    }
}

/// The workspace in use as the code is lowered: the sizes of the
/// allocations live at the current point, oldest first, and the high-water
/// marks seen so far.
#[derive(Default)]
pub(crate) struct Usage {
    live: Vec<Bytes>,
    peaks: Vec<Bytes>,
    /// Whether anything was allocated since the last high-water mark.
    grown: bool,
    /// Why there is no bound, if there is none.
    lost: Option<String>,
}

impl Usage {
    /// An allocation of `bytes`.
    pub fn alloc(&mut self, bytes: Bytes) {
        self.live.push(bytes);
        self.grown = true;
    }

    /// The current depth, for [`Usage::release`].
    pub fn depth(&self) -> usize {
        self.live.len()
    }

    /// Everything allocated since `depth` is given back.
    pub fn release(&mut self, depth: usize) {
        self.peak();
        self.live.truncate(depth);
    }

    /// A loop's step that ends at `after`, having started at `before`:
    /// if it keeps memory, the step's allocations add up over the
    /// iterations, which this count does not follow.
    pub fn step_ends(&mut self, before: usize, what: &str) {
        if self.live.len() > before && self.lost.is_none() {
            self.lost = Some(format!("{what} keeps workspace memory past its end"));
        }
    }

    fn peak(&mut self) {
        if self.grown {
            self.peaks.push(sum(self.live.clone()));
            self.grown = false;
        }
    }

    /// The bound, or why there is none.
    pub fn finish(mut self) -> Result<Bytes, String> {
        self.peak();
        if let Some(why) = self.lost {
            return Err(why);
        }
        let mut peaks = self.peaks;
        peaks.dedup();
        Ok(match peaks.len() {
            0 => Bytes::Const(0),
            1 => peaks.pop().expect("one peak"),
            _ => Bytes::Max(peaks),
        })
    }
}

/// An upper bound of the workspace bytes a call needs, as a function of
/// the sizes (see the module documentation): derived when the function is
/// compiled.
#[derive(Clone, Debug)]
pub struct WorkspaceBound {
    bytes: Result<Bytes, String>,
}

impl WorkspaceBound {
    pub(crate) fn new(bytes: Result<Bytes, String>) -> WorkspaceBound {
        WorkspaceBound { bytes }
    }

    /// The bytes a call with these size words (the ABI's `args[0..]`, in
    /// [`crate::Compiled::signature`]'s size-variable order) uses at most,
    /// or `None` when this function has no bound.
    pub fn at(&self, sizes: &[i64]) -> Option<u64> {
        self.bytes.as_ref().ok().map(|b| b.eval(sizes))
    }

    /// The formula, if there is one.
    pub(crate) fn formula(&self) -> Option<&Bytes> {
        self.bytes.as_ref().ok()
    }

    /// Why the function has no bound, if it has none.
    pub fn missing(&self) -> Option<&str> {
        self.bytes.as_ref().err().map(String::as_str)
    }
}

/// Emits code computing `bytes` from the size words at `args` (the ABI's
/// first argument), saturating at `i64::MAX`: the body of the
/// `NAME_workspace` function of an object file.
pub(crate) fn emit(
    b: &mut cranelift_frontend::FunctionBuilder,
    bytes: &Bytes,
    args: Value,
) -> Value {
    let v = emit_u64(b, bytes, args);
    let max = b.ins().iconst(types::I64, i64::MAX);
    b.ins().umin(v, max)
}

fn emit_u64(b: &mut cranelift_frontend::FunctionBuilder, x: &Bytes, args: Value) -> Value {
    let saturate = |b: &mut cranelift_frontend::FunctionBuilder, (v, over): (Value, Value)| {
        let max = b.ins().iconst(types::I64, -1);
        b.ins().select(over, max, v)
    };
    match x {
        Bytes::Const(c) => b.ins().iconst(types::I64, *c as i64),
        Bytes::Len(c, terms) => {
            // In 128 bits: sizes are taken in `0 ..= 2^40` (the function
            // itself refuses others), coefficients are 64-bit.
            let wide = |b: &mut cranelift_frontend::FunctionBuilder, k: i64| {
                let k = b.ins().iconst(types::I64, k);
                b.ins().sextend(types::I128, k)
            };
            let mut acc = wide(b, *c);
            for &(i, k) in terms {
                let s = b
                    .ins()
                    .load(types::I64, crate::values::mem(), args, 8 * i as i32);
                let (zero, limit) = (
                    b.ins().iconst(types::I64, 0),
                    b.ins().iconst(types::I64, crate::abi::MAX_LEN),
                );
                let s = b.ins().smax(s, zero);
                let s = b.ins().smin(s, limit);
                let s = b.ins().sextend(types::I128, s);
                let k = wide(b, k);
                let term = b.ins().imul(s, k);
                acc = b.ins().iadd(acc, term);
            }
            // max(0, acc), at most u64::MAX: from the high word's sign
            // and whether it is zero.
            let (lo, hi) = b.ins().isplit(acc);
            let zero = b.ins().iconst(types::I64, 0);
            let max = b.ins().iconst(types::I64, -1);
            let high = b.ins().icmp_imm_s(IntCC::NotEqual, hi, 0);
            let v = b.ins().select(high, max, lo);
            let negative = b.ins().icmp_imm_s(IntCC::SignedLessThan, hi, 0);
            b.ins().select(negative, zero, v)
        }
        Bytes::Sum(xs) => {
            let mut acc = b.ins().iconst(types::I64, 0);
            for x in xs {
                let v = emit_u64(b, x, args);
                let r = b.ins().uadd_overflow(acc, v);
                acc = saturate(b, r);
            }
            acc
        }
        Bytes::Product(x, y) => {
            let (x, y) = (emit_u64(b, x, args), emit_u64(b, y, args));
            let r = b.ins().umul_overflow(x, y);
            saturate(b, r)
        }
        Bytes::Max(xs) => {
            let mut acc = b.ins().iconst(types::I64, 0);
            for x in xs {
                let v = emit_u64(b, x, args);
                acc = b.ins().umax(acc, v);
            }
            acc
        }
        Bytes::CeilDiv(x, k) => {
            let v = emit_u64(b, x, args);
            let q = b.ins().udiv_imm_u(v, *k as i64);
            let r = b.ins().urem_imm_u(v, *k as i64);
            let rest = b.ins().icmp_imm_s(IntCC::NotEqual, r, 0);
            let rest = b.ins().uextend(types::I64, rest);
            b.ins().iadd(q, rest)
        }
    }
}
