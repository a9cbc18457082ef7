//! The scalar primitives, each declared once, in one table.
//!
//! A primitive is a variant of [`Prim`] and a row of [`Prim::info`], a
//! [`PrimInfo`] whose every field is a column every stage reads:
//!
//! | column | read by |
//! | --- | --- |
//! | `name`, `arity`, `fixity` | lexer, parser, printer, type checker |
//! | `semantics`: evaluation and partial derivatives (reals), or the comparison | interpreter, constant folding, reverse mode (`rules/`), forward mode (`forward.rs`: the tangent Σᵢ ∂ᵢ·ṫᵢ, from the same partials) |
//! | `semantics`: the domain of each argument | the test generator (`testing.rs`) |
//! | `cost`: (MOVES, ADDS, MULTS, NLOPS) of Figure 11 | the cost model (`cost.rs`) |
//! | `cheap`: an instruction or a short branch-free sequence | the simplifier (store or recompute), the JIT (compute both sides of an `if` and `select`) |
//! | `lowering`: an instruction, an inline sequence, or a call | the JIT (`prims.rs`), object files |
//!
//! A row is a struct literal, so a primitive without every column does not
//! compile; the enum and [`Prim::ALL`] are one macro, so a variant cannot
//! be missing from `ALL`; and the backends match on [`Instruction`] and
//! [`Sequence`] without a wildcard, so a lowering the JIT does not know
//! does not compile either. The runtime tape (`gradlift-tape`) keys its
//! generic rules on [`Prim`], also without a wildcard.
//!
//! Semantics: IEEE 754 double arithmetic; the C library's functions where
//! the lowering is a [`Lowering::Call`] (the interpreter calls the very
//! shim the JIT calls, so results are bit-identical); gradlift's own `exp`
//! and `tanh` ([`crate::exp`]), which the JIT emits inline.

use crate::build::*;
use crate::syntax::Expr;
use std::fmt;

/// Declares the enum and its list from one list of variants.
macro_rules! primitives {
    ($($(#[$doc:meta])* $variant:ident),* $(,)?) => {
        /// A scalar primitive.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Prim {
            $($(#[$doc])* $variant,)*
        }

        impl Prim {
            /// Every primitive, in declaration order.
            pub const ALL: [Prim; [$(Prim::$variant),*].len()] = [$(Prim::$variant),*];
        }
    };
}

primitives! {
    /// `a + b`
    Add,
    /// `a - b`
    Sub,
    /// `a * b`
    Mul,
    /// `a / b`
    Div,
    /// `-a`
    Neg,
    /// `sin(a)`
    Sin,
    /// `cos(a)`
    Cos,
    /// `tan(a)`
    Tan,
    /// `atan(a)`
    Atan,
    /// `atan2(y, x)`: the angle of (x, y)
    Atan2,
    /// `exp(a)`
    Exp,
    /// `expm1(a)`: exp(a) - 1, exact near 0
    Expm1,
    /// `log(a)`, the natural logarithm
    Log,
    /// `log1p(a)`: log(1 + a), exact near 0
    Log1p,
    /// `sqrt(a)`
    Sqrt,
    /// `tanh(a)`
    Tanh,
    /// `sigmoid(a)`: 1 / (1 + exp(-a)), computed stably
    Sigmoid,
    /// `softplus(a)`: log(1 + exp(a)), computed stably
    Softplus,
    /// `erf(a)`: the error function
    Erf,
    /// `lgamma(a)`: log |Γ(a)|
    Lgamma,
    /// `digamma(a)`: ψ(a), the derivative of `lgamma`
    Digamma,
    /// `polygamma(n, a)`: ψ⁽ⁿ⁾(a), n a whole number
    Polygamma,
    /// `abs(a)`
    Abs,
    /// `sign(a)`: -1, 0 or 1
    Sign,
    /// `floor(a)`: the largest whole number not above a
    Floor,
    /// `ceil(a)`: the smallest whole number not below a
    Ceil,
    /// `round(a)`: the nearest whole number, halves away from zero
    Round,
    /// `pow(a, b)`
    Pow,
    /// `min(a, b)`
    Min,
    /// `max(a, b)`
    Max,
    /// `a < b`
    Lt,
    /// `a <= b`
    Le,
    /// `a > b`
    Gt,
    /// `a >= b`
    Ge,
    /// `a == b`
    Eq,
    /// `a != b`
    Ne,
    /// `c and d`
    And,
    /// `c or d`
    Or,
    /// `not c`
    Not,
    /// `i + j` on integers (wrapping)
    IAdd,
    /// `i - j` on integers (wrapping)
    ISub,
    /// `i * j` on integers (wrapping)
    IMul,
    /// `i // j`: the quotient rounded down (an error when `j` is 0)
    IDiv,
    /// `i % j`: `i - j * (i // j)`, of the sign of `j` (an error when `j` is 0)
    IMod,
    /// `-i` on integers (wrapping)
    INeg,
    /// `min(i, j)` on integers
    IMin,
    /// `max(i, j)` on integers
    IMax,
    /// `i < j` on integers
    ILt,
    /// `i <= j` on integers
    ILe,
    /// `i > j` on integers
    IGt,
    /// `i >= j` on integers
    IGe,
    /// `i == j` on integers
    IEq,
    /// `i != j` on integers
    INe,
    /// `real(i)`: the integer as a real (rounded to nearest above 2^53)
    ToReal,
    /// `int(x)`: the real rounded toward zero (an error when it is NaN or
    /// beyond ±2^63)
    ToInt,
}

/// What a primitive consumes and produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrimKind {
    /// Reals to a real.
    Real,
    /// Two reals to a condition.
    Compare,
    /// Conditions to a condition.
    Logic,
    /// Integers to an integer.
    Int,
    /// Two integers to a condition.
    IntCompare,
    /// An integer to a real (`real`).
    ToReal,
    /// A real to an integer (`int`).
    ToInt,
}

impl PrimKind {
    /// The type of each argument (`None`: a condition).
    pub fn arg_type(self) -> Option<crate::syntax::Type> {
        use crate::syntax::Type;
        match self {
            PrimKind::Real | PrimKind::Compare | PrimKind::ToInt => Some(Type::Real),
            PrimKind::Int | PrimKind::IntCompare | PrimKind::ToReal => Some(Type::Int),
            PrimKind::Logic => None,
        }
    }

    /// The type of the result.
    pub fn result_type(self) -> crate::syntax::Type {
        use crate::syntax::Type;
        match self {
            PrimKind::Real | PrimKind::ToReal => Type::Real,
            PrimKind::Int | PrimKind::ToInt => Type::Int,
            PrimKind::Compare | PrimKind::IntCompare | PrimKind::Logic => Type::Bool,
        }
    }
}

/// How a primitive is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fixity {
    /// `a op b`, with a binding power (higher binds tighter).
    Infix(u8),
    /// `op a` (unary minus, `not`).
    Prefix,
    /// `name(a, ...)`.
    Call,
}

/// Where an argument's values keep a primitive smooth and finite, for the
/// test generator: it shapes a generated argument to lie there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Domain {
    /// Every real.
    Any,
    /// Reals above 0 (`log`, `sqrt`).
    Positive,
    /// Reals of moderate size, where the result neither overflows nor
    /// nears a pole (`exp`, `tan`): the generator takes a sine.
    Bounded,
    /// A whole number from 0 to 3, the order of a derivative (`polygamma`):
    /// the generator writes a constant.
    Order,
}

