//! Conveniences written in terms of the core language, so that no later
//! stage — type checker, differentiation, simplifier, cost model, JIT —
//! sees a new construct:
//!
//! - `map F A₁ … A_k` over several arrays of one size. One array is
//!   `map`, two are `map2`; from three on, the first k − 1 arrays are
//!   zipped into an array of tuples by `map2`s and the last `map2` reads
//!   the tuple with a tuple pattern: `map (x, y, z. e) A B C` is
//!   `map2 ((x, y), z. e) (map2 (x, y. (x, y)) A B) C`. The simplifier
//!   does not bind the zip of variables to an array: it substitutes it
//!   where it is read (rule `inline-cheap-map`), and fuses it with a map
//!   that reads it (`map (p. p.0 * p.1) (zip(a, b))` becomes
//!   `map2 (*) a b`).
//! - `zip(A₁, …, A_k)`, k ≥ 2: `map (x₁, …, x_k. (x₁, …, x_k)) A₁ … A_k`,
//!   for any element types.
//! - `max(A)` and `min(A)`, the primitives with one argument: the greatest
//!   (least) element, `reduce max (-inf) A` (`reduce min inf A`); of an
//!   empty array, `-inf` (`inf`).
//! - `loop p = v while c do e`: `while (p. if c then (1, e) else (0, p))
//!   v`, the loop's step saying whether it went on (the `p` of the
//!   `else` branch is the pattern read as a value, a `_` in it given a
//!   name that `c` and `e` do not mention).
//!
//! The library of definitions (`sum`, `logsumexp`) is [`LIBRARY`], added to
//! a module that uses it by [`with_library`].

use crate::span::Span;
use crate::syntax::*;
use std::sync::Arc;

/// `loop pat = init while cond do step` (see the module documentation).
pub(crate) fn while_loop(pat: Pattern, init: Expr, cond: Expr, step: Expr, span: Span) -> Expr {
    // Every name the condition and the step mention, so that a name given
    // to a `_` captures none of them.
    let mut mentioned = std::collections::HashSet::new();
    let mut todo = vec![&cond, &step];
    while let Some(e) = todo.pop() {
        if let ExprKind::Var(n) = &e.kind {
            mentioned.insert(n.clone());
        }
        todo.extend(e.children());
    }
    let mut bound = Vec::new();
    pat.names(&mut bound);
    mentioned.extend(bound);
    let mut next = 0;
    let mut fresh = || loop {
        let n: Name = Name::from(format!("_s{next}"));
        next += 1;
        if !mentioned.contains(&n) {
            return n;
        }
    };
    fn named(p: &Pattern, fresh: &mut dyn FnMut() -> Name) -> Pattern {
        match p {
            Pattern::Var(..) => p.clone(),
            Pattern::Wild(s) => Pattern::Var(fresh(), *s),
            Pattern::Tuple(ps, s) => {
                Pattern::Tuple(ps.iter().map(|q| named(q, fresh)).collect(), *s)
            }
        }
    }
    fn value(p: &Pattern) -> Expr {
        match p {
            Pattern::Var(n, s) => Expr::new(ExprKind::Var(n.clone()), *s),
            Pattern::Wild(_) => unreachable!("every `_` is named"),
            Pattern::Tuple(ps, s) => Expr::new(ExprKind::Tuple(ps.iter().map(value).collect()), *s),
        }
    }
    let pat = named(&pat, &mut fresh);
    let flagged = |k: i64, e: Expr| {
        let s = e.span;
        Expr::new(ExprKind::Tuple(vec![Expr::new(ExprKind::Int(k), s), e]), s)
    };
    let stay = flagged(0, value(&pat));
    let body = Expr::new(
        ExprKind::If(Box::new(cond), Box::new(flagged(1, step)), Box::new(stay)),
        span,
    );
    let f = Expr::new(
        ExprKind::Lambda(vec![Param { pat, ty: None }], Arc::new(body)),
        span,
    );
    Expr::new(
        ExprKind::ArrayOp(ArrayOp::While, Box::new(f), vec![init]),
        span,
    )
}

/// `map F A₁ … A_k` for k ≥ 1 (see the module documentation); an error
/// message when `F` is a lambda whose number of parameters is not k ≥ 3
/// (for one or two arrays the type checker says it).
pub(crate) fn map_n(f: Expr, mut arrays: Vec<Expr>, span: Span) -> Result<Expr, String> {
    let k = arrays.len();
    match k {
        1 => {
            return Ok(Expr::new(
                ExprKind::ArrayOp(ArrayOp::Map, Box::new(f), arrays),
                span,
            ))
        }
        2 => {
            return Ok(Expr::new(
                ExprKind::ArrayOp(ArrayOp::Map2, Box::new(f), arrays),
                span,
            ))
        }
        _ => {}
    }
    // The parameters: the lambda's own, or fresh names applied to `F`.
    let (params, body) = match &f.kind {
        ExprKind::Lambda(ps, body) if ps.len() == k => (ps.clone(), body.clone()),
        ExprKind::Lambda(ps, _) => {
            return Err(format!(
                "`map` over {k} arrays takes a function of {k} parameters, one per array; this lambda has {}",
                ps.len()
            ))
        }
        ExprKind::PrimFn(p) if p.info().arity != k => {
            return Err(format!(
                "`map` over {k} arrays takes a function of {k} parameters, one per array; `{p}` takes {}",
                p.info().arity
            ))
        }
        _ => {
            let names = fresh_names(&f, k);
            let args: Vec<Expr> = names.iter().map(|n| var(n, f.span)).collect();
            let body = match &f.kind {
                ExprKind::PrimFn(p) => Expr::new(ExprKind::Prim(*p, args), f.span),
                _ => Expr::new(ExprKind::Apply(Box::new(f.clone()), args), f.span),
            };
            let params = names
                .iter()
                .map(|n| Param {
                    pat: Pattern::Var(n.clone(), f.span),
                    ty: None,
                })
                .collect();
            (params, Arc::new(body))
        }
    };
    let last = arrays.pop().expect("three arrays or more");
    let zipped = zip(arrays, span);
    let (init, last_param) = params.split_at(k - 1);
    let first = Param {
        pat: Pattern::Tuple(init.iter().map(|p| p.pat.clone()).collect(), span),
        ty: init
            .iter()
            .map(|p| p.ty.clone())
            .collect::<Option<Vec<_>>>()
            .map(Type::Tuple),
    };
    let lambda = Expr::new(
        ExprKind::Lambda(vec![first, last_param[0].clone()], body),
        span,
    );
    Ok(Expr::new(
        ExprKind::ArrayOp(ArrayOp::Map2, Box::new(lambda), vec![zipped, last]),
        span,
    ))
}

