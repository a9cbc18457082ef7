//! Constant arrays: recognising `OnesLike(A)` and `ZerosLike(A)` of
//! Figure 4 in every form they take — `map (x. c) A`, `map2 (a, b. c) A B`,
//! `replicate(n, c)`, shifts, `take`s and `drop`s of these and `concat`s
//! of two of them — for the array rules of `rewrite.rs`.
//!
//! An operand is recognised in itself or, for a variable, through the facts
//! partial evaluation records when it binds a constant array to a variable:
//! the constant, whether it is a structural zero, and how to get the
//! length — kept only where that mentions variables alone, so that a rule
//! using it repeats no work. The predicates say when a constant array of
//! zeros may be dropped: the guards of the rule table.

use super::names::FxMap;
use super::pe::Val;
use super::term::{is_atom, mk};
use super::Options;
use gradlift_lang::deep::guard;
use gradlift_lang::syntax::*;
use gradlift_lang::Prim;

/// An array known to hold the constant `value` everywhere, recorded for a
/// variable bound to one.
#[derive(Clone, Debug)]
pub(super) struct Fill {
    pub value: f64,
    pub structural: bool,
    /// A variable holding an array of the same length.
    pub like: Option<Expr>,
    /// The length as a size expression over variables.
    pub size: Option<Expr>,
}

/// What partial evaluation knows about the array variables it bound.
#[derive(Default)]
pub(super) struct Facts {
    /// Variables bound to constant arrays.
    pub fills: FxMap<Name, Fill>,
    /// Variables bound to an array holding one variable everywhere
    /// (`map (x. v) A`, `replicate(n, v)`): the variable.
    pub var_fills: FxMap<Name, Name>,
    /// Variables bound to a `map`/`map2` whose function returns a tuple
    /// (arrays of partial derivatives).
    pub tuples: FxMap<Name, TupleMap>,
    /// Variables bound to `replicate(n, c)` of a tuple of constants (the
    /// states of a scan whose cotangents are all zero): the tuple.
    pub constant_tuples: FxMap<Name, Expr>,
}

/// `op (x⃗. (e₀, …, eₖ)) A⃗`. The rules read an array of `A⃗` only where it is
/// a variable (reading an array written in place would compute it again).
#[derive(Clone, Debug)]
pub(super) struct TupleMap {
    /// The parameters' names (`None` for a pattern that is not a name).
    pub params: Vec<Option<Name>>,
    /// The components that are variables or constants.
    pub components: Vec<Option<Expr>>,
    /// The arrays.
    pub args: Vec<Expr>,
}

impl Facts {
    /// Records what is known of `name`, bound to `value`.
    pub fn record(&mut self, name: &Name, value: &Expr) {
        if let Some(fill) = fill_of_expr(value, self).map(FillRef::to_fact) {
            self.fills.insert(name.clone(), fill);
            return;
        }
        if let Some(v) = var_fill_of_expr(value) {
            self.var_fills.insert(name.clone(), v);
            return;
        }
        if let Some(c) = replicated_constant_tuple(value) {
            self.constant_tuples.insert(name.clone(), c.clone());
            return;
        }
        let ExprKind::ArrayOp(ArrayOp::Map | ArrayOp::Map2, f, args) = &value.kind else {
            return;
        };
        let ExprKind::Lambda(params, body) = &f.kind else {
            return;
        };
        let ExprKind::Tuple(es) = &body.kind else {
            return;
        };
        if !es.iter().any(is_atom) {
            return;
        }
        let params: Vec<Option<Name>> = params
            .iter()
            .map(|p| match &p.pat {
                Pattern::Var(n, _) => Some(n.clone()),
                _ => None,
            })
            .collect();
        let mut bound = Vec::new();
        f_params(f).iter().for_each(|p| p.pat.names(&mut bound));
        // A component is usable if it is a constant, a parameter bound by
        // name, or a variable bound outside the lambda (not inside one of
        // its tuple patterns).
        let usable = |e: &Expr| match &e.kind {
            ExprKind::Const(_) => true,
            ExprKind::Var(n) => params.contains(&Some(n.clone())) || !bound.contains(n),
            _ => false,
        };
        let components = es.iter().map(|e| usable(e).then(|| e.clone())).collect();
        let args = args.clone();
        self.tuples.insert(
            name.clone(),
            TupleMap {
                params,
                components,
                args,
            },
        );
    }
}