/// The meaning of a primitive.
#[derive(Clone, Copy)]
pub enum Semantics {
    /// Reals to a real.
    Real {
        /// The value.
        eval: fn(&[f64]) -> f64,
        /// The partial derivatives ∂ᵢ p(args) as terms over the arguments
        /// and the result (the primal value, reused where the derivative is
        /// a function of it: `exp`, `sqrt`, `tanh`, `tan`, `/`).
        partials: fn(&[Expr], &Expr) -> Vec<Expr>,
        /// Where each argument keeps it smooth and finite.
        domain: &'static [Domain],
    },
    /// Two reals to a condition.
    Compare(fn(f64, f64) -> bool),
    /// Conditions to a condition.
    Logic,
    /// Integers to an integer; `None` for a division by zero.
    Int(fn(&[i64]) -> Option<i64>),
    /// Two integers to a condition.
    IntCompare(fn(i64, i64) -> bool),
    /// `real(i)`.
    ToReal,
    /// `int(x)`.
    ToInt,
}

/// A function with the C calling convention that native code calls.
#[derive(Clone, Copy, Debug)]
pub enum Shim {
    /// Of one real.
    Unary(extern "C" fn(f64) -> f64),
    /// Of two reals.
    Binary(extern "C" fn(f64, f64) -> f64),
}

impl Shim {
    /// Its address, for the JIT's symbol table.
    pub fn address(self) -> *const u8 {
        match self {
            Shim::Unary(f) => f as *const u8,
            Shim::Binary(f) => f as *const u8,
        }
    }

    /// Its number of arguments.
    pub fn arity(self) -> usize {
        match self {
            Shim::Unary(_) => 1,
            Shim::Binary(_) => 2,
        }
    }
}

/// One instruction of the backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Instruction {
    Fadd,
    Fsub,
    Fmul,
    Fdiv,
    Fneg,
    Sqrt,
    Fabs,
    Floor,
    Ceil,
}

/// A sequence of instructions emitted inline, which computes exactly what
/// the primitive's evaluation computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sequence {
    /// [`crate::exp::exp`] with its table.
    Exp,
    /// [`crate::exp::tanh`] with the table of `exp`.
    Tanh,
    /// `if b < a then b else a`.
    Min,
    /// `if b > a then b else a`.
    Max,
    /// `if a > 0 then 1 else if a < 0 then -1 else a * 0`.
    Sign,
    /// `e = exp(-|a|)`, then `1 / (1 + e)` for `a >= 0`, else `e / (1 + e)`.
    Sigmoid,
    /// `max(a, 0) + log1p(exp(-|a|))`, calling `log1p`.
    Softplus,
}

impl Sequence {
    /// Whether it reads the table of `exp` ([`crate::exp::DATA`]).
    pub fn reads_exp_table(self) -> bool {
        matches!(
            self,
            Sequence::Exp | Sequence::Tanh | Sequence::Sigmoid | Sequence::Softplus
        )
    }

    /// The primitives it calls (imported where it is used).
    pub fn calls(self) -> &'static [Prim] {
        match self {
            Sequence::Softplus => &[Prim::Log1p],
            Sequence::Exp | Sequence::Tanh | Sequence::Min | Sequence::Max => &[],
            Sequence::Sign | Sequence::Sigmoid => &[],
        }
    }
}

/// How native code computes a primitive.
#[derive(Clone, Copy, Debug)]
pub enum Lowering {
    /// One instruction.
    Instruction(Instruction),
    /// A sequence emitted inline.
    Inline(Sequence),
    /// A call: the JIT calls `shim` (registered as `symbol`), which is the
    /// function the interpreter evaluates; an object file imports `c_name`
    /// from the C library.
    Call {
        /// The function.
        shim: Shim,
        /// Its name in the JIT's symbol table.
        symbol: &'static str,
        /// The C library's function computing the same (`None`: the C
        /// library has none, and object files cannot hold the primitive).
        c_name: Option<&'static str>,
    },
    /// A comparison of two reals, ordered as IEEE 754 says (every
    /// comparison with NaN false but `!=`).
    Compare(Comparison),
    /// A logical connective of conditions (both operands evaluated: they
    /// are pure).
    Logic(Connective),
    /// An integer operation.
    Int(IntOp),
    /// A comparison of two integers.
    IntCompare(Comparison),
    /// An integer converted to a real (`fcvt_from_sint`).
    ToReal,
    /// A real rounded toward zero to an integer, after a check that it is
    /// in range (`fcvt_to_sint` would trap).
    ToInt,
}

/// An integer operation of the backend. `+ - *` and negation wrap;
/// division and remainder round the quotient down and are checked for a
/// zero divisor (and `i64::MIN // -1`, which wraps to `i64::MIN`, is not
/// given to the instruction, which would trap).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum IntOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Neg,
    Min,
    Max,
}

/// An ordered comparison of reals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Comparison {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

/// A logical connective.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Connective {
    And,
    Or,
    Not,
}

