//! A compiled loss over a flat parameter vector.
//!
//! [`Loss`] splits the value parameters of a real-valued function into the
//! *fitted* ones, whose reals are concatenated (depth first, in parameter
//! order) into one `Vec<f64>`, and the *data*, held fixed. It compiles the
//! function and its reverse-mode gradient with respect to the fitted
//! parameters once, and calls the native code on flat buffers
//! ([`gradlift::jit::Compiled::call_flat`]): a warm call allocates only the
//! gradient vector it returns. `Loss` implements argmin's [`CostFunction`]
//! and [`Gradient`] with `Param = Vec<f64>`.
//!
//! Minibatches are in `rows.rs`.

use crate::Error;
use argmin::core::{CostFunction, Gradient};
use gradlift::lang::{Located, SourceFile, Spanned};
use gradlift::{Args, Function, GradOptions, Jit, Name, Span, Type, Value};
use std::collections::BTreeSet;

/// One value parameter of the function, in parameter order.
#[derive(Clone, Debug)]
pub(crate) enum Input {
    /// Fitted: its reals are `x[range]`; `shape` is its starting value.
    Fitted {
        range: std::ops::Range<usize>,
        shape: Value,
    },
    /// Data: the full value, and the reals the native code reads (all rows,
    /// or the selected ones).
    Data { value: Value, flat: Vec<f64> },
}

/// A real-valued function compiled with its gradient, some parameters
/// fitted and the others fixed.
pub struct Loss {
    function: String,
    pub(crate) names: Vec<Name>,
    pub(crate) inputs: Vec<Input>,
    start: Vec<f64>,
    primal: gradlift::CompiledFunction,
    pub(crate) gradient: gradlift::CompiledGradient,
    /// Size variable values, in the order of the primal's and the
    /// gradient's size words (the same order: both come from the function's
    /// parameters).
    pub(crate) sizes: Vec<i64>,
    pub(crate) size_vars: Vec<Name>,
    pub(crate) full_sizes: Vec<i64>,
    /// The last point whose gradient was computed, its loss and gradient.
    pub(crate) last: std::sync::Mutex<Option<Evaluated>>,
}

/// A point, the loss there and its gradient.
type Evaluated = (Vec<f64>, f64, Vec<f64>);

/// The message of `e`, located in `source` when it has a place there.
fn render(source: &Option<SourceFile>, e: &gradlift::lang::ArgsError) -> (String, bool) {
    match source {
        Some(src) if e.span() != Span::DUMMY => (
            Located {
                file: src,
                error: e,
            }
            .to_string(),
            true,
        ),
        _ => (e.to_string(), false),
    }
}

impl Loss {
    /// The loss `function` with the parameters named in `start` fitted
    /// (from those starting values) and every other parameter taken from
    /// `data`; compiled with `jit`.
    pub fn from_args(
        function: &Function,
        jit: &Jit,
        start: &Args,
        data: &Args,
    ) -> Result<Loss, Error> {
        let sig = function.signature();
        let name = function.name().to_string();
        let all = parameter_list(function);
        let fitted: BTreeSet<Name> = start.entries.iter().map(|(n, _, _)| n.clone()).collect();
        check_fitted(function, start.entries.iter().map(|(n, _, _)| n))?;
        for (n, _, _) in &data.entries {
            if fitted.contains(n) {
                return Err(Error::FittedAndData(n.to_string()));
            }
            if !sig.params.iter().any(|(p, _)| p == n) {
                return Err(Error::UnknownData {
                    name: n.to_string(),
                    function: name,
                    params: all,
                });
            }
        }
        for (p, ty) in &sig.params {
            if !fitted.contains(p) && !data.entries.iter().any(|(n, _, _)| n == p) {
                return Err(Error::MissingData {
                    name: p.to_string(),
                    ty: ty.as_ref().map_or("size".to_string(), Type::to_string),
                    function: name,
                });
            }
        }
        // Each group converted against its own part of the signature, so
        // that messages point into the text they came from.
        let mut start_sig = sig.clone();
        start_sig.params.retain(|(p, _)| fitted.contains(p));
        let mut data_sig = sig.clone();
        data_sig.params.retain(|(p, _)| !fitted.contains(p));
        let start_values = start.values_for(&name, &start_sig).map_err(|e| {
            let (message, located) = render(&start.source, &e);
            Error::Start { message, located }
        })?;
        let data_values = data.values_for(&name, &data_sig).map_err(|e| {
            let (message, located) = render(&data.source, &e);
            Error::Data { message, located }
        })?;
        let (mut s, mut d) = (start_values.into_iter(), data_values.into_iter());
        let values: Vec<Value> = sig
            .params
            .iter()
            .map(|(p, _)| {
                if fitted.contains(p) {
                    s.next()
                } else {
                    d.next()
                }
                .expect("one value per parameter")
            })
            .collect();
        let names: Vec<Name> = sig
            .params
            .iter()
            .filter(|(p, _)| fitted.contains(p))
            .map(|(p, _)| p.clone())
            .collect();
        Loss::new(function, jit, &names, &values)
    }

