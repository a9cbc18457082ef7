//! Random well-typed programs and inputs for differential testing
//! (feature `testing`).
//!
//! [`arb_case`] is a proptest strategy: a seed drives a type-directed
//! generator that builds a module of one or two helper definitions and a
//! `main` definition whose parameters mix reals, arrays, arrays of arrays,
//! tuples and a size parameter, over every construct of the language. The
//! case carries argument values with sizes drawn per size variable (0 to 3,
//! so empty arrays occur).
//!
//! The programs are meant for comparing engines and finite differences, so
//! primitives are kept inside their smooth domain by construction, from the
//! `domain` column of the primitive table (`log` and `sqrt` of `e*e + 0.5`,
//! `exp` and `tan` of a `sin`; division by `e*e + 1`), and indexing is
//! generated only on arrays whose type guarantees an element. Every real
//! primitive of the table is generated. Non-smooth primitives (`abs`, `min`, `max`, `sign`) and
//! conditionals do occur; tests that compare against finite differences
//! tolerate the rare input that lands on a kink.

use crate::prim::{Domain, Prim};
use crate::syntax::*;
use crate::value::Value;
use proptest::prelude::*;
use std::collections::BTreeMap;

/// A generated program and the arguments to call it with.
#[derive(Clone, Debug)]
pub struct Case {
    /// The module; its last definition is `main`.
    pub module: Module,
    /// Argument values for `main`, one per parameter.
    pub args: Vec<Value>,
    /// The value of each size variable in `args`.
    pub sizes: BTreeMap<Name, i64>,
}

impl Case {
    /// The program text.
    pub fn text(&self) -> String {
        self.module.to_string()
    }
}

/// Knobs of the generator.
#[derive(Clone, Debug)]
pub struct Config {
    /// Nesting depth of generated expressions.
    pub depth: u32,
    /// Largest value drawn for a size variable.
    pub max_size: i64,
    /// Also function values: lambdas bound by `let` and called or mapped,
    /// lambdas applied where written, primitives bound by `let`. (Off, a
    /// seed gives the program it gave before these forms existed.)
    pub higher_order: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            depth: 4,
            max_size: 3,
            higher_order: false,
        }
    }
}

/// Strategy for generated cases.
pub fn arb_case() -> impl Strategy<Value = Case> {
    any::<u64>().prop_map(|seed| generate(seed, &Config::default()))
}

/// The case for `seed`.
pub fn generate(seed: u64, config: &Config) -> Case {
    let mut g = Gen {
        rng: Rng(seed ^ 0x9e37_79b9_7f4a_7c15),
        vars: Vec::new(),
        helpers: Vec::new(),
        fresh: 0,
        size_names: Vec::new(),
        config: config.clone(),
    };
    g.case()
}

/// splitmix64: small, fast and good enough to drive the generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn real(&mut self) -> f64 {
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        ((u * 4.0 - 2.0) * 1000.0).round() / 1000.0
    }
}

struct Helper {
    name: Name,
    params: Vec<Type>,
    ret: Type,
}

struct Gen {
    rng: Rng,
    /// Variables in scope with their types.
    vars: Vec<(Name, Type)>,
    helpers: Vec<Helper>,
    fresh: usize,
    /// Variables that are sizes (reals without a gradient).
    size_names: Vec<Name>,
    config: Config,
}

fn e(kind: ExprKind) -> Expr {
    Expr::synth(kind)
}
fn c(x: f64) -> Expr {
    e(ExprKind::Const(x))
}
fn var(n: &Name) -> Expr {
    e(ExprKind::Var(n.clone()))
}
fn prim(p: Prim, args: Vec<Expr>) -> Expr {
    e(ExprKind::Prim(p, args))
}
fn lam(names: &[Name], body: Expr) -> Expr {
    let params = names
        .iter()
        .map(|n| Param {
            pat: Pattern::Var(n.clone(), Default::default()),
            ty: None,
        })
        .collect();
    e(ExprKind::Lambda(params, body.into()))
}
fn arr_op(op: ArrayOp, f: Expr, args: Vec<Expr>) -> Expr {
    e(ExprKind::ArrayOp(op, Box::new(f), args))
}
fn builtin(b: Builtin, args: Vec<Expr>) -> Expr {
    e(ExprKind::Builtin(b, args))
}

