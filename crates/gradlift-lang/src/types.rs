//! The type checker: [`Module`] → [`CheckedModule`] (a signature per
//! definition), or a [`TypeError`] naming both types and pointing at the
//! expression at fault.
//!
//! Sizes are checked symbolically: a size is a [`Size`] (a linear
//! combination of size variables), `map2` demands equal sizes, and a call of
//! a definition instantiates the callee's size variables by matching its
//! parameter types against the argument types (`[R; n+1]` against `[R; m]`
//! gives `n = m-1`). The same checker runs on every printed stage of the
//! pipeline, Target terms included (lambdas outside array operations carry
//! parameter types; `Apply` of a function value).
//!
//! **Integers and reals.** Checking a module also *elaborates* it, so that
//! every later stage sees one meaning per node:
//! - a literal written without a decimal point or an exponent (`3`, `-1`;
//!   [`ExprKind::Literal`]) is a real unless an integer is
//!   needed where it stands — an operand of an integer operation, a count,
//!   an argument for a `Z` parameter, a `let` declared `Z` — where it stays
//!   an integer constant (`3.0` is always a real);
//! - `+ - * min max` and the comparisons of integers are the integer
//!   primitives ([`Prim::on_integers`]);
//! - an integer where a real is needed (an operand of a real operation, an
//!   argument for an `R` parameter) is converted: `real(i)`;
//! - `int(3)` of a literal is the integer constant;
//! - a call of a definition whose arguments have d more levels of arrays
//!   than its parameters (the others exactly their types) is the maps that
//!   apply it element by element, d levels deep ([`lift_call`]).
//!
//! Terms a pass builds are checked without elaboration ([`Typer`],
//! [`check_expr`]): there, an integer where a real is needed is an error.

use crate::deep::guard;
use crate::prim::{Prim, PrimKind};
use crate::scope::Scope;
use crate::span::{Span, Spanned};
use crate::syntax::*;
use std::collections::{BTreeSet, HashMap};
use thiserror::Error;

/// A type error.
#[derive(Debug, Clone, Error, PartialEq)]
pub enum TypeError {
    /// A name bound nowhere.
    #[error("unknown {what} `{name}`{}", match suggestion {
        Some(s) => format!("; did you mean `{s}`?"),
        None => String::new(),
    })]
    Unknown {
        /// "variable", "function", "size variable".
        what: &'static str,
        /// The name.
        name: Name,
        /// The closest name in scope or reserved word, if one is close.
        suggestion: Option<Name>,
        /// Where it is used.
        span: Span,
    },
    /// A type other than the one needed.
    #[error("{context}: expected `{expected}`, found `{found}`")]
    Mismatch {
        /// What was being checked.
        context: String,
        /// The type needed.
        expected: Box<Type>,
        /// The type found.
        found: Box<Type>,
        /// The expression at fault.
        span: Span,
    },
    /// Anything else.
    #[error("{message}")]
    Invalid {
        /// What is wrong.
        message: String,
        /// Where.
        span: Span,
    },
}

impl Spanned for TypeError {
    fn span(&self) -> Span {
        match self {
            TypeError::Unknown { span, .. }
            | TypeError::Mismatch { span, .. }
            | TypeError::Invalid { span, .. } => *span,
        }
    }
}

type TResult<T> = Result<T, TypeError>;

fn invalid<T>(message: impl Into<String>, span: Span) -> TResult<T> {
    Err(TypeError::Invalid {
        message: message.into(),
        span,
    })
}

fn mismatch<T>(
    context: impl Into<String>,
    expected: &Type,
    found: &Type,
    span: Span,
) -> TResult<T> {
    Err(TypeError::Mismatch {
        context: context.into(),
        expected: Box::new(expected.clone()),
        found: Box::new(found.clone()),
        span,
    })
}

/// The checked type of a definition.
#[derive(Clone, Debug, PartialEq)]
pub struct Signature {
    /// Parameter names and types (`None` for a size parameter).
    pub params: Vec<(Name, Option<Type>)>,
    /// The result type.
    pub ret: Type,
    /// The size variables the parameters bind, in order of appearance.
    pub size_vars: Vec<Name>,
}

/// A module whose definitions all type-check.
#[derive(Clone, Debug)]
pub struct CheckedModule {
    /// The definitions.
    pub module: Module,
    /// One signature per definition, in the same order.
    pub sigs: Vec<Signature>,
    /// Per definition, the size instantiation of each call of an earlier
    /// definition in its body, keyed by the span of the call (or of the
    /// definition's name where it is passed as a function): the callee's
    /// size variables in terms of the caller's sizes. Inlining uses it.
    pub calls: Vec<HashMap<Span, Instantiation>>,
}

/// The callee's size variables, each with the caller's size it stands for.
pub type Instantiation = Vec<(Name, Size)>;

impl CheckedModule {
    /// Index of the definition called `name`.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.module.defs.iter().position(|d| &*d.name == name)
    }
}

/// Type-checks every definition of `module`.
pub fn check_module(module: Module) -> TResult<CheckedModule> {
    let mut module = crate::sugar::with_library(module);
    distinct_call_spans(&mut module);
    let mut sigs: Vec<Signature> = Vec::new();
    let mut calls = Vec::new();
    let mut fixes = Vec::new();
    let mut seen: HashMap<Name, Span> = HashMap::new();
    for def in &module.defs {
        if seen.contains_key(&def.name) {
            return invalid(format!("`{}` is defined twice", def.name), def.name_span);
        }
        let (earlier, later) = module.defs.split_at(sigs.len());
        let (sig, def_calls, def_fixes) = check_def(earlier, later, &sigs, def)?;
        seen.insert(def.name.clone(), def.name_span);
        sigs.push(sig);
        calls.push(def_calls);
        fixes.push(def_fixes);
    }
    for (def, f) in module.defs.iter_mut().zip(&fixes) {
        if !f.is_empty() {
            def.body = elaborate(&def.body, f);
        }
    }
    Ok(CheckedModule {
        module,
        sigs,
        calls,
    })
}

/// The instantiation of each call is recorded by the call's span, so the
/// spans of calls must differ: they do in a module parsed from text; in
/// one built by a program (the test generator, a library user) they may
/// all be [`Span::DUMMY`]. Every call (an application, or a name as the
/// function argument of an array operation) whose span another call has
/// already is given a [`Span::synthetic`] one.
fn distinct_call_spans(module: &mut Module) {
    fn calls(e: &Expr, out: &mut Vec<Span>) {
        let mut stack = vec![e];
        while let Some(e) = stack.pop() {
            match &e.kind {
                ExprKind::Apply(..) => out.push(e.span),
                ExprKind::ArrayOp(_, f, _) | ExprKind::Derive(_, f, _)
                    if matches!(f.kind, ExprKind::Var(_)) =>
                {
                    out.push(f.span)
                }
                _ => {}
            }
            stack.extend(e.children());
        }
    }
    fn respan(e: &mut Expr, seen: &mut std::collections::HashSet<Span>, next: &mut u32) {
        guard(|| {
            let mut fresh = |span: &mut Span| {
                if !seen.insert(*span) {
                    *span = Span::synthetic(*next);
                    *next += 1;
                    seen.insert(*span);
                }
            };
            match &mut e.kind {
                ExprKind::Apply(..) => fresh(&mut e.span),
                ExprKind::ArrayOp(_, f, _) | ExprKind::Derive(_, f, _)
                    if matches!(f.kind, ExprKind::Var(_)) =>
                {
                    fresh(&mut f.span)
                }
                _ => {}
            }
            match &mut e.kind {
                ExprKind::Const(_)
                | ExprKind::Int(_)
                | ExprKind::Literal(_)
                | ExprKind::Var(_)
                | ExprKind::PrimFn(_) => {}
                ExprKind::Prim(_, xs)
                | ExprKind::Tuple(xs)
                | ExprKind::ArrayLit(xs)
                | ExprKind::Builtin(_, xs) => xs.iter_mut().for_each(|x| respan(x, seen, next)),
                ExprKind::Let { value, body, .. } => {
                    respan(value, seen, next);
                    respan(body, seen, next)
                }
                ExprKind::Proj(x, _) | ExprKind::Index(x, _) => respan(x, seen, next),
                ExprKind::If(c, t, f) => {
                    respan(c, seen, next);
                    respan(t, seen, next);
                    respan(f, seen, next)
                }
                ExprKind::Lambda(_, body) => respan(std::sync::Arc::make_mut(body), seen, next),
                ExprKind::Apply(f, xs)
                | ExprKind::ArrayOp(_, f, xs)
                | ExprKind::Derive(_, f, xs) => {
                    respan(f, seen, next);
                    xs.iter_mut().for_each(|x| respan(x, seen, next))
                }
            }
        })
    }
    for def in &mut module.defs {
        let mut spans = Vec::new();
        calls(&def.body, &mut spans);
        let mut seen = std::collections::HashSet::new();
        if spans.iter().all(|s| seen.insert(*s)) {
            continue;
        }
        let mut next = 0;
        respan(
            &mut def.body,
            &mut std::collections::HashSet::new(),
            &mut next,
        );
    }
}

/// An incremental type checker for single terms, for passes that need the
/// types of the subterms they build: variables are pushed and popped as the
/// pass enters and leaves their scope.
pub struct Typer {
    checker: Checker<'static>,
}

impl Typer {
    /// A typer with the given size variables in scope (as integers).
    pub fn new(size_vars: &[Name]) -> Typer {
        let mut checker = Checker {
            defs: &[],
            later: &[],
            sigs: &[],
            vars: Scope::new(),
            size_vars: size_vars.iter().cloned().collect(),
            calls: HashMap::new(),
            fixes: None,
            mapped: HashMap::new(),
        };
        for n in size_vars {
            checker.vars.push(
                n.clone(),
                VarInfo {
                    ty: Type::Int,
                    is_size: true,
                },
            );
        }
        Typer { checker }
    }

    /// Binds `name` to a value of type `ty`.
    pub fn push(&mut self, name: Name, ty: Type) {
        self.checker.vars.push(name, VarInfo { ty, is_size: false });
    }

    /// A mark for [`Typer::pop_to`].
    pub fn mark(&self) -> usize {
        self.checker.vars.mark()
    }

    /// Unbinds everything pushed since `mark`.
    pub fn pop_to(&mut self, mark: usize) {
        self.checker.vars.pop_to(mark)
    }

    /// The type of `e` in the current scope.
    pub fn infer(&mut self, e: &Expr) -> TResult<Type> {
        self.checker.infer(e)
    }

    /// The value of `e` read as a size expression (a count of `iota`,
    /// `replicate`, `take`, `drop`).
    pub fn size(&mut self, e: &Expr) -> TResult<Size> {
        self.checker.size_of(e, "a count")
    }

    /// The type of the variable `name`, if bound.
    pub fn lookup(&self, name: &str) -> Option<&Type> {
        self.checker.vars.get(name).map(|i| &i.ty)
    }
}