/// One row of the primitive table (see the module documentation).
#[derive(Clone, Copy)]
pub struct PrimInfo {
    /// The name a call or a bare reference uses (`sin`, `max`), or the
    /// operator symbol (`+`).
    pub name: &'static str,
    /// Number of arguments.
    pub arity: usize,
    /// Surface syntax.
    pub fixity: Fixity,
    /// Evaluation and derivatives.
    pub semantics: Semantics,
    /// Its cost in the model of Figure 11: (MOVES, ADDS, MULTS, NLOPS).
    pub cost: [u8; 4],
    /// An instruction or a short branch-free sequence: cheaper to compute
    /// again than to store, and safe to compute where its value may not be
    /// needed (both sides of a `select`). A library call, or an inline
    /// sequence with branches of its own, is not.
    pub cheap: bool,
    /// How native code computes it.
    pub lowering: Lowering,
    /// Whether the cheap-gradient bound of Theorem 5.4 is proven for it:
    /// an operation of the paper's cost model (arithmetic, and elementary
    /// functions whose derivatives are elementary functions). The
    /// primitives added since (`erf`, whose derivative is 2/√π·e^(−x²),
    /// `atan2`, …) are outside the proof; `gradlift cost` says so where
    /// the bound fails.
    pub paper: bool,
}

impl PrimInfo {
    /// Input and output sorts.
    pub fn kind(&self) -> PrimKind {
        match self.semantics {
            Semantics::Real { .. } => PrimKind::Real,
            Semantics::Compare(_) => PrimKind::Compare,
            Semantics::Logic => PrimKind::Logic,
            Semantics::Int(_) => PrimKind::Int,
            Semantics::IntCompare(_) => PrimKind::IntCompare,
            Semantics::ToReal => PrimKind::ToReal,
            Semantics::ToInt => PrimKind::ToInt,
        }
    }
}

impl fmt::Debug for PrimInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PrimInfo")
            .field("name", &self.name)
            .field("arity", &self.arity)
            .field("kind", &self.kind())
            .field("fixity", &self.fixity)
            .field("cost", &self.cost)
            .field("cheap", &self.cheap)
            .field("lowering", &self.lowering)
            .finish()
    }
}

/// Binding powers of the infix levels.
pub mod prec {
    /// `or`
    pub const OR: u8 = 1;
    /// `and`
    pub const AND: u8 = 2;
    /// `not` (prefix)
    pub const NOT: u8 = 3;
    /// comparisons (non-associative)
    pub const CMP: u8 = 4;
    /// `+ -`
    pub const ADD: u8 = 5;
    /// `* /`
    pub const MUL: u8 = 6;
    /// unary `-`
    pub const NEG: u8 = 7;
}

// The functions native code calls, which the interpreter calls too.
extern "C" fn c_sin(x: f64) -> f64 {
    x.sin()
}
extern "C" fn c_cos(x: f64) -> f64 {
    x.cos()
}
extern "C" fn c_tan(x: f64) -> f64 {
    x.tan()
}
extern "C" fn c_log(x: f64) -> f64 {
    x.ln()
}
extern "C" fn c_log1p(x: f64) -> f64 {
    x.ln_1p()
}
extern "C" fn c_expm1(x: f64) -> f64 {
    x.exp_m1()
}
extern "C" fn c_atan(x: f64) -> f64 {
    x.atan()
}
extern "C" fn c_atan2(y: f64, x: f64) -> f64 {
    y.atan2(x)
}
extern "C" {
    fn erf(x: f64) -> f64;
}
extern "C" fn c_erf(x: f64) -> f64 {
    // SAFETY: the C library's `erf`, a pure function of a real.
    unsafe { erf(x) }
}
extern "C" fn c_round(x: f64) -> f64 {
    x.round()
}
extern "C" fn c_pow(x: f64, y: f64) -> f64 {
    x.powf(y)
}

/// `if b < a then b else a`: a tie or a NaN keeps the first argument.
fn min(a: f64, b: f64) -> f64 {
    if b < a {
        b
    } else {
        a
    }
}

/// `if b > a then b else a`.
fn max(a: f64, b: f64) -> f64 {
    if b > a {
        b
    } else {
        a
    }
}

fn sign(a: f64) -> f64 {
    if a > 0.0 {
        1.0
    } else if a < 0.0 {
        -1.0
    } else {
        // 0 keeps its sign, NaN stays NaN.
        a * 0.0
    }
}

/// 1/(1 + e^(−x)) without overflow: with e = e^(−|x|), 1/(1 + e) for x ≥ 0
/// and e/(1 + e) below (the operations [`Sequence::Sigmoid`] emits).
fn sigmoid(x: f64) -> f64 {
    let e = crate::exp::exp(-x.abs());
    let t = 1.0 + e;
    if x >= 0.0 {
        1.0 / t
    } else {
        e / t
    }
}

/// log(1 + e^x) without overflow: max(x, 0) + log1p(e^(−|x|)) (the
/// operations [`Sequence::Softplus`] emits).
fn softplus(x: f64) -> f64 {
    max(x, 0.0) + c_log1p(crate::exp::exp(-x.abs()))
}

// Shapes of rows.
const ANY: &[Domain] = &[Domain::Any];
const ANY2: &[Domain] = &[Domain::Any, Domain::Any];
/// (MOVES, ADDS, MULTS, NLOPS) of Figure 11 for the usual classes.
const COST_ADD: [u8; 4] = [3, 1, 0, 0];
const COST_MUL: [u8; 4] = [3, 0, 1, 0];
const COST_UNARY: [u8; 4] = [2, 0, 0, 1];
const COST_BINARY_NL: [u8; 4] = [3, 0, 0, 1];

/// A call of `shim`, registered as `symbol`, the C library's `c_name`.
const fn call(shim: Shim, symbol: &'static str, c_name: &'static str) -> Lowering {
    Lowering::Call {
        shim,
        symbol,
        c_name: Some(c_name),
    }
}

/// A call of gradlift's own `shim`, which the C library does not have.
const fn call_own(shim: Shim, symbol: &'static str) -> Lowering {
    Lowering::Call {
        shim,
        symbol,
        c_name: None,
    }
}

/// A comparison.
const fn compare(name: &'static str, eval: fn(f64, f64) -> bool, c: Comparison) -> PrimInfo {
    PrimInfo {
        name,
        arity: 2,
        fixity: Fixity::Infix(prec::CMP),
        semantics: Semantics::Compare(eval),
        cost: COST_ADD,
        cheap: true,
        lowering: Lowering::Compare(c),
        paper: true,
    }
}

/// A logical connective.
const fn logic(name: &'static str, c: Connective, fixity: Fixity, cost: [u8; 4]) -> PrimInfo {
    PrimInfo {
        name,
        arity: if matches!(c, Connective::Not) { 1 } else { 2 },
        fixity,
        semantics: Semantics::Logic,
        cost,
        cheap: true,
        lowering: Lowering::Logic(c),
        paper: true,
    }
}

