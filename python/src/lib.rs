//! `gradlift._gradlift`: the Python extension under the `gradlift`
//! package (`python/gradlift/__init__.py` re-exports it).
//!
//! `compile(source, fn, wrt)` parses, checks and JIT-compiles through one
//! process-wide `Jit` (its compile cache makes a repeated compile a
//! lookup) and returns a [`Function`]. Its calls take numpy arrays and
//! Python numbers in parameter order (or by name), hand C-contiguous
//! float64 and int64 arrays to the native code in place (others are
//! converted once by numpy), release the GIL while the code runs, and
//! return floats and numpy arrays.

use gradlift::jit::Arg;
use gradlift::{ErrorKind, GradOptions, Jit, Name, Program, Type};
use numpy::{PyArrayDyn, PyArrayMethods, PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use std::sync::OnceLock;

create_exception!(_gradlift, Error, PyException, "Any error of gradlift.");
create_exception!(_gradlift, ParseError, Error, "The text does not parse.");
create_exception!(
    _gradlift,
    TypeCheckError,
    Error,
    "The program does not type-check."
);
create_exception!(
    _gradlift,
    UnknownFunctionError,
    Error,
    "No definition has that name."
);
create_exception!(
    _gradlift,
    RuntimeError,
    Error,
    "A run-time error of the program (an index out of bounds, a limit)."
);
create_exception!(
    _gradlift,
    DifferentiationError,
    Error,
    "The function cannot be differentiated as asked."
);
create_exception!(
    _gradlift,
    CompileError,
    Error,
    "The native backend cannot compile the program."
);

/// The process's compiler, created on first use; with a disk cache under
/// `$GRADLIFT_CACHE_DIR` when that is set and not empty.
fn jit() -> PyResult<&'static Jit> {
    static JIT: OnceLock<Jit> = OnceLock::new();
    if let Some(j) = JIT.get() {
        return Ok(j);
    }
    let mut j = Jit::new().map_err(|e| CompileError::new_err(e.to_string()))?;
    if let Some(dir) = std::env::var_os("GRADLIFT_CACHE_DIR").filter(|d| !d.is_empty()) {
        j = j.disk_cache(dir);
    }
    Ok(JIT.get_or_init(|| j))
}

/// A gradlift error as the Python exception of its kind, with the same
/// caret-and-position message as the command line; arguments that do not
/// fit are a `ValueError`.
fn raise(e: gradlift::Error) -> PyErr {
    let message = e.to_string();
    match e.kind() {
        ErrorKind::Syntax => ParseError::new_err(message),
        ErrorKind::Type => TypeCheckError::new_err(message),
        ErrorKind::UnknownFunction => UnknownFunctionError::new_err(message),
        ErrorKind::Arguments => PyValueError::new_err(message),
        ErrorKind::Differentiate => DifferentiationError::new_err(message),
        ErrorKind::Unsupported | ErrorKind::Compile => CompileError::new_err(message),
        _ => RuntimeError::new_err(message),
    }
}

/// A compiled function of a gradlift program.
#[pyclass(frozen, module = "gradlift._gradlift")]
struct Function {
    program: Program,
    name: String,
    wrt: Option<Vec<Name>>,
    value: gradlift::CompiledFunction,
    gradient: OnceLock<gradlift::CompiledGradient>,
    hvp: OnceLock<gradlift::CompiledPair>,
}

/// An argument converted for a call: the numpy array it reads (kept
/// alive and borrowed for the call) or a number.
enum Held<'py> {
    Real(f64),
    Int(i64),
    Reals(PyReadonlyArrayDyn<'py, f64>, Vec<usize>),
    Ints(PyReadonlyArrayDyn<'py, i64>, Vec<usize>),
    Tuple(Vec<Held<'py>>),
}

/// Calls `k` with the typed arguments `done` followed by those of
/// `held`: a tuple's components are made first, borrowed by the
/// [`Arg::Tuple`] that continues (so no argument is copied).
fn with_args<'a, R>(
    held: &'a [Held<'_>],
    mut done: Vec<Arg<'a>>,
    k: &mut dyn FnMut(&[Arg<'_>]) -> PyResult<R>,
) -> PyResult<R> {
    let Some((first, rest)) = held.split_first() else {
        return k(&done);
    };
    match first {
        Held::Tuple(parts) => with_args(parts, Vec::with_capacity(parts.len()), &mut |parts| {
            let mut next: Vec<Arg<'_>> = done.clone();
            next.push(Arg::Tuple(parts));
            with_args(rest, next, k)
        }),
        leaf => {
            done.push(leaf.arg()?);
            with_args(rest, done, k)
        }
    }
}

impl Held<'_> {
    fn arg(&self) -> PyResult<Arg<'_>> {
        let contiguous = || PyValueError::new_err("array is not contiguous after conversion");
        Ok(match self {
            Held::Real(x) => Arg::Real(*x),
            Held::Int(k) => Arg::Int(*k),
            Held::Reals(a, s) => Arg::Reals(s, a.as_slice().map_err(|_| contiguous())?),
            Held::Ints(a, s) => Arg::Ints(s, a.as_slice().map_err(|_| contiguous())?),
            Held::Tuple(_) => unreachable!("tuples are made by `with_args`"),
        })
    }
}

