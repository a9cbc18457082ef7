//! The algebraic and array rules of Figure 12 as matchers: given a node
//! about to be built (an operator and the values of its operands), the
//! first rule of [`super::rules::Rule`] that applies and what the node
//! becomes.
//!
//! Input: operands as partial-evaluation values ([`Val`]) — constants,
//! variables, residual code — and, for array operations, the residual
//! function argument after η-contraction, so `map2 (a, b. a) A B` is
//! recognised whatever the lambda was written as, once partial evaluation
//! has reduced its body to `a`. Output: `None`, or a rule and an outcome
//! that partial evaluation turns into the new node. Matchers never build
//! terms that raise the cost of Figure 11, and never fire where their guard
//! (see the table) fails.
//!
//! Constant arrays (`OnesLike`, `ZerosLike`) are recognised by `fill.rs`.

use super::fill::{
    fill_of, fill_of_expr, fn_shape, is_add_unit, is_sub_unit, Facts, FillRef, FnShape, TupleMap,
};
use super::pe::Val;
use super::rules::Rule;
use super::term::{is_atom, is_commutative, mentions, mk};
use super::Options;
use gradlift_lang::prim::{Fixity, PrimKind};
use gradlift_lang::syntax::*;
use gradlift_lang::Prim;
use std::sync::Arc;

/// η-contraction: the primitive a lambda `(x, y. x op y)` stands for.
/// Only primitives whose name reads back as the same function qualify
/// (`(-)` is subtraction, so `(x. -x)` stays).
pub(super) fn eta(params: &[Param], body: &Expr) -> Option<Prim> {
    let ExprKind::Prim(p, args) = &body.kind else {
        return None;
    };
    let info = p.info();
    let nameable = info.kind() == PrimKind::Real
        && (info.fixity == Fixity::Call || Prim::from_section(info.name) == Some(*p));
    if !nameable || args.len() != params.len() {
        return None;
    }
    let names: Vec<&Name> = params
        .iter()
        .filter_map(|q| match &q.pat {
            Pattern::Var(n, _) => Some(n),
            _ => None,
        })
        .collect();
    if names.len() != params.len() || (names.len() == 2 && names[0] == names[1]) {
        return None;
    }
    let is = |e: &Expr, n: &Name| matches!(&e.kind, ExprKind::Var(m) if m == n);
    let in_order = args.iter().zip(&names).all(|(a, n)| is(a, n));
    let swapped =
        is_commutative(*p) && args.len() == 2 && is(&args[0], names[1]) && is(&args[1], names[0]);
    (in_order || swapped).then_some(*p)
}

/// What a scalar primitive application becomes.
pub(super) enum Scalar {
    /// Operand `i`.
    Arg(usize),
    /// A zero (structural or not).
    Zero(bool),
    /// A constant.
    Const(f64),
}

fn constant(v: &Val) -> Option<(f64, bool)> {
    match v {
        Val::Const(c, s) => Some((*c, *s)),
        _ => None,
    }
}

