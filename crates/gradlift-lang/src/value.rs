//! Runtime values of the reference interpreter, their printed and JSON
//! forms, and the binding of a definition's parameters to argument values
//! (sizes checked and size variables bound).

use crate::prim::Prim;
use crate::printer::format_real;
use crate::syntax::{Expr, Name, Param, Size, Type};
use crate::types::Signature;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

/// A value.
#[derive(Clone, Debug)]
pub enum Value {
    /// A real.
    Real(f64),
    /// An integer.
    Int(i64),
    /// The result of a condition.
    Bool(bool),
    /// A tuple.
    Tuple(Arc<[Value]>),
    /// An array (of reals, tuples or arrays).
    Array(Arc<[Value]>),
    /// A function value.
    Fun(Arc<FunValue>),
}

/// A function value.
#[derive(Debug)]
pub enum FunValue {
    /// A lambda with the values of its free variables.
    Closure {
        /// Its parameters.
        params: Vec<Param>,
        /// Its body.
        body: Arc<Expr>,
        /// Free variables of the lambda and their values at creation.
        captured: Vec<(Name, Value)>,
    },
    /// A primitive used as a function (`(+)`, `max`).
    Prim(Prim),
    /// A definition of the module, by index.
    Def(usize),
}

impl Value {
    /// An array of reals.
    pub fn reals(xs: &[f64]) -> Value {
        Value::Array(xs.iter().map(|&x| Value::Real(x)).collect())
    }

    /// An array of values.
    pub fn array(xs: Vec<Value>) -> Value {
        Value::Array(xs.into())
    }

    /// A tuple.
    pub fn tuple(xs: Vec<Value>) -> Value {
        Value::Tuple(xs.into())
    }

    /// The real, if this is one.
    pub fn as_real(&self) -> Option<f64> {
        match self {
            Value::Real(x) => Some(*x),
            _ => None,
        }
    }

    /// The elements, if this is an array.
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(xs) => Some(xs),
            _ => None,
        }
    }

    /// The integer, if this is one.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(k) => Some(*k),
            _ => None,
        }
    }

    /// Every real in the value, depth first (tuples and arrays flattened;
    /// integers left out: they are not differentiated).
    pub fn flatten(&self, out: &mut Vec<f64>) {
        match self {
            Value::Real(x) => out.push(*x),
            Value::Int(_) | Value::Bool(_) | Value::Fun(_) => {}
            Value::Tuple(xs) | Value::Array(xs) => xs.iter().for_each(|x| x.flatten(out)),
        }
    }

    /// Every real and integer in the value, depth first, as the native
    /// layout stores them: one 8-byte slot each, an integer's slot holding
    /// its two's-complement bits.
    pub fn slots(&self, out: &mut Vec<f64>) {
        match self {
            Value::Real(x) => out.push(*x),
            Value::Int(k) => out.push(f64::from_bits(*k as u64)),
            Value::Bool(_) | Value::Fun(_) => {}
            Value::Tuple(xs) | Value::Array(xs) => xs.iter().for_each(|x| x.slots(out)),
        }
    }

    /// The same shape with its reals replaced, depth first, by `xs` (the
    /// inverse of [`Value::flatten`]; missing reals become 0; integers
    /// stay).
    pub fn with_reals(&self, xs: &mut impl Iterator<Item = f64>) -> Value {
        match self {
            Value::Real(_) => Value::Real(xs.next().unwrap_or(0.0)),
            Value::Tuple(ps) => Value::Tuple(ps.iter().map(|p| p.with_reals(xs)).collect()),
            Value::Array(ps) => Value::Array(ps.iter().map(|p| p.with_reals(xs)).collect()),
            Value::Int(_) | Value::Bool(_) | Value::Fun(_) => self.clone(),
        }
    }

    /// Equality of data values with reals compared bit for bit (so `nan`
    /// equals itself); functions are never equal.
    pub fn same(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::Real(a), Value::Real(b)) => {
                a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
            }
            (Value::Int(a), Value::Int(b)) => a == b,
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (Value::Tuple(a), Value::Tuple(b)) | (Value::Array(a), Value::Array(b)) => {
                a.len() == b.len() && a.iter().zip(b.iter()).all(|(x, y)| x.same(y))
            }
            _ => false,
        }
    }

    /// The JSON form: reals as numbers (non-finite ones as the strings
    /// `"nan"`, `"inf"`, `"-inf"`), tuples and arrays as JSON arrays.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Value::Real(x) => match serde_json::Number::from_f64(*x) {
                Some(n) => serde_json::Value::Number(n),
                None => serde_json::Value::String(format_real(*x)),
            },
            Value::Int(k) => serde_json::Value::Number((*k).into()),
            Value::Bool(b) => serde_json::Value::Bool(*b),
            Value::Tuple(xs) | Value::Array(xs) => {
                serde_json::Value::Array(xs.iter().map(Value::to_json).collect())
            }
            Value::Fun(_) => serde_json::Value::String("<function>".into()),
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Real(x) => f.write_str(&format_real(*x)),
            Value::Int(k) => write!(f, "{k}"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Tuple(xs) | Value::Array(xs) => {
                let (open, close) = if matches!(self, Value::Tuple(_)) {
                    ("(", ")")
                } else {
                    ("[", "]")
                };
                f.write_str(open)?;
                for (i, x) in xs.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{x}")?;
                }
                f.write_str(close)
            }
            Value::Fun(_) => f.write_str("<function>"),
        }
    }
}

