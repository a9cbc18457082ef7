//! The direct route, D^ρ_{Γ;Y} of Figure 5: Source → Target.
//!
//! Input: a [`Closed`] term (inlined, every binder unique, every function
//! argument a lambda). Output: a Target term computing `(value, gradient)`,
//! the gradient a tuple with one cotangent per requested parameter (a single
//! cotangent when one parameter is requested).
//!
//! Figure 5 returns, for each subterm, its primal value and a continuation
//! `Y' : (Γ adjoints, z) → ρ` that adds the subterm's contribution to the
//! adjoints of Γ and calls the enclosing continuation exactly once
//! (Lemma 5.1). Read in evaluation order, the continuations form a chain:
//! each is the identity on Γ plus a few sparse updates, then a call of the
//! previous one (the paper's Insight 2). This module builds that chain from
//! a forward walk that names every intermediate value (an A-normal form of
//! the primal, the `let x, Y₁ = D(e₁)` bindings of Figure 5) and records one
//! `Step` per construct; the reverse sweep then replays the steps in
//! reverse. Two constructions of the continuations are offered:
//!
//! - [`Construction::Sparse`] (the default) keeps the continuation's
//!   argument — the adjoints of Γ — as a map from variables to cotangents,
//!   applies each step's update to it as the term is built (β-reduction and
//!   forward substitution at construction time), and emits only the updates
//!   themselves as `let` bindings. Zero cotangents stay symbolic and steps
//!   whose output cotangent is zero are skipped. The output is linear in the
//!   size of the input.
//! - [`Construction::Literal`] emits every continuation as a `fun` over the
//!   whole context, `let Y_i = fun (x⃗, z) -> … Y_{i-1}(x⃗')`, and the final
//!   `Y_m(0⃗, 1)`, as Figure 5 prints them; its size is quadratic in the
//!   length of a `let` chain. Partial evaluation reduces it to the sparse
//!   form; tests check that both give the same gradients.
//!
//! Where the extracted figure is garbled or wrong, the module follows the
//! corrections of figures.md: the continuation names and arities of E6, the
//! reduce rule at n = 0 of E5, the free-variable term of Fig 13 (E2). The
//! rules of each construct live in `rules/`, each with its derivation.

use crate::adjoint::{is_atom, Adj};
use crate::inline::Closed;
use crate::rules::fold::{known_monoid, Monoid};
use gradlift_lang::build::*;
use gradlift_lang::deep::guard;
use gradlift_lang::interp::free_vars;
use gradlift_lang::names::{FxMap, FxSet, NameSupply};
use gradlift_lang::scope::Scope;
use gradlift_lang::syntax::*;
use gradlift_lang::types::Typer;
use gradlift_lang::{Prim, Span, Spanned};
use std::collections::{HashMap, HashSet};
use thiserror::Error;

/// How continuations are built.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Construction {
    /// Identity-plus-updates, applied as built: linear size.
    #[default]
    Sparse,
    /// One `fun` over the whole context per step, as Figure 5 prints it.
    Literal,
}

/// A term differentiation cannot handle.
#[derive(Debug, Clone, Error, PartialEq)]
pub enum AdError {
    /// A construct without a reverse rule.
    #[error("cannot differentiate {what}")]
    Unsupported {
        /// The construct.
        what: String,
        /// Where.
        span: Span,
    },
    /// The function does not return a real.
    #[error("a gradient needs a function that returns `R`, but `{name}` returns `{ty}`")]
    NotScalar {
        /// The function.
        name: Name,
        /// Its result type.
        ty: Type,
    },
    /// `--wrt` names something that is not a parameter.
    #[error("`{0}` is not a parameter that can be differentiated")]
    UnknownParameter(Name),
    /// `--wrt` names a parameter without reals.
    #[error("`{name}` has type `{ty}`, which holds no reals: integers are not differentiated")]
    IntegerParameter {
        /// The parameter.
        name: Name,
        /// Its type.
        ty: Type,
    },
    /// Simplification failed (a broken invariant of the gradient program).
    #[error("simplifying the gradient program: {0}")]
    Simplify(#[from] crate::simplify::SimplifyError),
    /// A derivative operator that cannot be expanded.
    #[error("{message}")]
    Derivative {
        /// What is wrong.
        message: String,
        /// Where.
        span: Span,
    },
    /// A function value that inlining could not remove (see
    /// [`crate::inline::first_order`]).
    #[error("{message}")]
    FunctionValue {
        /// What is wrong and what to write instead.
        message: String,
        /// Where.
        span: Span,
    },
}

impl Spanned for AdError {
    fn span(&self) -> Span {
        match self {
            AdError::Unsupported { span, .. }
            | AdError::FunctionValue { span, .. }
            | AdError::Derivative { span, .. } => *span,
            AdError::Simplify(e) => e.span(),
            AdError::NotScalar { .. }
            | AdError::UnknownParameter(_)
            | AdError::IntegerParameter { .. } => Span::DUMMY,
        }
    }
}

pub(crate) type AdResult<T> = Result<T, AdError>;

/// Which transformation produces the reverse pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Route {
    /// Source → UNF → D_ρ → UNF⁻¹ (Figures 8–10).
    #[default]
    Unf,
    /// D^ρ_{Γ;Y} of Figure 5.
    Direct,
}

/// The gradient of `closed` with respect to the parameters `wrt` by the
/// direct route: a term returning `(value, gradient)`.
pub fn reverse(closed: &Closed, wrt: &[Name], construction: Construction) -> AdResult<Expr> {
    let wrt = check_wrt(closed, wrt)?;
    let mut d = Deriver::new(closed, Route::Direct);
    d.differentiate_only(closed, &wrt);
    let mut tape = Tape::default();
    let (value, _) = d.forward(&mut tape, &closed.body)?;
    d.finish(tape, value, closed, &wrt, construction)
}

