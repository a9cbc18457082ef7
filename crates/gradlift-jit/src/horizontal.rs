//! Horizontal fusion: a fold over a stored `map` runs in the map's loop
//! (not in the paper, whose cost model counts operations, not passes).
//!
//! A gradient stores the elements of a map for its reverse pass and, a
//! few bindings later, folds over them (`let P = map (v. exp(v - a)) x in
//! … let t = foldl (+) 0 P in …`). Lowered one binding at a time, the
//! fold is a second loop that reads the array back from memory, and its
//! sequential sum waits on the latency of each addition. When everything
//! the fold needs but `P` is known before `P` is computed, the map's loop
//! also carries the fold's accumulator: one loop, and the fold's additions
//! overlap the map's work. The fold sees the elements in the same order
//! and computes the same operations, so the result is bit for bit the
//! same.
//!
//! A fold rides along with the map `P` when it is a `reduce` (not one in
//! lanes, whose order is not the loop's: [`in_lanes`]) or `foldl`
//! (without a checkpoint schedule) over `P` itself, later in the same
//! `let` chain; its function's body and its start cannot fail (so no
//! error is raised earlier than it would be); neither mentions a name
//! bound from `P`'s binding up to the fold's; and its accumulator holds
//! reals only. The fold is searched for among the next [`LOOKAHEAD`]
//! bindings. Outside loops, a fold may also be a term the chain's body
//! evaluates unconditionally (not under a lambda or in a branch of an
//! `if`; its value then waits in `Translator::computed`), read
//! `zip(P, A)` or `zip(A, P)` for an array variable `A` of the map (the
//! loop reads `A[i]` beside the element it computes), carry an array its
//! step rewrites in place (`in_place_step`), and run maps and folds in its
//! step: their lengths are equal by typing, so they cannot fail either.
//! A gradient with respect to a weight vector is such a fold: the sum of
//! the rows of `X` scaled by the partials `P` stores, which thus reads
//! each row once, in the loop that reads it for `P`.
//! (A fold that is a part of the function's result rides along
//! a `map` among the parts that reads the fold's array in full, in order:
//! `Translator::riding_folds` in `arrays.rs`.)

use crate::annotate::one_line;
use crate::arrays::cannot_fail;
use crate::lower::Translator;
use crate::values::Values;
use crate::JitError;
use gradlift_lang::syntax::{ArrayOp, Expr, ExprKind, Name, Pattern, Type};

/// How many bindings after a map are searched for folds over it (the
/// search is linear in this, per map).
const LOOKAHEAD: usize = 64;

/// One binding of a `let` chain.
type Binding<'e> = (&'e Pattern, Option<&'e Type>, &'e Expr);

/// A fold computed in a map's loop.
pub(crate) struct Rider<'e> {
    /// Where its value goes.
    pub to: Goes<'e>,
    pub ty: Type,
    pub params: &'e [gradlift_lang::syntax::Param],
    pub body: &'e Expr,
    pub start: &'e Expr,
    /// With `zip(P, A)` or `zip(A, P)` for its array (`.1`: `P` first):
    /// the variable `A`, an array of the map.
    pub zip: Option<(&'e Name, bool)>,
}