/// An integer operation (`cost`: an addition, or a multiplication for
/// `*`, `//`, `%`).
const fn int_op(
    name: &'static str,
    fixity: Fixity,
    eval: fn(&[i64]) -> Option<i64>,
    op: IntOp,
) -> PrimInfo {
    let multiplies = matches!(op, IntOp::Mul | IntOp::Div | IntOp::Mod);
    PrimInfo {
        name,
        arity: if matches!(op, IntOp::Neg) { 1 } else { 2 },
        fixity,
        semantics: Semantics::Int(eval),
        cost: if multiplies { COST_MUL } else { COST_ADD },
        // Division and remainder check their divisor: not safe where the
        // value may not be needed.
        cheap: !matches!(op, IntOp::Div | IntOp::Mod),
        lowering: Lowering::Int(op),
        paper: true,
    }
}

/// An integer comparison.
const fn int_compare(name: &'static str, eval: fn(i64, i64) -> bool, c: Comparison) -> PrimInfo {
    PrimInfo {
        name,
        arity: 2,
        fixity: Fixity::Infix(prec::CMP),
        semantics: Semantics::IntCompare(eval),
        cost: COST_ADD,
        cheap: true,
        lowering: Lowering::IntCompare(c),
        paper: true,
    }
}

/// `i // j`, rounded down; `None` for `j = 0`.
fn floor_div(i: i64, j: i64) -> Option<i64> {
    if j == 0 {
        return None;
    }
    let q = i.wrapping_div(j);
    Some(if i.wrapping_rem(j) != 0 && ((i < 0) != (j < 0)) {
        q - 1
    } else {
        q
    })
}

/// `i % j` of the sign of `j`; `None` for `j = 0`.
fn floor_mod(i: i64, j: i64) -> Option<i64> {
    if j == 0 {
        return None;
    }
    let r = i.wrapping_rem(j);
    Some(if r != 0 && ((r < 0) != (j < 0)) {
        r + j
    } else {
        r
    })
}

/// The largest magnitude `int(x)` accepts: |x| < 2^63.
pub const INT_LIMIT: f64 = 9_223_372_036_854_775_808.0;

/// `int(x)`: `x` rounded toward zero, `None` when it is NaN or not below
/// 2^63 in magnitude.
pub fn to_int(x: f64) -> Option<i64> {
    (x.abs() < INT_LIMIT).then_some(x as i64)
}

/// `if c then t else f` over reals.
fn step(c: Expr, t: f64, f: f64) -> Expr {
    cond(c, real_const(t), real_const(f))
}

fn real_const(x: f64) -> Expr {
    crate::build::real(x)
}

fn div(x: Expr, y: Expr) -> Expr {
    prim(Prim::Div, vec![x, y])
}

fn lt(x: Expr, y: Expr) -> Expr {
    prim(Prim::Lt, vec![x, y])
}

