//! Variables on a [`Tape`]: their operators, primitives and comparisons.
//!
//! Every operation evaluates on `f64` at once (so [`Var::value`] and the
//! comparisons are free) and records one node. An `f64` operand is not
//! recorded: `x * 2.0` stores one node with the single partial 2.

use crate::prim::{self, Partial};
use crate::real::Real;
use crate::tape::Tape;
use gradlift_lang::Prim;
use std::cmp::Ordering;
use std::fmt;
use std::ops::{Add, AddAssign, Div, DivAssign, Mul, MulAssign, Neg, Sub, SubAssign};

/// A real number recorded on a [`Tape`]. Cheap to copy.
///
/// Comparisons (`==`, `<`, also against `f64`) look at the value only, so a
/// loop or branch on a `Var` runs as it would on `f64` and the tape records
/// the path taken.
///
/// # Panics
///
/// Combining variables of two different tapes panics.
#[derive(Clone, Copy)]
pub struct Var<'t> {
    tape: &'t Tape,
    index: u32,
    value: f64,
}

impl<'t> Var<'t> {
    pub(crate) fn new(tape: &'t Tape, index: u32, value: f64) -> Self {
        Var { tape, index, value }
    }

    /// The value computed for this variable.
    pub fn value(self) -> f64 {
        self.value
    }

    /// `∂output/∂self` from the tape's last [`backward`](Tape::backward).
    pub fn adjoint(self) -> f64 {
        self.tape.adjoint(self)
    }

    /// The tape that recorded this variable.
    pub fn tape(self) -> &'t Tape {
        self.tape
    }

    /// The position of this variable's node on its tape.
    pub fn index(self) -> usize {
        self.index as usize
    }

    fn operand(self, partial: Partial<f64>) -> Option<(u32, f64)> {
        partial.number().map(|partial| (self.index, partial))
    }

    fn record(self, value: f64, operands: [Option<(u32, f64)>; 2]) -> Self {
        match operands {
            [Some(a), Some(b)] => self.tape.record(value, &[a, b]),
            [Some(only), None] | [None, Some(only)] => self.tape.record(value, &[only]),
            [None, None] => self.tape.record(value, &[]),
        }
    }

    fn unary(self, p: Prim) -> Self {
        let (value, [partial, _]) = prim::rule(p, self.value, 0.0);
        self.record(value, [self.operand(partial), None])
    }

    fn binary(self, p: Prim, other: Self) -> Self {
        self.tape.check_owner(other);
        let (value, [da, db]) = prim::rule(p, self.value, other.value);
        self.record(value, [self.operand(da), other.operand(db)])
    }

    fn binary_with_constant_rhs(self, p: Prim, rhs: f64) -> Self {
        let (value, [da, _]) = prim::rule(p, self.value, rhs);
        self.record(value, [self.operand(da), None])
    }

    fn binary_with_constant_lhs(self, p: Prim, lhs: f64) -> Self {
        let (value, [_, db]) = prim::rule(p, lhs, self.value);
        self.record(value, [None, self.operand(db)])
    }
}

macro_rules! var_binary_operator {
    ($Trait:ident, $method:ident, $AssignTrait:ident, $assign:ident, $op:expr) => {
        impl<'t> $Trait for Var<'t> {
            type Output = Var<'t>;
            #[inline]
            fn $method(self, rhs: Var<'t>) -> Var<'t> {
                self.binary($op, rhs)
            }
        }

        impl<'t> $Trait<f64> for Var<'t> {
            type Output = Var<'t>;
            #[inline]
            fn $method(self, rhs: f64) -> Var<'t> {
                self.binary_with_constant_rhs($op, rhs)
            }
        }

        impl<'t> $Trait<Var<'t>> for f64 {
            type Output = Var<'t>;
            #[inline]
            fn $method(self, rhs: Var<'t>) -> Var<'t> {
                rhs.binary_with_constant_lhs($op, self)
            }
        }

        impl<'t> $AssignTrait for Var<'t> {
            #[inline]
            fn $assign(&mut self, rhs: Var<'t>) {
                *self = self.binary($op, rhs);
            }
        }

        impl<'t> $AssignTrait<f64> for Var<'t> {
            #[inline]
            fn $assign(&mut self, rhs: f64) {
                *self = self.binary_with_constant_rhs($op, rhs);
            }
        }
    };
}

var_binary_operator!(Add, add, AddAssign, add_assign, Prim::Add);
var_binary_operator!(Sub, sub, SubAssign, sub_assign, Prim::Sub);
var_binary_operator!(Mul, mul, MulAssign, mul_assign, Prim::Mul);
var_binary_operator!(Div, div, DivAssign, div_assign, Prim::Div);

impl<'t> Neg for Var<'t> {
    type Output = Var<'t>;
    #[inline]
    fn neg(self) -> Var<'t> {
        self.unary(Prim::Neg)
    }
}

impl PartialEq for Var<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.value == other.value
    }
}

impl PartialOrd for Var<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        self.value.partial_cmp(&other.value)
    }
}

impl PartialEq<f64> for Var<'_> {
    fn eq(&self, other: &f64) -> bool {
        self.value == *other
    }
}

impl PartialOrd<f64> for Var<'_> {
    fn partial_cmp(&self, other: &f64) -> Option<Ordering> {
        self.value.partial_cmp(other)
    }
}

impl PartialEq<Var<'_>> for f64 {
    fn eq(&self, other: &Var<'_>) -> bool {
        *self == other.value
    }
}

impl PartialOrd<Var<'_>> for f64 {
    fn partial_cmp(&self, other: &Var<'_>) -> Option<Ordering> {
        self.partial_cmp(&other.value)
    }
}

impl fmt::Debug for Var<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Var")
            .field("index", &self.index)
            .field("value", &self.value)
            .finish()
    }
}

impl Real for Var<'_> {
    #[inline]
    fn primal(self) -> f64 {
        self.value
    }
    #[inline]
    fn lift(self, c: f64) -> Self {
        self.tape.var(c)
    }
    #[inline]
    fn apply(self, p: Prim, other: Self) -> Self {
        if p.info().arity == 2 {
            self.binary(p, other)
        } else {
            self.unary(p)
        }
    }
}
