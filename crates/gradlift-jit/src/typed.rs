//! Typed calls on borrowed memory: arguments given as shapes and slices,
//! the result written into a caller-owned buffer, with no [`Value`]
//! trees ([`crate::Compiled::call_args`]).
//!
//! [`bind_shapes`] finds the size variables from the arguments' shapes
//! the way the calls on values do (`bind.rs`, whose step it shares): a
//! dimension whose size expression has a single unbound variable, of
//! coefficient ±1, determines it (repeatedly, until nothing new is
//! learnt), variables no dimension determines are 0, and then every
//! dimension is checked against its expression. A mismatch names the
//! parameter (and the tuple component), the shape it was given and the
//! shape its type asks for. Binding writes into a buffer the caller
//! reuses, so a warm call allocates nothing.
//!
//! A tuple parameter is given as [`Arg::Tuple`] of its components. Its
//! native layout is one buffer holding the components end to end, so a
//! tuple's slots are copied into a buffer of the workspace (reused from
//! call to call); every other argument is read in place. Arrays of
//! tuples (`[(R, R); n]`) have their components interleaved element by
//! element and are given through `call_flat`.
//!
//! With the `ndarray` feature, [`Arg::from_array`] borrows an
//! `ndarray` array or view in standard (row-major, contiguous) layout.
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
    /// A tuple (`(R, [R; n])`, …): its components, in order.
    Tuple(&'a [Arg<'a>]),
}

impl<'a> Arg<'a> {
    /// Its shape (empty for a scalar or a tuple).
    pub fn shape(&self) -> &'a [usize] {
        match self {
            Arg::Real(_) | Arg::Int(_) | Arg::Tuple(_) => &[],
            Arg::Reals(s, _) | Arg::Ints(s, _) => s,
        }
    }

    /// Its slots as the native layout holds them (reals, and integers'
    /// bits in a real's slot), for an argument that is not a tuple.
    pub(crate) fn slots(&self) -> &'a [f64] {
        match *self {
            Arg::Real(_) | Arg::Int(_) | Arg::Tuple(_) => {
                unreachable!("scalars and tuples are copied, see `write_slots`")
            }
            Arg::Reals(_, d) => d,
            // SAFETY: i64 and f64 have the same size and alignment, and
            // every bit pattern is a valid f64 (the code reads the bits
            // back as an integer).
            Arg::Ints(_, d) => unsafe {
                std::slice::from_raw_parts(d.as_ptr() as *const f64, d.len())
            },
        }
    }

    /// Appends its slots, tuples' components end to end, to `out`.
    pub(crate) fn write_slots(&self, out: &mut Vec<f64>) {
        match *self {
            Arg::Real(x) => out.push(x),
            Arg::Int(k) => out.push(f64::from_bits(k as u64)),
            Arg::Reals(..) | Arg::Ints(..) => out.extend_from_slice(self.slots()),
            Arg::Tuple(parts) => parts.iter().for_each(|p| p.write_slots(out)),
        }
    }

    /// Whether the native code can read it in place (an array); scalars
    /// and tuples are copied into the workspace.
    pub(crate) fn in_place(&self) -> bool {
        matches!(self, Arg::Reals(..) | Arg::Ints(..))
    }

    fn kind(&self) -> String {
        match self {
            Arg::Real(_) => "a real".into(),
            Arg::Int(_) => "an integer".into(),
            Arg::Reals(..) => "an array of reals".into(),
            Arg::Ints(..) => "an array of integers".into(),
            Arg::Tuple(ps) => format!("a tuple of {} components", ps.len()),
        }
    }
}

#[cfg(feature = "ndarray")]
impl<'a> Arg<'a> {
    /// Borrows an `ndarray` array or view of reals or integers (of any
    /// dimension) in place. It must be in standard layout, row-major and
    /// contiguous; for another (a transposed view, a strided slice)
    /// `as_standard_layout()` makes the copy this refuses to make
    /// silently. A 0-dimensional array is a scalar.
    pub fn from_array<T, S, D>(a: &'a ndarray::ArrayBase<S, D>) -> Result<Arg<'a>, crate::CallError>
    where
        T: Element,
        S: ndarray::Data<Elem = T>,
        D: ndarray::Dimension,
    {
        let data = a.as_slice().ok_or_else(|| {
            crate::CallError::Arguments(format!(
                "an array of shape {} with strides {:?} is not in standard layout: pass `as_standard_layout()` of it",
                shape_text(a.shape()),
                a.strides()
            ))
        })?;
        Ok(if a.ndim() == 0 {
            T::scalar(data[0])
        } else {
            T::array(a.shape(), data)
        })
    }
}

/// The element types an [`Arg`] borrows: `f64` and `i64`.
pub trait Element: Copy + sealed::Sealed {
    /// A scalar of this type.
    fn scalar(x: Self) -> Arg<'static>;
    /// An array of this type.
    fn array<'a>(shape: &'a [usize], data: &'a [Self]) -> Arg<'a>;
}

impl Element for f64 {
    fn scalar(x: f64) -> Arg<'static> {
        Arg::Real(x)
    }
    fn array<'a>(shape: &'a [usize], data: &'a [f64]) -> Arg<'a> {
        Arg::Reals(shape, data)
    }
}