/// Where the value of a [`Rider`] goes.
pub(crate) enum Goes<'e> {
    /// A later binding of the chain.
    Binding(&'e Pattern),
    /// A term of the chain's body, read when the body is lowered
    /// (`Translator::computed`).
    Term(&'e Expr),
}

impl Translator<'_, '_> {
    /// Lowers a `let` chain: its bindings, then its body.
    pub(crate) fn let_chain(&mut self, e: &Expr) -> Result<Values, JitError> {
        let mark = self.tape_log.len();
        let body = self.let_bindings(e)?;
        let v = self.labelled(|| one_line(body), |t| t.lower(body));
        self.untape(mark);
        v
    }

    /// A `let` chain whose value is stored at `at` with layout `shape`:
    /// its bindings, then its body by [`Translator::lower_into`].
    pub(crate) fn let_chain_into(
        &mut self,
        e: &Expr,
        at: cranelift_codegen::ir::Value,
        shape: &crate::values::Shape,
    ) -> Result<(), JitError> {
        let taped = self.tapes.len();
        let mark = self.tape_log.len();
        let body = self.let_bindings(e)?;
        // After a chain long enough to have a tape, the result's address
        // is read again from its slot rather than kept live across it.
        let at = match self.out_slot {
            Some((slot, out)) if out == at && self.tapes.len() > taped => {
                use cranelift_codegen::ir::{types::I64, InstBuilder};
                self.b.ins().stack_load(I64, I64, slot, 0)
            }
            _ => at,
        };
        let r = self.lower_into(body, at, shape);
        self.untape(mark);
        r
    }

    /// Lowers and binds the bindings of the `let` chain `e` (the folds
    /// that can, in the loops of the maps they read); returns its body.
    fn let_bindings<'e>(&mut self, e: &'e Expr) -> Result<&'e Expr, JitError> {
        let mut chain: Vec<Binding<'_>> = Vec::new();
        let mut cur = e;
        while let ExprKind::Let {
            pat,
            ty,
            value,
            body,
        } = &cur.kind
        {
            chain.push((pat, ty.as_ref(), value));
            cur = body;
        }
        let far = crate::tape::far(
            &chain.iter().map(|&(p, _, v)| (p, v)).collect::<Vec<_>>(),
            cur,
        );
        let tape = self.tape(far.slots());
        let mut slot = 0;
        if let Some(tape) = tape {
            for name in &far.outer {
                self.store_on_tape(name, tape, slot, true);
                slot += 1;
            }
        }
        let mut done = vec![false; chain.len()];
        for k in 0..chain.len() {
            if done[k] {
                continue;
            }
            let (pat, ty, value) = chain[k];
            if let (Some(tape), true) = (tape, k > 0 && k % crate::tape::TAPE_DISTANCE == 0) {
                self.refresh_tape(tape);
            }
            let riders = self.riders(&chain, k, cur)?;
            if riders.is_empty() {
                self.bind_let(pat, ty, value)?;
                if let (Some(tape), Pattern::Var(name, _)) = (tape, pat) {
                    self.store_on_tape(name, tape, slot, far.bindings[k]);
                }
                slot += 1;
                continue;
            }
            let t = match ty {
                Some(t) => t.clone(),
                None => self.type_of(value)?,
            };
            let ExprKind::ArrayOp(_, f, args) = &value.kind else {
                unreachable!("riders follow a map")
            };
            let (params, body) = self.lambda(f, args.len())?;
            let (at, riders): (Vec<usize>, Vec<Rider<'_>>) = riders.into_iter().unzip();
            let label = || {
                let folds: Vec<String> = riders
                    .iter()
                    .map(|r| match r.to {
                        Goes::Binding(pat) => format!("let {pat} = …"),
                        Goes::Term(e) => e.to_string(),
                    })
                    .collect();
                one_line(&format_args!(
                    "let {pat} = {value}, and in its loop {}",
                    folds.join(", ")
                ))
            };
            let (array, folds) =
                self.labelled(label, |t| t.map_with_folds(params, body, args, &riders))?;
            self.bind(pat, array, &t)?;
            for ((j, r), v) in at.into_iter().zip(&riders).zip(folds) {
                match r.to {
                    Goes::Binding(pat) => {
                        self.bind(pat, v, &r.ty)?;
                        done[j] = true;
                    }
                    Goes::Term(e) => {
                        self.computed.insert(e as *const Expr, v);
                    }
                }
            }
        }
        Ok(cur)
    }

    /// The folds later in `chain`, or in its body `last` (at the top level
    /// of the function), that can ride along with binding `k`.
    fn riders<'e>(
        &mut self,
        chain: &[Binding<'e>],
        k: usize,
        last: &'e Expr,
    ) -> Result<Vec<(usize, Rider<'e>)>, JitError> {
        let (pat, _, value) = chain[k];
        let (Pattern::Var(p, _), ExprKind::ArrayOp(ArrayOp::Map | ArrayOp::Map2, _, arrays)) =
            (pat, &value.kind)
        else {
            return Ok(Vec::new());
        };
        let map = Map { p, arrays };
        let mut bound: Vec<Name> = vec![p.clone()];
        let mut out = Vec::new();
        let window = chain.iter().enumerate().skip(k + 1).take(LOOKAHEAD);
        let mut shadowed = false;
        for (j, &(pat_j, ty_j, value_j)) in window {
            if let Some(r) = self.rider(&map, &bound, Goes::Binding(pat_j), ty_j, value_j)? {
                out.push((j, r));
            }
            let before = bound.len();
            pat_j.names(&mut bound);
            if bound[before..].contains(p) {
                // `P` is shadowed: later folds read another array.
                shadowed = true;
                break;
            }
        }
        // The body's folds, outside loops (where the chain ends the
        // function, say: the parts of a gradient's result).
        if shadowed || !self.loops.is_empty() || k + 1 + LOOKAHEAD < chain.len() {
            return Ok(out);
        }
        for (pat_j, _, value_j) in &chain[k + 1..] {
            pat_j.names(&mut bound);
            binders(value_j, &mut bound);
        }
        binders(last, &mut bound);
        if bound[1..].contains(p) {
            return Ok(out);
        }
        let mut terms = Vec::new();
        evaluated_folds(last, &mut terms);
        for e in terms {
            // Its own binders are not bound after `P` (names are unique).
            let mut own = Vec::new();
            binders(e, &mut own);
            let outside: Vec<Name> = bound.iter().filter(|n| !own.contains(n)).cloned().collect();
            if let Some(r) = self.rider(&map, &outside, Goes::Term(e), None, e)? {
                out.push((chain.len(), r));
            }
        }
        Ok(out)
    }

    fn rider<'e>(
        &mut self,
        map: &Map<'_>,
        bound: &[Name],
        to: Goes<'e>,
        ty: Option<&Type>,
        value: &'e Expr,
    ) -> Result<Option<Rider<'e>>, JitError> {
        let ExprKind::ArrayOp(op @ (ArrayOp::Reduce | ArrayOp::Foldl(None)), f, args) = &value.kind
        else {
            return Ok(None);
        };
        if in_lanes(*op, f) {
            return Ok(None);
        }
        let [start, array] = args.as_slice() else {
            return Ok(None);
        };
        let ExprKind::Lambda(params, body) = &f.kind else {
            return Ok(None);
        };
        // Outside loops, a fold may also read the pairs of `P` and an
        // array of its map, and carry an array it updates in place; its
        // step may then run maps (of lengths equal by typing).
        let top = self.loops.is_empty();
        let zip = match &array.kind {
            ExprKind::Var(x) if x == map.p => None,
            _ => match zip_with(array, map) {
                Some(z) if top && !bound.contains(z.0) => Some(z),
                _ => return Ok(None),
            },
        };
        let safe = |e: &Expr| cannot_fail(e) || (top && total(e));
        if params.len() != 2
            || !safe(body)
            || !safe(start)
            || mentions(f, bound)
            || mentions(start, bound)
        {
            return Ok(None);
        }
        // The fold's type is its start's, which mentions nothing bound
        // from `P` on (the typer does not know those names yet).
        let ty = match ty {
            Some(t) => t.clone(),
            None => self.type_of(start)?,
        };
        let in_place = |rows| top && crate::arrays::in_place_step(params, body, rows);
        let fits = match &ty {
            Type::Array(e, _) => match &**e {
                Type::Array(r, _) => reals_only(r) && in_place(true),
                e => reals_only(e) && in_place(false),
            },
            t => reals_only(t),
        };
        if !fits {
            return Ok(None);
        }
        Ok(Some(Rider {
            to,
            ty,
            params,
            body,
            start,
            zip,
        }))
    }
}

