//! Liveness of the parts of values (rules `dead-leaf`, `dead-component`,
//! `dead-element-component`; not in the paper: they extend the dead-code
//! elimination of Figure 12's simplifications to the parts of values):
//! first-order Target → first-order Target. It guarantees the same results
//! for every read the program's result makes; a computation it drops can
//! no longer fail, as with DCE.
//!
//! One backward analysis computes, for every binder, its *demand* — which
//! reals of its value may be read, a tree shaped like its type (a tuple's
//! components, an array's elements) — starting from the whole result. A
//! loop's accumulator is demanded as its result is, and as its step reads
//! it, up to a fixed point; a map's elements as its consumer reads them;
//! an array whose length alone is read is demanded with no element
//! (`Array(No)`: referenced, no real read). Four rewrites follow from it,
//! in one walk:
//!
//! - `dead-component`: for `let x = e in b` where every tail of `e` (the
//!   tuples at the ends of its `let` chains and `if` branches) is a tuple
//!   and `b` uses `x` only by projections, a component whose demand is
//!   empty is removed from every tail and the projections renumbered (for
//!   `let (p₀, …, pₖ) = e in b`, the wildcards' components);
//! - `dead-element-component`: an array operation other than `reduce`
//!   whose argument is a `map` or `map2` written in place, building tuples
//!   of which the operation's function (through its parameter, used only
//!   by projections) demands only some components, has the map build only
//!   those;
//! - `dead-leaf`: an arithmetic primitive at any other position whose
//!   demand is empty is replaced by `0`;
//! - `length-only`: a `map` or `map2` of an arithmetic primitive whose
//!   length alone is read becomes its first array (through every such
//!   layer at once: `map2 (+) (map2 (+) A B) C` read for its length is
//!   `A`).
//!
//! The analysis knows which components the walk removes (it marks them
//! [`Demand::Gone`] with the same predicate the walk uses, on the same
//! term), so what only they read is not demanded: the computations that
//! fed only removed components or zeroed reals become dead `let`s, which
//! the next DCE removes.
//!
//! Forward over reverse mode makes such reals: the tangent of everything.
//! In k-means' Newton step, the tangent of each point's distance to each
//! centroid is computed, summed over the coordinates, stored, and carried
//! by the search for the nearest centroid, whose index alone is read. The
//! reverse of an `if` returns the cotangents of everything the branch
//! read, and a loop's right scan of state cotangents projects out only the
//! state's.
//!
//! Input and output: every binder has a name of its own (as after partial
//! evaluation); no binder is added.

use super::names::FxMap;
use super::rules::{Rule, Stats};
use super::split::param_of;
use super::tails::{keep_components, numbering, projected, renumber, tail_arity};
use super::term::children_mut;
use gradlift_lang::deep::guard;
use gradlift_lang::prim::PrimKind;
use gradlift_lang::syntax::*;
use std::sync::Arc;

/// Which reals of a value may be read.
#[derive(Clone, Debug, PartialEq)]
enum Demand {
    /// None.
    No,
    /// All.
    All,
    /// Of a tuple: by component (missing components are `No`).
    Tuple(Vec<Demand>),
    /// Of an array: those of every element (`Array(No)`: its length).
    Array(Box<Demand>),
    /// A component of a tuple that the rewrite removes: nothing is read.
    /// Only in the demand of a value whose tails are tuples, never stored.
    Gone,
}

impl Demand {
    fn join(&mut self, other: &Demand) {
        *self = match (std::mem::replace(self, Demand::No), other) {
            (d, Demand::No) => d,
            (Demand::No, d) => d.clone(),
            (Demand::All, _) | (_, Demand::All) | (Demand::Gone, _) | (_, Demand::Gone) => {
                Demand::All
            }
            (Demand::Tuple(mut xs), Demand::Tuple(ys)) => {
                if xs.len() < ys.len() {
                    xs.resize(ys.len(), Demand::No);
                }
                for (x, y) in xs.iter_mut().zip(ys) {
                    x.join(y);
                }
                Demand::Tuple(xs)
            }
            (Demand::Array(mut x), Demand::Array(y)) => {
                x.join(y);
                Demand::Array(x)
            }
            _ => Demand::All,
        };
    }

