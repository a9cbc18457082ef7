//! Inlining: a definition of a checked module → one closed Source term.
//!
//! Input: a type-checked module and one of its definitions. Output: a
//! [`Closed`] term whose only free variables are the definition's
//! parameters and size variables, in which
//! - every call of an earlier definition is replaced by its body, the
//!   callee's value parameters bound by `let`s to the arguments (call by
//!   value, left to right) and its size variables replaced by the caller's
//!   sizes (the instantiation the type checker recorded for the call);
//! - the function argument of every array operation is a lambda: `(+)`
//!   becomes `(a, b. a + b)`, `exp` becomes `(a. exp(a))`, a definition's
//!   name becomes a lambda whose body is the inlined call;
//! - every binder has a name used nowhere else in the term, so later passes
//!   substitute without capture.
//!
//! The result type-checks with the definition's parameter types (the
//! verifier checks this after the pass). Let chains are walked by a loop and
//! every other recursion goes through `deep::guard`, so inlining is linear
//! in the size of the output and safe on deep terms.

use crate::names::NameSupply;
use gradlift_lang::build;
use gradlift_lang::deep::guard;
use gradlift_lang::scope::Scope;
use gradlift_lang::syntax::*;
use gradlift_lang::{CheckedModule, Span};
use std::collections::HashMap;
use std::sync::Arc;

/// One definition as a closed term.
#[derive(Clone, Debug)]
pub struct Closed {
    /// The definition's name.
    pub name: Name,
    /// Its parameters: name and type, `None` for a size parameter.
    pub params: Vec<(Name, Option<Type>)>,
    /// Its size variables (size parameters included).
    pub size_vars: Vec<Name>,
    /// Its result type.
    pub ret: Type,
    /// The body.
    pub body: Expr,
}

impl Closed {
    /// The value parameters with their types (size variables are not in
    /// it: they are not differentiated).
    pub fn context(&self) -> Vec<(Name, Type)> {
        let mut ctx: Vec<(Name, Type)> = Vec::new();
        for (n, t) in &self.params {
            if let Some(t) = t {
                ctx.push((n.clone(), t.clone()));
            }
        }
        ctx
    }
}

/// Inlines definition `index` of `module`.
pub fn inline(module: &CheckedModule, index: usize) -> Closed {
    let def = &module.module.defs[index];
    let sig = &module.sigs[index];
    let mut names = NameSupply::new();
    for v in &sig.size_vars {
        names.reserve(v);
    }
    for (p, _) in &sig.params {
        names.reserve(p);
    }
    let mut inliner = Inliner {
        module,
        names,
        renames: Scope::new(),
    };
    // The definition's own names stand for themselves.
    for (p, _) in &sig.params {
        inliner.renames.push(p.clone(), p.clone());
    }
    let frame = Frame {
        def: index,
        sizes: HashMap::new(),
    };
    let body = inliner.expr(&def.body, &frame);
    Closed {
        name: def.name.clone(),
        params: sig.params.clone(),
        size_vars: sig.size_vars.clone(),
        ret: sig.ret.clone(),
        body,
    }
}

/// The definition being inlined and its size variables in terms of the
/// top-level definition's sizes (empty for the top level itself).
struct Frame {
    def: usize,
    sizes: HashMap<Name, Size>,
}

impl Frame {
    fn size(&self, s: &Size) -> Size {
        s.substitute(&|v| self.sizes.get(v).cloned())
    }

    fn ty(&self, t: &Type) -> Type {
        t.substitute(&|v| self.sizes.get(v).cloned())
    }
}

struct Inliner<'m> {
    module: &'m CheckedModule,
    names: NameSupply,
    /// Source name → name in the output.
    renames: Scope<Name>,
}

