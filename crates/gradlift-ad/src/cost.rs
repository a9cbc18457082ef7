//! The cost model of Figure 11 (§5.2) and the nesting of array operations
//! NAO (§5.3), for Theorem 5.4: after partial evaluation,
//! `Cost(∇e) ≤ 4·3^p·Cost(e)` with `p = NAO(e)`.
//!
//! A cost is a vector (MOVES, ADDS, MULTS, NLOPS), each component a
//! polynomial in the size variables ([`Poly`]), evaluated at given sizes.
//! Figure 11's rules, with `n` the length of the array argument:
//!
//! ```text
//! Cost(c) = Cost(x) = (1,0,0,0)
//! Cost(op1 e)       = (2,0,0,1) + Cost(e)          every unary primitive
//! Cost(e₁ op2 e₂)   = Cost(op2) + Cost(e₁) + Cost(e₂)
//!                     Cost(+) = (3,1,0,0), Cost(*) = (3,0,1,0)
//! Cost(⟨e₁,…,e_k⟩)  = Σ Cost(eᵢ)                    Cost(πᵢ e) = (1,0,0,0) + Cost(e)
//! Cost(let x = e₁ in e₂) = (1,0,0,0) + Cost(e₁) + Cost(e₂)
//! Cost(map2 (x,y.e₁) e₂ e₃)   = n·(Cost(e₁) + (2,0,0,0)) + Cost(e₂) + Cost(e₃)
//! Cost(reduce (x,y.e₁) e₂ e₃) = n·(Cost(e₁) + (2,0,0,0)) + Cost(e₂) + Cost(e₃)
//! Cost(scanl (x,y.e₁) e₂ e₃)  = n·(Cost(e₁) + (3,0,0,0)) + Cost(e₂) + Cost(e₃)   (scanr alike)
//! Cost(shift1L e) = Cost(shift1R e) = Cost(e) + (n,0,0,0)
//! ```
//!
//! The paper leaves some primitives and constructs out; gradlift defines
//! them in the same spirit:
//! - binary `-` costs as `+`; `/` as `*` (one multiplicative operation);
//!   `pow` (3,0,0,1); `min`, `max` and the comparisons (3,1,0,0) (one
//!   comparison, counted as an addition); `and`, `or` (3,0,0,0); `not`
//!   (2,0,0,0); unary minus is a unary op (2,0,0,1) as Figure 11 prices
//!   every op1.
//! - `map (x.e₁) A` is `map2 (x,y.e₁) A A` (Figure 4), so it costs as map2;
//!   `foldl` costs as `reduce`.
//! - `if c then e₁ else e₂` costs `Cost(c)` plus the componentwise maximum
//!   of the branches (the branch taken depends on the data).
//! - Array construction moves one value per element: `iota(n)`,
//!   `replicate(n, e)` (+ Cost(e)), an array literal of k elements,
//!   `concat(A, B)` (n + m); `take`, `drop` and indexing are views or
//!   single moves, (1,0,0,0) + the cost of the array; `len(A)` likewise.
//!   A computed index `A[i]` adds the cost of `i`; `gather(A, I)` moves one
//!   value per index; `reduce_by_index(D, op, I, V)` moves the `k` bins of
//!   `D` and, per value, prices `op` once per scalar plus two moves, as a
//!   `reduce` does: O(k + m), the bound the linear rules need.
//! - A size variable used as a real costs as a variable.
//!
//! Beside the four counts of the paper, a cost carries the **bytes read
//! and written** in arrays (the second field of [`Cost`], not part of the
//! theorem's totals), a model of memory traffic for the decisions that
//! trade it against arithmetic (the simplifier's `remat.rs`) and for
//! `gradlift cost`. Every array operation and built-in reads its array
//! arguments once and writes the arrays of its result once (8 bytes per
//! real; a map's elements that are arrays are written by the body that
//! builds them, a fold's state by its step); indexing reads the element; `take`, `drop` and `len` are views
//! and move nothing; a function body's traffic counts once per element,
//! as its operations do. This is the traffic of the term as written: the
//! native backend fuses some loops (a fold reading a map computes the
//! elements in its loop), so it is an upper bound on what the generated
//! code moves. A checkpointed `revfold` reads its arrays once per pass and
//! its snapshots are not counted.
//!
//! NAO counts nesting: `NAO(c) = NAO(x) = 0`, the maximum over subterms
//! for every other construct, and `max(1 + NAO(body), NAO(arguments))`
//! for every array operation with a function argument.