/// `obj` as a C-contiguous, aligned array of `dtype` (itself when it is
/// one, otherwise `numpy.require`'s copy).
fn contiguous<'py>(obj: &Bound<'py, PyAny>, dtype: &str) -> PyResult<Bound<'py, PyAny>> {
    let np = obj.py().import("numpy")?;
    np.call_method1("require", (obj, dtype, "CA"))
}

/// Converts the Python argument `obj` for the parameter `p: ty` (`None`:
/// a size parameter).
fn hold<'py>(p: &str, ty: Option<&Type>, obj: &Bound<'py, PyAny>) -> PyResult<Held<'py>> {
    let wrong = |what: &str| {
        PyValueError::new_err(format!(
            "parameter `{p}`: expected {what}, got {}",
            describe(obj)
        ))
    };
    match ty {
        None | Some(Type::Int) => obj
            .extract::<i64>()
            .map(Held::Int)
            .map_err(|_| wrong("an integer")),
        Some(Type::Real) => obj
            .extract::<f64>()
            .map(Held::Real)
            .map_err(|_| wrong("a real number")),
        Some(t @ Type::Array(..)) => {
            let elem = gradlift::jit::typed::scalar(t).ok_or_else(|| {
                PyTypeError::new_err(format!(
                    "parameter `{p}: {t}`: arrays of tuples cannot be passed from Python; pass a tuple of arrays, one per component"
                ))
            })?;
            let rank = gradlift::jit::typed::dims(t).count();
            let held = if *elem == Type::Real {
                let (a, shape) = array::<f64>(obj, "float64")
                    .map_err(|_| wrong(&format!("an array of reals of rank {rank}")))?;
                Held::Reals(a, shape)
            } else {
                let (a, shape) = array::<i64>(obj, "int64")
                    .map_err(|_| wrong(&format!("an array of integers of rank {rank}")))?;
                Held::Ints(a, shape)
            };
            Ok(held)
        }
        Some(Type::Tuple(ts)) => {
            let items = obj
                .cast::<PyTuple>()
                .ok()
                .filter(|t| t.len() == ts.len())
                .ok_or_else(|| wrong(&format!("a tuple of {} components", ts.len())))?;
            let parts = ts
                .iter()
                .zip(items.iter())
                .enumerate()
                .map(|(i, (t, item))| hold(&format!("{p}.{i}"), Some(t), &item))
                .collect::<PyResult<Vec<_>>>()?;
            Ok(Held::Tuple(parts))
        }
        Some(t) => Err(PyTypeError::new_err(format!(
            "parameter `{p}: {t}` cannot be passed from Python"
        ))),
    }
}

/// `obj` as a read-only C-contiguous, aligned numpy array of `T`
/// (`dtype`'s name for numpy): itself when it is one, converted once
/// otherwise.
fn array<'py, T: numpy::Element>(
    obj: &Bound<'py, PyAny>,
    dtype: &str,
) -> PyResult<(PyReadonlyArrayDyn<'py, T>, Vec<usize>)> {
    // Read in place when it can be a slice (C-contiguous and aligned:
    // arrays that arrive through a buffer, as from Dask, may not be).
    if let Ok(a) = obj.cast::<PyArrayDyn<T>>() {
        let r = a.readonly();
        if a.is_c_contiguous() && r.as_slice().is_ok() {
            return Ok((r, a.shape().to_vec()));
        }
    }
    let a = contiguous(obj, dtype)?.cast_into::<PyArrayDyn<T>>()?;
    let shape = a.shape().to_vec();
    Ok((a.readonly(), shape))
}

fn describe(obj: &Bound<'_, PyAny>) -> String {
    match obj.get_type().name() {
        Ok(n) => format!("a `{n}`"),
        Err(_) => "a value".to_string(),
    }
}