/// A term written by hand without a typing context (a test's term): every
/// literal whole number a real, except in integer
/// arithmetic that can be told from the text alone — a count (of `iota`,
/// `replicate`, `take`, `drop`), the argument of `real`, an operation on a
/// `len` — where it is an integer, with the integer operations.
/// [`elaborate_expr`] decides by the types instead, where they are known.
pub fn literals_as_reals(e: &Expr) -> Expr {
    fn count(e: &Expr) -> Expr {
        guard(|| match &e.kind {
            ExprKind::Literal(k) => Expr::new(ExprKind::Int(*k), e.span),
            ExprKind::Prim(p, args) => {
                let args = args.iter().map(count).collect();
                Expr::new(ExprKind::Prim(p.on_integers().unwrap_or(*p), args), e.span)
            }
            _ => literals_as_reals(e),
        })
    }
    let on_len = |args: &[Expr]| {
        args.iter()
            .any(|a| matches!(a.kind, ExprKind::Builtin(Builtin::Len, _)))
    };
    guard(|| match &e.kind {
        ExprKind::Literal(k) => Expr::new(ExprKind::Const(*k as f64), e.span),
        ExprKind::Prim(Prim::ToReal, _) => e.map_children(&mut |c| count(c)),
        ExprKind::Prim(p, args) if p.on_integers().is_some() && on_len(args) => count(e),
        ExprKind::Builtin(Builtin::Get, args) => Expr::new(
            ExprKind::Builtin(
                Builtin::Get,
                vec![literals_as_reals(&args[0]), count(&args[1])],
            ),
            e.span,
        ),
        ExprKind::Builtin(
            b @ (Builtin::Iota | Builtin::Replicate | Builtin::Take | Builtin::Drop),
            args,
        ) => {
            let mut out: Vec<Expr> = vec![count(&args[0])];
            out.extend(args[1..].iter().map(literals_as_reals));
            Expr::new(ExprKind::Builtin(*b, out), e.span)
        }
        _ => e.map_children(&mut |c| literals_as_reals(c)),
    })
}

/// Type-checks and elaborates one expression written by hand (parsed from
/// text, so its literal whole numbers are still to be decided) in a
/// context of typed variables and size variables: the term every later
/// stage can take, and its type.
pub fn elaborate_expr(
    vars: &[(Name, Type)],
    size_vars: &[Name],
    e: &Expr,
) -> TResult<(Expr, Type)> {
    let mut t = Typer::new(size_vars);
    t.checker.fixes = Some(HashMap::new());
    for (n, ty) in vars {
        t.checker.check_type_wf(ty, Span::DUMMY)?;
        t.push(n.clone(), ty.clone());
    }
    let ty = t.checker.value(e)?;
    let fixes = t.checker.fixes.take().unwrap_or_default();
    Ok((elaborate(e, &fixes), ty))
}

/// Type-checks one expression in a context of typed variables and size
/// variables (no definitions in scope). Used by the verifier on pipeline
/// stages that are single terms.
pub fn check_expr(vars: &[(Name, Type)], size_vars: &[Name], e: &Expr) -> TResult<Type> {
    let mut t = Typer::new(size_vars);
    for (n, ty) in vars {
        t.checker.check_type_wf(ty, Span::DUMMY)?;
        t.push(n.clone(), ty.clone());
    }
    t.checker.value(e)
}

/// A size in `t` beyond [`Size::LIMIT`].
fn oversized(t: &Type) -> Option<&Size> {
    match t {
        Type::Real | Type::Int | Type::Bool => None,
        Type::Tuple(ts) => ts.iter().find_map(oversized),
        Type::Array(t, n) => (!n.is_within_limit()).then_some(n).or_else(|| oversized(t)),
        Type::Fun(ps, r) => ps.iter().find_map(oversized).or_else(|| oversized(r)),
    }
}

/// The sizes of the arrays in `t`, outermost first.
fn array_sizes<'t>(t: &'t Type, out: &mut Vec<&'t Size>) {
    match t {
        Type::Real | Type::Int | Type::Bool | Type::Fun(..) => {}
        Type::Tuple(ts) => ts.iter().for_each(|t| array_sizes(t, out)),
        Type::Array(t, n) => {
            out.push(n);
            array_sizes(t, out)
        }
    }
}

/// The first size variable of the parameters that the argument lengths do
/// not determine: each must be reachable through a size `±v + (sizes
/// already known)`, as [`crate::value::bind_sizes`] solves them.
fn undetermined_size_var(params: &[DefParam]) -> Option<(Name, Span)> {
    let mut known: BTreeSet<Name> = params
        .iter()
        .filter(|p| p.ty.is_none())
        .map(|p| p.name.clone())
        .collect();
    let mut sizes = Vec::new();
    for p in params {
        if let Some(t) = &p.ty {
            array_sizes(t, &mut sizes);
        }
    }
    loop {
        let before = known.len();
        for n in &sizes {
            let unknown: Vec<(&Name, &i64)> = n
                .terms
                .iter()
                .filter(|(v, _)| !known.contains(*v))
                .collect();
            if let [(v, k)] = unknown[..] {
                if k.abs() == 1 {
                    known.insert(v.clone());
                }
            }
        }
        if known.len() == before {
            break;
        }
    }
    params.iter().find_map(|p| {
        let mut vs = Vec::new();
        size_vars_of(p.ty.as_ref()?, &mut vs);
        vs.into_iter()
            .find(|v| !known.contains(v))
            .map(|v| (v, p.span))
    })
}

fn size_vars_of(t: &Type, out: &mut Vec<Name>) {
    match t {
        Type::Real | Type::Int | Type::Bool => {}
        Type::Tuple(ts) => ts.iter().for_each(|t| size_vars_of(t, out)),
        Type::Array(t, n) => {
            for v in n.terms.keys() {
                if !out.contains(v) {
                    out.push(v.clone());
                }
            }
            size_vars_of(t, out)
        }
        Type::Fun(ps, r) => {
            ps.iter().for_each(|t| size_vars_of(t, out));
            size_vars_of(r, out)
        }
    }
}

/// Checks `def`, which may call the definitions `defs` (with signatures
/// `sigs`); `later` is `def` and the definitions after it, named in errors.
fn check_def(
    defs: &[Def],
    later: &[Def],
    sigs: &[Signature],
    def: &Def,
) -> TResult<(Signature, HashMap<Span, Instantiation>, Fixes)> {
    let mut size_vars = Vec::new();
    for p in &def.params {
        match &p.ty {
            None => {
                if !size_vars.contains(&p.name) {
                    size_vars.push(p.name.clone())
                }
            }
            Some(t) => size_vars_of(t, &mut size_vars),
        }
    }
    let mut c = Checker {
        defs,
        later,
        sigs,
        vars: Scope::new(),
        size_vars: size_vars.iter().cloned().collect(),
        calls: HashMap::new(),
        fixes: Some(HashMap::new()),
        mapped: HashMap::new(),
    };
    let mut names: HashMap<&str, Span> = HashMap::new();
    for p in &def.params {
        if names.insert(&p.name, p.span).is_some() {
            return invalid(format!("parameter `{}` is declared twice", p.name), p.span);
        }
        if p.ty.is_some() && size_vars.contains(&p.name) {
            return invalid(
                format!("`{}` is both a parameter and a size variable", p.name),
                p.span,
            );
        }
        if let Some(t) = &p.ty {
            if !t.is_ground() {
                return invalid(
                    format!(
                        "parameter `{}` has type `{t}`; parameters hold reals, tuples and arrays",
                        p.name
                    ),
                    p.span,
                );
            }
        }
    }
    if let Some((v, span)) = undetermined_size_var(&def.params) {
        return invalid(
            format!("the size `{v}` cannot be determined from the arguments: some parameter's size must be `{v}` plus or minus other sizes"),
            span,
        );
    }
    for p in &def.params {
        if let Some(t) = &p.ty {
            c.check_type_wf(t, p.span)?;
        }
    }
    for v in &size_vars {
        c.vars.push(
            v.clone(),
            VarInfo {
                ty: Type::Int,
                is_size: true,
            },
        );
    }
    for p in &def.params {
        if let Some(t) = &p.ty {
            c.vars.push(
                p.name.clone(),
                VarInfo {
                    ty: t.clone(),
                    is_size: false,
                },
            );
        }
    }
    if let Some(r) = &def.ret {
        c.check_type_wf(r, def.name_span)?;
    }
    let mut body = c.value(&def.body)?;
    if let Some(r) = &def.ret {
        if c.coerce(&def.body, &body, r)? {
            body = r.clone();
        }
    }
    let ret = match &def.ret {
        Some(r) if *r != body => {
            return mismatch(
                format!(
                    "the body of `{}` does not have its declared result type",
                    def.name
                ),
                r,
                &body,
                def.body.span,
            )
        }
        Some(r) => r.clone(),
        None => body,
    };
    if !ret.is_ground() {
        return invalid(
            format!(
                "`{}` returns `{ret}`; a definition returns reals, tuples and arrays",
                def.name
            ),
            def.body.span,
        );
    }
    let sig = Signature {
        params: def
            .params
            .iter()
            .map(|p| (p.name.clone(), p.ty.clone()))
            .collect(),
        ret,
        size_vars,
    };
    Ok((sig, c.calls, c.fixes.unwrap_or_default()))
}

#[derive(Clone, Debug)]
struct VarInfo {
    ty: Type,
    is_size: bool,
}

struct Checker<'a> {
    defs: &'a [Def],
    /// The definition being checked and those after it: not callable.
    later: &'a [Def],
    sigs: &'a [Signature],
    vars: Scope<VarInfo>,
    size_vars: BTreeSet<Name>,
    /// Size instantiations of the calls checked so far, by span.
    calls: HashMap<Span, Instantiation>,
    /// The elaboration found so far, by node (`None` when checking a term a
    /// pass built, which must need none).
    fixes: Option<Fixes>,
    /// The type of the array of each `map` checked so far, by node (while
    /// elaborating): what [`Checker::product`] reads.
    mapped: HashMap<*const Expr, Type>,
}

/// The fixes of a definition, by node, in the order they apply.
type Fixes = HashMap<*const Expr, Vec<Fix>>;

/// A change elaboration makes to one node.
#[derive(Clone, Debug, PartialEq)]
enum Fix {
    /// A literal whole number that stands for a real (the default).
    Real,
    /// The node is the integer constant (`int(3)` of a literal).
    Int(i64),
    /// An integer converted to a real: `real(e)`.
    ToReal,
    /// The primitive of the node replaced (by its integer form).
    Prim(Prim),
    /// `transpose(M)` given its count of columns: `[c, M]`.
    Columns(Size),
    /// A map of dot products, `map (a. map (b. dot(a, b)) B) A` with `B`
    /// not reading `a`: `matmul(n, A, transpose(k, B))`, for
    /// `B : [[R; k]; n]` ([`Checker::product`]).
    Product { n: Size, k: Size },
    /// A dot product of a batched layer ([`Checker::row_products`]): the
    /// variable holding it.
    Read(Name),
    /// The map of a batched layer: it also reads the row `drow` of the
    /// products, its element `dd`.
    ReadsRow { dd: Name, drow: Name },
    /// The map over the rows `x` of a batched layer: it also reads the rows
    /// of `matmul(h, X, transpose(d, W))`, each as `drow`.
    RowsOf {
        drow: Name,
        w: Name,
        h: Size,
        d: Size,
    },
    /// `unzip(A)` of k-tuples: `let unzipped = A in (map (p. p.0)
    /// unzipped, …)`. Nothing written by the user is in the scope of the
    /// names it binds.
    Unzip(usize),
    /// A call of a definition applied element by element: the arguments
    /// marked `true` are arrays of `depth` more levels than the
    /// parameters, mapped over together (see [`lift_call`]).
    Lift {
        /// Which arguments are mapped over.
        lifted: Vec<bool>,
        /// How many levels of arrays.
        depth: usize,
    },
}