impl Prim {
    /// The table row.
    pub const fn info(self) -> PrimInfo {
        use Fixity::*;
        use Instruction::*;
        use Semantics::Real;
        match self {
            Prim::Add => PrimInfo {
                name: "+",
                arity: 2,
                fixity: Infix(prec::ADD),
                semantics: Real {
                    eval: |x| x[0] + x[1],
                    partials: |_, _| vec![real_const(1.0), real_const(1.0)],
                    domain: ANY2,
                },
                cost: COST_ADD,
                cheap: true,
                lowering: Lowering::Instruction(Fadd),
                paper: true,
            },
            Prim::Sub => PrimInfo {
                name: "-",
                arity: 2,
                fixity: Infix(prec::ADD),
                semantics: Real {
                    eval: |x| x[0] - x[1],
                    partials: |_, _| vec![real_const(1.0), real_const(-1.0)],
                    domain: ANY2,
                },
                cost: COST_ADD,
                cheap: true,
                lowering: Lowering::Instruction(Fsub),
                paper: true,
            },
            Prim::Mul => PrimInfo {
                name: "*",
                arity: 2,
                fixity: Infix(prec::MUL),
                semantics: Real {
                    eval: |x| x[0] * x[1],
                    partials: |a, _| vec![a[1].clone(), a[0].clone()],
                    domain: ANY2,
                },
                cost: COST_MUL,
                cheap: true,
                lowering: Lowering::Instruction(Fmul),
                paper: true,
            },
            Prim::Div => PrimInfo {
                name: "/",
                arity: 2,
                fixity: Infix(prec::MUL),
                semantics: Real {
                    eval: |x| x[0] / x[1],
                    partials: |a, r| {
                        vec![
                            div(real_const(1.0), a[1].clone()),
                            neg(div(r.clone(), a[1].clone())),
                        ]
                    },
                    domain: ANY2,
                },
                cost: COST_MUL,
                cheap: true,
                lowering: Lowering::Instruction(Fdiv),
                paper: true,
            },
            Prim::Neg => PrimInfo {
                name: "-",
                arity: 1,
                fixity: Prefix,
                semantics: Real {
                    eval: |x| -x[0],
                    partials: |_, _| vec![real_const(-1.0)],
                    domain: ANY,
                },
                cost: COST_UNARY,
                cheap: true,
                lowering: Lowering::Instruction(Fneg),
                paper: true,
            },
            Prim::Sin => PrimInfo {
                name: "sin",
                arity: 1,
                fixity: Call,
                semantics: Real {
                    eval: |x| c_sin(x[0]),
                    partials: |a, _| vec![prim(Prim::Cos, vec![a[0].clone()])],
                    domain: ANY,
                },
                cost: COST_UNARY,
                cheap: false,
                lowering: call(Shim::Unary(c_sin), "gradlift_sin", "sin"),
                paper: true,
            },
            Prim::Cos => PrimInfo {
                name: "cos",
                arity: 1,
                fixity: Call,
                semantics: Real {
                    eval: |x| c_cos(x[0]),
                    partials: |a, _| vec![neg(prim(Prim::Sin, vec![a[0].clone()]))],
                    domain: ANY,
                },
                cost: COST_UNARY,
                cheap: false,
                lowering: call(Shim::Unary(c_cos), "gradlift_cos", "cos"),
                paper: true,
            },
            Prim::Tan => PrimInfo {
                name: "tan",
                arity: 1,
                fixity: Call,
                semantics: Real {
                    eval: |x| c_tan(x[0]),
                    partials: |_, r| vec![add(real_const(1.0), mul(r.clone(), r.clone()))],
                    domain: &[Domain::Bounded],
                },
                cost: COST_UNARY,
                cheap: false,
                lowering: call(Shim::Unary(c_tan), "gradlift_tan", "tan"),
                paper: true,
            },
            Prim::Atan => PrimInfo {
                name: "atan",
                arity: 1,
                fixity: Call,
                semantics: Real {
                    eval: |x| c_atan(x[0]),
                    partials: |a, _| {
                        vec![div(
                            real_const(1.0),
                            add(real_const(1.0), mul(a[0].clone(), a[0].clone())),
                        )]
                    },
                    domain: ANY,
                },
                cost: COST_UNARY,
                cheap: false,
                lowering: call(Shim::Unary(c_atan), "gradlift_atan", "atan"),
                paper: false,
            },
            // ∂y = x / (x² + y²), ∂x = -y / (x² + y²).
            Prim::Atan2 => PrimInfo {
                name: "atan2",
                arity: 2,
                fixity: Call,
                semantics: Real {
                    eval: |x| c_atan2(x[0], x[1]),
                    partials: |a, _| {
                        let (y, x) = (&a[0], &a[1]);
                        let r2 = || add(mul(x.clone(), x.clone()), mul(y.clone(), y.clone()));
                        vec![div(x.clone(), r2()), neg(div(y.clone(), r2()))]
                    },
                    domain: ANY2,
                },
                cost: COST_BINARY_NL,
                cheap: false,
                lowering: call(Shim::Binary(c_atan2), "gradlift_atan2", "atan2"),
                paper: false,
            },
            Prim::Exp => PrimInfo {
                name: "exp",
                arity: 1,
                fixity: Call,
                semantics: Real {
                    eval: |x| crate::exp::exp(x[0]),
                    partials: |_, r| vec![r.clone()],
                    domain: &[Domain::Bounded],
                },
                cost: COST_UNARY,
                cheap: false,
                lowering: Lowering::Inline(Sequence::Exp),
                paper: true,
            },
            Prim::Expm1 => PrimInfo {
                name: "expm1",
                arity: 1,
                fixity: Call,
                semantics: Real {
                    eval: |x| c_expm1(x[0]),
                    partials: |_, r| vec![add(r.clone(), real_const(1.0))],
                    domain: &[Domain::Bounded],
                },
                cost: COST_UNARY,
                cheap: false,
                lowering: call(Shim::Unary(c_expm1), "gradlift_expm1", "expm1"),
                paper: false,
            },
            Prim::Log => PrimInfo {
                name: "log",
                arity: 1,
                fixity: Call,
                semantics: Real {
                    eval: |x| c_log(x[0]),
                    partials: |a, _| vec![div(real_const(1.0), a[0].clone())],
                    domain: &[Domain::Positive],
                },
                cost: COST_UNARY,
                cheap: false,
                lowering: call(Shim::Unary(c_log), "gradlift_log", "log"),
                paper: true,
            },
            Prim::Log1p => PrimInfo {
                name: "log1p",
                arity: 1,
                fixity: Call,
                semantics: Real {
                    eval: |x| c_log1p(x[0]),
                    partials: |a, _| vec![div(real_const(1.0), add(real_const(1.0), a[0].clone()))],
                    domain: &[Domain::Positive],
                },
                cost: COST_UNARY,
                cheap: false,
                lowering: call(Shim::Unary(c_log1p), "gradlift_log1p", "log1p"),
                paper: false,
            },
            Prim::Sqrt => PrimInfo {
                name: "sqrt",
                arity: 1,
                fixity: Call,
                semantics: Real {
                    eval: |x| x[0].sqrt(),
                    partials: |_, r| vec![div(real_const(0.5), r.clone())],
                    domain: &[Domain::Positive],
                },
                cost: COST_UNARY,
                cheap: true,
                lowering: Lowering::Instruction(Sqrt),
                paper: true,
            },
            Prim::Tanh => PrimInfo {
                name: "tanh",
                arity: 1,
                fixity: Call,
                semantics: Real {
                    eval: |x| crate::exp::tanh(x[0]),
                    partials: |_, r| {
                        vec![prim(
                            Prim::Sub,
                            vec![real_const(1.0), mul(r.clone(), r.clone())],
                        )]
                    },
                    domain: ANY,
                },
                cost: COST_UNARY,
                cheap: false,
                lowering: Lowering::Inline(Sequence::Tanh),
                paper: true,
            },
            // Non-smooth primitives differentiate as the branch taken, a
            // tie following the first argument (Appendix A.4).
            // erf'(x) = 2/√π · e^(-x²).
            Prim::Erf => PrimInfo {
                name: "erf",
                arity: 1,
                fixity: Call,
                semantics: Real {
                    eval: |x| c_erf(x[0]),
                    partials: |a, _| {
                        let square = mul(a[0].clone(), a[0].clone());
                        vec![mul(
                            real_const(std::f64::consts::FRAC_2_SQRT_PI),
                            prim(Prim::Exp, vec![neg(square)]),
                        )]
                    },
                    domain: ANY,
                },
                cost: COST_UNARY,
                cheap: false,
                lowering: call(Shim::Unary(c_erf), "gradlift_erf", "erf"),
                paper: false,
            },
            Prim::Lgamma => PrimInfo {
                name: "lgamma",
                arity: 1,
                fixity: Call,
                semantics: Real {
                    eval: |x| crate::gamma::lgamma(x[0]),
                    partials: |a, _| vec![prim(Prim::Digamma, vec![a[0].clone()])],
                    domain: &[Domain::Positive],
                },
                cost: COST_UNARY,
                cheap: false,
                lowering: call(
                    Shim::Unary(crate::gamma::lgamma),
                    "gradlift_lgamma",
                    "lgamma",
                ),
                paper: false,
            },
            Prim::Digamma => PrimInfo {
                name: "digamma",
                arity: 1,
                fixity: Call,
                semantics: Real {
                    eval: |x| crate::gamma::digamma(x[0]),
                    partials: |a, _| {
                        vec![prim(Prim::Polygamma, vec![real_const(1.0), a[0].clone()])]
                    },
                    domain: &[Domain::Positive],
                },
                cost: COST_UNARY,
                cheap: false,
                lowering: call_own(Shim::Unary(crate::gamma::digamma), "gradlift_digamma"),
                paper: false,
            },
            // The order is a whole number, not differentiated.
            Prim::Polygamma => PrimInfo {
                name: "polygamma",
                arity: 2,
                fixity: Call,
                semantics: Real {
                    eval: |x| crate::gamma::polygamma(x[0], x[1]),
                    partials: |a, _| {
                        let next = add(a[0].clone(), real_const(1.0));
                        vec![
                            Expr::structural_zero(),
                            prim(Prim::Polygamma, vec![next, a[1].clone()]),
                        ]
                    },
                    domain: &[Domain::Order, Domain::Positive],
                },
                cost: COST_BINARY_NL,
                cheap: false,
                lowering: call_own(Shim::Binary(crate::gamma::polygamma), "gradlift_polygamma"),
                paper: false,
            },
            Prim::Sigmoid => PrimInfo {
                name: "sigmoid",
                arity: 1,
                fixity: Call,
                semantics: Real {
                    eval: |x| sigmoid(x[0]),
                    partials: |_, r| {
                        vec![mul(
                            r.clone(),
                            prim(Prim::Sub, vec![real_const(1.0), r.clone()]),
                        )]
                    },
                    domain: ANY,
                },
                cost: COST_UNARY,
                cheap: false,
                lowering: Lowering::Inline(Sequence::Sigmoid),
                paper: false,
            },
            Prim::Softplus => PrimInfo {
                name: "softplus",
                arity: 1,
                fixity: Call,
                semantics: Real {
                    eval: |x| softplus(x[0]),
                    partials: |a, _| vec![prim(Prim::Sigmoid, vec![a[0].clone()])],
                    domain: ANY,
                },
                cost: COST_UNARY,
                cheap: false,
                lowering: Lowering::Inline(Sequence::Softplus),
                paper: false,
            },
            Prim::Abs => PrimInfo {
                name: "abs",
                arity: 1,
                fixity: Call,
                semantics: Real {
                    eval: |x| x[0].abs(),
                    partials: |a, _| vec![step(lt(a[0].clone(), real_const(0.0)), -1.0, 1.0)],
                    domain: ANY,
                },
                cost: COST_UNARY,
                cheap: true,
                lowering: Lowering::Instruction(Fabs),
                paper: true,
            },
            Prim::Sign => PrimInfo {
                name: "sign",
                arity: 1,
                fixity: Call,
                semantics: Real {
                    eval: |x| sign(x[0]),
                    partials: |_, _| vec![Expr::structural_zero()],
                    domain: ANY,
                },
                cost: COST_UNARY,
                cheap: true,
                lowering: Lowering::Inline(Sequence::Sign),
                paper: true,
            },
            // ∂₂pow(0, b) is 0, as in JAX, rather than 0 · log 0 = NaN.
            // Piecewise constant: derivative 0.
            Prim::Floor => PrimInfo {
                name: "floor",
                arity: 1,
                fixity: Call,
                semantics: Real {
                    eval: |x| x[0].floor(),
                    partials: |_, _| vec![Expr::structural_zero()],
                    domain: ANY,
                },
                cost: COST_UNARY,
                cheap: true,
                lowering: Lowering::Instruction(Floor),
                paper: false,
            },
            Prim::Ceil => PrimInfo {
                name: "ceil",
                arity: 1,
                fixity: Call,
                semantics: Real {
                    eval: |x| x[0].ceil(),
                    partials: |_, _| vec![Expr::structural_zero()],
                    domain: ANY,
                },
                cost: COST_UNARY,
                cheap: true,
                lowering: Lowering::Instruction(Ceil),
                paper: false,
            },
            // Halves away from zero, as C's `round` (Cranelift's `nearest`
            // rounds them to even): a call.
            Prim::Round => PrimInfo {
                name: "round",
                arity: 1,
                fixity: Call,
                semantics: Real {
                    eval: |x| c_round(x[0]),
                    partials: |_, _| vec![Expr::structural_zero()],
                    domain: ANY,
                },
                cost: COST_UNARY,
                cheap: false,
                lowering: call(Shim::Unary(c_round), "gradlift_round", "round"),
                paper: false,
            },
            Prim::Pow => PrimInfo {
                name: "pow",
                arity: 2,
                fixity: Call,
                semantics: Real {
                    eval: |x| c_pow(x[0], x[1]),
                    partials: |a, r| {
                        let (base, exponent) = (&a[0], &a[1]);
                        let less = prim(Prim::Sub, vec![exponent.clone(), real_const(1.0)]);
                        vec![
                            mul(exponent.clone(), prim(Prim::Pow, vec![base.clone(), less])),
                            cond(
                                prim(Prim::Eq, vec![base.clone(), real_const(0.0)]),
                                real_const(0.0),
                                mul(r.clone(), prim(Prim::Log, vec![base.clone()])),
                            ),
                        ]
                    },
                    domain: &[Domain::Positive, Domain::Bounded],
                },
                cost: COST_BINARY_NL,
                cheap: false,
                lowering: call(Shim::Binary(c_pow), "gradlift_pow", "pow"),
                paper: true,
            },
            Prim::Min => PrimInfo {
                name: "min",
                arity: 2,
                fixity: Call,
                semantics: Real {
                    eval: |x| min(x[0], x[1]),
                    partials: |a, _| {
                        let second = || lt(a[1].clone(), a[0].clone());
                        vec![step(second(), 0.0, 1.0), step(second(), 1.0, 0.0)]
                    },
                    domain: ANY2,
                },
                cost: COST_ADD,
                cheap: true,
                lowering: Lowering::Inline(Sequence::Min),
                paper: true,
            },
            Prim::Max => PrimInfo {
                name: "max",
                arity: 2,
                fixity: Call,
                semantics: Real {
                    eval: |x| max(x[0], x[1]),
                    partials: |a, _| {
                        let second = || lt(a[0].clone(), a[1].clone());
                        vec![step(second(), 0.0, 1.0), step(second(), 1.0, 0.0)]
                    },
                    domain: ANY2,
                },
                cost: COST_ADD,
                cheap: true,
                lowering: Lowering::Inline(Sequence::Max),
                paper: true,
            },
            Prim::Lt => compare("<", |a, b| a < b, Comparison::Lt),
            Prim::Le => compare("<=", |a, b| a <= b, Comparison::Le),
            Prim::Gt => compare(">", |a, b| a > b, Comparison::Gt),
            Prim::Ge => compare(">=", |a, b| a >= b, Comparison::Ge),
            Prim::Eq => compare("==", |a, b| a == b, Comparison::Eq),
            Prim::Ne => compare("!=", |a, b| a != b, Comparison::Ne),
            Prim::And => logic("and", Connective::And, Infix(prec::AND), [3, 0, 0, 0]),
            Prim::Or => logic("or", Connective::Or, Infix(prec::OR), [3, 0, 0, 0]),
            Prim::Not => logic("not", Connective::Not, Prefix, [2, 0, 0, 0]),
            Prim::IAdd => int_op(
                "+",
                Infix(prec::ADD),
                |x| Some(x[0].wrapping_add(x[1])),
                IntOp::Add,
            ),
            Prim::ISub => int_op(
                "-",
                Infix(prec::ADD),
                |x| Some(x[0].wrapping_sub(x[1])),
                IntOp::Sub,
            ),
            Prim::IMul => int_op(
                "*",
                Infix(prec::MUL),
                |x| Some(x[0].wrapping_mul(x[1])),
                IntOp::Mul,
            ),
            Prim::IDiv => int_op(
                "//",
                Infix(prec::MUL),
                |x| floor_div(x[0], x[1]),
                IntOp::Div,
            ),
            Prim::IMod => int_op("%", Infix(prec::MUL), |x| floor_mod(x[0], x[1]), IntOp::Mod),
            Prim::INeg => int_op("-", Prefix, |x| Some(x[0].wrapping_neg()), IntOp::Neg),
            Prim::IMin => int_op("min", Call, |x| Some(x[0].min(x[1])), IntOp::Min),
            Prim::IMax => int_op("max", Call, |x| Some(x[0].max(x[1])), IntOp::Max),
            Prim::ILt => int_compare("<", |a, b| a < b, Comparison::Lt),
            Prim::ILe => int_compare("<=", |a, b| a <= b, Comparison::Le),
            Prim::IGt => int_compare(">", |a, b| a > b, Comparison::Gt),
            Prim::IGe => int_compare(">=", |a, b| a >= b, Comparison::Ge),
            Prim::IEq => int_compare("==", |a, b| a == b, Comparison::Eq),
            Prim::INe => int_compare("!=", |a, b| a != b, Comparison::Ne),
            Prim::ToReal => PrimInfo {
                name: "real",
                arity: 1,
                fixity: Call,
                semantics: Semantics::ToReal,
                cost: COST_UNARY,
                cheap: true,
                lowering: Lowering::ToReal,
                paper: true,
            },
            Prim::ToInt => PrimInfo {
                name: "int",
                arity: 1,
                fixity: Call,
                semantics: Semantics::ToInt,
                cost: COST_UNARY,
                cheap: false,
                lowering: Lowering::ToInt,
                paper: true,
            },
        }
    }