/// The smallest value `n` takes when every size variable is at least 0.
fn min_size(n: &Size) -> Option<i64> {
    n.terms.values().all(|&k| k >= 0).then_some(n.constant)
}

impl Gen {
    fn name(&mut self, base: &str) -> Name {
        self.fresh += 1;
        Name::from(format!("{base}_{}", self.fresh))
    }

    /// `let t = x in t*t + k`, positive.
    fn positive(&mut self, x: Expr, k: f64) -> Expr {
        let t = self.name("t");
        let square = prim(Prim::Mul, vec![var(&t), var(&t)]);
        e(ExprKind::Let {
            pat: Pattern::Var(t, Default::default()),
            ty: None,
            value: Box::new(x),
            body: Box::new(prim(Prim::Add, vec![square, c(k)])),
        })
    }

    fn case(&mut self) -> Case {
        let size_names: Vec<Name> = ["n", "m", "d"].iter().map(|s| Name::from(*s)).collect();
        let mut sizes = BTreeMap::new();
        for n in &size_names {
            sizes.insert(
                n.clone(),
                self.rng.below(self.config.max_size as u64 + 1) as i64,
            );
        }
        let s_name = Name::from("s");
        sizes.insert(
            s_name.clone(),
            self.rng.below(self.config.max_size as u64 + 1) as i64,
        );

        let mut defs = Vec::new();
        for k in 0..self.rng.below(3) {
            let name = Name::from(format!("helper{k}"));
            let nparams = 1 + self.rng.below(2) as usize;
            let mut params = Vec::new();
            let mut tys = Vec::new();
            for j in 0..nparams {
                let ty = self.param_type(&[Name::from("k")]);
                let pname = Name::from(format!("p{j}"));
                params.push(DefParam {
                    name: pname.clone(),
                    span: Default::default(),
                    ty: Some(ty.clone()),
                });
                tys.push(ty.clone());
                self.vars.push((pname, ty));
            }
            let ret = if self.rng.chance(70) {
                Type::Real
            } else {
                Type::Tuple(vec![Type::Real, Type::Real])
            };
            let body = self.expr(&ret, self.config.depth - 1);
            self.vars.clear();
            defs.push(Def {
                name: name.clone(),
                name_span: Default::default(),
                params,
                ret: Some(ret.clone()),
                body,
            });
            self.helpers.push(Helper {
                name,
                params: tys,
                ret,
            });
        }

        let nparams = 1 + self.rng.below(4) as usize;
        let mut params = Vec::new();
        let mut args = Vec::new();
        for j in 0..nparams {
            let ty = self.param_type(&size_names);
            let pname = Name::from(format!("x{j}"));
            args.push(self.value_of(&ty, &sizes));
            params.push(DefParam {
                name: pname.clone(),
                span: Default::default(),
                ty: Some(ty.clone()),
            });
            self.vars.push((pname, ty));
        }
        if self.rng.chance(40) {
            params.push(DefParam {
                name: s_name.clone(),
                span: Default::default(),
                ty: None,
            });
            args.push(Value::Int(sizes[&s_name]));
            self.vars.push((s_name.clone(), Type::Real));
            self.size_names.push(s_name.clone());
        }
        // Only size variables the parameters mention are bound.
        let mut used = Vec::new();
        for p in &params {
            match &p.ty {
                Some(t) => collect_sizes(t, &mut used),
                None => used.push(p.name.clone()),
            }
        }
        sizes.retain(|k, _| used.contains(k));
        for n in &used {
            if params.iter().all(|p| &p.name != n) {
                self.vars.push((n.clone(), Type::Real));
                self.size_names.push(n.clone());
            }
        }
        let ret = self.result_type();
        let body = self.expr(&ret, self.config.depth);
        defs.push(Def {
            name: Name::from("main"),
            name_span: Default::default(),
            params,
            ret: Some(ret),
            body,
        });
        Case {
            module: Module { defs },
            args,
            sizes,
        }
    }

    fn param_type(&mut self, size_names: &[Name]) -> Type {
        let n = Size::var(size_names[self.rng.below(size_names.len() as u64) as usize].clone());
        match self.rng.below(6) {
            0 | 1 => Type::Real,
            2 | 3 => Type::array(Type::Real, n),
            4 => {
                let inner =
                    Size::var(size_names[self.rng.below(size_names.len() as u64) as usize].clone());
                Type::array(Type::array(Type::Real, inner), n)
            }
            _ => Type::Tuple(vec![Type::Real, Type::array(Type::Real, n)]),
        }
    }

