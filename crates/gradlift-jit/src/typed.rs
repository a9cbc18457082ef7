//! Typed calls on borrowed memory: arguments given as shapes and slices,
//! the result written into a caller-owned buffer, with no [`Value`]
//! trees ([`crate::Compiled::call_args`]).
//!
//! [`bind_shapes`] finds the size variables from the arguments' shapes
//! the way the calls on values do (`bind.rs`, whose step it shares): a
//! dimension whose size expression has a single unbound variable, of
//! coefficient ±1, determines it (repeatedly, until nothing new is
//! learnt), variables no dimension determines are 0, and then every
//! dimension is checked against its expression. A mismatch names the parameter, the shape it
//! was given and the shape its type asks for. Binding writes into a
//! buffer the caller reuses, so a warm call allocates nothing.
//!
//! [`Value`]: gradlift_lang::Value

use gradlift_lang::syntax::{Name, Size, Type};
use gradlift_lang::types::Signature;

/// One argument of a typed call, borrowed from the caller.
#[derive(Clone, Copy, Debug)]
pub enum Arg<'a> {
    /// A real (`R`), or a size parameter given as a whole number.
    Real(f64),
    /// An integer (`Z`), or a size parameter.
    Int(i64),
    /// An array of reals (`[R; n]`, `[[R; d]; m]`, …): its shape,
    /// outermost dimension first, and its elements in row-major order.
    Reals(&'a [usize], &'a [f64]),
    /// An array of integers, likewise.
    Ints(&'a [usize], &'a [i64]),
}

impl<'a> Arg<'a> {
    /// Its shape (empty for a scalar).
    pub fn shape(&self) -> &'a [usize] {
        match self {
            Arg::Real(_) | Arg::Int(_) => &[],
            Arg::Reals(s, _) | Arg::Ints(s, _) => s,
        }
    }

    /// Its slots as the native layout holds them: reals, and integers'
    /// bits in a real's slot.
    pub(crate) fn slots(&self) -> &[f64] {
        match self {
            Arg::Real(x) => std::slice::from_ref(x),
            // SAFETY: i64 and f64 have the same size and alignment, and
            // every bit pattern is a valid f64 (the code reads the bits
            // back as an integer).
            Arg::Int(k) => unsafe { std::slice::from_raw_parts(k as *const i64 as *const f64, 1) },
            Arg::Reals(_, d) => d,
            // SAFETY: as above.
            Arg::Ints(_, d) => unsafe {
                std::slice::from_raw_parts(d.as_ptr() as *const f64, d.len())
            },
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Arg::Real(_) => "a real",
            Arg::Int(_) => "an integer",
            Arg::Reals(..) => "an array of reals",
            Arg::Ints(..) => "an array of integers",
        }
    }
}

/// The dimensions of `ty`, outermost first.
pub fn dims(ty: &Type) -> impl Iterator<Item = &Size> {
    std::iter::successors(Some(ty), |t| match t {
        Type::Array(elem, _) => Some(&**elem),
        _ => None,
    })
    .filter_map(|t| match t {
        Type::Array(_, n) => Some(n),
        _ => None,
    })
}

/// The scalar type of the elements of `ty` (itself for a scalar), or
/// `None` when they are not reals or integers (tuples, booleans,
/// functions).
pub fn scalar(ty: &Type) -> Option<&Type> {
    let mut t = ty;
    while let Type::Array(elem, _) = t {
        t = elem;
    }
    matches!(t, Type::Real | Type::Int).then_some(t)
}

/// The value of `s` at `sizes` (the variables of `vars`, in order).
pub fn size_at(s: &Size, vars: &[Name], sizes: &[i64]) -> Option<i64> {
    crate::layout::size_value(s, vars, sizes)
}

