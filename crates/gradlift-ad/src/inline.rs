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
//!   substitute without capture;
//! - a function value bound by `let` (`let g = fun (y: R) -> y * y in …`,
//!   `let h = exp in …`, through further `let`s) is not bound: each use is
//!   a copy of it with fresh binders — a call `g(x)` is β-reduced to
//!   `let y = x in y * y`, an array operation's argument `map g A` gets the
//!   lambda — and a lambda applied where it is written is β-reduced too.
//!   (A function's free variables keep their meaning: they were renamed
//!   where it was written, to names bound nowhere else.)
//!
//! Function values that are data — stored in a tuple, chosen by `if` —
//! are left as they are: the interpreter and the simplifier handle them,
//! differentiation does not, and [`first_order`] says so, pointing at the
//! text.
//!
//! The result type-checks with the definition's parameter types (the
//! verifier checks this after the pass). Let chains are walked by a loop and
//! every other recursion goes through `deep::guard`, so inlining is linear
//! in the size of the output and safe on deep terms.

use crate::direct::AdError;
use gradlift_lang::build;
pub use gradlift_lang::closed::Closed;
use gradlift_lang::deep::guard;
use gradlift_lang::names::NameSupply;
use gradlift_lang::scope::Scope;
use gradlift_lang::syntax::*;
use gradlift_lang::{CheckedModule, Span};
use std::collections::HashMap;
use std::sync::Arc;

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
        copying: false,
    };
    // The definition's own names stand for themselves.
    for (p, _) in &sig.params {
        inliner.renames.push(p.clone(), Bound::Name(p.clone()));
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
    /// Source name → what it stands for in the output.
    renames: Scope<Bound>,
    /// Copying an output term with fresh binders ([`Inliner::instance`]):
    /// its free names are output names, not definitions or sizes.
    copying: bool,
}

/// What a name of the input stands for.
#[derive(Clone, Debug)]
enum Bound {
    /// The output's variable of that name.
    Name(Name),
    /// A function value (an output lambda, or a primitive): each use is a
    /// fresh copy.
    Fun(Arc<Expr>),
}

/// Whether `e` (an output term) is a function value that uses may copy.
fn is_static_fun(e: &Expr) -> bool {
    matches!(e.kind, ExprKind::Lambda(..) | ExprKind::PrimFn(_))
}