use gradlift_lang::syntax::*;
use gradlift_lang::types::Typer;
use gradlift_lang::Prim;
use std::collections::{BTreeMap, HashMap};
use std::fmt;

/// A polynomial in the size variables with real coefficients.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Poly {
    /// Monomial (sorted variable names, repeated for powers) → coefficient.
    pub terms: BTreeMap<Vec<Name>, f64>,
}

impl Poly {
    /// The constant `c`.
    pub fn constant(c: f64) -> Poly {
        let mut terms = BTreeMap::new();
        if c != 0.0 {
            terms.insert(Vec::new(), c);
        }
        Poly { terms }
    }

    /// A size as a polynomial.
    pub fn size(n: &Size) -> Poly {
        let mut p = Poly::constant(n.constant as f64);
        for (v, k) in &n.terms {
            *p.terms.entry(vec![v.clone()]).or_insert(0.0) += *k as f64;
        }
        p.terms.retain(|_, c| *c != 0.0);
        p
    }

    /// `self + other`.
    pub fn plus(&self, other: &Poly) -> Poly {
        let mut out = self.clone();
        for (m, c) in &other.terms {
            *out.terms.entry(m.clone()).or_insert(0.0) += c;
        }
        out.terms.retain(|_, c| *c != 0.0);
        out
    }

    /// `self · other`.
    pub fn times(&self, other: &Poly) -> Poly {
        let mut out = Poly::default();
        for (m1, c1) in &self.terms {
            for (m2, c2) in &other.terms {
                let mut m: Vec<Name> = m1.iter().chain(m2).cloned().collect();
                m.sort();
                *out.terms.entry(m).or_insert(0.0) += c1 * c2;
            }
        }
        out.terms.retain(|_, c| *c != 0.0);
        out
    }

    /// The value at the given sizes (a variable not given counts as 0).
    pub fn eval(&self, sizes: &HashMap<Name, f64>) -> f64 {
        self.terms
            .iter()
            .map(|(m, c)| {
                c * m
                    .iter()
                    .map(|v| sizes.get(v).copied().unwrap_or(0.0))
                    .product::<f64>()
            })
            .fold(0.0, |a, b| a + b)
    }
}

impl fmt::Display for Poly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.terms.is_empty() {
            return f.write_str("0");
        }
        // Highest degree first.
        let mut terms: Vec<(&Vec<Name>, &f64)> = self.terms.iter().collect();
        terms.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(b.0)));
        for (i, (m, c)) in terms.into_iter().enumerate() {
            if i > 0 {
                f.write_str(" + ")?;
            }
            if m.is_empty() || *c != 1.0 {
                write!(f, "{c}")?;
            }
            for (j, v) in m.iter().enumerate() {
                if j > 0 || *c != 1.0 {
                    f.write_str("·")?;
                }
                f.write_str(v)?;
            }
        }
        Ok(())
    }
}

/// (MOVES, ADDS, MULTS, NLOPS), and the bytes (read, written) in arrays.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Cost(pub [Poly; 4], pub [Poly; 2]);

impl Cost {
    /// A constant cost that moves no array memory.
    pub fn of(moves: f64, adds: f64, mults: f64, nlops: f64) -> Cost {
        Cost(
            [moves, adds, mults, nlops].map(Poly::constant),
            Default::default(),
        )
    }

    /// Bytes read and written, and no operation.
    pub fn traffic(read: Poly, written: Poly) -> Cost {
        Cost(Default::default(), [read, written])
    }

    /// `self + other`.
    pub fn plus(&self, other: &Cost) -> Cost {
        Cost(
            std::array::from_fn(|i| self.0[i].plus(&other.0[i])),
            std::array::from_fn(|i| self.1[i].plus(&other.1[i])),
        )
    }

    /// `n · self`.
    pub fn scaled(&self, n: &Poly) -> Cost {
        Cost(
            std::array::from_fn(|i| self.0[i].times(n)),
            std::array::from_fn(|i| self.1[i].times(n)),
        )
    }

