//! Partial evaluation and simplification (§5.1 and Figure 12): a Target
//! term, as differentiation builds it, → an equivalent first-order Target
//! term, SSA-like, that the cost model of Figure 11 and the backend accept.
//!
//! Input: a well-typed Target term whose free variables are a function's
//! parameters and size variables. Output: an equivalent term (bit for bit
//! under the reference interpreter, except where a rule's guard licenses a
//! change for structural zeros or under [`Options::algebraic`]) that passes
//! [`is_first_order`], computed in time near-linear in the size of the term.
//!
//! The passes, in order ([`PASSES`]):
//!
//! 1. `pe/` — partial evaluation by normalization by evaluation:
//!    β-reduction, inlining of continuations, forward substitution, tuple
//!    splitting, let normalisation, conditionals, and the algebraic and
//!    array rules applied to each node as it is built;
//! 2. `cse.rs` — common subexpressions bound once (if [`Options::cse`] and
//!    value numbering finds a computation that occurs twice);
//! 3. `dce.rs` — dead `let`s dropped, values used once inlined.
//!
//! The three run again when DCE inlined an array computation into its use,
//! which can expose a fusion or an array rule, until a round changes
//! nothing (at most [`MAX_ROUNDS`] rounds in all). Between them, `prune.rs`
//! (dead components, sums moved into branches), `reuse.rs` (folds reading
//! stored maps), `merge.rs` (sibling maps merged into a stored one) and
//! `split.rs` (derived components, map splitting) rewrite
//! tuple-valued bindings and the arrays of tuples of partial derivatives.
//! Afterwards [`is_first_order`] checks Lemma 5.3.
//!
//! Every rule is a row of the table in `rules.rs` ([`Rule`]); how often each
//! fired is returned by [`simplify_with_stats`]. The matchers of the
//! algebraic and array rules are in `rewrite.rs`, the recognition of
//! `OnesLike`/`ZerosLike` in `fill.rs`; `term.rs`, `names.rs` and
//! `alpha.rs` hold what the passes share (blocks of `let`s, fresh names and
//! environments, equality up to the names of binders).
//!
//! ```
//! use gradlift_ad::simplify::{is_first_order, simplify, Options};
//! use gradlift_lang::parse_expr;
//! // A continuation applied to a zero and a seed; the zero was written in
//! // the text, so `0 + x` stays (it is not `x` when `x` is -0.0). Zeros
//! // that differentiation builds are structural and would go.
//! let term = parse_expr(
//!     "let Y = fun (a: R, z: R) -> (a + x * z, z * y) in Y(0, 1)",
//! ).unwrap();
//! let simple = simplify(&term, &Options::default()).unwrap();
//! assert_eq!(simple.to_string(), "(0.0 + x, y)");
//! assert!(is_first_order(&simple).is_ok());
//! ```

mod alpha;
mod cse;
mod dce;
mod demand;
mod fill;
mod merge;
mod names;
mod pe;
mod prune;
mod reuse;
mod rewrite;
mod rules;
mod split;
mod term;
mod verify;
mod zeros;

pub use dce::MAX_INLINE_HEIGHT;
pub use rules::{Rule, RuleInfo, Stats};
pub use verify::is_first_order;

use gradlift_lang::span::Spanned;
use gradlift_lang::{Expr, Span};
use thiserror::Error;

/// What simplification may assume.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Rewrite `0 * e ⇝ 0`, `0 + e ⇝ e` and their array forms for zeros
    /// the user wrote too, not only structural ones. This changes results
    /// where `e` is infinite or NaN (`0 * inf` is NaN) or a negative zero.
    pub algebraic: bool,
    /// Bind common subexpressions once.
    pub cse: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            algebraic: false,
            cse: true,
        }
    }
}

/// A term simplification cannot make first order, or that is not
/// well-typed.
#[derive(Debug, Clone, Error, PartialEq)]
pub enum SimplifyError {
    /// A function value is used as data: stored in an array, returned by
    /// a branch of `if`, or returned as the result.
    #[error("{message}")]
    HigherOrder {
        /// What.
        message: String,
        /// Where.
        span: Span,
    },
    /// The term is not well-typed.
    #[error("ill-typed term: {message}")]
    IllTyped {
        /// What.
        message: String,
        /// Where.
        span: Span,
    },
}

