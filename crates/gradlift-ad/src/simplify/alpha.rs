//! Equality of terms up to the names of their binders (α-equivalence),
//! and a hash consistent with it: for `if c then e else e ⇝ e` and for
//! common-subexpression elimination.
//!
//! Both walk the two terms (or the one) with a scope of binders, each bound
//! name recorded with its depth; bound variables compare and hash by depth
//! (a de Bruijn index), free ones by name. Optionally `a + b` equals
//! `b + a` (and `*` likewise), which IEEE arithmetic computes alike. Walks go
//! through [`guard`] and take `let` chains with a loop.

use super::names::{Env, FxHasher};
use super::term::is_commutative;
use gradlift_lang::deep::guard;
use gradlift_lang::syntax::*;
use std::hash::{Hash, Hasher};

/// Equality up to the names of binders, and a hash consistent with it.
/// Constants compare by bits and by whether they are structural zeros;
/// with `commutative`, `a + b` equals `b + a` (and `*` likewise).
pub(super) struct Alpha {
    /// Binders in scope on each side, with their depth (the number of
    /// binders in scope when they were bound).
    left: Env<usize>,
    right: Env<usize>,
    commutative: bool,
}

impl Alpha {
    /// A comparer; `commutative` identifies `a op b` with `b op a` for `+`, `*`.
    pub fn new(commutative: bool) -> Alpha {
        Alpha {
            left: Env::default(),
            right: Env::default(),
            commutative,
        }
    }

    /// Whether `a` and `b` are equal up to the names of their binders.
    pub fn eq(&mut self, a: &Expr, b: &Expr) -> bool {
        guard(|| {
            let (ml, mr) = (self.left.mark(), self.right.mark());
            let r = self.eq_inner(a, b);
            self.left.pop_to(ml);
            self.right.pop_to(mr);
            r
        })
    }

    fn bind(&mut self, p: &Pattern, q: &Pattern) -> bool {
        match (p, q) {
            (Pattern::Var(x, _), Pattern::Var(y, _)) => {
                let depth = self.left.mark();
                self.left.push(x.clone(), depth);
                self.right.push(y.clone(), depth);
                true
            }
            (Pattern::Wild(_), Pattern::Wild(_)) => true,
            (Pattern::Tuple(ps, _), Pattern::Tuple(qs, _)) => {
                ps.len() == qs.len() && ps.iter().zip(qs).all(|(p, q)| self.bind(p, q))
            }
            _ => false,
        }
    }