/// The reals of a result of type `ty` at `sizes`, starting at
/// `data[*at]`, as Python objects: a float, a numpy array, a tuple.
fn result<'py>(
    py: Python<'py>,
    ty: &Type,
    vars: &[Name],
    sizes: &[i64],
    data: &[f64],
    at: &mut usize,
) -> PyResult<Bound<'py, PyAny>> {
    match ty {
        Type::Real => {
            *at += 1;
            Ok(data[*at - 1].into_pyobject(py)?.into_any())
        }
        Type::Int => {
            *at += 1;
            Ok((data[*at - 1].to_bits() as i64)
                .into_pyobject(py)?
                .into_any())
        }
        Type::Tuple(ts) => {
            let parts = ts
                .iter()
                .map(|t| result(py, t, vars, sizes, data, at))
                .collect::<PyResult<Vec<_>>>()?;
            Ok(PyTuple::new(py, parts)?.into_any())
        }
        Type::Array(..) => {
            let shape: Vec<usize> = gradlift::jit::typed::dims(ty)
                .map(|s| {
                    gradlift::jit::typed::size_at(s, vars, sizes)
                        .unwrap_or(0)
                        .max(0) as usize
                })
                .collect();
            let n: usize = shape.iter().product();
            let part = &data[*at..*at + n];
            *at += n;
            let flat = if gradlift::jit::typed::scalar(ty) == Some(&Type::Int) {
                numpy::PyArray1::from_iter(py, part.iter().map(|x| x.to_bits() as i64))
                    .reshape(shape)?
                    .into_any()
            } else {
                numpy::PyArray1::from_slice(py, part)
                    .reshape(shape)?
                    .into_any()
            };
            Ok(flat)
        }
        t => Err(PyTypeError::new_err(format!(
            "a result of type `{t}` cannot be returned to Python"
        ))),
    }
}

impl Function {
    fn function(&self) -> gradlift::Function<'_> {
        self.program
            .function(&self.name)
            .expect("the function was found at compile time")
    }

    /// Binds `args` and `kwargs` to the parameters, in order, followed
    /// with `directions` by one direction per parameter that is not a size
    /// (by keyword `d<name>`).
    fn bind<'py>(
        &self,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
        directions: bool,
    ) -> PyResult<Vec<Held<'py>>> {
        let f = self.function();
        let sig = f.signature();
        let mut slots: Vec<(String, Option<&Type>)> = sig
            .params
            .iter()
            .map(|(p, t)| (p.to_string(), t.as_ref()))
            .collect();
        if directions {
            slots.extend(
                sig.params
                    .iter()
                    .filter_map(|(p, t)| t.as_ref().map(|t| (format!("d{p}"), Some(t)))),
            );
        }
        if args.len() > slots.len() {
            return Err(PyTypeError::new_err(format!(
                "`{}` takes {} arguments, {} given",
                self.name,
                slots.len(),
                args.len()
            )));
        }
        if let Some(k) = kwargs {
            for key in k.keys() {
                let key: String = key.extract()?;
                if !slots.iter().any(|(s, _)| *s == key) {
                    return Err(PyTypeError::new_err(format!(
                        "`{}` has no parameter `{key}`",
                        self.name
                    )));
                }
            }
        }
        let mut held = Vec::with_capacity(slots.len());
        for (at, (key, ty)) in slots.iter().enumerate() {
            let obj = match (args.get_item(at), kwargs.map(|k| k.get_item(key))) {
                (Ok(a), None | Some(Ok(None))) => a,
                (Err(_), Some(Ok(Some(v)))) => v,
                (Ok(_), Some(Ok(Some(_)))) => {
                    return Err(PyTypeError::new_err(format!(
                        "`{}` got parameter `{key}` twice",
                        self.name
                    )))
                }
                _ => {
                    return Err(PyTypeError::new_err(format!(
                        "`{}` is missing parameter `{key}`",
                        self.name
                    )))
                }
            };
            held.push(hold(key, *ty, &obj)?);
        }
        Ok(held)
    }

    fn gradient(&self) -> PyResult<&gradlift::CompiledGradient> {
        if let Some(g) = self.gradient.get() {
            return Ok(g);
        }
        let g = self
            .function()
            .compile_gradient(jit()?, self.wrt.as_deref(), GradOptions::default())
            .map_err(raise)?;
        Ok(self.gradient.get_or_init(|| g))
    }

    /// Runs `compiled` on `held`, the GIL released, and returns its
    /// flat result with the sizes it was computed at.
    fn run(
        py: Python<'_>,
        compiled: &gradlift::jit::Compiled,
        held: &[Held<'_>],
    ) -> PyResult<(Vec<f64>, Vec<i64>)> {
        let (mut out, mut sizes) = (Vec::new(), Vec::new());
        with_args(held, Vec::with_capacity(held.len()), &mut |args| {
            py.detach(|| compiled.call_args_resizing(args, &mut out, &mut sizes))
                .map_err(|e| raise(e.into()))
        })?;
        Ok((out, sizes))
    }
}

