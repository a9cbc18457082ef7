//! Dead leaves (rule `dead-leaf`, not in the paper; it extends the
//! dead-code elimination of Figure 12's simplifications to the parts of
//! values): first-order Target → first-order Target. It guarantees the
//! same results for every read the program's result makes; a computation
//! it drops can no longer fail, as with DCE.
//!
//! `dead-component` removes a tuple component no one projects; this pass
//! finds the reals that nothing observable reads further down: through
//! the elements of arrays, and through the accumulators of loops. A
//! backward analysis computes, for every binder, its *demand* — which
//! reals of its value may be read, a tree shaped like its type (a tuple's
//! components, an array's elements) — starting from the whole result.
//! A loop's accumulator is demanded as its result is, and as its step
//! reads it, up to a fixed point; a map's elements as its consumer reads
//! them. Then an arithmetic primitive at a tuple component whose demand is
//! empty is replaced by `0`: the computations that fed only it become dead
//! `let`s, which the next DCE removes.
//!
//! Forward over reverse mode makes such reals: the tangent of everything.
//! In k-means' Newton step, the tangent of each point's distance to each
//! centroid is computed, summed over the coordinates, stored, and carried
//! by the search for the nearest centroid, whose index alone is read.
//!
//! Input and output: every binder has a name of its own (as after partial
//! evaluation); no binder is added.

use super::rules::{Rule, Stats};
use gradlift_lang::deep::guard;
use gradlift_lang::prim::PrimKind;
use gradlift_lang::syntax::*;
use std::collections::HashMap;
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
    /// Of an array: those of every element.
    Array(Box<Demand>),
}

impl Demand {
    fn join(&mut self, other: &Demand) {
        *self = match (std::mem::replace(self, Demand::No), other) {
            (d, Demand::No) => d,
            (Demand::No, d) => d.clone(),
            (Demand::All, _) | (_, Demand::All) => Demand::All,
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
}

/// A real computed by one arithmetic primitive: replaced by `0` where no
/// one reads it.
fn replaceable(e: &Expr) -> bool {
    matches!(&e.kind, ExprKind::Prim(p, _) if p.info().kind() == PrimKind::Real)
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
    guard(|| 1 + e.children().into_iter().map(nodes).sum::<usize>())
}

#[derive(Default)]
struct Analysis {
    /// The demand of each binder (binders are unique).
    binders: HashMap<Name, Demand>,
    /// The demand of each loop's accumulator, by the first name its
    /// parameter binds (unique too), over every visit.
    accumulators: HashMap<Name, Demand>,
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
        if *d == Demand::No {
            // Replaced, or a variable read for nothing. Anything else is
            // kept as it is and so reads what it reads.
            if replaceable(e) || matches!(e.kind, ExprKind::Var(_) | ExprKind::Const(_)) {
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
                    self.need(x, &d.component(i));
                }
            }
            ExprKind::Let {
                pat, value, body, ..
            } => {
                self.need(body, d);
                let dv = self.of_pattern(pat);
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
            // The length only.
            (Builtin::Len, [_]) => {}
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
            (ArrayOp::Map, [p], [a]) => {
                self.need(body, &d.element());
                let dp = self.of_pattern(&p.pat);
                self.need(a, &Demand::Array(Box::new(dp)));
            }
            (ArrayOp::Map2, [p, q], [a, b]) => {
                self.need(body, &d.element());
                let (dp, dq) = (self.of_pattern(&p.pat), self.of_pattern(&q.pat));
                self.need(a, &Demand::Array(Box::new(dp)));
                self.need(b, &Demand::Array(Box::new(dq)));
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
                let dx = if op == ArrayOp::Reduce {
                    dacc
                } else {
                    self.of_pattern(&x.pat)
                };
                self.need(a, &Demand::Array(Box::new(dx)));
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
        let d = if *d == Demand::No {
            Demand::All
        } else {
            d.clone()
        };
        match &mut e.kind {
            ExprKind::Proj(x, i) => self.narrow(x, &Demand::at(*i, d)),
            ExprKind::Tuple(es) => {
                for (i, x) in es.iter_mut().enumerate() {
                    self.narrow(x, &d.component(i));
                }
            }
            ExprKind::Let {
                pat, value, body, ..
            } => {
                let dv = self.a.of_pattern(pat);
                self.narrow(value, &dv);
                self.narrow(body, &d);
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
                (_, args) => {
                    for x in args {
                        self.narrow(x, &Demand::All);
                    }
                }
            },
            ExprKind::ArrayOp(op, f, args) => self.array_op(*op, f, args, &d),
            ExprKind::Var(_) | ExprKind::Const(_) | ExprKind::PrimFn(_) => {}
            _ => {
                for c in super::prune::children_mut(e) {
                    self.narrow(c, &Demand::All);
                }
            }
        }
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
            (ArrayOp::Map, [p], [a]) => {
                self.narrow(body, &d.element());
                let dp = self.a.of_pattern(&p.pat);
                self.narrow(a, &Demand::Array(Box::new(dp)));
            }
            (ArrayOp::Map2, [p, q], [a, b]) => {
                self.narrow(body, &d.element());
                let (dp, dq) = (self.a.of_pattern(&p.pat), self.a.of_pattern(&q.pat));
                self.narrow(a, &Demand::Array(Box::new(dp)));
                self.narrow(b, &Demand::Array(Box::new(dq)));
            }
            (
                ArrayOp::Reduce | ArrayOp::Foldl(_) | ArrayOp::Scanl | ArrayOp::Scanr,
                [acc, x],
                [z, a],
            ) => {
                // As the analysis found it, over every visit (or all).
                let dacc = first_name(&acc.pat)
                    .and_then(|name| self.a.accumulators.get(name))
                    .cloned()
                    .unwrap_or(Demand::All);
                self.narrow(body, &dacc);
                self.narrow(z, &dacc);
                let dx = if op == ArrayOp::Reduce {
                    dacc
                } else {
                    self.a.of_pattern(&x.pat)
                };
                self.narrow(a, &Demand::Array(Box::new(dx)));
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