impl Inliner<'_> {
    fn bind(&mut self, pat: &Pattern) -> Pattern {
        match pat {
            Pattern::Var(n, s) => {
                let fresh = self.names.fresh(n);
                self.renames.push(n.clone(), Bound::Name(fresh.clone()));
                Pattern::Var(fresh, *s)
            }
            Pattern::Wild(s) => Pattern::Wild(*s),
            Pattern::Tuple(ps, s) => Pattern::Tuple(ps.iter().map(|p| self.bind(p)).collect(), *s),
        }
    }

    fn def_named(&self, n: &str) -> Option<usize> {
        if self.copying || self.renames.get(n).is_some() {
            return None;
        }
        self.module.index_of(n)
    }

    /// A copy of the function value `f` (an output term) with fresh
    /// binders, at `span`.
    fn instance(&mut self, f: &Expr, span: Span) -> Expr {
        let outer = std::mem::take(&mut self.renames);
        let copying = std::mem::replace(&mut self.copying, true);
        let frame = Frame {
            def: usize::MAX,
            sizes: HashMap::new(),
        };
        let mut copy = self.expr(f, &frame);
        self.copying = copying;
        self.renames = outer;
        copy.span = span;
        copy
    }

    /// `f(args)` for a function value `f` written out (an output lambda
    /// with fresh binders, or a primitive): `let p₁ = a₁ in … body`.
    fn beta(&mut self, f: Expr, args: Vec<Expr>, span: Span) -> Expr {
        match f.kind {
            ExprKind::PrimFn(p) => Expr::new(ExprKind::Prim(p, args), span),
            ExprKind::Lambda(ref params, ref body) if params.len() == args.len() => {
                let mut out = Expr::clone(body);
                for (param, arg) in params.iter().zip(args).rev() {
                    out = Expr::new(
                        ExprKind::Let {
                            pat: param.pat.clone(),
                            ty: param.ty.clone(),
                            value: Box::new(arg),
                            body: Box::new(out),
                        },
                        span,
                    );
                }
                out
            }
            _ => Expr::new(ExprKind::Apply(Box::new(f), args), span),
        }
    }

    fn expr(&mut self, e: &Expr, frame: &Frame) -> Expr {
        guard(|| self.expr_inner(e, frame))
    }

    fn expr_inner(&mut self, e: &Expr, frame: &Frame) -> Expr {
        let span = e.span;
        let kind = match &e.kind {
            ExprKind::Var(n) => {
                if let Some(r) = self.renames.get(n) {
                    match r {
                        Bound::Name(r) => ExprKind::Var(r.clone()),
                        Bound::Fun(f) => {
                            let f = f.clone();
                            return self.instance(&f, span);
                        }
                    }
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
                let f = self.expr(f, frame);
                return self.beta(f, args, span);
            }
            ExprKind::ArrayOp(op, f, args) => {
                let f = self.function(f, op.fn_arity(), frame);
                let args = args.iter().map(|a| self.expr(a, frame)).collect();
                ExprKind::ArrayOp(*op, Box::new(f), args)
            }
            ExprKind::Derive(d, f, args) => {
                let arity = d.fn_arity(args.len()).expect("checked");
                let f = self.function(f, arity, frame);
                let args = self.all(args, frame);
                ExprKind::Derive(*d, Box::new(f), args)
            }
            ExprKind::Const(_) | ExprKind::Int(_) | ExprKind::Literal(_) | ExprKind::PrimFn(_) => {
                e.kind.clone()
            }
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
            let mut value = self.expr(value, frame);
            if let Pattern::Var(n, _) = pat {
                // A function value, maybe at the end of a `let` chain whose
                // bindings come first (their names are unique).
                let mut inner = Vec::new();
                while let ExprKind::Let { .. } = value.kind {
                    let ExprKind::Let {
                        pat,
                        ty,
                        value: v,
                        body,
                    } = std::mem::replace(&mut value.kind, ExprKind::Const(0.0))
                    else {
                        unreachable!("matched a let")
                    };
                    inner.push((value.span, pat, ty, *v));
                    value = *body;
                }
                if is_static_fun(&value) {
                    bindings.extend(inner);
                    self.renames.push(n.clone(), Bound::Fun(Arc::new(value)));
                    e = body;
                    continue;
                }
                while let Some((span, pat, ty, v)) = inner.pop() {
                    value = Expr::new(
                        ExprKind::Let {
                            pat,
                            ty,
                            value: Box::new(v),
                            body: Box::new(value),
                        },
                        span,
                    );
                }
            }
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
                self.renames.push(pname.clone(), Bound::Name(fresh.clone()));
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
            ExprKind::PrimFn(p) => self.eta(*p, arity),
            ExprKind::Var(n) if self.def_named(n).is_some() => {
                let callee = self.def_named(n).expect("checked");
                let params = self.parameters(arity);
                let args = params.iter().map(build::var).collect();
                let body = self.call(callee, f.span, args, frame);
                build::lambda(params.iter().map(build::pvar).collect(), body)
            }
            _ => match self.expr(f, frame) {
                // A `let`-bound primitive.
                Expr {
                    kind: ExprKind::PrimFn(p),
                    ..
                } => self.eta(p, arity),
                // A `let`-bound lambda: as the argument of an array
                // operation, its parameters' types are the elements'.
                Expr {
                    kind: ExprKind::Lambda(ref params, ref body),
                    span,
                } => Expr::new(
                    ExprKind::Lambda(
                        params
                            .iter()
                            .map(|p| Param {
                                pat: p.pat.clone(),
                                ty: None,
                            })
                            .collect(),
                        body.clone(),
                    ),
                    span,
                ),
                f => f,
            },
        }
    }

    /// `arity` fresh parameter names: `a`, `b`, then `a_1`, ….
    fn parameters(&mut self, arity: usize) -> Vec<Name> {
        (0..arity)
            .map(|i| self.names.fresh(["a", "b"].get(i).unwrap_or(&"a")))
            .collect()
    }

    /// `(a, b. p(a, b))`.
    fn eta(&mut self, p: gradlift_lang::Prim, arity: usize) -> Expr {
        let params = self.parameters(arity);
        let args = params.iter().map(build::var).collect();
        let body = build::prim(p, args);
        build::lambda(params.iter().map(build::pvar).collect(), body)
    }
}

