//! The reference interpreter: the call-by-value semantics of Appendix A.1
//! for every construct, over reals, tuples, nested arrays and closures.
//!
//! This is the semantics every other engine is tested against, so it is
//! written to be obviously right rather than fast: arrays are vectors of
//! values, the array operations are the loops of their definitions
//! (`scanl F z [a1..an] = [z, F(z,a1), …]`, `scanr F z [a1..an] = [r1, …,
//! rn, z]` with `r_i = F(r_(i+1), a_i)`), and sizes are checked at every call
//! of a definition and at every `map2`, with errors naming the sizes.
//!
//! Inputs: a type-checked module. Outputs: a value, or an [`EvalError`]
//! (never a panic) for what the type checker cannot rule out: lengths that
//! disagree at run time, an index out of bounds, a size too large to allocate.

use crate::deep::guard;
use crate::prim::{Prim, PrimKind};
use crate::schedule::{Action, Machine};
use crate::scope::Scope;
use crate::span::{Span, Spanned};
use crate::syntax::*;
use crate::types::CheckedModule;
use crate::value::{bind_sizes, FunValue, Value};
use std::collections::HashSet;
use std::sync::Arc;
use thiserror::Error;

/// How much memory one call may use.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// The largest array built (elements).
    pub max_array_len: usize,
    /// The most array elements allocated in all, so that a program cannot
    /// exhaust memory through many arrays below `max_array_len`.
    pub max_total_elements: usize,
    /// The most steps a `while` loop takes: one that would take more is
    /// stopped with an error (as natively, `gradlift_jit::Jit::max_iterations`).
    pub max_iterations: u64,
}

/// The default of [`Limits::max_iterations`] and of the JIT's limit.
pub const DEFAULT_MAX_ITERATIONS: u64 = 100_000_000;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_array_len: 1 << 28,
            max_total_elements: 1 << 29,
            max_iterations: DEFAULT_MAX_ITERATIONS,
        }
    }
}

/// A run-time error.
#[derive(Debug, Clone, Error, PartialEq)]
pub enum EvalError {
    /// Something went wrong at a place in the program.
    #[error("{message}")]
    At {
        /// What.
        message: String,
        /// Where.
        span: Span,
    },
    /// The arguments of the called function do not fit its parameters.
    #[error("{0}")]
    Arguments(String),
}

impl Spanned for EvalError {
    fn span(&self) -> Span {
        match self {
            EvalError::At { span, .. } => *span,
            EvalError::Arguments(_) => Span::DUMMY,
        }
    }
}

type EResult<T> = Result<T, EvalError>;

fn at<T>(message: impl Into<String>, span: Span) -> EResult<T> {
    Err(EvalError::At {
        message: message.into(),
        span,
    })
}

/// Calls definition `index` of `module` with `args` (one per parameter; a
/// size parameter is given as a whole real).
pub fn call(module: &CheckedModule, index: usize, args: &[Value]) -> EResult<Value> {
    call_with_limits(module, index, args, Limits::default())
}

/// [`call`] under the given memory limits.
pub fn call_with_limits(
    module: &CheckedModule,
    index: usize,
    args: &[Value],
    limits: Limits,
) -> EResult<Value> {
    let mut interp = Interpreter {
        module,
        env: Scope::new(),
        allocated: 0,
        limits,
    };
    interp.call_def(index, args.to_vec(), None)
}

/// Evaluates a single term `e` in which the variables `vars` are bound
/// (Target terms of the pipeline); definitions of `module` are callable.
pub fn eval_expr(module: &CheckedModule, vars: &[(Name, Value)], e: &Expr) -> EResult<Value> {
    eval_expr_with_limits(module, vars, e, Limits::default())
}

/// [`eval_expr`] under `limits`.
pub fn eval_expr_with_limits(
    module: &CheckedModule,
    vars: &[(Name, Value)],
    e: &Expr,
    limits: Limits,
) -> EResult<Value> {
    let mut interp = Interpreter {
        module,
        env: Scope::new(),
        allocated: 0,
        limits,
    };
    for (n, v) in vars {
        interp.env.push(n.clone(), v.clone());
    }
    interp.eval(e)
}

struct Interpreter<'m> {
    module: &'m CheckedModule,
    env: Scope<Value>,
    /// Array elements allocated so far.
    allocated: usize,
    limits: Limits,
}

/// The function argument of an array operation, resolved once.
enum Callee<'e> {
    Lambda(&'e [Param], &'e Expr),
    Value(Arc<FunValue>),
}

fn real(v: &Value, what: &str, span: Span) -> EResult<f64> {
    match v {
        Value::Real(x) => Ok(*x),
        _ => at(format!("{what}: expected a real"), span),
    }
}