/// Binds the size variables of `sig` (in its order) from the shapes of
/// `args` into `sizes`, checking every argument's kind and shape; see the
/// module documentation. `name` is the function's, for messages.
pub fn bind_shapes(
    name: &str,
    sig: &Signature,
    args: &[Arg],
    sizes: &mut Vec<Option<i64>>,
) -> Result<(), String> {
    let vars = &sig.size_vars;
    if args.len() != sig.params.len() {
        return Err(gradlift_lang::span::arity_message(
            &format!("`{name}`"),
            sig.params.len(),
            args.len(),
        ));
    }
    sizes.clear();
    sizes.resize(vars.len(), None);
    // Size parameters first; then the kinds of the other arguments.
    for ((p, ty), arg) in sig.params.iter().zip(args) {
        match ty {
            None => {
                let k = match *arg {
                    Arg::Int(k) => Some(k),
                    Arg::Real(x) if x.fract() == 0.0 && x.abs() <= 1e18 => Some(x as i64),
                    _ => None,
                };
                match (k, vars.iter().position(|v| v == p)) {
                    (Some(k), Some(i)) if k >= 0 => sizes[i] = Some(k),
                    _ => {
                        return Err(format!(
                            "size parameter `{p}` of `{name}` must be a whole number ≥ 0, found {}",
                            arg.kind()
                        ))
                    }
                }
            }
            Some(ty) => {
                let Some(elem) = scalar(ty) else {
                    return Err(format!(
                        "parameter `{p}: {ty}` of `{name}` cannot be passed as shapes and slices (tuples need `call_flat`)"
                    ));
                };
                let fits = match arg {
                    Arg::Real(_) | Arg::Int(_) => {
                        dims(ty).next().is_none() && arg_elem_fits(arg, elem)
                    }
                    Arg::Reals(s, _) | Arg::Ints(s, _)
                        if s.len() == dims(ty).count() && !s.is_empty() =>
                    {
                        arg_elem_fits(arg, elem)
                            && s.iter().try_fold(1usize, |a, &n| a.checked_mul(n))
                                == Some(arg.slots().len())
                    }
                    _ => false,
                };
                if !fits {
                    return Err(format!(
                        "parameter `{p}` of `{name}` has type `{ty}`, given {} of shape {}",
                        arg.kind(),
                        shape_text(arg.shape())
                    ));
                }
            }
        }
    }
    let overflow = || format!("the shapes given to `{name}` overflow its sizes");
    // Solve dimensions with one unbound variable until nothing is learnt.
    loop {
        let mut learnt = false;
        for ((_, ty), arg) in sig.params.iter().zip(args) {
            let Some(ty) = ty else { continue };
            for (s, &n) in dims(ty).zip(arg.shape()) {
                let n = i64::try_from(n).map_err(|_| overflow())?;
                learnt |= crate::bind::solve_dim(s, n, vars, sizes).ok_or_else(overflow)?;
            }
        }
        if !learnt {
            break;
        }
    }
    for s in sizes.iter_mut() {
        s.get_or_insert(0);
    }
    // Every dimension against its expression.
    for ((p, ty), arg) in sig.params.iter().zip(args) {
        let Some(ty) = ty else { continue };
        let fits = dims(ty)
            .zip(arg.shape())
            .all(|(s, &n)| crate::bind::eval(s, vars, sizes, None) == i64::try_from(n).ok());
        if !fits {
            let want: Vec<String> = dims(ty)
                .map(|s| match crate::bind::eval(s, vars, sizes, None) {
                    Some(k) => format!("{s} = {k}"),
                    None => s.to_string(),
                })
                .collect();
            return Err(format!(
                "parameter `{p}` of `{name}` has shape {}, its type `{ty}` asks for ({}) with the sizes the other arguments give",
                shape_text(arg.shape()),
                want.join(", ")
            ));
        }
    }
    Ok(())
}

fn arg_elem_fits(arg: &Arg, elem: &Type) -> bool {
    matches!(
        (arg, elem),
        (Arg::Real(_) | Arg::Reals(..), Type::Real) | (Arg::Int(_) | Arg::Ints(..), Type::Int)
    )
}

fn shape_text(shape: &[usize]) -> String {
    match shape {
        [] => "() (a scalar)".to_string(),
        [n] => format!("({n},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}
