//! The native layout of arguments and results on the Rust side: values
//! flattened to reals (row-major, tuples component by component) and back,
//! and the number of reals a type takes at given sizes.

use gradlift_lang::syntax::{Name, Size, Type};
use gradlift_lang::Value;
use std::sync::Arc;

/// Appends the slots of `v` (reals, and integers' bits), depth first.
pub(crate) fn flatten_into(v: &Value, out: &mut Vec<f64>) {
    v.slots(out)
}

pub(crate) fn size_value(s: &Size, vars: &[Name], sizes: &[i64]) -> Option<i64> {
    s.terms.iter().try_fold(s.constant, |acc, (v, k)| {
        let i = vars.iter().position(|x| x == v)?;
        acc.checked_add(k.checked_mul(sizes[i])?)
    })
}

/// Number of reals of a value of type `ty`, a negative length counting as
/// 0 (as the generated code does for `shift1L` of an empty array).
pub(crate) fn flat_len(ty: &Type, vars: &[Name], sizes: &[i64]) -> Option<usize> {
    len_of(ty, vars, sizes, false)
}

/// Like [`flat_len`], but `None` for a negative length.
pub(crate) fn strict_flat_len(ty: &Type, vars: &[Name], sizes: &[i64]) -> Option<usize> {
    len_of(ty, vars, sizes, true)
}

fn len_of(ty: &Type, vars: &[Name], sizes: &[i64], strict: bool) -> Option<usize> {
    match ty {
        Type::Real | Type::Int => Some(1),
        Type::Tuple(ts) => ts.iter().try_fold(0usize, |acc, t| {
            acc.checked_add(len_of(t, vars, sizes, strict)?)
        }),
        Type::Array(elem, n) => {
            let n = size_value(n, vars, sizes)?;
            if strict && n < 0 {
                return None;
            }
            let n = usize::try_from(n.max(0)).ok()?;
            n.checked_mul(len_of(elem, vars, sizes, strict)?)
        }
        Type::Bool | Type::Fun(..) => None,
    }
}

/// The value of type `ty` whose reals start at `data[*at]`; advances `at`.
pub(crate) fn rebuild(
    ty: &Type,
    vars: &[Name],
    sizes: &[i64],
    data: &[f64],
    at: &mut usize,
) -> Value {
    build(ty, vars, sizes, data, at)
}

fn build(ty: &Type, vars: &[Name], sizes: &[i64], data: &[f64], at: &mut usize) -> Value {
    match ty {
        Type::Real => {
            *at += 1;
            Value::Real(data[*at - 1])
        }
        // An integer's slot holds its bits.
        Type::Int => {
            *at += 1;
            Value::Int(data[*at - 1].to_bits() as i64)
        }
        Type::Tuple(ts) => Value::Tuple(
            ts.iter()
                .map(|t| build(t, vars, sizes, data, at))
                .collect::<Arc<[Value]>>(),
        ),
        Type::Array(elem, n) => {
            let n = size_value(n, vars, sizes).unwrap_or(0).max(0);
            Value::Array((0..n).map(|_| build(elem, vars, sizes, data, at)).collect())
        }
        Type::Bool | Type::Fun(..) => unreachable!("results are data"),
    }
}