    fn result_type(&mut self) -> Type {
        match self.rng.below(8) {
            0..=4 => Type::Real,
            5 => Type::Tuple(vec![Type::Real, Type::Real]),
            _ => {
                let sizes = self.known_sizes();
                let n = sizes[self.rng.below(sizes.len() as u64) as usize].clone();
                Type::array(Type::Real, n)
            }
        }
    }

    fn value_of(&mut self, ty: &Type, sizes: &BTreeMap<Name, i64>) -> Value {
        match ty {
            Type::Real => Value::Real(self.rng.real()),
            Type::Int => Value::Int(self.rng.below(5) as i64),
            Type::Tuple(ts) => Value::tuple(ts.iter().map(|t| self.value_of(t, sizes)).collect()),
            Type::Array(t, n) => {
                let len = n.constant + n.terms.iter().map(|(v, k)| k * sizes[v]).sum::<i64>();
                Value::array((0..len).map(|_| self.value_of(t, sizes)).collect())
            }
            Type::Bool | Type::Fun(..) => unreachable!("parameters have ground types"),
        }
    }

    /// Sizes of arrays in scope, plus small literals.
    fn known_sizes(&self) -> Vec<Size> {
        let mut out = vec![Size::lit(2), Size::lit(3)];
        for (_, t) in &self.vars {
            collect_array_sizes(t, &mut out);
        }
        out.retain(|s| min_size(s).is_some());
        out.sort();
        out.dedup();
        out
    }

    fn vars_of(&self, ty: &Type) -> Vec<Name> {
        self.vars
            .iter()
            .filter(|(_, t)| t == ty)
            .map(|(n, _)| n.clone())
            .collect()
    }

    fn pick<T: Clone>(&mut self, xs: &[T]) -> T {
        xs[self.rng.below(xs.len() as u64) as usize].clone()
    }

    fn bind<R>(&mut self, names: &[(Name, Type)], f: impl FnOnce(&mut Gen) -> R) -> R {
        let mark = self.vars.len();
        self.vars.extend(names.iter().cloned());
        let r = f(self);
        self.vars.truncate(mark);
        r
    }

    /// An expression of type `ty`.
    fn expr(&mut self, ty: &Type, depth: u32) -> Expr {
        let candidates = self.vars_of(ty);
        if depth == 0 || (!candidates.is_empty() && self.rng.chance(15)) {
            return self.leaf(ty);
        }
        if self.rng.chance(12) {
            return self.let_in(ty, depth);
        }
        if self.rng.chance(8) {
            return self.cond(ty, depth);
        }
        match ty {
            Type::Real => self.real(depth),
            Type::Int => self.leaf(ty),
            Type::Tuple(ts) => {
                if self.rng.chance(25) {
                    // A fold whose accumulator is this tuple.
                    return self.fold(ty, depth);
                }
                let ts = ts.clone();
                e(ExprKind::Tuple(
                    ts.iter().map(|t| self.expr(t, depth - 1)).collect(),
                ))
            }
            Type::Array(t, n) => self.array(t, n, depth),
            Type::Bool | Type::Fun(..) => unreachable!("only value types are generated"),
        }
    }

    fn leaf(&mut self, ty: &Type) -> Expr {
        let candidates = self.vars_of(ty);
        // Prefer variables that carry a gradient over sizes used as reals.
        let (sizes, values): (Vec<Name>, Vec<Name>) = candidates
            .into_iter()
            .partition(|n| self.size_names.contains(n));
        if !values.is_empty() && self.rng.chance(85) {
            return var(&self.pick(&values));
        }
        if !sizes.is_empty() && self.rng.chance(30) {
            let n = var(&self.pick(&sizes));
            // Sizes are integers: a real leaf converts one.
            return if *ty == Type::Real {
                crate::build::prim(Prim::ToReal, vec![n])
            } else {
                n
            };
        }
        match ty {
            Type::Real => c(self.rng.real()),
            Type::Int => e(ExprKind::Int(self.rng.below(5) as i64)),
            Type::Tuple(ts) => {
                let ts = ts.clone();
                e(ExprKind::Tuple(ts.iter().map(|t| self.leaf(t)).collect()))
            }
            Type::Array(t, n) => {
                if let Some(k) = n.as_literal().filter(|&k| k > 0 || **t == Type::Real) {
                    e(ExprKind::ArrayLit((0..k).map(|_| self.leaf(t)).collect()))
                } else {
                    let x = self.leaf(t);
                    builtin(Builtin::Replicate, vec![crate::build::size(n), x])
                }
            }
            Type::Bool | Type::Fun(..) => unreachable!("only value types are generated"),
        }
    }