    /// The demand of component `i` of a tuple.
    fn component(&self, i: usize) -> Demand {
        match self {
            Demand::No => Demand::No,
            Demand::Tuple(xs) => xs.get(i).cloned().unwrap_or(Demand::No),
            _ => Demand::All,
        }
    }

    /// The demand of the elements of an array.
    fn element(&self) -> Demand {
        match self {
            Demand::No => Demand::No,
            Demand::Array(x) => (**x).clone(),
            _ => Demand::All,
        }
    }

    /// Component `i` of a tuple demanded as `self`.
    fn at(i: usize, d: Demand) -> Demand {
        let mut xs = vec![Demand::No; i + 1];
        xs[i] = d;
        Demand::Tuple(xs)
    }

    /// This demand of a `k`-tuple with the components `gone` marked
    /// [`Demand::Gone`].
    fn without(&self, k: usize, gone: &[bool]) -> Demand {
        Demand::Tuple(
            (0..k)
                .map(|i| {
                    if gone[i] {
                        Demand::Gone
                    } else {
                        self.component(i)
                    }
                })
                .collect(),
        )
    }
}

/// The components of a `k`-tuple whose demand is empty, when the rewrite
/// removes them: some, not all (a single component left is not a tuple).
fn removable(k: usize, demand: impl Fn(usize) -> bool) -> Option<Vec<bool>> {
    let gone: Vec<bool> = (0..k).map(demand).collect();
    (gone.contains(&true) && gone.contains(&false)).then_some(gone)
}

/// A real computed by one arithmetic primitive: replaced by `0` where no
/// one reads it.
fn replaceable(e: &Expr) -> bool {
    matches!(&e.kind, ExprKind::Prim(p, _) if p.info().kind() == PrimKind::Real)
}

/// Whether `e` is a `map` or `map2` of an arithmetic primitive of which
/// only the length is demanded (`length-only`): it becomes its first
/// array, which has its type (the primitive maps reals to a real) and,
/// by typing, its length. The analysis and the rewrite both ask this.
fn length_only(e: &Expr, d: &Demand) -> bool {
    matches!(d, Demand::Array(x) if **x == Demand::No)
        && matches!(
            &e.kind,
            ExprKind::ArrayOp(ArrayOp::Map | ArrayOp::Map2, f, _)
                if matches!(f.kind, ExprKind::PrimFn(p) if p.info().kind() == PrimKind::Real)
        )
}

/// Runs the pass; whether it replaced anything.
pub(super) fn run(mut e: Expr, stats: &mut Stats) -> (Expr, bool) {
    let mut a = Analysis {
        budget: WORK_PER_NODE * nodes(&e) + MIN_WORK,
        ..Analysis::default()
    };
    a.need(&e, &Demand::All);
    if a.budget == 0 {
        return (e, false);
    }
    let mut w = Rewrite {
        a: &mut a,
        stats,
        changed: false,
    };
    w.narrow(&mut e, &Demand::All);
    let changed = w.changed;
    (e, changed)
}

/// The analysis visits a loop's step once per round of its fixed point,
/// and so a step nested in loops once per round of each: it gives up
/// (and the pass changes nothing) after this many visits per node of the
/// term, or [`MIN_WORK`].
const WORK_PER_NODE: usize = super::limits::LIMITS.demand_work_per_node;
const MIN_WORK: usize = super::limits::LIMITS.demand_min_work;

fn nodes(e: &Expr) -> usize {
    guard(|| 1 + e.children().map(nodes).sum::<usize>())
}

#[derive(Default)]
struct Analysis {
    /// The demand of each binder (binders are unique).
    binders: FxMap<Name, Demand>,
    /// The demand of each loop's accumulator, by the first name its
    /// parameter binds (unique too), over every visit.
    accumulators: FxMap<Name, Demand>,
    /// Whether each binder of a value whose tails are tuples is used only
    /// by projections, as the analysis found the term (the rewrite reads
    /// the answer, not the term it is rewriting).
    projections: FxMap<Name, bool>,
    /// Visits left.
    budget: usize,
}