    /// The loss `function` with the parameters `fitted` optimized, starting
    /// from their entries in `values` (one value per parameter, sizes
    /// included, in parameter order); the other entries are the data.
    pub fn new(
        function: &Function,
        jit: &Jit,
        fitted: &[Name],
        values: &[Value],
    ) -> Result<Loss, Error> {
        check_fitted(function, fitted.iter())?;
        let sig = function.signature();
        let name = function.name().to_string();
        let bound = gradlift::lang::value::bind_sizes(&name, sig, values)
            .map_err(|e| Error::Shape(e.to_string()))?;
        let mut inputs = Vec::new();
        let mut start = Vec::new();
        let mut names = Vec::new();
        for ((p, ty), v) in sig.params.iter().zip(values) {
            if ty.is_none() {
                continue;
            }
            if fitted.contains(p) {
                let at = start.len();
                v.flatten(&mut start);
                inputs.push(Input::Fitted {
                    range: at..start.len(),
                    shape: v.clone(),
                });
                names.push(p.clone());
            } else {
                let mut flat = Vec::new();
                v.flatten(&mut flat);
                inputs.push(Input::Data {
                    value: v.clone(),
                    flat,
                });
            }
        }
        // The gradient with respect to the fitted parameters, in parameter
        // order: its cotangents come out in the order of `x`.
        let gradient = function
            .gradient(Some(&names), GradOptions::default())?
            .compile(jit)?;
        let primal = function.compile(jit)?;
        let size_vars = gradient.native().signature().size_vars.clone();
        assert_eq!(
            size_vars,
            primal.native().signature().size_vars,
            "the function and its gradient bind the same size variables"
        );
        let sizes: Vec<i64> = size_vars.iter().map(|v| bound[v]).collect();
        Ok(Loss {
            function: name,
            names,
            inputs,
            start,
            primal,
            gradient,
            full_sizes: sizes.clone(),
            last: std::sync::Mutex::new(None),
            sizes,
            size_vars,
        })
    }

    /// The name of the function.
    pub fn function(&self) -> &str {
        &self.function
    }

    /// The fitted parameters, in the order their reals take in `x`.
    pub fn names(&self) -> &[Name] {
        &self.names
    }

    /// The number of fitted reals.
    pub fn dim(&self) -> usize {
        self.start.len()
    }

    /// The starting values, flattened.
    pub fn start(&self) -> Vec<f64> {
        self.start.clone()
    }

    /// The fitted parameters at `x`, shaped as their starting values.
    ///
    /// # Panics
    ///
    /// If `x` has fewer than [`Loss::dim`] reals.
    pub fn unflatten(&self, x: &[f64]) -> Vec<(Name, Value)> {
        let mut out = Vec::new();
        for input in &self.inputs {
            if let Input::Fitted { range, shape } = input {
                let value = shape.with_reals(&mut x[range.clone()].iter().copied());
                out.push((self.names[out.len()].clone(), value));
            }
        }
        out
    }

