//! CSE — common-subexpression elimination: first-order Target →
//! first-order Target in A-normal form.
//!
//! Input: the output of partial evaluation and DCE: every binder has a name
//! used by no other binder and by no free variable. Output: an equivalent
//! term in which each computation (an arithmetic operation, an array
//! operation, a built-in, a call, an array literal, an `if`) is bound to a
//! variable by a `let` of its block, and a computation equal to one
//! already bound in scope is replaced by that variable. Equality is
//! structural, ignores spans and the names of binders inside the
//! computation (two `map (x. x * w) A` are one), and identifies `a + b`
//! with `b + a` and `a * b` with `b * a`, which IEEE arithmetic computes
//! alike. DCE follows and inlines the bindings used once again, so only
//! shared computations stay bound.
//!
//! Scope: a computation bound in a block (the whole term, a branch of `if`,
//! a lambda body) is reused only inside that block, where its free
//! variables are in scope; since every binder's name is unique, a name
//! means the same wherever it is in scope. Nothing is hoisted out of a
//! branch or a lambda. Size expressions (the first argument of `iota`,
//! `replicate`, `take`, `drop`) and conditions are not values and are left
//! in place, and so is a transposed operand of `matmul` (the kernel reads
//! it in place: `gradlift_lang::kernels::operand`); tuples, projections and indexing cost nothing to repeat and are
//! not bound (but a `let` of a projection already bound under another name
//! becomes that name, and so does the projection itself where it is read
//! again).
//!
//! Relies on: purity (a computation may be evaluated once instead of twice).
//! One walk; each computation is hashed once (up to α-equivalence) and
//! compared only with computations of equal hash.

use super::alpha::Alpha;
use super::names::*;
use super::rules::{Rule, Stats};
use super::term::*;
use gradlift_lang::deep::guard;
use gradlift_lang::prim::PrimKind;
use gradlift_lang::syntax::*;
use gradlift_lang::Span;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// Binds every computation once. `names` must know every name of `e`
/// (partial evaluation hands it over). Also returns the temporaries
/// introduced, for DCE to inline where used once.
pub(super) fn run(e: Expr, names: Names, stats: &mut Stats) -> (Expr, FxSet<Name>) {
    let mut cse = Cse {
        names,
        table: FxMap::default(),
        trail: Vec::new(),
        alias: FxMap::default(),
        blocks: Vec::new(),
        alpha: Alpha::new(true),
        temps: FxSet::default(),
        stats,
    };
    let e = cse.block_of(e);
    (e, cse.temps)
}

struct Cse<'a> {
    names: Names,
    /// Hash → computations bound in scope: where their binding is (block
    /// depth, index in the block) and its variable.
    table: FxMap<u64, Vec<(usize, usize, Name)>>,
    /// Hashes inserted, in order, to leave a block.
    trail: Vec<u64>,
    /// Variables replaced by an earlier variable bound to the same value.
    alias: FxMap<Name, Name>,
    temps: FxSet<Name>,
    /// The blocks being built, innermost last.
    blocks: Vec<Vec<Binding>>,
    alpha: Alpha,
    stats: &'a mut Stats,
}

/// Whether some computation of `e` occurs twice: equal up to the names of
/// lambda parameters and the order of the operands of `+` and `*`. When none
/// does, CSE has nothing to find and need not run. (A repetition CSE finds
/// only through variables bound to equal values implies those values repeat,
/// so variables are compared by name here.)
pub(super) fn has_repeats(e: &Expr) -> bool {
    let mut numbering = Numbering::default();
    numbering.number(e);
    numbering.repeated
}

#[derive(Default)]
struct Numbering {
    /// Lambda parameters: the depth of their lambda and their position.
    params: Env<(usize, usize)>,
    seen: FxSet<u64>,
    /// Variables bound to a projection, and its number.
    projections: FxMap<Name, u64>,
    /// Lambdas around the current node.
    depth: usize,
    repeated: bool,
}

