//! gradlift: exact gradients of a small functional array language.
//!
//! ```
//! let program = gradlift::Program::parse("loss.grad", "def sq(x: R) -> R = x * x").unwrap();
//! let f = program.function("sq").unwrap();
//! let v = f.eval(&[gradlift::Value::Real(3.0)]).unwrap();
//! assert_eq!(v.as_real(), Some(9.0));
//! ```
#![warn(missing_docs)]

pub use gradlift_ad as ad;
pub use gradlift_ad::direct::{Construction, Route};
pub use gradlift_ad::pipeline::{Goal, Options as GradOptions};
pub use gradlift_jit as jit;
pub use gradlift_jit::Jit;
pub use gradlift_lang as lang;
pub use gradlift_lang::{Args, Name, SourceFile, Span, Type, Value};

use gradlift_lang::{CheckedModule, Signature};
use std::fmt;
use std::sync::Arc;

mod error;
pub use error::{Error, ErrorKind};

/// A parsed and type-checked program.
#[derive(Clone, Debug)]
pub struct Program {
    source: Arc<SourceFile>,
    checked: Arc<CheckedModule>,
    /// Whether a definition uses a derivative operator (`grad`, `jvp`, …),
    /// so that the interpreter runs the expanded program.
    derivatives: bool,
}

impl Program {
    /// Parses and type-checks `text`; `name` (a path) appears in messages.
    pub fn parse(name: &str, text: &str) -> Result<Program, Error> {
        let source = Arc::new(SourceFile::new(name, text));
        match gradlift_lang::check_source(name, text) {
            Ok(checked) => {
                let derivatives = checked
                    .module
                    .defs
                    .iter()
                    .any(|d| gradlift_ad::derivatives::has_derivatives(&d.body));
                Ok(Program {
                    source,
                    checked: Arc::new(checked),
                    derivatives,
                })
            }
            Err(e) => Err(Error::from(e).in_file(&source)),
        }
    }

    /// [`Program::parse`] through `jit`'s compile cache: parsing the same
    /// text under the same name again is a lookup, and the functions of
    /// the program it returns find what was compiled from them in the
    /// cache too ([`Function::compile`], [`Function::compile_gradient`]).
    /// (Every `Program` uses the cache when it compiles; this one skips
    /// parsing and checking as well.)
    pub fn parse_in(jit: &Jit, name: &str, text: &str) -> Result<Program, Error> {
        jit.cached(&cache_key("parse", name, &[], text), || {
            Program::parse(name, text)
        })
    }

    /// The source text.
    pub fn source(&self) -> &SourceFile {
        &self.source
    }

    /// The checked module.
    pub fn module(&self) -> &CheckedModule {
        &self.checked
    }

    /// The definition called `name`.
    pub fn function(&self, name: &str) -> Result<Function<'_>, Error> {
        match self.checked.index_of(name) {
            Some(index) => Ok(Function {
                program: self,
                index,
            }),
            None => {
                let defined: Vec<&str> =
                    self.checked.module.defs.iter().map(|d| &*d.name).collect();
                Err(Error::new(
                    ErrorKind::UnknownFunction,
                    format!(
                        "no function named `{name}` (defined: {})",
                        defined.join(", ")
                    ),
                ))
            }
        }
    }

    /// The last definition (the default for `--fn`).
    pub fn last_function(&self) -> Result<Function<'_>, Error> {
        match self.checked.module.defs.len() {
            0 => Err(Error::new(
                ErrorKind::UnknownFunction,
                "the program defines no function",
            )),
            n => Ok(Function {
                program: self,
                index: n - 1,
            }),
        }
    }
}

/// How [`Function::jacobian`] computes a Jacobian.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum JacobianMode {
    /// One forward-mode pass per input (`jacfwd`).
    Forward,
    /// One reverse-mode pass per output (`jacrev`).
    Reverse,
    /// Whichever needs fewer passes for the shape (`jacobian`): forward
    /// when the inputs are no more than the outputs.
    #[default]
    Auto,
}

impl JacobianMode {
    /// The operator of the language that computes it.
    pub fn operator(self) -> gradlift_lang::syntax::Derivative {
        use gradlift_lang::syntax::Derivative;
        match self {
            JacobianMode::Forward => Derivative::JacFwd,
            JacobianMode::Reverse => Derivative::JacRev,
            JacobianMode::Auto => Derivative::Jacobian,
        }
    }
}

/// One definition of a [`Program`].
#[derive(Clone, Copy, Debug)]
pub struct Function<'p> {
    program: &'p Program,
    index: usize,
}