    fn let_in(&mut self, ty: &Type, depth: u32) -> Expr {
        let bound_ty = self.any_type();
        let value = self.expr(&bound_ty, depth - 1);
        if let Type::Tuple(ts) = &bound_ty {
            if self.rng.chance(50) {
                let a = self.name("a");
                let b = self.name("b");
                let body = self.bind(
                    &[(a.clone(), ts[0].clone()), (b.clone(), ts[1].clone())],
                    |g| g.expr(ty, depth - 1),
                );
                let pat = Pattern::Tuple(
                    vec![
                        Pattern::Var(a, Default::default()),
                        Pattern::Var(b, Default::default()),
                    ],
                    Default::default(),
                );
                return e(ExprKind::Let {
                    pat,
                    ty: None,
                    value: Box::new(value),
                    body: Box::new(body),
                });
            }
        }
        let x = self.name("v");
        let body = self.bind(&[(x.clone(), bound_ty)], |g| g.expr(ty, depth - 1));
        e(ExprKind::Let {
            pat: Pattern::Var(x, Default::default()),
            ty: None,
            value: Box::new(value),
            body: Box::new(body),
        })
    }

    fn any_type(&mut self) -> Type {
        match self.rng.below(5) {
            0..=2 => Type::Real,
            3 => Type::Tuple(vec![Type::Real, Type::Real]),
            _ => {
                let sizes = self.known_sizes();
                Type::array(Type::Real, self.pick(&sizes))
            }
        }
    }

    fn condition(&mut self, depth: u32) -> Expr {
        let ops = [Prim::Lt, Prim::Le, Prim::Gt, Prim::Ge, Prim::Eq, Prim::Ne];
        let op = self.pick(&ops);
        let a = self.expr(&Type::Real, depth.saturating_sub(1).min(2));
        let b = self.expr(&Type::Real, 0);
        let cmp = prim(op, vec![a, b]);
        match self.rng.below(6) {
            0 => prim(Prim::Not, vec![cmp]),
            1 => {
                let other = self.condition(0);
                prim(Prim::And, vec![cmp, other])
            }
            2 => {
                let other = self.condition(0);
                prim(Prim::Or, vec![cmp, other])
            }
            _ => cmp,
        }
    }

    fn cond(&mut self, ty: &Type, depth: u32) -> Expr {
        let c = self.condition(depth);
        let t = self.expr(ty, depth - 1);
        let f = self.expr(ty, depth - 1);
        e(ExprKind::If(Box::new(c), Box::new(t), Box::new(f)))
    }

