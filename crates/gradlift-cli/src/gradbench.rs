//! `gradlift gradbench`: a GradBench tool on stdin and stdout.
//!
//! GradBench (github.com/gradbench/gradbench) drives a tool with one JSON
//! object per line: `start`, `define` (a module), `evaluate` (a function
//! of a defined module on an input) and `analysis` messages, each answered
//! in order with the same `id`. The modules are programs of the gradlift
//! language shipped in `crates/gradlift-cli/gradbench/`; at `define` each
//! function the module exports is compiled to native code (the function
//! itself, its gradient, or a Hessian-vector product), and the compile time
//! is reported. At `evaluate` the input is converted to flat buffers, the
//! native code is run `min_runs` times and until `min_seconds` have passed,
//! one `evaluate` timing per run, and the result is converted back to JSON.
//! Only the native call (and, for `kmeans`' `dir`, the division of the
//! two arrays it returns) is timed.
//!
//! A message that is not a JSON object with an `id` ends the session with
//! an error; every error about a module, a function or an input is answered
//! with `"success": false` and the tool keeps serving.

use gradlift::lang::value::bind_sizes;
use gradlift::lang::Signature;
use gradlift::{Args, GradOptions, Jit, Name, Program, Type, Value};
use serde_json::{json, Map, Value as Json};
use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::time::{Duration, Instant};

mod modules;

use modules::{module_names, Derive, ModuleSource, Reshape, MODULES};

/// One GradBench function, compiled.
struct Entry {
    derive: Derive,
    /// The signature of the definition it derives from (its parameters are
    /// the input's members).
    sig: Signature,
    /// The definition's name, for messages.
    name: String,
    code: Code,
}

/// The compiled program behind an [`Entry`].
enum Code {
    Function(gradlift::CompiledFunction),
    Gradient(gradlift::CompiledGradient),
    /// A Hessian-vector product with respect to some parameters.
    Native(gradlift::jit::Compiled),
}

impl Code {
    fn native(&self) -> &gradlift::jit::Compiled {
        match self {
            Code::Function(f) => f.native(),
            Code::Gradient(g) => g.native(),
            Code::Native(c) => c,
        }
    }
}

/// A defined module: its functions by GradBench name.
struct Module {
    entries: HashMap<&'static str, Entry>,
    /// How an input becomes the definitions' arguments
    /// ([`ModuleSource::input`]).
    input: &'static [Reshape],
}

fn compile_module(source: &ModuleSource, jit: &Jit) -> Result<Module, String> {
    let path = format!("gradbench/{}.grad", source.name);
    let program = Program::parse(&path, source.text).map_err(|e| e.to_string())?;
    let mut entries = HashMap::new();
    for &(name, derive) in source.functions {
        let (function, code) = match derive {
            Derive::Value(f)
            | Derive::Repeated { function: f, .. }
            | Derive::BundleJacobian { function: f }
            | Derive::HandJacobian { function: f } => {
                let function = program.function(f).map_err(|e| e.to_string())?;
                let compiled = function.compile(jit).map_err(|e| e.to_string())?;
                (function, Code::Function(compiled))
            }
            Derive::Gradient { function: f, wrt } | Derive::NamedGradient { function: f, wrt } => {
                let function = program.function(f).map_err(|e| e.to_string())?;
                let wrt: Vec<Name> = wrt.iter().map(|w| Name::from(*w)).collect();
                let compiled = function
                    .compile_gradient(jit, Some(&wrt), GradOptions::default())
                    .map_err(|e| e.to_string())?;
                (function, Code::Gradient(compiled))
            }
            Derive::NewtonDirection { function: f, wrt } => {
                let function = program.function(f).map_err(|e| e.to_string())?;
                let index = program
                    .module()
                    .index_of(f)
                    .unwrap_or_else(|| unreachable!("`{f}` was found above"));
                let hvp = gradlift::ad::pipeline::gradient_hvp_program_wrt(
                    program.module(),
                    index,
                    Some(&[Name::from(wrt)]),
                    GradOptions::default(),
                )
                .map_err(|e| e.to_string())?;
                let compiled = jit.compile(&hvp).map_err(|e| e.to_string())?;
                (function, Code::Native(compiled))
            }
        };
        entries.insert(
            name,
            Entry {
                derive,
                sig: function.signature().clone(),
                name: function.name().to_string(),
                code,
            },
        );
    }
    Ok(Module {
        entries,
        input: source.input,
    })
}

