//! `zero-carry`: a fold or scan whose accumulator starts as a structural
//! zero and whose step keeps it one. Not in the paper: Figure 12 drops a
//! structural zero where one product or sum meets it; this carries the
//! same identities through a loop.
//!
//! The reverse pass of a scan runs a scan of cotangents, started from the
//! cotangent of the scan's last state and fed the cotangents of its
//! elements. Where both are structural zeros (the scan's result was read
//! only for its length, say), the step — linear in the cotangents — maps
//! zeros to zeros, and every state is a zero. Computing them anyway
//! multiplies the zeros by the primal's partial derivatives, and an
//! infinite partial derivative makes a NaN (`0ₛ · ∞`) where the gradient
//! has none: `zero-carry` replaces the fold by its start and the scan by
//! copies of it.
//!
//! The step is evaluated symbolically on residual code: each value is a
//! structural zero ([`Z::Zero`]), a tuple of such facts, or unknown. The
//! accumulator is a zero; an element's components are zeros where the
//! array holds structural zeros (a fill, or a `map`/`map2` whose function
//! returns them). A product with a zero factor, a quotient with a zero
//! numerator, a sum or difference of zeros and a negated zero are zeros —
//! the identities `zero-product`, `add-zero`, `sub-zero` and `neg-zero`
//! apply to structural zeros, so the rule claims nothing they do not —
//! through `let`, tuples, projections and both branches of `if`.

use super::fill::{fill_of, Facts};
use super::pe::Val;
use super::term::{len_plus, length_of};
use gradlift_lang::deep::guard;
use gradlift_lang::syntax::*;
use gradlift_lang::Prim;

/// What the symbolic evaluation knows about a value.
#[derive(Clone, Debug, PartialEq)]
enum Z {
    /// A structural zero, or a tuple of them at any depth.
    Zero,
    /// A tuple with some component not known to be zero.
    Tuple(Vec<Z>),
    /// Not known to be zero.
    Unknown,
}

impl Z {
    fn tuple(parts: Vec<Z>) -> Z {
        if parts.iter().all(|z| *z == Z::Zero) {
            Z::Zero
        } else {
            Z::Tuple(parts)
        }
    }

    fn component(&self, k: usize) -> Z {
        match self {
            Z::Zero => Z::Zero,
            Z::Tuple(parts) => parts.get(k).cloned().unwrap_or(Z::Unknown),
            Z::Unknown => Z::Unknown,
        }
    }

    /// What is known of a value that is `self` on one path and `other` on
    /// the other.
    fn meet(self, other: Z) -> Z {
        match (self, other) {
            (Z::Zero, Z::Zero) => Z::Zero,
            (a @ (Z::Zero | Z::Tuple(_)), b @ (Z::Zero | Z::Tuple(_))) => {
                let n = match (&a, &b) {
                    (Z::Tuple(x), _) => x.len(),
                    (_, Z::Tuple(y)) => y.len(),
                    _ => unreachable!("not both zero"),
                };
                Z::tuple(
                    (0..n)
                        .map(|k| a.component(k).meet(b.component(k)))
                        .collect(),
                )
            }
            _ => Z::Unknown,
        }
    }
}

/// What a fold or scan becomes under `zero-carry`.
pub(super) enum Carried {
    /// A fold: its start.
    Fold,
    /// A scan: `replicate(len, start)`.
    Scan(Expr),
}

/// Whether `zero-carry` applies to `op f z xs` (`args` = `[z, xs]`).
pub(super) fn carried(op: ArrayOp, f: &Expr, args: &[Val], facts: &Facts) -> Option<Carried> {
    if !matches!(op, ArrayOp::Foldl(_) | ArrayOp::Scanl | ArrayOp::Scanr) {
        return None;
    }
    let [start, array] = args else { return None };
    if of_val(start) != Z::Zero {
        return None;
    }
    let next = match &f.kind {
        ExprKind::Lambda(params, body) => {
            let [acc, el] = params.as_slice() else {
                return None;
            };
            let mut env = Vec::new();
            bind(&acc.pat, Z::Zero, &mut env);
            bind(&el.pat, element(array, facts), &mut env);
            eval(body, &mut env)
        }
        ExprKind::PrimFn(p) => prim(*p, &[Z::Zero, element(array, facts)]),
        _ => return None,
    };
    if next != Z::Zero {
        return None;
    }
    match op {
        ArrayOp::Foldl(_) => Some(Carried::Fold),
        _ => scan_length(array, facts).map(Carried::Scan),
    }
}

