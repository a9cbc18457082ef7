//! The scalar primitives, each declared once.
//!
//! A primitive is a row of [`Prim::info`]: its name, how it is written
//! (infix operator, prefix `-`, or a call `sin(x)`), its arity and kind
//! (real → real, a comparison, or a logical connective), and its evaluation.
//! Later stages add their columns (partial derivatives, tangent rule, native
//! lowering, cost class) as further methods matching on the same enum, so a
//! new primitive is one variant and one row in each table.

use crate::syntax::Expr;
use std::fmt;

/// A scalar primitive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[allow(missing_docs)]
pub enum Prim {
    Add,
    Sub,
    Mul,
    Div,
    Neg,
    Sin,
    Cos,
    Tan,
    Exp,
    Log,
    Sqrt,
    Tanh,
    Abs,
    Sign,
    Pow,
    Min,
    Max,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    And,
    Or,
    Not,
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

/// One row of the primitive table.
#[derive(Clone, Copy, Debug)]
pub struct PrimInfo {
    /// The name a call or a bare reference uses (`sin`, `max`), or the
    /// operator symbol (`+`).
    pub name: &'static str,
    /// Number of arguments.
    pub arity: usize,
    /// Input and output sorts.
    pub kind: PrimKind,
    /// Surface syntax.
    pub fixity: Fixity,
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

impl Prim {
    /// Every primitive, in declaration order.
    pub const ALL: [Prim; 26] = [
        Prim::Add,
        Prim::Sub,
        Prim::Mul,
        Prim::Div,
        Prim::Neg,
        Prim::Sin,
        Prim::Cos,
        Prim::Tan,
        Prim::Exp,
        Prim::Log,
        Prim::Sqrt,
        Prim::Tanh,
        Prim::Abs,
        Prim::Sign,
        Prim::Pow,
        Prim::Min,
        Prim::Max,
        Prim::Lt,
        Prim::Le,
        Prim::Gt,
        Prim::Ge,
        Prim::Eq,
        Prim::Ne,
        Prim::And,
        Prim::Or,
        Prim::Not,
    ];

    /// The table row.
    pub const fn info(self) -> PrimInfo {
        use Fixity::*;
        use PrimKind::*;
        let (name, arity, kind, fixity) = match self {
            Prim::Add => ("+", 2, Real, Infix(prec::ADD)),
            Prim::Sub => ("-", 2, Real, Infix(prec::ADD)),
            Prim::Mul => ("*", 2, Real, Infix(prec::MUL)),
            Prim::Div => ("/", 2, Real, Infix(prec::MUL)),
            Prim::Neg => ("-", 1, Real, Prefix),
            Prim::Sin => ("sin", 1, Real, Call),
            Prim::Cos => ("cos", 1, Real, Call),
            Prim::Tan => ("tan", 1, Real, Call),
            Prim::Exp => ("exp", 1, Real, Call),
            Prim::Log => ("log", 1, Real, Call),
            Prim::Sqrt => ("sqrt", 1, Real, Call),
            Prim::Tanh => ("tanh", 1, Real, Call),
            Prim::Abs => ("abs", 1, Real, Call),
            Prim::Sign => ("sign", 1, Real, Call),
            Prim::Pow => ("pow", 2, Real, Call),
            Prim::Min => ("min", 2, Real, Call),
            Prim::Max => ("max", 2, Real, Call),
            Prim::Lt => ("<", 2, Compare, Infix(prec::CMP)),
            Prim::Le => ("<=", 2, Compare, Infix(prec::CMP)),
            Prim::Gt => (">", 2, Compare, Infix(prec::CMP)),
            Prim::Ge => (">=", 2, Compare, Infix(prec::CMP)),
            Prim::Eq => ("==", 2, Compare, Infix(prec::CMP)),
            Prim::Ne => ("!=", 2, Compare, Infix(prec::CMP)),
            Prim::And => ("and", 2, Logic, Infix(prec::AND)),
            Prim::Or => ("or", 2, Logic, Infix(prec::OR)),
            Prim::Not => ("not", 1, Logic, Prefix),
        };
        PrimInfo {
            name,
            arity,
            kind,
            fixity,
        }
    }

