//! Sums moved into branches and constant components read as constants
//! (rules `sum-into-branches`, `const-component`): first-order Target →
//! first-order Target. (Dead components are removed by the demand
//! analysis, `demand.rs`.)
//!
//! For `let x = e in b` where every tail of `e` is a tuple and `b` reads
//! `x.i` once, as `map2 (+) S x.i` on every path (not in a lambda or a
//! branch), with `S` a variable bound outside, component `i` of every tail
//! of `e` becomes `map2 (+) S tᵢ` and the use becomes `x.i`
//! (`sum-into-branches`). Every path runs the same additions in the same
//! order. The reverse of an `if` returns, from the branch that did not
//! read an array, a zero array that the caller then adds to its running
//! sum; moved into that branch, the sum of zeros is the running sum itself
//! (rule `map2-add-zeros`, in the next round), so a loop whose step reads
//! an array only in some branches no longer builds and adds an array of
//! zeros at every step.
//!
//! An array operation whose argument is a `map` or `map2` written in
//! place, building tuples one of whose components is one constant in
//! every tail — the zero tangent of a one-hot cotangent, which forward
//! mode pairs with each element — reads that constant instead
//! (`const-component`); the component, no longer read, is then removed by
//! `dead-element-component`. Not for a `reduce`, whose elements have its
//! accumulator's type.
//!
//! Input and output: every binder has a name of its own (as after partial
//! evaluation); no binder is added.

use super::rules::{Rule, Stats};
use super::split::param_of;
use super::tails::{map_tails, projected, tail_arity};
use super::term::children_mut;
use gradlift_lang::deep::guard;
use gradlift_lang::syntax::*;
use gradlift_lang::Prim;
use std::sync::Arc;

/// What a run of [`run`] changed.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Pruned {
    /// Some component was removed or rewritten.
    pub changed: bool,
    /// A sum moved into branches (`sum-into-branches`), or a constant
    /// read where a component was (`const-component`): the rules of
    /// partial evaluation may now apply there.
    pub moved_sums: bool,
}

/// Moves sums into branches and reads constant components as constants.
pub(super) fn run(mut e: Expr, stats: &mut Stats) -> (Expr, Pruned) {
    let mut p = Prune {
        stats,
        changed: false,
        moved_sums: false,
        constants_read: false,
    };
    p.expr(&mut e);
    let pruned = Pruned {
        changed: p.changed,
        moved_sums: p.moved_sums || p.constants_read,
    };
    (e, pruned)
}

struct Prune<'a> {
    stats: &'a mut Stats,
    changed: bool,
    moved_sums: bool,
    constants_read: bool,
}

/// Component `i` of every tail of `e` when it is the same constant in each
/// (bit for bit, and structural or not alike).
fn tail_constant(e: &Expr, i: usize) -> Option<Expr> {
    guard(|| match &e.kind {
        ExprKind::Tuple(es) => match es.get(i).map(|c| (c, &c.kind)) {
            Some((c, ExprKind::Const(_))) => Some(c.clone()),
            _ => None,
        },
        ExprKind::Let { body, .. } => tail_constant(body, i),
        ExprKind::If(_, t, f) => {
            let (a, b) = (tail_constant(t, i)?, tail_constant(f, i)?);
            let bits = |x: &Expr| match x.kind {
                ExprKind::Const(c) => (c.to_bits(), x.is_structural_zero()),
                _ => unreachable!("constants"),
            };
            (bits(&a) == bits(&b)).then_some(a)
        }
        _ => None,
    })
}

/// Replaces each `x.i` in `e` by `c`.
fn substitute_proj(e: &mut Expr, x: &Name, i: usize, c: &Expr) {
    guard(|| {
        if is_proj(e, x, i) {
            *e = c.clone();
            return;
        }
        for child in children_mut(e) {
            substitute_proj(child, x, i, c);
        }
    })
}