/// A value that does not fit a parameter, or sizes that disagree.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct BindError(pub String);

/// Checks `args` against the parameters of `sig` (of the definition
/// `name`) and returns the value of every size variable. Sizes are checked
/// exactly: every array must have the length its type gives, rows of a
/// nested array must agree, and size parameters must be whole numbers ≥ 0.
pub fn bind_sizes(
    name: &str,
    sig: &Signature,
    args: &[Value],
) -> Result<HashMap<Name, i64>, BindError> {
    if args.len() != sig.params.len() {
        return Err(BindError(crate::span::arity_message(
            &format!("`{name}`"),
            sig.params.len(),
            args.len(),
        )));
    }
    let mut sizes: HashMap<Name, (i64, Name)> = HashMap::new();
    let mut constraints: Vec<(Size, i64, Name, String)> = Vec::new();
    for ((pname, pty), arg) in sig.params.iter().zip(args) {
        match pty {
            None => {
                let n = match arg {
                    Value::Int(k) if *k >= 0 && *k <= i64::MAX / 4 => *k,
                    Value::Real(x)
                        if x.fract() == 0.0 && *x >= 0.0 && *x <= i64::MAX as f64 / 4.0 =>
                    {
                        *x as i64
                    }
                    other => {
                        return Err(BindError(format!(
                        "size parameter `{pname}` of `{name}` must be a whole number ≥ 0, found {}",
                        describe(other)
                    )))
                    }
                };
                sizes.insert(pname.clone(), (n, pname.clone()));
            }
            Some(t) => shape_constraints(pname, t, arg, pname.to_string(), &mut constraints)?,
        }
    }
    // Solve constraints with one unknown until nothing changes, then check all.
    loop {
        let mut progress = false;
        for (size, len, pname, _) in &constraints {
            let unbound: Vec<(&Name, i64)> = size
                .terms
                .iter()
                .filter(|(v, _)| !sizes.contains_key(*v))
                .map(|(v, c)| (v, *c))
                .collect();
            if let [(v, k)] = unbound[..] {
                // k·v + rest = len; a solution out of range stays unsolved,
                // and the check below reports the mismatch.
                let solved = size_value(size, &sizes, Some(v))
                    .and_then(|rest| len.checked_sub(rest))
                    .and_then(|d| d.checked_mul(k));
                if let (1 | -1, Some(x)) = (k, solved) {
                    sizes.insert(v.clone(), (x, pname.clone()));
                    progress = true;
                }
            }
        }
        if !progress {
            break;
        }
    }
    // A size no array determines (the row length of an empty array of
    // arrays) is 0.
    for v in &sig.size_vars {
        sizes.entry(v.clone()).or_insert((0, v.clone()));
    }
    for (size, len, _, path) in &constraints {
        let value = size_value(size, &sizes, None);
        if value != Some(*len) {
            let value = value.map_or(" overflows".to_string(), |x| format!(" is {x}"));
            let set_by: Vec<String> = size
                .terms
                .keys()
                .map(|v| {
                    let (x, origin) = &sizes[v];
                    format!("`{v}` = {x}, set by `{origin}`")
                })
                .collect();
            let how = if set_by.is_empty() {
                String::new()
            } else {
                format!(" ({})", set_by.join("; "))
            };
            if size.terms.is_empty() {
                return Err(BindError(format!(
                    "size mismatch in call to `{name}`: `{path}` has length {len}, but its type fixes the length at {size}"
                )));
            }
            return Err(BindError(format!(
                "size mismatch in call to `{name}`: `{path}` has length {len}, but its size `{size}`{value}{how}"
            )));
        }
    }
    for (v, (x, origin)) in &sizes {
        if *x < 0 {
            return Err(BindError(format!(
                "size mismatch in call to `{name}`: `{v}` would be {x} (from `{origin}`)"
            )));
        }
    }
    Ok(sizes.into_iter().map(|(k, (v, _))| (k, v)).collect())
}