/// `(x, y)` when `e` is `reduce (+) 0 (map2 (*) x y)`, the unit written
/// `0` or `0.0`.
fn dot_of(e: &Expr) -> Option<(&Expr, &Expr)> {
    let ExprKind::ArrayOp(ArrayOp::Reduce, plus, args) = &e.kind else {
        return None;
    };
    let zero = match args[0].kind {
        ExprKind::Literal(0) => true,
        ExprKind::Const(z) => z == 0.0 && z.is_sign_positive(),
        _ => false,
    };
    let ExprKind::ArrayOp(ArrayOp::Map2, times, xs) = &args[1].kind else {
        return None;
    };
    (zero
        && matches!(plus.kind, ExprKind::PrimFn(Prim::Add))
        && matches!(times.kind, ExprKind::PrimFn(Prim::Mul)))
    .then(|| (&xs[0], &xs[1]))
}

/// The names every `let` and lambda of `e` binds.
fn binders(e: &Expr, out: &mut Vec<Name>) {
    guard(|| binders_of(e, out))
}

fn binders_of(e: &Expr, out: &mut Vec<Name>) {
    match &e.kind {
        ExprKind::Let { pat, .. } => pat.names(out),
        ExprKind::Lambda(ps, _) => ps.iter().for_each(|p| p.pat.names(out)),
        _ => {}
    }
    for c in e.children() {
        binders(c, out);
    }
}

/// Whether `(x, y)` are the variables `a` and `b`, in either order.
fn dot_operands(x: &Expr, y: &Expr, a: &Name, b: &Name) -> bool {
    match (&x.kind, &y.kind) {
        (ExprKind::Var(x), ExprKind::Var(y)) => (x == a && y == b) || (x == b && y == a),
        _ => false,
    }
}

/// `e` with the fixes applied (a copy).
fn elaborate(e: &Expr, fixes: &Fixes) -> Expr {
    guard(|| {
        let mut out = e.map_children(&mut |c| elaborate(c, fixes));
        for fix in fixes.get(&(e as *const Expr)).into_iter().flatten() {
            let kind = std::mem::replace(&mut out.kind, ExprKind::Tuple(Vec::new()));
            out = match (fix, kind) {
                (Fix::Real, ExprKind::Literal(k)) => Expr::new(ExprKind::Const(k as f64), e.span),
                (Fix::Real, _) => unreachable!("a literal is fixed to a real"),
                (Fix::Int(k), _) => Expr::new(ExprKind::Int(*k), e.span),
                (Fix::ToReal, kind) => Expr::new(
                    ExprKind::Prim(Prim::ToReal, vec![Expr::new(kind, e.span)]),
                    e.span,
                ),
                (Fix::Prim(p), ExprKind::Prim(_, args)) => {
                    Expr::new(ExprKind::Prim(*p, args), e.span)
                }
                (Fix::Prim(p), ExprKind::PrimFn(_)) => Expr::new(ExprKind::PrimFn(*p), e.span),
                (Fix::Prim(_), _) => unreachable!("a primitive is fixed on a primitive node"),
                (Fix::Columns(c), ExprKind::Builtin(Builtin::Transpose, mut args)) => {
                    args.insert(0, crate::build::size(c));
                    Expr::new(ExprKind::Builtin(Builtin::Transpose, args), e.span)
                }
                (Fix::Columns(c), ExprKind::Builtin(Builtin::MatMul, mut args)) => {
                    args.insert(0, crate::build::size(c));
                    Expr::new(ExprKind::Builtin(Builtin::MatMul, args), e.span)
                }
                (Fix::Columns(_), _) => {
                    unreachable!("columns are fixed on a transpose or a matmul")
                }
                (Fix::Product { n, k }, ExprKind::ArrayOp(ArrayOp::Map, f, mut args)) => {
                    let ExprKind::Lambda(_, body) = &f.kind else {
                        unreachable!("a product is fixed on a map of a lambda")
                    };
                    let ExprKind::ArrayOp(_, _, inner) = &body.kind else {
                        unreachable!("a product's lambda maps")
                    };
                    let b = Expr::new(
                        ExprKind::Builtin(
                            Builtin::Transpose,
                            vec![crate::build::size(k), inner[0].clone()],
                        ),
                        inner[0].span,
                    );
                    let a = args.pop().expect("one array");
                    Expr::new(
                        ExprKind::Builtin(Builtin::MatMul, vec![crate::build::size(n), a, b]),
                        e.span,
                    )
                }
                (Fix::Product { .. }, _) => unreachable!("a product is fixed on a map"),
                (Fix::Read(n), _) => Expr::new(ExprKind::Var(n.clone()), e.span),
                (Fix::ReadsRow { dd, drow }, ExprKind::ArrayOp(_, f, mut args)) => {
                    let ExprKind::Lambda(params, body) = &f.kind else {
                        unreachable!("a batched layer maps a lambda")
                    };
                    let mut params = params.clone();
                    params.push(Param {
                        pat: Pattern::Var(dd.clone(), e.span),
                        ty: None,
                    });
                    let f = Expr::new(ExprKind::Lambda(params, body.clone()), f.span);
                    args.push(Expr::new(ExprKind::Var(drow.clone()), e.span));
                    crate::sugar::map_n(f, args, e.span).expect("one parameter per array")
                }
                (Fix::ReadsRow { .. }, _) => unreachable!("a batched layer is a map"),
                (Fix::RowsOf { drow, w, h, d }, ExprKind::ArrayOp(_, f, mut args)) => {
                    let ExprKind::Lambda(params, body) = &f.kind else {
                        unreachable!("rows of a batched layer are mapped by a lambda")
                    };
                    let mut params = params.clone();
                    params.push(Param {
                        pat: Pattern::Var(drow.clone(), e.span),
                        ty: None,
                    });
                    let f = Expr::new(ExprKind::Lambda(params, body.clone()), f.span);
                    let wt = Expr::new(
                        ExprKind::Builtin(
                            Builtin::Transpose,
                            vec![
                                crate::build::size(d),
                                Expr::new(ExprKind::Var(w.clone()), e.span),
                            ],
                        ),
                        e.span,
                    );
                    let products = Expr::new(
                        ExprKind::Builtin(
                            Builtin::MatMul,
                            vec![crate::build::size(h), args[0].clone(), wt],
                        ),
                        e.span,
                    );
                    args.push(products);
                    crate::sugar::map_n(f, args, e.span).expect("one parameter per array")
                }
                (Fix::RowsOf { .. }, _) => unreachable!("rows of a batched layer are a map"),
                (Fix::Unzip(k), ExprKind::Apply(_, mut args)) => {
                    use crate::build::{let_in, map1, proj, pvar, tuple, var};
                    let a = args.pop().expect("one array");
                    let (u, p) = (Name::from("unzipped"), Name::from("p"));
                    let parts = (0..*k)
                        .map(|i| map1(&p, proj(var(&p), i), var(&u)))
                        .collect();
                    let mut out = let_in(pvar(&u), a, tuple(parts));
                    out.span = e.span;
                    out
                }
                (Fix::Unzip(_), _) => unreachable!("unzip is fixed on a call"),
                (Fix::Lift { lifted, depth }, ExprKind::Apply(f, args)) => {
                    lift_call(*f, args, lifted, *depth, e.span)
                }
                (Fix::Lift { .. }, _) => unreachable!("lifting is fixed on a call"),
            };
        }
        out
    })
}

/// How many levels of arrays `t` has.
fn rank(t: &Type) -> usize {
    match t {
        Type::Array(e, _) => 1 + rank(e),
        _ => 0,
    }
}

/// `f(args)` applied element by element ([`Fix::Lift`]): the arguments
/// marked in `lifted` are mapped over together, `depth` levels deep, by
/// `map` (several arrays: `sugar::map_n`); the others are the same for
/// every element, each bound once outside the maps unless it is a
/// variable or a constant. `f(A, c)` with `A : [[R; n]; m]` and a
/// parameter `R` is `let u = c in map (x. map (y. f(y, u)) x) A`. The
/// names bound hold a `'` and the call's position, so they capture
/// nothing the user wrote and no other call's.
fn lift_call(f: Expr, args: Vec<Expr>, lifted: &[bool], depth: usize, span: Span) -> Expr {
    let tag = format!("{}_{}", span.start, span.end);
    let mut lets = Vec::new();
    let args: Vec<Expr> = args
        .into_iter()
        .enumerate()
        .map(|(k, a)| {
            let simple = matches!(
                a.kind,
                ExprKind::Var(_) | ExprKind::Const(_) | ExprKind::Int(_)
            );
            if lifted[k] || simple {
                return a;
            }
            let n = Name::from(format!("u'{tag}_{k}"));
            lets.push((n.clone(), a));
            Expr::new(ExprKind::Var(n), span)
        })
        .collect();
    let mut out = nest_maps(&f, args, lifted, depth, 0, &tag, span);
    for (n, value) in lets.into_iter().rev() {
        out = Expr::new(
            ExprKind::Let {
                pat: Pattern::Var(n, span),
                ty: None,
                value: Box::new(value),
                body: Box::new(out),
            },
            span,
        );
    }
    out
}

fn nest_maps(
    f: &Expr,
    args: Vec<Expr>,
    lifted: &[bool],
    depth: usize,
    level: usize,
    tag: &str,
    span: Span,
) -> Expr {
    if level == depth {
        return Expr::new(ExprKind::Apply(Box::new(f.clone()), args), span);
    }
    let (mut params, mut arrays, mut inner) = (Vec::new(), Vec::new(), Vec::new());
    for (k, a) in args.into_iter().enumerate() {
        if lifted[k] {
            let n = Name::from(format!("x'{tag}_{level}_{k}"));
            params.push(Param {
                pat: Pattern::Var(n.clone(), span),
                ty: None,
            });
            arrays.push(a);
            inner.push(Expr::new(ExprKind::Var(n), span));
        } else {
            inner.push(a);
        }
    }
    let body = nest_maps(f, inner, lifted, depth, level + 1, tag, span);
    let lambda = Expr::new(ExprKind::Lambda(params, std::sync::Arc::new(body)), span);
    crate::sugar::map_n(lambda, arrays, span).expect("a lambda of one parameter per array")
}