fn f_params(f: &Expr) -> &[Param] {
    match &f.kind {
        ExprKind::Lambda(params, _) => params,
        _ => &[],
    }
}

/// A recognised constant array, borrowed from the operand or the facts.
#[derive(Clone, Copy, Debug)]
pub(super) struct FillRef<'a> {
    pub value: f64,
    pub structural: bool,
    /// An array of the same length (any expression).
    pub like: Option<&'a Expr>,
    /// The length as a size expression.
    pub size: Option<&'a Expr>,
}

impl FillRef<'_> {
    /// The length as a size expression. It evaluates `like` where that is
    /// the length's only witness; facts keep only variables there, and an
    /// array written in place is consumed by the rule that asks, so no
    /// work is repeated.
    pub fn size_expr(&self) -> Option<Expr> {
        match (self.size, self.like) {
            (Some(s), _) => Some(s.clone()),
            (None, Some(a)) => Some(mk(ExprKind::Builtin(Builtin::Len, vec![a.clone()]))),
            _ => None,
        }
    }

    /// The fact to record for a variable bound to this array.
    pub fn to_fact(self) -> Fill {
        Fill {
            value: self.value,
            structural: self.structural,
            like: self.like.filter(|a| is_atom(a)).cloned(),
            size: self.size.filter(|s| is_variable_size(s)).cloned(),
        }
    }

    pub fn is_ones(&self) -> bool {
        self.value.to_bits() == 1f64.to_bits()
    }

    /// `Fill(0)` annihilates products (`0 * e ⇝ 0`).
    pub fn annihilates(&self, opts: &Options) -> bool {
        self.value == 0.0 && (self.structural || opts.algebraic)
    }

    /// `Fill(0)` is a unit of addition (`e + 0 ⇝ e`) for every `e`.
    pub fn adds_nothing(&self, opts: &Options) -> bool {
        is_add_unit(self.value, self.structural, opts)
    }

    /// `Fill(0)` may be subtracted away (`e - 0 ⇝ e`) for every `e`.
    pub fn subtracts_nothing(&self, opts: &Options) -> bool {
        is_sub_unit(self.value, self.structural, opts)
    }
}

/// A size expression over size variables and `len` of variables only.
fn is_variable_size(e: &Expr) -> bool {
    guard(|| match &e.kind {
        ExprKind::Int(_) | ExprKind::Var(_) => true,
        ExprKind::Builtin(Builtin::Len, args) => is_atom(&args[0]),
        ExprKind::Prim(Prim::IAdd | Prim::ISub | Prim::IMul, args) => {
            args.iter().all(is_variable_size)
        }
        _ => false,
    })
}

pub(super) fn is_add_unit(c: f64, structural: bool, opts: &Options) -> bool {
    c == 0.0 && (structural || c.is_sign_negative() || opts.algebraic)
}

pub(super) fn is_sub_unit(c: f64, structural: bool, opts: &Options) -> bool {
    c == 0.0 && (structural || c.is_sign_positive() || opts.algebraic)
}

/// The constant array `v` is, if it is one.
pub(super) fn fill_of<'a>(v: &'a Val, facts: &'a Facts) -> Option<FillRef<'a>> {
    match v {
        Val::Var(n) => fact(n, facts),
        Val::Code(e) => fill_of_expr(e, facts),
        _ => None,
    }
}

fn fact<'a>(n: &Name, facts: &'a Facts) -> Option<FillRef<'a>> {
    facts.fills.get(n).map(|f| FillRef {
        value: f.value,
        structural: f.structural,
        like: f.like.as_ref(),
        size: f.size.as_ref(),
    })
}