/// The parameters `wrt` with their types, checked.
pub(crate) fn check_wrt(closed: &Closed, wrt: &[Name]) -> AdResult<Vec<(Name, Type)>> {
    for w in wrt {
        match closed.params.iter().find(|(p, t)| p == w && t.is_some()) {
            None => return Err(AdError::UnknownParameter(w.clone())),
            Some((_, Some(t))) if !has_reals(t) => {
                return Err(AdError::IntegerParameter {
                    name: w.clone(),
                    ty: t.clone(),
                })
            }
            Some(_) => {}
        }
    }
    if closed.ret != Type::Real {
        return Err(AdError::NotScalar {
            name: closed.name.clone(),
            ty: closed.ret.clone(),
        });
    }
    Ok(differentiated(&closed.context(), Some(wrt)))
}

/// Of a function's value parameters `params`, in order, those a gradient
/// with respect to `wrt` differentiates: the ones named (each once), or
/// by default every one that holds reals. The gradient has one cotangent
/// for each, in this order. The one statement of the rule: the pipeline
/// and the callers that split a gradient's result both ask it.
pub fn differentiated(params: &[(Name, Type)], wrt: Option<&[Name]>) -> Vec<(Name, Type)> {
    params
        .iter()
        .filter(|(n, t)| match wrt {
            Some(wrt) => wrt.contains(n),
            None => has_reals(t),
        })
        .cloned()
        .collect()
}

/// Whether a value of type `t` holds reals (and so may carry a cotangent).
pub fn has_reals(t: &Type) -> bool {
    match t {
        Type::Real => true,
        Type::Int | Type::Bool | Type::Fun(..) => false,
        Type::Tuple(ts) => ts.iter().any(has_reals),
        Type::Array(t, _) => has_reals(t),
    }
}

/// Wraps `body` in the bindings, first binding outermost.
pub(crate) fn lets(binds: Vec<(Pattern, Expr)>, body: Expr) -> Expr {
    binds
        .into_iter()
        .rev()
        .fold(body, |acc, (p, v)| let_in(p, v, acc))
}

/// One construct of the forward pass, named `out`, and what its reverse
/// needs: the atoms (variables or constants) it was applied to.
pub(crate) struct Step {
    pub out: Name,
    pub ty: Type,
    pub kind: StepKind,
}

/// An argument of a step: an atom and its type.
pub(crate) type Arg = (Expr, Type);

pub(crate) enum StepKind {
    /// `out = p(args)`.
    Prim(Prim, Vec<Expr>),
    /// `out = (args)`.
    Tuple(Vec<Arg>),
    /// `out = of.k`.
    Proj(Arg, usize),
    /// `out = [args]`.
    ArrayLit(Vec<Arg>),
    /// `out = of[k]`.
    Index(Arg, i64),
    /// `out = b(args)` for `replicate`, `concat`, `take`, `drop`, shifts;
    /// a size argument is kept as written.
    Builtin(Builtin, Vec<Arg>),
    /// Nothing flows back (`len`, `iota`, constants).
    Constant,
    /// `out = x`: a copy (`var_{T;i}` of UNF).
    Copy(Expr),
    /// `out = if cond then a else b`, branches kept whole (§7.2).
    If(Expr, Expr, Expr),
    /// `out = op (params. body) args`; for folds `states` names the array
    /// of intermediate accumulators the forward pass kept.
    ArrayOp {
        op: ArrayOp,
        params: Vec<Name>,
        body: Expr,
        args: Vec<Arg>,
        states: Option<Name>,
    },
}

/// The layout of a body's gradient from [`Deriver::gradient_with`]: the
/// term is the tuple of the cotangents kept, then the sparse records.
pub(crate) struct Gradient {
    /// For each variable of the context, whether its cotangent is in the
    /// tuple (`false`: it is sparse, in the records).
    pub kept: Vec<bool>,
    /// For each record, the array it adds to and that array's element type.
    pub records: Vec<(Name, Type)>,
    /// For each record, its position (an atom of the body).
    pub positions: Vec<Expr>,
}

/// A context variable's part of a [`Gradient`]: its cotangent, or its
/// sparse records (positions and values).
pub(crate) enum Part {
    Dense(Expr),
    Sparse(Vec<(Expr, Expr)>),
}

impl Gradient {
    /// Each context variable's part, read from `g`, a variable bound to
    /// the gradient's value.
    pub(crate) fn parts(&self, ctx: &[(Name, Type)], g: &Expr) -> Vec<Part> {
        let dense = self.kept.iter().filter(|k| **k).count();
        let total = dense + 2 * self.records.len();
        let at = |k: usize| Deriver::component(g.clone(), k, total);
        let mut slot = 0;
        let mut parts: Vec<Part> = self
            .kept
            .iter()
            .map(|&k| {
                if k {
                    slot += 1;
                    Part::Dense(at(slot - 1))
                } else {
                    Part::Sparse(Vec::new())
                }
            })
            .collect();
        for (r, (a, _)) in self.records.iter().enumerate() {
            let j = ctx
                .iter()
                .position(|(n, _)| n == a)
                .expect("a context array");
            if let Part::Sparse(records) = &mut parts[j] {
                records.push((at(dense + 2 * r), at(dense + 2 * r + 1)));
            }
        }
        parts
    }
}

/// The forward pass of one term.
#[derive(Default)]
pub(crate) struct Tape {
    /// A-normal form of the primal.
    pub fwd: Vec<(Pattern, Expr)>,
    pub steps: Vec<Step>,
    /// Source variable → atom standing for it.
    pub(crate) subst: Scope<Expr>,
}

/// The reverse pass: bindings emitted so far and the adjoints.
#[derive(Default)]
pub(crate) struct Sweep {
    pub rev: Vec<(Pattern, Expr)>,
    adj: FxMap<Name, Adj>,
}