/// Serves GradBench messages read from `input` until it ends, answering
/// each on `output`, one line per answer.
pub fn serve(input: impl BufRead, mut output: impl Write) -> Result<(), String> {
    let jit = Jit::new().map_err(|e| format!("error: {e}"))?;
    let mut modules: HashMap<String, Module> = HashMap::new();
    for (index, line) in input.lines().enumerate() {
        let line = line.map_err(|e| format!("error: cannot read a message: {e}"))?;
        if line.trim().is_empty() {
            continue;
        }
        let number = index + 1;
        let mut message: Json = serde_json::from_str(&line)
            .map_err(|e| format!("error: line {number}: not a JSON message: {e}"))?;
        let Some(id) = message.get("id").cloned() else {
            return Err(format!(
                "error: line {number}: the message is not a JSON object with an `id`"
            ));
        };
        let answer = match message.get("kind").and_then(Json::as_str) {
            Some("start") => json!({ "id": id, "tool": "gradlift" }),
            Some("define") => define(id, &message, &jit, &mut modules),
            Some("evaluate") => match evaluate(&mut message, &modules) {
                Ok((result, timings)) => json!({
                    "id": id,
                    "success": true,
                    "output": result,
                    "timings": timings
                        .iter()
                        .map(|t| json!({ "name": "evaluate", "nanoseconds": t.as_nanos() as u64 }))
                        .collect::<Vec<_>>(),
                }),
                Err(error) => json!({ "id": id, "success": false, "error": error }),
            },
            _ => json!({ "id": id }),
        };
        writeln!(output, "{answer}")
            .and_then(|()| output.flush())
            .map_err(|e| format!("error: cannot write an answer: {e}"))?;
    }
    Ok(())
}

/// Compiles the module a `define` message names.
fn define(id: Json, message: &Json, jit: &Jit, modules: &mut HashMap<String, Module>) -> Json {
    let name = message.get("module").and_then(Json::as_str).unwrap_or("");
    let Some(source) = MODULES.iter().find(|m| m.name == name) else {
        let error = format!(
            "gradlift has no module `{name}` (it has: {})",
            module_names().join(", ")
        );
        return json!({ "id": id, "success": false, "error": error });
    };
    let start = Instant::now();
    match compile_module(source, jit) {
        Ok(module) => {
            let nanoseconds = start.elapsed().as_nanos() as u64;
            modules.insert(name.to_string(), module);
            json!({
                "id": id,
                "success": true,
                "timings": [{ "name": "compile", "nanoseconds": nanoseconds }],
            })
        }
        Err(error) => json!({ "id": id, "success": false, "error": error }),
    }
}

/// How often to run a function: at least `min_runs` times and until the
/// runs add up to `min_seconds`.
struct Runs {
    min_runs: u64,
    min_seconds: f64,
}

impl Runs {
    /// Takes `min_runs` (or `runs`) and `min_seconds` out of an input
    /// object (1 run and 0 seconds when absent).
    fn take(input: &mut Json) -> Result<Runs, String> {
        let Json::Object(members) = input else {
            return Ok(Runs {
                min_runs: 1,
                min_seconds: 0.0,
            });
        };
        // Earlier GradBench evals name the count `runs`.
        let runs = members.remove("runs");
        let min_runs = match members.remove("min_runs").or(runs) {
            None => 1,
            Some(v) => v.as_u64().ok_or_else(|| {
                format!("`min_runs` (or `runs`) must be a whole number ≥ 0, not {v}")
            })?,
        };
        let min_seconds = match members.remove("min_seconds") {
            None => 0.0,
            Some(v) => v
                .as_f64()
                .filter(|s| s.is_finite() && *s >= 0.0)
                .ok_or_else(|| format!("`min_seconds` must be a number ≥ 0, not {v}"))?,
        };
        Ok(Runs {
            min_runs,
            min_seconds,
        })
    }

    /// Runs `f` as often as asked (at least once); the time of each run.
    fn time(&self, mut f: impl FnMut() -> Result<(), String>) -> Result<Vec<Duration>, String> {
        let mut timings = Vec::new();
        let mut total = Duration::ZERO;
        loop {
            let start = Instant::now();
            f()?;
            let elapsed = start.elapsed();
            timings.push(elapsed);
            total += elapsed;
            if timings.len() as u64 >= self.min_runs.max(1)
                && total.as_secs_f64() >= self.min_seconds
            {
                return Ok(timings);
            }
        }
    }
}