impl Checker<'_> {
    fn check_type_wf(&self, t: &Type, span: Span) -> TResult<()> {
        if let Some(n) = oversized(t) {
            return invalid(
                format!("the size `{n}` exceeds the limit of 2^40 elements"),
                span,
            );
        }
        let mut vs = Vec::new();
        size_vars_of(t, &mut vs);
        for v in vs {
            if !self.size_vars.contains(&v) {
                let suggestion = crate::suggest::closest(&v, self.size_vars.iter().map(|n| &**n))
                    .map(Name::from);
                return Err(TypeError::Unknown {
                    what: "size variable",
                    name: v,
                    suggestion,
                    span,
                });
            }
        }
        Ok(())
    }

    /// The type of `e`, which must be a value (not a condition).
    fn value(&mut self, e: &Expr) -> TResult<Type> {
        let t = self.infer(e)?;
        if t == Type::Bool {
            return invalid(
                "a condition can only be used after `if` or under `and`, `or`, `not`",
                e.span,
            );
        }
        Ok(t)
    }

    fn expect(&mut self, e: &Expr, want: &Type, context: &str) -> TResult<()> {
        let t = self.infer(e)?;
        if !self.coerce(e, &t, want)? {
            return mismatch(context, want, &t, e.span);
        }
        Ok(())
    }

    /// Records a fix of node `e`; an error where nothing may be elaborated.
    fn fix(&mut self, e: &Expr, fix: Fix) -> TResult<()> {
        match &mut self.fixes {
            Some(fixes) => {
                fixes.entry(e as *const Expr).or_default().push(fix);
                Ok(())
            }
            None => invalid(
                match fix {
                    Fix::Real | Fix::Int(_) => "a literal whose type is not decided",
                    Fix::ToReal => "an integer where a real is needed, without `real(…)`",
                    Fix::Prim(_) => "a real operation applied to integers",
                    Fix::Columns(_) => "a `transpose` or `matmul` without its count of columns",
                    Fix::Product { .. } | Fix::Read(_) | Fix::ReadsRow { .. } | Fix::RowsOf { .. } => {
                        "a map of dot products, which only a program written by hand is read as"
                    }
                    Fix::Unzip(_) => "`unzip`, which only a program written by hand may call",
                    Fix::Lift { .. } => {
                        "a call applied element by element, which only a program written by hand may make"
                    }
                },
                e.span,
            ),
        }
    }

    /// The value of `e` if it is a literal whole number whose type is still
    /// to be decided (in a program being elaborated).
    fn literal(&self, e: &Expr) -> Option<i64> {
        match (&e.kind, &self.fixes) {
            (ExprKind::Literal(k), Some(fixes)) => fixes
                .get(&(e as *const Expr))
                .is_some_and(|f| f.contains(&Fix::Real))
                .then_some(*k),
            _ => None,
        }
    }

    /// Whether `e`, of type `found`, can stand where a `want` is needed,
    /// recording the fixes that make it so: a literal whole number for an
    /// integer, an integer converted for a real, and tuples and array
    /// literals of these component by component.
    fn coerce(&mut self, e: &Expr, found: &Type, want: &Type) -> TResult<bool> {
        if found == want {
            return Ok(true);
        }
        match (found, want, &e.kind) {
            (Type::Real, Type::Int, _) if self.literal(e).is_some() => {
                let k = self.literal(e).expect("a literal");
                if let Some(fixes) = self
                    .fixes
                    .as_mut()
                    .and_then(|f| f.get_mut(&(e as *const Expr)))
                {
                    for f in fixes.iter_mut().filter(|f| **f == Fix::Real) {
                        *f = Fix::Int(k);
                    }
                }
                Ok(true)
            }
            (Type::Int, Type::Real, _) => self.fix(e, Fix::ToReal).map(|()| true),
            (Type::Tuple(fs), Type::Tuple(ws), ExprKind::Tuple(es)) if fs.len() == ws.len() => {
                for ((x, f), w) in es.iter().zip(fs).zip(ws) {
                    if !self.coerce(x, f, w)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            (Type::Array(f, n), Type::Array(w, m), ExprKind::ArrayLit(es)) if n == m => {
                for x in es {
                    if !self.coerce(x, f, w)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    fn array(&mut self, e: &Expr, context: &str) -> TResult<(Type, Size)> {
        match self.value(e)? {
            Type::Array(t, n) => Ok((*t, n)),
            other => invalid(
                format!("{context}: expected an array, found `{other}`"),
                e.span,
            ),
        }
    }

    /// Elaboration reads a map of dot products over the rows of two
    /// matrices, `map (a. map (b. reduce (+) 0 (map2 (*) a b)) B) A` (either
    /// order of `a` and `b`; the dot product may be a call of a definition
    /// whose body is one of its two parameters'), with `B` not reading `a`,
    /// as the matrix product `matmul(A, transpose(B))`: the kernel's
    /// order of summation, not the lanes of `reduce` (docs/language.md §4).
    fn product(&mut self, e: &Expr, f: &Expr, a_arr: &Expr) -> TResult<()> {
        if self.fixes.is_none() {
            return Ok(());
        }
        let Some((a, b, b_arr)) = self.dot_products(f) else {
            return self.row_products(e, f, a_arr);
        };
        let mut free = std::collections::HashSet::new();
        crate::interp::free_vars(b_arr, &mut Scope::new(), &mut free);
        if free.contains(a) || free.contains(b) {
            return Ok(());
        }
        let row = |t: Option<&Type>| match t {
            Some(Type::Array(row, n)) => match &**row {
                Type::Array(x, k) if **x == Type::Real => Some((n.clone(), k.clone())),
                _ => None,
            },
            _ => None,
        };
        let ta = row(self.mapped.get(&(a_arr as *const Expr)));
        let tb = row(self.mapped.get(&(b_arr as *const Expr)));
        if let (Some((_, ka)), Some((n, k))) = (ta, tb) {
            if ka == k {
                self.fix(e, Fix::Product { n, k })?;
            }
        }
        Ok(())
    }

    /// A layer applied one row at a time: in `map (x. … map2 (w, c. E) W b
    /// …) X` (or `map (w. E) W`), where `E` reads `dot(w, x)` and `W` is a
    /// variable bound outside (neither `x`, `w` nor `W` bound again inside),
    /// every `dot(w, x)` is the element `(i, j)` of `matmul(X, transpose(W))`:
    /// the outer map also reads that product's rows, one matrix product for
    /// all rows instead of a matrix–vector product per row. `X` must be a
    /// variable. The first such map of the body is batched.
    fn row_products(&mut self, e: &Expr, f: &Expr, a_arr: &Expr) -> TResult<()> {
        let ExprKind::Var(x_arr) = &a_arr.kind else {
            return Ok(());
        };
        if self.fixes.is_none() {
            return Ok(());
        }
        let ExprKind::Lambda(ps, body) = &f.kind else {
            return Ok(());
        };
        let Some(Param {
            pat: Pattern::Var(x, _),
            ..
        }) = ps.first()
        else {
            return Ok(());
        };
        let mut outer = Vec::new();
        for p in ps {
            p.pat.names(&mut outer);
        }
        let d = match self.mapped.get(&(a_arr as *const Expr)) {
            Some(Type::Array(row, _)) => match &**row {
                Type::Array(r, d) if **r == Type::Real => d.clone(),
                _ => return Ok(()),
            },
            _ => return Ok(()),
        };
        outer.push(x_arr.clone());
        let Some((layer, w_arr, dots)) = self.find_layer(body, x, &mut outer) else {
            return Ok(());
        };
        let h = match self.vars.get(&w_arr).map(|v| &v.ty) {
            Some(Type::Array(row, h)) => match &**row {
                Type::Array(r, dw) if **r == Type::Real && *dw == d => h.clone(),
                _ => return Ok(()),
            },
            _ => return Ok(()),
        };
        let tag = format!("{}_{}", e.span.start, e.span.end);
        let (dd, drow) = (
            Name::from(format!("dot'{tag}")),
            Name::from(format!("dots'{tag}")),
        );
        for dot in dots {
            self.fix(dot, Fix::Read(dd.clone()))?;
        }
        self.fix(
            layer,
            Fix::ReadsRow {
                dd,
                drow: drow.clone(),
            },
        )?;
        self.fix(
            e,
            Fix::RowsOf {
                drow,
                w: w_arr,
                h,
                d,
            },
        )
    }

    /// The first map of `e` over a variable `W` not in `bound` whose
    /// function's first parameter `w` is read as `dot(w, x)`; with `W` and
    /// the dot products. `bound` holds the names bound on the way (a map
    /// under a binder of `x` is not searched).
    fn find_layer<'e>(
        &self,
        e: &'e Expr,
        x: &Name,
        bound: &mut Vec<Name>,
    ) -> Option<(&'e Expr, Name, Vec<&'e Expr>)> {
        guard(|| self.layer_in(e, x, bound))
    }

    fn layer_in<'e>(
        &self,
        e: &'e Expr,
        x: &Name,
        bound: &mut Vec<Name>,
    ) -> Option<(&'e Expr, Name, Vec<&'e Expr>)> {
        if let ExprKind::ArrayOp(ArrayOp::Map | ArrayOp::Map2, g, arrays) = &e.kind {
            if let (ExprKind::Var(w_arr), ExprKind::Lambda(ps, gbody)) = (&arrays[0].kind, &g.kind)
            {
                if let Some(Pattern::Var(w, _)) = ps.first().map(|p| &p.pat) {
                    let mut params = Vec::new();
                    for p in ps {
                        p.pat.names(&mut params);
                    }
                    let mut inner = Vec::new();
                    binders(gbody, &mut inner);
                    let clean = !bound.contains(w_arr)
                        && !params.iter().any(|n| n == x || n == w_arr)
                        && !inner.iter().any(|n| n == x || n == w || n == w_arr);
                    if clean {
                        let mut dots = Vec::new();
                        self.dots_of(gbody, w, x, &mut dots);
                        if !dots.is_empty() {
                            return Some((e, w_arr.clone(), dots));
                        }
                    }
                }
            }
        }
        let mark = bound.len();
        let mut names = Vec::new();
        match &e.kind {
            ExprKind::Let { pat, .. } => pat.names(&mut names),
            ExprKind::Lambda(ps, _) => ps.iter().for_each(|p| p.pat.names(&mut names)),
            _ => {}
        }
        if names.contains(x) {
            // `x` rebound: the value may still read the outer `x`.
            if let ExprKind::Let { value, .. } = &e.kind {
                return self.find_layer(value, x, bound);
            }
            return None;
        }
        let mut found = None;
        match &e.kind {
            ExprKind::Let { value, body, .. } => {
                found = self.find_layer(value, x, bound);
                if found.is_none() {
                    bound.extend(names);
                    found = self.find_layer(body, x, bound);
                }
            }
            _ => {
                bound.extend(names);
                for c in e.children() {
                    found = self.find_layer(c, x, bound);
                    if found.is_some() {
                        break;
                    }
                }
            }
        }
        bound.truncate(mark);
        found
    }

    /// The nodes of `e` that are `dot(w, x)` (either order, literal or a
    /// call of a dot-product definition).
    fn dots_of<'e>(&self, e: &'e Expr, w: &Name, x: &Name, out: &mut Vec<&'e Expr>) {
        guard(|| self.dots_in(e, w, x, out))
    }

    fn dots_in<'e>(&self, e: &'e Expr, w: &Name, x: &Name, out: &mut Vec<&'e Expr>) {
        let is_dot = match &e.kind {
            ExprKind::Apply(callee, xs) => match (&callee.kind, &xs[..]) {
                (ExprKind::Var(name), [p, q]) => self.dot_def(name) && dot_operands(p, q, w, x),
                _ => false,
            },
            _ => dot_of(e).is_some_and(|(p, q)| dot_operands(p, q, w, x)),
        };
        if is_dot {
            out.push(e);
            return;
        }
        for c in e.children() {
            self.dots_of(c, w, x, out);
        }
    }

    /// `(a, b, B)` when `f` is `(a. map (b. dot(a, b)) B)`.
    fn dot_products<'e>(&self, f: &'e Expr) -> Option<(&'e Name, &'e Name, &'e Expr)> {
        let ExprKind::Lambda(ps, body) = &f.kind else {
            return None;
        };
        let [Param {
            pat: Pattern::Var(a, _),
            ..
        }] = &ps[..]
        else {
            return None;
        };
        let ExprKind::ArrayOp(ArrayOp::Map, g, inner) = &body.kind else {
            return None;
        };
        let ExprKind::Lambda(qs, dot) = &g.kind else {
            return None;
        };
        let [Param {
            pat: Pattern::Var(b, _),
            ..
        }] = &qs[..]
        else {
            return None;
        };
        let is_dot = match &dot.kind {
            ExprKind::Apply(callee, xs) => match (&callee.kind, &xs[..]) {
                (ExprKind::Var(name), [x, y]) => self.dot_def(name) && dot_operands(x, y, a, b),
                _ => false,
            },
            _ => dot_of(dot).is_some_and(|(x, y)| dot_operands(x, y, a, b)),
        };
        is_dot.then_some((a, b, &inner[0]))
    }

    /// Whether `name` is a definition `(x, y) -> reduce (+) 0 (map2 (*) x y)`
    /// (or of `y x`), its parameters `[R; n]`.
    fn dot_def(&self, name: &Name) -> bool {
        self.defs.iter().any(|d| {
            d.name == *name
                && match (&d.params[..], dot_of(&d.body)) {
                    ([p, q], Some((x, y))) => {
                        let vector = |t: &Option<Type>| {
                            matches!(t, Some(Type::Array(e, _)) if **e == Type::Real)
                        };
                        vector(&p.ty) && vector(&q.ty) && dot_operands(x, y, &p.name, &q.name)
                    }
                    _ => false,
                }
        })
    }

    /// The rows and columns of a matrix of reals.
    fn real_matrix(&mut self, e: &Expr, context: &str) -> TResult<(Size, Size)> {
        match self.value(e)? {
            Type::Array(row, m) => match *row {
                Type::Array(elem, n) if *elem == Type::Real => Ok((m, n)),
                row => invalid(
                    format!("{context}: expected a matrix of reals `[[R; n]; m]`, found rows of type `{row}`"),
                    e.span,
                ),
            },
            other => invalid(
                format!("{context}: expected a matrix of reals `[[R; n]; m]`, found `{other}`"),
                e.span,
            ),
        }
    }

    fn bind(&mut self, pat: &Pattern, ty: &Type) -> TResult<()> {
        match (pat, ty) {
            (Pattern::Var(n, _), _) => {
                self.vars.push(
                    n.clone(),
                    VarInfo {
                        ty: ty.clone(),
                        is_size: false,
                    },
                );
                Ok(())
            }
            (Pattern::Wild(_), _) => Ok(()),
            (Pattern::Tuple(ps, _), Type::Tuple(ts)) if ps.len() == ts.len() => {
                for (p, t) in ps.iter().zip(ts) {
                    self.bind(p, t)?;
                }
                Ok(())
            }
            (Pattern::Tuple(ps, span), _) => invalid(
                format!(
                    "a pattern of {} cannot bind a value of type `{ty}`",
                    crate::span::count(ps.len(), "component")
                ),
                *span,
            ),
        }
    }

    fn infer(&mut self, e: &Expr) -> TResult<Type> {
        let t = guard(|| self.infer_inner(e))?;
        if let Type::Array(_, n) = &t {
            if !n.is_within_limit() {
                return invalid(
                    format!("this array's size `{n}` exceeds the limit of 2^40 elements"),
                    e.span,
                );
            }
        }
        Ok(t)
    }

    fn infer_inner(&mut self, e: &Expr) -> TResult<Type> {
        match &e.kind {
            ExprKind::Const(_) => Ok(Type::Real),
            // A literal: a real unless an integer is needed where it stands
            // (see `coerce`).
            ExprKind::Literal(_) => {
                self.fix(e, Fix::Real)?;
                Ok(Type::Real)
            }
            ExprKind::Int(_) => Ok(Type::Int),
            ExprKind::Var(n) => match self.vars.get(n) {
                Some(info) => Ok(info.ty.clone()),
                None if self.def_index(n).is_some() => invalid(
                    format!("`{n}` is a function: call it with its arguments, `{n}(…)`"),
                    e.span,
                ),
                None => Err(self.unknown("variable", n, e.span)),
            },
            ExprKind::Prim(p, args) if args.len() != p.info().arity => invalid(
                crate::span::arity_message(&format!("`{p}`"), p.info().arity, args.len()),
                e.span,
            ),
            ExprKind::Prim(p, args) => self.prim(e, *p, args),
            ExprKind::PrimFn(p) => {
                let info = p.info();
                let t = match info.kind() {
                    PrimKind::Real => Type::Real,
                    PrimKind::Int => Type::Int,
                    _ => {
                        return invalid(format!("`{p}` cannot be used as a function value"), e.span)
                    }
                };
                Ok(Type::Fun(vec![t.clone(); info.arity], Box::new(t)))
            }
            ExprKind::Let { .. } => self.let_chain(e),
            ExprKind::Tuple(es) => {
                let mut ts = Vec::with_capacity(es.len());
                for x in es {
                    ts.push(self.value(x)?);
                }
                Ok(Type::Tuple(ts))
            }
            ExprKind::Proj(inner, k) => match self.value(inner)? {
                Type::Tuple(ts) if *k < ts.len() => Ok(ts[*k].clone()),
                Type::Tuple(ts) => invalid(
                    format!(
                        "projection `.{k}` of a tuple with {}",
                        crate::span::count(ts.len(), "component")
                    ),
                    e.span,
                ),
                other => invalid(
                    format!("projection `.{k}` of `{other}`, which is not a tuple"),
                    e.span,
                ),
            },
            ExprKind::ArrayLit(es) => {
                let Some(first) = es.first() else {
                    return Ok(Type::array(Type::Real, Size::lit(0)));
                };
                let t = self.value(first)?;
                for x in &es[1..] {
                    self.expect(x, &t, "array elements must all have the same type")?;
                }
                Ok(Type::array(t, Size::lit(es.len() as i64)))
            }
            ExprKind::Index(inner, k) => {
                let (t, n) = self.array(inner, "indexing")?;
                if let Some(len) = n.as_literal() {
                    if *k >= len || *k < -len {
                        return invalid(
                            format!("index {k} is out of bounds for an array of length {len}"),
                            e.span,
                        );
                    }
                }
                Ok(t)
            }
            ExprKind::If(c, t, f) => {
                let ct = self.infer(c)?;
                if ct != Type::Bool {
                    return invalid(
                        format!("the condition of `if` must be a comparison such as `x > 0`, found a value of type `{ct}`"),
                        c.span,
                    );
                }
                let tt = self.value(t)?;
                let ft = self.value(f)?;
                if tt == ft || self.coerce(f, &ft, &tt)? {
                    return Ok(tt);
                }
                if self.coerce(t, &tt, &ft)? {
                    return Ok(ft);
                }
                mismatch("the branches of `if` differ", &tt, &ft, f.span)
            }
            ExprKind::Lambda(params, body) => {
                let mut tys = Vec::new();
                for p in params {
                    match &p.ty {
                        Some(t) => {
                            self.check_type_wf(t, p.pat.span())?;
                            tys.push(t.clone())
                        }
                        None => {
                            return invalid(
                                "this lambda needs parameter types (`fun (x: R) -> …`): only the function argument of an array operation can leave them out",
                                p.pat.span(),
                            )
                        }
                    }
                }
                let ret = self.lambda(params, &tys, body)?;
                Ok(Type::Fun(tys, Box::new(ret)))
            }
            ExprKind::Apply(f, args) => self.apply(e, f, args),
            ExprKind::ArrayOp(op, f, args) => {
                let t = self.array_op(*op, f, args, e.span)?;
                match op {
                    ArrayOp::Map => self.product(e, f, &args[0])?,
                    ArrayOp::Map2 => self.row_products(e, f, &args[0])?,
                    _ => {}
                }
                Ok(t)
            }
            ExprKind::Builtin(b, args) => self.builtin(e, *b, args),
            ExprKind::Derive(d, f, args) => self.derivative(*d, f, args, e.span),
        }
    }

    /// The type of a derivative operator's result. The arguments that are
    /// differentiated must be made of reals; so must the function's result
    /// where a cotangent or tangent of it is taken.
    fn derivative(&mut self, d: Derivative, f: &Expr, args: &[Expr], span: Span) -> TResult<Type> {
        let Some(k) = d.fn_arity(args.len()) else {
            return invalid(format!("`{}` takes {}", d.name(), d.usage()), span);
        };
        let what = format!("the function of `{}`", d.name());
        let mut tys = Vec::with_capacity(k);
        for a in &args[..k] {
            let t = self.value(a)?;
            if !all_reals(&t) {
                return invalid(
                    format!(
                        "`{}` differentiates with respect to every argument, so each must be made of reals; this one has type `{t}` (an integer a function needs can be read from the enclosing scope instead)",
                        d.name()
                    ),
                    a.span,
                );
            }
            tys.push(t);
        }
        let r = self.check_fn(f, &tys, &what)?;
        let shaped = |mut tys: Vec<Type>| {
            if tys.len() == 1 {
                tys.pop().expect("one")
            } else {
                Type::Tuple(tys)
            }
        };
        let reals_result = |r: &Type| -> TResult<()> {
            if all_reals(r) {
                Ok(())
            } else {
                invalid(
                    format!(
                        "`{}` needs a function whose result is made of reals; this one returns `{r}`",
                        d.name()
                    ),
                    f.span,
                )
            }
        };
        match d {
            Derivative::Grad => {
                if r != Type::Real {
                    return mismatch(
                        "the result of the function of `grad`",
                        &Type::Real,
                        &r,
                        f.span,
                    );
                }
                Ok(shaped(tys))
            }
            Derivative::Vjp => {
                reals_result(&r)?;
                self.expect(
                    &args[k],
                    &r,
                    "the cotangent of `vjp` (of the function's result type)",
                )?;
                Ok(shaped(tys))
            }
            Derivative::Jvp => {
                reals_result(&r)?;
                for (a, t) in args[k..].iter().zip(&tys) {
                    self.expect(a, t, "a tangent of `jvp` (of its argument's type)")?;
                }
                Ok(Type::Tuple(vec![r.clone(), r]))
            }
            Derivative::JacFwd | Derivative::JacRev | Derivative::Jacobian => {
                let vector = |t: &Type| match t {
                    Type::Real => Some(None),
                    Type::Array(e, n) if **e == Type::Real => Some(Some(n.clone())),
                    _ => None,
                };
                let (Some(input), Some(output)) = (vector(&tys[0]), vector(&r)) else {
                    return invalid(
                        format!(
                            "`{}` takes a function from `R` or `[R; n]` to `R` or `[R; m]`; this one is `{}` → `{r}`",
                            d.name(),
                            tys[0]
                        ),
                        f.span,
                    );
                };
                let row = match input {
                    None => Type::Real,
                    Some(n) => Type::array(Type::Real, n),
                };
                Ok(match output {
                    None => row,
                    Some(m) => Type::array(row, m),
                })
            }
        }
    }

    fn let_chain(&mut self, mut e: &Expr) -> TResult<Type> {
        let mark = self.vars.mark();
        while let ExprKind::Let {
            pat,
            ty,
            value,
            body,
        } = &e.kind
        {
            let mut vt = self.value(value)?;
            if let Some(t) = ty {
                self.check_type_wf(t, pat.span())?;
                if self.coerce(value, &vt, t)? {
                    vt = t.clone();
                }
                if *t != vt {
                    return mismatch(
                        "the bound value does not have the declared type",
                        t,
                        &vt,
                        value.span,
                    );
                }
            }
            self.bind(pat, &vt)?;
            e = body;
        }
        let t = self.value(e);
        self.vars.pop_to(mark);
        t
    }

    fn prim(&mut self, e: &Expr, p: Prim, args: &[Expr]) -> TResult<Type> {
        let info = p.info();
        let what = match info.fixity {
            crate::prim::Fixity::Call => format!("the argument of `{p}`"),
            _ => format!("an operand of `{p}`"),
        };
        if info.kind() == PrimKind::Logic {
            for a in args {
                let t = self.infer(a)?;
                if t != Type::Bool {
                    return invalid(
                        format!(
                            "`{p}` joins conditions (comparisons), found a value of type `{t}`"
                        ),
                        a.span,
                    );
                }
            }
            return Ok(Type::Bool);
        }
        let mut tys = Vec::with_capacity(args.len());
        for a in args {
            let t = self.infer(a)?;
            if t == Type::Bool {
                return invalid(format!("{what} is a condition, not a number"), a.span);
            }
            if t != Type::Real && t != Type::Int {
                let want = info.kind().arg_type().unwrap_or(Type::Real);
                return mismatch(what.clone(), &want, &t, a.span);
            }
            tys.push(t);
        }
        // An operation that has an integer form takes it when an operand is
        // an integer and every other one is an integer or a literal whole
        // number (in a program being elaborated).
        let mut kind = info.kind();
        if let Some(q) = p.on_integers() {
            let some_int = tys.contains(&Type::Int);
            let all_int = args
                .iter()
                .zip(&tys)
                .all(|(a, t)| *t == Type::Int || self.literal(a).is_some());
            if some_int && all_int {
                self.fix(e, Fix::Prim(q))?;
                kind = q.info().kind();
            }
        }
        if p == Prim::ToInt {
            if let Some(k) = self.literal(&args[0]) {
                self.fix(e, Fix::Int(k))?;
                return Ok(Type::Int);
            }
        }
        let want = kind.arg_type().expect("not a connective");
        for (a, t) in args.iter().zip(&tys) {
            // `int` of an integer would round it through a real.
            let promoted_int = p == Prim::ToInt && *t == Type::Int;
            if promoted_int || !self.coerce(a, t, &want)? {
                let message = match (&want, p) {
                    (Type::Int, Prim::IDiv | Prim::IMod) => format!(
                        "`{p}` divides integers; `{}` is a real (`/` divides reals, `floor(x / y)` rounds the quotient down)",
                        a
                    ),
                    (Type::Int, Prim::ToReal) => format!(
                        "`real` converts an integer, and `{}` is already a real",
                        a
                    ),
                    (Type::Real, Prim::ToInt) => format!(
                        "`int` converts a real, and `{}` is already an integer",
                        a
                    ),
                    _ => return mismatch(what.clone(), &want, t, a.span),
                };
                return invalid(message, a.span);
            }
        }
        Ok(kind.result_type())
    }

    fn lambda(&mut self, params: &[Param], tys: &[Type], body: &Expr) -> TResult<Type> {
        let mark = self.vars.mark();
        for (p, t) in params.iter().zip(tys) {
            self.bind(&p.pat, t)?;
        }
        let r = self.value(body);
        self.vars.pop_to(mark);
        r
    }

    /// The error for `name`, bound nowhere in scope: a definition that
    /// comes too late to be called, or an unknown name.
    fn unknown(&self, what: &'static str, name: &Name, span: Span) -> TypeError {
        let message = match self.later.iter().position(|d| d.name == *name) {
            Some(0) => format!("`{name}` cannot call itself: definitions are not recursive"),
            Some(_) => format!(
                "`{name}` is defined later in the file: a definition can call only the definitions before it"
            ),
            None => {
                return TypeError::Unknown {
                    what,
                    name: name.clone(),
                    suggestion: self.suggest(name).map(Name::from),
                    span,
                }
            }
        };
        TypeError::Invalid { message, span }
    }

    /// The closest name to `name` among the variables in scope, the
    /// definitions it may call, the primitives and the reserved words.
    fn suggest(&self, name: &str) -> Option<String> {
        let mut candidates: Vec<&str> = self.vars.names().map(|n| &**n).collect();
        // Sorted, so that ties are decided the same way every time.
        candidates.sort_unstable();
        candidates.extend(self.defs.iter().map(|d| &*d.name));
        candidates.extend(
            Prim::ALL
                .iter()
                .filter(|p| p.info().fixity == crate::prim::Fixity::Call)
                .map(|p| p.info().name),
        );
        candidates.extend(crate::lexer::KEYWORDS.iter().copied());
        crate::suggest::closest(name, candidates).map(str::to_string)
    }

    fn def_index(&self, name: &str) -> Option<usize> {
        if self.vars.get(name).is_some() {
            return None;
        }
        self.defs.iter().position(|d| &*d.name == name)
    }

    /// The result type of the function argument `f` of an array operation,
    /// applied to arguments of types `arg_tys`.
    fn check_fn(&mut self, f: &Expr, arg_tys: &[Type], what: &str) -> TResult<Type> {
        match &f.kind {
            ExprKind::Lambda(params, body) => {
                if params.len() != arg_tys.len() {
                    return invalid(
                        format!(
                            "{what} takes {} argument{}, but this lambda has {}",
                            arg_tys.len(),
                            if arg_tys.len() == 1 { "" } else { "s" },
                            params.len()
                        ),
                        f.span,
                    );
                }
                for (p, t) in params.iter().zip(arg_tys) {
                    if let Some(pt) = &p.ty {
                        if pt != t {
                            return mismatch(format!("a parameter of {what}"), t, pt, p.pat.span());
                        }
                    }
                }
                self.lambda(params, arg_tys, body)
            }
            // `(+)` over integers is the integer addition.
            ExprKind::PrimFn(p)
                if p.on_integers().is_some()
                    && !arg_tys.is_empty()
                    && arg_tys.iter().all(|t| *t == Type::Int) =>
            {
                let q = p.on_integers().expect("checked");
                self.fix(f, Fix::Prim(q))?;
                Ok(q.info().kind().result_type())
            }
            ExprKind::PrimFn(p) if p.info().kind() == PrimKind::Int => {
                let kind = p.info().kind();
                for t in arg_tys {
                    if *t != Type::Int {
                        return mismatch(
                            format!("an argument passed to {what}"),
                            &Type::Int,
                            t,
                            f.span,
                        );
                    }
                }
                Ok(kind.result_type())
            }
            ExprKind::Var(n) if self.def_index(n).is_some() => {
                let i = self.def_index(n).expect("checked");
                let sig = &self.sigs[i];
                if sig.params.iter().any(|(_, t)| t.is_none()) {
                    return invalid(
                        format!(
                            "`{n}` takes a size parameter, so it cannot be passed as a function"
                        ),
                        f.span,
                    );
                }
                let args: Vec<(Option<&Expr>, Type, Span)> =
                    arg_tys.iter().map(|t| (None, t.clone(), f.span)).collect();
                self.instantiate(i, &args, f.span)
            }
            _ => {
                let ft = self.infer(f)?;
                match ft {
                    Type::Fun(ps, r) => {
                        if ps.len() != arg_tys.len() {
                            return invalid(
                                format!(
                                    "{what} takes {} argument{}, but this function takes {}",
                                    arg_tys.len(),
                                    if arg_tys.len() == 1 { "" } else { "s" },
                                    ps.len()
                                ),
                                f.span,
                            );
                        }
                        for (p, t) in ps.iter().zip(arg_tys) {
                            if p != t {
                                return mismatch(
                                    format!("an argument passed to {what}"),
                                    p,
                                    t,
                                    f.span,
                                );
                            }
                        }
                        Ok(*r)
                    }
                    other => invalid(
                        format!("{what}: expected a function, found `{other}`"),
                        f.span,
                    ),
                }
            }
        }
    }

    fn apply(&mut self, e: &Expr, f: &Expr, args: &[Expr]) -> TResult<Type> {
        let span = e.span;
        if let ExprKind::Var(n) = &f.kind {
            if self.vars.get(n).is_none() {
                if self.def_index(n).is_none() && &**n == "unzip" && args.len() == 1 {
                    return self.unzip(e, &args[0]);
                }
                let Some(i) = self.def_index(n) else {
                    return Err(self.unknown("function", n, f.span));
                };
                let mut typed = Vec::with_capacity(args.len());
                for a in args {
                    typed.push((Some(a), self.value(a)?, a.span));
                }
                if let Some(t) = self.lifted_call(e, i, &typed, span)? {
                    return Ok(t);
                }
                return self.instantiate(i, &typed, span);
            }
        }
        let ft = self.value(f)?;
        let Type::Fun(ps, r) = ft else {
            return invalid(
                format!("this is not a function: it has type `{ft}`"),
                f.span,
            );
        };
        if ps.len() != args.len() {
            return invalid(
                crate::span::arity_message("the function", ps.len(), args.len()),
                span,
            );
        }
        for (i, (p, a)) in ps.iter().zip(args).enumerate() {
            self.expect(a, p, &format!("argument {}", i + 1))?;
        }
        Ok(*r)
    }

    /// A call of definition `i` applied element by element, when some
    /// arguments are arrays of `d` more levels than their parameters (the
    /// same `d` for all of them, the others exactly the parameters'
    /// types): the type of the result, `d` levels of arrays of the
    /// callee's, and the fix that writes the maps. `None` when no argument
    /// has more levels than its parameter (an ordinary call).
    fn lifted_call(
        &mut self,
        e: &Expr,
        i: usize,
        args: &[(Option<&Expr>, Type, Span)],
        span: Span,
    ) -> TResult<Option<Type>> {
        let sig = self.sigs[i].clone();
        if sig.params.len() != args.len() {
            return Ok(None);
        }
        let excess: Vec<usize> = sig
            .params
            .iter()
            .zip(args)
            .map(|((_, p), (_, a, _))| match p {
                Some(p) => rank(a).saturating_sub(rank(p)),
                None => 0,
            })
            .collect();
        let depth = excess.iter().copied().max().unwrap_or(0);
        if depth == 0 {
            return Ok(None);
        }
        let name = self.defs[i].name.clone();
        if let Some(k) = excess.iter().position(|&x| x != 0 && x != depth) {
            return invalid(
                format!(
                    "`{name}` applied element by element maps over {depth} levels of arrays, but argument {} has {} more than its parameter: the arrays mapped over together must have the same number of levels",
                    k + 1,
                    excess[k]
                ),
                args[k].2,
            );
        }
        // Peel the levels, checking that the arrays mapped over together
        // have the same lengths at each.
        let mut sizes: Vec<Size> = Vec::new();
        let mut peeled = Vec::with_capacity(args.len());
        let mut first: Option<usize> = None;
        for (k, (expr, aty, aspan)) in args.iter().enumerate() {
            if excess[k] == 0 {
                peeled.push((*expr, aty.clone(), *aspan));
                continue;
            }
            let mut t = aty.clone();
            for level in 0..depth {
                let Type::Array(elem, n) = t else {
                    unreachable!("counted levels of arrays")
                };
                match sizes.get(level) {
                    None => sizes.push(n),
                    Some(m) if *m == n => {}
                    Some(m) => {
                        let j = first.expect("an argument mapped over before");
                        return invalid(
                            format!(
                                "`{name}` applied element by element maps over arguments {} and {} together, but their lengths differ: `{m}` and `{n}`",
                                j + 1,
                                k + 1
                            ),
                            *aspan,
                        );
                    }
                }
                t = *elem;
            }
            first.get_or_insert(k);
            peeled.push((None, t, *aspan));
        }
        let mut ret = self.instantiate(i, &peeled, span)?;
        for n in sizes.into_iter().rev() {
            ret = Type::array(ret, n);
        }
        self.fix(
            e,
            Fix::Lift {
                lifted: excess.iter().map(|&x| x > 0).collect(),
                depth,
            },
        )?;
        Ok(Some(ret))
    }

    /// Checks a call of definition `i`: binds the callee's size variables by
    /// matching parameter types against argument types, then checks every
    /// argument under that binding. Size arguments need their expression.
    fn instantiate(
        &mut self,
        i: usize,
        args: &[(Option<&Expr>, Type, Span)],
        span: Span,
    ) -> TResult<Type> {
        let sig = self.sigs[i].clone();
        let name = &self.defs[i].name;
        if sig.params.len() != args.len() {
            return invalid(
                crate::span::arity_message(&format!("`{name}`"), sig.params.len(), args.len()),
                span,
            );
        }
        let mut subst: HashMap<Name, Size> = HashMap::new();
        for ((pname, pty), (expr, aty, aspan)) in sig.params.iter().zip(args) {
            if pty.is_none() {
                let Some(expr) = expr else {
                    unreachable!(
                        "size parameters are rejected before instantiation without expressions"
                    )
                };
                let what = format!("the size argument `{pname}` of `{name}`");
                if !self.coerce(expr, aty, &Type::Int)? {
                    return mismatch(what, &Type::Int, aty, *aspan);
                }
                let s = self.size_of(expr, &what)?;
                subst.insert(pname.clone(), s);
            }
        }
        // Bind size variables from array sizes until nothing changes.
        loop {
            let before = subst.len();
            for ((_, pty), (_, aty, _)) in sig.params.iter().zip(args) {
                if let Some(pty) = pty {
                    match_sizes(pty, aty, &sig.size_vars, &mut subst);
                }
            }
            if subst.len() == before {
                break;
            }
        }
        let lookup = |v: &Name| subst.get(v).cloned();
        for (k, ((pname, pty), (expr, aty, aspan))) in sig.params.iter().zip(args).enumerate() {
            if let Some(pty) = pty {
                let want = pty.substitute(&lookup);
                let fits = match expr {
                    Some(e) => self.coerce(e, aty, &want)?,
                    None => want == *aty,
                };
                if !fits {
                    return mismatch(
                        format!("argument {} (`{pname}`) of `{name}`", k + 1),
                        &want,
                        aty,
                        *aspan,
                    );
                }
            }
        }
        let mut in_ret = Vec::new();
        size_vars_of(&sig.ret, &mut in_ret);
        let ret = sig.ret.substitute(&lookup);
        if let Some(v) = in_ret.iter().find(|v| !subst.contains_key(*v)) {
            return invalid(
                format!("cannot tell the size `{v}` of the result of `{name}` from its arguments"),
                span,
            );
        }
        let mut inst: Instantiation = subst.into_iter().collect();
        inst.sort();
        self.calls.insert(span, inst);
        Ok(ret)
    }

    fn array_op(&mut self, op: ArrayOp, f: &Expr, args: &[Expr], span: Span) -> TResult<Type> {
        let what = format!("the function of `{}`", op.name());
        match op {
            ArrayOp::Map => {
                let (t, n) = self.array(&args[0], "`map`")?;
                if self.fixes.is_some() {
                    self.mapped
                        .insert(&args[0] as *const Expr, Type::array(t.clone(), n.clone()));
                }
                let u = self.check_fn(f, &[t], &what)?;
                Ok(Type::array(u, n))
            }
            ArrayOp::Map2 => {
                let (t1, n1) = self.array(&args[0], "`map2`")?;
                if self.fixes.is_some() {
                    self.mapped
                        .insert(&args[0] as *const Expr, Type::array(t1.clone(), n1.clone()));
                }
                let (t2, n2) = self.array(&args[1], "`map2`")?;
                if n1 != n2 {
                    return invalid(
                        format!(
                            "the arrays of a `map2` (or of a `map` over several) must have the same size, found sizes `{n1}` and `{n2}`"
                        ),
                        span,
                    );
                }
                let u = self.check_fn(f, &[t1, t2], &what)?;
                Ok(Type::array(u, n1))
            }
            ArrayOp::Revfold(_) => {
                let s = self.value(&args[1])?;
                let (t, n) = self.array(&args[2], "`revfold`")?;
                let z = self.value(&args[3])?;
                if z != s {
                    return mismatch("the cotangent of `revfold`", &s, &z, args[3].span);
                }
                let acc = self.value(&args[4])?;
                let next =
                    self.check_fn(&args[0], &[s.clone(), t.clone()], "the step of `revfold`")?;
                if next != s {
                    return mismatch("the step of `revfold`", &s, &next, args[0].span);
                }
                let r = self.check_fn(f, &[s.clone(), t.clone(), s.clone(), acc.clone()], &what)?;
                // What each step returns beside the cotangents: its element's
                // cotangent, `()` when the step ignores its element, or
                // either with the step's sparse records (any type).
                let e = match &r {
                    Type::Tuple(parts) if parts.len() == 3 => parts[1].clone(),
                    _ => t.clone(),
                };
                let want = Type::Tuple(vec![s.clone(), e.clone(), acc.clone()]);
                if r != want {
                    return mismatch(format!("the result of {what}"), &want, &r, f.span);
                }
                Ok(Type::Tuple(vec![s, Type::array(e, n), acc]))
            }
            ArrayOp::While => {
                let s = self.value(&args[0])?;
                let r = match self.check_fn(f, std::slice::from_ref(&s), &what) {
                    Ok(r) => r,
                    Err(e) => return Err(self.while_step_error(f, &s).unwrap_or(e)),
                };
                let want = Type::Tuple(vec![Type::Int, s.clone()]);
                if r != want {
                    return mismatch(
                        "the step of a `while` loop (whether to go on, and the next state)",
                        &want,
                        &r,
                        f.span,
                    );
                }
                Ok(s)
            }
            ArrayOp::Revwhile(_) => {
                let unit = Type::Tuple(Vec::new());
                let s = self.value(&args[1])?;
                self.integer(&args[2], "the trip count of `revwhile`")?;
                let z = self.value(&args[3])?;
                if z != s {
                    return mismatch("the cotangent of `revwhile`", &s, &z, args[3].span);
                }
                let acc = self.value(&args[4])?;
                let next = self.check_fn(
                    &args[0],
                    &[s.clone(), unit.clone()],
                    "the step of `revwhile`",
                )?;
                if next != s {
                    return mismatch("the step of `revwhile`", &s, &next, args[0].span);
                }
                let r =
                    self.check_fn(f, &[s.clone(), unit.clone(), s.clone(), acc.clone()], &what)?;
                let want = Type::Tuple(vec![s.clone(), unit, acc.clone()]);
                if r != want {
                    return mismatch(format!("the result of {what}"), &want, &r, f.span);
                }
                Ok(Type::Tuple(vec![s, acc]))
            }
            ArrayOp::Reduce | ArrayOp::Foldl(_) | ArrayOp::Scanl | ArrayOp::Scanr => {
                let mut s = self.value(&args[0])?;
                let (t, n) = self.array(&args[1], &format!("`{}`", op.name()))?;
                if op == ArrayOp::Reduce && self.coerce(&args[0], &s, &t)? {
                    s = t.clone();
                }
                if op == ArrayOp::Reduce && t != s {
                    return mismatch(
                        "`reduce` needs its unit and the array elements to have one type",
                        &t,
                        &s,
                        args[0].span,
                    );
                }
                let r = self.check_fn(f, &[s.clone(), t], &what)?;
                if r != s {
                    return mismatch(
                        format!(
                            "the function of `{}` must return the accumulator's type",
                            op.name()
                        ),
                        &s,
                        &r,
                        f.span,
                    );
                }
                Ok(match op {
                    ArrayOp::Scanl | ArrayOp::Scanr => Type::array(s, n.offset(1)),
                    _ => s,
                })
            }
        }
    }

    /// For a loop written `loop p = v while c do e` whose function does
    /// not check: that its step `e` gives a state of another type than the
    /// start's `s`, if so — said in the loop's terms rather than in those
    /// of the `if` it is made of. (Only on the way to an error: inferring
    /// the step again would record its literals' types twice.)
    fn while_step_error(&mut self, f: &Expr, s: &Type) -> Option<TypeError> {
        let ExprKind::Lambda(params, body) = &f.kind else {
            return None;
        };
        let ([param], ExprKind::If(_, then, _)) = (params.as_slice(), &body.kind) else {
            return None;
        };
        let ExprKind::Tuple(parts) = &then.kind else {
            return None;
        };
        let [flag, step] = &parts[..] else {
            return None;
        };
        if !matches!(flag.kind, ExprKind::Int(1)) {
            return None;
        }
        let mark = self.vars.mark();
        let t = self.bind(&param.pat, s).and_then(|()| self.infer(step));
        self.vars.pop_to(mark);
        match t {
            Ok(t) if t != *s => mismatch::<()>(
                "the step of a `while` loop (a state of the start's type)",
                s,
                &t,
                step.span,
            )
            .err(),
            _ => None,
        }
    }

    fn builtin(&mut self, e: &Expr, b: Builtin, args: &[Expr]) -> TResult<Type> {
        match b {
            Builtin::Len => {
                self.array(&args[0], "`len`")?;
                Ok(Type::Int)
            }
            Builtin::Iota => {
                let n = self.count(&args[0], "`iota`")?;
                Ok(Type::array(Type::Int, n))
            }
            Builtin::Replicate => {
                let n = self.count(&args[0], "`replicate`")?;
                let t = self.value(&args[1])?;
                Ok(Type::array(t, n))
            }
            Builtin::Concat => {
                let (t1, n1) = self.array(&args[0], "`concat`")?;
                let (mut t2, n2) = self.array(&args[1], "`concat`")?;
                let (a1, a2) = (
                    Type::array(t1.clone(), n1.clone()),
                    Type::array(t2.clone(), n2.clone()),
                );
                if t1 != t2
                    && (self.coerce(&args[1], &a2, &Type::array(t1.clone(), n2.clone()))?
                        || self.coerce(&args[0], &a1, &Type::array(t2.clone(), n1.clone()))?)
                {
                    t2 = t1.clone();
                }
                if t1 != t2 {
                    return mismatch(
                        "`concat` needs arrays of one element type",
                        &t1,
                        &t2,
                        args[1].span,
                    );
                }
                Ok(Type::array(t1, n1.plus(&n2)))
            }
            Builtin::Take | Builtin::Drop => {
                let k = self.count(&args[0], &format!("`{}`", b.name()))?;
                let (t, n) = self.array(&args[1], &format!("`{}`", b.name()))?;
                Ok(Type::array(
                    t,
                    if b == Builtin::Take {
                        k
                    } else {
                        n.add_scaled(&k, -1)
                    },
                ))
            }
            Builtin::Shift1L | Builtin::Shift1R => {
                let (t, n) = self.array(&args[0], &format!("`{}`", b.name()))?;
                let m = match n.as_literal() {
                    Some(0) => Size::lit(0),
                    _ => n.offset(-1),
                };
                Ok(Type::array(t, m))
            }
            Builtin::Get => {
                let (t, _) = self.array(&args[0], "indexing")?;
                self.integer(&args[1], "an index")?;
                Ok(t)
            }
            Builtin::Gather => {
                let (t, _) = self.array(&args[0], "`gather`")?;
                let m = self.indices(&args[1], "the indices of `gather`")?;
                Ok(Type::array(t, m))
            }
            Builtin::Transpose => {
                let m = args.last().expect("a matrix");
                let (row, r) = self.array(m, "`transpose`")?;
                let Type::Array(elem, c) = row else {
                    return invalid(
                        format!("`transpose` takes a matrix (an array of arrays), found elements of type `{row}`"),
                        m.span,
                    );
                };
                if args.len() == 1 {
                    // As written: the count of columns is the type's.
                    self.fix(e, Fix::Columns(c.clone()))?;
                } else {
                    let k = self.count(&args[0], "the columns of `transpose`")?;
                    if k != c {
                        return invalid(
                            format!(
                                "`transpose` of a matrix of `{c}` columns given the count `{k}`"
                            ),
                            args[0].span,
                        );
                    }
                }
                Ok(Type::array(Type::array(*elem, r), c))
            }
            Builtin::MatMul => {
                let [.., a, b] = args else {
                    unreachable!("matmul has two matrices")
                };
                let (m, k) = self.real_matrix(a, "the first matrix of `matmul`")?;
                let (k2, n) = self.real_matrix(b, "the second matrix of `matmul`")?;
                if k != k2 {
                    return invalid(
                        format!(
                            "`matmul` of a matrix of `{k}` columns and a matrix of `{k2}` rows: the two must be equal"
                        ),
                        e.span,
                    );
                }
                if args.len() == 2 {
                    // As written: the count of columns is the type's.
                    self.fix(e, Fix::Columns(n.clone()))?;
                } else {
                    let c = self.count(&args[0], "the columns of `matmul`")?;
                    if c != n {
                        return invalid(
                            format!("`matmul` with a second matrix of `{n}` columns given the count `{c}`"),
                            args[0].span,
                        );
                    }
                }
                Ok(Type::array(Type::array(Type::Real, n), m))
            }
            Builtin::ReduceByIndex(p) => {
                let (t, k) = self.array(&args[0], "the bins of `reduce_by_index`")?;
                let m = self.indices(&args[1], "the indices of `reduce_by_index`")?;
                let (u, n) = self.array(&args[2], "the values of `reduce_by_index`")?;
                if u != t {
                    return mismatch(
                        "the values of `reduce_by_index` must have the type of its bins",
                        &t,
                        &u,
                        args[2].span,
                    );
                }
                if m != n {
                    return invalid(
                        format!("`reduce_by_index` needs as many values as indices, found sizes `{m}` and `{n}`"),
                        args[2].span,
                    );
                }
                let fits = match p {
                    Prim::Add => all_reals(&t),
                    _ => t == Type::Real,
                };
                if !fits {
                    let wanted = match p {
                        Prim::Add => "reals, or tuples and arrays of reals",
                        _ => "reals",
                    };
                    return invalid(
                        format!("`reduce_by_index` with `{}` takes values that are {wanted}, found elements of type `{t}`", p.info().name),
                        args[2].span,
                    );
                }
                Ok(Type::array(t, k))
            }
        }
    }

    /// `unzip(A)` of an array of k-tuples, when no definition is named
    /// `unzip`: the k arrays of components, elaborated as the maps that
    /// project them ([`Fix::Unzip`]).
    fn unzip(&mut self, e: &Expr, a: &Expr) -> TResult<Type> {
        let (t, n) = self.array(a, "`unzip`")?;
        match t {
            Type::Tuple(ts) if ts.len() >= 2 => {
                self.fix(e, Fix::Unzip(ts.len()))?;
                Ok(Type::Tuple(
                    ts.into_iter().map(|t| Type::array(t, n.clone())).collect(),
                ))
            }
            other => invalid(
                format!("`unzip` takes an array of tuples, found elements of type `{other}`"),
                a.span,
            ),
        }
    }

    /// An integer operand (an index): its literals elaborated as integers.
    fn integer(&mut self, e: &Expr, what: &str) -> TResult<()> {
        let t = self.value(e)?;
        if !self.coerce(e, &t, &Type::Int)? {
            return mismatch(format!("{what} must be an integer"), &Type::Int, &t, e.span);
        }
        Ok(())
    }

    /// An array of integer indices, and its size.
    fn indices(&mut self, e: &Expr, what: &str) -> TResult<Size> {
        let t = self.value(e)?;
        let n = match &t {
            Type::Array(_, n) => n.clone(),
            _ => {
                return invalid(
                    format!("{what} must be an array of integers, found `{t}`"),
                    e.span,
                )
            }
        };
        let want = Type::array(Type::Int, n.clone());
        if !self.coerce(e, &t, &want)? {
            return mismatch(
                format!("{what} must be an array of integers"),
                &want,
                &t,
                e.span,
            );
        }
        Ok(n)
    }

    /// A count (of `iota`, `replicate`, `take`, `drop`, a size argument):
    /// a size expression ([`Checker::size_of`]), checked as an integer
    /// (its literals elaborated as integers).
    fn count(&mut self, e: &Expr, what: &str) -> TResult<Size> {
        let n = self.size_of(e, what)?;
        let t = self.value(e)?;
        if !self.coerce(e, &t, &Type::Int)? {
            return mismatch(what.to_string(), &Type::Int, &t, e.span);
        }
        Ok(n)
    }

    /// Reads a size expression: whole numbers (`3` or `int(3)`), size
    /// variables, `len(A)`, sums, differences and whole multiples of these.
    fn size_of(&mut self, e: &Expr, what: &str) -> TResult<Size> {
        let bad = || {
            invalid(
                format!("{what} needs a size: a whole number, a size variable, `len(A)`, or sums and differences of these"),
                e.span,
            )
        };
        match &e.kind {
            ExprKind::Int(k) | ExprKind::Literal(k) if k.abs() <= Size::LIMIT => Ok(Size::lit(*k)),
            // `int(3)`: how an integer constant prints (a size of an
            // inlined call, `k + 1` with `k` instantiated), read back.
            ExprKind::Prim(Prim::ToInt, args) if matches!(args[0].kind, ExprKind::Literal(k) | ExprKind::Int(k) if k.abs() <= Size::LIMIT) =>
            {
                let (ExprKind::Literal(k) | ExprKind::Int(k)) = args[0].kind else {
                    unreachable!("matched above")
                };
                Ok(Size::lit(k))
            }
            // Terms a pass builds may write a count as a real.
            ExprKind::Const(c) if c.fract() == 0.0 && c.abs() <= Size::LIMIT as f64 => {
                Ok(Size::lit(*c as i64))
            }
            ExprKind::Var(n) => match self.vars.get(n) {
                Some(VarInfo { is_size: true, .. }) => Ok(Size::var(n.clone())),
                _ => bad(),
            },
            ExprKind::Prim(Prim::Add | Prim::IAdd, args) => Ok(self
                .size_of(&args[0], what)?
                .plus(&self.size_of(&args[1], what)?)),
            ExprKind::Prim(Prim::Sub | Prim::ISub, args) => Ok(self
                .size_of(&args[0], what)?
                .add_scaled(&self.size_of(&args[1], what)?, -1)),
            ExprKind::Prim(Prim::Neg | Prim::INeg, args) => {
                Ok(self.size_of(&args[0], what)?.scale(-1))
            }
            ExprKind::Prim(Prim::Mul | Prim::IMul, args) => {
                let a = self.size_of(&args[0], what)?;
                let b = self.size_of(&args[1], what)?;
                match (a.as_literal(), b.as_literal()) {
                    (Some(k), _) => Ok(b.scale(k)),
                    (_, Some(k)) => Ok(a.scale(k)),
                    _ => bad(),
                }
            }
            ExprKind::Builtin(Builtin::Len, args) => Ok(self.array(&args[0], "`len`")?.1),
            _ => bad(),
        }
    }
}

