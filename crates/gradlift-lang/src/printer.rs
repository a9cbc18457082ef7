//! The printer: [`Module`], [`Expr`] and [`Type`] → text that
//! [`crate::parser`] reads back to the same tree (spans aside).
//!
//! Parentheses are inserted from the precedence levels of the parser; `let`
//! chains are printed one binding per line by a loop, the rest recursively
//! under [`crate::deep::guard`].

use crate::deep::guard;
use crate::prim::{prec, Fixity, Prim, PrimKind};
use crate::syntax::*;
use std::fmt::{self, Write};

/// Level of `let`, `if`, `fun`: they extend as far right as possible.
const LEVEL_OPEN: u8 = 0;
/// Level of an array operation applied to juxtaposed arguments.
const LEVEL_APP: u8 = 8;
/// Level of atoms and postfix forms.
const LEVEL_POSTFIX: u8 = 9;

/// Formats a real so that the lexer reads it back bit for bit
/// (`nan` loses its payload).
pub fn format_real(v: f64) -> String {
    if v.is_nan() {
        "nan".into()
    } else if v == f64::INFINITY {
        "inf".into()
    } else if v == f64::NEG_INFINITY {
        "-inf".into()
    } else {
        format!("{v:?}")
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Real => f.write_str("R"),
            Type::Int => f.write_str("Z"),
            Type::Bool => f.write_str("bool"),
            Type::Tuple(ts) => {
                f.write_str("(")?;
                for (i, t) in ts.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{t}")?;
                }
                f.write_str(")")
            }
            Type::Array(t, n) => write!(f, "[{t}; {n}]"),
            Type::Fun(ps, r) => {
                write!(f, "{}", Type::Tuple(ps.clone()))?;
                write!(f, " -> {r}")
            }
        }
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pattern::Var(n, _) => f.write_str(n),
            Pattern::Wild(_) => f.write_str("_"),
            Pattern::Tuple(ps, _) => {
                f.write_str("(")?;
                for (i, p) in ps.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{p}")?;
                }
                f.write_str(")")
            }
        }
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut p = Printer {
            out: String::new(),
            indent: 0,
        };
        p.expr(self, LEVEL_OPEN);
        f.write_str(&p.out)
    }
}

impl fmt::Display for Def {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "def {}(", self.name)?;
        for (i, p) in self.params.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            match &p.ty {
                Some(t) => write!(f, "{}: {t}", p.name)?,
                None => write!(f, "{}: size", p.name)?,
            }
        }
        f.write_str(")")?;
        if let Some(r) = &self.ret {
            write!(f, " -> {r}")?;
        }
        let mut p = Printer {
            out: String::new(),
            indent: 1,
        };
        p.expr(&self.body, LEVEL_OPEN);
        write!(f, " =\n  {}\n", p.out)
    }
}

impl fmt::Display for Module {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.defs.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

struct Printer {
    out: String,
    indent: usize,
}

fn level(e: &Expr) -> u8 {
    match &e.kind {
        ExprKind::Let { .. } | ExprKind::If(..) => LEVEL_OPEN,
        ExprKind::Lambda(ps, _) if ps.iter().any(|p| p.ty.is_some()) => LEVEL_OPEN,
        ExprKind::Prim(p, _) => match p.info().fixity {
            Fixity::Infix(l) => l,
            Fixity::Prefix if *p == Prim::Not => prec::NOT,
            Fixity::Prefix => prec::NEG,
            Fixity::Call => LEVEL_POSTFIX,
        },
        ExprKind::Const(c) if c.is_sign_negative() && !c.is_nan() => prec::NEG,
        ExprKind::Literal(k) if *k < 0 => prec::NEG,
        ExprKind::ArrayOp(..) => LEVEL_APP,
        ExprKind::Builtin(b, _) if b.is_juxtaposed() => LEVEL_APP,
        ExprKind::Proj(..) => LEVEL_POSTFIX,
        _ => LEVEL_POSTFIX,
    }
}

/// Whether the printed form of `e` (at postfix level) starts with a number,
/// so that a `-` written before it would be read as part of a literal.
fn starts_with_number(mut e: &Expr) -> bool {
    loop {
        match &e.kind {
            ExprKind::Const(c) => return !c.is_sign_negative() || c.is_nan(),
            ExprKind::Literal(k) => return *k >= 0,
            ExprKind::Proj(inner, _) | ExprKind::Index(inner, _) | ExprKind::Apply(inner, _) => {
                e = inner
            }
            ExprKind::Builtin(Builtin::Get, args) => e = &args[0],
            _ => return false,
        }
    }
}

impl Printer {
    fn newline(&mut self) {
        self.out.push('\n');
        for _ in 0..self.indent {
            self.out.push_str("  ");
        }
    }