impl<'p> Function<'p> {
    /// Its name.
    pub fn name(&self) -> &str {
        &self.program.checked.module.defs[self.index].name
    }

    /// Its signature.
    pub fn signature(&self) -> &'p Signature {
        &self.program.checked.sigs[self.index]
    }

    /// Converts named argument values to values for its parameters.
    pub fn args(&self, args: &Args) -> Result<Vec<Value>, Error> {
        args.values_for(self.name(), self.signature())
            .map_err(|e| match &args.source {
                Some(src) => Error::from(e).in_file(&Arc::new(src.clone())),
                None => Error::from(e),
            })
    }

    /// Its Jacobian with respect to the parameter `wrt` (by default the
    /// only parameter that holds reals), for a function returning `R` or
    /// `[R; m]` of a parameter `R` or `[R; n]`: a program whose last
    /// function, `NAME_jacobian`, takes the same parameters and returns
    /// the `m × n` matrix (`[[R; n]; m]`; a vector, or a real, when a side
    /// is a real). It is the definition
    /// `jacfwd((v. NAME(…, v, …)), wrt)` (or `jacrev`, `jacobian` by
    /// `mode`) added to the program, so it runs on the interpreter and
    /// compiles natively like any other.
    pub fn jacobian(&self, wrt: Option<&str>, mode: JacobianMode) -> Result<Program, Error> {
        let sig = self.signature();
        let name = self.name();
        let vector = |t: &Type| match t {
            Type::Real => true,
            Type::Array(e, _) => **e == Type::Real,
            _ => false,
        };
        if !vector(&sig.ret) {
            return Err(Error::new(
                ErrorKind::Differentiate,
                format!(
                    "a Jacobian needs a function returning `R` or `[R; m]`; `{name}` returns `{}`",
                    sig.ret
                ),
            ));
        }
        let reals: Vec<&Name> = sig
            .params
            .iter()
            .filter(|(_, t)| t.as_ref().is_some_and(gradlift_ad::direct::has_reals))
            .map(|(p, _)| p)
            .collect();
        let wrt: Name = match (wrt, reals.as_slice()) {
            (Some(w), _) => Name::from(w),
            (None, [only]) => (*only).clone(),
            (None, _) => {
                return Err(Error::new(
                    ErrorKind::Differentiate,
                    format!(
                        "`{name}` has {} parameters that hold reals ({}): name the one to differentiate with --wrt",
                        reals.len(),
                        reals.iter().map(|p| format!("`{p}`")).collect::<Vec<_>>().join(", ")
                    ),
                ))
            }
        };
        match sig.params.iter().find(|(p, _)| *p == wrt) {
            Some((_, Some(t))) if vector(t) => {}
            Some((_, t)) => {
                let t = t.as_ref().map_or("size".to_string(), |t| t.to_string());
                return Err(Error::new(
                    ErrorKind::Differentiate,
                    format!("a Jacobian is taken with respect to a parameter `R` or `[R; n]`; `{wrt}` is `{t}`"),
                ));
            }
            None => {
                return Err(Error::new(
                    ErrorKind::Differentiate,
                    format!("`{wrt}` is not a parameter of `{name}`"),
                ))
            }
        }
        // A definition name and a lambda binder no program name has.
        let taken = |n: &str| {
            self.program.checked.index_of(n).is_some() || sig.params.iter().any(|(p, _)| &**p == n)
        };
        let fresh = |base: String| {
            (0..)
                .map(|k| {
                    if k == 0 {
                        base.clone()
                    } else {
                        format!("{base}_{k}")
                    }
                })
                .find(|n| !taken(n))
                .expect("a free name")
        };
        let def_name = fresh(format!("{name}_jacobian"));
        let point = fresh("point".to_string());
        let params = parameters_text(sig);
        let call: Vec<String> = sig
            .params
            .iter()
            .map(|(p, _)| {
                if *p == wrt {
                    point.clone()
                } else {
                    p.to_string()
                }
            })
            .collect();
        let text = format!(
            "{}

# The Jacobian of `{name}` with respect to `{wrt}`.
def {def_name}({}) = {}(({point}. {name}({})), {wrt})
",
            self.program.source.text,
            params.join(", "),
            mode.operator().name(),
            call.join(", "),
        );
        Program::parse(&self.program.source.name, &text)
    }

    /// Its header as the language writes it: `name(p: T, …, s: size) -> R`.
    pub fn header(&self) -> String {
        let sig = self.signature();
        format!(
            "{}({}) -> {}",
            self.name(),
            parameters_text(sig).join(", "),
            sig.ret
        )
    }

    /// Its gradient program with respect to the parameters `wrt` (every
    /// value parameter when `None`).
    pub fn gradient(
        &self,
        wrt: Option<&[Name]>,
        options: GradOptions,
    ) -> Result<GradientProgram<'p>, Error> {
        let gradient =
            gradlift_ad::pipeline::gradient(&self.program.checked, self.index, wrt, options)
                .map_err(|e| self.locate(e))?;
        Ok(GradientProgram {
            function: *self,
            gradient,
            key: self.gradient_key(wrt, options),
        })
    }

    /// `e` as an error pointing into the program's text (terms built by
    /// differentiation have no place in it: their spans are dropped).
    fn locate(&self, e: impl Into<Error>) -> Error {
        e.into().in_file(&self.program.source)
    }

    /// Compiles it to native code: [`Function::optimized`], lowered. The
    /// result is kept in `jit`'s compile cache under the program's text
    /// and this function's name: compiling it again is a lookup (and with
    /// [`Jit::disk_cache`], a load from disk in another process).
    pub fn compile(&self, jit: &Jit) -> Result<CompiledFunction, Error> {
        let key = self.key("function", &[]);
        jit.cached(&key, || {
            Ok(CompiledFunction {
                compiled: Arc::new(jit.compile_keyed(&key, || self.optimized())?),
            })
        })
    }

    /// Its gradient program with respect to `wrt` (see
    /// [`Function::gradient`]) compiled to native code; through `jit`'s
    /// compile cache, keyed by the program's text, this function, `wrt`
    /// and `options`, so that a repeated call differentiates nothing and
    /// compiles nothing. The same as `gradient(wrt, options)?.compile(jit)`.
    pub fn compile_gradient(
        &self,
        jit: &Jit,
        wrt: Option<&[Name]>,
        options: GradOptions,
    ) -> Result<CompiledGradient, Error> {
        let key = self.gradient_key(wrt, options);
        jit.cached(&key, || {
            let compiled = jit.compile_keyed(&key, || {
                Ok::<_, Error>(self.gradient(wrt, options)?.closed())
            })?;
            Ok(CompiledGradient {
                compiled: Arc::new(compiled),
                wrt: self.gradient_params(wrt).len(),
                caller: self.caller(),
            })
        })
    }

    /// The parameters a gradient with respect to `wrt` differentiates, in
    /// order: those named (each once), or by default every parameter
    /// that holds reals (`gradlift_ad::direct::differentiated`). The
    /// gradient has one cotangent per name.
    pub fn gradient_params(&self, wrt: Option<&[Name]>) -> Vec<Name> {
        let values: Vec<(Name, Type)> = self
            .signature()
            .params
            .iter()
            .filter_map(|(p, t)| Some((p.clone(), t.clone()?)))
            .collect();
        gradlift_ad::direct::differentiated(&values, wrt)
            .into_iter()
            .map(|(n, _)| n)
            .collect()
    }

    /// The cache key of what `derived` compiles from this function, with
    /// `extra` (what it is derived with respect to, its options).
    fn key(&self, derived: &str, extra: &[&str]) -> String {
        let mut parts = vec![self.name()];
        parts.extend_from_slice(extra);
        cache_key(
            derived,
            &self.program.source.name,
            &parts,
            &self.program.source.text,
        )
    }

    fn gradient_key(&self, wrt: Option<&[Name]>, options: GradOptions) -> String {
        let wrt = format!("{wrt:?}");
        let options = format!("{options:?}");
        self.key("gradient", &[&wrt, &options])
    }

    /// Value and directional derivative at `args` along `dirs` (one per
    /// value parameter), by forward mode, on the reference interpreter or
    /// natively.
    pub fn jvp(
        &self,
        args: &[Value],
        dirs: &[Value],
        jit: Option<&Jit>,
    ) -> Result<(Value, Value), Error> {
        let program = gradlift_ad::pipeline::jvp_program(&self.program.checked, self.index)
            .map_err(|e| self.locate(e))?;
        self.run_extended(&program, args, dirs, jit)
    }

    /// Value, gradient, and Hessian times `dirs` (one per value parameter),
    /// by forward mode over the optimized reverse-mode gradient.
    pub fn hvp(
        &self,
        args: &[Value],
        dirs: &[Value],
        jit: Option<&Jit>,
    ) -> Result<HessianVector, Error> {
        self.hvp_with(args, dirs, jit, GradOptions::default())
    }

    /// [`Function::hvp`] with the options of the reverse-mode gradient
    /// (its route and checkpoint schedule).
    pub fn hvp_with(
        &self,
        args: &[Value],
        dirs: &[Value],
        jit: Option<&Jit>,
        options: GradOptions,
    ) -> Result<HessianVector, Error> {
        let program =
            gradlift_ad::pipeline::hvp_program(&self.program.checked, self.index, options)
                .map_err(|e| self.locate(e))?;
        let (primal, tangent) = self.run_extended(&program, args, dirs, jit)?;
        // The gradient is with respect to the parameters that hold reals.
        let wrt = self.gradient_params(None).len();
        let (value, gradient) = split_gradient(primal, wrt);
        let (_, hvp) = split_gradient(tangent, wrt);
        Ok(HessianVector {
            value,
            gradient,
            hvp,
        })
    }

    /// Compiles the forward-mode program once: call it with arguments and
    /// directions.
    /// Kept in `jit`'s compile cache, as [`Function::compile`] is.
    pub fn compile_jvp(&self, jit: &Jit) -> Result<CompiledPair, Error> {
        let key = self.key("jvp", &[]);
        jit.cached(&key, || {
            let compiled = jit.compile_keyed(&key, || {
                gradlift_ad::pipeline::jvp_program(&self.program.checked, self.index)
                    .map_err(|e| self.locate(e))
            })?;
            Ok(CompiledPair {
                compiled: Arc::new(compiled),
                values: self.value_params(),
                caller: self.caller(),
            })
        })
    }

    /// Compiles the Hessian-vector product program once (forward over
    /// reverse): call it with arguments and directions; the result's first
    /// part is (value, gradient), its second (⟨gradient, direction⟩, H·direction).
    /// Kept in `jit`'s compile cache, as [`Function::compile`] is.
    pub fn compile_hvp(&self, jit: &Jit) -> Result<CompiledPair, Error> {
        let key = self.key("hvp", &[]);
        jit.cached(&key, || {
            let compiled = jit.compile_keyed(&key, || {
                gradlift_ad::pipeline::hvp_program(
                    &self.program.checked,
                    self.index,
                    GradOptions::default(),
                )
                .map_err(|e| self.locate(e))
            })?;
            Ok(CompiledPair {
                compiled: Arc::new(compiled),
                values: self.value_params(),
                caller: self.caller(),
            })
        })
    }

    /// What a compiled derived program needs to explain its arguments in
    /// terms of this function.
    fn caller(&self) -> Caller {
        Caller {
            name: self.name().to_string(),
            sig: self.signature().clone(),
        }
    }

    fn value_params(&self) -> usize {
        self.signature()
            .params
            .iter()
            .filter(|(_, t)| t.is_some())
            .count()
    }

    /// Runs a program over the parameters followed by one extra value per
    /// value parameter; the result is a pair.
    fn run_extended(
        &self,
        program: &gradlift_ad::inline::Closed,
        args: &[Value],
        dirs: &[Value],
        jit: Option<&Jit>,
    ) -> Result<(Value, Value), Error> {
        let sig = self.signature();
        let values = sig.params.iter().filter(|(_, t)| t.is_some()).count();
        if dirs.len() != values {
            return Err(Error::new(
                ErrorKind::Arguments,
                format!(
                    "{} directions given, one per parameter that is not a size ({values}) expected",
                    dirs.len()
                ),
            ));
        }
        let mut all = args.to_vec();
        all.extend(dirs.iter().cloned());
        let out = match jit {
            Some(jit) => jit
                .compile(program)?
                .call(&all)
                .map_err(|e| self.caller().explain(e, args, Some(dirs)))?,
            None => {
                let sizes = self.caller().check(args, Some(dirs))?;
                let mut vars: Vec<(Name, Value)> =
                    sizes.into_iter().map(|(n, v)| (n, Value::Int(v))).collect();
                for ((p, _), a) in program.params.iter().zip(&all) {
                    vars.push((p.clone(), a.clone()));
                }
                gradlift_lang::interp::eval_expr(&self.program.checked, &vars, &program.body)
                    .map_err(|e| self.locate(e))?
            }
        };
        match out {
            Value::Tuple(parts) if parts.len() == 2 => Ok((parts[0].clone(), parts[1].clone())),
            _ => unreachable!("a forward-mode program returns a pair"),
        }
    }

    /// The Hessian-vector product program (forward mode over the
    /// optimized gradient) over the parameters and one direction per value
    /// parameter; see [`gradlift_ad::pipeline::hvp_program`].
    pub fn hvp_program(&self, options: GradOptions) -> Result<gradlift_ad::inline::Closed, Error> {
        gradlift_ad::pipeline::hvp_program(&self.program.checked, self.index, options)
            .map_err(|e| self.locate(e))
    }

    /// Its Source UNF (Figure 9; the `unf` stage).
    pub fn source_unf(&self) -> Result<gradlift_ad::unf::Unf, Error> {
        gradlift_ad::pipeline::source_unf(&self.closed()?).map_err(|e| self.locate(e))
    }

    /// Its Target UNF (Figure 8; the `target-unf` stage).
    pub fn target_unf(&self) -> Result<gradlift_ad::reverse_unf::TargetUnf, Error> {
        gradlift_ad::pipeline::target_unf(&self.closed()?).map_err(|e| self.locate(e))
    }

    /// Runs the pipeline for `goal` up to the stage `name` (a pass of
    /// [`gradlift_ad::pipeline::PASSES`], or a member of the simplifier's
    /// group): what `gradlift emit --stage` prints, with the passes' times.
    pub fn stage(
        &self,
        name: &str,
        goal: Goal,
        options: GradOptions,
    ) -> Result<StageOutput, Error> {
        if !gradlift_ad::pipeline::stage_names().any(|s| s == name) {
            let known: Vec<&str> = gradlift_ad::pipeline::stage_names().collect();
            return Err(Error::new(
                ErrorKind::Arguments,
                format!("no stage `{name}` (the stages: {})", known.join(", ")),
            ));
        }
        let c = gradlift_ad::pipeline::compile(
            &self.program.checked,
            self.index,
            goal,
            None,
            options,
            Some(name),
        )
        .map_err(|e| self.locate(e))?;
        let stage = if let Some(u) = c.target_unf {
            Stage::TargetUnf(u)
        } else if let Some(u) = c.unf {
            Stage::Unf(u)
        } else {
            Stage::Program(c.program.expect("the passes make a program"))
        };
        Ok(StageOutput {
            stage,
            times: c.times,
            simplifier: c.simplifier,
        })
    }

    /// The definition inlined into one closed term, its derivative
    /// operators (`grad`, `jvp`, …) expanded: the closed Source term the
    /// passes that differentiate read.
    pub fn closed(&self) -> Result<gradlift_ad::inline::Closed, Error> {
        if !self.program.derivatives {
            return Ok(gradlift_ad::inline::inline(
                &self.program.checked,
                self.index,
            ));
        }
        gradlift_ad::pipeline::expanded(&self.program.checked, self.index)
            .map_err(|e| self.locate(e))
    }

    /// [`Function::closed`] with its body simplified as gradients are
    /// (`gradlift_ad::simplify`): single-use `let`s inlined so that maps
    /// fuse into their consumers, common terms shared, dead ones dropped.
    /// This is what [`Function::compile`] lowers.
    ///
    /// A function value used as data (stored in a tuple, chosen by `if`),
    /// which the interpreter runs but native code cannot hold, is an error
    /// of kind [`ErrorKind::Unsupported`].
    pub fn optimized(&self) -> Result<gradlift_ad::inline::Closed, Error> {
        use gradlift_ad::direct::AdError;
        use gradlift_ad::simplify::SimplifyError;
        gradlift_ad::pipeline::primal(&self.program.checked, self.index).map_err(|e| match e {
            AdError::Simplify(SimplifyError::HigherOrder { message, span }) => {
                let e = Error::from(AdError::Unsupported {
                    what: String::new(),
                    span,
                });
                self.locate(
                    e.with_kind(ErrorKind::Unsupported)
                        .with_message(format!("native code cannot hold this: {message}")),
                )
            }
            e => self.locate(e),
        })
    }

    /// Evaluates it on the reference interpreter. A program that uses a
    /// derivative operator runs with its derivatives expanded
    /// ([`gradlift_ad::pipeline::expanded`]).
    pub fn eval(&self, args: &[Value]) -> Result<Value, Error> {
        self.eval_with(args, Default::default())
    }

    /// [`Function::eval`] under the interpreter's `limits` (array sizes,
    /// the steps of a `while` loop).
    pub fn eval_with(
        &self,
        args: &[Value],
        limits: gradlift_lang::interp::Limits,
    ) -> Result<Value, Error> {
        if !self.program.derivatives {
            return gradlift_lang::interp::call_with_limits(
                &self.program.checked,
                self.index,
                args,
                limits,
            )
            .map_err(|e| self.locate(e));
        }
        let program = gradlift_ad::pipeline::expanded(&self.program.checked, self.index)
            .map_err(|e| self.locate(e))?;
        let sizes = self.caller().check(args, None)?;
        let mut vars: Vec<(Name, Value)> =
            sizes.into_iter().map(|(n, v)| (n, Value::Int(v))).collect();
        for ((p, t), a) in program.params.iter().zip(args) {
            if t.is_some() {
                vars.push((p.clone(), a.clone()));
            }
        }
        gradlift_lang::interp::eval_expr_with_limits(
            &self.program.checked,
            &vars,
            &program.body,
            limits,
        )
        .map_err(|e| self.locate(e))
    }
}