#[pymethods]
impl Function {
    /// The function's value: a float, a numpy array or a tuple.
    #[pyo3(signature = (*args, **kwargs))]
    fn __call__<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let held = self.bind(args, kwargs, false)?;
        let native = self.value.native();
        let (out, sizes) = Self::run(py, native, &held)?;
        let sig = native.signature();
        result(py, &sig.ret, &sig.size_vars, &sizes, &out, &mut 0)
    }

    /// `(value, gradients)`: the value, and a tuple with one numpy array
    /// (or float) per differentiated parameter, in parameter order.
    #[pyo3(signature = (*args, **kwargs))]
    fn value_and_grad<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<(f64, Bound<'py, PyTuple>)> {
        let held = self.bind(args, kwargs, false)?;
        let native = self.gradient()?.native();
        let (out, sizes) = Self::run(py, native, &held)?;
        let sig = native.signature();
        let Type::Tuple(parts) = &sig.ret else {
            unreachable!("a gradient returns (value, gradient)")
        };
        let mut at = 1;
        let grads = match &parts[1] {
            Type::Tuple(ts) if self.wrt_count() > 1 => ts
                .iter()
                .map(|t| result(py, t, &sig.size_vars, &sizes, &out, &mut at))
                .collect::<PyResult<Vec<_>>>()?,
            t => vec![result(py, t, &sig.size_vars, &sizes, &out, &mut at)?],
        };
        Ok((out[0], PyTuple::new(py, grads)?))
    }

    /// The gradients alone, as `value_and_grad` gives them.
    #[pyo3(signature = (*args, **kwargs))]
    fn grad<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        Ok(self.value_and_grad(py, args, kwargs)?.1)
    }

    /// The Hessian-vector product: `f.hvp(x1, …, xk, d1, …, dk)` (or the
    /// directions by keyword `dx1=…`) returns `(value, gradient, H·d)`,
    /// the last two tuples with one entry per parameter that is not a size.
    #[pyo3(signature = (*args, **kwargs))]
    fn hvp<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<(f64, Bound<'py, PyTuple>, Bound<'py, PyTuple>)> {
        let held = self.bind(args, kwargs, true)?;
        let pair = match self.hvp.get() {
            Some(p) => p,
            None => {
                let p = self.function().compile_hvp(jit()?).map_err(raise)?;
                self.hvp.get_or_init(|| p)
            }
        };
        let native = pair.native();
        let (out, sizes) = Self::run(py, native, &held)?;
        // ((value, gradient), (value's derivative, H·d)), flat.
        let sig = native.signature();
        let Type::Tuple(halves) = &sig.ret else {
            unreachable!("a Hessian-vector program returns a pair")
        };
        let (Type::Tuple(primal), Type::Tuple(tangent)) = (&halves[0], &halves[1]) else {
            unreachable!("a Hessian-vector program returns pairs of pairs")
        };
        let mut at = 0;
        let mut read = |t: &Type| result(py, t, &sig.size_vars, &sizes, &out, &mut at);
        let value = read(&primal[0])?.extract::<f64>()?;
        let per_parameter = |v: Bound<'py, PyAny>, t: &Type| -> PyResult<Bound<'py, PyTuple>> {
            match t {
                Type::Tuple(_) if self.values_count() > 1 => Ok(v.cast_into::<PyTuple>()?),
                _ => PyTuple::new(py, [v]),
            }
        };
        let gradient = per_parameter(read(&primal[1])?, &primal[1])?;
        read(&tangent[0])?;
        let hd = per_parameter(read(&tangent[1])?, &tangent[1])?;
        Ok((value, gradient, hd))
    }

    /// The function's signature, as the language writes it.
    #[getter]
    fn signature(&self) -> String {
        self.function().header()
    }

    /// The names of the size parameters (`s: size`).
    #[getter]
    fn size_parameters(&self) -> Vec<String> {
        self.function()
            .signature()
            .params
            .iter()
            .filter(|(_, t)| t.is_none())
            .map(|(p, _)| p.to_string())
            .collect()
    }

    /// The parameters' names, in order.
    #[getter]
    fn parameters(&self) -> Vec<String> {
        self.function()
            .signature()
            .params
            .iter()
            .map(|(p, _)| p.to_string())
            .collect()
    }

    fn __repr__(&self) -> String {
        format!("<gradlift.Function {}>", self.signature())
    }
}

