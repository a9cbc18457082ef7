//! Argument values for a call, as the command line writes them
//! (`x=1.5, A=[1,2,3], p=(1,2), M=[[1,2],[3,4]], s=100`) or as a JSON
//! object (`@file.json`), converted to [`Value`]s by the parameter types.
//! A `Z` parameter takes a number written without a decimal point or an
//! exponent (a JSON integer); an `R` parameter takes any number.

use crate::lexer::{lex, Tok};
use crate::span::{SourceFile, Span, Spanned};
use crate::syntax::{Name, Type};
use crate::types::Signature;
use crate::value::Value;
use std::collections::BTreeMap;
use thiserror::Error;

/// A value as written, before its type is known.
#[derive(Clone, Debug, PartialEq)]
pub enum ArgValue {
    /// A number (`inf`, `-inf`, `nan` included).
    Num(f64, Span),
    /// A whole number written without a decimal point or an exponent,
    /// within the 64-bit integers.
    Int(i64, Span),
    /// `[a, b, …]` (a JSON array: an array or a tuple).
    List(Vec<ArgValue>, Span),
    /// `(a, b, …)`.
    Tuple(Vec<ArgValue>, Span),
}

impl ArgValue {
    fn span(&self) -> Span {
        match self {
            ArgValue::Num(_, s)
            | ArgValue::Int(_, s)
            | ArgValue::List(_, s)
            | ArgValue::Tuple(_, s) => *s,
        }
    }
}

/// Named argument values, in the order written.
#[derive(Clone, Debug, Default)]
pub struct Args {
    /// Name, where it was written, value.
    pub entries: Vec<(Name, Span, ArgValue)>,
    /// The text the spans point into (`None` for JSON input).
    pub source: Option<SourceFile>,
}

/// An argument that cannot be read or does not fit its parameter.
#[derive(Debug, Clone, Error, PartialEq)]
pub enum ArgsError {
    /// Malformed text.
    #[error("{message}")]
    Syntax {
        /// What is wrong.
        message: String,
        /// Where.
        span: Span,
    },
    /// A value that does not fit its parameter.
    #[error("{message}")]
    Value {
        /// What is wrong.
        message: String,
        /// Where (dummy for JSON input).
        span: Span,
    },
    /// A parameter without a value, or a value for no parameter.
    #[error("{0}")]
    Names(String),
}

impl Spanned for ArgsError {
    fn span(&self) -> Span {
        match self {
            ArgsError::Syntax { span, .. } | ArgsError::Value { span, .. } => *span,
            ArgsError::Names(_) => Span::DUMMY,
        }
    }
}

fn syntax<T>(message: impl Into<String>, span: Span) -> Result<T, ArgsError> {
    Err(ArgsError::Syntax {
        message: message.into(),
        span,
    })
}

impl Args {
    /// Parses `name=value, …`; `origin` names the text in messages
    /// (for example `--at`).
    pub fn parse(origin: &str, text: &str) -> Result<Args, ArgsError> {
        let file = SourceFile::new(origin, text);
        let toks = lex(text).map_err(|e| ArgsError::Syntax {
            message: format!("unexpected character `{}`", e.found),
            span: e.span,
        })?;
        let mut pos = 0;
        let mut entries = Vec::new();
        while toks[pos].tok != Tok::Eof {
            let (name, span) = match &toks[pos].tok {
                Tok::Ident(s) => (Name::from(s.as_str()), toks[pos].span),
                other => {
                    return syntax(
                        format!("expected a parameter name, found {other}"),
                        toks[pos].span,
                    )
                }
            };
            pos += 1;
            if toks[pos].tok != Tok::Punct("=") {
                return syntax(
                    format!("expected `=` after `{name}`, found {}", toks[pos].tok),
                    toks[pos].span,
                );
            }
            pos += 1;
            let v = parse_value(&toks, &mut pos, 0)?;
            entries.push((name, span, v));
            match &toks[pos].tok {
                Tok::Punct(",") => pos += 1,
                Tok::Eof => {}
                other => {
                    return syntax(
                        format!("expected `,` or the end, found {other}"),
                        toks[pos].span,
                    )
                }
            }
        }
        Ok(Args {
            entries,
            source: Some(file),
        })
    }