/// The first scalar rule that applies to `p(args)`.
pub(super) fn scalar(p: Prim, args: &[Val], opts: &Options) -> Option<(Rule, Scalar)> {
    if args.len() > 2 {
        return None;
    }
    let mut k = [None; 2];
    for (slot, a) in k.iter_mut().zip(args) {
        *slot = constant(a);
    }
    let k = &k[..args.len()];
    let is = |i: usize, c: f64| k[i].is_some_and(|(x, _)| x.to_bits() == c.to_bits());
    let zero_product = |i: usize| k[i].is_some_and(|(x, s)| x == 0.0 && (s || opts.algebraic));
    let structural = |i: usize| k[i].is_some_and(|(_, s)| s);
    let found = match p {
        Prim::Mul if zero_product(0) => Some((Rule::ZeroProduct, Scalar::Zero(structural(0)))),
        Prim::Mul if zero_product(1) => Some((Rule::ZeroProduct, Scalar::Zero(structural(1)))),
        Prim::Div if zero_product(0) => Some((Rule::ZeroProduct, Scalar::Zero(structural(0)))),
        Prim::Neg if k[0].is_some_and(|(x, s)| x == 0.0 && s) => {
            Some((Rule::NegZero, Scalar::Zero(true)))
        }
        Prim::Add if k[0].is_some_and(|(x, s)| is_add_unit(x, s, opts)) => {
            Some((Rule::AddZero, Scalar::Arg(1)))
        }
        Prim::Add if k[1].is_some_and(|(x, s)| is_add_unit(x, s, opts)) => {
            Some((Rule::AddZero, Scalar::Arg(0)))
        }
        Prim::Sub if k[1].is_some_and(|(x, s)| is_sub_unit(x, s, opts)) => {
            Some((Rule::SubZero, Scalar::Arg(0)))
        }
        Prim::Mul if is(0, 1.0) => Some((Rule::MulOne, Scalar::Arg(1))),
        Prim::Mul if is(1, 1.0) => Some((Rule::MulOne, Scalar::Arg(0))),
        Prim::Div if is(1, 1.0) => Some((Rule::DivOne, Scalar::Arg(0))),
        _ => None,
    };
    found.or_else(|| {
        let consts: Option<Vec<f64>> = k.iter().map(|c| c.map(|(x, _)| x)).collect();
        let consts = consts?;
        (p.info().kind() == PrimKind::Real && consts.len() == p.info().arity)
            .then(|| (Rule::ConstFold, Scalar::Const(p.eval_real(&consts))))
    })
}

/// What an array operation becomes.
pub(super) enum ArrayRewrite {
    /// Operand `i` (the function argument not counted).
    Arg(usize),
    /// `map (_. value) args[arg]`.
    ConstMap {
        value: f64,
        structural: bool,
        arg: usize,
    },
    /// `replicate(size + 1, args[elem])`.
    Replicate { size: Expr, elem: usize },
    /// `map f args[arg]`.
    Map { f: Expr, arg: usize },
    /// `map (a. f(a, value)) args[keep]` (or `f(value, a)` for `keep = 1`):
    /// the other argument is the constant array `value`.
    Specialize {
        keep: usize,
        value: f64,
        structural: bool,
    },
}