    fn real(&mut self, depth: u32) -> Expr {
        let d = depth - 1;
        if self.config.higher_order && self.rng.chance(12) {
            return self.function_value(d);
        }
        match self.rng.below(16) {
            0..=2 => {
                let ops = [Prim::Add, Prim::Sub, Prim::Mul];
                let op = self.pick(&ops);
                prim(
                    op,
                    vec![self.expr(&Type::Real, d), self.expr(&Type::Real, d)],
                )
            }
            3 => {
                let a = self.expr(&Type::Real, d);
                let b = self.expr(&Type::Real, d);
                prim(Prim::Div, vec![a, self.positive(b, 1.0)])
            }
            4..=8 => self.table_prim(d),
            9 => {
                let sizes = self.known_sizes();
                let n = self.pick(&sizes);
                let a = self.expr(&Type::array(Type::Real, n), d);
                self.reduce(a, d)
            }
            10 => self.fold(&Type::Real, depth),
            11 => {
                let t = Type::Tuple(vec![Type::Real, Type::Real]);
                let k = self.rng.below(2) as usize;
                let x = self.expr(&t, d);
                e(ExprKind::Proj(Box::new(x), k))
            }
            12 => {
                // Index an array that is certainly non-empty.
                let sizes: Vec<Size> = self
                    .known_sizes()
                    .into_iter()
                    .filter(|s| min_size(s).is_some_and(|m| m >= 1))
                    .collect();
                if sizes.is_empty() {
                    return self.leaf(&Type::Real);
                }
                let n = self.pick(&sizes);
                let a = self.expr(&Type::array(Type::Real, n.clone()), d);
                let k = if self.rng.chance(50) { 0 } else { -1 };
                e(ExprKind::Index(Box::new(a), k))
            }
            13 => {
                let sizes = self.known_sizes();
                let n = self.pick(&sizes);
                let a = self.expr(&Type::array(Type::Real, n), d);
                crate::build::prim(Prim::ToReal, vec![builtin(Builtin::Len, vec![a])])
            }
            14 => self
                .call_helper(&Type::Real, d)
                .unwrap_or_else(|| self.leaf(&Type::Real)),
            _ => {
                // A reduction over an array of arrays or of tuples.
                let sizes = self.known_sizes();
                let n = self.pick(&sizes);
                let m = self.pick(&sizes);
                if self.rng.chance(50) {
                    let rows = self.expr(&Type::array(Type::array(Type::Real, m.clone()), n), d);
                    let r = self.name("row");
                    let body = self.bind(&[(r.clone(), Type::array(Type::Real, m))], |g| {
                        let row = var(&r);
                        g.reduce(row, 0)
                    });
                    let sums = arr_op(ArrayOp::Map, lam(&[r], body), vec![rows]);
                    self.reduce(sums, 0)
                } else {
                    let pairs_ty = Type::array(Type::Tuple(vec![Type::Real, Type::Real]), n);
                    let pairs = self.expr(&pairs_ty, d);
                    let (a, b) = (self.name("a"), self.name("b"));
                    let body = self
                        .bind(&[(a.clone(), Type::Real), (b.clone(), Type::Real)], |g| {
                            g.expr(&Type::Real, 1)
                        });
                    let pat = Pattern::Tuple(
                        vec![
                            Pattern::Var(a, Default::default()),
                            Pattern::Var(b, Default::default()),
                        ],
                        Default::default(),
                    );
                    let f = e(ExprKind::Lambda(vec![Param { pat, ty: None }], body.into()));
                    let mapped = arr_op(ArrayOp::Map, f, vec![pairs]);
                    self.reduce(mapped, 0)
                }
            }
        }
    }

    /// A real primitive of the table other than `+ - * /` (which the
    /// arms around this one build), its arguments shaped by its `domain`
    /// column: positive for `log`, bounded (a sine) for `exp`.
    fn table_prim(&mut self, d: u32) -> Expr {
        let choices: Vec<Prim> = Prim::ALL
            .into_iter()
            .filter(|p| {
                p.info().kind() == crate::prim::PrimKind::Real
                    && !matches!(p, Prim::Add | Prim::Sub | Prim::Mul | Prim::Div)
            })
            .collect();
        let p = self.pick(&choices);
        let args = p
            .domain()
            .iter()
            .map(|domain| {
                let x = self.expr(&Type::Real, d);
                match domain {
                    Domain::Any => x,
                    Domain::Positive => self.positive(x, 0.5),
                    Domain::Bounded => prim(Prim::Sin, vec![x]),
                    Domain::Order => c(self.rng.below(4) as f64),
                }
            })
            .collect();
        prim(p, args)
    }

