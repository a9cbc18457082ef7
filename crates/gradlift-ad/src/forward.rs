//! Forward mode by transformation: the tangent semantics, every real paired
//! with its tangent (the ∂post of the forward-mode semantics, the
//! `$ad.forward()` of the macro chapter, dual numbers as a program
//! transformation).
//!
//! Input: a first-order closed term (a program, or a gradient program —
//! forward over reverse gives Hessian-vector products). Output: a closed
//! term over the parameters and one tangent per value parameter
//! (`<name>_dot`, same type) returning `(value, tangent)`.
//!
//! Types are lifted, `D(R) = (R, R)`, `D(T₁×…×T_k) = D(T₁)×…×D(T_k)`,
//! `D([T; n]) = [D(T); n]`, and terms structurally:
//!
//! ```text
//! D(c) = (c, 0)          D(x) = x          D(n) = (n, 0)   for a size n
//! D(p(e₁, e₂)) = let a = D(e₁) in let b = D(e₂) in let r = p(a.0, b.0) in
//!                (r, ∂₁p(a.0, b.0)·a.1 + ∂₂p(a.0, b.0)·b.1)
//!                where a zero tangent contributes 0 even if the partial is
//!                infinite (no 0·inf = nan, as in gradlift-tape's duals):
//!                the product is guarded by a test of the tangent unless
//!                the partial is a finite constant (then it is a zero
//!                already, of either sign: the test would only choose the
//!                sign, and doubled the work of a Hessian-vector product)
//! D(a < b) = D(a).0 < D(b).0        (conditions are not differentiated)
//! D(map F A) = map D(F) D(A), D(reduce F z A) = reduce D(F) D(z) D(A), …
//! D(k) = k, D(i + j) = D(i) + D(j), …       (integers are not lifted:
//!                                            their tangent is zero)
//! D(real(i)) = (real(D(i)), 0),  D(int(x)) = int(D(x).0)
//! ```
//!
//! Every other construct (let, tuples, projections, `if`, array literals,
//! indexing, `replicate`, `concat`, `take`, `drop`, shifts, `len`, folds and
//! scans) keeps its shape, applied to lifted values, so the tangent rules of
//! the whole language follow from the primitives' partial derivatives — the
//! same column of the primitive table the reverse mode uses.

use crate::direct::AdError;
use crate::inline::Closed;
use gradlift_lang::build::*;
use gradlift_lang::deep::guard;
use gradlift_lang::names::NameSupply;
use gradlift_lang::prim::PrimKind;
use gradlift_lang::syntax::*;

/// `D(T)`.
pub fn lift_type(t: &Type) -> Type {
    match t {
        Type::Real => Type::Tuple(vec![Type::Real, Type::Real]),
        Type::Tuple(ts) => Type::Tuple(ts.iter().map(lift_type).collect()),
        Type::Array(t, n) => Type::array(lift_type(t), n.clone()),
        Type::Int | Type::Bool | Type::Fun(..) => t.clone(),
    }
}

/// The forward-mode program of `closed`: parameters, then a tangent per
/// value parameter; result `(value, tangent)`.
pub fn jvp(closed: &Closed) -> Result<Closed, AdError> {
    let mut f = Forward {
        names: closed.name_supply(),
    };
    let mut params = closed.params.clone();
    let mut joins = Vec::new();
    for (p, t) in &closed.params {
        if let Some(t) = t {
            let dot = f.names.fresh(&format!("{p}_dot"));
            params.push((dot.clone(), Some(t.clone())));
            let joined = f.join(t, var(p), var(&dot));
            joins.push((pvar(p), joined));
        }
    }
    let body = f.expr(&closed.body)?;
    let r = f.names.fresh("result");
    let (value, tangent) = f.split(&closed.ret, var(&r));
    let out = let_in(pvar(&r), body, tuple(vec![value, tangent]));
    let body = crate::direct::lets(joins, out);
    Ok(Closed {
        name: Name::from(format!("{}_jvp", closed.name)),
        params,
        size_vars: closed.size_vars.clone(),
        ret: Type::Tuple(vec![closed.ret.clone(), closed.ret.clone()]),
        body,
    })
}

struct Forward {
    names: NameSupply,
}

impl Forward {
    /// A value `v` and a tangent `t` of type `ty` as one lifted value.
    fn join(&mut self, ty: &Type, v: Expr, t: Expr) -> Expr {
        match ty {
            Type::Real => tuple(vec![v, t]),
            Type::Tuple(ts) => Expr::synth(ExprKind::Tuple(
                ts.iter()
                    .enumerate()
                    .map(|(k, t_k)| self.join(t_k, proj(v.clone(), k), proj(t.clone(), k)))
                    .collect(),
            )),
            Type::Array(elem, _) => {
                let (x, y) = (self.names.fresh("x"), self.names.fresh("y"));
                let body = self.join(elem, var(&x), var(&y));
                array_op(
                    ArrayOp::Map2,
                    lambda(vec![pvar(&x), pvar(&y)], body),
                    vec![v, t],
                )
            }
            Type::Int | Type::Bool | Type::Fun(..) => v,
        }
    }