/// The name a loop's accumulator is known by.
fn first_name(p: &Pattern) -> Option<&Name> {
    match p {
        Pattern::Var(x, _) => Some(x),
        Pattern::Wild(_) => None,
        Pattern::Tuple(ps, _) => ps.iter().find_map(first_name),
    }
}

impl Analysis {
    /// Whether `body` uses `x`, a binder of a `k`-tuple, only by
    /// projections: found in `body` once (by the analysis), then recalled
    /// (by the rewrite, which passes no body).
    fn by_projections(&mut self, x: &Name, k: usize, body: Option<&Expr>) -> bool {
        if let Some(known) = self.projections.get(x) {
            return *known;
        }
        let Some(body) = body else {
            return false;
        };
        let only = projected(body, x, &mut vec![false; k]);
        self.projections.insert(x.clone(), only);
        only
    }

    /// The components `dead-component` removes from the value of
    /// `let pat = value in body`: for a variable used only by projections,
    /// those it does not demand; for a tuple pattern, its wildcards'.
    fn let_gone(&mut self, pat: &Pattern, value: &Expr, body: Option<&Expr>) -> Option<Vec<bool>> {
        let k = tail_arity(value).filter(|k| *k >= 2)?;
        match pat {
            Pattern::Var(x, _) => {
                if !self.by_projections(x, k, body) {
                    return None;
                }
                let dx = self.of_pattern(pat);
                removable(k, |i| dx.component(i) == Demand::No)
            }
            Pattern::Tuple(ps, _) if ps.len() == k => {
                removable(k, |i| matches!(ps[i], Pattern::Wild(_)))
            }
            _ => None,
        }
    }

    /// The components `dead-element-component` removes from the tuples
    /// of argument `k` of `op`, a `map` or `map2` written in place, and the
    /// parameter of the function (with body `f_body`) that reads them.
    fn arg_gone(
        &mut self,
        op: ArrayOp,
        params: &[Param],
        k: usize,
        arg: &Expr,
        f_body: Option<&Expr>,
    ) -> Option<(Name, Vec<bool>)> {
        // A `reduce`'s elements have its accumulator's type: their shape
        // stays.
        if op == ArrayOp::Reduce {
            return None;
        }
        let param = params.get(param_of(op, k)?)?;
        let Pattern::Var(q, _) = &param.pat else {
            return None;
        };
        let ExprKind::ArrayOp(ArrayOp::Map | ArrayOp::Map2, g, _) = &arg.kind else {
            return None;
        };
        let ExprKind::Lambda(_, inner) = &g.kind else {
            return None;
        };
        let n = tail_arity(inner).filter(|n| *n >= 2)?;
        if !self.by_projections(q, n, f_body) {
            return None;
        }
        let dq = self.of_pattern(&param.pat);
        removable(n, |i| dq.component(i) == Demand::No).map(|gone| (q.clone(), gone))
    }

    /// The demand of argument `k` of `op` (not a `reduce`): its elements'
    /// as the function's parameter demands them, the components the
    /// rewrite removes marked.
    fn of_arg(
        &mut self,
        op: ArrayOp,
        params: &[Param],
        k: usize,
        arg: &Expr,
        f_body: &Expr,
    ) -> Demand {
        let j = param_of(op, k).expect("an array argument");
        let dp = self.of_pattern(&params[j].pat);
        let element = match self.arg_gone(op, params, k, arg, Some(f_body)) {
            Some((_, gone)) => dp.without(gone.len(), &gone),
            None => dp,
        };
        Demand::Array(Box::new(element))
    }

    fn demand_var(&mut self, x: &Name, d: &Demand) {
        self.binders.entry(x.clone()).or_insert(Demand::No).join(d);
    }

    fn of_pattern(&self, p: &Pattern) -> Demand {
        match p {
            Pattern::Var(x, _) => self.binders.get(x).cloned().unwrap_or(Demand::No),
            Pattern::Wild(_) => Demand::No,
            Pattern::Tuple(ps, _) => Demand::Tuple(ps.iter().map(|p| self.of_pattern(p)).collect()),
        }
    }

