//! The parser: tokens → [`Module`], [`Expr`] or [`Type`], by recursive
//! descent with precedence climbing for the operators.
//!
//! Precedence, loosest first: `let`/`if`/`fun` (extend as far right as
//! possible), `or`, `and`, `not`, comparisons (non-associative), `+ -`,
//! `* /`, unary `-`, application of an array operation to its juxtaposed
//! arguments, postfix (call `f(x)`, index `A[k]`, projection `e.k`).
//!
//! A chain of `let`s is parsed by a loop, not by recursion; everything else
//! recurses through [`crate::deep::guard`].

use crate::deep::guard;
use crate::lexer::{is_keyword, lex, Tok, Token};
use crate::prim::{prec, Fixity, Prim};
use crate::span::{Span, Spanned};
use crate::syntax::*;
use thiserror::Error;

/// A syntax error.
#[derive(Debug, Clone, Error, PartialEq)]
pub enum SyntaxError {
    /// A character no token starts with.
    #[error("unexpected character `{found}`")]
    UnexpectedChar {
        /// The character.
        found: char,
        /// Where.
        span: Span,
    },
    /// The parser wanted something else here.
    #[error("expected {expected}, found {found}")]
    Expected {
        /// What would have been accepted.
        expected: String,
        /// What is there.
        found: String,
        /// Where.
        span: Span,
    },
    /// Well-formed tokens that do not make sense here.
    #[error("{message}")]
    Invalid {
        /// What is wrong.
        message: String,
        /// Where.
        span: Span,
    },
}

impl Spanned for SyntaxError {
    fn span(&self) -> Span {
        match self {
            SyntaxError::UnexpectedChar { span, .. }
            | SyntaxError::Expected { span, .. }
            | SyntaxError::Invalid { span, .. } => *span,
        }
    }
}

type PResult<T> = Result<T, SyntaxError>;

/// Parses a whole file.
pub fn parse_module(text: &str) -> PResult<Module> {
    let mut p = Parser::new(text)?;
    let mut defs: Vec<Def> = Vec::new();
    while p.peek() != &Tok::Eof {
        if let (Some(last), false) = (defs.last(), p.is_kw("def")) {
            // The body above is complete and something follows it.
            let message = match p.peek() {
                Tok::Ident(s) if is_keyword(s) || Prim::from_call_name(s).is_some() => format!(
                    "expected `def` to start a definition, found {}; the body of `{}` ends before it",
                    p.peek(),
                    last.name
                ),
                _ => format!(
                    "expected `def` to start a definition, found {}; the body of `{}` ends before it: is an operator missing between two expressions?",
                    p.peek(),
                    last.name
                ),
            };
            return Err(SyntaxError::Invalid {
                message,
                span: p.span(),
            });
        }
        defs.push(p.def()?);
    }
    Ok(Module { defs })
}

/// Parses a single expression (the whole text).
pub fn parse_expr(text: &str) -> PResult<Expr> {
    let mut p = Parser::new(text)?;
    let e = p.expr()?;
    p.expect_eof()?;
    Ok(e)
}

/// Parses a single type (the whole text).
pub fn parse_type(text: &str) -> PResult<Type> {
    let mut p = Parser::new(text)?;
    let t = p.ty()?;
    p.expect_eof()?;
    Ok(t)
}

struct Parser {
    /// The text, for the snippets of suggestions.
    text: String,
    toks: Vec<Token>,
    pos: usize,
    /// The last scan for lambda binders: from a position, the first token
    /// that cannot be part of them.
    binder_scan: Option<(usize, usize)>,
}

impl Parser {
    fn new(text: &str) -> PResult<Parser> {
        let toks = lex(text).map_err(|e| {
            let hint = match e.found {
                '^' => Some("there is no `^` operator: a power is `pow(a, b)`"),
                '%' => Some("there is no `%` operator on reals"),
                '!' => Some("there is no `!`: negate a condition with `not`, compare with `!=`"),
                '&' => Some("there is no `&` or `&&`: join conditions with `and`"),
                '|' => Some("there is no `|` or `||`: join conditions with `or`"),
                '{' | '}' => {
                    Some("braces are not part of the language: group with parentheses, bind with `let … in`")
                }
                _ => None,
            };
            match hint {
                Some(message) => SyntaxError::Invalid {
                    message: message.to_string(),
                    span: e.span,
                },
                None => SyntaxError::UnexpectedChar {
                    found: e.found,
                    span: e.span,
                },
            }
        })?;
        Ok(Parser {
            text: text.to_string(),
            toks,
            pos: 0,
            binder_scan: None,
        })
    }

    fn peek(&self) -> &Tok {
        &self.toks[self.pos].tok
    }

    fn peek_at(&self, k: usize) -> &Tok {
        &self.toks[(self.pos + k).min(self.toks.len() - 1)].tok
    }

    fn token(&self) -> &Token {
        &self.toks[self.pos]
    }

    fn span(&self) -> Span {
        self.toks[self.pos].span
    }

    fn prev_span(&self) -> Span {
        self.toks[self.pos.saturating_sub(1)].span
    }

