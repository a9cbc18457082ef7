//! The native lowering of every scalar primitive, in one table
//! ([`lower_prim`]), the column of [`gradlift_lang::prim`] for this backend.
//!
//! Arithmetic, `neg`, `sqrt` and `abs` are Cranelift instructions; `min`,
//! `max` and `sign` are comparisons and `select`s that reproduce
//! [`Prim::eval_real`] exactly (`min(a, b) = if b < a then b else a`, so a
//! tie or a NaN keeps the first argument — not `fmin`); the transcendental
//! functions call the [`Libm`] shims, which are the Rust standard library's
//! `f64` methods the interpreter uses, so results are bit-identical.
//! Comparisons give an `i8` condition; `and`, `or`, `not` combine them
//! (both operands are evaluated, as in the interpreter: they are pure).

use cranelift_codegen::ir::condcodes::FloatCC;
use cranelift_codegen::ir::{types, FuncRef, InstBuilder, Value};
use cranelift_frontend::FunctionBuilder;
use gradlift_lang::Prim;

/// The functions generated code calls, registered once with the JIT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Libm {
    Sin,
    Cos,
    Tan,
    Exp,
    Log,
    Tanh,
    Pow,
}

impl Libm {
    /// Every shim.
    pub const ALL: [Libm; 7] = [
        Libm::Sin,
        Libm::Cos,
        Libm::Tan,
        Libm::Exp,
        Libm::Log,
        Libm::Tanh,
        Libm::Pow,
    ];

    /// The C library's function it computes (imported by object files).
    pub fn c_name(self) -> &'static str {
        match self {
            Libm::Sin => "sin",
            Libm::Cos => "cos",
            Libm::Tan => "tan",
            Libm::Exp => "exp",
            Libm::Log => "log",
            Libm::Tanh => "tanh",
            Libm::Pow => "pow",
        }
    }

    /// The symbol it is registered under, its arity and its address.
    pub fn symbol(self) -> (&'static str, usize, *const u8) {
        match self {
            Libm::Sin => ("gradlift_sin", 1, shim_sin as *const u8),
            Libm::Cos => ("gradlift_cos", 1, shim_cos as *const u8),
            Libm::Tan => ("gradlift_tan", 1, shim_tan as *const u8),
            Libm::Exp => ("gradlift_exp", 1, shim_exp as *const u8),
            Libm::Log => ("gradlift_log", 1, shim_log as *const u8),
            Libm::Tanh => ("gradlift_tanh", 1, shim_tanh as *const u8),
            Libm::Pow => ("gradlift_pow", 2, shim_pow as *const u8),
        }
    }
}

extern "C" fn shim_sin(x: f64) -> f64 {
    x.sin()
}
extern "C" fn shim_cos(x: f64) -> f64 {
    x.cos()
}
extern "C" fn shim_tan(x: f64) -> f64 {
    x.tan()
}
extern "C" fn shim_exp(x: f64) -> f64 {
    x.exp()
}
extern "C" fn shim_log(x: f64) -> f64 {
    x.ln()
}
extern "C" fn shim_tanh(x: f64) -> f64 {
    x.tanh()
}
extern "C" fn shim_pow(x: f64, y: f64) -> f64 {
    x.powf(y)
}

/// Emits primitive `p` applied to `args` (reals, or conditions for the
/// logical primitives). `libm` gives the imported shims of this function.
pub(crate) fn lower_prim(
    b: &mut FunctionBuilder,
    libm: &dyn Fn(Libm) -> FuncRef,
    p: Prim,
    args: &[Value],
) -> Value {
    let call = |b: &mut FunctionBuilder, f: Libm| {
        let inst = b.ins().call(libm(f), args);
        b.inst_results(inst)[0]
    };
    match p {
        Prim::Add => b.ins().fadd(args[0], args[1]),
        Prim::Sub => b.ins().fsub(args[0], args[1]),
        Prim::Mul => b.ins().fmul(args[0], args[1]),
        Prim::Div => b.ins().fdiv(args[0], args[1]),
        Prim::Neg => b.ins().fneg(args[0]),
        Prim::Sqrt => b.ins().sqrt(args[0]),
        Prim::Abs => b.ins().fabs(args[0]),
        Prim::Sin => call(b, Libm::Sin),
        Prim::Cos => call(b, Libm::Cos),
        Prim::Tan => call(b, Libm::Tan),
        Prim::Exp => call(b, Libm::Exp),
        Prim::Log => call(b, Libm::Log),
        Prim::Tanh => call(b, Libm::Tanh),
        Prim::Pow => call(b, Libm::Pow),
        Prim::Min => {
            let (a, c) = (args[0], args[1]);
            let take_second = b.ins().fcmp(FloatCC::LessThan, c, a);
            b.ins().select(take_second, c, a)
        }
        Prim::Max => {
            let (a, c) = (args[0], args[1]);
            let take_second = b.ins().fcmp(FloatCC::GreaterThan, c, a);
            b.ins().select(take_second, c, a)
        }
        Prim::Sign => {
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
        Prim::Lt => b.ins().fcmp(FloatCC::LessThan, args[0], args[1]),
        Prim::Le => b.ins().fcmp(FloatCC::LessThanOrEqual, args[0], args[1]),
        Prim::Gt => b.ins().fcmp(FloatCC::GreaterThan, args[0], args[1]),
        Prim::Ge => b.ins().fcmp(FloatCC::GreaterThanOrEqual, args[0], args[1]),
        Prim::Eq => b.ins().fcmp(FloatCC::Equal, args[0], args[1]),
        Prim::Ne => b.ins().fcmp(FloatCC::NotEqual, args[0], args[1]),
        Prim::And => b.ins().band(args[0], args[1]),
        Prim::Or => b.ins().bor(args[0], args[1]),
        Prim::Not => b.ins().bxor_imm_s(args[0], 1),
    }
}

/// The Cranelift type of a real.
pub(crate) const REAL: types::Type = types::F64;
