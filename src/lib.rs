//! gradlift: exact gradients of a small functional array language.
//!
//! ```
//! let program = gradlift::Program::parse("loss.grad", "def sq(x: R) -> R = x * x").unwrap();
//! let f = program.function("sq").unwrap();
//! let v = f.eval(&[gradlift::Value::Real(3.0)]).unwrap();
//! assert_eq!(v.as_real(), Some(9.0));
//! ```
#![warn(missing_docs)]

pub use gradlift_lang as lang;
pub use gradlift_lang::{Args, SourceFile, Span, Type, Value};

use gradlift_lang::{CheckedModule, Located, Signature, Spanned};
use std::fmt;
use thiserror::Error;

/// An error from any stage, printable with its source position.
#[derive(Debug, Error)]
pub enum Error {
    /// The program does not parse or type-check.
    #[error("{0}")]
    Front(String),
    /// No definition of that name.
    #[error("no function named `{name}` (defined: {defined})")]
    UnknownFunction {
        /// The name asked for.
        name: String,
        /// The names that exist.
        defined: String,
    },
    /// The file defines nothing.
    #[error("the program defines no function")]
    Empty,
    /// Arguments that do not fit.
    #[error("{0}")]
    Args(String),
    /// A run-time error.
    #[error("{0}")]
    Eval(String),
}

/// A parsed and type-checked program.
#[derive(Clone, Debug)]
pub struct Program {
    source: SourceFile,
    checked: CheckedModule,
}

impl Program {
    /// Parses and type-checks `text`; `name` (a path) appears in messages.
    pub fn parse(name: &str, text: &str) -> Result<Program, Error> {
        let source = SourceFile::new(name, text);
        match gradlift_lang::check_source(name, text) {
            Ok(checked) => Ok(Program { source, checked }),
            Err(e) => Err(Error::Front(render(&source, &e))),
        }
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
            None => Err(Error::UnknownFunction {
                name: name.to_string(),
                defined: self
                    .checked
                    .module
                    .defs
                    .iter()
                    .map(|d| d.name.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        }
    }

    /// The last definition (the default for `--fn`).
    pub fn last_function(&self) -> Result<Function<'_>, Error> {
        match self.checked.module.defs.len() {
            0 => Err(Error::Empty),
            n => Ok(Function {
                program: self,
                index: n - 1,
            }),
        }
    }
}

fn render<E: gradlift_lang::Spanned + fmt::Display>(source: &SourceFile, e: &E) -> String {
    Located {
        file: source,
        error: e,
    }
    .to_string()
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
        args.values_for(self.name(), self.signature()).map_err(|e| {
            Error::Args(match &args.source {
                Some(src) if e.span() != Span::DUMMY => render(src, &e),
                _ => format!("error: {e}"),
            })
        })
    }

    /// Evaluates it on the reference interpreter.
    pub fn eval(&self, args: &[Value]) -> Result<Value, Error> {
        gradlift_lang::interp::call(&self.program.checked, self.index, args).map_err(|e| match &e {
            gradlift_lang::EvalError::At { .. } => Error::Eval(render(&self.program.source, &e)),
            gradlift_lang::EvalError::Arguments(m) => Error::Args(format!("error: {m}")),
        })
    }
}