/// The value of `size` given the values of its variables (0 for those not
/// in `sizes`), leaving out the term of `skip`; `None` if it overflows.
fn size_value(size: &Size, sizes: &HashMap<Name, (i64, Name)>, skip: Option<&Name>) -> Option<i64> {
    size.terms
        .iter()
        .filter(|(v, _)| Some(*v) != skip)
        .try_fold(size.constant, |acc, (v, c)| {
            let x = sizes.get(v).map_or(0, |(x, _)| *x);
            acc.checked_add(c.checked_mul(x)?)
        })
}

fn describe(v: &Value) -> String {
    match v {
        Value::Real(x) => format!("the real {}", format_real(*x)),
        Value::Int(k) => format!("the integer {k}"),
        Value::Bool(_) => "a condition".into(),
        Value::Tuple(xs) => format!("a tuple of {}", crate::span::count(xs.len(), "component")),
        Value::Array(xs) => format!("an array of length {}", xs.len()),
        Value::Fun(_) => "a function".into(),
    }
}

fn shape_constraints(
    pname: &Name,
    ty: &Type,
    v: &Value,
    path: String,
    out: &mut Vec<(Size, i64, Name, String)>,
) -> Result<(), BindError> {
    match (ty, v) {
        (Type::Real, Value::Real(_)) | (Type::Int, Value::Int(_)) => Ok(()),
        (Type::Tuple(ts), Value::Tuple(xs)) if ts.len() == xs.len() => {
            for (i, (t, x)) in ts.iter().zip(xs.iter()).enumerate() {
                shape_constraints(pname, t, x, format!("{path}.{i}"), out)?;
            }
            Ok(())
        }
        (Type::Array(elem, n), Value::Array(xs)) => {
            out.push((n.clone(), xs.len() as i64, pname.clone(), path.clone()));
            if **elem == Type::Real {
                if let Some(i) = xs.iter().position(|x| !matches!(x, Value::Real(_))) {
                    return Err(BindError(format!(
                        "`{path}[{i}]` must be a real, found {}",
                        describe(&xs[i])
                    )));
                }
            } else if **elem == Type::Int {
                if let Some(i) = xs.iter().position(|x| !matches!(x, Value::Int(_))) {
                    return Err(BindError(format!(
                        "`{path}[{i}]` must be an integer, found {}",
                        describe(&xs[i])
                    )));
                }
            } else {
                for (i, x) in xs.iter().enumerate() {
                    shape_constraints(pname, elem, x, format!("{path}[{i}]"), out)?;
                }
            }
            Ok(())
        }
        _ => Err(BindError(format!(
            "`{path}` must have type `{ty}`, found {}",
            describe(v)
        ))),
    }
}