/// A map a fold may ride along: the variable it is bound to, its arrays.
struct Map<'a> {
    p: &'a Name,
    arrays: &'a [Expr],
}

/// For `zip(P, A)` or `zip(A, P)` (`map2 (a, b. (a, b))` of the two
/// variables) with `A` an array of `P`'s map: `A`, and whether `P` comes
/// first.
fn zip_with<'e>(e: &'e Expr, map: &Map<'_>) -> Option<(&'e Name, bool)> {
    let ExprKind::ArrayOp(ArrayOp::Map2, f, args) = &e.kind else {
        return None;
    };
    let ExprKind::Lambda(ps, body) = &f.kind else {
        return None;
    };
    let names: Vec<&Name> = ps
        .iter()
        .filter_map(|q| match &q.pat {
            Pattern::Var(n, _) => Some(n),
            _ => None,
        })
        .collect();
    let ([a, b], ExprKind::Tuple(es)) = (names.as_slice(), &body.kind) else {
        return None;
    };
    let is = |e: &Expr, n: &Name| matches!(&e.kind, ExprKind::Var(m) if m == n);
    if !matches!(es.as_slice(), [x, y] if is(x, a) && is(y, b)) {
        return None;
    }
    let [x, y] = args.as_slice() else {
        return None;
    };
    let of_map = |n: &Name| map.arrays.iter().any(|a| is(a, n));
    match (&x.kind, &y.kind) {
        (ExprKind::Var(u), ExprKind::Var(v)) if u == map.p && of_map(v) => Some((v, true)),
        (ExprKind::Var(u), ExprKind::Var(v)) if v == map.p && of_map(u) => Some((u, false)),
        _ => None,
    }
}