/// Runs the function an `evaluate` message names on its input: the output
/// and the time of every run.
fn evaluate(
    message: &mut Json,
    modules: &HashMap<String, Module>,
) -> Result<(Json, Vec<Duration>), String> {
    let module_name = message
        .get("module")
        .and_then(Json::as_str)
        .ok_or("the message names no `module`")?;
    let module = modules
        .get(module_name)
        .ok_or_else(|| format!("the module `{module_name}` is not defined"))?;
    let function = message
        .get("function")
        .and_then(Json::as_str)
        .ok_or("the message names no `function`")?;
    let entry = module.entries.get(function).ok_or_else(|| {
        let mut names: Vec<&str> = module.entries.keys().copied().collect();
        names.sort_unstable();
        format!(
            "the module `{module_name}` has no function `{function}` (it has: {})",
            names.join(", ")
        )
    })?;
    let mut input = message
        .get_mut("input")
        .map(Json::take)
        .ok_or("the message has no `input`")?;
    let runs = Runs::take(&mut input)?;
    for step in module.input {
        reshape(&mut input, *step)?;
    }
    let mut call = Call::prepare(entry, input)?;
    let timings = runs.time(|| call.run(entry))?;
    Ok((call.output(entry), timings))
}

/// The flat buffers of one evaluation.
struct Call {
    /// Every size variable, by name.
    sizes: HashMap<Name, i64>,
    /// The size variables in the order of the native code's signature.
    size_words: Vec<i64>,
    /// One buffer per value parameter of the native code.
    inputs: Vec<Vec<f64>>,
    /// The native code's result.
    out: Vec<f64>,
    /// For a Newton direction: where J and H start in `out`, and J ⊘ H.
    direction: Option<(usize, usize, Vec<f64>)>,
}

impl Call {
    /// Converts the input (an object from parameter names to values, or a
    /// bare value for a function of one parameter) to flat buffers.
    fn prepare(entry: &Entry, input: Json) -> Result<Call, String> {
        let input = match input {
            Json::Object(_) => input,
            value => match entry.sig.params.as_slice() {
                [(p, _)] => Json::Object(Map::from_iter([(p.to_string(), value)])),
                _ => {
                    return Err(format!(
                        "the input must be an object from parameter names of `{}` to values",
                        entry.name
                    ))
                }
            },
        };
        let args = Args::from_json(&input).map_err(|e| e.to_string())?;
        drop(input);
        let values = args
            .values_for(&entry.name, &entry.sig)
            .map_err(|e| e.to_string())?;
        drop(args);
        let sizes = bind_sizes(&entry.name, &entry.sig, &values).map_err(|e| e.to_string())?;
        let native = entry.code.native().signature();
        let size_words = native
            .size_vars
            .iter()
            .map(|v| sizes.get(v).copied())
            .collect::<Option<Vec<i64>>>()
            .unwrap_or_else(|| unreachable!("the compiled program has the sizes of its source"));
        let mut inputs: Vec<Vec<f64>> = Vec::new();
        let mut lengths: Vec<(Name, usize)> = Vec::new();
        for ((p, t), v) in entry.sig.params.iter().zip(&values) {
            if t.is_some() {
                // The native layout: an integer's slot holds its bits.
                let mut xs = Vec::new();
                v.slots(&mut xs);
                lengths.push((p.clone(), xs.len()));
                inputs.push(xs);
            }
        }
        drop(values);
        let mut direction = None;
        if let Derive::NewtonDirection { wrt, .. } = entry.derive {
            // The direction: ones for `wrt`, zeros for the other parameters.
            for (p, len) in &lengths {
                let fill = if **p == *wrt { 1.0 } else { 0.0 };
                inputs.push(vec![fill; *len]);
            }
            // out is (gradient, H·direction), those of `wrt`.
            let len = lengths
                .iter()
                .find(|(p, _)| **p == *wrt)
                .map(|(_, l)| *l)
                .unwrap_or_else(|| unreachable!("`{wrt}` is a parameter of the module"));
            direction = Some((0, len, vec![0.0; len]));
        }
        let out_len = flat_len(&native.ret, &native.size_vars, &size_words)
            .ok_or("the result is too large")?;
        Ok(Call {
            sizes,
            size_words,
            inputs,
            out: vec![0.0; out_len],
            direction,
        })
    }

    /// One run of the native code (and of the division for a Newton
    /// direction).
    fn run(&mut self, entry: &Entry) -> Result<(), String> {
        let inputs: Vec<&[f64]> = self.inputs.iter().map(Vec::as_slice).collect();
        entry
            .code
            .native()
            .call_flat(&self.size_words, &inputs, &mut self.out)
            .map_err(|e| e.to_string())?;
        if let Some((j, h, dir)) = &mut self.direction {
            let len = dir.len();
            let (jacobian, hessian) = (&self.out[*j..*j + len], &self.out[*h..*h + len]);
            for ((d, g), h) in dir.iter_mut().zip(jacobian).zip(hessian) {
                *d = g / h;
            }
        }
        Ok(())
    }