    /// The four counts of Figure 11 at the given sizes.
    pub fn eval(&self, sizes: &HashMap<Name, f64>) -> [f64; 4] {
        std::array::from_fn(|i| self.0[i].eval(sizes))
    }

    /// The bytes (read, written) in arrays at the given sizes.
    pub fn bytes(&self, sizes: &HashMap<Name, f64>) -> [f64; 2] {
        std::array::from_fn(|i| self.1[i].eval(sizes))
    }
}

/// The bytes of the arrays in a value of type `t` (a real held alone is
/// not in memory).
fn array_bytes(t: &Type) -> Poly {
    match t {
        Type::Array(elem, n) => Poly::size(n).times(&element_bytes(elem)),
        Type::Tuple(ts) => ts
            .iter()
            .fold(Poly::default(), |a, t| a.plus(&array_bytes(t))),
        Type::Real | Type::Int | Type::Bool | Type::Fun(..) => Poly::default(),
    }
}

/// The bytes of the reals of `t` outside any array of it.
fn real_bytes(t: &Type) -> Poly {
    match t {
        Type::Real | Type::Int | Type::Bool => Poly::constant(8.0),
        Type::Tuple(ts) => ts
            .iter()
            .fold(Poly::default(), |a, t| a.plus(&real_bytes(t))),
        Type::Array(..) | Type::Fun(..) => Poly::default(),
    }
}

/// The bytes of one element of type `t` in an array: its reals and its
/// arrays.
fn element_bytes(t: &Type) -> Poly {
    real_bytes(t).plus(&array_bytes(t))
}

/// The cost of one primitive (Figure 11 and the extensions above): the
/// `cost` column of the primitive table.
pub fn prim_cost(p: Prim) -> Cost {
    let [moves, adds, mults, nlops] = p.info().cost.map(f64::from);
    Cost::of(moves, adds, mults, nlops)
}

/// A term the cost model does not cover.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("the cost model covers first-order terms; found {0}")]
pub struct CostError(pub String);

/// The cost of a first-order term `e` whose free variables are `vars`
/// (and the size variables `size_vars`).
pub fn cost(vars: &[(Name, Type)], size_vars: &[Name], e: &Expr) -> Result<Cost, CostError> {
    let mut typer = Typer::new(size_vars);
    for (n, t) in vars {
        typer.push(n.clone(), t.clone());
    }
    let mut c = Coster { typer };
    c.cost(e)
}

struct Coster {
    typer: Typer,
}

impl Coster {
    fn length(&mut self, array: &Expr) -> Result<Poly, CostError> {
        match self.typer.infer(array) {
            Ok(Type::Array(_, n)) => Ok(Poly::size(&n)),
            Ok(t) => Err(CostError(format!("an array operation on `{t}`"))),
            Err(e) => Err(CostError(format!("an ill-typed term ({e})"))),
        }
    }

    fn all(&mut self, es: &[Expr]) -> Result<Cost, CostError> {
        let mut total = Cost::default();
        for x in es {
            total = total.plus(&self.cost(x)?);
        }
        Ok(total)
    }

    fn bind(&mut self, pat: &Pattern, ty: &Type) {
        match (pat, ty) {
            (Pattern::Var(n, _), _) => self.typer.push(n.clone(), ty.clone()),
            (Pattern::Tuple(ps, _), Type::Tuple(ts)) => {
                for (p, t) in ps.iter().zip(ts) {
                    self.bind(p, t);
                }
            }
            _ => {}
        }
    }

    fn cost(&mut self, e: &Expr) -> Result<Cost, CostError> {
        gradlift_lang::deep::guard(|| {
            let c = self.cost_inner(e)?;
            Ok(c.plus(&self.traffic(e)?))
        })
    }