/// The first array rule that applies to `op f args`.
pub(super) fn array(
    op: ArrayOp,
    f: &Expr,
    args: &[Val],
    facts: &Facts,
    opts: &Options,
) -> Option<(Rule, ArrayRewrite)> {
    use ArrayRewrite::*;
    let fill = |i: usize| fill_of(&args[i], facts);
    let shape = fn_shape(f);
    match (op, shape) {
        (ArrayOp::Map, FnShape::Project(0)) => Some((Rule::MapIdentity, Arg(0))),
        (ArrayOp::Map2, FnShape::Project(0)) => Some((Rule::Map2First, Arg(0))),
        (ArrayOp::Map2, FnShape::Project(1)) => Some((Rule::Map2Second, Arg(1))),
        (ArrayOp::Map2, FnShape::Const(value, structural)) => Some((
            Rule::Map2Const,
            ConstMap {
                value,
                structural,
                arg: 0,
            },
        )),
        (ArrayOp::Map2, FnShape::Prim(Prim::Mul)) => {
            let ones = |i: usize| fill(i).is_some_and(|f| f.is_ones());
            let zeros = |i: usize| fill(i).is_some_and(|f| f.annihilates(opts));
            if ones(1) {
                Some((Rule::Map2MulOnes, Arg(0)))
            } else if ones(0) {
                Some((Rule::Map2MulOnes, Arg(1)))
            } else if zeros(1) {
                Some((Rule::Map2MulZeros, Arg(1)))
            } else if zeros(0) {
                Some((Rule::Map2MulZeros, Arg(0)))
            } else {
                None
            }
        }
        (ArrayOp::Map2, FnShape::Prim(Prim::Add)) => {
            if fill(1).is_some_and(|f| f.adds_nothing(opts)) {
                Some((Rule::Map2AddZeros, Arg(0)))
            } else if fill(0).is_some_and(|f| f.adds_nothing(opts)) {
                Some((Rule::Map2AddZeros, Arg(1)))
            } else {
                None
            }
        }
        (ArrayOp::Map2, FnShape::Prim(Prim::Sub)) => fill(1)
            .is_some_and(|f| f.subtracts_nothing(opts))
            .then_some((Rule::Map2SubZeros, Arg(0))),
        (ArrayOp::Map2, FnShape::Lambda(params, body)) => {
            let unused = |i: usize| {
                let mut names = Vec::new();
                params[i].pat.names(&mut names);
                !mentions(body, &names)
            };
            let keep = [0, 1].into_iter().find(|&k| unused(1 - k));
            keep.map(|keep| {
                let lambda = mk(ExprKind::Lambda(
                    vec![params[keep].clone()],
                    Arc::new(body.clone()),
                ));
                (
                    Rule::Map2UnusedArg,
                    Map {
                        f: lambda,
                        arg: keep,
                    },
                )
            })
        }
        (ArrayOp::Reduce | ArrayOp::Foldl(_), FnShape::Prim(Prim::Mul)) => fill(1)
            .is_some_and(|f| f.is_ones())
            .then_some((Rule::ReduceMulOnes, Arg(0))),
        (ArrayOp::Reduce | ArrayOp::Foldl(_), FnShape::Prim(Prim::Add)) => {
            let unit_kept = |f: FillRef| {
                f.adds_nothing(opts)
                    || (f.value.to_bits() == 0f64.to_bits()
                        && constant(&args[0])
                            .is_some_and(|(z, _)| z.to_bits() != (-0f64).to_bits()))
            };
            fill(1)
                .is_some_and(unit_kept)
                .then_some((Rule::ReduceAddZeros, Arg(0)))
        }
        (ArrayOp::Scanl | ArrayOp::Scanr, FnShape::Prim(p @ (Prim::Mul | Prim::Add))) => {
            let f = fill(1)?;
            let fits = match p {
                Prim::Mul => f.is_ones(),
                _ => {
                    f.adds_nothing(opts)
                        || (f.value.to_bits() == 0f64.to_bits()
                            && constant(&args[0])
                                .is_some_and(|(z, _)| z.to_bits() != (-0f64).to_bits()))
                }
            };
            let size = f.size_expr().filter(|_| fits)?;
            Some((Rule::ScanFill, Replicate { size, elem: 0 }))
        }
        _ => None,
    }
    .or_else(|| {
        // A constant argument becomes a constant in the body.
        if op != ArrayOp::Map2 || matches!(f.kind, ExprKind::Var(_)) {
            return None;
        }
        let (keep, f) = match (fill(1), fill(0)) {
            (Some(f), _) => (0, f),
            (None, Some(f)) => (1, f),
            (None, None) => return None,
        };
        let (value, structural) = (f.value, f.structural);
        Some((
            Rule::Map2FillArg,
            Specialize {
                keep,
                value,
                structural,
            },
        ))
    })
}