impl Sweep {
    /// Removes and returns the cotangent of `n` (zero if none flowed in).
    pub fn take(&mut self, n: &Name) -> Adj {
        self.adj.remove(n).unwrap_or(Adj::Zero)
    }
}

pub(crate) struct Deriver {
    pub names: NameSupply,
    pub typer: Typer,
    size_vars: FxSet<Name>,
    /// The route by which bodies of array operations are differentiated too.
    route: Route,
    /// Variables bound to constants (UNF⁻¹ binds every constant, `c_{T;0}`),
    /// so that a fold's unit is recognised whichever route named it.
    constants: FxMap<Name, f64>,
    /// Inactive variables (activity analysis): the parameters not
    /// differentiated, and every value of the forward pass computed from
    /// inactive variables, sizes and constants alone. No cotangent flows
    /// into them, so none is computed: a loop step's free variable such as
    /// `h = 2 / s` gets no running sum of cotangents. Anything not known to
    /// be inactive (a lambda's parameter) is active.
    inactive: FxSet<Name>,
    /// The free arrays (and their copies) of the function whose gradient
    /// [`Deriver::gradient_with`] is taking and wants sparse: a constant
    /// index of one of them gives a sparse cotangent there, as a computed
    /// index does everywhere, so that a loop reading `w[0]` scatters once
    /// rather than summing an array per element. Elsewhere a constant
    /// index keeps Figure 4's one-hot, which the simplifier and the native
    /// backend read element by element.
    pub(crate) sparse_scope: FxSet<Name>,
}

impl Deriver {
    pub(crate) fn new(closed: &Closed, route: Route) -> Deriver {
        let mut names = NameSupply::new();
        for n in closed
            .size_vars
            .iter()
            .chain(closed.params.iter().map(|(n, _)| n))
        {
            names.reserve(n);
        }
        reserve_all(&closed.body, &mut names);
        let mut typer = Typer::new(&closed.size_vars);
        for (n, t) in closed.context() {
            typer.push(n, t);
        }
        Deriver {
            names,
            typer,
            size_vars: closed.size_vars.iter().cloned().collect(),
            route,
            constants: FxMap::default(),
            inactive: FxSet::default(),
            sparse_scope: FxSet::default(),
        }
    }

    /// Marks the parameters of `closed` not in `wrt` inactive.
    pub(crate) fn differentiate_only(&mut self, closed: &Closed, wrt: &[(Name, Type)]) {
        for (n, _) in &closed.params {
            if !wrt.iter().any(|(w, _)| w == n) {
                self.inactive.insert(n.clone());
            }
        }
    }

    /// Sets the activity of an array operation's parameters: an element of
    /// an inactive array (or of a constant) is inactive, every other
    /// parameter active. Returns what to restore.
    pub(crate) fn parameter_activity(
        &mut self,
        op: ArrayOp,
        params: &[Name],
        args: &[Arg],
    ) -> Vec<(Name, bool)> {
        let elements: Vec<Option<&Expr>> = match op {
            ArrayOp::Map | ArrayOp::Map2 => args.iter().map(|(a, _)| Some(a)).collect(),
            _ => vec![None, args.get(1).map(|(a, _)| a)],
        };
        let mut saved = Vec::with_capacity(params.len());
        for (p, array) in params.iter().zip(elements) {
            let inactive = match array.map(|a| &a.kind) {
                Some(ExprKind::Var(n)) => self.inactive.contains(n) || self.size_vars.contains(n),
                Some(ExprKind::Const(_) | ExprKind::Int(_)) => true,
                _ => false,
            };
            let was = if inactive {
                !self.inactive.insert(p.clone())
            } else {
                self.inactive.remove(p)
            };
            saved.push((p.clone(), was));
        }
        saved
    }

    /// Undoes [`Deriver::parameter_activity`].
    pub(crate) fn restore_activity(&mut self, saved: Vec<(Name, bool)>) {
        for (p, was) in saved.into_iter().rev() {
            if was {
                self.inactive.insert(p);
            } else {
                self.inactive.remove(&p);
            }
        }
    }

    /// `new` names the value `old` named (UNF⁻¹'s names for `let`s).
    pub(crate) fn rename_activity(&mut self, old: &Name, new: &Name) {
        // Set either way: a body differentiated again names its `let`s
        // again, maybe from values of another activity.
        if self.inactive.remove(old) {
            self.inactive.insert(new.clone());
        } else {
            self.inactive.remove(new);
        }
    }

    /// Whether `value` is computed from inactive variables, sizes and
    /// constants alone.
    fn is_inactive(&self, value: &Expr) -> bool {
        let mut scope = Scope::new();
        let mut fv = HashSet::new();
        free_vars(value, &mut scope, &mut fv);
        fv.iter()
            .all(|n| self.inactive.contains(n) || self.size_vars.contains(n))
    }

    /// Binds `e` in `binds` to a fresh variable named after `hint`, unless
    /// it is an atom.
    pub fn bind(&mut self, binds: &mut Vec<(Pattern, Expr)>, hint: &str, e: Expr) -> Expr {
        if is_atom(&e) {
            return e;
        }
        let n = self.names.fresh(hint);
        binds.push((pvar(&n), e));
        var(&n)
    }

    /// The constant an atom stands for, or the atom.
    pub(crate) fn constant_value(&self, atom: &Expr) -> Expr {
        match &atom.kind {
            ExprKind::Var(n) => self
                .constants
                .get(n)
                .map_or_else(|| atom.clone(), |c| real(*c)),
            _ => atom.clone(),
        }
    }

    /// The type of an atom.
    pub fn type_of(&mut self, atom: &Expr) -> Type {
        match &atom.kind {
            ExprKind::Const(_) => Type::Real,
            ExprKind::Int(_) => Type::Int,
            ExprKind::Var(n) => self
                .typer
                .lookup(n)
                .cloned()
                .unwrap_or_else(|| panic!("atom `{n}` is bound")),
            _ => unreachable!("steps are applied to atoms"),
        }
    }