    /// The result as JSON.
    fn output(&self, entry: &Entry) -> Json {
        let param_type = |wrt: &str| {
            entry
                .sig
                .params
                .iter()
                .find(|(p, _)| **p == *wrt)
                .and_then(|(_, t)| t.clone())
                .unwrap_or_else(|| unreachable!("`{wrt}` is a value parameter of the module"))
        };
        match (entry.derive, &self.direction) {
            (Derive::Value(_), _) => shape_json(&entry.sig.ret, &self.sizes, &mut self.out.iter()),
            (Derive::Gradient { wrt: [wrt], .. }, _) => {
                shape_json(&param_type(wrt), &self.sizes, &mut self.out[1..].iter())
            }
            (Derive::Repeated { names, .. }, _) => {
                let whole = shape_json(&entry.sig.ret, &self.sizes, &mut self.out.iter());
                let Json::Array(components) = whole else {
                    unreachable!("the definition returns a tuple of arrays")
                };
                let mut members = Map::new();
                for ((key, first), component) in names.iter().zip(components) {
                    let Json::Array(elements) = component else {
                        unreachable!("each component is an array")
                    };
                    let repeated = elements.len();
                    let element = elements.into_iter().next().unwrap_or(Json::Null);
                    let mut inner = Map::new();
                    inner.insert(first.to_string(), element);
                    inner.insert("repeated".to_string(), Json::from(repeated));
                    members.insert(key.to_string(), Json::Object(inner));
                }
                Json::Object(members)
            }
            (Derive::BundleJacobian { .. }, _) => {
                let size = |v: &str| self.sizes.get(v).copied().unwrap_or(0);
                bundle_jacobian(size("n"), size("m"), size("p"), &self.out)
            }
            (Derive::HandJacobian { .. }, _) => {
                let rows = shape_json(&entry.sig.ret, &self.sizes, &mut self.out.iter());
                if self.sizes.get("u").copied().unwrap_or(0) != 0 {
                    return rows;
                }
                // The simple variant: no barycentric coordinates.
                let Json::Array(rows) = rows else {
                    unreachable!("the definition returns an array of rows")
                };
                Json::Array(
                    rows.into_iter()
                        .map(|row| match row {
                            Json::Array(mut xs) => Json::Array(xs.split_off(2.min(xs.len()))),
                            other => other,
                        })
                        .collect(),
                )
            }
            (Derive::NamedGradient { wrt, .. }, _) => {
                let mut out = self.out[1..].iter();
                let mut members = Map::new();
                for w in wrt {
                    let shaped = shape_json(&param_type(w), &self.sizes, &mut out);
                    members.insert(w.to_string(), shaped);
                }
                Json::Object(members)
            }
            (Derive::Gradient { .. }, _) => Json::Array(
                self.out[1..]
                    .iter()
                    .map(|x| Value::Real(*x).to_json())
                    .collect(),
            ),
            (Derive::NewtonDirection { wrt, .. }, Some((_, _, dir))) => {
                shape_json(&param_type(wrt), &self.sizes, &mut dir.iter())
            }
            (Derive::NewtonDirection { .. }, None) => {
                unreachable!("a Newton direction has its buffer")
            }
        }
    }
}

/// GradBench ba's sparse Jacobian ([`Derive::BundleJacobian`]) from `out`:
/// p blocks of 2 × 15 reals, then p derivatives of the weights' residuals.
/// Row 2j and 2j + 1 hold observation j's block, whose columns are its
/// camera's (`11·(j mod n)` on), its point's (`11n + 3·(j mod m)` on) and
/// its weight's (`11n + 3m + j`); row 2p + j holds weight j's derivative.
fn bundle_jacobian(n: i64, m: i64, p: i64, out: &[f64]) -> Json {
    const BLOCK: usize = 30;
    let row_start = |i: i64| {
        if i <= 2 * p {
            15 * i
        } else {
            30 * p + (i - 2 * p)
        }
    };
    let column = |k: usize| -> i64 {
        // Entry k of observation 0's two rows.
        match k % 15 {
            c @ 0..=10 => c as i64,
            c @ 11..=13 => 11 * n + (c as i64 - 11),
            _ => 11 * n + 3 * m,
        }
    };
    // The first block's entries (fewer when there are no observations).
    let first = BLOCK.min(out.len().saturating_sub(p as usize));
    let mut rows: Vec<Json> = (0..BLOCK as i64)
        .map(|i| Json::from(row_start(i)))
        .collect();
    rows.push(Json::from(row_start(3 * p)));
    let mut cols: Vec<Json> = (0..first).map(|k| Json::from(column(k))).collect();
    cols.push(Json::from(11 * n + 3 * m + p - 1));
    let mut vals: Vec<Json> = out[..first]
        .iter()
        .map(|x| Value::Real(*x).to_json())
        .collect();
    vals.push(Value::Real(out.last().copied().unwrap_or(0.0)).to_json());
    Json::Object(Map::from_iter([
        ("rows".to_string(), Json::Array(rows)),
        ("cols".to_string(), Json::Array(cols)),
        ("vals".to_string(), Json::Array(vals)),
    ]))
}