/// The constant array `e` is, if it is one.
pub(super) fn fill_of_expr<'a>(mut e: &'a Expr, facts: &'a Facts) -> Option<FillRef<'a>> {
    let mut shifted = false;
    loop {
        match &e.kind {
            ExprKind::Builtin(Builtin::Shift1L | Builtin::Shift1R, args) => e = &args[0],
            // A part of a fill (the reverse of a `concat` splits a
            // cotangent into its parts this way).
            ExprKind::Builtin(Builtin::Take | Builtin::Drop, args) => e = &args[1],
            _ => break,
        }
        shifted = true;
    }
    // `concat` of two fills of the same constant (both structural or
    // neither): the cotangent of a `concat` whose parts had none.
    if let ExprKind::Builtin(Builtin::Concat, parts) = &e.kind {
        let [a, b] = parts.as_slice() else {
            return None;
        };
        let (a, b) = (fill_of_expr(a, facts)?, fill_of_expr(b, facts)?);
        let same = a.value.to_bits() == b.value.to_bits() && a.structural == b.structural;
        return same.then_some(FillRef {
            like: None,
            size: None,
            ..a
        });
    }
    let fill = match &e.kind {
        ExprKind::Var(n) => fact(n, facts),
        ExprKind::ArrayOp(ArrayOp::Map | ArrayOp::Map2, f, args) => match fn_shape(f) {
            FnShape::Const(value, structural) => Some(FillRef {
                value,
                structural,
                like: Some(&args[0]),
                size: None,
            }),
            _ => None,
        },
        ExprKind::Builtin(Builtin::Replicate, args) => match args[1].kind {
            ExprKind::Const(value) => Some(FillRef {
                value,
                structural: args[1].is_structural_zero(),
                like: None,
                size: Some(&args[0]),
            }),
            _ => None,
        },
        _ => None,
    };
    // A shifted fill holds the same constant; its length is not at hand.
    fill.map(|f| {
        if shifted {
            FillRef {
                like: None,
                size: None,
                ..f
            }
        } else {
            f
        }
    })
}

/// `replicate(n, c)` of a tuple `c` of constants (tuples of constants
/// inside): `c`.
pub(super) fn replicated_constant_tuple(e: &Expr) -> Option<&Expr> {
    fn constant(e: &Expr) -> bool {
        match &e.kind {
            ExprKind::Const(_) => true,
            ExprKind::Tuple(es) => es.iter().all(constant),
            _ => false,
        }
    }
    match &e.kind {
        ExprKind::Builtin(Builtin::Replicate, args)
            if matches!(args[1].kind, ExprKind::Tuple(_)) && constant(&args[1]) =>
        {
            Some(&args[1])
        }
        _ => None,
    }
}

/// The variable the array `v` holds everywhere, if it is one.
pub(super) fn var_fill_of(v: &Val, facts: &Facts) -> Option<Name> {
    match v {
        Val::Var(n) => facts.var_fills.get(n).cloned(),
        Val::Code(e) => var_fill_of_expr(e),
        _ => None,
    }
}

/// `map (x. v) A`, `map2 (x, y. v) A B` (`v` bound outside) or
/// `replicate(n, v)`: `v`.
fn var_fill_of_expr(e: &Expr) -> Option<Name> {
    match &e.kind {
        ExprKind::ArrayOp(ArrayOp::Map | ArrayOp::Map2, f, _) => match fn_shape(f) {
            FnShape::Lambda(params, body) => {
                let ExprKind::Var(v) = &body.kind else {
                    return None;
                };
                let mut bound = Vec::new();
                params.iter().for_each(|p| p.pat.names(&mut bound));
                (!bound.contains(v)).then(|| v.clone())
            }
            _ => None,
        },
        ExprKind::Builtin(Builtin::Replicate, args) => match &args[1].kind {
            ExprKind::Var(v) => Some(v.clone()),
            _ => None,
        },
        _ => None,
    }
}

/// What the function argument of an array operation does.
pub(super) enum FnShape<'a> {
    /// A primitive: `(+)`, `sin`.
    Prim(Prim),
    /// Returns its `i`-th parameter (a plain name).
    Project(usize),
    /// Returns a constant.
    Const(f64, bool),
    /// Any other lambda.
    Lambda(&'a [Param], &'a Expr),
    /// A definition passed by name.
    Other,
}

pub(super) fn fn_shape(f: &Expr) -> FnShape<'_> {
    match &f.kind {
        ExprKind::PrimFn(p) => FnShape::Prim(*p),
        ExprKind::Lambda(params, body) => match &body.kind {
            ExprKind::Const(c) => FnShape::Const(*c, body.is_structural_zero()),
            ExprKind::Var(n) => match params
                .iter()
                .position(|p| matches!(&p.pat, Pattern::Var(m, _) if m == n))
            {
                Some(i) => FnShape::Project(i),
                None => FnShape::Lambda(params, body),
            },
            _ => FnShape::Lambda(params, body),
        },
        _ => FnShape::Other,
    }
}