    /// The bytes `e` itself reads and writes in arrays (its subterms'
    /// are counted where they are costed).
    fn traffic(&mut self, e: &Expr) -> Result<Cost, CostError> {
        let ill = |e: gradlift_lang::TypeError| CostError(format!("an ill-typed term ({e})"));
        let arrays = |c: &mut Self, args: &[Expr]| -> Result<Poly, CostError> {
            let mut total = Poly::default();
            // A `revfold`'s step is an argument; it is not data.
            for a in args
                .iter()
                .filter(|a| !matches!(a.kind, ExprKind::Lambda(..)))
            {
                total = total.plus(&array_bytes(&c.typer.infer(a).map_err(ill)?));
            }
            Ok(total)
        };
        Ok(match &e.kind {
            ExprKind::Index(..) | ExprKind::Builtin(Builtin::Get, _) => {
                let elem = self.typer.infer(e).map_err(ill)?;
                Cost::traffic(element_bytes(&elem), Poly::default())
            }
            // The indices, and the elements named: not the whole array.
            ExprKind::Builtin(Builtin::Gather, args) => {
                let out = array_bytes(&self.typer.infer(e).map_err(ill)?);
                let idx = array_bytes(&self.typer.infer(&args[1]).map_err(ill)?);
                Cost::traffic(idx.plus(&out), out)
            }
            ExprKind::ArrayLit(_) => Cost::traffic(
                Poly::default(),
                array_bytes(&self.typer.infer(e).map_err(ill)?),
            ),
            ExprKind::Builtin(Builtin::Len | Builtin::Take | Builtin::Drop, _) => Cost::default(),
            ExprKind::Builtin(_, args) => {
                let read = arrays(self, args)?;
                Cost::traffic(read, array_bytes(&self.typer.infer(e).map_err(ill)?))
            }
            ExprKind::ArrayOp(op, _, args) => {
                let passes = match op {
                    ArrayOp::Revfold(_) => 3.0,
                    _ => 1.0,
                };
                let read = arrays(self, args)?.times(&Poly::constant(passes));
                // A map or scan writes the reals of each element; arrays in
                // an element are written by the body that builds them, and
                // a fold's state by its step.
                let written = match op {
                    ArrayOp::Map | ArrayOp::Map2 | ArrayOp::Scanl | ArrayOp::Scanr => {
                        match self.typer.infer(e).map_err(ill)? {
                            Type::Array(elem, n) => Poly::size(&n).times(&real_bytes(&elem)),
                            _ => Poly::default(),
                        }
                    }
                    _ => Poly::default(),
                };
                Cost::traffic(read, written)
            }
            _ => Cost::default(),
        })
    }

