//! How values of the language live in generated code.
//!
//! - `R` is one `f64` SSA value, `Z` one `i64`; a condition is an `i8`
//!   (0 or 1).
//! - A tuple is its components, flattened: no memory is involved.
//! - An array is a view `(ptr, len)` of `len` elements stored one after the
//!   other, each element taking the same number of `f64` slots: arrays are
//!   regular (the sizes are in the types), so an array of arrays is stored
//!   row-major and an array of tuples as flattened rows (array of
//!   structures). Every scalar takes one 8-byte slot: a real's `f64`, an
//!   integer's two's-complement `i64`. The element layout is a [`Shape`]: the lengths of the
//!   inner arrays, as `i64` SSA values, shared by every element.
//!
//! Slicing (`shift1L`, `take`, `drop`, indexing an outer array) therefore
//! only moves the pointer and changes the length; nothing is copied.

use cranelift_codegen::ir::{types, InstBuilder, MemFlagsData, Value};
use cranelift_frontend::FunctionBuilder;

/// The layout of one array element.
#[derive(Clone, Debug)]
pub(crate) enum Shape {
    /// One `f64`.
    Real,
    /// One `i64`.
    Int,
    /// Components one after the other.
    Tuple(Vec<Shape>),
    /// `len` elements of the inner shape, inline.
    Array(Value, Box<Shape>),
}

/// An array: a pointer to its first element, its length, the element layout.
#[derive(Clone, Debug)]
pub(crate) struct ArrayVal {
    /// Address of element 0.
    pub ptr: Value,
    /// Number of elements (`i64`, ≥ 0).
    pub len: Value,
    /// Layout of each element.
    pub elem: Shape,
}

/// A lowered value.
#[derive(Clone, Debug)]
pub(crate) enum Values {
    /// A real (`f64`).
    Real(Value),
    /// An integer (`i64`).
    Int(Value),
    /// A condition (`i8`).
    Bool(Value),
    /// A tuple.
    Tuple(Vec<Values>),
    /// An array view.
    Array(ArrayVal),
}

impl Shape {
    /// Whether the layout holds scalars only (no arrays).
    pub fn reals_only(&self) -> bool {
        match self {
            Shape::Real | Shape::Int => true,
            Shape::Tuple(ss) => ss.iter().all(Shape::reals_only),
            Shape::Array(..) => false,
        }
    }

    /// Appends the inner lengths, outermost first.
    pub fn flatten(&self, out: &mut Vec<Value>) {
        match self {
            Shape::Real | Shape::Int => {}
            Shape::Tuple(ss) => ss.iter().for_each(|s| s.flatten(out)),
            Shape::Array(len, elem) => {
                out.push(*len);
                elem.flatten(out);
            }
        }
    }

    /// A shape like `self` whose lengths are taken from `vals`.
    pub fn rebuild(&self, vals: &mut impl Iterator<Item = Value>) -> Shape {
        match self {
            Shape::Real => Shape::Real,
            Shape::Int => Shape::Int,
            Shape::Tuple(ss) => Shape::Tuple(ss.iter().map(|s| s.rebuild(vals)).collect()),
            Shape::Array(_, elem) => {
                let len = vals.next().expect("as many values as flattened");
                Shape::Array(len, Box::new(elem.rebuild(vals)))
            }
        }
    }
}

impl Values {
    /// Every SSA value it consists of, in a fixed order.
    pub fn flatten(&self, out: &mut Vec<Value>) {
        match self {
            Values::Real(v) | Values::Int(v) | Values::Bool(v) => out.push(*v),
            Values::Tuple(vs) => vs.iter().for_each(|v| v.flatten(out)),
            Values::Array(a) => {
                out.push(a.ptr);
                out.push(a.len);
                a.elem.flatten(out);
            }
        }
    }

    /// A value of the same structure as `self` made of `vals` (the inverse
    /// of [`Values::flatten`]).
    pub fn rebuild(&self, vals: &mut impl Iterator<Item = Value>) -> Values {
        let mut next = || vals.next().expect("as many values as flattened");
        match self {
            Values::Real(_) => Values::Real(next()),
            Values::Int(_) => Values::Int(next()),
            Values::Bool(_) => Values::Bool(next()),
            Values::Tuple(vs) => Values::Tuple(vs.iter().map(|v| v.rebuild(vals)).collect()),
            Values::Array(a) => {
                let ptr = next();
                let len = next();
                let elem = a.elem.rebuild(vals);
                Values::Array(ArrayVal { ptr, len, elem })
            }
        }
    }

    /// The layout of this value stored as an array element.
    pub fn shape(&self) -> Option<Shape> {
        Some(match self {
            Values::Real(_) => Shape::Real,
            Values::Int(_) => Shape::Int,
            Values::Bool(_) => return None,
            Values::Tuple(vs) => Shape::Tuple(vs.iter().map(Values::shape).collect::<Option<_>>()?),
            Values::Array(a) => Shape::Array(a.len, Box::new(a.elem.clone())),
        })
    }

    /// The flattened values as a vector.
    pub fn to_vec(&self) -> Vec<Value> {
        let mut out = Vec::new();
        self.flatten(&mut out);
        out
    }
}

/// Memory flags for workspace and argument accesses: aligned and never
/// trapping (every access is bounds checked before it is made).
pub(crate) fn mem() -> MemFlagsData {
    MemFlagsData::trusted()
}

/// Loads the element stored at `addr` with layout `shape`: reals are
/// loaded, arrays become views into the same memory.
pub(crate) fn load(b: &mut FunctionBuilder, addr: Value, shape: &Shape) -> Values {
    match shape {
        Shape::Real => Values::Real(b.ins().load(types::F64, mem(), addr, 0)),
        Shape::Int => Values::Int(b.ins().load(types::I64, mem(), addr, 0)),
        Shape::Tuple(ss) => {
            let mut at = addr;
            let mut out = Vec::with_capacity(ss.len());
            for s in ss {
                out.push(load(b, at, s));
                let bytes = unchecked_bytes(b, s);
                at = b.ins().iadd(at, bytes);
            }
            Values::Tuple(out)
        }
        Shape::Array(len, elem) => Values::Array(ArrayVal {
            ptr: opaque(b, addr),
            len: *len,
            elem: (**elem).clone(),
        }),
    }
}

/// `ptr`, as a value instruction selection cannot see through. A row's
/// address is computed once per outer iteration (`base + k·stride`); an
/// inner loop reading the row at `ptr + i·8` would otherwise have the
/// computation folded into each of its address modes, recomputing it at
/// every element (Cranelift merges pure instructions into their uses,
/// wherever they are). An instruction with two results is never merged.
pub(crate) fn opaque(b: &mut FunctionBuilder, ptr: Value) -> Value {
    let zero = b.ins().iconst(types::I64, 0);
    b.ins().uadd_overflow(ptr, zero).0
}

/// Bytes an element of `shape` takes, without overflow checks: only for
/// shapes whose size was checked when their storage was allocated.
pub(crate) fn unchecked_bytes(b: &mut FunctionBuilder, shape: &Shape) -> Value {
    match shape {
        Shape::Real | Shape::Int => b.ins().iconst(types::I64, 8),
        Shape::Tuple(ss) => {
            let mut total = b.ins().iconst(types::I64, 0);
            for s in ss {
                let k = unchecked_bytes(b, s);
                total = b.ins().iadd(total, k);
            }
            total
        }
        Shape::Array(len, elem) => {
            let k = unchecked_bytes(b, elem);
            b.ins().imul(*len, k)
        }
    }
}
