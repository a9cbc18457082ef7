//! The facade's error: a kind to match on, a message, and where in which
//! text it happened.
//!
//! Every error of the pipeline — a syntax or type error, arguments that do
//! not fit, a run-time error of the interpreter or of native code, a
//! function that cannot be differentiated, a program the backend cannot
//! compile — becomes one [`Error`]. Its [`ErrorKind`] says which, its
//! [`Error::span`] and [`Error::file`] where (when the error points into
//! text: the program, or the `--at` arguments), and [`Error::source`] gives
//! the error of the crate that raised it. Rendering is a method: `Display`
//! prints `file:line:col: error: message`, the line and a caret when the
//! position is known, `error: message` otherwise, then one `note:` line per
//! note.

use gradlift_lang::{SourceFile, Span, Spanned};
use std::fmt;
use std::sync::Arc;

/// What kind of error an [`Error`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The text does not parse.
    Syntax,
    /// The program does not type-check.
    Type,
    /// No definition has the name asked for, or the file defines none.
    UnknownFunction,
    /// Arguments that do not fit the parameters: names, shapes, values.
    Arguments,
    /// A run-time error of the program: an index out of bounds, arrays of
    /// different lengths, a size that is not a whole number, an
    /// interpreter's limit.
    Runtime,
    /// A call of native code needs more memory (workspace, or its result)
    /// than the limit of its [`crate::Jit`] ([`crate::Jit::max_workspace`]).
    MemoryLimit {
        /// The bytes the call needs at least.
        needed: u64,
        /// The limit.
        limit: u64,
    },
    /// The system refused memory a call asked for, within the limit.
    OutOfMemory {
        /// The bytes asked for.
        bytes: u64,
    },
    /// A `while` loop of native code did not stop within the iteration
    /// limit ([`crate::Jit::max_iterations`]).
    IterationLimit,
    /// The function cannot be differentiated as asked.
    Differentiate,
    /// The native backend does not lower a construct (the interpreter runs it).
    Unsupported,
    /// Code generation failed.
    Compile,
}

/// An error of any stage; see the [module documentation](self).
#[derive(Clone)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    span: Option<Span>,
    file: Option<Arc<SourceFile>>,
    notes: Vec<String>,
    cause: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

impl Error {
    /// An error of `kind` saying `message`, at no position.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
            span: None,
            file: None,
            notes: Vec::new(),
            cause: None,
        }
    }

    /// `cause` as an error of `kind`, with its message and, when it points
    /// into text, its span (a file is attached with [`Error::in_file`]).
    pub(crate) fn from_spanned<E>(kind: ErrorKind, cause: E) -> Error
    where
        E: std::error::Error + Spanned + Send + Sync + 'static,
    {
        let span = cause.span();
        Error {
            kind,
            message: cause.to_string(),
            span: known(span),
            file: None,
            notes: Vec::new(),
            cause: Some(Arc::new(cause)),
        }
    }

    /// `cause` as an error of `kind`, at no position.
    pub(crate) fn from_cause<E>(kind: ErrorKind, cause: E) -> Error
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        Error {
            kind,
            message: cause.to_string(),
            span: None,
            file: None,
            notes: Vec::new(),
            cause: Some(Arc::new(cause)),
        }
    }

    /// The same error, its span pointing into `file` (a span that points
    /// nowhere — a term built by a pass — is dropped).
    pub(crate) fn in_file(mut self, file: &Arc<SourceFile>) -> Error {
        if self.span.is_some() && self.file.is_none() {
            self.file = Some(file.clone());
        }
        self
    }

    /// The same error, of another kind.
    pub(crate) fn with_kind(mut self, kind: ErrorKind) -> Error {
        self.kind = kind;
        self
    }

    /// The same error with one more note.
    pub fn with_note(mut self, note: impl Into<String>) -> Error {
        self.notes.push(note.into());
        self
    }

    /// The same error with another message (the kind, position and notes
    /// kept).
    pub fn with_message(mut self, message: impl Into<String>) -> Error {
        self.message = message.into();
        self
    }

    /// What kind of error it is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message, without position or notes.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Where it happened, in [`Error::file`] (`None` when no text is at
    /// fault: a run-time error of generated code, a missing function).
    pub fn span(&self) -> Option<Span> {
        self.span
    }

    /// The text the span points into: the program, or the arguments' text.
    pub fn file(&self) -> Option<&SourceFile> {
        self.file.as_deref()
    }

    /// Notes printed after the message.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Whether the program failed at run time (in either engine, for
    /// whatever reason, the memory and iteration limits included).
    pub fn is_runtime(&self) -> bool {
        matches!(
            self.kind,
            ErrorKind::Runtime
                | ErrorKind::IterationLimit
                | ErrorKind::MemoryLimit { .. }
                | ErrorKind::OutOfMemory { .. }
        )
    }
}