    fn cost_inner(&mut self, e: &Expr) -> Result<Cost, CostError> {
        let one_move = Cost::of(1.0, 0.0, 0.0, 0.0);
        Ok(match &e.kind {
            ExprKind::Const(_) | ExprKind::Int(_) | ExprKind::Literal(_) | ExprKind::Var(_) => {
                one_move
            }
            ExprKind::Prim(p, args) => prim_cost(*p).plus(&self.all(args)?),
            ExprKind::Tuple(es) => self.all(es)?,
            ExprKind::Proj(x, _) | ExprKind::Index(x, _) => one_move.plus(&self.cost(x)?),
            ExprKind::Let { .. } => {
                let mark = self.typer.mark();
                let mut total = Cost::default();
                let mut cur = e;
                while let ExprKind::Let {
                    pat, value, body, ..
                } = &cur.kind
                {
                    total = total.plus(&one_move).plus(&self.cost(value)?);
                    let ty = self
                        .typer
                        .infer(value)
                        .map_err(|e| CostError(format!("an ill-typed term ({e})")))?;
                    self.bind(pat, &ty);
                    cur = body;
                }
                let r = self.cost(cur).map(|c| total.plus(&c));
                self.typer.pop_to(mark);
                r?
            }
            ExprKind::If(c, t, f) => {
                let (ct, cf) = (self.cost(t)?, self.cost(f)?);
                // The componentwise maximum, per monomial.
                let max = |a: &Poly, b: &Poly| {
                    let mut m = a.clone();
                    for (k, v) in &b.terms {
                        let e = m.terms.entry(k.clone()).or_insert(*v);
                        *e = e.max(*v);
                    }
                    m
                };
                let worst = Cost(
                    std::array::from_fn(|i| max(&ct.0[i], &cf.0[i])),
                    std::array::from_fn(|i| max(&ct.1[i], &cf.1[i])),
                );
                self.cost(c)?.plus(&worst)
            }
            ExprKind::ArrayLit(es) => Cost::of(es.len() as f64, 0.0, 0.0, 0.0).plus(&self.all(es)?),
            ExprKind::Builtin(b, args) => match b {
                Builtin::Iota => self.builtin_moves(e)?,
                Builtin::Replicate => self.builtin_moves(e)?.plus(&self.cost(&args[1])?),
                Builtin::Concat => self.builtin_moves(e)?.plus(&self.all(args)?),
                Builtin::Shift1L | Builtin::Shift1R => {
                    let n = self.length(&args[0])?;
                    Cost(
                        [n, Poly::default(), Poly::default(), Poly::default()],
                        Default::default(),
                    )
                    .plus(&self.cost(&args[0])?)
                }
                Builtin::Len => one_move.plus(&self.cost(&args[0])?),
                Builtin::Take | Builtin::Drop => one_move.plus(&self.cost(&args[1])?),
                Builtin::Get => one_move.plus(&self.all(args)?),
                // One move per element.
                Builtin::Transpose => {
                    let per_row = match self.typer.infer(e) {
                        Ok(Type::Array(row, _)) => match *row {
                            Type::Array(_, r) => Poly::size(&r),
                            _ => Poly::constant(1.0),
                        },
                        _ => Poly::constant(1.0),
                    };
                    self.builtin_moves(e)?
                        .scaled(&per_row)
                        .plus(&self.cost(&args[1])?)
                }
                Builtin::Gather => self.builtin_moves(e)?.plus(&self.all(args)?),
                // `m·n` results, each `k` products summed: as the loop
                // `map (a. map (b. reduce (+) 0 (map2 (*) a b)) Bᵀ) A`.
                Builtin::MatMul => {
                    let m = self.length(&args[1])?;
                    let k = self.length(&args[2])?;
                    let n = match self.typer.infer(e) {
                        Ok(Type::Array(row, _)) => match *row {
                            Type::Array(_, n) => Poly::size(&n),
                            _ => Poly::constant(1.0),
                        },
                        _ => Poly::constant(1.0),
                    };
                    let results = m.times(&n);
                    let products = results.times(&k);
                    Cost(
                        [results, products.clone(), products, Poly::default()],
                        Default::default(),
                    )
                    .plus(&self.all(&args[1..])?)
                }
                // The bins copied from `dest`, then per value one `op` on
                // each of its scalars and a move of its index.
                Builtin::ReduceByIndex(p) => {
                    let m = self.length(&args[1])?;
                    let scalars = match self.typer.infer(&args[2]) {
                        Ok(Type::Array(elem, _)) => {
                            element_bytes(&elem).times(&Poly::constant(1.0 / 8.0))
                        }
                        _ => Poly::constant(1.0),
                    };
                    let per = prim_cost(*p)
                        .scaled(&scalars)
                        .plus(&Cost::of(2.0, 0.0, 0.0, 0.0));
                    self.builtin_moves(e)?
                        .plus(&per.scaled(&m))
                        .plus(&self.all(args)?)
                }
            },
            ExprKind::ArrayOp(ArrayOp::Revfold(schedule), f, args) => {
                self.revfold(*schedule, f, args)?
            }
            ExprKind::ArrayOp(op @ (ArrayOp::While | ArrayOp::Revwhile(_)), ..) => {
                return Err(CostError(format!(
                    "a `{}` loop, whose cost depends on how many steps it takes, known only when it runs",
                    op.name()
                )))
            }
            ExprKind::ArrayOp(op, f, args) => {
                let n = self.length(args.last().expect("an array argument"))?;
                let arg_cost = self.all(args)?;
                let per = match op {
                    ArrayOp::Scanl | ArrayOp::Scanr => Cost::of(3.0, 0.0, 0.0, 0.0),
                    _ => Cost::of(2.0, 0.0, 0.0, 0.0),
                };
                let (params, body) = match &f.kind {
                    ExprKind::Lambda(params, body) => (params, body),
                    // `(*)` is `(x, y. x * y)`: the primitive and a move per argument.
                    ExprKind::PrimFn(p) => {
                        let body =
                            prim_cost(*p).plus(&Cost::of(p.info().arity as f64, 0.0, 0.0, 0.0));
                        return Ok(body.plus(&per).scaled(&n).plus(&arg_cost));
                    }
                    _ => {
                        return Err(CostError(format!(
                            "`{}` with a function that is not a lambda",
                            op.name()
                        )))
                    }
                };
                // Bind the parameters to the element (and accumulator) types.
                let mark = self.typer.mark();
                let elem = |t: Type| match t {
                    Type::Array(t, _) => *t,
                    t => t,
                };
                let ill =
                    |e: gradlift_lang::TypeError| CostError(format!("an ill-typed term ({e})"));
                let tys: Vec<Type> = match op {
                    ArrayOp::Map | ArrayOp::Map2 => args
                        .iter()
                        .map(|a| self.typer.infer(a).map(elem))
                        .collect::<Result<_, _>>()
                        .map_err(ill)?,
                    _ => vec![
                        self.typer.infer(&args[0]).map_err(ill)?,
                        self.typer.infer(&args[1]).map(elem).map_err(ill)?,
                    ],
                };
                for (p, t) in params.iter().zip(&tys) {
                    self.bind(&p.pat, t);
                }
                let body_cost = self.cost(body);
                self.typer.pop_to(mark);
                body_cost?.plus(&per).scaled(&n).plus(&arg_cost)
            }
            ExprKind::Lambda(..) | ExprKind::Apply(..) | ExprKind::PrimFn(_) => {
                return Err(CostError("a function value".into()))
            }
            ExprKind::Derive(d, ..) => {
                return Err(CostError(format!(
                    "`{}` before its expansion (the cost model reads expanded programs)",
                    d.name()
                )))
            }
        })
    }