impl Element for i64 {
    fn scalar(x: i64) -> Arg<'static> {
        Arg::Int(x)
    }
    fn array<'a>(shape: &'a [usize], data: &'a [i64]) -> Arg<'a> {
        Arg::Ints(shape, data)
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f64 {}
    impl Sealed for i64 {}
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

/// Where an argument's leaf sits: a parameter, or a component of a
/// tuple. Written only for messages, so binding allocates nothing.
#[derive(Clone, Copy)]
enum Path<'p> {
    Param(&'p str),
    Component(&'p Path<'p>, usize),
}

impl std::fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Path::Param(p) => f.write_str(p),
            Path::Component(outer, i) => write!(f, "{outer}.{i}"),
        }
    }
}

/// Calls `f(path, ty, arg)` on each leaf (a scalar or an array of
/// scalars) of an argument whose kinds were checked by [`check_kind`].
fn leaves<'t, 'a>(
    path: Path,
    ty: &'t Type,
    arg: &Arg<'a>,
    f: &mut impl FnMut(Path, &'t Type, &Arg<'a>) -> Result<(), String>,
) -> Result<(), String> {
    match (ty, arg) {
        (Type::Tuple(ts), Arg::Tuple(parts)) => {
            for (i, (t, a)) in ts.iter().zip(*parts).enumerate() {
                leaves(Path::Component(&path, i), t, a, f)?;
            }
            Ok(())
        }
        _ => f(path, ty, arg),
    }
}

/// Checks that `arg` is of `ty`'s kind: scalars, arrays of the same
/// rank and element, tuples of the same arity, and each array's data as
/// long as its shape says. `path` names it in messages.
fn check_kind(name: &str, path: Path, ty: &Type, arg: &Arg) -> Result<(), String> {
    let fits = match (ty, arg) {
        (Type::Tuple(ts), Arg::Tuple(parts)) if ts.len() == parts.len() => {
            for (i, (t, a)) in ts.iter().zip(*parts).enumerate() {
                check_kind(name, Path::Component(&path, i), t, a)?;
            }
            return Ok(());
        }
        (Type::Tuple(_), _) | (_, Arg::Tuple(_)) => false,
        _ => match scalar(ty) {
            None => {
                return Err(format!(
                    "parameter `{path}: {ty}` of `{name}` cannot be passed as shapes and slices (arrays of tuples need `call_flat`)"
                ))
            }
            Some(elem) => match arg {
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
            },
        },
    };
    if fits {
        Ok(())
    } else {
        Err(format!(
            "parameter `{path}` of `{name}` has type `{ty}`, given {}{}",
            arg.kind(),
            if arg.in_place() {
                format!(" of shape {}", shape_text(arg.shape()))
            } else {
                String::new()
            }
        ))
    }
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
            Some(ty) => check_kind(name, Path::Param(p), ty, arg)?,
        }
    }
    let overflow = || format!("the shapes given to `{name}` overflow its sizes");
    // Solve dimensions with one unbound variable until nothing is learnt.
    loop {
        let mut learnt = false;
        for ((p, ty), arg) in sig.params.iter().zip(args) {
            let Some(ty) = ty else { continue };
            leaves(Path::Param(p), ty, arg, &mut |_, ty, arg| {
                for (s, &n) in dims(ty).zip(arg.shape()) {
                    let n = i64::try_from(n).map_err(|_| overflow())?;
                    learnt |= crate::bind::solve_dim(s, n, vars, sizes).ok_or_else(overflow)?;
                }
                Ok(())
            })?;
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
        leaves(Path::Param(p), ty, arg, &mut |path, ty, arg| {
            let fits = dims(ty)
                .zip(arg.shape())
                .all(|(s, &n)| crate::bind::eval(s, vars, sizes, None) == i64::try_from(n).ok());
            if fits {
                return Ok(());
            }
            let want: Vec<String> = dims(ty)
                .map(|s| match crate::bind::eval(s, vars, sizes, None) {
                    Some(k) => format!("{s} = {k}"),
                    None => s.to_string(),
                })
                .collect();
            Err(format!(
                "parameter `{path}` of `{name}` has shape {}, its type `{ty}` asks for ({}) with the sizes the other arguments give",
                shape_text(arg.shape()),
                want.join(", ")
            ))
        })?;
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