    /// Adds `contribution` to the cotangent of the atom `target`.
    pub fn add(&mut self, sw: &mut Sweep, target: &Expr, ty: &Type, contribution: Adj) {
        let ExprKind::Var(n) = &target.kind else {
            return; // constants have no cotangent
        };
        if contribution.is_zero() || self.size_vars.contains(n) || self.inactive.contains(n) {
            return;
        }
        let hint = format!("{n}_adj");
        let contribution = self.atomize(sw, &hint, ty, contribution);
        let current = sw.take(n);
        let sum = self.combine(sw, &hint, ty, current, contribution);
        sw.adj.insert(n.clone(), sum);
    }

    fn atomize(&mut self, sw: &mut Sweep, hint: &str, ty: &Type, a: Adj) -> Adj {
        match (a, ty) {
            (Adj::Zero, _) => Adj::Zero,
            (Adj::Val(e), _) => Adj::Val(self.bind(&mut sw.rev, hint, e)),
            (Adj::Tuple(parts), Type::Tuple(ts)) => Adj::Tuple(
                parts
                    .into_iter()
                    .zip(ts)
                    .map(|(p, t)| self.atomize(sw, hint, t, p))
                    .collect(),
            ),
            (Adj::Tuple(_), _) => unreachable!("a tuple cotangent has a tuple type"),
            // Positions and values are atoms already.
            (sparse @ Adj::Sparse(_), _) => sparse,
        }
    }

    fn combine(&mut self, sw: &mut Sweep, hint: &str, ty: &Type, a: Adj, b: Adj) -> Adj {
        match (a, b) {
            (Adj::Zero, x) | (x, Adj::Zero) => x,
            (Adj::Sparse(mut x), Adj::Sparse(y)) => {
                x.extend(y);
                Adj::Sparse(x)
            }
            // Constant positions join a dense cotangent as Figure 4's
            // one-hots, which the simplifier and the native backend add
            // element by element without storing them; others in one
            // `reduce_by_index`.
            (Adj::Sparse(at), Adj::Val(dense)) | (Adj::Val(dense), Adj::Sparse(at))
                if at.iter().all(|(p, _)| matches!(p.kind, ExprKind::Int(_))) =>
            {
                let Type::Array(elem, n) = ty else {
                    unreachable!("a sparse cotangent has an array type")
                };
                let mut total = dense;
                for (p, z) in at {
                    let ExprKind::Int(k) = p.kind else {
                        unreachable!("constant positions")
                    };
                    let position = if k >= 0 {
                        int(k)
                    } else {
                        prim(
                            Prim::IAdd,
                            vec![builtin(Builtin::Len, vec![total.clone()]), int(k)],
                        )
                    };
                    let hot = crate::adjoint::one_hot(elem, n, position, z, &mut self.names);
                    let s = crate::adjoint::plus(ty, total, hot, &mut self.names);
                    total = self.bind(&mut sw.rev, hint, s);
                }
                Adj::Val(total)
            }
            (Adj::Sparse(at), Adj::Val(dense)) | (Adj::Val(dense), Adj::Sparse(at)) => {
                let s = crate::adjoint::scatter(dense, at);
                Adj::Val(self.bind(&mut sw.rev, hint, s))
            }
            (Adj::Val(x), Adj::Val(y)) => {
                let s = crate::adjoint::plus(ty, x, y, &mut self.names);
                Adj::Val(self.bind(&mut sw.rev, hint, s))
            }
            (x, y) => {
                let Type::Tuple(ts) = ty else {
                    unreachable!("a tuple cotangent has a tuple type")
                };
                Adj::Tuple(
                    ts.iter()
                        .enumerate()
                        .map(|(k, t)| self.combine(sw, hint, t, x.component(k), y.component(k)))
                        .collect(),
                )
            }
        }
    }

    /// The term `(value, gradient)` from the forward pass `tape`.
    pub(crate) fn finish(
        &mut self,
        tape: Tape,
        value: Expr,
        closed: &Closed,
        wrt: &[(Name, Type)],
        construction: Construction,
    ) -> AdResult<Expr> {
        match construction {
            Construction::Sparse => {
                let mut sweep = Sweep::default();
                self.seed(&mut sweep, &value, Adj::Val(real(1.0)));
                self.sweep(&mut sweep, tape.steps)?;
                let grads = wrt
                    .iter()
                    .map(|(n, t)| sweep.take(n).into_expr_like(t, &var(n), &mut self.names))
                    .collect();
                let result = tuple(vec![value, tuple(grads)]);
                Ok(lets(tape.fwd, lets(sweep.rev, result)))
            }
            Construction::Literal => self.literal(tape, closed, wrt, value),
        }
    }

    /// Starts a sweep: the cotangent of the result `value` is `z`.
    fn seed(&mut self, sw: &mut Sweep, value: &Expr, z: Adj) {
        let ty = self.type_of(value);
        self.add(sw, value, &ty, z);
    }

    /// Replays `steps` in reverse.
    fn sweep(&mut self, sw: &mut Sweep, steps: Vec<Step>) -> AdResult<()> {
        for step in steps.into_iter().rev() {
            let z = sw.take(&step.out);
            if z.is_zero() {
                continue;
            }
            self.backward(sw, step, z)?;
        }
        Ok(())
    }