/// `map (p. p.i) P` where `P` is bound to a `map`/`map2` over variables
/// whose function returns a tuple with a variable or a constant as
/// component `i`: that component over the same arrays, without reading `P`
/// (which then often dies). Nothing is computed twice: the component is a
/// variable or a constant.
pub(super) fn project_map(f: &Expr, arg: &Val, facts: &Facts) -> Option<(Rule, Expr)> {
    let ExprKind::Lambda(params, body) = &f.kind else {
        return None;
    };
    let (
        [Param {
            pat: Pattern::Var(p, _),
            ..
        }],
        ExprKind::Proj(inner, i),
    ) = (params.as_slice(), &body.kind)
    else {
        return None;
    };
    if !matches!(&inner.kind, ExprKind::Var(q) if q == p) {
        return None;
    }
    let Val::Var(array) = arg else { return None };
    let tuple = facts.tuples.get(array)?;
    let component = tuple.components.get(*i)?.as_ref()?;
    let from_param = match &component.kind {
        ExprKind::Var(n) => tuple.params.iter().position(|q| q.as_ref() == Some(n)),
        _ => None,
    };
    let atom = |k: usize| is_atom(&tuple.args[k]).then(|| tuple.args[k].clone());
    let out = match from_param {
        Some(j) => atom(j)?,
        None => {
            let f = mk(ExprKind::Lambda(
                vec![Param {
                    pat: Pattern::Wild(Default::default()),
                    ty: None,
                }],
                Arc::new(component.clone()),
            ));
            let over = vec![atom(0)?];
            mk(ExprKind::ArrayOp(ArrayOp::Map, Box::new(f), over))
        }
    };
    Some((Rule::MapProj, out))
}

/// `map2 (p, ζ. e) P Z` (or `map (p. e) P`, `P` in either position of a
/// `map2`) where `P` is bound to a `map`/`map2` over variables whose
/// function returns a tuple, and `e` reads `p` only through components
/// that are constants, variables from outside that function, or one and
/// the same parameter `xₖ` of it: the operation reads those components
/// instead — the constants and variables as they are, `xₖ` from the array
/// `Aₖ` it ranges over (of `P`'s length) — and `P` is not read.
pub(super) struct TupleArg {
    /// The position of `P` among the arguments.
    pub pos: usize,
    /// What `P` is bound to.
    pub tuple: TupleMap,
    /// The parameter `xₖ` read, if any.
    pub param: Option<usize>,
}

/// The first argument of a `map` or `map2` that [`TupleArg`] applies to.
pub(super) fn tuple_arg(op: ArrayOp, f: &Expr, args: &[Val], facts: &Facts) -> Option<TupleArg> {
    if !matches!(op, ArrayOp::Map | ArrayOp::Map2) {
        return None;
    }
    let ExprKind::Lambda(params, body) = &f.kind else {
        return None;
    };
    (0..args.len()).find_map(|pos| {
        let Val::Var(array) = &args[pos] else {
            return None;
        };
        let tuple = facts.tuples.get(array)?;
        let Pattern::Var(p, _) = &params.get(pos)?.pat else {
            return None;
        };
        let mut read = std::collections::BTreeSet::new();
        if !projections_only(body, p, &mut read) || read.is_empty() {
            return None;
        }
        let mut param = None;
        for i in read {
            let c = tuple.components.get(i)?.as_ref()?;
            let k = match &c.kind {
                ExprKind::Var(n) => tuple.params.iter().position(|q| q.as_ref() == Some(n)),
                _ => None,
            };
            match (k, param) {
                (Some(k), Some(j)) if k != j => return None,
                (Some(k), _) => param = Some(k),
                _ => {}
            }
        }
        // The array read instead of `P`: that of `xₖ`, or any for a `map`
        // that reads no parameter (its length).
        let witness = match (param, args.len()) {
            (Some(k), _) => Some(k),
            (None, 1) => Some(0),
            (None, _) => None,
        };
        if witness.is_some_and(|k| !matches!(tuple.args[k].kind, ExprKind::Var(_))) {
            return None;
        }
        Some(TupleArg {
            pos,
            tuple: tuple.clone(),
            param,
        })
    })
}