    fn all(&mut self, xs: &[Expr], ys: &[Expr]) -> bool {
        xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| self.eq(x, y))
    }

    fn eq_inner(&mut self, mut a: &Expr, mut b: &Expr) -> bool {
        use ExprKind::*;
        while let (
            Let {
                pat: p,
                ty: s,
                value: v,
                body: x,
            },
            Let {
                pat: q,
                ty: t,
                value: w,
                body: y,
            },
        ) = (&a.kind, &b.kind)
        {
            if s != t || !self.eq(v, w) || !self.bind(p, q) {
                return false;
            }
            a = x;
            b = y;
        }
        match (&a.kind, &b.kind) {
            (Const(x), Const(y)) => {
                x.to_bits() == y.to_bits() && a.is_structural_zero() == b.is_structural_zero()
            }
            (Int(x), Int(y)) | (Literal(x), Literal(y)) => x == y,
            (Var(x), Var(y)) => match (self.left.get(x), self.right.get(y)) {
                (Some(i), Some(j)) => i == j,
                (None, None) => x == y,
                _ => false,
            },
            (PrimFn(p), PrimFn(q)) => p == q,
            (Prim(p, xs), Prim(q, ys)) => {
                p == q
                    && (self.all(xs, ys)
                        || (self.commutative
                            && is_commutative(*p)
                            && xs.len() == 2
                            && ys.len() == 2
                            && self.eq(&xs[0], &ys[1])
                            && self.eq(&xs[1], &ys[0])))
            }
            (Tuple(xs), Tuple(ys)) | (ArrayLit(xs), ArrayLit(ys)) => self.all(xs, ys),
            (Proj(x, i), Proj(y, j)) if i == j => self.eq(x, y),
            (Index(x, i), Index(y, j)) if i == j => self.eq(x, y),
            (If(c, t, e), If(d, u, f)) => self.eq(c, d) && self.eq(t, u) && self.eq(e, f),
            (Lambda(ps, x), Lambda(qs, y)) => {
                ps.len() == qs.len()
                    && ps
                        .iter()
                        .zip(qs)
                        .all(|(p, q)| p.ty == q.ty && self.bind(&p.pat, &q.pat))
                    && self.eq(x, y)
            }
            (Apply(f, xs), Apply(g, ys)) => self.eq(f, g) && self.all(xs, ys),
            (ArrayOp(o, f, xs), ArrayOp(p, g, ys)) => o == p && self.eq(f, g) && self.all(xs, ys),
            (Derive(d, f, xs), Derive(c, g, ys)) => d == c && self.eq(f, g) && self.all(xs, ys),
            (Builtin(b, xs), Builtin(c, ys)) => b == c && self.all(xs, ys),
            _ => false,
        }
    }

    /// A hash of `e` such that terms [`Alpha::eq`] calls equal hash alike.
    pub fn hash(&mut self, e: &Expr) -> u64 {
        guard(|| {
            let mark = self.left.mark();
            let r = self.hash_inner(e);
            self.left.pop_to(mark);
            r
        })
    }

    fn hash_pattern(&mut self, p: &Pattern, h: &mut FxHasher) {
        match p {
            Pattern::Var(x, _) => {
                let depth = self.left.mark();
                self.left.push(x.clone(), depth);
                0u8.hash(h);
            }
            Pattern::Wild(_) => 1u8.hash(h),
            Pattern::Tuple(ps, _) => {
                (2u8, ps.len()).hash(h);
                ps.iter().for_each(|p| self.hash_pattern(p, h));
            }
        }
    }

    fn hash_inner(&mut self, mut e: &Expr) -> u64 {
        use ExprKind::*;
        let mut h = FxHasher::default();
        while let Let {
            pat,
            ty,
            value,
            body,
        } = &e.kind
        {
            ("let", ty.as_ref().map(|t| t.to_string())).hash(&mut h);
            self.hash(value).hash(&mut h);
            self.hash_pattern(pat, &mut h);
            e = body;
        }
        match &e.kind {
            Const(x) => ("c", x.to_bits(), e.is_structural_zero()).hash(&mut h),
            Int(k) => ("z", k).hash(&mut h),
            Literal(k) => ("l", k).hash(&mut h),
            // A bound variable hashes by how many binders lie between it
            // and its own (a de Bruijn index), not by its name.
            Var(x) => match self.left.get(x) {
                Some(depth) => ("b", self.left.mark() - depth).hash(&mut h),
                None => ("v", x).hash(&mut h),
            },
            PrimFn(p) => ("f", p).hash(&mut h),
            Prim(p, xs) => {
                ("p", p).hash(&mut h);
                let mut hs: Vec<u64> = xs.iter().map(|x| self.hash(x)).collect();
                if self.commutative && is_commutative(*p) {
                    hs.sort_unstable();
                }
                hs.hash(&mut h);
            }
            Tuple(xs) => ("t", self.hash_all(xs)).hash(&mut h),
            ArrayLit(xs) => ("a", self.hash_all(xs)).hash(&mut h),
            Proj(x, i) => ("j", i, self.hash(x)).hash(&mut h),
            Index(x, i) => ("i", i, self.hash(x)).hash(&mut h),
            If(c, t, f) => ("?", self.hash(c), self.hash(t), self.hash(f)).hash(&mut h),
            Lambda(ps, body) => {
                "l".hash(&mut h);
                for p in ps {
                    p.ty.as_ref().map(|t| t.to_string()).hash(&mut h);
                    self.hash_pattern(&p.pat, &mut h);
                }
                self.hash(body).hash(&mut h);
            }
            Apply(f, xs) => ("@", self.hash(f), self.hash_all(xs)).hash(&mut h),
            ArrayOp(op, f, xs) => (op.name(), self.hash(f), self.hash_all(xs)).hash(&mut h),
            Derive(d, f, xs) => (d.name(), self.hash(f), self.hash_all(xs)).hash(&mut h),
            Builtin(b, xs) => (b.name(), self.hash_all(xs)).hash(&mut h),
            Let { .. } => unreachable!("let chains are walked above"),
        }
        h.finish()
    }

    fn hash_all(&mut self, xs: &[Expr]) -> Vec<u64> {
        xs.iter().map(|x| self.hash(x)).collect()
    }
}
