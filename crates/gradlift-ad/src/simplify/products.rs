//! Matrix products read their transposed operands in place (rules
//! `product-operand` and `transpose-twice`, not in the paper).
//!
//! Reverse mode multiplies a product's cotangent by the transposes of its
//! operands (`Ā += Z·Bᵀ`, `B̄ += Aᵀ·Z`, `rules/arrays.rs`), and a layer
//! written `matmul(X, transpose(W))` transposes its weights. The matrix
//! kernel reads an operand written `transpose(c, M)` from `M`
//! (`gradlift_lang::kernels::operand`, the decision every engine follows),
//! so a transpose that is an operand is copied by the kernel in tiles that
//! fit the cache, while one that is built walks the whole matrix with a
//! cache-hostile stride into the program's memory. This pass
//! puts every transpose a product reads in operand position:
//!
//! - an operand bound by `let t = transpose(c, M)` (`M` a variable) is
//!   written `transpose(c, M)` in place, and `len(t)` is `c`; the binding
//!   is dropped when nothing else reads `t`;
//! - `transpose(c, transpose(c', M))` is `M` (in operand position, and
//!   wherever it is written).
//!
//! Every value is kept bit for bit: the kernel computes a product from a
//! transposed operand exactly as from the built transpose
//! (`gradlift_lang::kernels`). A transposed product `transpose(c, matmul(n,
//! A, B))` stays as it is: `matmul(m, Bᵀ, Aᵀ)` has the same value in exact
//! arithmetic, but the kernel sums it in another order for thin shapes (a
//! test of `gradlift_lang::kernels` shows it). CSE keeps a transposed
//! operand in place ([`gradlift_lang::kernels::operand`]).
//! A variable bound to a transpose stands for it in its scope (the pass
//! forgets it under a binder of the same name), and so does `M`, bound
//! before it; the binding is dropped when products were its only readers.

use super::rules::{Rule, Stats};
use super::term::*;
use gradlift_lang::build::builtin;
use gradlift_lang::deep::guard;
use gradlift_lang::syntax::*;
use std::collections::{HashMap, HashSet};

/// Whether `x` occurs free in `e`.
fn is_free(x: &Name, e: &Expr) -> bool {
    let mut free = HashSet::new();
    gradlift_lang::interp::free_vars(e, &mut gradlift_lang::scope::Scope::new(), &mut free);
    free.contains(x)
}

/// Rewrites every product of `e`; whether anything changed.
pub(super) fn run(e: Expr, stats: &mut Stats) -> (Expr, bool) {
    let mut pass = Products {
        transposes: HashMap::new(),
        stats,
        changed: false,
    };
    let e = pass.walk(e);
    (e, pass.changed)
}

struct Products<'a> {
    /// The variables bound to `transpose(c, M)`, `M` a variable: (c, M).
    transposes: HashMap<Name, (Expr, Expr)>,
    stats: &'a mut Stats,
    changed: bool,
}

