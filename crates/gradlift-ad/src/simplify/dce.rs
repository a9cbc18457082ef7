//! DCE — dead-code elimination and single-use inlining (Figure 12
//! "let x₁ = e₁ in e₂ ⇝ e₂ if x₁ ∉ FV(e₂)"): first-order Target →
//! first-order Target.
//!
//! Input: the output of partial evaluation (or of CSE): every binder has a
//! name used by no other binder and by no free variable. Output: the same
//! term without the `let`s whose variables are unused (components of a
//! tuple pattern that are unused become `_`), and with each variable that
//! is used exactly once, not inside a lambda that does not also contain its
//! `let`, replaced by its value when that value is shallow (height at most
//! [`MAX_INLINE_HEIGHT`], a lambda counting as one level). Inlining moves a computation, never repeats it:
//! a value used under a lambda would be recomputed per element, and a value
//! used twice would be computed twice, so neither is inlined. The height
//! bound keeps long accumulation chains (a gradient summed over 100,000
//! bindings) as `let` chains rather than one 100,000-deep expression.
//!
//! Relies on: purity. Every construct is pure, and the language is total
//! except for run-time size and index errors (`A[5]` of a shorter array, a
//! `map2` of arrays whose lengths differ): dropping an unused `A[5]`, or
//! moving one into a branch of `if` not taken, removes that error. This is
//! accepted, as in every optimizing compiler for a pure language.
//!
//! An index range (`iota` of a size expression) and a cheap map of one
//! are substituted at every use outside lambdas instead (`inline-iota`,
//! not in the paper), since reading them again costs little: the native
//! backend computes their elements in the reading loop, or the one element
//! an index reads.
//!
//! Three linear walks: count the uses of each variable; sweep the `let`
//! chains from the inside out, dropping dead bindings and uncounting the
//! uses in what they bound, so bindings that only fed dead ones die too;
//! inline forward through an environment of pending values.

use super::names::*;
use super::remat::Recompute;
use super::rules::{Rule, Stats};
use super::term::*;
use gradlift_lang::deep::guard;
use gradlift_lang::syntax::*;
use gradlift_lang::Prim;

/// The deepest value inlined into its single use ([`super::limits::Limits::inline_height`]).
pub const MAX_INLINE_HEIGHT: u32 = super::limits::LIMITS.inline_height;

/// What a run found.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Report {
    /// An array computation was inlined into its use: partial evaluation
    /// may now find a fusion or an array rule it could not see through the
    /// variable.
    pub exposed_arrays: bool,
}

/// Removes dead `let`s and inlines single-use values. Inlining the
/// variables in `quiet` (temporaries of CSE) is not counted as a rewrite.
pub(super) fn run(e: Expr, quiet: &FxSet<Name>, stats: &mut Stats) -> (Expr, Report) {
    let mut uses = Uses::default();
    uses.count(&e, 0);
    let e = if uses.of.values().any(|u| u.count == 0) {
        Sweep {
            uses: &mut uses,
            stats: &mut *stats,
        }
        .sweep(e)
    } else {
        e
    };
    let mut inline = Inline {
        uses: &uses,
        pending: FxMap::default(),
        copies: FxMap::default(),
        quiet,
        report: Report::default(),
        stats,
    };
    let (e, _) = inline.inline(e);
    (e, inline.report)
}

/// Uses of a `let`-bound variable.
#[derive(Debug)]
struct Use {
    count: u32,
    /// How many lambdas enclose the binding.
    depth: u32,
    /// Whether some use lies inside a lambda that does not enclose the binding.
    under_lambda: bool,
}

#[derive(Default)]
struct Uses {
    of: FxMap<Name, Use>,
}

impl Uses {
    fn count(&mut self, e: &Expr, depth: u32) {
        guard(|| {
            let mut e = e;
            while let ExprKind::Let {
                pat, value, body, ..
            } = &e.kind
            {
                self.count(value, depth);
                let mut names = Vec::new();
                pat.names(&mut names);
                for n in names {
                    self.of.insert(
                        n,
                        Use {
                            count: 0,
                            depth,
                            under_lambda: false,
                        },
                    );
                }
                e = body;
            }
            match &e.kind {
                ExprKind::Var(n) => {
                    if let Some(u) = self.of.get_mut(n) {
                        u.count += 1;
                        u.under_lambda |= depth > u.depth;
                    }
                }
                ExprKind::Lambda(_, body) => self.count(body, depth + 1),
                _ => for_each_child(e, &mut |c| self.count(c, depth)),
            }
        })
    }

    /// Removes the uses in `e` (which is being dropped).
    fn uncount(&mut self, e: &Expr) {
        guard(|| {
            let mut e = e;
            while let ExprKind::Let { value, body, .. } = &e.kind {
                self.uncount(value);
                e = body;
            }
            match &e.kind {
                ExprKind::Var(n) => {
                    if let Some(u) = self.of.get_mut(n) {
                        u.count = u.count.saturating_sub(1);
                    }
                }
                _ => for_each_child(e, &mut |c| self.uncount(c)),
            }
        })
    }