fn of_val(v: &Val) -> Z {
    match v {
        Val::Const(c, true) if *c == 0.0 => Z::Zero,
        Val::Tuple(vs) => Z::tuple(vs.iter().map(of_val).collect()),
        _ => Z::Unknown,
    }
}

/// What is known of every element of `array`.
fn element(array: &Val, facts: &Facts) -> Z {
    if fill_of(array, facts).is_some_and(|f| f.structural && f.value == 0.0) {
        return Z::Zero;
    }
    match array {
        Val::Var(n) => match facts.tuples.get(n) {
            Some(t) => Z::tuple(
                t.components
                    .iter()
                    .map(|c| match c {
                        Some(e) if e.is_structural_zero() => Z::Zero,
                        _ => Z::Unknown,
                    })
                    .collect(),
            ),
            None => Z::Unknown,
        },
        Val::Code(e) => match &e.kind {
            ExprKind::ArrayOp(ArrayOp::Map | ArrayOp::Map2, f, _) => match &f.kind {
                ExprKind::Lambda(params, body) => {
                    // The function's parameters are unknown elements.
                    let mut env = Vec::new();
                    for p in params {
                        bind(&p.pat, Z::Unknown, &mut env);
                    }
                    eval(body, &mut env)
                }
                _ => Z::Unknown,
            },
            _ => Z::Unknown,
        },
        _ => Z::Unknown,
    }
}

fn bind(p: &Pattern, z: Z, env: &mut Vec<(Name, Z)>) {
    match p {
        Pattern::Var(n, _) => env.push((n.clone(), z)),
        Pattern::Wild(_) => {}
        Pattern::Tuple(ps, _) => {
            for (k, q) in ps.iter().enumerate() {
                bind(q, z.component(k), env);
            }
        }
    }
}

fn eval(e: &Expr, env: &mut Vec<(Name, Z)>) -> Z {
    guard(|| {
        let mark = env.len();
        let mut e = e;
        while let ExprKind::Let {
            pat, value, body, ..
        } = &e.kind
        {
            let z = eval(value, env);
            bind(pat, z, env);
            e = body;
        }
        let z = match &e.kind {
            ExprKind::Const(c) if *c == 0.0 && e.is_structural_zero() => Z::Zero,
            ExprKind::Var(n) => env
                .iter()
                .rev()
                .find(|(m, _)| m == n)
                .map_or(Z::Unknown, |(_, z)| z.clone()),
            ExprKind::Prim(p, xs) => {
                let zs: Vec<Z> = xs.iter().map(|x| eval(x, env)).collect();
                prim(*p, &zs)
            }
            ExprKind::Tuple(xs) => Z::tuple(xs.iter().map(|x| eval(x, env)).collect()),
            ExprKind::Proj(x, k) => eval(x, env).component(*k),
            ExprKind::If(_, t, f) => eval(t, env).meet(eval(f, env)),
            _ => Z::Unknown,
        };
        env.truncate(mark);
        z
    })
}

/// What is known of `p(args)`.
fn prim(p: Prim, args: &[Z]) -> Z {
    let zero = |i: usize| args.get(i) == Some(&Z::Zero);
    let known = match p {
        Prim::Mul => zero(0) || zero(1),
        Prim::Div | Prim::Neg => zero(0),
        Prim::Add | Prim::Sub => zero(0) && zero(1),
        _ => false,
    };
    if known {
        Z::Zero
    } else {
        Z::Unknown
    }
}

/// The length of a scan over `array`, `len(array) + 1`, as a size
/// expression over a variable (without computing `array`: a `map` is as
/// long as the arrays it reads).
fn scan_length(array: &Val, facts: &Facts) -> Option<Expr> {
    let (x, offset) = match array {
        Val::Var(n) => facts
            .tuples
            .get(n)
            .and_then(|t| t.args.iter().find_map(length_of))
            .unwrap_or((n.clone(), 0)),
        Val::Code(e) => length_of(e)?,
        _ => return None,
    };
    Some(len_plus(x, offset + 1))
}