    /// The integer form of a real operation (`+` on integers is
    /// [`Prim::IAdd`]), which the type checker puts where the operands are
    /// integers.
    pub fn on_integers(self) -> Option<Prim> {
        Some(match self {
            Prim::Add => Prim::IAdd,
            Prim::Sub => Prim::ISub,
            Prim::Mul => Prim::IMul,
            Prim::Neg => Prim::INeg,
            Prim::Min => Prim::IMin,
            Prim::Max => Prim::IMax,
            Prim::Lt => Prim::ILt,
            Prim::Le => Prim::ILe,
            Prim::Gt => Prim::IGt,
            Prim::Ge => Prim::IGe,
            Prim::Eq => Prim::IEq,
            Prim::Ne => Prim::INe,
            _ => return None,
        })
    }

    /// Whether applying it can be a run-time error (a division of integers
    /// by zero, `int` of a NaN): every analysis of whether a term can fail
    /// asks this.
    pub fn can_fail(self) -> bool {
        matches!(self, Prim::IDiv | Prim::IMod | Prim::ToInt)
    }

    /// Evaluates an integer primitive; `None` for a division by zero.
    ///
    /// # Panics
    ///
    /// On a primitive that is not an integer operation.
    pub fn eval_int(self, args: &[i64]) -> Option<i64> {
        match self.info().semantics {
            Semantics::Int(eval) if args.len() == self.info().arity => eval(args),
            _ => panic!("eval_int: {self:?} applied to {} integers", args.len()),
        }
    }