    fn list(&mut self, es: &[Expr]) {
        for (i, e) in es.iter().enumerate() {
            if i > 0 {
                self.out.push_str(", ");
            }
            self.expr(e, LEVEL_OPEN);
        }
    }

    fn expr(&mut self, e: &Expr, ctx: u8) {
        guard(|| {
            if level(e) < ctx {
                self.out.push('(');
                self.indent += 1;
                self.expr_bare(e);
                self.indent -= 1;
                self.out.push(')');
            } else {
                self.expr_bare(e);
            }
        })
    }

    fn expr_bare(&mut self, e: &Expr) {
        match &e.kind {
            ExprKind::Const(c) => self.out.push_str(&format_real(*c)),
            // A literal is read back as an integer only where one is needed
            // (see `types.rs`); elsewhere it is written as a conversion.
            ExprKind::Int(k) => write!(self.out, "int({k})").expect("write to String"),
            ExprKind::Literal(k) => write!(self.out, "{k}").expect("write to String"),
            ExprKind::Var(n) => self.out.push_str(n),
            ExprKind::PrimFn(p) => match p.info().fixity {
                Fixity::Call => self.out.push_str(p.info().name),
                _ => write!(self.out, "({})", p.info().name).expect("write to String"),
            },
            ExprKind::Prim(p, args) => self.prim(*p, args),
            ExprKind::Let { .. } => self.let_chain(e),
            ExprKind::Tuple(es) => {
                self.out.push('(');
                self.list(es);
                self.out.push(')');
            }
            ExprKind::Proj(inner, k) => {
                self.expr(inner, LEVEL_POSTFIX);
                write!(self.out, ".{k}").expect("write to String");
            }
            ExprKind::ArrayLit(es) => {
                self.out.push('[');
                self.list(es);
                self.out.push(']');
            }
            ExprKind::Index(inner, k) => {
                self.expr(inner, LEVEL_POSTFIX);
                write!(self.out, "[{k}]").expect("write to String");
            }
            ExprKind::If(c, t, f) => {
                self.out.push_str("if ");
                self.expr(c, LEVEL_OPEN + 1);
                self.out.push_str(" then ");
                self.expr(t, LEVEL_OPEN + 1);
                self.out.push_str(" else ");
                self.expr(f, LEVEL_OPEN);
            }
            ExprKind::Lambda(params, body) => {
                if params.iter().any(|p| p.ty.is_some()) {
                    self.out.push_str("fun (");
                    for (i, p) in params.iter().enumerate() {
                        if i > 0 {
                            self.out.push_str(", ");
                        }
                        write!(self.out, "{}", p.pat).expect("write to String");
                        if let Some(t) = &p.ty {
                            write!(self.out, ": {t}").expect("write to String");
                        }
                    }
                    self.out.push_str(") -> ");
                    self.expr(body, LEVEL_OPEN);
                } else {
                    self.out.push('(');
                    for (i, p) in params.iter().enumerate() {
                        if i > 0 {
                            self.out.push_str(", ");
                        }
                        write!(self.out, "{}", p.pat).expect("write to String");
                    }
                    self.out.push_str(". ");
                    self.expr(body, LEVEL_OPEN);
                    self.out.push(')');
                }
            }
            ExprKind::Apply(f, args) => {
                self.expr(f, LEVEL_POSTFIX);
                self.out.push('(');
                self.args(args);
                self.out.push(')');
            }
            ExprKind::ArrayOp(op, f, args) => {
                if let Some(schedule) = op.schedule() {
                    self.out.push_str(&format!("@checkpoint({schedule}) "));
                }
                self.out.push_str(op.name());
                self.out.push(' ');
                self.expr(f, LEVEL_POSTFIX);
                for a in args {
                    self.out.push(' ');
                    self.expr(a, LEVEL_POSTFIX);
                }
            }
            ExprKind::Derive(d, f, args) => {
                self.out.push_str(d.name());
                self.out.push('(');
                self.expr(f, LEVEL_POSTFIX);
                for a in args {
                    self.out.push_str(", ");
                    self.expr(a, LEVEL_OPEN);
                }
                self.out.push(')');
            }
            ExprKind::Builtin(Builtin::Get, args) => {
                self.expr(&args[0], LEVEL_POSTFIX);
                self.out.push('[');
                self.args(&args[1..]);
                self.out.push(']');
            }
            ExprKind::Builtin(Builtin::ReduceByIndex(p), args) => {
                self.out.push_str("reduce_by_index(");
                self.expr(&args[0], LEVEL_OPEN);
                self.out.push_str(", ");
                self.expr_bare(&Expr::synth(ExprKind::PrimFn(*p)));
                self.out.push_str(", ");
                self.list(&args[1..]);
                self.out.push(')');
            }
            // The count of columns is the type's: not written.
            ExprKind::Builtin(Builtin::Transpose, args) => {
                self.out.push_str("transpose(");
                self.expr(args.last().expect("a matrix"), LEVEL_OPEN);
                self.out.push(')');
            }
            // The count of columns is the type's: not written.
            ExprKind::Builtin(Builtin::MatMul, args) => {
                self.out.push_str("matmul(");
                self.expr(&args[args.len() - 2], LEVEL_OPEN);
                self.out.push_str(", ");
                self.expr(&args[args.len() - 1], LEVEL_OPEN);
                self.out.push(')');
            }
            ExprKind::Builtin(b, args) => {
                self.out.push_str(b.name());
                if b.is_juxtaposed() {
                    self.out.push(' ');
                    self.expr(&args[0], LEVEL_POSTFIX);
                } else {
                    self.out.push('(');
                    // The count of `iota`, `replicate`, `take`, `drop`.
                    match b {
                        Builtin::Len | Builtin::Concat | Builtin::Gather => self.list(args),
                        _ => {
                            self.args(&args[..1]);
                            if args.len() > 1 {
                                self.out.push_str(", ");
                                self.list(&args[1..]);
                            }
                        }
                    }
                    self.out.push(')');
                }
            }
        }
    }