/// The output of a stage of the pipeline ([`Function::stage`]).
#[derive(Clone, Debug)]
pub enum Stage {
    /// A program: the function, its gradient, its forward-mode program, …
    Program(gradlift_ad::inline::Closed),
    /// Source UNF.
    Unf(gradlift_ad::unf::Unf),
    /// Target UNF.
    TargetUnf(gradlift_ad::reverse_unf::TargetUnf),
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stage::Program(p) => write!(f, "{}", p.definition()),
            Stage::Unf(u) => write!(f, "{u}"),
            Stage::TargetUnf(u) => write!(f, "{u}"),
        }
    }
}

/// A stage and what the passes that made it reported.
#[derive(Clone, Debug)]
pub struct StageOutput {
    /// The stage.
    pub stage: Stage,
    /// Each pass run, with its time (the members of the simplifier's group
    /// indented under it).
    pub times: Vec<gradlift_ad::pipeline::PassTime>,
    /// Why each run of the simplifier stopped, and after how many rounds.
    pub simplifier: Vec<(gradlift_ad::simplify::Stop, usize)>,
}

/// The gradient program of a [`Function`]: a Target term returning the
/// value and the gradient.
#[derive(Clone, Debug)]
pub struct GradientProgram<'p> {
    function: Function<'p>,
    gradient: gradlift_ad::pipeline::Gradient,
    /// Its key in a `Jit`'s compile cache.
    key: String,
}