    /// The text of `span`.
    fn snippet(&self, span: Span) -> &str {
        self.text
            .get(span.start as usize..span.end as usize)
            .unwrap_or("…")
    }

    fn bump(&mut self) -> Token {
        let t = self.toks[self.pos].clone();
        if self.pos + 1 < self.toks.len() {
            self.pos += 1;
        }
        t
    }

    fn is_punct(&self, p: &str) -> bool {
        matches!(self.peek(), Tok::Punct(q) if *q == p)
    }

    fn is_kw(&self, k: &str) -> bool {
        matches!(self.peek(), Tok::Ident(s) if s == k)
    }

    fn eat_punct(&mut self, p: &str) -> bool {
        let yes = self.is_punct(p);
        if yes {
            self.bump();
        }
        yes
    }

    fn expected<T>(&self, what: &str) -> PResult<T> {
        Err(SyntaxError::Expected {
            expected: what.to_string(),
            found: self.peek().to_string(),
            span: self.span(),
        })
    }

    fn expect_punct(&mut self, p: &str) -> PResult<Span> {
        if self.is_punct(p) {
            Ok(self.bump().span)
        } else {
            self.expected(&format!("`{p}`"))
        }
    }

    fn expect_kw(&mut self, k: &str) -> PResult<Span> {
        if self.is_kw(k) {
            Ok(self.bump().span)
        } else {
            self.expected(&format!("`{k}`"))
        }
    }

    fn expect_eof(&self) -> PResult<()> {
        if self.peek() == &Tok::Eof {
            Ok(())
        } else {
            self.expected("end of input")
        }
    }

    /// A name being bound: not a keyword, not a primitive.
    fn binder(&mut self, what: &str) -> PResult<(Name, Span)> {
        match self.peek().clone() {
            Tok::Ident(s) if !is_keyword(&s) => {
                let span = self.bump().span;
                if Prim::from_call_name(&s).is_some() {
                    return Err(SyntaxError::Invalid {
                        message: format!("`{s}` is a primitive and cannot be rebound"),
                        span,
                    });
                }
                Ok((Name::from(s.as_str()), span))
            }
            _ => self.expected(what),
        }
    }

    // ---- definitions and types ----

    fn def(&mut self) -> PResult<Def> {
        self.expect_kw("def")?;
        let (name, name_span) = self.binder("a function name")?;
        self.expect_punct("(")?;
        let mut params = Vec::new();
        if !self.is_punct(")") {
            loop {
                let (pname, span) = self.binder("a parameter name")?;
                self.expect_punct(":")?;
                let ty = if self.is_kw("size") {
                    self.bump();
                    None
                } else {
                    Some(self.ty()?)
                };
                params.push(DefParam {
                    name: pname,
                    span,
                    ty,
                });
                if !self.eat_punct(",") {
                    break;
                }
            }
        }
        self.expect_punct(")")?;
        let ret = if self.eat_punct("->") {
            Some(self.ty()?)
        } else {
            None
        };
        self.expect_punct("=")?;
        let body = self.expr()?;
        Ok(Def {
            name,
            name_span,
            params,
            ret,
            body,
        })
    }

    fn ty(&mut self) -> PResult<Type> {
        guard(|| self.ty_inner())
    }

    fn ty_inner(&mut self) -> PResult<Type> {
        if self.is_kw("R") {
            self.bump();
            return Ok(Type::Real);
        }
        if self.is_kw("Z") {
            self.bump();
            return Ok(Type::Int);
        }
        if self.eat_punct("[") {
            let elem = self.ty()?;
            self.expect_punct(";")?;
            let n = self.size()?;
            self.expect_punct("]")?;
            return Ok(Type::array(elem, n));
        }
        if self.eat_punct("(") {
            let mut ts = Vec::new();
            if !self.is_punct(")") {
                loop {
                    ts.push(self.ty()?);
                    if !self.eat_punct(",") {
                        break;
                    }
                }
            }
            self.expect_punct(")")?;
            if self.eat_punct("->") {
                let ret = self.ty()?;
                return Ok(Type::Fun(ts, Box::new(ret)));
            }
            return Ok(if ts.len() == 1 {
                ts.pop().expect("one element")
            } else {
                Type::Tuple(ts)
            });
        }
        self.expected("a type (`R`, `[T; n]` or a tuple `(T, T)`)")
    }

    fn size(&mut self) -> PResult<Size> {
        // A leading `-`: the printer writes `0 - n` as `-n`.
        let mut total = if self.eat_punct("-") {
            Size::lit(0).add_scaled(&self.size_term()?, -1)
        } else {
            self.size_term()?
        };
        loop {
            if self.eat_punct("+") {
                total = total.plus(&self.size_term()?);
            } else if self.eat_punct("-") {
                total = total.add_scaled(&self.size_term()?, -1);
            } else {
                return Ok(total);
            }
        }
    }