impl Numbering {
    fn number(&mut self, e: &Expr) -> u64 {
        guard(|| {
            let mut e = e;
            while let ExprKind::Let {
                pat, value, body, ..
            } = &e.kind
            {
                let v = self.number(value);
                if let (Pattern::Var(x, _), true) = (pat, is_projection(value)) {
                    // Read as the projection it names (see `Cse::operand`).
                    self.projections.insert(x.clone(), v);
                }
                e = body;
            }
            let mut h = FxHasher::default();
            std::mem::discriminant(&e.kind).hash(&mut h);
            match &e.kind {
                ExprKind::Const(c) => (c.to_bits(), e.is_structural_zero()).hash(&mut h),
                ExprKind::Var(n) => match self.params.get(n).filter(|_| self.depth > 0) {
                    Some((depth, i)) => (self.depth - depth, *i).hash(&mut h),
                    None => match self.projections.get(n) {
                        Some(v) => return *v,
                        None => n.hash(&mut h),
                    },
                },
                ExprKind::Lambda(params, body) => {
                    self.depth += 1;
                    let mark = self.params.mark();
                    let mut i = 0;
                    for p in params {
                        self.number_params(&p.pat, &mut i);
                    }
                    i.hash(&mut h);
                    self.number(body).hash(&mut h);
                    self.params.pop_to(mark);
                    self.depth -= 1;
                }
                ExprKind::Prim(p, xs) => {
                    p.hash(&mut h);
                    let mut vs: Vec<u64> = xs.iter().map(|x| self.number(x)).collect();
                    if is_commutative(*p) {
                        vs.sort_unstable();
                    }
                    vs.hash(&mut h);
                }
                _ => {
                    match &e.kind {
                        ExprKind::ArrayOp(op, ..) => op.hash(&mut h),
                        ExprKind::Builtin(b, _) => b.hash(&mut h),
                        ExprKind::Proj(_, k) => k.hash(&mut h),
                        ExprKind::Index(_, k) => k.hash(&mut h),
                        ExprKind::PrimFn(p) => p.hash(&mut h),
                        _ => {}
                    }
                    for_each_child(e, &mut |c| self.number(c).hash(&mut h));
                }
            }
            let v = h.finish();
            if is_computation(e) && !self.seen.insert(v) {
                self.repeated = true;
            }
            v
        })
    }

    fn number_params(&mut self, p: &Pattern, i: &mut usize) {
        match p {
            Pattern::Var(n, _) => {
                self.params.push(n.clone(), (self.depth, *i));
                *i += 1;
            }
            Pattern::Wild(_) => *i += 1,
            Pattern::Tuple(ps, _) => ps.iter().for_each(|p| self.number_params(p, i)),
        }
    }
}

/// Whether `e` is a computation worth binding.
fn is_computation(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Prim(p, _) => p.info().kind() == PrimKind::Real,
        ExprKind::ArrayOp(..)
        | ExprKind::Builtin(..)
        | ExprKind::Apply(..)
        | ExprKind::ArrayLit(_)
        | ExprKind::If(..) => true,
        _ => false,
    }
}

/// `v.i.j…` for a variable `v`.
fn is_projection(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Proj(x, _) => matches!(x.kind, ExprKind::Var(_)) || is_projection(x),
        _ => false,
    }
}