/// A span that points into text, or `None`.
fn known(span: Span) -> Option<Span> {
    span.is_text().then_some(span)
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.file, self.span) {
            (Some(file), Some(span)) => f.write_str(&file.render(span, &self.message))?,
            _ => write!(f, "error: {}", self.message)?,
        }
        for note in &self.notes {
            write!(f, "\nnote: {note}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("kind", &self.kind)
            .field("message", &self.message)
            .field("span", &self.span)
            .field("file", &self.file.as_ref().map(|s| &s.name))
            .field("notes", &self.notes)
            .finish()
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.cause
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl From<gradlift_lang::FrontError> for Error {
    fn from(e: gradlift_lang::FrontError) -> Error {
        let kind = match e {
            gradlift_lang::FrontError::Syntax(_) => ErrorKind::Syntax,
            gradlift_lang::FrontError::Type(_) => ErrorKind::Type,
        };
        Error::from_spanned(kind, e)
    }
}

impl From<gradlift_ad::direct::AdError> for Error {
    fn from(e: gradlift_ad::direct::AdError) -> Error {
        Error::from_spanned(ErrorKind::Differentiate, e)
    }
}

impl From<gradlift_jit::JitError> for Error {
    fn from(e: gradlift_jit::JitError) -> Error {
        let kind = match e {
            gradlift_jit::JitError::Unsupported(_) => ErrorKind::Unsupported,
            _ => ErrorKind::Compile,
        };
        Error::from_cause(kind, e)
    }
}

impl From<gradlift_jit::CallError> for Error {
    fn from(e: gradlift_jit::CallError) -> Error {
        use gradlift_jit::CallError;
        let kind = match e {
            CallError::Arguments(_) => ErrorKind::Arguments,
            CallError::Status(gradlift_jit::Status::IterationLimit) => ErrorKind::IterationLimit,
            CallError::Status(_) => ErrorKind::Runtime,
            CallError::WorkspaceLimit { needed, limit }
            | CallError::OutputLimit { needed, limit } => ErrorKind::MemoryLimit { needed, limit },
            CallError::OutOfMemory { bytes } => ErrorKind::OutOfMemory { bytes },
        };
        let limit = e.is_limit();
        let e = Error::from_cause(kind, e);
        if limit {
            e.with_note("`Jit::max_workspace` sets the limit")
        } else if kind == ErrorKind::IterationLimit {
            e.with_note("`Jit::max_iterations` (`--max-iterations`) sets the limit")
        } else {
            e
        }
    }
}

impl From<gradlift_lang::EvalError> for Error {
    fn from(e: gradlift_lang::EvalError) -> Error {
        let kind = match e {
            gradlift_lang::EvalError::At { .. } => ErrorKind::Runtime,
            gradlift_lang::EvalError::Arguments(_) => ErrorKind::Arguments,
        };
        Error::from_spanned(kind, e)
    }
}

impl From<gradlift_lang::ArgsError> for Error {
    fn from(e: gradlift_lang::ArgsError) -> Error {
        Error::from_spanned(ErrorKind::Arguments, e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_with_a_caret_when_the_position_is_known() {
        let file = Arc::new(SourceFile::new("f.grad", "def f(x: R) -> R = y"));
        let e = Error::new(ErrorKind::Type, "unknown variable `y`");
        assert_eq!(e.to_string(), "error: unknown variable `y`");
        let mut at = e.clone();
        at.span = Some(Span::new(19, 20));
        let at = at.in_file(&file).with_note("a note");
        assert_eq!(
            at.to_string(),
            "f.grad:1:20: error: unknown variable `y`\n  |\n1 | def f(x: R) -> R = y\n  |                    ^\nnote: a note"
        );
        assert_eq!(at.kind(), ErrorKind::Type);
        assert_eq!(at.message(), "unknown variable `y`");
    }
}