    /// A lifted value `d` of type `D(ty)` split into value and tangent.
    fn split(&mut self, ty: &Type, d: Expr) -> (Expr, Expr) {
        match ty {
            Type::Real => (proj(d.clone(), 0), proj(d, 1)),
            Type::Tuple(ts) => {
                let (vs, ts): (Vec<Expr>, Vec<Expr>) = ts
                    .iter()
                    .enumerate()
                    .map(|(k, t)| self.split(t, proj(d.clone(), k)))
                    .unzip();
                (
                    Expr::synth(ExprKind::Tuple(vs)),
                    Expr::synth(ExprKind::Tuple(ts)),
                )
            }
            Type::Array(elem, _) => {
                let (x, y) = (self.names.fresh("x"), self.names.fresh("x"));
                let (v, _) = self.split(elem, var(&x));
                let (_, t) = self.split(elem, var(&y));
                (
                    array_op(ArrayOp::Map, lambda(vec![pvar(&x)], v), vec![d.clone()]),
                    array_op(ArrayOp::Map, lambda(vec![pvar(&y)], t), vec![d]),
                )
            }
            // The tangent of an integer is zero.
            Type::Int => (d, int(0)),
            Type::Bool | Type::Fun(..) => (d.clone(), d),
        }
    }

    /// A size expression: an integer, which is not lifted (`len` of a
    /// lifted array is the length of the array).
    fn size(&mut self, e: &Expr) -> Result<Expr, AdError> {
        self.expr(e)
    }

    fn all(&mut self, es: &[Expr]) -> Result<Vec<Expr>, AdError> {
        es.iter().map(|e| self.expr(e)).collect()
    }

    fn expr(&mut self, e: &Expr) -> Result<Expr, AdError> {
        guard(|| self.expr_inner(e))
    }

    /// `D(reduce_by_index(d, op, idx, v))` for `op` = `*`, `min`, `max`
    /// (`+` keeps its shape): the bins of the values, and the tangent of
    /// each bin from the rules the reverse mode uses
    /// (`rules/histogram.rs`): an extremum's is its first winner's, a
    /// product's `Σ ∂(bin)/∂x · ẋ` over its contributors.
    /// `D(matmul(A, B))` for lifted matrices `a` and `b`: the values'
    /// product, and the tangent `Ȧ·B + A·Ḃ` as two products (a zero
    /// tangent times an infinite value is NaN here, unlike the guarded
    /// element-wise rules: the kernel has no guard), paired element by
    /// element.
    fn matmul(&mut self, n: Expr, a: Expr, b: Expr) -> Expr {
        let mut binds = Vec::new();
        let mut bind = |f: &mut Self, hint: &str, e: Expr| {
            let x = f.names.fresh(hint);
            binds.push((pvar(&x), e));
            var(&x)
        };
        let (a, b) = (bind(self, "a", a), bind(self, "b", b));
        // The values (`part` 0) or the tangents (1) of a lifted matrix.
        let part = |f: &mut Self, m: &Expr, k: usize| {
            let (row, x) = (f.names.fresh("row"), f.names.fresh("x"));
            map1(&row, map1(&x, proj(var(&x), k), var(&row)), m.clone())
        };
        let (av, at) = (part(self, &a, 0), part(self, &a, 1));
        let (bv, bt) = (part(self, &b, 0), part(self, &b, 1));
        let (av, at) = (bind(self, "av", av), bind(self, "at", at));
        let (bv, bt) = (bind(self, "bv", bv), bind(self, "bt", bt));
        let product =
            |x: &Expr, y: &Expr| builtin(Builtin::MatMul, vec![n.clone(), x.clone(), y.clone()]);
        let c = bind(self, "c", product(&av, &bv));
        let (ct1, ct2) = (product(&at, &bv), product(&av, &bt));
        let (ct1, ct2) = (bind(self, "ct", ct1), bind(self, "ct", ct2));
        // Row by row, element by element: `(c, ct1 + ct2)`.
        let rows = |f: &mut Self, x: &Expr, y: &Expr, element: &dyn Fn(Expr, Expr) -> Expr| {
            let [r1, r2, x1, x2] = ["r", "r", "x", "x"].map(|h| f.names.fresh(h));
            let element = lambda(vec![pvar(&x1), pvar(&x2)], element(var(&x1), var(&x2)));
            let row = lambda(
                vec![pvar(&r1), pvar(&r2)],
                array_op(ArrayOp::Map2, element, vec![var(&r1), var(&r2)]),
            );
            array_op(ArrayOp::Map2, row, vec![x.clone(), y.clone()])
        };
        let ct = rows(self, &ct1, &ct2, &add);
        let ct = bind(self, "ct", ct);
        let mut out = rows(self, &c, &ct, &|x, t| tuple(vec![x, t]));
        for (p, v) in binds.into_iter().rev() {
            out = let_in(p, v, out);
        }
        out
    }