    /// `@checkpoint(K) revfold VJP STEP v A z f`: each step reversed once
    /// (the VJP) and advanced at most twice (the snapshot pass and the
    /// block's replay), with two moves per step for the state and the
    /// element. Binomial schedules advance `t·n − β(c+1, t−1)` steps, with
    /// `t` growing with `n`: not a polynomial, so not covered.
    fn revfold(&mut self, schedule: Schedule, f: &Expr, args: &[Expr]) -> Result<Cost, CostError> {
        if let Schedule::Binomial(_) = schedule {
            return Err(CostError(
                "a loop on a binomial checkpoint schedule, whose recomputation is not a polynomial in the sizes"
                    .into(),
            ));
        }
        let n = self.length(&args[2])?;
        let arg_cost = self.all(&args[1..])?;
        let ill = |e: gradlift_lang::TypeError| CostError(format!("an ill-typed term ({e})"));
        let state = self.typer.infer(&args[1]).map_err(ill)?;
        let elem = match self.typer.infer(&args[2]).map_err(ill)? {
            Type::Array(t, _) => *t,
            t => t,
        };
        let acc = self.typer.infer(&args[4]).map_err(ill)?;
        let body = |d: &mut Self, f: &Expr, tys: &[Type]| -> Result<Cost, CostError> {
            let ExprKind::Lambda(params, body) = &f.kind else {
                return Err(CostError(
                    "`revfold` with a function that is not a lambda".into(),
                ));
            };
            let mark = d.typer.mark();
            for (p, t) in params.iter().zip(tys) {
                d.bind(&p.pat, t);
            }
            let c = d.cost(body);
            d.typer.pop_to(mark);
            Ok(c?.plus(&Cost::of(2.0, 0.0, 0.0, 0.0)))
        };
        let step = body(self, &args[0], &[state.clone(), elem.clone()])?;
        let vjp = body(self, f, &[state.clone(), elem, state, acc])?;
        let twice = n.times(&Poly::constant(2.0));
        Ok(step.scaled(&twice).plus(&vjp.scaled(&n)).plus(&arg_cost))
    }

    /// One move per element of the array `e` builds.
    fn builtin_moves(&mut self, e: &Expr) -> Result<Cost, CostError> {
        let n = self.length(e)?;
        Ok(Cost(
            [n, Poly::default(), Poly::default(), Poly::default()],
            Default::default(),
        ))
    }
}

/// NAO (§5.3): the nesting depth of array operations.
pub fn nao(e: &Expr) -> usize {
    gradlift_lang::deep::guard(|| match &e.kind {
        ExprKind::ArrayOp(_, f, args) => {
            let body = match &f.kind {
                ExprKind::Lambda(_, body) => 1 + nao(body),
                _ => 1,
            };
            args.iter().map(nao).fold(body, usize::max)
        }
        ExprKind::Let { .. } => {
            // A let chain by a loop.
            let mut depth = 0;
            let mut cur = e;
            while let ExprKind::Let { value, body, .. } = &cur.kind {
                depth = depth.max(nao(value));
                cur = body;
            }
            depth.max(nao(cur))
        }
        _ => e.children().map(nao).max().unwrap_or(0),
    })
}