/// `zip(A₁, …, A_k)`, k ≥ 2: the array of the tuples of their elements.
pub(crate) fn zip(arrays: Vec<Expr>, span: Span) -> Expr {
    let k = arrays.len();
    let names: Vec<Name> = (1..=k).map(|i| Name::from(format!("x{i}"))).collect();
    let params = names
        .iter()
        .map(|n| Param {
            pat: Pattern::Var(n.clone(), span),
            ty: None,
        })
        .collect();
    let tuple = Expr::new(
        ExprKind::Tuple(names.iter().map(|n| var(n, span)).collect()),
        span,
    );
    let f = Expr::new(ExprKind::Lambda(params, Arc::new(tuple)), span);
    map_n(f, arrays, span).expect("a lambda of one parameter per array")
}

/// `reduce max (-inf) A` or `reduce min inf A`.
pub(crate) fn extremum(p: crate::Prim, array: Expr, span: Span) -> Expr {
    let unit = match p {
        crate::Prim::Max => f64::NEG_INFINITY,
        _ => f64::INFINITY,
    };
    Expr::new(
        ExprKind::ArrayOp(
            ArrayOp::Reduce,
            Box::new(Expr::new(ExprKind::PrimFn(p), span)),
            vec![Expr::new(ExprKind::Const(unit), span), array],
        ),
        span,
    )
}

fn var(n: &Name, span: Span) -> Expr {
    Expr::new(ExprKind::Var(n.clone()), span)
}

/// k parameter names that do not capture the name `f` refers to.
fn fresh_names(f: &Expr, k: usize) -> Vec<Name> {
    let taken = match &f.kind {
        ExprKind::Var(n) => Some(n.clone()),
        _ => None,
    };
    let mut prefix = String::from("x");
    while taken
        .as_deref()
        .is_some_and(|t| t.starts_with(prefix.as_str()))
    {
        prefix.push('_');
    }
    (1..=k)
        .map(|i| Name::from(format!("{prefix}{i}")))
        .collect()
}

/// The library: definitions added to every module that calls them and
/// does not define a function of the same name. Each is an ordinary
/// definition, differentiated and compiled as the user's are.
pub const LIBRARY: &str = "\
def sum(x: [R; n]) -> R = reduce (+) 0 x
def logsumexp(x: [R; n]) -> R =
  let m = max(x) in
  let a = if m == inf or m == -inf then 0 else m in
  a + log(sum(map (v. exp(v - a)) x))
";

/// The names [`LIBRARY`] defines, in its order.
pub const LIBRARY_NAMES: &[&str] = &["sum", "logsumexp"];

/// `module` with the definitions of [`LIBRARY`] it uses (directly or
/// through another), first, in the library's order.
pub fn with_library(mut module: Module) -> Module {
    let defined: Vec<Name> = module.defs.iter().map(|d| d.name.clone()).collect();
    let mut used = Vec::new();
    for d in &module.defs {
        names(&d.body, &mut used);
    }
    if used.is_empty() {
        return module;
    }
    let library = crate::parser::parse_module(LIBRARY).expect("the library parses");
    let mut added = Vec::new();
    for d in library.defs.into_iter().rev() {
        if used.contains(&d.name) && !defined.contains(&d.name) {
            names(&d.body, &mut used);
            added.push(d);
        }
    }
    if added.is_empty() {
        return module;
    }
    added.reverse();
    added.append(&mut module.defs);
    module.defs = added;
    module
}

/// Every name of [`LIBRARY_NAMES`] read in `e`.
fn names(e: &Expr, out: &mut Vec<Name>) {
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        if let ExprKind::Var(n) = &e.kind {
            if LIBRARY_NAMES.contains(&&**n) && !out.contains(n) {
                out.push(n.clone());
            }
        }
        stack.extend(e.children());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_library_parses_and_its_names_are_listed_in_order() {
        let library = crate::parser::parse_module(LIBRARY).unwrap();
        let names: Vec<&str> = library.defs.iter().map(|d| &*d.name).collect();
        assert_eq!(names, LIBRARY_NAMES);
    }
}