    /// The primitive called by this name (`sin`, `pow`, …), if any.
    /// Operators are not found by name; see [`Prim::from_section`].
    pub fn from_call_name(name: &str) -> Option<Prim> {
        Prim::ALL
            .into_iter()
            .find(|p| p.info().fixity == Fixity::Call && p.info().name == name)
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

    /// Evaluates a real primitive. The semantics is IEEE 754 double
    /// arithmetic with the C library's functions, but `exp` and `tanh`,
    /// which are [`crate::exp::exp`] and [`crate::exp::tanh`] (the native
    /// backends emit the same operations);
    /// `min`/`max` return the first
    /// argument on ties, `sign(0) = 0` and `sign(nan) = nan`.
    ///
    /// # Panics
    ///
    /// On a comparison or logical primitive, or a wrong number of arguments
    /// (the type checker rules both out).
    pub fn eval_real(self, args: &[f64]) -> f64 {
        match (self, args) {
            (Prim::Add, &[a, b]) => a + b,
            (Prim::Sub, &[a, b]) => a - b,
            (Prim::Mul, &[a, b]) => a * b,
            (Prim::Div, &[a, b]) => a / b,
            (Prim::Neg, &[a]) => -a,
            (Prim::Sin, &[a]) => a.sin(),
            (Prim::Cos, &[a]) => a.cos(),
            (Prim::Tan, &[a]) => a.tan(),
            (Prim::Exp, &[a]) => crate::exp::exp(a),
            (Prim::Log, &[a]) => a.ln(),
            (Prim::Sqrt, &[a]) => a.sqrt(),
            (Prim::Tanh, &[a]) => crate::exp::tanh(a),
            (Prim::Abs, &[a]) => a.abs(),
            (Prim::Sign, &[a]) => {
                if a > 0.0 {
                    1.0
                } else if a < 0.0 {
                    -1.0
                } else {
                    a * 0.0
                }
            }
            (Prim::Pow, &[a, b]) => a.powf(b),
            (Prim::Min, &[a, b]) => {
                if b < a {
                    b
                } else {
                    a
                }
            }
            (Prim::Max, &[a, b]) => {
                if b > a {
                    b
                } else {
                    a
                }
            }
            _ => panic!("eval_real: {self:?} applied to {} reals", args.len()),
        }
    }

    /// Evaluates a comparison.
    ///
    /// # Panics
    ///
    /// On a primitive that is not a comparison.
    pub fn eval_compare(self, a: f64, b: f64) -> bool {
        match self {
            Prim::Lt => a < b,
            Prim::Le => a <= b,
            Prim::Gt => a > b,
            Prim::Ge => a >= b,
            Prim::Eq => a == b,
            Prim::Ne => a != b,
            _ => panic!("eval_compare: {self:?} is not a comparison"),
        }
    }
}

impl Prim {
    /// The partial derivatives `∂ᵢ p(args)` of a real primitive, as terms
    /// over `args` and `result` (the primal value, reused where the
    /// derivative is a function of it: `exp`, `sqrt`, `tanh`, `tan`, `/`).
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
        use crate::build::*;
        let a = || args[0].clone();
        let b = || args[1].clone();
        let r = || result.clone();
        let one = || real(1.0);
        let div = |x: Expr, y: Expr| prim(Prim::Div, vec![x, y]);
        let lt = |x: Expr, y: Expr| prim(Prim::Lt, vec![x, y]);
        let step = |c: Expr, t: f64, f: f64| cond(c, real(t), real(f));
        match self {
            Prim::Add => vec![one(), one()],
            Prim::Sub => vec![one(), real(-1.0)],
            Prim::Mul => vec![b(), a()],
            Prim::Div => vec![div(one(), b()), neg(div(r(), b()))],
            Prim::Neg => vec![real(-1.0)],
            Prim::Sin => vec![prim(Prim::Cos, vec![a()])],
            Prim::Cos => vec![neg(prim(Prim::Sin, vec![a()]))],
            Prim::Tan => vec![add(one(), mul(r(), r()))],
            Prim::Exp => vec![r()],
            Prim::Log => vec![div(one(), a())],
            Prim::Sqrt => vec![div(real(0.5), r())],
            Prim::Tanh => vec![prim(Prim::Sub, vec![one(), mul(r(), r())])],
            Prim::Abs => vec![step(lt(a(), real(0.0)), -1.0, 1.0)],
            Prim::Sign => vec![Expr::structural_zero()],
            Prim::Pow => vec![
                mul(
                    b(),
                    prim(Prim::Pow, vec![a(), prim(Prim::Sub, vec![b(), one()])]),
                ),
                cond(
                    prim(Prim::Eq, vec![a(), real(0.0)]),
                    real(0.0),
                    mul(r(), prim(Prim::Log, vec![a()])),
                ),
            ],
            Prim::Min => vec![step(lt(b(), a()), 0.0, 1.0), step(lt(b(), a()), 1.0, 0.0)],
            Prim::Max => vec![step(lt(a(), b()), 0.0, 1.0), step(lt(a(), b()), 1.0, 0.0)],
            Prim::Lt
            | Prim::Le
            | Prim::Gt
            | Prim::Ge
            | Prim::Eq
            | Prim::Ne
            | Prim::And
            | Prim::Or
            | Prim::Not => {
                panic!("partials: {self:?} is not a real primitive")
            }
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
                Fixity::Call => assert_eq!(Prim::from_call_name(info.name), Some(p)),
                Fixity::Infix(_) => assert_eq!(info.arity, 2),
                Fixity::Prefix => assert_eq!(info.arity, 1),
            }
        }
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