/// Whether `e` is a zero of some ground type built without reading
/// anything but shapes: `0`, a tuple of zeros, or `map (x. zero) A`
/// (ZerosLike of Figure 4).
fn is_zeros(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Const(c) => *c == 0.0,
        ExprKind::Tuple(es) => es.iter().all(is_zeros),
        ExprKind::ArrayOp(ArrayOp::Map, f, _) => {
            matches!(&f.kind, ExprKind::Lambda(_, body) if is_zeros(body))
        }
        _ => false,
    }
}

/// Splits off the cotangents of a gradient program `(value, (g₁, …, g_k))`
/// that are structurally zero — parameters nothing flows into — replacing
/// each by the constant 0, and returns how many there were. Writing them
/// out costs the size of the parameter, which is output, not work: a
/// function that ignores an array of length n costs 1, yet its gradient
/// must still return n zeros. `gradlift cost` reports that cost apart and
/// checks Theorem 5.4 on the rest (the constants 0 put in their place are
/// subtracted again, one move each).
pub fn without_zero_cotangents(term: &Expr) -> (Expr, usize) {
    gradlift_lang::deep::guard(|| match &term.kind {
        ExprKind::Let {
            pat,
            ty,
            value,
            body,
        } => {
            let (body, zeros) = without_zero_cotangents(body);
            let e = Expr::new(
                ExprKind::Let {
                    pat: pat.clone(),
                    ty: ty.clone(),
                    value: value.clone(),
                    body: Box::new(body),
                },
                term.span,
            );
            (e, zeros)
        }
        ExprKind::Tuple(parts) if parts.len() == 2 => {
            let mut zeros = 0;
            let mut zero = |g: &Expr| {
                if is_zeros(g) {
                    zeros += 1;
                    gradlift_lang::build::real(0.0)
                } else {
                    g.clone()
                }
            };
            let grads = match &parts[1].kind {
                ExprKind::Tuple(gs) => {
                    Expr::synth(ExprKind::Tuple(gs.iter().map(&mut zero).collect()))
                }
                _ => zero(&parts[1]),
            };
            (
                Expr::synth(ExprKind::Tuple(vec![parts[0].clone(), grads])),
                zeros,
            )
        }
        _ => (term.clone(), 0),
    })
}

