//! Size binding and result filling without heap allocation, for the warm
//! path of [`crate::Compiled::call_into`].
//!
//! [`bind`] finds the size variables from the argument values the way
//! [`gradlift_lang::value::bind_sizes`] does (a size `c ± v + …` whose other
//! variables are known gives `v`; sizes no array determines are 0) and then
//! checks every array of every argument against its type exactly. It
//! writes into a buffer the caller reuses, and gives up (returns `false`)
//! on anything unusual — a mismatch, a size it cannot solve — leaving the
//! diagnosis (and the rare general case) to `bind_sizes`.
//!
//! [`fill`] writes a flat result into a [`Value`] of the same shape in
//! place (its arrays and tuples not shared), rebuilding only the parts
//! whose shape differs.

use crate::layout::rebuild;
use gradlift_lang::syntax::{Name, Size, Type};
use gradlift_lang::types::Signature;
use gradlift_lang::Value;
use std::sync::Arc;

/// Binds the size variables of `sig` (in its order) from `args` into
/// `sizes`; `false` if the arguments do not fit or the binding needs the
/// general solver.
pub(crate) fn bind(sig: &Signature, args: &[Value], sizes: &mut Vec<Option<i64>>) -> bool {
    let vars = &sig.size_vars;
    sizes.clear();
    sizes.resize(vars.len(), None);
    if args.len() != sig.params.len() {
        return false;
    }
    for ((name, ty), arg) in sig.params.iter().zip(args) {
        if ty.is_none() {
            let x = match arg {
                Value::Int(k) if (0..=crate::abi::MAX_LEN).contains(k) => *k,
                Value::Real(x)
                    if x.fract() == 0.0 && *x >= 0.0 && *x <= crate::abi::MAX_LEN as f64 =>
                {
                    *x as i64
                }
                _ => return false,
            };
            let Some(i) = vars.iter().position(|v| v == name) else {
                return false;
            };
            sizes[i] = Some(x);
        }
    }
    for _ in 0..=vars.len() {
        let mut progress = false;
        for ((_, ty), arg) in sig.params.iter().zip(args) {
            if let Some(ty) = ty {
                match solve(ty, arg, vars, sizes) {
                    Some(p) => progress |= p,
                    None => return false,
                }
            }
        }
        if !progress {
            break;
        }
    }
    for s in sizes.iter_mut() {
        s.get_or_insert(0);
    }
    sig.params
        .iter()
        .zip(args)
        .all(|((_, ty), arg)| ty.as_ref().is_none_or(|t| fits(t, arg, vars, sizes)))
}

/// The value of `s`, when its variables are bound, except `skip`.
pub(crate) fn eval(
    s: &Size,
    vars: &[Name],
    sizes: &[Option<i64>],
    skip: Option<&Name>,
) -> Option<i64> {
    s.terms
        .iter()
        .filter(|(v, _)| Some(*v) != skip)
        .try_fold(s.constant, |acc, (v, k)| {
            let x = sizes[vars.iter().position(|w| w == v)?]?;
            acc.checked_add(k.checked_mul(x)?)
        })
}

/// Binds what a dimension of length `len` whose size is `n` determines:
/// the one variable of `n` still unbound, when its coefficient is ±1.
/// `Some(true)` if it bound it, `None` on overflow. Shared by the binding
/// of values (here) and of shapes (`typed.rs`).
pub(crate) fn solve_dim(
    n: &Size,
    len: i64,
    vars: &[Name],
    sizes: &mut [Option<i64>],
) -> Option<bool> {
    let mut unbound = n.terms.iter().filter(|(v, _)| {
        vars.iter()
            .position(|w| w == *v)
            .is_some_and(|i| sizes[i].is_none())
    });
    if let (Some((v, &k)), None) = (unbound.next(), unbound.next()) {
        if k == 1 || k == -1 {
            let rest = eval(n, vars, sizes, Some(v))?;
            let x = len.checked_sub(rest)?.checked_mul(k)?;
            let i = vars.iter().position(|w| w == v)?;
            sizes[i] = Some(x);
            return Some(true);
        }
    }
    Some(false)
}

/// One pass binding what `arg` determines of `ty`'s sizes: `Some(true)` if
/// a variable was bound, `None` if `arg` is not of `ty`'s form.
fn solve(ty: &Type, arg: &Value, vars: &[Name], sizes: &mut [Option<i64>]) -> Option<bool> {
    match (ty, arg) {
        (Type::Real, Value::Real(_)) | (Type::Int, Value::Int(_)) => Some(false),
        (Type::Tuple(ts), Value::Tuple(xs)) if ts.len() == xs.len() => {
            let mut progress = false;
            for (t, x) in ts.iter().zip(xs.iter()) {
                progress |= solve(t, x, vars, sizes)?;
            }
            Some(progress)
        }
        (Type::Array(elem, n), Value::Array(xs)) => {
            let mut progress = solve_dim(n, xs.len() as i64, vars, sizes)?;
            if let Some(first) = xs.first() {
                progress |= solve(elem, first, vars, sizes)?;
            }
            Some(progress)
        }
        _ => None,
    }
}

/// Whether `arg` has exactly the shape of `ty` at `sizes`.
fn fits(ty: &Type, arg: &Value, vars: &[Name], sizes: &[Option<i64>]) -> bool {
    match (ty, arg) {
        (Type::Real, Value::Real(_)) | (Type::Int, Value::Int(_)) => true,
        (Type::Tuple(ts), Value::Tuple(xs)) => {
            ts.len() == xs.len()
                && ts
                    .iter()
                    .zip(xs.iter())
                    .all(|(t, x)| fits(t, x, vars, sizes))
        }
        (Type::Array(elem, n), Value::Array(xs)) => {
            eval(n, vars, sizes, None) == Some(xs.len() as i64)
                && xs.iter().all(|x| fits(elem, x, vars, sizes))
        }
        _ => false,
    }
}

/// Writes the reals `data[*at..]` into `v` as a value of type `ty`,
/// in place where `v` already has that shape and owns its parts.
pub(crate) fn fill(
    v: &mut Value,
    ty: &Type,
    vars: &[Name],
    sizes: &[i64],
    data: &[f64],
    at: &mut usize,
) {
    let in_place = match (ty, &mut *v) {
        (Type::Real, Value::Real(x)) => {
            *x = data[*at];
            *at += 1;
            true
        }
        (Type::Int, Value::Int(k)) => {
            *k = data[*at].to_bits() as i64;
            *at += 1;
            true
        }
        (Type::Tuple(ts), Value::Tuple(xs)) => match Arc::get_mut(xs) {
            Some(xs) if xs.len() == ts.len() => {
                for (t, x) in ts.iter().zip(xs.iter_mut()) {
                    fill(x, t, vars, sizes, data, at);
                }
                true
            }
            _ => false,
        },
        (Type::Array(elem, n), Value::Array(xs)) => {
            let len = crate::layout::size_value(n, vars, sizes)
                .unwrap_or(0)
                .max(0);
            match Arc::get_mut(xs) {
                Some(xs) if xs.len() as i64 == len => {
                    for x in xs.iter_mut() {
                        fill(x, elem, vars, sizes, data, at);
                    }
                    true
                }
                _ => false,
            }
        }
        _ => false,
    };
    if !in_place {
        *v = rebuild(ty, vars, sizes, data, at);
    }
}