impl Prune<'_> {
    fn expr(&mut self, e: &mut Expr) {
        guard(|| {
            if let ExprKind::Let {
                pat: Pattern::Var(x, _),
                ty: None,
                value,
                body,
            } = &mut e.kind
            {
                let x = x.clone();
                self.sums(&x, value, body);
            }
            if let ExprKind::ArrayOp(op, f, args) = &mut e.kind {
                self.in_place(*op, f, args);
            }
            for c in children_mut(e) {
                self.expr(c);
            }
        })
    }

    /// `op (…q…. C[q.i]) … (map (x. (…, k, …)) A) …`: a `map`/`map2`
    /// written in place as an argument, whose tuples have the constant `k`
    /// as component `i` in every tail, has `q.i` read as `k` (rule
    /// `const-component`).
    fn in_place(&mut self, op: ArrayOp, f: &mut Expr, args: &[Expr]) {
        // A `reduce`'s elements have its accumulator's type: their shape
        // stays.
        if op == ArrayOp::Reduce {
            return;
        }
        let ExprKind::Lambda(params, body) = &mut f.kind else {
            return;
        };
        for (k, arg) in args.iter().enumerate() {
            let Some(Pattern::Var(q, _)) =
                param_of(op, k).and_then(|j| params.get(j)).map(|p| &p.pat)
            else {
                continue;
            };
            let ExprKind::ArrayOp(ArrayOp::Map | ArrayOp::Map2, g, _) = &arg.kind else {
                continue;
            };
            let ExprKind::Lambda(_, inner) = &g.kind else {
                continue;
            };
            let Some(n) = tail_arity(inner).filter(|n| *n >= 2) else {
                continue;
            };
            let mut used = vec![false; n];
            if !projected(body, q, &mut used) {
                continue;
            }
            for (i, u) in used.iter().enumerate() {
                if let Some(c) = u.then(|| tail_constant(inner, i)).flatten() {
                    self.stats.fire(Rule::ConstComponent);
                    self.changed = true;
                    self.constants_read = true;
                    substitute_proj(Arc::make_mut(body), q, i, &c);
                }
            }
        }
    }

    /// Moves each `map2 (+) S x.i` of `body` into the tails of `value`
    /// (rule `sum-into-branches`, see the module documentation).
    fn sums(&mut self, x: &Name, value: &mut Expr, body: &mut Expr) {
        let Some(k) = tail_arity(value).filter(|k| *k >= 2) else {
            return;
        };
        if !has_branches(value) {
            return;
        }
        let mut used = vec![false; k];
        if !projected(body, x, &mut used) {
            return;
        }
        for (i, used) in used.into_iter().enumerate() {
            if !used || count_proj(body, x, i) != 1 {
                continue;
            }
            let Some((sum, x_first)) = take_sum(body, x, i) else {
                continue;
            };
            if binds(body, &sum) {
                // Bound after the `let`: not in scope in its value. Put
                // the use back as it was.
                restore_sum(body, x, i, &sum, x_first);
                continue;
            }
            self.stats.fire(Rule::SumIntoBranches);
            self.changed = true;
            self.moved_sums = true;
            let v = std::mem::replace(value, Expr::synth(ExprKind::Const(0.0)));
            *value = map_component(v, i, &mut |t| add(&sum, t, x_first));
        }
    }
}

/// Whether some tail of `e` is reached through an `if`.
fn has_branches(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Let { body, .. } => has_branches(body),
        ExprKind::If(..) => true,
        _ => false,
    }
}

/// How many times `e` projects component `i` of `x`.
fn count_proj(e: &Expr, x: &Name, i: usize) -> usize {
    guard(|| match &e.kind {
        ExprKind::Proj(inner, j) if matches!(&inner.kind, ExprKind::Var(n) if n == x) => {
            usize::from(*j == i)
        }
        _ => e.children().map(|c| count_proj(c, x, i)).sum(),
    })
}