    /// ∇ of `body` with respect to `ctx`, seeded with the cotangent `seed`
    /// of its result: a term over the names of `ctx` (and the atoms in
    /// scope) whose value is the tuple of the cotangents of `ctx` (a single
    /// cotangent when `ctx` has one entry) — except that the arrays of `sparse` whose
    /// cotangents stay sparse ([`Adj::Sparse`]: the body only reads them
    /// at computed positions) are left out of the tuple, their positions
    /// and values following it: `(ctx cotangents kept…, p₁, z₁, …)`.
    pub(crate) fn gradient_with(
        &mut self,
        ctx: &[(Name, Type)],
        body: &Expr,
        seed: Adj,
        sparse: &[Name],
    ) -> AdResult<(Expr, Gradient)> {
        let mark = self.typer.mark();
        for (n, t) in ctx {
            self.typer.push(n.clone(), t.clone());
        }
        let mut tape = Tape::default();
        let forward = match self.route {
            Route::Direct => self.forward(&mut tape, body),
            Route::Unf => self.unf_forward(&mut tape, ctx, body),
        };
        let result = forward.and_then(|(value, _)| {
            // Copies (`var` of UNF): a position is reported as what it
            // copies, so that one read through a copy of a free variable
            // is seen to be free.
            let copies: HashMap<Name, Expr> = tape
                .fwd
                .iter()
                .filter_map(|(pat, value)| match (pat, &value.kind) {
                    (Pattern::Var(out, _), ExprKind::Var(_)) => Some((out.clone(), value.clone())),
                    _ => None,
                })
                .collect();
            let resolve = |mut e: Expr| {
                while let Some(x) = match &e.kind {
                    ExprKind::Var(n) => copies.get(n),
                    _ => None,
                } {
                    e = x.clone();
                }
                e
            };
            let scope: FxSet<Name> = sparse
                .iter()
                .cloned()
                .chain(
                    copies
                        .keys()
                        .filter(|c| match &resolve(var(c)).kind {
                            ExprKind::Var(n) => sparse.contains(n),
                            _ => false,
                        })
                        .cloned(),
                )
                .collect();
            let outer = std::mem::replace(&mut self.sparse_scope, scope);
            let mut sw = Sweep::default();
            self.seed(&mut sw, &value, seed);
            let swept = self.sweep(&mut sw, tape.steps);
            self.sparse_scope = outer;
            swept?;
            let (mut grads, mut positions) = (Vec::new(), Vec::new());
            let (mut kept, mut records, mut at) = (Vec::new(), Vec::new(), Vec::new());
            for (n, t) in ctx {
                match (sw.take(n), t) {
                    (Adj::Sparse(sparse_at), Type::Array(elem, _)) if sparse.contains(n) => {
                        kept.push(false);
                        for (p, z) in sparse_at {
                            records.push((n.clone(), (**elem).clone()));
                            at.push(resolve(p.clone()));
                            positions.extend([p, z]);
                        }
                    }
                    // No cotangent at all: no records.
                    (Adj::Zero, Type::Array(..)) if sparse.contains(n) => kept.push(false),
                    (a, _) => {
                        kept.push(true);
                        grads.push(a.into_expr_like(t, &var(n), &mut self.names));
                    }
                }
            }
            grads.extend(positions);
            let term = lets(tape.fwd, lets(sw.rev, tuple(grads)));
            Ok((
                term,
                Gradient {
                    kept,
                    records,
                    positions: at,
                },
            ))
        });
        self.typer.pop_to(mark);
        result
    }

    /// The free variables of `e` that carry cotangents, with their types.
    pub fn free_slots(&mut self, e: &Expr, bound: &[Name]) -> Vec<(Name, Type)> {
        let mut scope = Scope::new();
        for b in bound {
            scope.push(b.clone(), ());
        }
        let mut out = HashSet::new();
        free_vars(e, &mut scope, &mut out);
        let mut names: Vec<Name> = out
            .into_iter()
            .filter(|n| !self.size_vars.contains(n) && !self.inactive.contains(n))
            .collect();
        names.sort();
        names
            .into_iter()
            .filter_map(|n| self.typer.lookup(&n).cloned().map(|t| (n, t)))
            .collect()
    }

    /// Replaces source variables by their atoms in a subterm kept whole.
    /// Binders are unique after inlining, so nothing is captured.
    fn substitute(&self, tape: &Tape, e: &Expr) -> Expr {
        guard(|| match &e.kind {
            ExprKind::Var(n) => tape.subst.get(n).cloned().unwrap_or_else(|| e.clone()),
            _ => e.map_children(&mut |c| self.substitute(tape, c)),
        })
    }

    /// Emits `out = value` as a step of kind `kind`.
    pub(crate) fn emit(
        &mut self,
        tape: &mut Tape,
        hint: &str,
        value: Expr,
        kind: StepKind,
    ) -> AdResult<(Expr, Type)> {
        let ty = self.typer.infer(&value).map_err(|e| AdError::Unsupported {
            what: format!("an ill-typed intermediate term ({e})"),
            span: value.span,
        })?;
        let out = self.names.fresh(hint);
        if let (StepKind::Constant, ExprKind::Const(c)) = (&kind, &value.kind) {
            self.constants.insert(out.clone(), *c);
        }
        // A value without reals (an integer, an array of integers) carries
        // no cotangent, whatever it is computed from.
        if !has_reals(&ty) || self.is_inactive(&value) {
            self.inactive.insert(out.clone());
        }
        self.typer.push(out.clone(), ty.clone());
        tape.fwd.push((pvar(&out), value));
        tape.steps.push(Step {
            out: out.clone(),
            ty: ty.clone(),
            kind,
        });
        Ok((var(&out), ty))
    }

    fn atoms(&mut self, tape: &mut Tape, es: &[Expr]) -> AdResult<Vec<Arg>> {
        es.iter().map(|e| self.forward(tape, e)).collect()
    }

    /// The forward pass over `e`: emits its A-normal form and steps, and
    /// returns the atom holding its value.
    pub(crate) fn forward(&mut self, tape: &mut Tape, e: &Expr) -> AdResult<(Expr, Type)> {
        guard(|| self.forward_inner(tape, e))
    }