    /// A real computed through a function value: `let f = fun (p: R) -> e
    /// in f(a) * f(b)`, `(fun (p: R, q: R) -> e)(a, b)`, `let g = sin in
    /// g(a)`, or `let f = fun (p: R) -> e in reduce (+) 0 (map f A)`.
    fn function_value(&mut self, d: u32) -> Expr {
        let typed = |names: &[Name]| {
            names
                .iter()
                .map(|n| Param {
                    pat: Pattern::Var(n.clone(), Default::default()),
                    ty: Some(Type::Real),
                })
                .collect::<Vec<_>>()
        };
        let let_fun = |f: &Name, value: Expr, body: Expr| {
            e(ExprKind::Let {
                pat: Pattern::Var(f.clone(), Default::default()),
                ty: None,
                value: Box::new(value),
                body: Box::new(body),
            })
        };
        let apply = |f: Expr, args: Vec<Expr>| e(ExprKind::Apply(Box::new(f), args));
        match self.rng.below(4) {
            0 => {
                let (f, p) = (self.name("f"), self.name("p"));
                let body = self.bind(&[(p.clone(), Type::Real)], |g| g.expr(&Type::Real, d));
                let lambda = e(ExprKind::Lambda(
                    typed(std::slice::from_ref(&p)),
                    body.into(),
                ));
                let a = self.expr(&Type::Real, d);
                let b = self.expr(&Type::Real, d);
                let calls = prim(
                    Prim::Mul,
                    vec![apply(var(&f), vec![a]), apply(var(&f), vec![b])],
                );
                let_fun(&f, lambda, calls)
            }
            1 => {
                let (p, q) = (self.name("p"), self.name("q"));
                let body = self.bind(&[(p.clone(), Type::Real), (q.clone(), Type::Real)], |g| {
                    g.expr(&Type::Real, d)
                });
                let lambda = e(ExprKind::Lambda(typed(&[p, q]), body.into()));
                let a = self.expr(&Type::Real, d);
                let b = self.expr(&Type::Real, d);
                apply(lambda, vec![a, b])
            }
            2 => {
                let g = self.name("g");
                let op = self.pick(&[Prim::Sin, Prim::Cos, Prim::Tanh]);
                let a = self.expr(&Type::Real, d);
                let_fun(&g, e(ExprKind::PrimFn(op)), apply(var(&g), vec![a]))
            }
            _ => {
                let (f, p) = (self.name("f"), self.name("p"));
                let body = self.bind(&[(p.clone(), Type::Real)], |g| g.expr(&Type::Real, d));
                let lambda = e(ExprKind::Lambda(
                    typed(std::slice::from_ref(&p)),
                    body.into(),
                ));
                let sizes = self.known_sizes();
                let n = self.pick(&sizes);
                let array = self.expr(&Type::array(Type::Real, n), d);
                let mapped = arr_op(ArrayOp::Map, var(&f), vec![array]);
                let sum = arr_op(
                    ArrayOp::Reduce,
                    e(ExprKind::PrimFn(Prim::Add)),
                    vec![c(0.0), mapped],
                );
                let_fun(&f, lambda, sum)
            }
        }
    }

    fn reduce(&mut self, array: Expr, depth: u32) -> Expr {
        match self.rng.below(6) {
            0 => arr_op(
                ArrayOp::Reduce,
                e(ExprKind::PrimFn(Prim::Add)),
                vec![c(0.0), array],
            ),
            1 => arr_op(
                ArrayOp::Reduce,
                e(ExprKind::PrimFn(Prim::Mul)),
                vec![c(1.0), array],
            ),
            2 => arr_op(
                ArrayOp::Reduce,
                e(ExprKind::PrimFn(Prim::Max)),
                vec![c(f64::NEG_INFINITY), array],
            ),
            3 => arr_op(
                ArrayOp::Reduce,
                e(ExprKind::PrimFn(Prim::Min)),
                vec![c(f64::INFINITY), array],
            ),
            4 => {
                // (x, y. x + y + x*y) is associative with unit 0 and no known monoid.
                let (x, y) = (self.name("x"), self.name("y"));
                let body = prim(
                    Prim::Add,
                    vec![
                        prim(Prim::Add, vec![var(&x), var(&y)]),
                        prim(Prim::Mul, vec![var(&x), var(&y)]),
                    ],
                );
                arr_op(ArrayOp::Reduce, lam(&[x, y], body), vec![c(0.0), array])
            }
            _ => {
                // A body with a free variable.
                let (x, y) = (self.name("x"), self.name("y"));
                let w = self.expr(&Type::Real, depth.min(1));
                let body = prim(
                    Prim::Add,
                    vec![
                        var(&x),
                        prim(Prim::Mul, vec![var(&y), prim(Prim::Sin, vec![w])]),
                    ],
                );
                arr_op(ArrayOp::Reduce, lam(&[x, y], body), vec![c(0.0), array])
            }
        }
    }

    /// `foldl` with an accumulator of type `acc`.
    fn fold(&mut self, acc: &Type, depth: u32) -> Expr {
        let d = depth - 1;
        let sizes = self.known_sizes();
        let n = self.pick(&sizes);
        let elem = if self.rng.chance(70) {
            Type::Real
        } else {
            Type::Tuple(vec![Type::Real, Type::Real])
        };
        let array = self.expr(&Type::array(elem.clone(), n), d);
        let init = self.expr(acc, d);
        let (a, x) = (self.name("acc"), self.name("el"));
        let body = self.bind(&[(a.clone(), acc.clone()), (x.clone(), elem)], |g| {
            let step = g.expr(acc, d.min(2));
            // Keep the accumulator bounded: mix the old and the new state.
            match acc {
                Type::Real => prim(
                    Prim::Add,
                    vec![
                        prim(Prim::Mul, vec![c(0.5), var(&a)]),
                        prim(Prim::Sin, vec![step]),
                    ],
                ),
                _ => step,
            }
        });
        arr_op(ArrayOp::FOLDL, lam(&[a, x], body), vec![init, array])
    }