    fn is_used(&self, n: &Name) -> bool {
        self.of.get(n).is_none_or(|u| u.count > 0)
    }

    /// Used, and never inside a lambda that does not enclose the binding.
    fn used_outside_lambdas(&self, n: &Name) -> bool {
        self.of
            .get(n)
            .is_some_and(|u| u.count > 0 && !u.under_lambda)
    }

    fn used_once_outside_lambdas(&self, n: &Name) -> bool {
        self.of
            .get(n)
            .is_some_and(|u| u.count == 1 && !u.under_lambda)
    }
}

/// Whether `e` is `iota(s)` for a size expression `s` — a variable, a
/// constant, `len(x)` of a variable, or a sum, difference or product of
/// those — or a map of such a range whose body is a few operations on
/// reals that cannot fail (`map (i. if i == 0 then g else 0) iota(m + 1)`,
/// the cotangent of a scan's first state). Such a term is substituted at
/// every use: computing it again costs little where it is read element by
/// element (the native backend computes `iota(n)[i]`, and the elements of
/// a map written in place, in the reading loop instead of storing them;
/// an index into it computes the one element), and its free variables
/// mean the same at every use, since binders are unique.
fn is_range(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Builtin(Builtin::Iota, args) => matches!(&args[..], [a] if is_size(a, 2)),
        ExprKind::ArrayOp(ArrayOp::Map, f, args) => {
            matches!(&args[..], [r] if matches!(r.kind, ExprKind::Builtin(Builtin::Iota, _)) && is_range(r))
                && matches!(&f.kind, ExprKind::Lambda(ps, body) if ps.len() == 1 && cheap(body, &mut 0))
        }
        _ => false,
    }
}

/// Whether `e` is a size expression of at most `depth` operations.
fn is_size(e: &Expr, depth: u32) -> bool {
    match &e.kind {
        ExprKind::Var(_) | ExprKind::Int(_) => true,
        ExprKind::Builtin(Builtin::Len, xs) => {
            matches!(&xs[..], [x] if matches!(x.kind, ExprKind::Var(_)))
        }
        ExprKind::Prim(Prim::IAdd | Prim::ISub | Prim::IMul, xs) if depth > 0 => {
            xs.iter().all(|x| is_size(x, depth - 1))
        }
        _ => false,
    }
}

/// Whether `e` is `map (x. b) V` for a variable `V`, `b` primitives of
/// `x`, constants, variables, projections and tuples of those that are
/// cheaper to recompute than to store ([`Recompute`]): a scaled cotangent
/// (`map (ζ. h * ζ) g`), a component of an array of tuples (`map (g. g.1)
/// P`). Such a map is substituted at every use
/// (rule `inline-cheap-map`), like a range: a loop reading it computes
/// each element from `V`'s — the same operations on the same operands,
/// reading one array as it would have read the stored one — and the array
/// is never written. A use that needs the whole array (a `drop` of it,
/// say) computes it there, once, as the binding would have.
fn is_cheap_map(e: &Expr) -> bool {
    // A zip of two variables or cheap maps (a fold fused with a `map2`
    // reads one) pairs their elements: nothing is computed.
    if let ExprKind::ArrayOp(ArrayOp::Map2, f, args) = &e.kind {
        return args
            .iter()
            .all(|a| matches!(a.kind, ExprKind::Var(_)) || is_cheap_map(a))
            && crate::simplify::pe::is_zip(f);
    }
    let ExprKind::ArrayOp(ArrayOp::Map, f, args) = &e.kind else {
        return false;
    };
    let ([v], ExprKind::Lambda(ps, body)) = (&args[..], &f.kind) else {
        return false;
    };
    let budget = &mut Recompute::element();
    matches!(v.kind, ExprKind::Var(_)) && ps.len() == 1 && recomputable(body, budget)
}

/// Whether `e`, primitives on constants, variables and their components,
/// fits the `budget`.
fn recomputable(e: &Expr, budget: &mut Recompute) -> bool {
    match &e.kind {
        ExprKind::Const(_) | ExprKind::Var(_) => true,
        // A component of the element: read, not computed; a tuple of
        // such values is moved, not computed.
        ExprKind::Proj(x, _) => recomputable(x, budget),
        ExprKind::Tuple(xs) => xs.iter().all(|x| recomputable(x, budget)),
        ExprKind::Prim(p, xs) => budget.spend(*p) && xs.iter().all(|x| recomputable(x, budget)),
        _ => false,
    }
}

const MAX_RANGE_MAP_NODES: u32 = super::limits::LIMITS.range_map_nodes;