fn array<'v>(v: &'v Value, what: &str, span: Span) -> EResult<&'v Arc<[Value]>> {
    match v {
        Value::Array(xs) => Ok(xs),
        _ => at(format!("{what}: expected an array"), span),
    }
}

/// A matrix of reals, its rows contiguous: (rows, columns, elements). The
/// columns are `columns` when given (the count a matrix of no rows has),
/// else the first row's length.
fn matrix(
    v: &Value,
    columns: Option<usize>,
    what: &str,
    span: Span,
) -> EResult<(usize, usize, Vec<f64>)> {
    let rows = array(v, what, span)?;
    let c = match (columns, rows.first()) {
        (Some(c), _) => c,
        (None, Some(row)) => array(row, what, span)?.len(),
        (None, None) => 0,
    };
    let mut out = Vec::with_capacity(rows.len() * c);
    for row in rows.iter() {
        let row = array(row, what, span)?;
        if row.len() != c {
            return at(
                format!(
                    "{what}: a row of {} elements in a matrix of {c} columns",
                    row.len()
                ),
                span,
            );
        }
        for x in row.iter() {
            out.push(real(x, what, span)?);
        }
    }
    Ok((rows.len(), c, out))
}

fn int(v: &Value, what: &str, span: Span) -> EResult<i64> {
    match v {
        Value::Int(k) => Ok(*k),
        _ => at(format!("{what}: expected an integer"), span),
    }
}

/// A count computed at run time: an integer in `0..=limit`.
fn count(v: &Value, limit: usize, what: &str, span: Span) -> EResult<usize> {
    match v {
        Value::Int(k) if *k < 0 => at(format!("{what}: the count {k} is negative"), span),
        Value::Int(k) if *k as u64 > limit as u64 => at(
            format!("{what}: the count {k} exceeds the interpreter's limit of {limit} elements"),
            span,
        ),
        Value::Int(k) => Ok(*k as usize),
        other => size(real(other, what, span)?, limit, what, span),
    }
}

/// A size computed at run time: a whole number in `0..=limit`.
fn size(x: f64, limit: usize, what: &str, span: Span) -> EResult<usize> {
    if x.fract() != 0.0 || x < 0.0 || x.is_nan() {
        return at(
            format!("{what}: the size {x} is not a whole number ≥ 0"),
            span,
        );
    }
    if x > limit as f64 {
        return at(
            format!("{what}: the size {x} exceeds the interpreter's limit of {limit} elements"),
            span,
        );
    }
    Ok(x as usize)
}