    fn reduce_by_index(&mut self, op: gradlift_lang::Prim, args: Vec<Expr>) -> Expr {
        use crate::rules::histogram::*;
        use gradlift_lang::Prim;
        let mut binds = Vec::new();
        let mut bind = |f: &mut Self, hint: &str, e: Expr| {
            let n = f.names.fresh(hint);
            binds.push((pvar(&n), e));
            var(&n)
        };
        let mut args = args.into_iter();
        let (dd, idx, vv) = (
            args.next().expect("bins"),
            args.next().expect("indices"),
            args.next().expect("values"),
        );
        let (dd, idx, vv) = (
            bind(self, "d", dd),
            bind(self, "idx", idx),
            bind(self, "v", vv),
        );
        let values = |f: &mut Self, a: &Expr| {
            let x = f.names.fresh("x");
            map1(&x, proj(var(&x), 0), a.clone())
        };
        let (d, v) = (values(self, &dd), values(self, &vv));
        let (d, v) = (bind(self, "d0", d), bind(self, "v0", v));
        let r = reduce_by_index(op, d.clone(), idx.clone(), v.clone());
        let r = bind(self, "r", r);
        let j = self.names.fresh("j");
        let at = |a: &Expr, j: &Expr| get(a.clone(), j.clone());
        let tangent = match op {
            Prim::Max | Prim::Min => {
                let w = first_winners(&d, &idx, &v, &r, &mut self.names);
                let w = bind(self, "w", w);
                let wj = at(&w, &var(&j));
                let winner = prim(Prim::ToInt, vec![wj.clone()]);
                cond(
                    prim(Prim::Eq, vec![at(&d, &var(&j)), at(&r, &var(&j))]),
                    proj(at(&dd, &var(&j)), 1),
                    cond(
                        prim(Prim::Lt, vec![wj, real(f64::INFINITY)]),
                        proj(at(&vv, &winner), 1),
                        real(0.0),
                    ),
                )
            }
            _ => {
                let c = zero_counts(&d, &idx, &v, &mut self.names);
                let c = bind(self, "c", c);
                let p = nonzero_products(&d, &idx, &v, &mut self.names);
                let p = bind(self, "p", p);
                let z = zero_values(&d, &idx, &v, &mut self.names);
                let z = bind(self, "z", z);
                let i = self.names.fresh("i");
                let bin = at(&idx, &var(&i));
                let share =
                    product_share(at(&v, &var(&i)), at(&c, &bin), at(&p, &bin), at(&z, &bin));
                let from_values = map1(
                    &i,
                    mul(share, proj(at(&vv, &var(&i)), 1)),
                    builtin(
                        Builtin::Iota,
                        vec![builtin(Builtin::Len, vec![idx.clone()])],
                    ),
                );
                let zeros = builtin(
                    Builtin::Replicate,
                    vec![builtin(Builtin::Len, vec![dd.clone()]), real(0.0)],
                );
                let from_values = reduce_by_index(Prim::Add, zeros, idx.clone(), from_values);
                let from_values = bind(self, "dv", from_values);
                let own = product_share(
                    at(&d, &var(&j)),
                    at(&c, &var(&j)),
                    at(&p, &var(&j)),
                    at(&z, &var(&j)),
                );
                add(
                    mul(own, proj(at(&dd, &var(&j)), 1)),
                    at(&from_values, &var(&j)),
                )
            }
        };
        let out = map1(
            &j,
            tuple(vec![at(&r, &var(&j)), tangent]),
            builtin(Builtin::Iota, vec![builtin(Builtin::Len, vec![dd.clone()])]),
        );
        crate::direct::lets(binds, out)
    }