    /// Reads a JSON object `{"name": value, …}`.
    pub fn from_json(json: &serde_json::Value) -> Result<Args, ArgsError> {
        let serde_json::Value::Object(map) = json else {
            return Err(ArgsError::Names(
                "the JSON input must be an object from parameter names to values".into(),
            ));
        };
        let mut entries = Vec::new();
        for (k, v) in map {
            entries.push((Name::from(k.as_str()), Span::DUMMY, json_value(k, v)?));
        }
        Ok(Args {
            entries,
            source: None,
        })
    }

    /// The values for the parameters of `sig` (definition `fn_name`), in
    /// parameter order. Every parameter must be given exactly once.
    pub fn values_for(&self, fn_name: &str, sig: &Signature) -> Result<Vec<Value>, ArgsError> {
        let mut given: BTreeMap<&str, (&Span, &ArgValue)> = BTreeMap::new();
        for (n, span, v) in &self.entries {
            if !sig.params.iter().any(|(p, _)| p == n) {
                let names: Vec<&str> = sig.params.iter().map(|(p, _)| &**p).collect();
                return Err(ArgsError::Value {
                    message: format!(
                        "`{n}` is not a parameter of `{fn_name}` (its parameters: {})",
                        if names.is_empty() {
                            "none".to_string()
                        } else {
                            names.join(", ")
                        }
                    ),
                    span: *span,
                });
            }
            if given.insert(n, (span, v)).is_some() {
                return Err(ArgsError::Value {
                    message: format!("`{n}` is given twice"),
                    span: *span,
                });
            }
        }
        let mut out = Vec::with_capacity(sig.params.len());
        for (p, ty) in &sig.params {
            let Some((_, v)) = given.get(&**p) else {
                let ty = ty.as_ref().map_or("size".to_string(), |t| t.to_string());
                return Err(ArgsError::Names(format!(
                    "missing a value for parameter `{p}: {ty}` of `{fn_name}`"
                )));
            };
            out.push(match ty {
                None => match v {
                    ArgValue::Int(k, _) if *k >= 0 => Value::Int(*k),
                    ArgValue::Num(x, _) if x.fract() == 0.0 && *x >= 0.0 && *x < 9.0e15 => {
                        Value::Int(*x as i64)
                    }
                    other => {
                        return Err(ArgsError::Value {
                            message: format!("`{p}` is a size: it needs a whole number ≥ 0"),
                            span: other.span(),
                        })
                    }
                },
                Some(t) => convert(p, t, v)?,
            });
        }
        Ok(out)
    }
}

fn parse_value(
    toks: &[crate::lexer::Token],
    pos: &mut usize,
    depth: usize,
) -> Result<ArgValue, ArgsError> {
    if depth > 64 {
        return syntax("values nest too deeply", toks[*pos].span);
    }
    let start = toks[*pos].span;
    let negative = toks[*pos].tok == Tok::Punct("-");
    if negative {
        *pos += 1;
    }
    let t = &toks[*pos];
    let v = match &t.tok {
        Tok::Number(s)
            if s.bytes().all(|b| b.is_ascii_digit())
                && format!("{}{s}", if negative { "-" } else { "" })
                    .parse::<i64>()
                    .is_ok() =>
        {
            let k: i64 = format!("{}{s}", if negative { "-" } else { "" })
                .parse()
                .expect("checked");
            *pos += 1;
            if negative && k == 0 {
                // `-0` is the real −0.
                ArgValue::Num(-0.0, start.to(t.span))
            } else {
                ArgValue::Int(k, start.to(t.span))
            }
        }
        Tok::Number(s) => {
            let x: f64 = s.parse().map_err(|_| ArgsError::Syntax {
                message: format!("`{s}` is not a number"),
                span: t.span,
            })?;
            *pos += 1;
            ArgValue::Num(if negative { -x } else { x }, start.to(t.span))
        }
        Tok::Ident(s) if s == "inf" || s == "nan" => {
            *pos += 1;
            let x = if s == "inf" { f64::INFINITY } else { f64::NAN };
            ArgValue::Num(if negative { -x } else { x }, start.to(t.span))
        }
        Tok::Punct(open @ ("[" | "(")) if !negative => {
            let close = if *open == "[" { "]" } else { ")" };
            *pos += 1;
            let mut items = Vec::new();
            if toks[*pos].tok != Tok::Punct(close) {
                loop {
                    items.push(parse_value(toks, pos, depth + 1)?);
                    match &toks[*pos].tok {
                        Tok::Punct(",") => *pos += 1,
                        Tok::Punct(c) if *c == close => break,
                        other => {
                            return syntax(
                                format!("expected `,` or `{close}`, found {other}"),
                                toks[*pos].span,
                            )
                        }
                    }
                }
            }
            let end = toks[*pos].span;
            *pos += 1;
            let span = start.to(end);
            if *open == "[" {
                ArgValue::List(items, span)
            } else {
                ArgValue::Tuple(items, span)
            }
        }
        other => {
            return syntax(
                format!("expected a number, `[…]` or `(…)`, found {other}"),
                t.span,
            )
        }
    };
    Ok(v)
}