/// Whether every occurrence of `p` in `e` is projected (`p.i`), the
/// components read collected in `read`. Names are unique in residual code,
/// so nothing shadows `p`.
fn projections_only(e: &Expr, p: &Name, read: &mut std::collections::BTreeSet<usize>) -> bool {
    gradlift_lang::deep::guard(|| match &e.kind {
        ExprKind::Proj(inner, i) if matches!(&inner.kind, ExprKind::Var(n) if n == p) => {
            read.insert(*i);
            true
        }
        ExprKind::Var(n) => n != p,
        _ => {
            let mut ok = true;
            super::term::for_each_child(e, &mut |c| ok = ok && projections_only(c, p, read));
            ok
        }
    })
}

/// What `shift1L`/`shift1R` of a constant array becomes.
pub(super) enum ShiftRewrite {
    /// `map (_. value) (shift like)`.
    ConstMap {
        value: f64,
        structural: bool,
        like: Expr,
    },
    /// `replicate(len, value)`.
    Replicate {
        value: f64,
        structural: bool,
        len: i64,
    },
}

/// `shift1L`/`shift1R` of a constant array written in place.
pub(super) fn shift(arg: &Val, facts: &Facts) -> Option<(Rule, ShiftRewrite)> {
    let Val::Code(e) = arg else { return None };
    if matches!(
        e.kind,
        ExprKind::Builtin(Builtin::Shift1L | Builtin::Shift1R, _)
    ) {
        return None;
    }
    let f = fill_of_expr(e, facts)?;
    let (value, structural) = (f.value, f.structural);
    if let Some(like) = f.like {
        let like = like.clone();
        return Some((
            Rule::ShiftFill,
            ShiftRewrite::ConstMap {
                value,
                structural,
                like,
            },
        ));
    }
    let len = f.size?.kind.clone();
    match len {
        ExprKind::Int(n) if n >= 0 => Some((
            Rule::ShiftFill,
            ShiftRewrite::Replicate {
                value,
                structural,
                len: (n - 1).max(0),
            },
        )),
        _ => None,
    }
}

/// What `A[k]` becomes when `A` is known.
pub(super) enum IndexRewrite {
    /// Element `i` of an array literal.
    Element(usize),
    /// The constant of a constant array.
    Const(f64, bool),
    /// The tuple of constants every element of an array is.
    Tuple(Expr),
}

/// `A[k]` of an array literal or a constant array.
pub(super) fn index(arg: &Val, k: i64, facts: &Facts) -> Option<(Rule, IndexRewrite)> {
    if let Val::Code(e) = arg {
        if let ExprKind::ArrayLit(es) = &e.kind {
            let n = es.len() as i64;
            let i = if k < 0 { n + k } else { k };
            return (0..n)
                .contains(&i)
                .then_some((Rule::IndexKnown, IndexRewrite::Element(i as usize)));
        }
    }
    let tuple = match arg {
        Val::Var(n) => facts.constant_tuples.get(n),
        Val::Code(e) => super::fill::replicated_constant_tuple(e),
        _ => None,
    };
    if let Some(c) = tuple {
        return Some((Rule::IndexKnown, IndexRewrite::Tuple(c.clone())));
    }
    let f = fill_of(arg, facts)?;
    Some((Rule::IndexKnown, IndexRewrite::Const(f.value, f.structural)))
}

/// `map (_. value) a`, the canonical constant array.
pub(super) fn const_map(value: f64, structural: bool, a: Expr) -> Expr {
    let f = mk(ExprKind::Lambda(
        vec![Param {
            pat: Pattern::Wild(Default::default()),
            ty: None,
        }],
        Arc::new(super::term::constant(value, structural)),
    ));
    mk(ExprKind::ArrayOp(ArrayOp::Map, Box::new(f), vec![a]))
}

/// `size + 1` as a size expression.
pub(super) fn size_plus_one(size: Expr) -> Expr {
    match size.kind {
        ExprKind::Int(n) => mk(ExprKind::Int(n + 1)),
        _ => mk(ExprKind::Prim(Prim::IAdd, vec![size, mk(ExprKind::Int(1))])),
    }
}