/// The result of a Hessian-vector product.
#[derive(Clone, Debug)]
pub struct HessianVector {
    /// The function's value.
    pub value: f64,
    /// Its gradient, one cotangent per value parameter.
    pub gradient: Vec<Value>,
    /// The Hessian times the direction, one entry per value parameter.
    pub hvp: Vec<Value>,
}

/// The function a derived program (a gradient, a forward-mode or
/// Hessian-vector program) comes from: arguments that do not fit are
/// explained in its terms — its name, its parameters, and "`A` (direction)"
/// for a direction — not in those of the derived program.
#[derive(Clone)]
struct Caller {
    name: String,
    sig: Signature,
}

impl Caller {
    /// Checks `args` (and `dirs`, one per value parameter, shaped like it)
    /// against the function's parameters; returns the size variables.
    fn check(
        &self,
        args: &[Value],
        dirs: Option<&[Value]>,
    ) -> Result<std::collections::HashMap<Name, i64>, Error> {
        let mut shapes = self.sig.clone();
        let mut all = args.to_vec();
        if let Some(dirs) = dirs {
            for (p, t) in &self.sig.params {
                if let Some(t) = t {
                    shapes
                        .params
                        .push((Name::from(format!("{p} (direction)")), Some(t.clone())));
                }
            }
            all.extend(dirs.iter().cloned());
        }
        gradlift_lang::value::bind_sizes(&self.name, &shapes, &all)
            .map_err(|e| Error::new(ErrorKind::Arguments, e.to_string()))
    }