    fn size_term(&mut self) -> PResult<Size> {
        match self.peek().clone() {
            Tok::Number(s) => {
                let span = self.bump().span;
                let k: i64 = s.parse().map_err(|_| SyntaxError::Invalid {
                    message: format!("a size must be a whole number, not `{s}`"),
                    span,
                })?;
                if self.eat_punct("*") {
                    let (v, _) = self.size_var()?;
                    Ok(Size::var(v).scale(k))
                } else {
                    Ok(Size::lit(k))
                }
            }
            Tok::Ident(_) => Ok(Size::var(self.size_var()?.0)),
            _ => self.expected("a size (an integer or a size variable)"),
        }
    }

    fn size_var(&mut self) -> PResult<(Name, Span)> {
        self.binder("a size variable")
    }

    // ---- patterns ----

    fn pattern(&mut self) -> PResult<Pattern> {
        guard(|| {
            if self.is_punct("_") {
                return Ok(Pattern::Wild(self.bump().span));
            }
            if self.is_punct("(") {
                let start = self.bump().span;
                let mut ps = Vec::new();
                loop {
                    ps.push(self.pattern()?);
                    if !self.eat_punct(",") {
                        break;
                    }
                }
                let end = self.expect_punct(")")?;
                return Ok(if ps.len() == 1 {
                    ps.pop().expect("one pattern")
                } else {
                    Pattern::Tuple(ps, start.to(end))
                });
            }
            let (n, span) = self.binder("a name or a tuple pattern")?;
            Ok(Pattern::Var(n, span))
        })
    }

    // ---- expressions ----

    fn expr(&mut self) -> PResult<Expr> {
        guard(|| self.expr_inner())
    }

    fn expr_inner(&mut self) -> PResult<Expr> {
        if self.is_kw("let") {
            return self.let_chain();
        }
        if self.is_kw("if") {
            let start = self.bump().span;
            let cond = self.expr()?;
            self.expect_kw("then")?;
            let then_branch = self.expr()?;
            self.expect_kw("else")?;
            let else_branch = self.expr()?;
            let span = start.to(else_branch.span);
            return Ok(Expr::new(
                ExprKind::If(Box::new(cond), Box::new(then_branch), Box::new(else_branch)),
                span,
            ));
        }
        if self.is_kw("loop") {
            // `loop p = v while c do e`.
            let start = self.bump().span;
            let pat = self.pattern()?;
            self.expect_punct("=")?;
            let init = self.expr()?;
            self.expect_kw("while")?;
            let cond = self.expr()?;
            self.expect_kw("do")?;
            let step = self.expr()?;
            let span = start.to(step.span);
            return Ok(crate::sugar::while_loop(pat, init, cond, step, span));
        }
        if self.is_kw("fun") {
            let start = self.bump().span;
            self.expect_punct("(")?;
            let mut params = Vec::new();
            if !self.is_punct(")") {
                loop {
                    let pat = self.pattern()?;
                    let ty = if self.eat_punct(":") {
                        Some(self.ty()?)
                    } else {
                        None
                    };
                    params.push(Param { pat, ty });
                    if !self.eat_punct(",") {
                        break;
                    }
                }
            }
            self.expect_punct(")")?;
            self.expect_punct("->")?;
            let body = self.expr()?;
            let span = start.to(body.span);
            return Ok(Expr::new(ExprKind::Lambda(params, body.into()), span));
        }
        self.binary(0)
    }

    fn let_chain(&mut self) -> PResult<Expr> {
        let mut bindings = Vec::new();
        while self.is_kw("let") {
            let start = self.bump().span;
            let pat = self.pattern()?;
            let ty = if self.eat_punct(":") {
                Some(self.ty()?)
            } else {
                None
            };
            self.expect_punct("=")?;
            let value = self.expr()?;
            self.expect_kw("in")?;
            bindings.push((start, pat, ty, value));
        }
        let mut body = self.expr()?;
        while let Some((start, pat, ty, value)) = bindings.pop() {
            let span = start.to(body.span);
            body = Expr::new(
                ExprKind::Let {
                    pat,
                    ty,
                    value: Box::new(value),
                    body: Box::new(body),
                },
                span,
            );
        }
        Ok(body)
    }

    fn infix_op(&self) -> Option<Prim> {
        match self.peek() {
            Tok::Punct("+") => Some(Prim::Add),
            Tok::Punct("-") => Some(Prim::Sub),
            Tok::Punct("*") => Some(Prim::Mul),
            Tok::Punct("/") => Some(Prim::Div),
            Tok::Punct("//") => Some(Prim::IDiv),
            Tok::Punct("%") => Some(Prim::IMod),
            Tok::Punct("<") => Some(Prim::Lt),
            Tok::Punct("<=") => Some(Prim::Le),
            Tok::Punct(">") => Some(Prim::Gt),
            Tok::Punct(">=") => Some(Prim::Ge),
            Tok::Punct("==") => Some(Prim::Eq),
            Tok::Punct("!=") => Some(Prim::Ne),
            Tok::Ident(s) if s == "and" => Some(Prim::And),
            Tok::Ident(s) if s == "or" => Some(Prim::Or),
            _ => None,
        }
    }

