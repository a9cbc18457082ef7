//! Source positions: byte spans, the text they point into, and the
//! `file:line:col` + caret rendering every user-facing error goes through.

use std::fmt;
use std::sync::Arc;

/// A half-open byte range `[start, end)` into a [`SourceFile`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Span {
    /// First byte.
    pub start: u32,
    /// One past the last byte.
    pub end: u32,
}

impl Span {
    /// The span `[start, end)`.
    pub fn new(start: usize, end: usize) -> Span {
        Span {
            start: start as u32,
            end: end as u32,
        }
    }

    /// The empty span used for terms that no source text stands for
    /// (terms built by a pass rather than parsed).
    pub const DUMMY: Span = Span { start: 0, end: 0 };

    /// The span that marks a constant `0` as a *structural* zero: the 0_G of
    /// Figure 4 that differentiation builds for an adjoint nothing flows
    /// into. Simplification may drop a structural zero (`0 * e ⇝ 0`); it may
    /// not do so for a zero the user wrote, since `0 * inf` is `nan`.
    pub const STRUCTURAL: Span = Span {
        start: u32::MAX,
        end: u32::MAX,
    };

    /// Whether this is [`Span::STRUCTURAL`].
    pub fn is_structural(self) -> bool {
        self == Span::STRUCTURAL
    }

    /// The `k`-th synthetic span: distinct from every other span and
    /// pointing at no text (its start is past its end). The type checker
    /// gives one to each call of a module built without text, whose spans
    /// would otherwise not tell its calls apart.
    pub fn synthetic(k: u32) -> Span {
        Span {
            start: k.saturating_add(1).min(u32::MAX - 1),
            end: 0,
        }
    }

    /// Whether the span points at text: neither [`Span::DUMMY`],
    /// [`Span::STRUCTURAL`] nor [`Span::synthetic`].
    pub fn is_text(self) -> bool {
        self != Span::DUMMY && !self.is_structural() && self.start <= self.end
    }

    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span {
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }
}

/// A named piece of source text.
#[derive(Clone, Debug)]
pub struct SourceFile {
    /// The name shown in messages (a path, or `<input>`).
    pub name: String,
    /// The text.
    pub text: Arc<str>,
    line_starts: Vec<u32>,
}

impl SourceFile {
    /// Wraps `text` under `name`.
    pub fn new(name: impl Into<String>, text: impl Into<Arc<str>>) -> SourceFile {
        let text: Arc<str> = text.into();
        let mut line_starts = vec![0];
        line_starts.extend(
            text.bytes()
                .enumerate()
                .filter(|&(_, b)| b == b'\n')
                .map(|(i, _)| i as u32 + 1),
        );
        SourceFile {
            name: name.into(),
            text,
            line_starts,
        }
    }

    /// 1-based line and column (in characters) of byte offset `pos`.
    pub fn line_col(&self, pos: u32) -> (usize, usize) {
        let pos = pos.min(self.text.len() as u32);
        let line = match self.line_starts.binary_search(&pos) {
            Ok(i) => i,
            Err(i) => i - 1,
        };
        let start = self.line_starts[line] as usize;
        let col = self.text[start..pos as usize].chars().count() + 1;
        (line + 1, col)
    }

    /// The text of 1-based line `line`, without its newline.
    pub fn line_text(&self, line: usize) -> &str {
        let start = self.line_starts[line - 1] as usize;
        let end = self
            .line_starts
            .get(line)
            .map(|&e| e as usize)
            .unwrap_or(self.text.len());
        self.text[start..end].trim_end_matches(['\n', '\r'])
    }

    /// Renders `message` at `span`: a `file:line:col: error: message` line,
    /// then the source line with a caret under the span.
    pub fn render(&self, span: Span, message: &str) -> String {
        let (line, col) = self.line_col(span.start);
        let text = self.line_text(line);
        let gutter = line.to_string().len();
        let pad: String = text
            .chars()
            .take(col - 1)
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        let width = if span.end > span.start {
            let (end_line, end_col) = self.line_col(span.end);
            if end_line == line {
                (end_col - col).max(1)
            } else {
                (text.chars().count() + 1).saturating_sub(col).max(1)
            }
        } else {
            1
        };
        format!(
            "{}:{}:{}: error: {}\n{:gutter$} |\n{} | {}\n{:gutter$} | {}{}",
            self.name,
            line,
            col,
            message,
            "",
            line,
            text,
            "",
            pad,
            "^".repeat(width),
        )
    }
}

/// "`subject` takes 2 arguments, but 1 was given".
pub fn arity_message(subject: &str, want: usize, got: usize) -> String {
    format!(
        "{subject} takes {want} argument{}, but {got} {} given",
        if want == 1 { "" } else { "s" },
        if got == 1 { "was" } else { "were" }
    )
}

/// "1 component", "3 components".
pub fn count(n: usize, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

/// Something that happened at a place in the source.
pub trait Spanned {
    /// Where.
    fn span(&self) -> Span;
}

/// An error paired with the file it refers to, printed with position and caret.
#[derive(Debug)]
pub struct Located<'a, E> {
    /// The file the error's span points into.
    pub file: &'a SourceFile,
    /// The error.
    pub error: &'a E,
}

impl<E: Spanned + fmt::Display> fmt::Display for Located<'_, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.file.render(self.error.span(), &self.error.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_and_column_are_one_based() {
        let f = SourceFile::new("a.grad", "def f(x: R) =\n  x + y\n");
        assert_eq!(f.line_col(0), (1, 1));
        assert_eq!(f.line_col(18), (2, 5));
        let shown = f.render(Span::new(20, 21), "unknown variable `y`");
        assert_eq!(
            shown,
            "a.grad:2:7: error: unknown variable `y`\n  |\n2 |   x + y\n  |       ^"
        );
    }
}