/// Whether `e` binds `n` (in a `let` or as a lambda parameter).
fn binds(e: &Expr, n: &Name) -> bool {
    guard(|| {
        let here = match &e.kind {
            ExprKind::Let { pat, .. } => pattern_binds(pat, n),
            ExprKind::Lambda(params, _) => params.iter().any(|p| pattern_binds(&p.pat, n)),
            _ => false,
        };
        here || e.children().any(|c| binds(c, n))
    })
}

fn pattern_binds(p: &Pattern, n: &Name) -> bool {
    let mut names = Vec::new();
    p.names(&mut names);
    names.iter().any(|m| m == n)
}

/// `x.i`.
fn proj(x: &Name, i: usize) -> Expr {
    Expr::synth(ExprKind::Proj(
        Box::new(Expr::synth(ExprKind::Var(x.clone()))),
        i,
    ))
}

/// `map2 (+) S t`, or `map2 (+) t S` when `t_first`.
fn add(sum: &Name, t: Expr, t_first: bool) -> Expr {
    let s = Expr::synth(ExprKind::Var(sum.clone()));
    let args = if t_first { vec![t, s] } else { vec![s, t] };
    Expr::synth(ExprKind::ArrayOp(
        ArrayOp::Map2,
        Box::new(Expr::synth(ExprKind::PrimFn(Prim::Add))),
        args,
    ))
}

/// Whether `e` is `x.i`.
fn is_proj(e: &Expr, x: &Name, i: usize) -> bool {
    matches!(&e.kind, ExprKind::Proj(inner, j)
        if *j == i && matches!(&inner.kind, ExprKind::Var(n) if n == x))
}

/// Finds `map2 (+) S x.i` or `map2 (+) x.i S` (`S` a variable other than
/// `x`) where `e` evaluates it on every path — not in a lambda or a
/// branch of `if` — and replaces it by `x.i`: `S` and whether `x.i` came
/// first.
fn take_sum(e: &mut Expr, x: &Name, i: usize) -> Option<(Name, bool)> {
    guard(|| {
        if let ExprKind::ArrayOp(ArrayOp::Map2, f, args) = &e.kind {
            if matches!(f.kind, ExprKind::PrimFn(Prim::Add)) && args.len() == 2 {
                let var = |a: &Expr| match &a.kind {
                    ExprKind::Var(n) if n != x => Some(n.clone()),
                    _ => None,
                };
                let found = if is_proj(&args[1], x, i) {
                    var(&args[0]).map(|s| (s, false))
                } else if is_proj(&args[0], x, i) {
                    var(&args[1]).map(|s| (s, true))
                } else {
                    None
                };
                if let Some(found) = found {
                    *e = proj(x, i);
                    return Some(found);
                }
            }
        }
        let children: Vec<&mut Expr> = match &mut e.kind {
            ExprKind::Lambda(..) => Vec::new(),
            ExprKind::If(c, _, _) => vec![&mut **c],
            ExprKind::ArrayOp(_, _, xs) => xs.iter_mut().collect(),
            _ => children_mut(e),
        };
        children.into_iter().find_map(|c| take_sum(c, x, i))
    })
}

/// Undoes [`take_sum`]: the one `x.i` of `e` becomes the sum again.
fn restore_sum(e: &mut Expr, x: &Name, i: usize, sum: &Name, x_first: bool) {
    guard(|| {
        if is_proj(e, x, i) {
            *e = add(sum, proj(x, i), x_first);
            return;
        }
        for c in children_mut(e) {
            restore_sum(c, x, i, sum, x_first);
        }
    })
}

/// `e` with component `i` of every tail rewritten by `f`.
fn map_component(e: Expr, i: usize, f: &mut dyn FnMut(Expr) -> Expr) -> Expr {
    map_tails(e, &mut |mut es, span| {
        let t = std::mem::replace(&mut es[i], Expr::synth(ExprKind::Const(0.0)));
        es[i] = f(t);
        Expr::new(ExprKind::Tuple(es), span)
    })
}