    /// Operators binding at least as tightly as `min`.
    fn binary(&mut self, min: u8) -> PResult<Expr> {
        let mut lhs = self.prefix()?;
        while let Some(op) = self.infix_op() {
            let Fixity::Infix(p) = op.info().fixity else {
                unreachable!("infix_op returns infix primitives")
            };
            if p < min {
                break;
            }
            let op_span = self.bump().span;
            if op == Prim::Mul && self.is_punct("*") && !self.token().spaced {
                // `x ** 2`: a power, written as in Python.
                let second = self.bump().span;
                let rhs = guard(|| self.binary(p + 1))?;
                return Err(SyntaxError::Invalid {
                    message: format!(
                        "there is no `**` operator: a power is `pow({}, {})`",
                        self.snippet(lhs.span),
                        self.snippet(rhs.span)
                    ),
                    span: op_span.to(second),
                });
            }
            let rhs = guard(|| self.binary(p + 1))?;
            if p == prec::CMP
                && matches!(self.infix_op(), Some(q) if q.info().fixity == Fixity::Infix(prec::CMP))
            {
                return Err(SyntaxError::Invalid {
                    message: "comparisons do not chain: write `a < b and b < c`".into(),
                    span: self.span(),
                });
            }
            let span = lhs.span.to(rhs.span);
            lhs = Expr::new(ExprKind::Prim(op, vec![lhs, rhs]), span);
        }
        Ok(lhs)
    }

    fn prefix(&mut self) -> PResult<Expr> {
        guard(|| {
            if self.is_kw("let") || self.is_kw("if") || self.is_kw("fun") || self.is_kw("loop") {
                return self.expr();
            }
            if self.is_kw("not") {
                let start = self.bump().span;
                let e = self.binary(prec::NOT)?;
                let span = start.to(e.span);
                return Ok(Expr::new(ExprKind::Prim(Prim::Not, vec![e]), span));
            }
            if self.is_punct("-") {
                let start = self.bump().span;
                // `-1.5` and `-inf` are constants; `-(1.5)` is a negation.
                let literal = match self.peek() {
                    Tok::Number(_) => true,
                    Tok::Ident(s) => s == "inf" || s == "nan",
                    _ => false,
                };
                if literal && !self.token().spaced {
                    let e = self.atom()?;
                    // `-0` is the real −0.
                    if let ExprKind::Literal(k) = e.kind {
                        let span = start.to(e.span);
                        let kind = match k {
                            0 => ExprKind::Const(-0.0),
                            _ => ExprKind::Literal(-k),
                        };
                        return self.postfix_from(Expr::new(kind, span), true);
                    }
                    if let ExprKind::Const(c) = e.kind {
                        let span = start.to(e.span);
                        // `nan` has no sign: `-nan` is the `nan` the printer
                        // writes back.
                        let c = if c.is_nan() { c } else { -c };
                        return self.postfix_from(Expr::new(ExprKind::Const(c), span), true);
                    }
                }
                let e = self.prefix()?;
                let span = start.to(e.span);
                return Ok(Expr::new(ExprKind::Prim(Prim::Neg, vec![e]), span));
            }
            self.application()
        })
    }

    /// `@checkpoint(K)` or `@checkpoint(binomial C)`.
    fn checkpoint(&mut self) -> PResult<Schedule> {
        let start = self.expect_punct("@")?;
        if !self.is_kw("checkpoint") {
            return self.expected("`checkpoint` after `@`");
        }
        self.bump();
        self.expect_punct("(")?;
        let binomial = self.is_kw("binomial");
        if binomial {
            self.bump();
        }
        let Tok::Number(text) = self.peek().clone() else {
            return self.expected(if binomial {
                "the number of snapshots"
            } else {
                "a block length or `binomial`"
            });
        };
        let at = self.bump().span;
        let what = if binomial { "binomial:" } else { "" };
        let schedule = Schedule::parse(&format!("{what}{text}"))
            .map_err(|message| SyntaxError::Invalid { message, span: at })?;
        self.expect_punct(")")?;
        if !(self.is_kw("foldl") || self.is_kw("revfold") || self.is_kw("revwhile")) {
            let span = start.to(self.prev_span());
            return Err(SyntaxError::Invalid {
                message: format!(
                    "`@checkpoint` applies to a `foldl`, but {} follows it",
                    self.peek()
                ),
                span,
            });
        }
        Ok(schedule)
    }