impl Products<'_> {
    fn fire(&mut self, rule: Rule) {
        self.stats.fire(rule);
        self.changed = true;
    }

    fn walk(&mut self, e: Expr) -> Expr {
        guard(|| match &e.kind {
            ExprKind::Let { .. } => {
                let span = e.span;
                let ExprKind::Let {
                    pat,
                    ty,
                    value,
                    body,
                } = into_kind(e)
                else {
                    unreachable!("a let")
                };
                let value = self.walk(*value);
                let mut names = Vec::new();
                pat.names(&mut names);
                let saved = self.shadow(&names);
                let mut bound = None;
                if let (Pattern::Var(x, _), ExprKind::Builtin(Builtin::Transpose, args)) =
                    (&pat, &value.kind)
                {
                    if let [c, m @ Expr {
                        kind: ExprKind::Var(_),
                        ..
                    }] = &args[..]
                    {
                        self.transposes.insert(x.clone(), (c.clone(), m.clone()));
                        bound = Some(x.clone());
                    }
                }
                let body = self.walk(*body);
                self.restore(saved);
                // A transpose only products read is read in place by each.
                if let Some(x) = bound {
                    if !is_free(&x, &body) {
                        self.fire(Rule::ProductOperand);
                        return body;
                    }
                }
                Expr::new(
                    ExprKind::Let {
                        pat,
                        ty,
                        value: Box::new(value),
                        body: Box::new(body),
                    },
                    span,
                )
            }
            ExprKind::Lambda(ps, _) => {
                let mut names = Vec::new();
                for p in ps {
                    p.pat.names(&mut names);
                }
                let saved = self.shadow(&names);
                let e = map_children(e, &mut |c| self.walk(c));
                self.restore(saved);
                e
            }
            // The rows of a transpose are the count it was given (a size
            // that builds no matrix).
            ExprKind::Builtin(Builtin::Len, args) if self.transpose_count(&args[0]).is_some() => {
                let c = self.transpose_count(&args[0]).expect("checked");
                self.fire(Rule::ProductOperand);
                self.walk(c)
            }
            ExprKind::Builtin(Builtin::MatMul, _) => {
                let span = e.span;
                let ExprKind::Builtin(b, args) = into_kind(e) else {
                    unreachable!("a product")
                };
                let mut args: Vec<Expr> = args.into_iter().map(|a| self.walk(a)).collect();
                for a in &mut args[1..] {
                    *a = self.operand(std::mem::replace(a, Expr::synth(ExprKind::Int(0))));
                }
                Expr::new(ExprKind::Builtin(b, args), span)
            }
            ExprKind::Builtin(Builtin::Transpose, _) => {
                let span = e.span;
                let ExprKind::Builtin(b, mut args) = into_kind(e) else {
                    unreachable!("a transpose")
                };
                let inner = self.walk(args.pop().expect("a matrix"));
                let args: Vec<Expr> = args.into_iter().map(|c| self.walk(c)).collect();
                if let Some(m) = self.untransposed(&inner) {
                    self.fire(Rule::TransposeTwice);
                    return m;
                }
                let mut args = args;
                args.push(inner);
                Expr::new(ExprKind::Builtin(b, args), span)
            }
            _ => map_children(e, &mut |c| self.walk(c)),
        })
    }

    /// Forgets the transposes bound to `names`, which a binder shadows;
    /// what to restore when its scope ends.
    /// So are those whose `M` or count reads such a name: written under the
    /// binder, they would read another value.
    fn shadow(&mut self, names: &[Name]) -> Vec<(Name, Option<(Expr, Expr)>)> {
        if names.is_empty() || self.transposes.is_empty() {
            return Vec::new();
        }
        let reads_one =
            |(c, m): &(Expr, Expr)| names.iter().any(|n| is_free(n, m) || is_free(n, c));
        let mut hit: Vec<Name> = self
            .transposes
            .iter()
            .filter(|(_, t)| reads_one(t))
            .map(|(x, _)| x.clone())
            .collect();
        hit.extend(names.iter().cloned());
        hit.into_iter()
            .map(|n| {
                let t = self.transposes.remove(&n);
                (n, t)
            })
            .collect()
    }

    fn restore(&mut self, saved: Vec<(Name, Option<(Expr, Expr)>)>) {
        for (n, t) in saved.into_iter().rev() {
            match t {
                Some(t) => self.transposes.insert(n, t),
                None => self.transposes.remove(&n),
            };
        }
    }

    /// `c` when `e` is `transpose(c, M)`, or a variable bound to it.
    fn transpose_count(&self, e: &Expr) -> Option<Expr> {
        match &e.kind {
            ExprKind::Builtin(Builtin::Transpose, args) => args.first().cloned(),
            ExprKind::Var(x) => self.transposes.get(x).map(|(c, _)| c.clone()),
            _ => None,
        }
    }

    /// `M` when `e` is `transpose(c, M)`, or a variable bound to it.
    fn untransposed(&self, e: &Expr) -> Option<Expr> {
        match &e.kind {
            ExprKind::Builtin(Builtin::Transpose, args) => args.last().cloned(),
            ExprKind::Var(x) => self.transposes.get(x).map(|(_, m)| m.clone()),
            _ => None,
        }
    }

    /// A product's operand, its transpose read in place.
    fn operand(&mut self, a: Expr) -> Expr {
        match &a.kind {
            ExprKind::Var(x) => match self.transposes.get(x) {
                Some((c, m)) => {
                    let t = builtin(Builtin::Transpose, vec![c.clone(), m.clone()]);
                    self.fire(Rule::ProductOperand);
                    t
                }
                None => a,
            },
            ExprKind::Builtin(Builtin::Transpose, args) => match self.untransposed(&args[1]) {
                Some(m) => {
                    self.fire(Rule::ProductOperand);
                    m
                }
                None => a,
            },
            _ => a,
        }
    }
}