    /// `e`, an error of a call of the derived program, in the function's
    /// terms when the arguments are at fault.
    fn explain(&self, e: gradlift_jit::CallError, args: &[Value], dirs: Option<&[Value]>) -> Error {
        if let gradlift_jit::CallError::Arguments(_) = e {
            if let Err(own) = self.check(args, dirs) {
                return own;
            }
        }
        Error::from(e)
    }
}

/// A compiled program over the parameters and one direction per value
/// parameter, returning a pair (a forward-mode or Hessian-vector program).
#[derive(Clone)]
pub struct CompiledPair {
    compiled: Arc<gradlift_jit::Compiled>,
    values: usize,
    caller: Caller,
}

impl CompiledPair {
    /// The pair at `args` along `dirs` (shapes checked).
    pub fn call(&self, args: &[Value], dirs: &[Value]) -> Result<(Value, Value), Error> {
        if dirs.len() != self.values {
            return Err(Error::new(
                ErrorKind::Arguments,
                format!("{} directions given, {} expected", dirs.len(), self.values),
            ));
        }
        let mut all = args.to_vec();
        all.extend(dirs.iter().cloned());
        let out = self
            .compiled
            .call(&all)
            .map_err(|e| self.caller.explain(e, args, Some(dirs)))?;
        match out {
            Value::Tuple(parts) if parts.len() == 2 => Ok((parts[0].clone(), parts[1].clone())),
            _ => unreachable!("the program returns a pair"),
        }
    }