    fn application(&mut self) -> PResult<Expr> {
        let start = self.span();
        let schedule = if self.is_punct("@") {
            Some(self.checkpoint()?)
        } else {
            None
        };
        let array_op = match self.peek() {
            Tok::Ident(s) => match s.as_str() {
                "map" => Some(ArrayOp::Map),
                "map2" => Some(ArrayOp::Map2),
                "reduce" => Some(ArrayOp::Reduce),
                "foldl" => Some(ArrayOp::Foldl(schedule)),
                "revfold" => match schedule {
                    Some(s) => Some(ArrayOp::Revfold(s)),
                    None => return self.expected("`@checkpoint(…)` before `revfold`"),
                },
                "revwhile" => match schedule {
                    Some(s @ Schedule::Binomial(_)) => Some(ArrayOp::Revwhile(s)),
                    _ => return self.expected("`@checkpoint(binomial …)` before `revwhile`"),
                },
                "while" => Some(ArrayOp::While),
                "scanl" => Some(ArrayOp::Scanl),
                "scanr" => Some(ArrayOp::Scanr),
                _ => None,
            },
            _ => None,
        };
        if let Some(op) = array_op {
            let keyword = self.bump().span;
            if op == ArrayOp::While && !self.is_punct("(") {
                // `while c do e`, as in other languages.
                return Err(SyntaxError::Invalid {
                    message: "a loop that stops on a condition is written `loop x = start while condition do step`: the state, where it starts, when it goes on, and its next value".into(),
                    span: keyword,
                });
            }
            let f = self.argument("a function argument (a lambda `(x. e)`, `(+)`, or a name)")?;
            let mut args = Vec::new();
            for k in 0..op.arity() {
                if !self.starts_atom() {
                    if let Some(e) = self.call_as_function(op, &f, k) {
                        return Err(e);
                    }
                }
                args.push(self.argument("an argument")?);
            }
            if op == ArrayOp::Map {
                // `map F A B C`: over several arrays at once.
                while self.starts_atom() {
                    args.push(self.argument("an argument")?);
                }
                let span = start.to(self.prev_span());
                let fspan = f.span;
                return crate::sugar::map_n(f, args, span).map_err(|message| {
                    SyntaxError::Invalid {
                        message,
                        span: fspan,
                    }
                });
            }
            let span = start.to(self.prev_span());
            return Ok(Expr::new(ExprKind::ArrayOp(op, Box::new(f), args), span));
        }
        let juxtaposed = match self.peek() {
            Tok::Ident(s) if s == "shift1L" => Some(Builtin::Shift1L),
            Tok::Ident(s) if s == "shift1R" => Some(Builtin::Shift1R),
            _ => None,
        };
        if let Some(b) = juxtaposed {
            self.bump();
            let a = self.argument("an array argument")?;
            let span = start.to(a.span);
            return Ok(Expr::new(ExprKind::Builtin(b, vec![a]), span));
        }
        // `redcue max (-inf) A`: a name followed by an argument, which only
        // an array operation takes.
        if let Tok::Ident(s) = self.peek() {
            let juxtaposed = match self.peek_at(1) {
                Tok::Number(_) => true,
                Tok::Ident(t) => !is_keyword(t) || t == "inf" || t == "nan",
                _ => false,
            };
            if juxtaposed && !is_keyword(s) && Prim::from_call_name(s).is_none() {
                if let Some(op) = crate::suggest::closest(s, ARRAY_OPS) {
                    return Err(SyntaxError::Invalid {
                        message: format!("`{s}` is not an array operation; did you mean `{op}`?"),
                        span: self.span(),
                    });
                }
            }
        }
        if self.is_kw("fst") || self.is_kw("snd") {
            let index = usize::from(self.is_kw("snd"));
            self.bump();
            let e = self.argument("a tuple argument")?;
            let span = start.to(e.span);
            return Ok(Expr::new(ExprKind::Proj(Box::new(e), index), span));
        }
        self.postfix(true)
    }

    /// `map exp(x)`: the function argument of `op` was written as a call,
    /// which took the array in its parentheses and left `op` short of
    /// arguments (`k` of them given).
    fn call_as_function(&self, op: ArrayOp, f: &Expr, k: usize) -> Option<SyntaxError> {
        let (name, args) = match &f.kind {
            ExprKind::Prim(p, args) if p.info().fixity == Fixity::Call => (p.info().name, args),
            ExprKind::Apply(g, args) => match &g.kind {
                ExprKind::Var(n) => (&**n, args),
                _ => return None,
            },
            _ => return None,
        };
        if k != 0 || args.len() != op.arity() {
            return None;
        }
        let args: Vec<&str> = args.iter().map(|a| self.snippet(a.span)).collect();
        Some(SyntaxError::Invalid {
            message: format!(
                "`{}` takes a function and then its arguments, each on its own: `{name}({})` applies `{name}` here; write `{} {name} {}`",
                op.name(),
                args.join(", "),
                op.name(),
                args.join(" ")
            ),
            span: f.span,
        })
    }

    /// Whether the tokens from the current position are lambda binders and
    /// a `.` outside any parentheses they open: `v.`, `a, b.`,
    /// `(a, b), c.` — but not `(x. e)`, a lambda in parentheses.
    fn lambda_binders_ahead(&self) -> bool {
        let mut q = self.pos;
        let mut seen_name = false;
        let mut depth = 0usize;
        loop {
            match &self.toks[q].tok {
                Tok::Ident(s) if !is_keyword(s) => seen_name = true,
                Tok::Punct("(") => depth += 1,
                Tok::Punct(")") if depth > 0 => depth -= 1,
                Tok::Punct("," | "_") => {}
                Tok::Punct(".") => return seen_name && depth == 0,
                _ => return false,
            }
            q += 1;
        }
    }

    /// A juxtaposed argument of an array operation: a postfix expression
    /// whose calls and indexes touch their operand.
    fn argument(&mut self, what: &str) -> PResult<Expr> {
        if self.starts_atom() {
            self.postfix(false)
        } else {
            self.expected(what)
        }
    }