    /// Records what computing the demanded reals `d` of `e` reads.
    fn need(&mut self, e: &Expr, d: &Demand) {
        guard(|| self.need_inner(e, d))
    }

    fn need_inner(&mut self, e: &Expr, d: &Demand) {
        if self.budget == 0 {
            return;
        }
        self.budget -= 1;
        if *d == Demand::Gone {
            // Only a tail's component is removed (and skipped below).
            return self.need(e, &Demand::All);
        }
        if *d == Demand::No {
            // Replaced, or a variable read for nothing. Anything else is
            // kept as it is and so reads what it reads.
            if replaceable(e)
                || matches!(
                    e.kind,
                    ExprKind::Var(_) | ExprKind::Const(_) | ExprKind::Int(_)
                )
            {
                return;
            }
            return self.need(e, &Demand::All);
        }
        match &e.kind {
            ExprKind::Var(x) => self.demand_var(x, d),
            ExprKind::Const(_) | ExprKind::PrimFn(_) => {}
            ExprKind::Proj(x, i) => self.need(x, &Demand::at(*i, d.clone())),
            ExprKind::Tuple(es) => {
                for (i, x) in es.iter().enumerate() {
                    match d.component(i) {
                        Demand::Gone => {}
                        di => self.need(x, &di),
                    }
                }
            }
            ExprKind::Let {
                pat, value, body, ..
            } => {
                self.need(body, d);
                let dv = match self.let_gone(pat, value, Some(body)) {
                    Some(gone) => self.of_pattern(pat).without(gone.len(), &gone),
                    None => self.of_pattern(pat),
                };
                self.need(value, &dv);
            }
            ExprKind::If(c, a, b) => {
                self.need(c, &Demand::All);
                self.need(a, d);
                self.need(b, d);
            }
            ExprKind::Index(a, _) => self.need(a, &Demand::Array(Box::new(d.clone()))),
            ExprKind::ArrayLit(es) => {
                let de = d.element();
                for x in es {
                    self.need(x, &de);
                }
            }
            ExprKind::Builtin(bi, args) => self.builtin(*bi, args, d),
            ExprKind::ArrayOp(_, _, args) if length_only(e, d) => {
                self.need(&args[0], &Demand::Array(Box::new(Demand::No)));
            }
            ExprKind::ArrayOp(op, f, args) => {
                if !self.array_op(*op, f, args, d) {
                    self.need(f, &Demand::All);
                    for x in args {
                        self.need(x, &Demand::All);
                    }
                }
            }
            // Primitives read all their arguments; anything else is read
            // whole.
            _ => {
                for c in e.children() {
                    self.need(c, &Demand::All);
                }
            }
        }
    }

    fn builtin(&mut self, bi: Builtin, args: &[Expr], d: &Demand) {
        match (bi, args) {
            // The length only: the array is referenced, no real of it read.
            (Builtin::Len, [a]) => self.need(a, &Demand::Array(Box::new(Demand::No))),
            (Builtin::Replicate, [n, v]) => {
                self.need(n, &Demand::All);
                self.need(v, &d.element());
            }
            (Builtin::Concat, [a, b]) => {
                self.need(a, d);
                self.need(b, d);
            }
            (Builtin::Take | Builtin::Drop, [k, a]) => {
                self.need(k, &Demand::All);
                self.need(a, d);
            }
            (Builtin::Shift1L | Builtin::Shift1R, [a]) => self.need(a, d),
            // The elements read are demanded as the result is.
            // Element (j, i) of the result is element (i, j) of `m`.
            (Builtin::Transpose, [c, m]) => {
                self.need(c, &Demand::All);
                self.need(m, d);
            }
            (Builtin::Get, [a, i]) => {
                self.need(a, &Demand::Array(Box::new(d.clone())));
                self.need(i, &Demand::All);
            }
            (Builtin::Gather, [a, i]) => {
                self.need(a, d);
                self.need(i, &Demand::All);
            }
            (Builtin::ReduceByIndex(_), [dest, i, v]) => {
                self.need(dest, d);
                self.need(i, &Demand::All);
                self.need(v, d);
            }
            _ => {
                for x in args {
                    self.need(x, &Demand::All);
                }
            }
        }
    }