/// Cost of a gradient program without its structurally zero cotangents
/// (see [`without_zero_cotangents`]).
pub fn gradient_cost(
    vars: &[(Name, Type)],
    size_vars: &[Name],
    term: &Expr,
) -> Result<Cost, CostError> {
    let (term, zeros) = without_zero_cotangents(term);
    Ok(cost(vars, size_vars, &term)?.plus(&Cost::of(-(zeros as f64), 0.0, 0.0, 0.0)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use gradlift_lang::parse_expr;
    use gradlift_lang::types::elaborate_expr;

    fn at(e: &str, vars: &[(&str, &str)], sizes: &[(&str, f64)]) -> [f64; 4] {
        full(e, vars, sizes).0
    }

    /// The four counts and the bytes (read, written).
    fn full(e: &str, vars: &[(&str, &str)], sizes: &[(&str, f64)]) -> ([f64; 4], [f64; 2]) {
        let vars: Vec<(Name, Type)> = vars
            .iter()
            .map(|(n, t)| (Name::from(*n), gradlift_lang::parse_type(t).unwrap()))
            .collect();
        let size_vars: Vec<Name> = sizes.iter().map(|(n, _)| Name::from(*n)).collect();
        let e = elaborate_expr(&vars, &size_vars, &parse_expr(e).unwrap())
            .unwrap()
            .0;
        let c = cost(&vars, &size_vars, &e).unwrap();
        let sizes: HashMap<Name, f64> = sizes.iter().map(|(n, v)| (Name::from(*n), *v)).collect();
        (c.eval(&sizes), c.bytes(&sizes))
    }

    #[test]
    fn bytes_read_and_written_in_arrays() {
        let vars = [("A", "[R; n]"), ("B", "[R; n]"), ("P", "[(R, R); n]")];
        let n = &[("n", 10.0)];
        let bytes = |e: &str| full(e, &vars, n).1;
        // Reads two arrays of 10 reals, writes one.
        assert_eq!(bytes("map2 (x, y. x * y) A B"), [160.0, 80.0]);
        // The fold reads what the map wrote, and writes nothing.
        assert_eq!(
            bytes("reduce (a, b. a + b) 0 (map2 (x, y. x * y) A B)"),
            [240.0, 80.0]
        );
        // A pair is two reals; a component projected in the body is no traffic.
        assert_eq!(bytes("map (p. p.0) P"), [160.0, 80.0]);
        // Indexing reads one element; views move nothing.
        assert_eq!(bytes("A[3]"), [8.0, 0.0]);
        assert_eq!(bytes("take(2, A)"), [0.0, 0.0]);
        // Built-ins read their arrays and write their result.
        assert_eq!(bytes("concat(A, B)"), [160.0, 160.0]);
        assert_eq!(bytes("iota(n)"), [0.0, 80.0]);
        // A body's traffic counts per element: each of the 10 rows reads
        // `B` and writes its 10 reals, which the outer map does not write
        // again.
        let m = full("map (x. map (y. x * y) B) A", &vars, n).1;
        assert_eq!(m, [80.0 + 10.0 * 80.0, 10.0 * 80.0]);
    }

    #[test]
    fn a_product_of_two_variables() {
        // Cost(*) + Cost(x) + Cost(y) = (3,0,1,0) + (1,0,0,0) + (1,0,0,0).
        assert_eq!(
            at("x * y", &[("x", "R"), ("y", "R")], &[]),
            [5.0, 0.0, 1.0, 0.0]
        );
        // let: one move, plus both parts; sin is an op1.
        assert_eq!(
            at("let z = x + y in sin(z)", &[("x", "R"), ("y", "R")], &[]),
            [1.0 + 5.0 + 3.0, 1.0, 0.0, 1.0]
        );
    }

    #[test]
    fn map2_at_n_10() {
        // n·(Cost(x*y) + (2,0,0,0)) + Cost(A) + Cost(B) = 10·(7,0,1,0) + (2,0,0,0).
        let vars = [("A", "[R; n]"), ("B", "[R; n]")];
        assert_eq!(
            at("map2 (x, y. x * y) A B", &vars, &[("n", 10.0)]),
            [72.0, 0.0, 10.0, 0.0]
        );
        // reduce (+) 0 over it: 10·((5,1,0,0) + (2,0,0,0)) + Cost(0) + the map2.
        assert_eq!(
            at(
                "reduce (a, b. a + b) 0 (map2 (x, y. x * y) A B)",
                &vars,
                &[("n", 10.0)]
            ),
            [70.0 + 1.0 + 72.0, 10.0, 10.0, 0.0]
        );
        // scans move three values per element; shifts n.
        assert_eq!(
            at("scanl (a, b. a * b) 1 A", &vars, &[("n", 10.0)]),
            [10.0 * 8.0 + 2.0, 0.0, 10.0, 0.0]
        );
        assert_eq!(
            at("shift1L A", &vars, &[("n", 10.0)]),
            [11.0, 0.0, 0.0, 0.0]
        );
    }

    #[test]
    fn costs_are_polynomials_in_the_sizes() {
        let vars = [("M", "[[R; d]; m]")];
        let vars = vars.map(|(n, t)| (Name::from(n), gradlift_lang::parse_type(t).unwrap()));
        let sizes = [Name::from("d"), Name::from("m")];
        let e = parse_expr("map (row. reduce (a, b. a + b) 0 row) M").unwrap();
        let e = elaborate_expr(&vars, &sizes, &e).unwrap().0;
        let c = cost(&vars, &sizes, &e).unwrap();
        // m·(d·(5+2) + 1 + 1 + 2) + 1 moves; m·d adds.
        assert_eq!(c.0[0].to_string(), "7·d·m + 4·m + 1");
        assert_eq!(c.0[1].to_string(), "d·m");
    }

    #[test]
    fn nao_counts_nesting() {
        assert_eq!(nao(&parse_expr("x * y").unwrap()), 0);
        assert_eq!(
            nao(&parse_expr("reduce (a, b. a + b) 0 (map2 (x, y. x * y) A B)").unwrap()),
            1
        );
        assert_eq!(
            nao(&parse_expr("map (r. reduce (a, b. a + b) 0 r) M").unwrap()),
            2
        );
    }
}