    fn starts_atom(&self) -> bool {
        match self.peek() {
            Tok::Number(_) => true,
            Tok::Punct(p) => matches!(*p, "(" | "["),
            Tok::Ident(s) => {
                !is_keyword(s)
                    || matches!(
                        s.as_str(),
                        "inf"
                            | "nan"
                            | "len"
                            | "iota"
                            | "replicate"
                            | "concat"
                            | "take"
                            | "drop"
                            | "zip"
                            | "gather"
                            | "reduce_by_index"
                            | "transpose"
                            | "matmul"
                    )
                    || Derivative::from_name(s).is_some()
            }
            _ => false,
        }
    }

    fn postfix(&mut self, spaced_ok: bool) -> PResult<Expr> {
        let e = self.atom()?;
        self.postfix_from(e, spaced_ok)
    }

    fn postfix_from(&mut self, mut e: Expr, spaced_ok: bool) -> PResult<Expr> {
        loop {
            let touching = spaced_ok || !self.token().spaced;
            if self.is_punct("(") && touching {
                if let ExprKind::Var(name) = &e.kind {
                    let section = matches!(
                        (self.peek_at(1), self.peek_at(2)),
                        (Tok::Punct(op), Tok::Punct(")")) if Prim::from_section(op).is_some()
                    );
                    let lambda = matches!(self.peek_at(1), Tok::Ident(_) | Tok::Punct("(" | "_"))
                        && {
                            let save = self.pos;
                            self.pos += 1;
                            let yes = self.lambda_binders_ahead();
                            self.pos = save;
                            yes
                        };
                    if section || lambda {
                        return Err(self.lambda_in_call(name, e.span));
                    }
                }
                let args = self.call_args()?;
                let span = e.span.to(self.prev_span());
                e = match e.kind {
                    // `exp (x)` or `(exp)(x)` is `exp(x)`: one form, which
                    // prints back to text that reads the same.
                    ExprKind::PrimFn(p) if p.info().fixity == Fixity::Call => {
                        if args.len() != p.info().arity {
                            return Err(arity_error(
                                p.info().name,
                                p.info().arity,
                                args.len(),
                                span,
                            ));
                        }
                        Expr::new(ExprKind::Prim(p, args), span)
                    }
                    _ => Expr::new(ExprKind::Apply(Box::new(e), args), span),
                };
            } else if self.is_punct("[") && touching {
                self.bump();
                let index = self.expr()?;
                self.expect_punct("]")?;
                let span = e.span.to(self.prev_span());
                // A literal index (`A[2]`, `A[-1]`) is the constant form;
                // anything else is computed when the program runs.
                let kind = match index.kind {
                    ExprKind::Literal(k) => ExprKind::Index(Box::new(e), k),
                    ExprKind::Const(c) if c == 0.0 && c.is_sign_negative() => {
                        ExprKind::Index(Box::new(e), 0)
                    }
                    _ => ExprKind::Builtin(Builtin::Get, vec![e, index]),
                };
                e = Expr::new(kind, span);
            } else if let Tok::ProjIndex(k) = *self.peek() {
                let span = e.span.to(self.bump().span);
                e = Expr::new(ExprKind::Proj(Box::new(e), k), span);
            } else {
                return Ok(e);
            }
        }
    }

    /// `name (v. …)`: a lambda passed to something that is not an array
    /// operation, most likely a misspelt one.
    fn lambda_in_call(&self, name: &str, span: Span) -> SyntaxError {
        let message = match crate::suggest::closest(name, ARRAY_OPS) {
            Some(op) => format!(
                "`{name}` is not an array operation; did you mean `{op}`? (a lambda `(x. …)` or a section `(+)` is the function argument of {})",
                ARRAY_OPS.map(|o| format!("`{o}`")).join(", ")
            ),
            None => format!(
                "`{name}` is given a lambda `(x. …)` or a section `(+)`, which only an array operation ({}) takes; a function value elsewhere is written `fun (x: R) -> …`",
                ARRAY_OPS.map(|o| format!("`{o}`")).join(", ")
            ),
        };
        SyntaxError::Invalid { message, span }
    }

    fn call_args(&mut self) -> PResult<Vec<Expr>> {
        self.expect_punct("(")?;
        let mut args = Vec::new();
        if !self.is_punct(")") {
            loop {
                args.push(self.expr()?);
                if !self.eat_punct(",") {
                    break;
                }
            }
        }
        self.expect_punct(")")?;
        Ok(args)
    }