    fn forward_inner(&mut self, tape: &mut Tape, e: &Expr) -> AdResult<(Expr, Type)> {
        let unsupported = |what: &str| {
            Err(AdError::Unsupported {
                what: what.to_string(),
                span: e.span,
            })
        };
        match &e.kind {
            ExprKind::Const(_) => Ok((e.clone(), Type::Real)),
            ExprKind::Int(_) => Ok((e.clone(), Type::Int)),
            ExprKind::Literal(_) => unsupported("an unchecked literal"),
            ExprKind::Var(n) => {
                let atom = tape.subst.get(n).cloned().unwrap_or_else(|| var(n));
                let ty = self.type_of(&atom);
                Ok((atom, ty))
            }
            ExprKind::Let { .. } => {
                let mark = tape.subst.mark();
                let mut cur = e;
                while let ExprKind::Let {
                    pat, value, body, ..
                } = &cur.kind
                {
                    let (atom, ty) = self.forward(tape, value)?;
                    self.bind_pattern(tape, pat, atom, &ty)?;
                    cur = body;
                }
                let r = self.forward(tape, cur);
                tape.subst.pop_to(mark);
                r
            }
            ExprKind::Prim(p, args) => {
                use gradlift_lang::prim::PrimKind;
                if matches!(
                    p.info().kind(),
                    PrimKind::Compare | PrimKind::IntCompare | PrimKind::Logic
                ) {
                    return unsupported("a condition outside `if`");
                }
                let args: Vec<Expr> = self
                    .atoms(tape, args)?
                    .into_iter()
                    .map(|(a, _)| a)
                    .collect();
                let value = prim(*p, args.clone());
                self.emit(tape, "t", value, StepKind::Prim(*p, args))
            }
            ExprKind::Tuple(es) => {
                let args = self.atoms(tape, es)?;
                let value =
                    Expr::synth(ExprKind::Tuple(args.iter().map(|a| a.0.clone()).collect()));
                self.emit(tape, "t", value, StepKind::Tuple(args))
            }
            ExprKind::Proj(inner, k) => {
                let arg = self.forward(tape, inner)?;
                let value = proj(arg.0.clone(), *k);
                self.emit(tape, "t", value, StepKind::Proj(arg, *k))
            }
            ExprKind::ArrayLit(es) => {
                let args = self.atoms(tape, es)?;
                let value = Expr::synth(ExprKind::ArrayLit(
                    args.iter().map(|a| a.0.clone()).collect(),
                ));
                self.emit(tape, "t", value, StepKind::ArrayLit(args))
            }
            ExprKind::Index(inner, k) => {
                let arg = self.forward(tape, inner)?;
                let value = index(arg.0.clone(), *k);
                self.emit(tape, "t", value, StepKind::Index(arg, *k))
            }
            ExprKind::Builtin(b, args) => self.forward_builtin(tape, *b, args),
            ExprKind::If(c, t, f) => {
                let (c, t, f) = (
                    self.substitute(tape, c),
                    self.substitute(tape, t),
                    self.substitute(tape, f),
                );
                let value = cond(c.clone(), t.clone(), f.clone());
                self.emit(tape, "t", value, StepKind::If(c, t, f))
            }
            ExprKind::ArrayOp(op, f, args) => self.forward_array_op(tape, *op, f, args),
            ExprKind::Lambda(..) | ExprKind::PrimFn(_) => unsupported("a function value"),
            ExprKind::Apply(..) => unsupported("the application of a function value"),
            ExprKind::Derive(..) => unsupported("a derivative operator before its expansion"),
        }
    }

    fn bind_pattern(
        &mut self,
        tape: &mut Tape,
        pat: &Pattern,
        atom: Expr,
        ty: &Type,
    ) -> AdResult<()> {
        match pat {
            Pattern::Var(n, _) => {
                tape.subst.push(n.clone(), atom);
                Ok(())
            }
            Pattern::Wild(_) => Ok(()),
            Pattern::Tuple(ps, _) => {
                let Type::Tuple(ts) = ty else {
                    unreachable!("a tuple pattern binds a tuple")
                };
                for (k, (p, t)) in ps.iter().zip(ts).enumerate() {
                    let hint = match p {
                        Pattern::Var(n, _) => n.to_string(),
                        _ => "t".to_string(),
                    };
                    let value = proj(atom.clone(), k);
                    let (part, _) = self.emit(
                        tape,
                        &hint,
                        value,
                        StepKind::Proj((atom.clone(), ty.clone()), k),
                    )?;
                    self.bind_pattern(tape, p, part, t)?;
                }
                Ok(())
            }
        }
    }

    fn forward_builtin(
        &mut self,
        tape: &mut Tape,
        b: Builtin,
        args: &[Expr],
    ) -> AdResult<(Expr, Type)> {
        // Size arguments stay size expressions (over size variables and
        // `len` of atoms); the others become atoms.
        let size_first = b.size_first();
        let mut atoms = Vec::new();
        let mut vals = Vec::new();
        for (i, a) in args.iter().enumerate() {
            if size_first && i == 0 {
                let s = self.substitute(tape, a);
                atoms.push((s.clone(), Type::Int));
                vals.push(s);
            } else {
                let arg = self.forward(tape, a)?;
                vals.push(arg.0.clone());
                atoms.push(arg);
            }
        }
        let value = builtin(b, vals);
        let kind = match b {
            Builtin::Len | Builtin::Iota => StepKind::Constant,
            _ => StepKind::Builtin(b, atoms),
        };
        self.emit(tape, "t", value, kind)
    }

