//! Operators on dual numbers: `+ - * /` between two `Dual<T>`, with `f64`
//! on either side, the compound assignments, and unary `-`.
//!
//! An `f64` operand becomes a constant of the same nesting level through
//! [`Scalar::from_f64`], so `2.0 * x` and `x + 1.0` work for `Dual<f64>`,
//! `Dual<Dual<f64>>` and every deeper level with one generic impl each, and
//! the operation then follows the same rule as between two dual numbers.

use crate::dual::Dual;
use crate::real::Scalar;
use gradlift_lang::Prim;
use std::ops::{Add, AddAssign, Div, DivAssign, Mul, MulAssign, Neg, Sub, SubAssign};

macro_rules! dual_binary_operator {
    ($Trait:ident, $method:ident, $AssignTrait:ident, $assign:ident, $op:expr) => {
        impl<T: Scalar> $Trait for Dual<T> {
            type Output = Dual<T>;
            #[inline]
            fn $method(self, rhs: Dual<T>) -> Dual<T> {
                self.apply_prim($op, rhs)
            }
        }

        impl<T: Scalar> $Trait<f64> for Dual<T> {
            type Output = Dual<T>;
            #[inline]
            fn $method(self, rhs: f64) -> Dual<T> {
                self.apply_prim($op, Dual::from_f64(rhs))
            }
        }

        impl<T: Scalar> $Trait<Dual<T>> for f64 {
            type Output = Dual<T>;
            #[inline]
            fn $method(self, rhs: Dual<T>) -> Dual<T> {
                Dual::from_f64(self).apply_prim($op, rhs)
            }
        }

        impl<T: Scalar> $AssignTrait for Dual<T> {
            #[inline]
            fn $assign(&mut self, rhs: Dual<T>) {
                *self = self.apply_prim($op, rhs);
            }
        }

        impl<T: Scalar> $AssignTrait<f64> for Dual<T> {
            #[inline]
            fn $assign(&mut self, rhs: f64) {
                *self = self.apply_prim($op, Dual::from_f64(rhs));
            }
        }
    };
}

dual_binary_operator!(Add, add, AddAssign, add_assign, Prim::Add);
dual_binary_operator!(Sub, sub, SubAssign, sub_assign, Prim::Sub);
dual_binary_operator!(Mul, mul, MulAssign, mul_assign, Prim::Mul);
dual_binary_operator!(Div, div, DivAssign, div_assign, Prim::Div);

impl<T: Scalar> Neg for Dual<T> {
    type Output = Dual<T>;
    #[inline]
    fn neg(self) -> Dual<T> {
        self.apply_prim(Prim::Neg, self)
    }
}

#[cfg(test)]
mod tests {
    use crate::Dual;

    #[test]
    fn constants_on_either_side_at_every_level() {
        let x = Dual::variable(2.0);
        let y = 3.0 * x - x / 4.0 + 1.0 - 2.0 / x;
        assert_eq!(y.value, 6.0 - 0.5 + 1.0 - 1.0);
        assert_eq!(y.tangent, 3.0 - 0.25 + 0.5);

        let x = Dual::variable(Dual::variable(2.0));
        let y = 1.0 - 3.0 * x * x + x * 0.5 - 2.0;
        assert_eq!(y.value.value, 1.0 - 12.0 + 1.0 - 2.0);
        assert_eq!(y.value.tangent, -12.0 + 0.5);
        assert_eq!(y.tangent.tangent, -6.0);

        let x = Dual::variable(Dual::variable(Dual::variable(2.0)));
        let y = 2.0 * x * x * x;
        assert_eq!(y.tangent.tangent.tangent, 12.0);
    }

    #[test]
    fn compound_assignment() {
        let x = Dual::variable(1.5);
        let mut s = Dual::constant(0.0);
        s += x;
        s *= x;
        s -= 1.0;
        s /= 2.0;
        s += 0.25;
        // (x² − 1)/2 + 1/4
        assert_eq!(s.value, (1.5 * 1.5 - 1.0) / 2.0 + 0.25);
        assert_eq!(s.tangent, 1.5);
    }
}