    fn atom(&mut self) -> PResult<Expr> {
        let start = self.span();
        match self.peek().clone() {
            Tok::Number(s) => {
                self.bump();
                // Written without a decimal point or an exponent: an integer
                // literal, which the type checker reads as a real unless an
                // integer is needed.
                if s.bytes().all(|b| b.is_ascii_digit()) {
                    if let Ok(k) = s.parse::<i64>() {
                        return Ok(Expr::new(ExprKind::Literal(k), start));
                    }
                }
                let v: f64 = s.parse().map_err(|_| SyntaxError::Invalid {
                    message: format!("`{s}` is not a number"),
                    span: start,
                })?;
                Ok(Expr::new(ExprKind::Const(v), start))
            }
            Tok::Ident(s) => self.atom_ident(&s, start),
            Tok::Punct("(") => self.paren(),
            Tok::Punct("[") => {
                self.bump();
                let mut elems = Vec::new();
                if !self.is_punct("]") {
                    loop {
                        elems.push(self.expr()?);
                        if !self.eat_punct(",") {
                            break;
                        }
                    }
                }
                let end = self.expect_punct("]")?;
                Ok(Expr::new(ExprKind::ArrayLit(elems), start.to(end)))
            }
            _ => self.expected("an expression"),
        }
    }

    fn atom_ident(&mut self, s: &str, start: Span) -> PResult<Expr> {
        match s {
            "inf" => {
                self.bump();
                return Ok(Expr::new(ExprKind::Const(f64::INFINITY), start));
            }
            "nan" => {
                self.bump();
                return Ok(Expr::new(ExprKind::Const(f64::NAN), start));
            }
            _ => {}
        }
        let builtin = match s {
            "len" => Some(Builtin::Len),
            "iota" => Some(Builtin::Iota),
            "replicate" => Some(Builtin::Replicate),
            "concat" => Some(Builtin::Concat),
            "take" => Some(Builtin::Take),
            "drop" => Some(Builtin::Drop),
            "gather" => Some(Builtin::Gather),
            _ => None,
        };
        if s == "transpose" {
            // The count of columns is added by the type checker.
            self.bump();
            if !self.is_punct("(") {
                return self.expected("`(` after `transpose`");
            }
            let args = self.call_args()?;
            let span = start.to(self.prev_span());
            if args.len() != 1 {
                return Err(arity_error("transpose", 1, args.len(), span));
            }
            return Ok(Expr::new(ExprKind::Builtin(Builtin::Transpose, args), span));
        }
        if s == "matmul" {
            // The count of the result's columns is added by the type checker.
            self.bump();
            if !self.is_punct("(") {
                return self.expected("`(` after `matmul`");
            }
            let args = self.call_args()?;
            let span = start.to(self.prev_span());
            if args.len() != 2 {
                return Err(arity_error("matmul", 2, args.len(), span));
            }
            return Ok(Expr::new(ExprKind::Builtin(Builtin::MatMul, args), span));
        }
        if s == "reduce_by_index" {
            return self.reduce_by_index(start);
        }
        if let Some(d) = Derivative::from_name(s) {
            return self.derivative(d, start);
        }
        if s == "zip" {
            self.bump();
            if !self.is_punct("(") {
                return self.expected("`(` after `zip`");
            }
            let args = self.call_args()?;
            let span = start.to(self.prev_span());
            if args.len() < 2 {
                return Err(SyntaxError::Invalid {
                    message: format!("`zip` takes two arrays or more, found {}", args.len()),
                    span,
                });
            }
            return Ok(crate::sugar::zip(args, span));
        }
        if let Some(b) = builtin {
            self.bump();
            if !self.is_punct("(") {
                return self.expected(&format!("`(` after `{}`", b.name()));
            }
            let args = self.call_args()?;
            let span = start.to(self.prev_span());
            if args.len() != b.arity() {
                return Err(arity_error(b.name(), b.arity(), args.len(), span));
            }
            return Ok(Expr::new(ExprKind::Builtin(b, args), span));
        }
        if let Some(message) = unsupported_construct(s) {
            return Err(SyntaxError::Invalid {
                message: message.to_string(),
                span: start,
            });
        }
        if is_keyword(s) {
            return self.expected("an expression");
        }
        self.bump();
        if let Some(p) = Prim::from_call_name(s) {
            if self.is_punct("(") && !self.token().spaced {
                let mut args = self.call_args()?;
                let span = start.to(self.prev_span());
                if matches!(p, Prim::Max | Prim::Min) && args.len() == 1 {
                    // `max(A)`: the greatest element.
                    let array = args.pop().expect("one argument");
                    return Ok(crate::sugar::extremum(p, array, span));
                }
                if args.len() != p.info().arity {
                    return Err(arity_error(s, p.info().arity, args.len(), span));
                }
                return Ok(Expr::new(ExprKind::Prim(p, args), span));
            }
            return Ok(Expr::new(ExprKind::PrimFn(p), start));
        }
        Ok(Expr::new(ExprKind::Var(Name::from(s)), start))
    }

    /// `grad(F, a₁, …)` and the other derivative operators: the function,
    /// then its arguments (how many depends on the operator).
    fn derivative(&mut self, d: Derivative, start: Span) -> PResult<Expr> {
        self.bump();
        if !self.is_punct("(") {
            return self.expected(&format!("`(` after `{}`", d.name()));
        }
        let mut args = self.call_args()?;
        let span = start.to(self.prev_span());
        if args.is_empty() || d.fn_arity(args.len() - 1).is_none() {
            return Err(SyntaxError::Invalid {
                message: format!(
                    "`{}` takes {}; found {} argument{}",
                    d.name(),
                    d.usage(),
                    args.len(),
                    if args.len() == 1 { "" } else { "s" }
                ),
                span,
            });
        }
        let f = args.remove(0);
        Ok(Expr::new(ExprKind::Derive(d, Box::new(f), args), span))
    }