    fn call_helper(&mut self, ret: &Type, depth: u32) -> Option<Expr> {
        let fits: Vec<usize> = (0..self.helpers.len())
            .filter(|&i| self.helpers[i].ret == *ret)
            .collect();
        if fits.is_empty() {
            return None;
        }
        let i = self.pick(&fits);
        let sizes = self.known_sizes();
        let k = self.pick(&sizes);
        let subst = move |_: &Name| Some(k.clone());
        let params: Vec<Type> = self.helpers[i]
            .params
            .iter()
            .map(|t| t.substitute(&subst))
            .collect();
        let name = self.helpers[i].name.clone();
        let args = params.iter().map(|t| self.expr(t, depth)).collect();
        Some(e(ExprKind::Apply(Box::new(var(&name)), args)))
    }

    fn array(&mut self, t: &Type, n: &Size, depth: u32) -> Expr {
        let d = depth - 1;
        let arr = |t: &Type, n: &Size| Type::array(t.clone(), n.clone());
        match self.rng.below(11) {
            0 | 1 => {
                // map over an array of some element type
                let elem = if self.rng.chance(60) {
                    Type::Real
                } else {
                    Type::Tuple(vec![Type::Real, Type::Real])
                };
                let src = self.expr(&arr(&elem, n), d);
                if *t == Type::Real && elem == Type::Real && self.rng.chance(25) {
                    let f = self.pick(&[Prim::Sin, Prim::Cos, Prim::Tanh]);
                    return arr_op(ArrayOp::Map, e(ExprKind::PrimFn(f)), vec![src]);
                }
                let x = self.name("x");
                let body = self.bind(&[(x.clone(), elem)], |g| g.expr(t, d.min(2)));
                arr_op(ArrayOp::Map, lam(&[x], body), vec![src])
            }
            2 | 3 => {
                let a = self.expr(&arr(&Type::Real, n), d);
                let b = self.expr(&arr(&Type::Real, n), d);
                if *t == Type::Real && self.rng.chance(30) {
                    let op = self.pick(&[Prim::Add, Prim::Sub, Prim::Mul]);
                    return arr_op(ArrayOp::Map2, e(ExprKind::PrimFn(op)), vec![a, b]);
                }
                let (x, y) = (self.name("x"), self.name("y"));
                let body = self.bind(&[(x.clone(), Type::Real), (y.clone(), Type::Real)], |g| {
                    g.expr(t, d.min(2))
                });
                arr_op(ArrayOp::Map2, lam(&[x, y], body), vec![a, b])
            }
            4 if n.constant >= 1 => {
                // scanl / scanr produce n = m + 1 elements
                let m = n.offset(-1);
                let src = self.expr(&arr(&Type::Real, &m), d);
                let init = self.expr(t, d);
                let (a, x) = (self.name("acc"), self.name("el"));
                let body = self.bind(&[(a.clone(), t.clone()), (x.clone(), Type::Real)], |g| {
                    g.expr(t, d.min(2))
                });
                let op = if self.rng.chance(50) {
                    ArrayOp::Scanl
                } else {
                    ArrayOp::Scanr
                };
                if *t == Type::Real && self.rng.chance(40) {
                    return arr_op(op, e(ExprKind::PrimFn(Prim::Mul)), vec![init, src]);
                }
                arr_op(op, lam(&[a, x], body), vec![init, src])
            }
            5 => {
                let src = self.expr(&arr(t, &n.offset(1)), d);
                let b = if self.rng.chance(50) {
                    Builtin::Shift1L
                } else {
                    Builtin::Shift1R
                };
                builtin(b, vec![src])
            }
            6 => {
                if n.constant >= 1 {
                    let rest = self.expr(&arr(t, &n.offset(-1)), d);
                    let first = e(ExprKind::ArrayLit(vec![self.expr(t, d)]));
                    if self.rng.chance(50) {
                        builtin(Builtin::Concat, vec![first, rest])
                    } else {
                        builtin(Builtin::Concat, vec![rest, first])
                    }
                } else {
                    let x = self.expr(t, d);
                    builtin(Builtin::Replicate, vec![crate::build::size(n), x])
                }
            }
            7 if *t == Type::Real => {
                // The indices are integers; the body sees one as a real.
                let io = builtin(Builtin::Iota, vec![crate::build::size(n)]);
                let (i, x) = (self.name("i"), self.name("i"));
                let body = self.bind(&[(x.clone(), Type::Real)], |g| g.expr(&Type::Real, 1));
                let body = crate::build::let_in(
                    crate::build::pvar(&x),
                    crate::build::prim(Prim::ToReal, vec![var(&i)]),
                    body,
                );
                arr_op(ArrayOp::Map, lam(&[i], body), vec![io])
            }
            8 => {
                // take and drop of a concatenation, each part of a known size.
                let sizes = self.known_sizes();
                let other = self.pick(&sizes);
                let (first, second) = if self.rng.chance(50) {
                    (n.clone(), other)
                } else {
                    (other, n.clone())
                };
                let a = self.expr(&arr(t, &first), d);
                let b = self.expr(&arr(t, &second), d);
                let both = builtin(Builtin::Concat, vec![a, b]);
                if first == *n {
                    builtin(Builtin::Take, vec![crate::build::size(&first), both])
                } else {
                    builtin(Builtin::Drop, vec![crate::build::size(&first), both])
                }
            }
            _ => self.leaf(&arr(t, n)),
        }
    }
}

