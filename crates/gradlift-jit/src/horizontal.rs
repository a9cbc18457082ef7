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
//! A fold rides along with the map `P` when it is a `reduce` or `foldl`
//! (without a checkpoint schedule) over `P` itself, later in the same
//! `let` chain; its function's body and its start cannot fail (so no
//! error is raised earlier than it would be); neither mentions a name
//! bound from `P`'s binding up to the fold's; and its accumulator holds
//! reals only. The fold is searched for among the next [`LOOKAHEAD`]
//! bindings. (A fold that is a part of the function's result rides along
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
    pub pat: &'e Pattern,
    pub ty: Type,
    pub params: &'e [gradlift_lang::syntax::Param],
    pub body: &'e Expr,
    pub start: &'e Expr,
}

impl Translator<'_, '_> {
    /// Lowers a `let` chain: its bindings, then its body.
    pub(crate) fn let_chain(&mut self, e: &Expr) -> Result<Values, JitError> {
        let body = self.let_bindings(e)?;
        self.labelled(|| one_line(body), |t| t.lower(body))
    }

    /// A `let` chain whose value is stored at `at` with layout `shape`:
    /// its bindings, then its body by [`Translator::lower_into`].
    pub(crate) fn let_chain_into(
        &mut self,
        e: &Expr,
        at: cranelift_codegen::ir::Value,
        shape: &crate::values::Shape,
    ) -> Result<(), JitError> {
        let body = self.let_bindings(e)?;
        self.lower_into(body, at, shape)
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
        let mut done = vec![false; chain.len()];
        for k in 0..chain.len() {
            if done[k] {
                continue;
            }
            let (pat, ty, value) = chain[k];
            let riders = self.riders(&chain, k)?;
            if riders.is_empty() {
                self.bind_let(pat, ty, value)?;
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
                let folds: Vec<String> = at
                    .iter()
                    .map(|&j| format!("let {} = {}", chain[j].0, chain[j].2))
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
                self.bind(r.pat, v, &r.ty)?;
                done[j] = true;
            }
        }
        Ok(cur)
    }

    /// The folds later in `chain` that can ride along with binding `k`.
    fn riders<'e>(
        &mut self,
        chain: &[Binding<'e>],
        k: usize,
    ) -> Result<Vec<(usize, Rider<'e>)>, JitError> {
        let (pat, _, value) = chain[k];
        let (Pattern::Var(p, _), ExprKind::ArrayOp(ArrayOp::Map | ArrayOp::Map2, ..)) =
            (pat, &value.kind)
        else {
            return Ok(Vec::new());
        };
        let mut bound: Vec<Name> = vec![p.clone()];
        let mut out = Vec::new();
        let window = chain.iter().enumerate().skip(k + 1).take(LOOKAHEAD);
        for (j, &(pat_j, ty_j, value_j)) in window {
            if let Some(r) = self.rider(p, &bound, pat_j, ty_j, value_j)? {
                out.push((j, r));
            }
            let before = bound.len();
            pat_j.names(&mut bound);
            if bound[before..].contains(p) {
                // `P` is shadowed: later folds read another array.
                break;
            }
        }
        Ok(out)
    }

    fn rider<'e>(
        &mut self,
        p: &Name,
        bound: &[Name],
        pat: &'e Pattern,
        ty: Option<&Type>,
        value: &'e Expr,
    ) -> Result<Option<Rider<'e>>, JitError> {
        let ExprKind::ArrayOp(ArrayOp::Reduce | ArrayOp::Foldl(None), f, args) = &value.kind else {
            return Ok(None);
        };
        let [start, array] = args.as_slice() else {
            return Ok(None);
        };
        let ExprKind::Lambda(params, body) = &f.kind else {
            return Ok(None);
        };
        let reads_p = matches!(&array.kind, ExprKind::Var(x) if x == p);
        if !reads_p
            || params.len() != 2
            || !cannot_fail(body)
            || !cannot_fail(start)
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
        if !reals_only(&ty) {
            return Ok(None);
        }
        Ok(Some(Rider {
            pat,
            ty,
            params,
            body,
            start,
        }))
    }
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
        _ => e.children().into_iter().any(|c| mentions(c, names)),
    })
}