    /// The native code and its raw entry point (see docs/abi.md).
    pub fn native(&self) -> &gradlift_jit::Compiled {
        &self.compiled
    }
}

/// A function compiled to native code.
#[derive(Clone)]
pub struct CompiledFunction {
    compiled: Arc<gradlift_jit::Compiled>,
}

impl CompiledFunction {
    /// Its value at `args` (shapes checked).
    pub fn call(&self, args: &[Value]) -> Result<Value, Error> {
        Ok(self.compiled.call(args)?)
    }

    /// Its value at `args`, written into `out`: in place, allocating
    /// nothing once warm, when `out` holds an unshared result of the same
    /// shape (see [`gradlift_jit::Compiled::call_into`]).
    pub fn call_into(&self, args: &[Value], out: &mut Value) -> Result<(), Error> {
        Ok(self.compiled.call_into(args, out)?)
    }

    /// Its value at borrowed arguments (shapes and slices, see
    /// [`gradlift_jit::typed`]), its reals written into `out`, which holds
    /// [`gradlift_jit::Compiled::result_len`] of them: no `Value` trees,
    /// the arguments read in place, nothing allocated once warm.
    pub fn call_args(&self, args: &[gradlift_jit::Arg], out: &mut [f64]) -> Result<(), Error> {
        Ok(self.compiled.call_args(args, out)?)
    }