    fn forward_array_op(
        &mut self,
        tape: &mut Tape,
        op: ArrayOp,
        f: &Expr,
        args: &[Expr],
    ) -> AdResult<(Expr, Type)> {
        let ExprKind::Lambda(params, body) = &f.kind else {
            return Err(AdError::Unsupported {
                what: format!("`{}` with a function value that is not a lambda", op.name()),
                span: f.span,
            });
        };
        let args = self.atoms(tape, args)?;
        // Parameters become plain names; tuple patterns are bound in the body.
        let mut names = Vec::new();
        let mut body = self.substitute(tape, body);
        for p in params.iter().rev() {
            match &p.pat {
                Pattern::Var(n, _) => names.push(n.clone()),
                pat => {
                    let n = self.names.fresh("p");
                    body = let_in(pat.clone(), var(&n), body);
                    names.push(n);
                }
            }
        }
        names.reverse();
        self.array_op_step(tape, op, names, body, args)
    }

    /// Emits `op (names. body) args` on atoms; a fold not on a known monoid
    /// keeps its states (`states = scanl …`, result `states[-1]`).
    pub(crate) fn array_op_step(
        &mut self,
        tape: &mut Tape,
        op: ArrayOp,
        names: Vec<Name>,
        body: Expr,
        args: Vec<Arg>,
    ) -> AdResult<(Expr, Type)> {
        let lam = lambda(names.iter().map(pvar).collect(), body.clone());
        let arg_atoms: Vec<Expr> = args.iter().map(|a| a.0.clone()).collect();
        let unit = self.constant_value(&arg_atoms[0]);
        let extremum = match op {
            ArrayOp::Reduce | ArrayOp::Foldl(None) => known_monoid(&names, &body, &unit)
                .filter(|m| matches!(m, Monoid::Max | Monoid::Min)),
            _ => None,
        };
        if let Some(m) = extremum {
            // Keep the extremum's position with it: the reverse sends the
            // cotangent there without searching the array again.
            let ext_value = self.extremum_with_position(m == Monoid::Max, &arg_atoms);
            let (ext, _) = self.emit(tape, "ext", ext_value, StepKind::Constant)?;
            tape.steps.pop();
            let ExprKind::Var(ext_name) = &ext.kind else {
                unreachable!("emit returns a variable")
            };
            let ext_name = ext_name.clone();
            return self.emit(
                tape,
                "t",
                proj(ext, 0),
                StepKind::ArrayOp {
                    op,
                    params: names,
                    body,
                    args,
                    states: Some(ext_name),
                },
            );
        }
        if op == ArrayOp::While {
            // The reverse needs the trip count: the loop counts its steps.
            let counted_value = self.counted_while(&names[0], &body, arg_atoms[0].clone());
            let (counted, _) = self.emit(tape, "counted", counted_value, StepKind::Constant)?;
            tape.steps.pop();
            let ExprKind::Var(counted_name) = &counted.kind else {
                unreachable!("emit returns a variable")
            };
            let counted_name = counted_name.clone();
            return self.emit(
                tape,
                "t",
                proj(counted, 0),
                StepKind::ArrayOp {
                    op,
                    params: names,
                    body,
                    args,
                    states: Some(counted_name),
                },
            );
        }
        // A checkpointed fold keeps no states: its reverse recomputes them.
        let folds = matches!(op, ArrayOp::Foldl(None) | ArrayOp::Reduce)
            && !crate::rules::fold::is_known_monoid(&names, &body, &unit);
        if folds {
            // Keep every accumulator: the reverse of a fold needs them.
            let states_value = array_op(ArrayOp::Scanl, lam, arg_atoms);
            let (states, _) = self.emit(tape, "states", states_value, StepKind::Constant)?;
            tape.steps.pop();
            let ExprKind::Var(states_name) = &states.kind else {
                unreachable!("emit returns a variable")
            };
            let states_name = states_name.clone();
            let value = index(states, -1);
            return self.emit(
                tape,
                "t",
                value,
                StepKind::ArrayOp {
                    op,
                    params: names,
                    body,
                    args,
                    states: Some(states_name),
                },
            );
        }
        let value = array_op(op, lam, arg_atoms);
        self.emit(
            tape,
            "t",
            value,
            StepKind::ArrayOp {
                op,
                params: names,
                body,
                args,
                states: None,
            },
        )
    }

    fn backward(&mut self, sw: &mut Sweep, step: Step, z: Adj) -> AdResult<()> {
        match step.kind {
            // Integer operations and conversions pass no cotangent on: the
            // cotangent of an integer is zero, and `real(i)` is constant in
            // the reals.
            StepKind::Prim(p, _) if p.info().kind() != gradlift_lang::prim::PrimKind::Real => {}
            StepKind::Prim(p, args) => {
                let z = self.atomize(sw, "z", &Type::Real, z).into_expr(&Type::Real);
                let partials = p.partials(&args, &var(&step.out));
                for (a, d) in args.iter().zip(partials) {
                    if d.is_structural_zero() {
                        continue;
                    }
                    self.add(sw, a, &Type::Real, Adj::Val(mul(d, z.clone())));
                }
            }
            StepKind::Tuple(args) => {
                for (k, (a, t)) in args.iter().enumerate() {
                    self.add(sw, a, t, z.component(k));
                }
            }
            StepKind::Proj((of, of_ty), k) => {
                let Type::Tuple(ts) = &of_ty else {
                    unreachable!("a projection of a tuple")
                };
                self.add(sw, &of, &of_ty, z.at(k, ts.len()));
            }
            StepKind::Constant => {}
            StepKind::Copy(x) => {
                let ty = step.ty.clone();
                self.add(sw, &x, &ty, z);
            }
            StepKind::ArrayLit(args) => {
                let z = self.atomize(sw, "z", &step.ty, z).into_expr(&step.ty);
                for (k, (a, t)) in args.iter().enumerate() {
                    self.add(sw, a, t, Adj::Val(index(z.clone(), k as i64)));
                }
            }
            StepKind::Index(of, k) => self.index_backward(sw, of, k, &step.ty, z),
            StepKind::Builtin(Builtin::Get, args) => self.get_backward(sw, args, &step.ty, z),
            StepKind::Builtin(b @ (Builtin::Gather | Builtin::ReduceByIndex(_)), args) => {
                let z = self.atomize(sw, "z", &step.ty, z).into_expr(&step.ty);
                match b {
                    Builtin::Gather => self.gather_backward(sw, args, z),
                    Builtin::ReduceByIndex(op) => {
                        self.reduce_by_index_backward(sw, op, args, &var(&step.out), z)
                    }
                    _ => unreachable!("matched above"),
                }
            }
            StepKind::Builtin(b, args) => self.builtin_backward(sw, b, args, &step.ty, z),
            StepKind::If(c, t, f) => self.if_backward(sw, c, t, f, &step.ty, z)?,
            StepKind::ArrayOp {
                op,
                params,
                body,
                args,
                states,
            } => {
                let z = self.atomize(sw, "z", &step.ty, z).into_expr(&step.ty);
                // The function's parameters: an element of an inactive array
                // is inactive, a fold's or scan's accumulator active. Names
                // such as a tuple parameter's (`param0'`) recur in other
                // lambdas, nested ones too, so each is set here and restored
                // after.
                let saved = self.parameter_activity(op, &params, &args);
                let r = self.array_op_backward(
                    sw,
                    op,
                    &params,
                    &body,
                    &args,
                    states,
                    &var(&step.out),
                    &step.ty,
                    z,
                );
                self.restore_activity(saved);
                r?;
            }
        }
        Ok(())
    }