impl Inliner<'_> {
    fn bind(&mut self, pat: &Pattern) -> Pattern {
        match pat {
            Pattern::Var(n, s) => {
                let fresh = self.names.fresh(n);
                self.renames.push(n.clone(), fresh.clone());
                Pattern::Var(fresh, *s)
            }
            Pattern::Wild(s) => Pattern::Wild(*s),
            Pattern::Tuple(ps, s) => Pattern::Tuple(ps.iter().map(|p| self.bind(p)).collect(), *s),
        }
    }

    fn def_named(&self, n: &str) -> Option<usize> {
        if self.renames.get(n).is_some() {
            return None;
        }
        self.module.index_of(n)
    }

    fn expr(&mut self, e: &Expr, frame: &Frame) -> Expr {
        guard(|| self.expr_inner(e, frame))
    }

    fn expr_inner(&mut self, e: &Expr, frame: &Frame) -> Expr {
        let span = e.span;
        let kind = match &e.kind {
            ExprKind::Var(n) => {
                if let Some(r) = self.renames.get(n) {
                    ExprKind::Var(r.clone())
                } else if let Some(s) = frame.sizes.get(n) {
                    return build::size(s);
                } else {
                    // A size variable of the top-level definition.
                    ExprKind::Var(n.clone())
                }
            }
            ExprKind::Let { .. } => return self.let_chain(e, frame),
            ExprKind::Lambda(params, body) => {
                let mark = self.renames.mark();
                let params = params
                    .iter()
                    .map(|p| Param {
                        pat: self.bind(&p.pat),
                        ty: p.ty.as_ref().map(|t| frame.ty(t)),
                    })
                    .collect();
                let body = self.expr(body, frame);
                self.renames.pop_to(mark);
                ExprKind::Lambda(params, Arc::new(body))
            }
            ExprKind::Apply(f, args) => {
                let args: Vec<Expr> = args.iter().map(|a| self.expr(a, frame)).collect();
                if let ExprKind::Var(n) = &f.kind {
                    if let Some(callee) = self.def_named(n) {
                        return self.call(callee, span, args, frame);
                    }
                }
                ExprKind::Apply(Box::new(self.expr(f, frame)), args)
            }
            ExprKind::ArrayOp(op, f, args) => {
                let f = self.function(f, op.fn_arity(), frame);
                let args = args.iter().map(|a| self.expr(a, frame)).collect();
                ExprKind::ArrayOp(*op, Box::new(f), args)
            }
            ExprKind::Const(_) | ExprKind::PrimFn(_) => e.kind.clone(),
            ExprKind::Prim(p, args) => ExprKind::Prim(*p, self.all(args, frame)),
            ExprKind::Tuple(es) => ExprKind::Tuple(self.all(es, frame)),
            ExprKind::ArrayLit(es) => ExprKind::ArrayLit(self.all(es, frame)),
            ExprKind::Builtin(b, es) => ExprKind::Builtin(*b, self.all(es, frame)),
            ExprKind::Proj(x, k) => ExprKind::Proj(Box::new(self.expr(x, frame)), *k),
            ExprKind::Index(x, k) => ExprKind::Index(Box::new(self.expr(x, frame)), *k),
            ExprKind::If(c, t, f) => ExprKind::If(
                Box::new(self.expr(c, frame)),
                Box::new(self.expr(t, frame)),
                Box::new(self.expr(f, frame)),
            ),
        };
        Expr::new(kind, span)
    }

    fn all(&mut self, es: &[Expr], frame: &Frame) -> Vec<Expr> {
        es.iter().map(|x| self.expr(x, frame)).collect()
    }

    fn let_chain(&mut self, mut e: &Expr, frame: &Frame) -> Expr {
        let mark = self.renames.mark();
        let mut bindings = Vec::new();
        while let ExprKind::Let {
            pat,
            ty,
            value,
            body,
        } = &e.kind
        {
            let value = self.expr(value, frame);
            let pat = self.bind(pat);
            bindings.push((e.span, pat, ty.as_ref().map(|t| frame.ty(t)), value));
            e = body;
        }
        let mut out = self.expr(e, frame);
        self.renames.pop_to(mark);
        while let Some((span, pat, ty, value)) = bindings.pop() {
            out = Expr::new(
                ExprKind::Let {
                    pat,
                    ty,
                    value: Box::new(value),
                    body: Box::new(out),
                },
                span,
            );
        }
        out
    }

    /// The body of definition `callee` applied to `args` (already inlined),
    /// for the call at `span` in the definition of `frame`.
    fn call(&mut self, callee: usize, span: Span, args: Vec<Expr>, frame: &Frame) -> Expr {
        let inst = self.module.calls[frame.def]
            .get(&span)
            .unwrap_or_else(|| panic!("the type checker records every call (at {span:?})"));
        let sizes: HashMap<Name, Size> = inst
            .iter()
            .map(|(v, s)| (v.clone(), frame.size(s)))
            .collect();
        let callee_frame = Frame { def: callee, sizes };
        let sig = &self.module.sigs[callee];
        // The callee sees only its own parameters.
        let outer = std::mem::take(&mut self.renames);
        let mut lets = Vec::new();
        for ((pname, pty), arg) in sig.params.iter().zip(args) {
            if pty.is_some() {
                let fresh = self.names.fresh(pname);
                self.renames.push(pname.clone(), fresh.clone());
                lets.push((fresh, arg));
            }
        }
        let mut out = self.expr(&self.module.module.defs[callee].body, &callee_frame);
        self.renames = outer;
        while let Some((n, arg)) = lets.pop() {
            out = build::let_in(build::pvar(&n), arg, out);
        }
        out
    }

    /// The function argument of an array operation, as a lambda.
    fn function(&mut self, f: &Expr, arity: usize, frame: &Frame) -> Expr {
        match &f.kind {
            ExprKind::Lambda(..) => self.expr(f, frame),
            ExprKind::PrimFn(p) => {
                let params: Vec<Name> = ["a", "b"][..arity]
                    .iter()
                    .map(|b| self.names.fresh(b))
                    .collect();
                let args = params.iter().map(build::var).collect();
                let body = build::prim(*p, args);
                build::lambda(params.iter().map(build::pvar).collect(), body)
            }
            ExprKind::Var(n) if self.def_named(n).is_some() => {
                let callee = self.def_named(n).expect("checked");
                let params: Vec<Name> = ["a", "b"][..arity]
                    .iter()
                    .map(|b| self.names.fresh(b))
                    .collect();
                let args = params.iter().map(build::var).collect();
                let body = self.call(callee, f.span, args, frame);
                build::lambda(params.iter().map(build::pvar).collect(), body)
            }
            _ => self.expr(f, frame),
        }
    }
}