impl Cse<'_> {
    /// `e` as a block of its own: its bindings, and the table entries they
    /// make, end with it.
    fn block_of(&mut self, e: Expr) -> Expr {
        self.blocks.push(Vec::new());
        let mark = self.trail.len();
        let body = self.value(e);
        while self.trail.len() > mark {
            let h = self.trail.pop().expect("longer than the mark");
            if let Some(bucket) = self.table.get_mut(&h) {
                bucket.pop();
            }
        }
        let inner = self.blocks.pop().expect("pushed above");
        wrap(inner, body)
    }

    /// The variable already bound to `e` in scope, if any.
    fn lookup(&mut self, h: u64, e: &Expr) -> Option<Name> {
        let bucket = self.table.get(&h)?;
        let (alpha, blocks) = (&mut self.alpha, &self.blocks);
        bucket
            .iter()
            .rev()
            .find(|(depth, i, _)| alpha.eq(&blocks[*depth][*i].value, e))
            .map(|(_, _, n)| n.clone())
    }

    /// Binds `pat` to `value` in the current block; a computation bound to
    /// a variable is remembered under its hash.
    fn push(&mut self, pat: Pattern, value: Expr, remember: Option<u64>) {
        let depth = self.blocks.len() - 1;
        let block = self.blocks.last_mut().expect("inside a block");
        if let (Some(h), Pattern::Var(n, _)) = (remember, &pat) {
            self.table
                .entry(h)
                .or_default()
                .push((depth, block.len(), n.clone()));
            self.trail.push(h);
        }
        block.push(Binding { pat, value });
    }

    /// `e` as an operand: a computation becomes a variable, and so does a
    /// projection already bound to one (so that the computations reading
    /// `q.1` and a variable bound to `q.1` compare equal).
    fn operand(&mut self, e: Expr) -> Expr {
        let e = self.value(e);
        if is_projection(&e) {
            let h = self.alpha.hash(&e);
            return match self.lookup(h, &e) {
                Some(n) => var(&n),
                None => e,
            };
        }
        if !is_computation(&e) {
            return e;
        }
        let h = self.alpha.hash(&e);
        if let Some(n) = self.lookup(h, &e) {
            self.stats.fire(Rule::Cse);
            return var(&n);
        }
        let n = self.names.fresh("t");
        self.temps.insert(n.clone());
        self.push(Pattern::Var(n.clone(), Span::DUMMY), e, Some(h));
        var(&n)
    }

    /// `e` with its operands bound; `let`s join the current block.
    fn value(&mut self, e: Expr) -> Expr {
        guard(|| match &e.kind {
            ExprKind::Let { .. } => {
                let (bindings, body) = split_lets(e);
                for Binding { pat, value } in bindings {
                    self.binding(pat, value);
                }
                self.value(body)
            }
            ExprKind::Var(n) => match self.alias.get(n) {
                Some(m) => var(m),
                None => e,
            },
            ExprKind::If(..) => {
                let span = e.span;
                let ExprKind::If(c, t, f) = into_kind(e) else {
                    unreachable!("checked to be an if")
                };
                let c = self.condition(*c);
                let t = self.block_of(*t);
                let f = self.block_of(*f);
                Expr::new(ExprKind::If(Box::new(c), Box::new(t), Box::new(f)), span)
            }
            ExprKind::ArrayOp(..) => {
                let span = e.span;
                let ExprKind::ArrayOp(op, f, args) = into_kind(e) else {
                    unreachable!("checked to be an array operation")
                };
                let f = self.lambda_block(*f);
                // The step of `revfold` and `revwhile` is a lambda among the
                // arguments: its body is a block like the function's (the
                // names it reads renamed as everywhere else).
                let args = args
                    .into_iter()
                    .map(|a| match a.kind {
                        ExprKind::Lambda(..) => self.lambda_block(a),
                        _ => self.operand(a),
                    })
                    .collect();
                Expr::new(ExprKind::ArrayOp(op, Box::new(f), args), span)
            }
            ExprKind::Builtin(..) => {
                let span = e.span;
                let ExprKind::Builtin(b, args) = into_kind(e) else {
                    unreachable!("checked to be a built-in")
                };
                let args = args
                    .into_iter()
                    .enumerate()
                    .map(|(i, a)| {
                        if is_size_arg(b, i) {
                            self.size(a)
                        } else if b == Builtin::MatMul
                            && gradlift_lang::kernels::operand(&a).2.is_some()
                        {
                            // Read in place by the kernel: not a computation.
                            let span = a.span;
                            let ExprKind::Builtin(t, mut targs) = into_kind(a) else {
                                unreachable!("a transposed operand")
                            };
                            let m = self.operand(targs.pop().expect("a matrix"));
                            let c = self.size(targs.pop().expect("a count"));
                            Expr::new(ExprKind::Builtin(t, vec![c, m]), span)
                        } else {
                            self.operand(a)
                        }
                    })
                    .collect();
                Expr::new(ExprKind::Builtin(b, args), span)
            }
            ExprKind::Lambda(..) | ExprKind::PrimFn(_) | ExprKind::Const(_) => e,
            _ => map_children(e, &mut |c| self.operand(c)),
        })
    }

    /// A lambda with its body a block of its own; any other function as it
    /// is.
    fn lambda_block(&mut self, f: Expr) -> Expr {
        let span = f.span;
        match into_kind(f) {
            ExprKind::Lambda(ps, body) => Expr::new(
                ExprKind::Lambda(ps, Arc::new(self.block_of(unshare(body)))),
                span,
            ),
            other => Expr::new(other, span),
        }
    }

    fn binding(&mut self, pat: Pattern, value: Expr) {
        let value = self.value(value);
        let mut remember = None;
        if let Pattern::Var(x, _) = &pat {
            // A projection costs nothing and is not bound by CSE, but two
            // bindings of the same one (each fold `fold-merge` merged reads
            // its element as `q.0`) must be one name for the computations
            // that read them to compare equal.
            if is_computation(&value) || is_projection(&value) {
                let h = self.alpha.hash(&value);
                if let Some(n) = self.lookup(h, &value) {
                    self.stats.fire(Rule::Cse);
                    self.alias.insert(x.clone(), n);
                    return;
                }
                remember = Some(h);
            }
        }
        self.push(pat, value, remember);
    }

    /// A condition: comparisons take operands, connectives conditions.
    fn condition(&mut self, c: Expr) -> Expr {
        guard(|| match &c.kind {
            ExprKind::Prim(p, _) if p.info().kind() == PrimKind::Logic => {
                map_children(c, &mut |x| self.condition(x))
            }
            _ => map_children(c, &mut |x| self.operand(x)),
        })
    }

    /// A size expression: only renamed through aliases.
    fn size(&mut self, e: Expr) -> Expr {
        guard(|| match &e.kind {
            ExprKind::Var(n) => match self.alias.get(n) {
                Some(m) => var(m),
                None => e,
            },
            _ => map_children(e, &mut |x| self.size(x)),
        })
    }
}