impl Interpreter<'_> {
    /// Accounts for a new array of `n` elements.
    fn allocate(&mut self, n: usize, span: Span) -> EResult<()> {
        self.allocated = self.allocated.saturating_add(n);
        let limit = self.limits.max_total_elements;
        if self.allocated > limit {
            return at(
                format!("the program allocates more than {limit} array elements, the interpreter's limit"),
                span,
            );
        }
        Ok(())
    }

    fn bind(&mut self, pat: &Pattern, v: Value) -> EResult<()> {
        match pat {
            Pattern::Var(n, _) => {
                self.env.push(n.clone(), v);
                Ok(())
            }
            Pattern::Wild(_) => Ok(()),
            Pattern::Tuple(ps, span) => match v {
                Value::Tuple(xs) if xs.len() == ps.len() => {
                    for (p, x) in ps.iter().zip(xs.iter()) {
                        self.bind(p, x.clone())?;
                    }
                    Ok(())
                }
                _ => at("this pattern does not match the value", *span),
            },
        }
    }

    fn call_def(&mut self, index: usize, args: Vec<Value>, span: Option<Span>) -> EResult<Value> {
        let def = &self.module.module.defs[index];
        let sig = &self.module.sigs[index];
        let sizes = bind_sizes(&def.name, sig, &args).map_err(|e| match span {
            Some(span) => EvalError::At { message: e.0, span },
            None => EvalError::Arguments(e.0),
        })?;
        let outer = std::mem::take(&mut self.env);
        for (n, x) in sizes {
            self.env.push(n, Value::Int(x));
        }
        for ((pname, pty), a) in sig.params.iter().zip(args) {
            if pty.is_some() {
                self.env.push(pname.clone(), a);
            }
        }
        let r = self.eval(&def.body);
        self.env = outer;
        r
    }

    fn apply_value(&mut self, f: &FunValue, args: Vec<Value>, span: Span) -> EResult<Value> {
        match f {
            FunValue::Prim(p) if p.info().kind() == PrimKind::Int => {
                let mut ks = Vec::with_capacity(args.len());
                for a in &args {
                    ks.push(int(a, &format!("argument of `{p}`"), span)?);
                }
                match p.eval_int(&ks) {
                    Some(k) => Ok(Value::Int(k)),
                    None => at(format!("`{p}` by zero"), span),
                }
            }
            FunValue::Prim(p) => {
                let mut xs = Vec::with_capacity(args.len());
                for a in &args {
                    xs.push(real(a, &format!("argument of `{p}`"), span)?);
                }
                Ok(Value::Real(p.eval_real(&xs)))
            }
            FunValue::Def(i) => self.call_def(*i, args, Some(span)),
            FunValue::Closure {
                params,
                body,
                captured,
            } => {
                if params.len() != args.len() {
                    return at(
                        crate::span::arity_message("the function", params.len(), args.len()),
                        span,
                    );
                }
                let outer = std::mem::take(&mut self.env);
                for (n, v) in captured {
                    self.env.push(n.clone(), v.clone());
                }
                let mut r = Ok(());
                for (p, a) in params.iter().zip(args) {
                    r = r.and_then(|()| self.bind(&p.pat, a));
                }
                let r = r.and_then(|()| self.eval(body));
                self.env = outer;
                r
            }
        }
    }

    fn callee<'e>(&mut self, f: &'e Expr) -> EResult<Callee<'e>> {
        match &f.kind {
            ExprKind::Lambda(params, body) => Ok(Callee::Lambda(params, body)),
            _ => match self.eval(f)? {
                Value::Fun(fv) => Ok(Callee::Value(fv)),
                _ => at("expected a function", f.span),
            },
        }
    }

    /// The identity of a `reduce`'s operator when it combines reals in
    /// lanes ([`crate::reduce_order`]): the primitive written in place, or
    /// a primitive function value.
    fn lanes(&self, callee: &Callee<'_>, f: &Expr) -> Option<f64> {
        let p = match callee {
            Callee::Value(fv) => match &**fv {
                FunValue::Prim(p) => *p,
                FunValue::Closure { params, body, .. } => {
                    crate::reduce_order::lane_lambda(params, body)?
                }
                FunValue::Def(_) => return None,
            },
            Callee::Lambda(..) => crate::reduce_order::lane_prim(f)?,
        };
        crate::reduce_order::lane_identity(p)
    }

    fn invoke(&mut self, callee: &Callee<'_>, args: Vec<Value>, span: Span) -> EResult<Value> {
        match callee {
            Callee::Lambda(params, body) => {
                let mark = self.env.mark();
                let mut r = Ok(());
                for (p, a) in params.iter().zip(args) {
                    r = r.and_then(|()| self.bind(&p.pat, a));
                }
                let r = r.and_then(|()| self.eval(body));
                self.env.pop_to(mark);
                r
            }
            Callee::Value(fv) => self.apply_value(fv, args, span),
        }
    }

    fn eval(&mut self, e: &Expr) -> EResult<Value> {
        guard(|| self.eval_inner(e))
    }

    fn eval_inner(&mut self, e: &Expr) -> EResult<Value> {
        match &e.kind {
            ExprKind::Const(c) => Ok(Value::Real(*c)),
            ExprKind::Int(k) => Ok(Value::Int(*k)),
            ExprKind::Literal(_) => at(
                "a literal whose type is not decided (the module is not checked)",
                e.span,
            ),
            ExprKind::Var(n) => match self.env.get(n) {
                Some(v) => Ok(v.clone()),
                None => match self.module.index_of(n) {
                    Some(i) => Ok(Value::Fun(Arc::new(FunValue::Def(i)))),
                    None => at(format!("unbound variable `{n}`"), e.span),
                },
            },
            ExprKind::Prim(p, args) => self.prim(*p, args, e.span),
            ExprKind::PrimFn(p) => Ok(Value::Fun(Arc::new(FunValue::Prim(*p)))),
            // Expanded into ordinary terms before a program runs
            // (`gradlift_ad::derivatives`); a module evaluated without that
            // expansion cannot run it.
            ExprKind::Derive(d, ..) => at(
                format!(
                    "`{}` runs only in a program whose derivatives are expanded (gradlift_ad::pipeline::expanded)",
                    d.name()
                ),
                e.span,
            ),
            ExprKind::Let { .. } => {
                let mark = self.env.mark();
                let r = self.let_chain(e);
                self.env.pop_to(mark);
                r
            }
            ExprKind::Tuple(es) => {
                let mut vs = Vec::with_capacity(es.len());
                for x in es {
                    vs.push(self.eval(x)?);
                }
                Ok(Value::tuple(vs))
            }
            ExprKind::Proj(inner, k) => match self.eval(inner)? {
                Value::Tuple(xs) if *k < xs.len() => Ok(xs[*k].clone()),
                _ => at(
                    format!("projection `.{k}` of a value that has no component {k}"),
                    e.span,
                ),
            },
            ExprKind::ArrayLit(es) => {
                self.allocate(es.len(), e.span)?;
                let mut vs = Vec::with_capacity(es.len());
                for x in es {
                    vs.push(self.eval(x)?);
                }
                Ok(Value::array(vs))
            }
            ExprKind::Index(inner, k) => {
                let v = self.eval(inner)?;
                let xs = array(&v, "indexing", inner.span)?;
                let n = xs.len() as i64;
                let i = if *k < 0 { n + k } else { *k };
                if i < 0 || i >= n {
                    return at(
                        format!("index {k} is out of bounds for an array of length {n}"),
                        e.span,
                    );
                }
                Ok(xs[i as usize].clone())
            }
            ExprKind::If(c, t, f) => match self.eval(c)? {
                Value::Bool(true) => self.eval(t),
                Value::Bool(false) => self.eval(f),
                _ => at("the condition of `if` is not a condition", c.span),
            },
            ExprKind::Lambda(params, body) => {
                let mut free = HashSet::new();
                free_vars_lambda(params, body, &mut free);
                let captured = free
                    .into_iter()
                    .filter_map(|n| self.env.get(&n).map(|v| (n.clone(), v.clone())))
                    .collect();
                Ok(Value::Fun(Arc::new(FunValue::Closure {
                    params: params.clone(),
                    body: body.clone(),
                    captured,
                })))
            }
            ExprKind::Apply(f, args) => {
                let fv = self.eval(f)?;
                let mut vs = Vec::with_capacity(args.len());
                for a in args {
                    vs.push(self.eval(a)?);
                }
                match fv {
                    Value::Fun(fv) => self.apply_value(&fv, vs, e.span),
                    _ => at("this is not a function", f.span),
                }
            }
            ExprKind::ArrayOp(op, f, args) => self.array_op(*op, f, args, e.span),
            ExprKind::Builtin(b, args) => self.builtin(*b, args, e.span),
        }
    }

    fn let_chain(&mut self, mut e: &Expr) -> EResult<Value> {
        while let ExprKind::Let {
            pat, value, body, ..
        } = &e.kind
        {
            let v = self.eval(value)?;
            self.bind(pat, v)?;
            e = body;
        }
        self.eval(e)
    }

    fn prim(&mut self, p: Prim, args: &[Expr], span: Span) -> EResult<Value> {
        let info = p.info();
        match info.kind() {
            PrimKind::Real => {
                let mut xs = [0.0; 2];
                for (i, a) in args.iter().enumerate() {
                    let v = self.eval(a)?;
                    xs[i] = real(&v, &format!("operand of `{p}`"), a.span)?;
                }
                Ok(Value::Real(p.eval_real(&xs[..args.len()])))
            }
            PrimKind::Compare => {
                let a = self.eval(&args[0])?;
                let b = self.eval(&args[1])?;
                let a = real(&a, "comparison", span)?;
                let b = real(&b, "comparison", span)?;
                Ok(Value::Bool(p.eval_compare(a, b)))
            }
            PrimKind::Int => {
                let mut ks = [0; 2];
                for (i, a) in args.iter().enumerate() {
                    let v = self.eval(a)?;
                    ks[i] = int(&v, &format!("operand of `{p}`"), a.span)?;
                }
                match p.eval_int(&ks[..args.len()]) {
                    Some(k) => Ok(Value::Int(k)),
                    None => at(format!("`{p}` by zero"), span),
                }
            }
            PrimKind::IntCompare => {
                let a = self.eval(&args[0])?;
                let b = self.eval(&args[1])?;
                let a = int(&a, "comparison", span)?;
                let b = int(&b, "comparison", span)?;
                Ok(Value::Bool(p.eval_int_compare(a, b)))
            }
            PrimKind::ToReal => {
                let v = self.eval(&args[0])?;
                Ok(Value::Real(int(&v, "`real`", span)? as f64))
            }
            PrimKind::ToInt => {
                let v = self.eval(&args[0])?;
                let x = real(&v, "`int`", span)?;
                match crate::prim::to_int(x) {
                    Some(k) => Ok(Value::Int(k)),
                    None => at(
                        format!(
                            "`int` of {}, which is not within the integers (±2^63)",
                            crate::printer::format_real(x)
                        ),
                        span,
                    ),
                }
            }
            PrimKind::Logic => {
                let mut bs = Vec::with_capacity(args.len());
                for a in args {
                    match self.eval(a)? {
                        Value::Bool(b) => bs.push(b),
                        _ => return at(format!("operand of `{p}` is not a condition"), a.span),
                    }
                }
                Ok(Value::Bool(match p {
                    Prim::And => bs[0] && bs[1],
                    Prim::Or => bs[0] || bs[1],
                    Prim::Not => !bs[0],
                    _ => unreachable!("logic primitives are and, or, not"),
                }))
            }
        }
    }

    fn array_op(&mut self, op: ArrayOp, f: &Expr, args: &[Expr], span: Span) -> EResult<Value> {
        let callee = self.callee(f)?;
        match op {
            ArrayOp::Map => {
                let a = self.eval(&args[0])?;
                let xs = array(&a, "`map`", args[0].span)?;
                self.allocate(xs.len(), span)?;
                let mut out = Vec::with_capacity(xs.len());
                for x in xs.iter() {
                    out.push(self.invoke(&callee, vec![x.clone()], span)?);
                }
                Ok(Value::array(out))
            }
            ArrayOp::Map2 => {
                let a = self.eval(&args[0])?;
                let b = self.eval(&args[1])?;
                let xs = array(&a, "`map2`", args[0].span)?;
                let ys = array(&b, "`map2`", args[1].span)?;
                if xs.len() != ys.len() {
                    return at(
                        format!(
                            "`map2` needs arrays of the same length, found lengths {} and {}",
                            xs.len(),
                            ys.len()
                        ),
                        span,
                    );
                }
                self.allocate(xs.len(), span)?;
                let mut out = Vec::with_capacity(xs.len());
                for (x, y) in xs.iter().zip(ys.iter()) {
                    out.push(self.invoke(&callee, vec![x.clone(), y.clone()], span)?);
                }
                Ok(Value::array(out))
            }
            ArrayOp::Revfold(schedule) => self.revfold(schedule, &callee, args, span),
            ArrayOp::Revwhile(schedule) => self.revfold(schedule, &callee, args, span),
            ArrayOp::While => {
                let mut state = self.eval(&args[0])?;
                let mut steps: u64 = 0;
                loop {
                    let r = self.invoke(&callee, vec![state.clone()], span)?;
                    let Value::Tuple(parts) = r else {
                        return at("the step of a `while` loop must return a pair", span);
                    };
                    let [go, next] = &parts[..] else {
                        return at("the step of a `while` loop must return a pair", span);
                    };
                    if matches!(go, Value::Int(0)) {
                        return Ok(state);
                    }
                    steps += 1;
                    if steps > self.limits.max_iterations {
                        return at(
                            format!(
                                "the loop did not stop within {} steps, the iteration limit",
                                self.limits.max_iterations
                            ),
                            span,
                        );
                    }
                    state = next.clone();
                }
            }
            ArrayOp::Reduce | ArrayOp::Foldl(_) | ArrayOp::Scanl | ArrayOp::Scanr => {
                let z = self.eval(&args[0])?;
                let a = self.eval(&args[1])?;
                let xs = array(&a, op.name(), args[1].span)?;
                match op {
                    ArrayOp::Reduce => {
                        if let (Some(identity), Value::Real(z0)) = (self.lanes(&callee, f), &z) {
                            if xs.iter().all(|x| matches!(x, Value::Real(_))) {
                                return crate::reduce_order::reduce_in_lanes(
                                    identity,
                                    *z0,
                                    xs.len(),
                                    |i| real(&xs[i], "reduce", span),
                                    |a, b| {
                                        let v = self.invoke(
                                            &callee,
                                            vec![Value::Real(a), Value::Real(b)],
                                            span,
                                        )?;
                                        real(&v, "reduce", span)
                                    },
                                )
                                .map(Value::Real);
                            }
                        }
                        let mut acc = z;
                        for x in xs.iter() {
                            acc = self.invoke(&callee, vec![acc, x.clone()], span)?;
                        }
                        Ok(acc)
                    }
                    ArrayOp::Foldl(_) => {
                        let mut acc = z;
                        for x in xs.iter() {
                            acc = self.invoke(&callee, vec![acc, x.clone()], span)?;
                        }
                        Ok(acc)
                    }
                    ArrayOp::Scanl => {
                        self.allocate(xs.len() + 1, span)?;
                        let mut out = Vec::with_capacity(xs.len() + 1);
                        out.push(z.clone());
                        let mut acc = z;
                        for x in xs.iter() {
                            acc = self.invoke(&callee, vec![acc, x.clone()], span)?;
                            out.push(acc.clone());
                        }
                        Ok(Value::array(out))
                    }
                    ArrayOp::Scanr => {
                        self.allocate(xs.len() + 1, span)?;
                        let mut out = vec![z.clone(); xs.len() + 1];
                        let mut acc = z;
                        for (i, x) in xs.iter().enumerate().rev() {
                            acc = self.invoke(&callee, vec![acc, x.clone()], span)?;
                            out[i] = acc.clone();
                        }
                        Ok(Value::array(out))
                    }
                    ArrayOp::Map
                    | ArrayOp::Map2
                    | ArrayOp::Revfold(_)
                    | ArrayOp::While
                    | ArrayOp::Revwhile(_) => {
                        unreachable!("handled above")
                    }
                }
            }
        }
    }

    /// `revfold VJP STEP v A z f`, run by its checkpoint schedule; and
    /// `revwhile VJP STEP v k z f`, the same over `k` steps without
    /// elements (their `()`s), whose result leaves out the elements'
    /// cotangents.
    fn revfold(
        &mut self,
        schedule: Schedule,
        vjp: &Callee<'_>,
        args: &[Expr],
        span: Span,
    ) -> EResult<Value> {
        let step = self.callee(&args[0])?;
        let mut state = self.eval(&args[1])?;
        let a = self.eval(&args[2])?;
        let mut cotangent = self.eval(&args[3])?;
        let mut acc = self.eval(&args[4])?;
        // `revwhile` steps over a count with no elements (each is `()`) and
        // keeps none of their cotangents: only the snapshots take memory.
        let (xs, n) = match &a {
            Value::Int(k) => (None, u64::try_from(*k).unwrap_or(0)),
            _ => {
                let xs = array(&a, "`revfold`", args[2].span)?;
                (Some(xs), xs.len() as u64)
            }
        };
        let unit = Value::tuple(Vec::new());
        let element = |i: u64| match xs {
            Some(xs) => xs[i as usize].clone(),
            None => unit.clone(),
        };
        let kept = xs.map_or(0, |xs| xs.len());
        self.allocate(kept + schedule.slots(n) as usize, span)?;
        let mut slots: Vec<Option<Value>> = vec![None; schedule.slots(n) as usize];
        let mut out: Vec<Value> = vec![Value::Real(0.0); kept];
        let mut buf = vec![0i64; schedule.words(n) as usize];
        let mut machine = Machine::start(schedule, n, &mut buf);
        loop {
            match machine.next() {
                Action::Done => break,
                Action::Advance { from, count } => {
                    for i in from..from + count {
                        state = self.invoke(&step, vec![state, element(i)], span)?;
                    }
                }
                Action::Store(k) => slots[k as usize] = Some(state.clone()),
                Action::Restore(k) => {
                    state = slots[k as usize].clone().expect("a stored slot");
                }
                Action::Reverse(i) => {
                    let r =
                        self.invoke(vjp, vec![state.clone(), element(i), cotangent, acc], span)?;
                    let Value::Tuple(parts) = r else {
                        return at("the function of `revfold` must return a triple", span);
                    };
                    let [g, e, f] = &parts[..] else {
                        return at("the function of `revfold` must return a triple", span);
                    };
                    (cotangent, acc) = (g.clone(), f.clone());
                    if xs.is_some() {
                        out[i as usize] = e.clone();
                    }
                }
            }
        }
        if xs.is_none() {
            return Ok(Value::tuple(vec![cotangent, acc]));
        }
        Ok(Value::tuple(vec![cotangent, Value::array(out), acc]))
    }

    /// `matmul(n, A, B)`, each operand written `transpose(c, M)` read from
    /// `M` by columns ([`crate::kernels::operand`]), by the kernel native
    /// code calls.
    fn matmul(&mut self, args: &[Expr], span: Span) -> EResult<Value> {
        use crate::kernels::{operand, Layout};
        let limit = self.limits.max_array_len;
        let n = count(&self.eval(&args[0])?, limit, "`matmul`", span)?;
        // An operand: the stored matrix, its layout, and the operand's rows
        // and columns (`None`: a matrix of no rows gives no count).
        type Operand = (Vec<f64>, Layout, usize, Option<usize>);
        let read =
            |this: &mut Self, e: &Expr, columns: Option<usize>, what: &str| -> EResult<Operand> {
                let (m, layout, c) = operand(e);
                Ok(match c {
                    None => {
                        let (rows, cols, data) = matrix(&this.eval(m)?, columns, what, span)?;
                        let cols = (rows > 0 || columns.is_some()).then_some(cols);
                        (data, layout, rows, cols)
                    }
                    Some(c) => {
                        let c = count(&this.eval(c)?, limit, "`transpose`", span)?;
                        let (rows, _, data) = matrix(&this.eval(m)?, Some(c), what, span)?;
                        (data, layout, c, Some(rows))
                    }
                })
            };
        let (a, la, m, ka) = read(self, &args[1], None, "the first matrix of `matmul`")?;
        let columns = match operand(&args[2]).1 {
            Layout::Rows => Some(n),
            Layout::Columns => None,
        };
        let (b, lb, k, nb) = read(self, &args[2], columns, "the second matrix of `matmul`")?;
        if nb != Some(n) {
            return at(
                format!(
                    "`matmul` with a second matrix of {} columns given the count {n}",
                    nb.unwrap_or(0)
                ),
                span,
            );
        }
        if let Some(ka) = ka.filter(|&ka| ka != k) {
            return at(
                format!("`matmul` of a matrix of {ka} columns and a matrix of {k} rows"),
                span,
            );
        }
        self.allocate(m * n, span)?;
        let mut c = vec![0.0; m * n];
        crate::kernels::matmul((m, k, n), (&a, la), (&b, lb), &mut c);
        Ok(Value::array(
            (0..m)
                .map(|i| Value::reals(&c[i * n..(i + 1) * n]))
                .collect(),
        ))
    }

    fn builtin(&mut self, b: Builtin, args: &[Expr], span: Span) -> EResult<Value> {
        if b == Builtin::MatMul {
            return self.matmul(args, span);
        }
        let vs = args
            .iter()
            .map(|a| self.eval(a))
            .collect::<EResult<Vec<_>>>()?;
        match b {
            Builtin::Len => Ok(Value::Int(array(&vs[0], "`len`", span)?.len() as i64)),
            Builtin::Iota => {
                let limit = self.limits.max_array_len;
                let n = count(&vs[0], limit, "`iota`", span)?;
                self.allocate(n, span)?;
                Ok(Value::Array((0..n).map(|i| Value::Int(i as i64)).collect()))
            }
            Builtin::Replicate => {
                let limit = self.limits.max_array_len;
                let n = count(&vs[0], limit, "`replicate`", span)?;
                self.allocate(n, span)?;
                Ok(Value::array(vec![vs[1].clone(); n]))
            }
            Builtin::Concat => {
                let xs = array(&vs[0], "`concat`", span)?;
                let ys = array(&vs[1], "`concat`", span)?;
                self.allocate(xs.len() + ys.len(), span)?;
                Ok(Value::Array(xs.iter().chain(ys.iter()).cloned().collect()))
            }
            Builtin::Take | Builtin::Drop => {
                let what = format!("`{}`", b.name());
                let k = count(&vs[0], usize::MAX, &what, span)?;
                let xs = array(&vs[1], &what, span)?;
                if k > xs.len() {
                    return at(
                        format!("{what}: {k} elements of an array of length {}", xs.len()),
                        span,
                    );
                }
                let kept = if b == Builtin::Take {
                    &xs[..k]
                } else {
                    &xs[k..]
                };
                self.allocate(kept.len(), span)?;
                Ok(Value::Array(kept.into()))
            }
            Builtin::Shift1L | Builtin::Shift1R => {
                let xs = array(&vs[0], b.name(), span)?;
                if xs.is_empty() {
                    return Ok(vs[0].clone());
                }
                let kept = if b == Builtin::Shift1L {
                    &xs[1..]
                } else {
                    &xs[..xs.len() - 1]
                };
                Ok(Value::Array(kept.into()))
            }
            Builtin::Get => {
                let xs = array(&vs[0], "indexing", span)?;
                let i = int(&vs[1], "an index", span)?;
                match position(i, xs.len()) {
                    Some(j) => Ok(xs[j].clone()),
                    None => at(
                        format!(
                            "index {i} is out of bounds for an array of length {}",
                            xs.len()
                        ),
                        span,
                    ),
                }
            }
            Builtin::Gather => {
                let xs = array(&vs[0], "`gather`", span)?;
                let idx = array(&vs[1], "`gather`", span)?;
                self.allocate(idx.len(), span)?;
                let mut out = Vec::with_capacity(idx.len());
                for (j, v) in idx.iter().enumerate() {
                    let i = int(v, "`gather`", span)?;
                    let Some(p) = position(i, xs.len()) else {
                        return at(
                            format!(
                                "`gather`: index {i} (element {j} of the indices) is out of bounds for an array of length {}",
                                xs.len()
                            ),
                            span,
                        );
                    };
                    out.push(xs[p].clone());
                }
                Ok(Value::array(out))
            }
            Builtin::Transpose => {
                let limit = self.limits.max_array_len;
                let c = count(&vs[0], limit, "`transpose`", span)?;
                let rows = array(&vs[1], "`transpose`", span)?;
                self.allocate(c * rows.len(), span)?;
                let mut columns: Vec<Vec<Value>> = vec![Vec::with_capacity(rows.len()); c];
                for row in rows.iter() {
                    let row = array(row, "`transpose`", span)?;
                    if row.len() != c {
                        return at(
                            format!(
                                "`transpose`: a row of {} elements in a matrix of {c} columns",
                                row.len()
                            ),
                            span,
                        );
                    }
                    for (column, x) in columns.iter_mut().zip(row.iter()) {
                        column.push(x.clone());
                    }
                }
                Ok(Value::array(
                    columns.into_iter().map(Value::array).collect(),
                ))
            }
            Builtin::MatMul => unreachable!("`matmul` reads its operands in place: Interp::matmul"),
            Builtin::ReduceByIndex(p) => {
                let dest = array(&vs[0], "`reduce_by_index`", span)?;
                let idx = array(&vs[1], "`reduce_by_index`", span)?;
                let vals = array(&vs[2], "`reduce_by_index`", span)?;
                let k = dest.len();
                self.allocate(k, span)?;
                let mut bins: Vec<Value> = dest.to_vec();
                for (j, (v, x)) in idx.iter().zip(vals.iter()).enumerate() {
                    let i = int(v, "`reduce_by_index`", span)?;
                    let Some(b) = position(i, k) else {
                        return at(
                            format!("`reduce_by_index`: index {i} (element {j} of the indices) is out of bounds for {k} bins"),
                            span,
                        );
                    };
                    bins[b] = combine(p, &bins[b], x);
                }
                Ok(Value::array(bins))
            }
        }
    }
}