    /// The array operations whose function is a lambda: what the function
    /// reads of its parameters is what is demanded of the arrays and the
    /// start. False for the others.
    fn array_op(&mut self, op: ArrayOp, f: &Expr, args: &[Expr], d: &Demand) -> bool {
        let ExprKind::Lambda(params, body) = &f.kind else {
            return false;
        };
        match (op, params.as_slice(), args) {
            (ArrayOp::Map, [_], [a]) => {
                self.need(body, &d.element());
                let da = self.of_arg(op, params, 0, a, body);
                self.need(a, &da);
            }
            (ArrayOp::Map2, [_, _], [a, b]) => {
                self.need(body, &d.element());
                let da = self.of_arg(op, params, 0, a, body);
                let db = self.of_arg(op, params, 1, b, body);
                self.need(a, &da);
                self.need(b, &db);
            }
            (
                ArrayOp::Reduce | ArrayOp::Foldl(_) | ArrayOp::Scanl | ArrayOp::Scanr,
                [acc, x],
                [z, a],
            ) => {
                let dacc = self.accumulator(op, acc, x, body, d);
                if let Some(name) = first_name(&acc.pat) {
                    self.accumulators
                        .entry(name.clone())
                        .or_insert(Demand::No)
                        .join(&dacc);
                }
                self.need(z, &dacc);
                let da = if op == ArrayOp::Reduce {
                    Demand::Array(Box::new(dacc))
                } else {
                    self.of_arg(op, params, 1, a, body)
                };
                self.need(a, &da);
            }
            _ => return false,
        }
        true
    }

    /// The demand of a loop's accumulator: that of its result (of each
    /// state, for a scan), and what the step reads of it, to a fixed
    /// point. A `reduce`'s function combines two accumulators.
    fn accumulator(
        &mut self,
        op: ArrayOp,
        acc: &Param,
        x: &Param,
        body: &Expr,
        d: &Demand,
    ) -> Demand {
        let mut dacc = match op {
            ArrayOp::Scanl | ArrayOp::Scanr => d.element(),
            _ => d.clone(),
        };
        loop {
            if self.budget == 0 {
                return Demand::All;
            }
            self.need(body, &dacc);
            let mut next = dacc.clone();
            next.join(&self.of_pattern(&acc.pat));
            if op == ArrayOp::Reduce {
                next.join(&self.of_pattern(&x.pat));
            }
            if next == dacc {
                return dacc;
            }
            dacc = next;
        }
    }
}

struct Rewrite<'a> {
    a: &'a mut Analysis,
    stats: &'a mut Stats,
    changed: bool,
}