/// Whether a fold is a `reduce` in lanes (`gradlift_lang::reduce_order`):
/// its order is not the element by element one of a loop it would ride.
pub(crate) fn in_lanes(op: ArrayOp, f: &Expr) -> bool {
    op == ArrayOp::Reduce && gradlift_lang::reduce_order::lane_prim(f).is_some()
}

/// The folds `e` evaluates unconditionally, outside any loop of its own:
/// not under a lambda or in a branch of an `if`.
fn evaluated_folds<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
    gradlift_lang::deep::guard(|| match &e.kind {
        ExprKind::Lambda(..) => {}
        ExprKind::If(c, _, _) => evaluated_folds(c, out),
        ExprKind::ArrayOp(op, _, args) => {
            if matches!(op, ArrayOp::Reduce | ArrayOp::Foldl(None)) {
                out.push(e);
            }
            args.iter().for_each(|a| evaluated_folds(a, out));
        }
        _ => e.children().for_each(|c| evaluated_folds(c, out)),
    })
}

/// Whether `e` cannot end in an error in a well-typed program: what
/// [`cannot_fail`] accepts, and maps, `map2`s and folds of such terms
/// (the lengths a `map2` checks are equal by typing).
fn total(e: &Expr) -> bool {
    gradlift_lang::deep::guard(|| match &e.kind {
        ExprKind::Const(_) | ExprKind::Int(_) | ExprKind::Var(_) | ExprKind::PrimFn(_) => true,
        ExprKind::Prim(p, _) if p.can_fail() => false,
        ExprKind::Prim(_, args) | ExprKind::Tuple(args) => args.iter().all(total),
        ExprKind::Let { value, body, .. } => total(value) && total(body),
        ExprKind::Proj(x, _) => total(x),
        ExprKind::If(c, a, b) => total(c) && total(a) && total(b),
        ExprKind::ArrayOp(
            ArrayOp::Map | ArrayOp::Map2 | ArrayOp::Reduce | ArrayOp::Foldl(None),
            f,
            args,
        ) => {
            let function = match &f.kind {
                ExprKind::Lambda(_, b) => total(b),
                ExprKind::PrimFn(_) => true,
                _ => false,
            };
            function && args.iter().all(total)
        }
        // `replicate` of a size.
        ExprKind::Builtin(gradlift_lang::syntax::Builtin::Replicate, args) => {
            matches!(args.first().map(|n| &n.kind), Some(ExprKind::Var(_)))
                && args.iter().all(total)
        }
        _ => false,
    })
}

/// The names bound in `e` by `let`s and lambdas.
fn binders(e: &Expr, out: &mut Vec<Name>) {
    gradlift_lang::deep::guard(|| {
        match &e.kind {
            ExprKind::Let { pat, .. } => pat.names(out),
            ExprKind::Lambda(ps, _) => ps.iter().for_each(|q| q.pat.names(out)),
            _ => {}
        }
        e.children().for_each(|c| binders(c, out));
    })
}

/// Whether a value of type `t` is reals only (no arrays, no conditions).
fn reals_only(t: &Type) -> bool {
    match t {
        Type::Real => true,
        Type::Tuple(ts) => ts.iter().all(reals_only),
        _ => false,
    }
}

/// Whether `e` mentions any of `names` (free or bound: a conservative
/// answer is enough here).
fn mentions(e: &Expr, names: &[Name]) -> bool {
    gradlift_lang::deep::guard(|| match &e.kind {
        ExprKind::Var(n) => names.contains(n),
        _ => e.children().any(|c| mentions(c, names)),
    })
}