/// Applies one step of a module's [`ModuleSource::input`] to an input.
fn reshape(input: &mut Json, step: Reshape) -> Result<(), String> {
    let Json::Object(members) = input else {
        return Ok(());
    };
    match step {
        Reshape::Pair(name) => {
            let Some(Json::Array(rows)) = members.get_mut(name) else {
                return Ok(());
            };
            if rows.len() % 2 != 0 {
                return Err(format!(
                    "`{name}` must have an even number of rows (a pair per layer), found {}",
                    rows.len()
                ));
            }
            let mut pairs = Vec::with_capacity(rows.len() / 2);
            let mut it = std::mem::take(rows).into_iter();
            while let (Some(a), Some(b)) = (it.next(), it.next()) {
                pairs.push(Json::Array(vec![a, b]));
            }
            *rows = pairs;
        }
        Reshape::Lift(name) => match members.remove(name) {
            None => {}
            Some(Json::Object(inner)) => {
                for (key, value) in inner {
                    if members.contains_key(&key) {
                        return Err(format!("`{name}.{key}` is given twice"));
                    }
                    members.insert(key, value);
                }
            }
            Some(other) => {
                return Err(format!(
                    "`{name}` must be an object of named members, not {}",
                    json_kind(&other)
                ))
            }
        },
        Reshape::BoolAsInt(name) => {
            if let Some(value) = members.get_mut(name) {
                match value {
                    Json::Bool(b) => *value = Json::from(i64::from(*b)),
                    other => {
                        return Err(format!(
                            "`{name}` must be true or false, not {}",
                            json_kind(other)
                        ))
                    }
                }
            }
        }
        Reshape::Drop(name) => {
            members.remove(name);
        }
    }
    Ok(())
}

/// What a JSON value is, for messages.
fn json_kind(value: &Json) -> &'static str {
    match value {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "an array",
        Json::Object(_) => "an object",
    }
}

/// The value of a size expression.
fn size_value(size: &gradlift::lang::Size, sizes: &HashMap<Name, i64>) -> i64 {
    size.constant
        + size
            .terms
            .iter()
            .map(|(v, k)| k * sizes.get(v).copied().unwrap_or(0))
            .sum::<i64>()
}

/// The number of reals of a value of type `ty` at the given sizes.
fn flat_len(ty: &Type, vars: &[Name], words: &[i64]) -> Option<usize> {
    let sizes: HashMap<Name, i64> = vars.iter().cloned().zip(words.iter().copied()).collect();
    fn go(ty: &Type, sizes: &HashMap<Name, i64>) -> Option<usize> {
        match ty {
            Type::Real | Type::Int => Some(1),
            Type::Tuple(ts) => ts
                .iter()
                .try_fold(0usize, |acc, t| acc.checked_add(go(t, sizes)?)),
            Type::Array(t, n) => usize::try_from(size_value(n, sizes).max(0))
                .ok()?
                .checked_mul(go(t, sizes)?),
            Type::Bool | Type::Fun(..) => Some(0),
        }
    }
    go(ty, &sizes)
}

/// The reals `xs` shaped as a value of type `ty`, in JSON: arrays and
/// tuples as JSON arrays, non-finite reals as the strings "inf", "-inf",
/// "nan".
fn shape_json<'a>(
    ty: &Type,
    sizes: &HashMap<Name, i64>,
    xs: &mut impl Iterator<Item = &'a f64>,
) -> Json {
    match ty {
        Type::Real => Value::Real(xs.next().copied().unwrap_or(f64::NAN)).to_json(),
        // An integer's slot holds its bits.
        Type::Int => Value::Int(xs.next().map_or(0, |x| x.to_bits() as i64)).to_json(),
        Type::Tuple(ts) => Json::Array(ts.iter().map(|t| shape_json(t, sizes, xs)).collect()),
        Type::Array(t, n) => Json::Array(
            (0..size_value(n, sizes).max(0))
                .map(|_| shape_json(t, sizes, xs))
                .collect(),
        ),
        Type::Bool | Type::Fun(..) => Json::Null,
    }
}