    /// The native code and its raw entry point (see docs/abi.md).
    pub fn native(&self) -> &gradlift_jit::Compiled {
        &self.compiled
    }
}

/// A gradient program compiled to native code.
#[derive(Clone)]
pub struct CompiledGradient {
    compiled: Arc<gradlift_jit::Compiled>,
    wrt: usize,
    caller: Caller,
}

impl CompiledGradient {
    /// Value and gradient at `args` (shapes checked): one cotangent per
    /// differentiated parameter.
    pub fn call(&self, args: &[Value]) -> Result<(f64, Vec<Value>), Error> {
        let out = self
            .compiled
            .call(args)
            .map_err(|e| self.caller.explain(e, args, None))?;
        Ok(split_gradient(out, self.wrt))
    }

    /// Value and gradient at borrowed arguments (shapes and slices, see
    /// [`gradlift_jit::typed`]), written into `out`: the value, then each
    /// cotangent's reals in parameter order, row-major
    /// ([`CompiledGradient::result_len`] reals). Returns the value. No
    /// `Value` trees; the arguments are read in place and nothing is
    /// allocated once warm.
    pub fn call_args(&self, args: &[gradlift_jit::Arg], out: &mut [f64]) -> Result<f64, Error> {
        self.compiled.call_args(args, out)?;
        Ok(out[0])
    }

    /// The number of reals [`CompiledGradient::call_args`] writes for
    /// `args` (the value, then every cotangent): the length of its `out`.
    pub fn result_len(&self, args: &[gradlift_jit::Arg]) -> Result<usize, Error> {
        let sizes = self.compiled.sizes_of(args)?;
        self.compiled.result_len(&sizes).ok_or_else(|| {
            Error::new(
                ErrorKind::Arguments,
                "the gradient does not fit in memory at these sizes",
            )
        })
    }

    /// Value and gradient at `args`, written into `out` as the gradient
    /// program returns them: the pair `(value, cotangent)` with one
    /// differentiated parameter, `(value, (cotangent, …))` with several.
    /// Returns the value. `out` is overwritten in place, allocating nothing
    /// once warm, when it holds an unshared result of the same shape (the
    /// `out` of an earlier call at the same sizes); see
    /// [`gradlift_jit::Compiled::call_into`].
    pub fn call_into(&self, args: &[Value], out: &mut Value) -> Result<f64, Error> {
        self.compiled
            .call_into(args, out)
            .map_err(|e| self.caller.explain(e, args, None))?;
        match out {
            Value::Tuple(parts) => Ok(parts[0].as_real().expect("the value is a real")),
            _ => unreachable!("a gradient program returns (value, gradient)"),
        }
    }

    /// The native code and its raw entry point (see docs/abi.md).
    pub fn native(&self) -> &gradlift_jit::Compiled {
        &self.compiled
    }
}