    /// `reduce_by_index(dest, (op), idx, vals)`, `op` one of `+ * min max`.
    fn reduce_by_index(&mut self, start: Span) -> PResult<Expr> {
        self.bump();
        if !self.is_punct("(") {
            return self.expected("`(` after `reduce_by_index`");
        }
        let mut args = self.call_args()?;
        let span = start.to(self.prev_span());
        if args.len() != 4 {
            return Err(arity_error("reduce_by_index", 4, args.len(), span));
        }
        let op = match args[1].kind {
            ExprKind::PrimFn(p) if Builtin::histogram_operator(p) => p,
            _ => {
                return Err(SyntaxError::Invalid {
                    message:
                        "the operator of `reduce_by_index` is one of `(+)`, `(*)`, `min`, `max`"
                            .to_string(),
                    span: args[1].span,
                })
            }
        };
        args.remove(1);
        Ok(Expr::new(
            ExprKind::Builtin(Builtin::ReduceByIndex(op), args),
            span,
        ))
    }

    /// `(`: unit, operator section, lambda, parenthesised expression or tuple.
    fn paren(&mut self) -> PResult<Expr> {
        let start = self.bump().span;
        if self.is_punct(")") {
            let end = self.bump().span;
            return Ok(Expr::new(ExprKind::Tuple(vec![]), start.to(end)));
        }
        if let (Tok::Punct(op), Tok::Punct(")")) = (self.peek().clone(), self.peek_at(1).clone()) {
            if let Some(p) = Prim::from_section(op) {
                self.bump();
                let end = self.bump().span;
                return Ok(Expr::new(ExprKind::PrimFn(p), start.to(end)));
            }
        }
        if let Some(params) = self.try_lambda_params()? {
            let body = self.expr()?;
            let end = self.expect_punct(")")?;
            let params = params
                .into_iter()
                .map(|pat| Param { pat, ty: None })
                .collect();
            return Ok(Expr::new(
                ExprKind::Lambda(params, body.into()),
                start.to(end),
            ));
        }
        let first = self.expr()?;
        if self.eat_punct(",") {
            let mut elems = vec![first];
            loop {
                elems.push(self.expr()?);
                if !self.eat_punct(",") {
                    break;
                }
            }
            let end = self.expect_punct(")")?;
            return Ok(Expr::new(ExprKind::Tuple(elems), start.to(end)));
        }
        self.expect_punct(")")?;
        Ok(first)
    }

    /// `p1, ..., pk .` at the current position, consumed on success; on
    /// failure nothing is consumed. Binders that would rebind a primitive
    /// (`(log. e)`) are an error, not a reason to read something else.
    fn try_lambda_params(&mut self) -> PResult<Option<Vec<Pattern>>> {
        // Lambda binders are names, `_`, commas and parentheses followed by
        // `.`. Find the first other token; every position up to it finds
        // the same one, so the scan is remembered and a run of k opening
        // parentheses costs O(k), not O(k²).
        let end = match self.binder_scan {
            Some((from, to)) if from <= self.pos && self.pos < to => to,
            _ => {
                let mut q = self.pos;
                while match &self.toks[q].tok {
                    Tok::Ident(s) => !is_keyword(s),
                    Tok::Punct(p) => matches!(*p, "(" | ")" | "," | "_"),
                    _ => false,
                } {
                    q += 1;
                }
                self.binder_scan = Some((self.pos, q));
                q
            }
        };
        if self.toks[end].tok != Tok::Punct(".") {
            return Ok(None);
        }
        let save = self.pos;
        let mut params = Vec::new();
        loop {
            match self.pattern() {
                Ok(p) => params.push(p),
                Err(e @ SyntaxError::Invalid { .. }) => return Err(e),
                Err(_) => {
                    self.pos = save;
                    return Ok(None);
                }
            }
            if !self.eat_punct(",") {
                break;
            }
        }
        if self.eat_punct(".") {
            Ok(Some(params))
        } else {
            self.pos = save;
            Ok(None)
        }
    }
}

/// The array operations a Source program can name.
const ARRAY_OPS: [&str; 6] = ["map", "map2", "reduce", "foldl", "scanl", "scanr"];

/// What to write instead of a construct of other languages (each word is
/// reserved, [`crate::lexer::KEYWORDS`]).
fn unsupported_construct(word: &str) -> Option<&'static str> {
    Some(match word {
        "do" => "`do` belongs to a loop: `loop x = start while condition do step`",
        "for" => "there is no `for` loop: map over the elements (`map (x. …) A`) or fold over a range (`foldl (acc, i. …) start (iota(n))`)",
        "return" => "there is no `return`: the value of a definition is its body",
        _ => return None,
    })
}

fn arity_error(name: &str, want: usize, got: usize, span: Span) -> SyntaxError {
    SyntaxError::Invalid {
        message: crate::span::arity_message(&format!("`{name}`"), want, got),
        span,
    }
}