    fn prim(&mut self, p: Prim, args: &[Expr]) {
        let info = p.info();
        // An integer literal is written as digits where the parser and the
        // type checker read it back as an integer: beside an operand that is
        // not a literal, and as the argument of `real`.
        let is_int = |e: &Expr| matches!(e.kind, ExprKind::Int(_));
        let digits = match info.kind() {
            PrimKind::Int | PrimKind::IntCompare => !args.iter().all(is_int),
            PrimKind::ToReal => true,
            _ => false,
        };
        let arg = |this: &mut Printer, e: &Expr, ctx: u8| match e.kind {
            ExprKind::Int(k) if digits && k < 0 && ctx > prec::NEG => {
                write!(this.out, "({k})").expect("write to String")
            }
            ExprKind::Int(k) if digits => write!(this.out, "{k}").expect("write to String"),
            _ => this.expr(e, ctx),
        };
        match info.fixity {
            Fixity::Infix(l) => {
                // Comparisons do not associate; arithmetic associates left.
                let left = if l == prec::CMP { l + 1 } else { l };
                arg(self, &args[0], left);
                write!(self.out, " {} ", info.name).expect("write to String");
                arg(self, &args[1], l + 1);
            }
            Fixity::Prefix if p == Prim::Not => {
                self.out.push_str("not ");
                self.expr(&args[0], prec::NOT);
            }
            Fixity::Prefix => {
                self.out.push('-');
                if level(&args[0]) >= LEVEL_POSTFIX && starts_with_number(&args[0]) {
                    self.out.push('(');
                    self.expr_bare(&args[0]);
                    self.out.push(')');
                } else {
                    self.expr(&args[0], prec::NEG);
                }
            }
            Fixity::Call => {
                self.out.push_str(info.name);
                self.out.push('(');
                for (i, a) in args.iter().enumerate() {
                    if i > 0 {
                        self.out.push_str(", ");
                    }
                    arg(self, a, LEVEL_OPEN);
                }
                self.out.push(')');
            }
        }
    }

    /// Arguments of a call or a built-in: integer literals as digits (the
    /// type checker reads them back as integers where the parameter or the
    /// count is one).
    fn args(&mut self, es: &[Expr]) {
        for (i, e) in es.iter().enumerate() {
            if i > 0 {
                self.out.push_str(", ");
            }
            match e.kind {
                ExprKind::Int(k) => write!(self.out, "{k}").expect("write to String"),
                _ => self.expr(e, LEVEL_OPEN),
            }
        }
    }

    fn let_chain(&mut self, mut e: &Expr) {
        while let ExprKind::Let {
            pat,
            ty,
            value,
            body,
        } = &e.kind
        {
            write!(self.out, "let {pat}").expect("write to String");
            if let Some(t) = ty {
                write!(self.out, ": {t}").expect("write to String");
            }
            self.out.push_str(" = ");
            self.indent += 1;
            self.expr(value, LEVEL_OPEN);
            self.indent -= 1;
            self.out.push_str(" in");
            self.newline();
            e = body;
        }
        self.expr(e, LEVEL_OPEN);
    }
}