fn collect_sizes(t: &Type, out: &mut Vec<Name>) {
    match t {
        Type::Array(inner, n) => {
            for v in n.terms.keys() {
                if !out.contains(v) {
                    out.push(v.clone());
                }
            }
            collect_sizes(inner, out);
        }
        Type::Tuple(ts) => ts.iter().for_each(|t| collect_sizes(t, out)),
        _ => {}
    }
}

fn collect_array_sizes(t: &Type, out: &mut Vec<Size>) {
    match t {
        Type::Array(inner, n) => {
            out.push(n.clone());
            collect_array_sizes(inner, out);
        }
        Type::Tuple(ts) => ts.iter().for_each(|t| collect_array_sizes(t, out)),
        _ => {}
    }
}

/// `def chain(x0: R) -> R = let x1 = x0 * 0.9999 + 0.0001 in … in x<n>`:
/// a program of `n` bindings, for tests and benches at scale. Its value
/// and derivative at `x0` follow from iterating `x ↦ 0.9999·x + 0.0001`.
pub fn let_chain(n: usize) -> String {
    let mut s = String::from("def chain(x0: R) -> R =\n");
    for i in 1..=n {
        s.push_str(&format!("  let x{i} = x{} * 0.9999 + 0.0001 in\n", i - 1));
    }
    s.push_str(&format!("  x{n}\n"));
    s
}

/// `def chain(x: R) -> R` of `n` bindings where each reads the `live`
/// values before it, `let v_i = v_{i-1} + 0.00001 * sin(v_{i-2})` plus
/// such a term for each value up to `v_{i-live}`; the first `live` are
/// `x` scaled.
/// Its gradient keeps a cosine of every value for the reverse pass, which
/// reads them back in the mirror order: about `n` values live at its
/// middle.
pub fn live_chain(n: usize, live: usize) -> String {
    assert!(live >= 2 && n > live);
    let mut s = String::from("def chain(x: R) -> R =\n");
    for i in 0..live {
        s.push_str(&format!("  let v{i} = x * {} in\n", 1.0 - 0.125 * i as f64));
    }
    for i in live..n {
        s.push_str(&format!("  let v{i} = v{}", i - 1));
        for j in 2..=live {
            s.push_str(&format!(" + 0.00001 * sin(v{})", i - j));
        }
        s.push_str(" in\n");
    }
    s.push_str(&format!("  v{}\n", n - 1));
    s
}

/// `def nest(x0: R) -> R = ((x0 * 0.9999 + 0.0001) * 0.9999 + 0.0001) …`:
/// the same iteration as [`let_chain`] as one expression `depth` deep.
pub fn nested(depth: usize) -> String {
    let mut s = String::from("def nest(x0: R) -> R = ");
    s.push_str(&"(".repeat(depth));
    s.push_str("x0");
    for _ in 0..depth {
        s.push_str(" * 0.9999 + 0.0001)");
    }
    s.push('\n');
    s
}