/// Binds size variables of `param` (from `vars`, not yet in `subst`) by
/// matching it against `arg`: a parameter size `c + k·v` with one unbound
/// variable `v` and `k = ±1` determines `v`.
fn match_sizes(param: &Type, arg: &Type, vars: &[Name], subst: &mut HashMap<Name, Size>) {
    match (param, arg) {
        (Type::Array(pt, ps), Type::Array(at, asz)) => {
            let ps = ps.substitute(&|v| subst.get(v).cloned());
            let unbound: Vec<(&Name, i64)> = ps
                .terms
                .iter()
                .filter(|(v, _)| vars.contains(v) && !subst.contains_key(*v))
                .map(|(v, c)| (v, *c))
                .collect();
            if let [(v, k)] = unbound[..] {
                if k == 1 || k == -1 {
                    let mut rest = ps.clone();
                    rest.terms.remove(v);
                    // k·v + rest = asz  ⇒  v = k·(asz − rest)
                    let solved = asz.add_scaled(&rest, -1).scale(k);
                    subst.insert(v.clone(), solved);
                }
            }
            match_sizes(pt, at, vars, subst);
        }
        (Type::Tuple(ps), Type::Tuple(ts)) if ps.len() == ts.len() => {
            for (p, t) in ps.iter().zip(ts) {
                match_sizes(p, t, vars, subst);
            }
        }
        _ => {}
    }
}

/// Whether every scalar of `t` is a real (no integers, no conditions).
fn all_reals(t: &Type) -> bool {
    match t {
        Type::Real => true,
        Type::Array(e, _) => all_reals(e),
        Type::Tuple(ts) => ts.iter().all(all_reals),
        _ => false,
    }
}