    /// Evaluates an integer comparison.
    ///
    /// # Panics
    ///
    /// On a primitive that is not an integer comparison.
    pub fn eval_int_compare(self, a: i64, b: i64) -> bool {
        match self.info().semantics {
            Semantics::IntCompare(eval) => eval(a, b),
            _ => panic!("eval_int_compare: {self:?} is not an integer comparison"),
        }
    }

    /// The primitive called by this name (`sin`, `pow`, …), if any.
    /// Operators are not found by name; see [`Prim::from_section`].
    /// The integer forms (`min` on integers) are not found: the type
    /// checker puts them in.
    pub fn from_call_name(name: &str) -> Option<Prim> {
        Prim::ALL.into_iter().find(|p| {
            let info = p.info();
            info.fixity == Fixity::Call && info.name == name && info.kind() != PrimKind::Int
        })
    }

    /// The binary operator an operator section `(op)` names.
    pub fn from_section(symbol: &str) -> Option<Prim> {
        match symbol {
            "+" => Some(Prim::Add),
            "-" => Some(Prim::Sub),
            "*" => Some(Prim::Mul),
            "/" => Some(Prim::Div),
            _ => None,
        }
    }

    /// Evaluates a real primitive (the `eval` column).
    ///
    /// # Panics
    ///
    /// On a comparison or logical primitive, or a wrong number of arguments
    /// (the type checker rules both out).
    pub fn eval_real(self, args: &[f64]) -> f64 {
        match self.info().semantics {
            Semantics::Real { eval, .. } if args.len() == self.info().arity => eval(args),
            _ => panic!("eval_real: {self:?} applied to {} reals", args.len()),
        }
    }

    /// Evaluates a comparison.
    ///
    /// # Panics
    ///
    /// On a primitive that is not a comparison.
    pub fn eval_compare(self, a: f64, b: f64) -> bool {
        match self.info().semantics {
            Semantics::Compare(eval) => eval(a, b),
            _ => panic!("eval_compare: {self:?} is not a comparison"),
        }
    }

