//! The lexer: text → tokens, each with its span and whether white space
//! preceded it (a call's `(` and an index's `[` must touch what they apply to
//! when they appear among the juxtaposed arguments of an array operation).

use crate::span::Span;
use std::fmt;

/// A token.
#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    /// A number literal; the text decides whether it is an integer.
    Number(String),
    /// An identifier or keyword.
    Ident(String),
    /// `.k` right after an expression: a tuple projection.
    ProjIndex(usize),
    /// Punctuation or an operator.
    Punct(&'static str),
    /// End of input.
    Eof,
}

impl fmt::Display for Tok {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tok::Number(s) => write!(f, "number `{s}`"),
            Tok::Ident(s) if is_keyword(s) => write!(f, "keyword `{s}`"),
            Tok::Ident(s) => write!(f, "identifier `{s}`"),
            Tok::ProjIndex(i) => write!(f, "projection `.{i}`"),
            Tok::Punct(p) => write!(f, "`{p}`"),
            Tok::Eof => write!(f, "end of input"),
        }
    }
}

/// A token with its position.
#[derive(Clone, Debug)]
pub struct Token {
    /// The token.
    pub tok: Tok,
    /// Where.
    pub span: Span,
    /// Whether white space or a comment came right before it.
    pub spaced: bool,
}

/// Reserved words: they cannot name variables, parameters or definitions.
pub const KEYWORDS: &[&str] = &[
    "def",
    "let",
    "in",
    "if",
    "then",
    "else",
    "fun",
    "and",
    "or",
    "not",
    "fst",
    "snd",
    "zip",
    "map",
    "map2",
    "reduce",
    "foldl",
    "revfold",
    "revwhile",
    "scanl",
    "scanr",
    "shift1L",
    "shift1R",
    "iota",
    "replicate",
    "concat",
    "take",
    "drop",
    "len",
    "gather",
    "reduce_by_index",
    "transpose",
    "matmul",
    "grad",
    "vjp",
    "jvp",
    "jacfwd",
    "jacrev",
    "jacobian",
    "size",
    "R",
    "inf",
    "nan",
    "while",
    "loop",
    "do",
    // Not constructs of the language: reserved so that a program written
    // with them gets a message saying what to write instead.
    "for",
    "return",
];

/// Whether `s` is a reserved word.
pub fn is_keyword(s: &str) -> bool {
    KEYWORDS.contains(&s)
}

const PUNCT: &[&str] = &[
    "->", "<=", ">=", "==", "!=", "//", "(", ")", "[", "]", ",", ";", ":", ".", "=", "+", "-", "*",
    "/", "%", "<", ">", "_", "@",
];

/// A character the lexer does not know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LexError {
    /// Where.
    pub span: Span,
    /// The offending character.
    pub found: char,
}

/// Splits `text` into tokens, ending with [`Tok::Eof`].
pub fn lex(text: &str) -> Result<Vec<Token>, LexError> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let mut spaced = true;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_whitespace() {
            i += 1;
            spaced = true;
            continue;
        }
        if c == b'#' {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
            spaced = true;
            continue;
        }
        let start = i;
        let tok = if c == b'.'
            && !spaced
            && bytes.get(i + 1).is_some_and(u8::is_ascii_digit)
            && !out.is_empty()
        {
            // `e.0`: a projection; the digits are an index, never a float.
            i += 1;
            let digits_start = i;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            match text[digits_start..i].parse() {
                Ok(k) => Tok::ProjIndex(k),
                Err(_) => {
                    return Err(LexError {
                        span: Span::new(start, i),
                        found: '.',
                    })
                }
            }
        } else if c.is_ascii_digit() {
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            if i + 1 < bytes.len() && bytes[i] == b'.' && bytes[i + 1].is_ascii_digit() {
                i += 1;
                while i < bytes.len() && bytes[i].is_ascii_digit() {
                    i += 1;
                }
            }
            if i < bytes.len() && (bytes[i] == b'e' || bytes[i] == b'E') {
                let mut j = i + 1;
                if j < bytes.len() && (bytes[j] == b'+' || bytes[j] == b'-') {
                    j += 1;
                }
                if j < bytes.len() && bytes[j].is_ascii_digit() {
                    while j < bytes.len() && bytes[j].is_ascii_digit() {
                        j += 1;
                    }
                    i = j;
                }
            }
            Tok::Number(text[start..i].to_string())
        } else if c.is_ascii_alphabetic() || (c == b'_' && next_is_ident(bytes, i + 1)) {
            while i < bytes.len()
                && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_' || bytes[i] == b'\'')
            {
                i += 1;
            }
            Tok::Ident(text[start..i].to_string())
        } else if let Some(p) = PUNCT.iter().find(|p| text[i..].starts_with(**p)) {
            i += p.len();
            Tok::Punct(p)
        } else {
            let found = text[i..].chars().next().unwrap_or('\0');
            return Err(LexError {
                span: Span::new(i, i + found.len_utf8()),
                found,
            });
        };
        out.push(Token {
            tok,
            span: Span::new(start, i),
            spaced,
        });
        spaced = false;
    }
    // End of input is reported right after the last token, not on the
    // empty line a trailing newline starts.
    let end = out.last().map_or(0, |t| t.span.end as usize);
    out.push(Token {
        tok: Tok::Eof,
        span: Span::new(end, end),
        spaced,
    });
    Ok(out)
}

fn next_is_ident(bytes: &[u8], i: usize) -> bool {
    bytes
        .get(i)
        .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<Tok> {
        lex(s).unwrap().into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn projections_and_floats() {
        assert_eq!(
            toks("p.0 1.5 x.1.0"),
            vec![
                Tok::Ident("p".into()),
                Tok::ProjIndex(0),
                Tok::Number("1.5".into()),
                Tok::Ident("x".into()),
                Tok::ProjIndex(1),
                Tok::ProjIndex(0),
                Tok::Eof
            ]
        );
        assert_eq!(
            toks("(x. 0)"),
            vec![
                Tok::Punct("("),
                Tok::Ident("x".into()),
                Tok::Punct("."),
                Tok::Number("0".into()),
                Tok::Punct(")"),
                Tok::Eof
            ]
        );
        assert_eq!(toks("1e-3")[0], Tok::Number("1e-3".into()));
    }

    #[test]
    fn unknown_character() {
        let err = lex("x $ y").unwrap_err();
        assert_eq!(err.found, '$');
        assert_eq!(err.span, Span::new(2, 3));
    }
}