/// The position an index `i` names in an array of length `n`: `i` itself
/// for `0 ≤ i < n`, `n + i` for `-n ≤ i < 0` (counting from the end);
/// `None` otherwise. Every computed index of the language is read this way.
pub fn position(i: i64, n: usize) -> Option<usize> {
    let n = i64::try_from(n).ok()?;
    let p = if i < 0 { i.checked_add(n)? } else { i };
    (0..n).contains(&p).then_some(p as usize)
}

/// `a op b` component by component, for the operators of
/// `reduce_by_index` (the type checker gives `*`, `min`, `max` reals only).
fn combine(p: Prim, a: &Value, b: &Value) -> Value {
    match (a, b) {
        (Value::Real(x), Value::Real(y)) => Value::Real(p.eval_real(&[*x, *y])),
        (Value::Tuple(xs), Value::Tuple(ys)) => Value::Tuple(
            xs.iter()
                .zip(ys.iter())
                .map(|(x, y)| combine(p, x, y))
                .collect(),
        ),
        (Value::Array(xs), Value::Array(ys)) => Value::Array(
            xs.iter()
                .zip(ys.iter())
                .map(|(x, y)| combine(p, x, y))
                .collect(),
        ),
        _ => a.clone(),
    }
}

/// The free variables of a lambda.
fn free_vars_lambda(params: &[Param], body: &Expr, out: &mut HashSet<Name>) {
    let mut bound: Vec<Name> = Vec::new();
    for p in params {
        p.pat.names(&mut bound);
    }
    let mut scope: Scope<()> = Scope::new();
    for n in bound {
        scope.push(n, ());
    }
    free_vars(body, &mut scope, out);
}

/// Adds to `out` the variables of `e` not bound in `scope` or within `e`.
pub fn free_vars(e: &Expr, scope: &mut Scope<()>, out: &mut HashSet<Name>) {
    guard(|| match &e.kind {
        ExprKind::Var(n) => {
            if scope.get(n).is_none() {
                out.insert(n.clone());
            }
        }
        ExprKind::Let { .. } => {
            let mark = scope.mark();
            let mut cur = e;
            while let ExprKind::Let {
                pat, value, body, ..
            } = &cur.kind
            {
                free_vars(value, scope, out);
                let mut names = Vec::new();
                pat.names(&mut names);
                for n in names {
                    scope.push(n, ());
                }
                cur = body;
            }
            free_vars(cur, scope, out);
            scope.pop_to(mark);
        }
        ExprKind::Lambda(params, body) => {
            let mark = scope.mark();
            for p in params {
                let mut names = Vec::new();
                p.pat.names(&mut names);
                for n in names {
                    scope.push(n, ());
                }
            }
            free_vars(body, scope, out);
            scope.pop_to(mark);
        }
        _ => {
            for c in e.children() {
                free_vars(c, scope, out);
            }
        }
    })
}