/// `(value, gradient)` as a value and one cotangent per parameter.
fn split_gradient(out: Value, wrt: usize) -> (f64, Vec<Value>) {
    let Value::Tuple(parts) = out else {
        unreachable!("a gradient program returns (value, gradient)")
    };
    let value = parts[0].as_real().expect("the value is a real");
    let grads = match (&parts[1], wrt) {
        (g, 1) => vec![g.clone()],
        (Value::Tuple(gs), _) => gs.to_vec(),
        _ => unreachable!("several cotangents form a tuple"),
    };
    (value, grads)
}

impl GradientProgram<'_> {
    /// Compiles the gradient program to native code; it must be first
    /// order (optimized, the default).
    /// Kept in `jit`'s compile cache under the key of
    /// [`Function::compile_gradient`].
    pub fn compile(&self, jit: &Jit) -> Result<CompiledGradient, Error> {
        jit.cached(&self.key, || {
            Ok(CompiledGradient {
                compiled: Arc::new(jit.compile_keyed(&self.key, || Ok::<_, Error>(self.closed()))?),
                wrt: self.gradient.wrt.len(),
                caller: self.function.caller(),
            })
        })
    }

    /// The gradient program as a closed term over the function's
    /// parameters, named `<function>_grad`.
    pub fn closed(&self) -> gradlift_ad::inline::Closed {
        let g = &self.gradient;
        let grads: Vec<Type> = g.wrt.iter().map(|(_, t)| t.clone()).collect();
        let grad_ty = if grads.len() == 1 {
            grads[0].clone()
        } else {
            Type::Tuple(grads)
        };
        gradlift_ad::inline::Closed {
            name: Name::from(format!("{}_grad", g.closed.name)),
            params: g.closed.params.clone(),
            size_vars: g.closed.size_vars.clone(),
            ret: Type::Tuple(vec![Type::Real, grad_ty]),
            body: g.term.clone(),
        }
    }

    /// The passes that made it, with their times.
    pub fn times(&self) -> &[gradlift_ad::pipeline::PassTime] {
        &self.gradient.times
    }

    /// Why each run of the simplifier stopped, and after how many rounds.
    pub fn simplifier(&self) -> &[(gradlift_ad::simplify::Stop, usize)] {
        &self.gradient.simplifier
    }

    /// The Target term.
    pub fn term(&self) -> &gradlift_lang::Expr {
        &self.gradient.term
    }

    /// The parameters differentiated, in order.
    pub fn wrt(&self) -> impl Iterator<Item = &str> {
        self.gradient.wrt.iter().map(|(n, _)| &**n)
    }

    /// Value and gradient at `args` (one value per parameter) on the
    /// reference interpreter: one cotangent per parameter of [`Self::wrt`].
    pub fn eval(&self, args: &[Value]) -> Result<(f64, Vec<Value>), Error> {
        self.eval_with(args, Default::default())
    }

    /// [`GradientProgram::eval`] under the interpreter's `limits`.
    pub fn eval_with(
        &self,
        args: &[Value],
        limits: gradlift_lang::interp::Limits,
    ) -> Result<(f64, Vec<Value>), Error> {
        let f = &self.function;
        let sig = f.signature();
        let sizes = f.caller().check(args, None)?;
        let mut vars: Vec<(Name, Value)> =
            sizes.into_iter().map(|(n, v)| (n, Value::Int(v))).collect();
        for ((p, t), a) in sig.params.iter().zip(args) {
            if t.is_some() {
                vars.push((p.clone(), a.clone()));
            }
        }
        let out = gradlift_lang::interp::eval_expr_with_limits(
            &f.program.checked,
            &vars,
            &self.gradient.term,
            limits,
        )
        .map_err(|e| f.locate(e))?;
        Ok(split_gradient(out, self.gradient.wrt.len()))
    }
}

/// A key of a `Jit`'s compile cache: what is derived, the file name the
/// messages cite, the function and what it is derived with, and the text,
/// each preceded by its length, so that no two lists of parts make the
/// same key.
fn cache_key(derived: &str, file: &str, parts: &[&str], text: &str) -> String {
    let mut key = String::with_capacity(derived.len() + file.len() + text.len() + 64);
    for part in [derived, file].iter().chain(parts).chain([&text]) {
        key.push_str(&part.len().to_string());
        key.push(':');
        key.push_str(part);
    }
    key
}

/// The parameters of `sig` as the language writes them: `p: T`, `s: size`.
fn parameters_text(sig: &Signature) -> Vec<String> {
    sig.params
        .iter()
        .map(|(p, t)| match t {
            Some(t) => format!("{p}: {t}"),
            None => format!("{p}: size"),
        })
        .collect()
}