/// Whether `e` is built from at most [`MAX_RANGE_MAP_NODES`] constants,
/// variables, `cheap` primitives (the column [`Recompute`] reads: a
/// library call is not repeated at each use) and `if`s: it cannot fail.
fn cheap(e: &Expr, nodes: &mut u32) -> bool {
    *nodes += 1;
    if *nodes > MAX_RANGE_MAP_NODES {
        return false;
    }
    match &e.kind {
        ExprKind::Const(_) | ExprKind::Int(_) | ExprKind::Var(_) => true,
        ExprKind::Prim(p, xs) => p.info().cheap && xs.iter().all(|x| cheap(x, nodes)),
        ExprKind::If(c, t, f) => cheap(c, nodes) && cheap(t, nodes) && cheap(f, nodes),
        _ => false,
    }
}

struct Sweep<'a> {
    uses: &'a mut Uses,
    stats: &'a mut Stats,
}

impl Sweep<'_> {
    fn sweep(&mut self, e: Expr) -> Expr {
        guard(|| {
            if !matches!(e.kind, ExprKind::Let { .. }) {
                return map_children(e, &mut |c| self.sweep(c));
            }
            let (bindings, body) = split_lets(e);
            let body = self.sweep(body);
            let mut kept = Vec::with_capacity(bindings.len());
            for Binding { pat, value } in bindings.into_iter().rev() {
                let mut names = Vec::new();
                pat.names(&mut names);
                if !names.iter().any(|n| self.uses.is_used(n)) {
                    self.uses.uncount(&value);
                    self.stats.fire(Rule::DeadLet);
                    continue;
                }
                let pat = self.wild_if_unused(pat);
                let value = self.sweep(value);
                kept.push(Binding { pat, value });
            }
            kept.reverse();
            wrap(kept, body)
        })
    }

    fn wild_if_unused(&mut self, pat: Pattern) -> Pattern {
        guard(|| match pat {
            Pattern::Var(n, s) if !self.uses.is_used(&n) => {
                self.stats.fire(Rule::DeadLet);
                Pattern::Wild(s)
            }
            Pattern::Tuple(ps, s) => {
                Pattern::Tuple(ps.into_iter().map(|p| self.wild_if_unused(p)).collect(), s)
            }
            p => p,
        })
    }
}

struct Inline<'a> {
    uses: &'a Uses,
    /// Values waiting for their single use, with their heights.
    pending: FxMap<Name, (Expr, u32)>,
    /// Index ranges substituted at every use (see [`is_range`]).
    copies: FxMap<Name, (Expr, u32)>,
    quiet: &'a FxSet<Name>,
    report: Report,
    stats: &'a mut Stats,
}

impl Inline<'_> {
    /// The term with pending values substituted, and its height.
    fn inline(&mut self, e: Expr) -> (Expr, u32) {
        guard(|| match &e.kind {
            ExprKind::Var(n) => match self.pending.remove(n) {
                Some(found) => found,
                None => match self.copies.get(n) {
                    Some(range) => range.clone(),
                    None => (e, 1),
                },
            },
            ExprKind::Let { .. } => {
                let (bindings, body) = split_lets(e);
                let mut kept = Vec::with_capacity(bindings.len());
                let mut height = 0;
                for Binding { pat, value } in bindings {
                    let (value, h) = self.inline(value);
                    if let Pattern::Var(n, _) = &pat {
                        if is_range(&value) && self.uses.used_outside_lambdas(n) {
                            self.stats.fire(Rule::InlineIota);
                            self.copies.insert(n.clone(), (value, h));
                            continue;
                        }
                        if is_cheap_map(&value) && self.uses.used_outside_lambdas(n) {
                            self.stats.fire(Rule::InlineCheapMap);
                            // Each use may now fuse with its consumer.
                            self.report.exposed_arrays = true;
                            self.copies.insert(n.clone(), (value, h));
                            continue;
                        }
                        if h <= MAX_INLINE_HEIGHT && self.uses.used_once_outside_lambdas(n) {
                            if !self.quiet.contains(n) {
                                self.stats.fire(Rule::InlineOnce);
                            }
                            self.report.exposed_arrays |= matches!(
                                value.kind,
                                ExprKind::ArrayOp(..)
                                    | ExprKind::Builtin(..)
                                    | ExprKind::ArrayLit(_)
                            );
                            self.pending.insert(n.clone(), (value, h));
                            continue;
                        }
                    }
                    height = height.max(h);
                    kept.push(Binding { pat, value });
                }
                let (body, h) = self.inline(body);
                let height = height.max(h) + kept.len().min(1) as u32;
                (wrap(kept, body), height)
            }
            // A lambda counts as one level whatever its body: inlining a
            // `map` into its single use moves one loop, however long its
            // body, and lets fusion see it.
            ExprKind::Lambda(..) => (map_children(e, &mut |c| self.inline(c).0), 1),
            _ => {
                let mut height = 0;
                let e = map_children(e, &mut |c| {
                    let (c, h) = self.inline(c);
                    height = height.max(h);
                    c
                });
                (e, height + 1)
            }
        })
    }
}