fn json_value(name: &str, v: &serde_json::Value) -> Result<ArgValue, ArgsError> {
    match v {
        serde_json::Value::Number(n) => Ok(match n.as_i64() {
            Some(k) => ArgValue::Int(k, Span::DUMMY),
            None => ArgValue::Num(
                n.as_f64().expect("serde_json numbers convert to f64"),
                Span::DUMMY,
            ),
        }),
        serde_json::Value::String(s)
            if matches!(
                s.as_str(),
                "inf" | "-inf" | "nan" | "Infinity" | "-Infinity" | "NaN"
            ) =>
        {
            Ok(ArgValue::Num(
                match s.as_str() {
                    "inf" | "Infinity" => f64::INFINITY,
                    "-inf" | "-Infinity" => f64::NEG_INFINITY,
                    _ => f64::NAN,
                },
                Span::DUMMY,
            ))
        }
        serde_json::Value::Array(xs) => Ok(ArgValue::List(
            xs.iter()
                .map(|x| json_value(name, x))
                .collect::<Result<_, _>>()?,
            Span::DUMMY,
        )),
        other => Err(ArgsError::Value {
            message: format!("`{name}`: {other} is not a number or an array"),
            span: Span::DUMMY,
        }),
    }
}

/// `v` as a value of type `ty`; `path` names it in messages (`B`, then
/// `B[2]` for an element, `B.1` for a component).
fn convert(path: &str, ty: &Type, v: &ArgValue) -> Result<Value, ArgsError> {
    let wrong = |what: &str| ArgsError::Value {
        message: format!("`{path}` has type `{ty}`, but the value given is {what}"),
        span: v.span(),
    };
    match (ty, v) {
        (Type::Real, ArgValue::Num(x, _)) => Ok(Value::Real(*x)),
        (Type::Real, ArgValue::Int(k, _)) => Ok(Value::Real(*k as f64)),
        (Type::Int, ArgValue::Int(k, _)) => Ok(Value::Int(*k)),
        (Type::Int, ArgValue::Num(..)) => Err(ArgsError::Value {
            message: format!(
                "`{path}` is an integer (`Z`): write a whole number without a decimal point"
            ),
            span: v.span(),
        }),
        (Type::Tuple(ts), ArgValue::Tuple(xs, _) | ArgValue::List(xs, _))
            if ts.len() == xs.len() =>
        {
            Ok(Value::tuple(
                ts.iter()
                    .zip(xs)
                    .enumerate()
                    .map(|(i, (t, x))| convert(&format!("{path}.{i}"), t, x))
                    .collect::<Result<_, _>>()?,
            ))
        }
        (Type::Array(t, _), ArgValue::List(xs, _)) => Ok(Value::array(
            xs.iter()
                .enumerate()
                .map(|(i, x)| convert(&format!("{path}[{i}]"), t, x))
                .collect::<Result<_, _>>()?,
        )),
        (_, ArgValue::Num(..) | ArgValue::Int(..)) => Err(wrong("a number")),
        (_, ArgValue::List(xs, _)) => Err(wrong(&format!(
            "a list of {}",
            crate::span::count(xs.len(), "element")
        ))),
        (_, ArgValue::Tuple(xs, _)) => Err(wrong(&format!(
            "a tuple of {}",
            crate::span::count(xs.len(), "component")
        ))),
    }
}