    fn expr_inner(&mut self, e: &Expr) -> Result<Expr, AdError> {
        let unsupported = |what: &str| {
            Err(AdError::Unsupported {
                what: format!("{what} in forward mode"),
                span: e.span,
            })
        };
        Ok(match &e.kind {
            ExprKind::Const(_) => tuple(vec![e.clone(), Expr::structural_zero()]),
            ExprKind::Int(_) | ExprKind::Var(_) => e.clone(),
            ExprKind::Literal(_) => return unsupported("an unchecked literal"),
            ExprKind::Prim(p, args) => match p.info().kind() {
                PrimKind::Int | PrimKind::IntCompare => prim(*p, self.all(args)?),
                PrimKind::ToReal => tuple(vec![prim(*p, self.all(args)?), Expr::structural_zero()]),
                PrimKind::ToInt => {
                    let args = self.all(args)?;
                    prim(*p, args.into_iter().map(|a| proj(a, 0)).collect())
                }
                PrimKind::Compare => {
                    let args = self.all(args)?;
                    prim(*p, args.into_iter().map(|a| proj(a, 0)).collect())
                }
                PrimKind::Logic => prim(*p, self.all(args)?),
                PrimKind::Real => {
                    let mut binds = Vec::new();
                    let mut primals = Vec::new();
                    let mut tangents = Vec::new();
                    for a in args {
                        let d = self.expr(a)?;
                        let n = self.names.fresh("d");
                        binds.push((pvar(&n), d));
                        primals.push(proj(var(&n), 0));
                        tangents.push(proj(var(&n), 1));
                    }
                    let r = self.names.fresh("r");
                    binds.push((pvar(&r), prim(*p, primals.clone())));
                    let partials = p.partials(&primals, &var(&r));
                    let tangent = partials
                        .into_iter()
                        .zip(tangents)
                        .filter(|(d, _)| !d.is_structural_zero())
                        // A zero tangent contributes zero even where the
                        // partial is infinite (`max(-inf, a)`, `t * t` at
                        // t = -inf), as the dual numbers of gradlift-tape do.
                        .map(|(d, t)| {
                            // A finite constant partial (`+`, `-`, a
                            // constant factor) times a zero tangent is a
                            // zero: no test needed.
                            if matches!(d.kind, ExprKind::Const(c) if c.is_finite()) {
                                return mul(d, t);
                            }
                            let zero = prim(gradlift_lang::Prim::Eq, vec![t.clone(), real(0.0)]);
                            cond(zero, Expr::structural_zero(), mul(d, t))
                        })
                        .reduce(add)
                        .unwrap_or_else(Expr::structural_zero);
                    crate::direct::lets(binds, tuple(vec![var(&r), tangent]))
                }
            },
            ExprKind::PrimFn(_) | ExprKind::Apply(..) => return unsupported("a function value"),
            // `[]` is an empty array of reals: of pairs once lifted.
            ExprKind::ArrayLit(es) if es.is_empty() => builtin(
                Builtin::Replicate,
                vec![int(0), tuple(vec![real(0.0), real(0.0)])],
            ),
            ExprKind::Let {
                pat,
                ty,
                value,
                body,
            } => Expr::synth(ExprKind::Let {
                pat: pat.clone(),
                ty: ty.as_ref().map(lift_type),
                value: Box::new(self.expr(value)?),
                body: Box::new(self.expr(body)?),
            }),
            ExprKind::Lambda(params, body) => {
                if params.iter().any(|p| p.ty.is_some()) {
                    return unsupported("a Target lambda");
                }
                lambda(
                    params.iter().map(|p| p.pat.clone()).collect(),
                    self.expr(body)?,
                )
            }
            ExprKind::ArrayOp(op, f, args) => {
                let f = match &f.kind {
                    ExprKind::PrimFn(p) => {
                        let ps: Vec<Name> = ["a", "b"][..p.info().arity]
                            .iter()
                            .map(|b| self.names.fresh(b))
                            .collect();
                        lambda(
                            ps.iter().map(pvar).collect(),
                            prim(*p, ps.iter().map(var).collect()),
                        )
                    }
                    _ => f.as_ref().clone(),
                };
                array_op(*op, self.expr(&f)?, self.all(args)?)
            }
            ExprKind::Builtin(b, args) => match b {
                Builtin::Len | Builtin::Iota => builtin(*b, self.all(args)?),
                // The count is a size: not differentiated, and kept in the
                // form of a size so that it stays one once simplified.
                Builtin::Replicate | Builtin::Take | Builtin::Drop | Builtin::Transpose => {
                    builtin(*b, vec![self.size(&args[0])?, self.expr(&args[1])?])
                }
                Builtin::MatMul => {
                    let n = self.size(&args[0])?;
                    let (a, b) = (self.expr(&args[1])?, self.expr(&args[2])?);
                    self.matmul(n, a, b)
                }
                // On lifted values `+` adds values and tangents alike; the
                // other operators need a rule of their own.
                Builtin::ReduceByIndex(p) if *p != gradlift_lang::Prim::Add => {
                    let args = self.all(args)?;
                    self.reduce_by_index(*p, args)
                }
                _ => builtin(*b, self.all(args)?),
            },
            // Tuples, projections, array literals, indexing, `if`: the same
            // shape on lifted values.
            _ => {
                let mut failed = None;
                let out = e.map_children(&mut |c| match self.expr(c) {
                    Ok(x) => x,
                    Err(x) => {
                        failed.get_or_insert(x);
                        c.clone()
                    }
                });
                match failed {
                    Some(x) => return Err(x),
                    None => out,
                }
            }
        })
    }
}