impl Spanned for SimplifyError {
    fn span(&self) -> Span {
        match self {
            SimplifyError::HigherOrder { span, .. } | SimplifyError::IllTyped { span, .. } => *span,
        }
    }
}

/// A pass of the simplifier.
#[derive(Clone, Copy, Debug)]
pub struct Pass {
    /// Its name.
    pub name: &'static str,
    /// What it does.
    pub description: &'static str,
}

/// The passes, in the order they run.
pub const PASSES: &[Pass] = &[
    Pass {
        name: "pe",
        description: "partial evaluation (§5.1) with the rewrites of Figure 12",
    },
    Pass {
        name: "cse",
        description: "common subexpressions bound once",
    },
    Pass {
        name: "dce",
        description: "dead lets dropped, values used once inlined",
    },
];

/// How many rounds of the passes run at most.
pub const MAX_ROUNDS: usize = 5;

/// Simplifies `e` (see the module documentation).
pub fn simplify(e: &Expr, opts: &Options) -> Result<Expr, SimplifyError> {
    simplify_with_stats(e, opts).map(|(e, _)| e)
}

/// [`simplify`] of the body of a function: the names it binds avoid
/// `reserved` too (its size variables, which its types mention even where
/// the term does not).
pub fn simplify_avoiding(
    e: &Expr,
    opts: &Options,
    reserved: &[gradlift_lang::Name],
) -> Result<Expr, SimplifyError> {
    run(e, opts, reserved).map(|(e, _)| e)
}

/// [`simplify`], also returning how often each rule fired.
pub fn simplify_with_stats(e: &Expr, opts: &Options) -> Result<(Expr, Stats), SimplifyError> {
    run(e, opts, &[])
}

fn run(
    e: &Expr,
    opts: &Options,
    reserved: &[gradlift_lang::Name],
) -> Result<(Expr, Stats), SimplifyError> {
    let mut stats = Stats::default();
    let (mut term, mut report) = round(e, opts, reserved, &mut stats, true)?;
    for k in 1..MAX_ROUNDS {
        if !report.exposed_arrays {
            break;
        }
        // Map splitting copies lambdas, whose names the next round's
        // partial evaluation makes fresh: not in the last round.
        let last = k + 1 == MAX_ROUNDS;
        let next;
        (next, report) = round(&term, opts, reserved, &mut stats, !last)?;
        // Partial evaluation binds every array term it builds and DCE
        // inlines them back, which reports arrays exposed at every
        // round: a round that changed nothing (up to the names of
        // binders) ends the rounds.
        let unchanged = alpha::Alpha::new(false).eq(&term, &next);
        term = next;
        if unchanged {
            break;
        }
    }
    Ok((term, stats))
}

/// One round: partial evaluation, CSE, DCE.
fn round(
    e: &Expr,
    opts: &Options,
    reserved: &[gradlift_lang::Name],
    stats: &mut Stats,
    splitting: bool,
) -> Result<(Expr, dce::Report), SimplifyError> {
    let (term, names) = pe::run(e, opts, reserved, stats)?;
    let (term, temps) = if opts.cse && cse::has_repeats(&term) {
        cse::run(term, names, stats)
    } else {
        (term, Default::default())
    };
    let (term, report) = dce::run(term, &temps, stats);
    // Dead components leave dead computations behind: DCE once more.
    // Sums moved into branches may meet zeros there: a round more.
    let (term, mut report) = match prune::run(term, stats) {
        (term, pruned) if pruned.changed => {
            let (term, again) = dce::run(term, &Default::default(), stats);
            (
                term,
                dce::Report {
                    exposed_arrays: report.exposed_arrays
                        || again.exposed_arrays
                        || pruned.moved_sums,
                },
            )
        }
        (term, _) => (term, report),
    };
    // Reals no result reads leave dead computations behind too.
    let term = match demand::run(term, stats) {
        (term, true) => dce::run(term, &Default::default(), stats).0,
        (term, false) => term,
    };
    let (term, reused) = reuse::run(term, stats);
    report.exposed_arrays |= reused;
    if splitting {
        // The merged bodies need the next round's CSE.
        let (term, merged) = merge::run(term, stats);
        report.exposed_arrays |= merged;
        let (term, split) = split::run(term, stats);
        // The copies need the next round (fresh names, fusion).
        report.exposed_arrays |= split;
        return Ok((term, report));
    }
    Ok((term, report))
}