    /// Figure 5 literally: one continuation per step over the whole context.
    fn literal(
        &mut self,
        tape: Tape,
        closed: &Closed,
        wrt: &[(Name, Type)],
        value: Expr,
    ) -> AdResult<Expr> {
        // Y_0 = Id restricted to wrt: fun (adjoints of the parameters) -> (the wrt ones).
        let params = closed.context();
        let mut live: Vec<(Name, Type)> = params.clone();
        let mut fwd = Vec::new();
        let y0 = self.names.fresh("Y");
        let mut y_params: Vec<(Name, Type)> = params
            .iter()
            .map(|(n, t)| (self.names.fresh(&format!("{n}_adj")), t.clone()))
            .collect();
        let ident = tuple(
            wrt.iter()
                .map(|(w, _)| {
                    let i = params
                        .iter()
                        .position(|(p, _)| p == w)
                        .expect("wrt is a parameter");
                    var(&y_params[i].0)
                })
                .collect(),
        );
        fwd.push((pvar(&y0), typed_lambda(y_params.clone(), ident)));
        let mut prev = y0;
        // The number of slots `prev` takes: bindings that are not steps
        // (the kept states of a fold) are in the context of later
        // continuations but nothing flows into them.
        let mut prev_arity = live.len();
        let mut steps = tape.steps.into_iter();
        for (pat, bound) in tape.fwd {
            fwd.push((pat.clone(), bound));
            let Pattern::Var(out, _) = &pat else {
                unreachable!("the forward pass binds names")
            };
            // Only bindings that are steps get a continuation; the others
            // (kept fold states) are context entries without one.
            let ty = self.typer.lookup(out).cloned().expect("bound");
            let is_step = steps.as_slice().first().is_some_and(|s| &s.out == out);
            if !is_step {
                live.push((out.clone(), ty));
                continue;
            }
            let step = steps.next().expect("checked");
            // fun (adjoints of live, z) -> [step's updates]; prev(adjoints of live)
            y_params = live
                .iter()
                .map(|(n, t)| (self.names.fresh(&format!("{n}_adj")), t.clone()))
                .collect();
            let z_name = self.names.fresh(&format!("{out}_adj"));
            let mut sw = Sweep::default();
            for ((n, _), (p, _)) in live.iter().zip(&y_params) {
                sw.adj.insert(n.clone(), Adj::Val(var(p)));
            }
            sw.adj.insert(out.clone(), Adj::Val(var(&z_name)));
            let z = sw.take(out);
            self.backward(&mut sw, step, z)?;
            let args = live[..prev_arity]
                .iter()
                .map(|(n, t)| sw.take(n).into_expr_like(t, &var(n), &mut self.names))
                .collect();
            let body = lets(sw.rev, apply(var(&prev), args));
            let mut lam_params = y_params.clone();
            lam_params.push((z_name, ty.clone()));
            let y = self.names.fresh("Y");
            fwd.push((pvar(&y), typed_lambda(lam_params, body)));
            prev = y;
            live.push((out.clone(), ty));
            prev_arity = live.len();
        }
        // Apply the last continuation to (0⃗, 1): zeros everywhere but the
        // slot of the result.
        let mut args: Vec<Expr> = live[..prev_arity]
            .iter()
            .map(|(n, t)| crate::adjoint::zeros_like(t, &var(n), &mut self.names))
            .collect();
        if let ExprKind::Var(v) = &value.kind {
            if let Some(i) = live.iter().position(|(n, _)| n == v) {
                args[i] = real(1.0);
            }
        }
        let grads = apply(var(&prev), args);
        Ok(lets(fwd, tuple(vec![value, grads])))
    }
}

/// Reserves every name bound or used in `e` (an explicit stack: terms are
/// as deep as their longest `let` chain).
fn reserve_all(e: &Expr, names: &mut NameSupply) {
    let mut todo = vec![e];
    while let Some(e) = todo.pop() {
        match &e.kind {
            ExprKind::Var(n) => names.reserve(n),
            ExprKind::Let { pat, .. } => reserve_pattern(pat, names),
            ExprKind::Lambda(ps, _) => ps.iter().for_each(|p| reserve_pattern(&p.pat, names)),
            _ => {}
        }
        todo.extend(e.children());
    }
}

fn reserve_pattern(p: &Pattern, names: &mut NameSupply) {
    let mut ns = Vec::new();
    p.names(&mut ns);
    ns.iter().for_each(|n| names.reserve(n));
}