impl Rewrite<'_> {
    /// Replaces the reals of `e` outside demand `d` (and, inside, those of
    /// every binding outside its binder's) where they are one primitive.
    fn narrow(&mut self, e: &mut Expr, d: &Demand) {
        guard(|| self.narrow_inner(e, d))
    }

    fn narrow_inner(&mut self, e: &mut Expr, d: &Demand) {
        if *d == Demand::No && replaceable(e) {
            self.stats.fire(Rule::DeadLeaf);
            self.changed = true;
            *e = Expr::synth(ExprKind::Const(0.0));
            return;
        }
        if length_only(e, d) {
            self.stats.fire(Rule::LengthOnly);
            self.changed = true;
            let ExprKind::ArrayOp(_, _, args) = &mut e.kind else {
                unreachable!("length_only holds of array operations")
            };
            *e = std::mem::replace(&mut args[0], Expr::synth(ExprKind::Const(0.0)));
            return self.narrow(e, d);
        }
        let d = if matches!(d, Demand::No | Demand::Gone) {
            Demand::All
        } else {
            d.clone()
        };
        match &mut e.kind {
            ExprKind::Proj(x, i) => self.narrow(x, &Demand::at(*i, d)),
            ExprKind::Tuple(es) => {
                // A component marked gone is removed by the `let` or the
                // array operation whose demand marked it, once its value
                // is narrowed: a placeholder until then, so that what only
                // it read is not read inside the value either.
                for (i, x) in es.iter_mut().enumerate() {
                    match d.component(i) {
                        Demand::Gone => *x = Expr::synth(ExprKind::Const(0.0)),
                        di => self.narrow(x, &di),
                    }
                }
            }
            ExprKind::Let {
                pat, value, body, ..
            } => {
                self.narrow(body, &d);
                self.binding(pat, value, body);
            }
            ExprKind::If(c, a, b) => {
                self.narrow(c, &Demand::All);
                self.narrow(a, &d);
                self.narrow(b, &d);
            }
            ExprKind::Index(a, _) => self.narrow(a, &Demand::Array(Box::new(d))),
            ExprKind::ArrayLit(es) => {
                let de = d.element();
                for x in es {
                    self.narrow(x, &de);
                }
            }
            ExprKind::Builtin(bi, args) => match (*bi, args.as_mut_slice()) {
                (Builtin::Replicate, [n, v]) => {
                    self.narrow(n, &Demand::All);
                    self.narrow(v, &d.element());
                }
                (Builtin::Concat, [a, b]) => {
                    self.narrow(a, &d);
                    self.narrow(b, &d);
                }
                (Builtin::Take | Builtin::Drop, [k, a]) => {
                    self.narrow(k, &Demand::All);
                    self.narrow(a, &d);
                }
                (Builtin::Shift1L | Builtin::Shift1R, [a]) => self.narrow(a, &d),
                (Builtin::Len, [a]) => self.narrow(a, &Demand::Array(Box::new(Demand::No))),
                (Builtin::Transpose, [c, m]) => {
                    self.narrow(c, &Demand::All);
                    self.narrow(m, &d);
                }
                (Builtin::Get, [a, i]) => {
                    self.narrow(a, &Demand::Array(Box::new(d)));
                    self.narrow(i, &Demand::All);
                }
                (Builtin::Gather, [a, i]) => {
                    self.narrow(a, &d);
                    self.narrow(i, &Demand::All);
                }
                (Builtin::ReduceByIndex(_), [dest, i, v]) => {
                    self.narrow(dest, &d);
                    self.narrow(i, &Demand::All);
                    self.narrow(v, &d);
                }
                (_, args) => {
                    for x in args {
                        self.narrow(x, &Demand::All);
                    }
                }
            },
            ExprKind::ArrayOp(op, f, args) => self.array_op(*op, f, args, &d),
            ExprKind::Var(_) | ExprKind::Const(_) | ExprKind::PrimFn(_) => {}
            _ => {
                for c in children_mut(e) {
                    self.narrow(c, &Demand::All);
                }
            }
        }
    }

    /// Narrows the value of `let pat = value in body` (its body narrowed
    /// already) and removes the components no one demands
    /// (`dead-component`).
    fn binding(&mut self, pat: &mut Pattern, value: &mut Expr, body: &mut Expr) {
        let dv = self.a.of_pattern(pat);
        let Some(mut gone) = self.a.let_gone(pat, value, None) else {
            return self.narrow(value, &dv);
        };
        if let Pattern::Var(x, _) = &*pat {
            keep_projected(body, x, &mut gone);
        }
        if !gone.contains(&true) {
            return self.narrow(value, &dv);
        }
        self.narrow(value, &dv.without(gone.len(), &gone));
        self.stats.fire(Rule::DeadComponent);
        self.changed = true;
        let keep: Vec<bool> = gone.iter().map(|g| !g).collect();
        let v = std::mem::replace(value, Expr::synth(ExprKind::Const(0.0)));
        *value = keep_components(v, &keep);
        match pat {
            Pattern::Var(x, _) => {
                let (map, single) = numbering(&keep);
                renumber(body, x, &map, single);
            }
            Pattern::Tuple(ps, _) => {
                let mut kept: Vec<Pattern> = std::mem::take(ps)
                    .into_iter()
                    .zip(&keep)
                    .filter_map(|(p, k)| k.then_some(p))
                    .collect();
                if kept.len() == 1 {
                    *pat = kept.pop().expect("one component");
                } else {
                    *ps = kept;
                }
            }
            Pattern::Wild(_) => unreachable!("a removable binding binds a tuple"),
        }
    }

    /// Narrows argument `k` of `op` (not a `reduce`), whose function has
    /// parameters `params` and body `f_body` (narrowed already), and,
    /// where it is a map written in place, removes the components of its
    /// tuples the function does not demand (`dead-element-component`).
    fn argument(
        &mut self,
        op: ArrayOp,
        params: &[Param],
        k: usize,
        arg: &mut Expr,
        f_body: &mut Expr,
    ) {
        let j = param_of(op, k).expect("an array argument");
        let dp = self.a.of_pattern(&params[j].pat);
        let Some((q, mut gone)) = self.a.arg_gone(op, params, k, arg, None) else {
            return self.narrow(arg, &Demand::Array(Box::new(dp)));
        };
        keep_projected(f_body, &q, &mut gone);
        if !gone.contains(&true) {
            return self.narrow(arg, &Demand::Array(Box::new(dp)));
        }
        self.narrow(arg, &Demand::Array(Box::new(dp.without(gone.len(), &gone))));
        self.stats.fire(Rule::DeadElementComponent);
        self.changed = true;
        let keep: Vec<bool> = gone.iter().map(|g| !g).collect();
        let ExprKind::ArrayOp(_, g, _) = &mut arg.kind else {
            unreachable!("arg_gone found a map");
        };
        let ExprKind::Lambda(_, inner) = &mut g.kind else {
            unreachable!("arg_gone found a lambda");
        };
        let inner = Arc::make_mut(inner);
        let v = std::mem::replace(inner, Expr::synth(ExprKind::Const(0.0)));
        *inner = keep_components(v, &keep);
        let (map, single) = numbering(&keep);
        renumber(f_body, &q, &map, single);
    }

    /// [`Analysis::array_op`], narrowing.
    fn array_op(&mut self, op: ArrayOp, f: &mut Expr, args: &mut [Expr], d: &Demand) {
        let ExprKind::Lambda(params, body) = &mut f.kind else {
            for x in args {
                self.narrow(x, &Demand::All);
            }
            return;
        };
        let body = Arc::make_mut(body);
        match (op, params.as_slice(), args) {
            (ArrayOp::Map, [_], [a]) => {
                self.narrow(body, &d.element());
                self.argument(op, params, 0, a, body);
            }
            (ArrayOp::Map2, [_, _], [a, b]) => {
                self.narrow(body, &d.element());
                self.argument(op, params, 0, a, body);
                self.argument(op, params, 1, b, body);
            }
            (
                ArrayOp::Reduce | ArrayOp::Foldl(_) | ArrayOp::Scanl | ArrayOp::Scanr,
                [acc, _],
                [z, a],
            ) => {
                // As the analysis found it, over every visit (or all).
                let dacc = first_name(&acc.pat)
                    .and_then(|name| self.a.accumulators.get(name))
                    .cloned()
                    .unwrap_or(Demand::All);
                self.narrow(body, &dacc);
                self.narrow(z, &dacc);
                if op == ArrayOp::Reduce {
                    self.narrow(a, &Demand::Array(Box::new(dacc)));
                } else {
                    self.argument(op, params, 1, a, body);
                }
            }
            (_, _, args) => {
                self.narrow(body, &Demand::All);
                for x in args {
                    self.narrow(x, &Demand::All);
                }
            }
        }
    }
}

/// Keeps (unmarks in `gone`) every component `body` still projects of `x`:
/// none, when the analysis and the rewrite agree (what the analysis found
/// undemanded is only read by rewrites that remove the reads), but a kept
/// component is only ever read by dead code, which DCE removes next.
fn keep_projected(body: &Expr, x: &Name, gone: &mut [bool]) {
    let mut used = vec![false; gone.len()];
    let only = projected(body, x, &mut used);
    debug_assert!(only, "`{x}` was used only by projections");
    for (g, u) in gone.iter_mut().zip(used) {
        debug_assert!(!(*g && u), "`{x}`: an undemanded component is still read");
        *g &= !u;
    }
}