    /// The partial derivatives `∂ᵢ p(args)` of a real primitive, as terms
    /// over `args` and `result` (the `partials` column).
    ///
    /// Non-smooth primitives differentiate as the branch taken, a tie
    /// following the first argument (Appendix A.4): `abs'(0) = 1`,
    /// `∂₁min(a, a) = 1`, `∂₂min(a, a) = 0`. `sign` has derivative 0 (a
    /// structural zero). `∂₂pow(0, b)` is 0, as in JAX, rather than the
    /// `0 · log 0 = nan` of the formula.
    ///
    /// # Panics
    ///
    /// On a comparison or logical primitive (they are not differentiated).
    pub fn partials(self, args: &[Expr], result: &Expr) -> Vec<Expr> {
        match self.info().semantics {
            Semantics::Real { partials, .. } => partials(args, result),
            _ => panic!("partials: {self:?} is not a real primitive"),
        }
    }

    /// Where each argument keeps it smooth and finite (real primitives;
    /// empty for the others).
    pub fn domain(self) -> &'static [Domain] {
        match self.info().semantics {
            Semantics::Real { domain, .. } => domain,
            _ => &[],
        }
    }
}

impl fmt::Display for Prim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.info().name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_consistent() {
        for p in Prim::ALL {
            let info = p.info();
            match info.fixity {
                Fixity::Call if info.kind() == PrimKind::Int => {
                    let real = Prim::from_call_name(info.name).unwrap();
                    assert_eq!(real.on_integers(), Some(p));
                }
                Fixity::Call => assert_eq!(Prim::from_call_name(info.name), Some(p)),
                Fixity::Infix(_) => assert_eq!(info.arity, 2),
                Fixity::Prefix => assert_eq!(info.arity, 1),
            }
            match (info.semantics, info.lowering) {
                (Semantics::Real { domain, .. }, lowering) => {
                    assert_eq!(domain.len(), info.arity, "{p:?}");
                    if let Lowering::Call { shim, .. } = lowering {
                        assert_eq!(shim.arity(), info.arity, "{p:?}");
                    }
                    assert!(!matches!(
                        lowering,
                        Lowering::Compare(_) | Lowering::Logic(_)
                    ));
                }
                (Semantics::Compare(_), lowering) => {
                    assert!(matches!(lowering, Lowering::Compare(_)), "{p:?}")
                }
                (Semantics::Logic, lowering) => {
                    assert!(matches!(lowering, Lowering::Logic(_)), "{p:?}")
                }
                (Semantics::Int(_), lowering) => {
                    assert!(matches!(lowering, Lowering::Int(_)), "{p:?}")
                }
                (Semantics::IntCompare(_), lowering) => {
                    assert!(matches!(lowering, Lowering::IntCompare(_)), "{p:?}")
                }
                (Semantics::ToReal, lowering) => {
                    assert!(matches!(lowering, Lowering::ToReal), "{p:?}")
                }
                (Semantics::ToInt, lowering) => {
                    assert!(matches!(lowering, Lowering::ToInt), "{p:?}")
                }
            }
        }
    }

    #[test]
    fn calls_evaluate_with_the_function_native_code_calls() {
        for p in Prim::ALL {
            if let Lowering::Call { shim, .. } = p.info().lowering {
                for x in [-1.7, -0.3, 0.0, 0.4, 2.5, f64::INFINITY, f64::NAN] {
                    let (got, want) = match shim {
                        Shim::Unary(f) => (p.eval_real(&[x.abs()]), f(x.abs())),
                        Shim::Binary(f) => (p.eval_real(&[x.abs(), 0.5]), f(x.abs(), 0.5)),
                    };
                    assert!(got.to_bits() == want.to_bits(), "{p:?} at {x}");
                }
            }
        }
    }

    #[test]
    fn rounding_as_the_c_library() {
        let r = |x: f64| Prim::Round.eval_real(&[x]);
        assert_eq!(
            (r(2.5), r(-2.5), r(0.5), r(1.4999999999999998)),
            (3.0, -3.0, 1.0, 1.0)
        );
        assert_eq!(r(-0.4).to_bits(), (-0.0f64).to_bits());
        assert_eq!(
            (
                Prim::Floor.eval_real(&[-1.5]),
                Prim::Ceil.eval_real(&[-1.5])
            ),
            (-2.0, -1.0)
        );
    }

    #[test]
    fn integer_division_rounds_down() {
        let d = |i, j| Prim::IDiv.eval_int(&[i, j]);
        let m = |i, j| Prim::IMod.eval_int(&[i, j]);
        assert_eq!(
            (d(7, 2), d(-7, 2), d(7, -2), d(-7, -2)),
            (Some(3), Some(-4), Some(-4), Some(3))
        );
        assert_eq!(
            (m(7, 2), m(-7, 2), m(7, -2), m(-7, -2)),
            (Some(1), Some(1), Some(-1), Some(-1))
        );
        assert_eq!((d(6, -3), m(6, -3)), (Some(-2), Some(0)));
        assert_eq!((d(1, 0), m(1, 0)), (None, None));
        assert_eq!(
            (d(i64::MIN, -1), m(i64::MIN, -1)),
            (Some(i64::MIN), Some(0))
        );
        for i in -20..20 {
            for j in (-7..7).filter(|&j| j != 0) {
                assert_eq!(d(i, j).unwrap() * j + m(i, j).unwrap(), i);
                assert_eq!(d(i, j).unwrap(), (i as f64 / j as f64).floor() as i64);
            }
        }
        assert_eq!(
            (to_int(-2.7), to_int(2.7), to_int(f64::NAN)),
            (Some(-2), Some(2), None)
        );
        assert_eq!(
            (to_int(9.2e18), to_int(-9.3e18)),
            (Some(9_200_000_000_000_000_000), None)
        );
    }

    #[test]
    fn ties_follow_the_first_argument() {
        assert_eq!(
            Prim::Min.eval_real(&[0.0, -0.0]).to_bits(),
            0.0f64.to_bits()
        );
        assert_eq!(
            Prim::Max.eval_real(&[-0.0, 0.0]).to_bits(),
            (-0.0f64).to_bits()
        );
        assert_eq!(Prim::Sign.eval_real(&[-3.0]), -1.0);
        assert_eq!(Prim::Sign.eval_real(&[0.0]), 0.0);
        assert!(Prim::Sign.eval_real(&[f64::NAN]).is_nan());
    }
}