/// Checks that an inlined term is first order, as differentiation needs:
/// every lambda and primitive used as a value is the function argument of
/// an array operation, and nothing else is applied. Inlining removes every
/// function value bound by `let` or applied where written; what remains is
/// a function stored in a tuple or an array, or chosen by `if`, and the
/// error points at it and says what to write instead.
pub fn first_order(body: &Expr) -> Result<(), AdError> {
    check_first_order(body, Parent::Other)
}

/// Where a term stands, for the messages of [`first_order`].
#[derive(Clone, Copy, PartialEq)]
enum Parent {
    /// The function argument of an array operation.
    OpFunction,
    /// A component of a tuple or an element of an array literal.
    Data,
    /// A branch of `if`.
    Branch,
    Other,
}

fn check_first_order(e: &Expr, parent: Parent) -> Result<(), AdError> {
    guard(|| {
        let refuse = |message: &str| {
            Err(AdError::FunctionValue {
                message: message.to_string(),
                span: e.span,
            })
        };
        match &e.kind {
            ExprKind::Lambda(_, body) => match parent {
                Parent::OpFunction => check_first_order(body, Parent::Other),
                Parent::Data => refuse(STORED),
                Parent::Branch => refuse(CHOSEN),
                Parent::Other => refuse(AS_VALUE),
            },
            ExprKind::PrimFn(_) => match parent {
                Parent::OpFunction => Ok(()),
                Parent::Data => refuse(STORED),
                Parent::Branch => refuse(CHOSEN),
                Parent::Other => refuse(AS_VALUE),
            },
            ExprKind::Apply(..) => refuse(UNKNOWN_CALL),
            ExprKind::Derive(d, ..) => Err(AdError::Derivative {
                message: format!(
                    "`{}` before its expansion: differentiate the program the `derivatives` pass makes (pipeline::expanded)",
                    d.name()
                ),
                span: e.span,
            }),
            ExprKind::ArrayOp(op, f, args) => {
                if !matches!(f.kind, ExprKind::Lambda(..)) {
                    return Err(AdError::FunctionValue {
                        message: UNKNOWN_CALL.to_string(),
                        span: f.span,
                    });
                }
                check_first_order(f, Parent::OpFunction)?;
                // The step of `revfold` and `revwhile` (a gradient a
                // derivative operator expanded) is a function too.
                let step = matches!(op, ArrayOp::Revfold(_) | ArrayOp::Revwhile(_));
                args.iter().enumerate().try_for_each(|(i, a)| {
                    let parent = if step && i == 0 {
                        Parent::OpFunction
                    } else {
                        Parent::Other
                    };
                    check_first_order(a, parent)
                })
            }
            ExprKind::Let { .. } => {
                let mut cur = e;
                while let ExprKind::Let { value, body, .. } = &cur.kind {
                    check_first_order(value, Parent::Other)?;
                    cur = body;
                }
                check_first_order(cur, Parent::Other)
            }
            ExprKind::Tuple(es) | ExprKind::ArrayLit(es) => es
                .iter()
                .try_for_each(|x| check_first_order(x, Parent::Data)),
            ExprKind::If(c, t, f) => {
                check_first_order(c, Parent::Other)?;
                check_first_order(t, Parent::Branch)?;
                check_first_order(f, Parent::Branch)
            }
            _ => e
                .children()
                .try_for_each(|c| check_first_order(c, Parent::Other)),
        }
    })
}

const STORED: &str = "gradlift cannot differentiate a function stored in a tuple or an array: \
bind it with `let` and call it, or pass it to `map`, `reduce`, … directly";
const CHOSEN: &str =
    "gradlift cannot differentiate a function chosen by `if`: call each function in \
its own branch instead (`if c then f(x) else g(x)`)";
const AS_VALUE: &str =
    "gradlift cannot differentiate a function used as a value here: call it, bind \
it with `let`, or pass it to an array operation";
const UNKNOWN_CALL: &str =
    "gradlift cannot differentiate a call of a function that is known only when \
the program runs (chosen by `if`, or taken from a tuple): call the function itself, \
in each branch";