impl Function {
    /// How many parameters are not sizes (the Hessian-vector product's
    /// gradient and directions have one entry each).
    fn values_count(&self) -> usize {
        self.function()
            .signature()
            .params
            .iter()
            .filter(|(_, t)| t.is_some())
            .count()
    }

    /// How many parameters the gradient is taken with respect to.
    fn wrt_count(&self) -> usize {
        match &self.wrt {
            Some(w) => w.len(),
            None => self
                .function()
                .signature()
                .params
                .iter()
                .filter(|(_, t)| t.is_some())
                .count(),
        }
    }
}

/// Parses, checks and JIT-compiles `source`'s function `fn` (the last
/// definition when not given); its gradient is taken with respect to
/// `wrt` (every parameter that is not a size when not given) and compiled
/// on first use. `path` names the text in messages.
#[pyfunction]
#[pyo3(signature = (source, r#fn = None, wrt = None, path = "<string>"))]
fn compile(
    py: Python<'_>,
    source: &str,
    r#fn: Option<&str>,
    wrt: Option<Vec<String>>,
    path: &str,
) -> PyResult<Function> {
    let jit = jit()?;
    let program = py
        .detach(|| Program::parse_in(jit, path, source))
        .map_err(raise)?;
    let name = match r#fn {
        Some(n) => program.function(n),
        None => program.last_function(),
    }
    .map_err(raise)?
    .name()
    .to_string();
    let wrt: Option<Vec<Name>> = wrt.map(|w| w.iter().map(|n| Name::from(n.as_str())).collect());
    let value = {
        let f = program.function(&name).map_err(raise)?;
        py.detach(|| f.compile(jit)).map_err(raise)?
    };
    if let Some(w) = &wrt {
        let f = program.function(&name).map_err(raise)?;
        if let Some(bad) = w.iter().find(|n| {
            !f.signature()
                .params
                .iter()
                .any(|(p, t)| p == *n && t.is_some())
        }) {
            return Err(PyValueError::new_err(format!(
                "wrt: `{bad}` is not a parameter of `{name}` that is not a size"
            )));
        }
    }
    Ok(Function {
        program,
        name,
        wrt,
        value,
        gradient: OnceLock::new(),
        hvp: OnceLock::new(),
    })
}

/// This process's compile cache: `(hits, misses, entries)`.
#[pyfunction]
fn cache_stats() -> PyResult<(u64, u64, usize)> {
    let s = jit()?.cache_stats();
    Ok((s.hits, s.misses, s.entries))
}

/// This process's disk cache (`$GRADLIFT_CACHE_DIR`): a dict of its
/// `hits`, `misses`, `writes`, `failed_writes` and `damaged` files, or
/// `None` without one.
#[pyfunction]
fn disk_cache_stats() -> PyResult<Option<std::collections::HashMap<&'static str, u64>>> {
    Ok(jit()?.disk_stats().map(|s| {
        [
            ("hits", s.hits),
            ("misses", s.misses),
            ("writes", s.writes),
            ("failed_writes", s.failed_writes),
            ("damaged", s.damaged),
        ]
        .into()
    }))
}

#[pymodule]
fn _gradlift(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_function(wrap_pyfunction!(compile, m)?)?;
    m.add_function(wrap_pyfunction!(cache_stats, m)?)?;
    m.add_function(wrap_pyfunction!(disk_cache_stats, m)?)?;
    m.add_class::<Function>()?;
    m.add("Error", py.get_type::<Error>())?;
    m.add("ParseError", py.get_type::<ParseError>())?;
    m.add("TypeCheckError", py.get_type::<TypeCheckError>())?;
    m.add(
        "UnknownFunctionError",
        py.get_type::<UnknownFunctionError>(),
    )?;
    m.add("RuntimeError", py.get_type::<RuntimeError>())?;
    m.add(
        "DifferentiationError",
        py.get_type::<DifferentiationError>(),
    )?;
    m.add("CompileError", py.get_type::<CompileError>())?;
    Ok(())
}
