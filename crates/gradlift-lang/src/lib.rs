//! The gradlift language: syntax tree, lexer, parser, printer, type checker
//! and reference interpreter.
//!
//! ```
//! use gradlift_lang::{check_source, interp, Value};
//! let checked = check_source("<doc>", "def dot(a: [R; n], b: [R; n]) -> R = reduce (+) 0 (map2 (*) a b)").unwrap();
//! let v = interp::call(&checked, 0, &[Value::reals(&[1.0, 2.0]), Value::reals(&[3.0, 4.0])]).unwrap();
//! assert_eq!(v.as_real(), Some(11.0));
//! ```
#![warn(missing_docs)]

pub mod args;
pub mod build;
pub mod closed;
pub mod deep;
pub mod exp;
pub mod gamma;
pub mod interp;
pub mod kernels;
pub mod lexer;
pub mod names;
pub mod parser;
pub mod prim;
pub mod printer;
pub mod reduce_order;
pub mod schedule;
pub mod scope;
pub mod span;
pub mod sugar;
pub mod suggest;
pub mod syntax;
#[cfg(feature = "testing")]
pub mod testing;
pub mod types;
pub mod value;

pub use args::{ArgValue, Args, ArgsError};
pub use interp::EvalError;
pub use parser::{parse_expr, parse_module, parse_type, SyntaxError};
pub use prim::Prim;
pub use schedule::Schedule;
pub use span::{Located, SourceFile, Span, Spanned};
pub use syntax::{Def, Expr, ExprKind, Module, Name, Pattern, Size, Type};
pub use types::{check_module, CheckedModule, Signature, TypeError};
pub use value::Value;

/// A front-end error: the text does not parse or does not type-check.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum FrontError {
    /// A syntax error.
    #[error(transparent)]
    Syntax(#[from] SyntaxError),
    /// A type error.
    #[error(transparent)]
    Type(#[from] TypeError),
}

impl Spanned for FrontError {
    fn span(&self) -> Span {
        match self {
            FrontError::Syntax(e) => e.span(),
            FrontError::Type(e) => e.span(),
        }
    }
}

/// Parses and type-checks `text` (named `name` in messages).
pub fn check_source(name: &str, text: &str) -> Result<CheckedModule, FrontError> {
    let _ = name;
    let module = parse_module(text)?;
    Ok(check_module(module)?)
}