    fn slices<'a>(&'a self, x: &'a [f64]) -> Result<Vec<&'a [f64]>, Error> {
        if x.len() != self.dim() {
            return Err(Error::Dimension {
                given: x.len(),
                expected: self.dim(),
            });
        }
        Ok(self
            .inputs
            .iter()
            .map(|i| match i {
                Input::Fitted { range, .. } => &x[range.clone()],
                Input::Data { flat, .. } => flat.as_slice(),
            })
            .collect())
    }

    fn cached(&self, x: &[f64]) -> Option<(f64, Vec<f64>)> {
        match &*self.last.lock().expect("cache") {
            Some((at, value, gradient)) if at == x => Some((*value, gradient.clone())),
            _ => None,
        }
    }

    /// The loss at `x`, by the compiled function (or the last gradient
    /// evaluation, if it was at `x`).
    pub fn value(&self, x: &[f64]) -> Result<f64, Error> {
        if let Some((value, _)) = self.cached(x) {
            return Ok(value);
        }
        let inputs = self.slices(x)?;
        let mut out = [0.0];
        self.primal
            .native()
            .call_flat(&self.sizes, &inputs, &mut out)
            .map_err(|e| Error::Run(e.to_string()))?;
        Ok(out[0])
    }

    /// The loss and its gradient at `x`, by the compiled gradient (the
    /// last result is kept: asking again at the same point is free).
    pub fn value_and_gradient(&self, x: &[f64]) -> Result<(f64, Vec<f64>), Error> {
        if let Some(hit) = self.cached(x) {
            return Ok(hit);
        }
        let inputs = self.slices(x)?;
        let mut out = vec![0.0; 1 + self.dim()];
        self.gradient
            .native()
            .call_flat(&self.sizes, &inputs, &mut out)
            .map_err(|e| Error::Run(e.to_string()))?;
        let value = out.remove(0);
        *self.last.lock().expect("cache") = Some((x.to_vec(), value, out.clone()));
        Ok((value, out))
    }
}

/// The parameters of `function`, comma-separated.
fn parameter_list(function: &Function) -> String {
    let sig = function.signature();
    let names: Vec<&str> = sig.params.iter().map(|(p, _)| &**p).collect();
    names.join(", ")
}

/// Checks that `function` returns a real and that `fitted` names at least
/// one of its parameters, each a parameter that is not a size.
fn check_fitted<'n>(
    function: &Function,
    fitted: impl Iterator<Item = &'n Name>,
) -> Result<(), Error> {
    let sig = function.signature();
    if sig.ret != Type::Real {
        return Err(Error::NotScalar {
            function: function.name().to_string(),
            ty: sig.ret.to_string(),
        });
    }
    let mut any = false;
    for f in fitted {
        match sig.params.iter().find(|(p, _)| p == f) {
            None => {
                return Err(Error::UnknownParameter {
                    name: f.to_string(),
                    function: function.name().to_string(),
                    params: parameter_list(function),
                })
            }
            Some((_, None)) => return Err(Error::SizeParameter(f.to_string())),
            Some(_) => any = true,
        }
    }
    if !any {
        return Err(Error::NothingToFit {
            function: function.name().to_string(),
            params: parameter_list(function),
        });
    }
    Ok(())
}

impl CostFunction for Loss {
    type Param = Vec<f64>;
    type Output = f64;

    fn cost(&self, x: &Vec<f64>) -> Result<f64, argmin::core::Error> {
        Ok(self.value(x)?)
    }
}

impl Gradient for Loss {
    type Param = Vec<f64>;
    type Gradient = Vec<f64>;

    fn gradient(&self, x: &Vec<f64>) -> Result<Vec<f64>, argmin::core::Error> {
        Ok(self.value_and_gradient(x)?.1)
    }
}
