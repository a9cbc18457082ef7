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
//! The passes are a list of values ([`PASSES`]), run in order, each when
//! its condition holds, as one round; rounds repeat while a pass exposes
//! work for another (an array computation inlined into its use can expose a
//! fusion or an array rule), until a round changes nothing (up to the names
//! of binders) or [`MAX_ROUNDS`]; [`Report::stop`] says which (egg's runner
//! is the model). A round is `pe` (partial evaluation by normalization by
//! evaluation: β-reduction, inlining of continuations, forward
//! substitution, tuple splitting, let normalisation, conditionals, and the
//! algebraic and array rules applied to each node as it is built), `cse`,
//! `dce`, then the passes that rewrite tuple-valued bindings and the arrays
//! of tuples of partial derivatives: `prune` (sums moved into branches,
//! constant components; DCE again when it changed something), `demand`
//! (the one liveness analysis: dead components, dead elements' components,
//! reals no result reads; DCE again), `reuse` (folds reading stored maps), and, but
//! in the last round, `merge` (sibling maps merged into a stored one),
//! `split` (derived components, map splitting), then `products` (the
//! transposes a matrix product reads put in its operands, where the kernel
//! reads them in place) and, but in the last round, `fold-merge` (the folds
//! of a block over one array merged, for the next round's CSE to share
//! their steps). The passes from `reuse` on rewrite array operations and
//! matrix products only: a round whose term has neither ([`Features`], one
//! walk at its start) skips them. Afterwards
//! [`is_first_order`] checks Lemma 5.3. The pipeline verifies the term
//! after every pass in debug builds ([`Check`]).
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
//!     "let Y = fun (a: R, z: R) -> (a + x * z, z * y) in Y(0.0, 1.0)",
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
mod fold_merge;
pub mod limits;
mod merge;
mod names;
mod pe;
mod products;
mod prune;
mod remat;
mod reuse;
mod rewrite;
mod rules;
mod split;
mod tails;
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

/// A pass of the simplifier: one member of the fixpoint group the
/// pipeline's `opt` stage runs (`PASSES`, in order, every round).
pub struct Pass {
    /// Its name (a stage of `gradlift emit`: the term after this pass in
    /// the first round).
    pub name: &'static str,
    /// What it does.
    pub description: &'static str,
    /// What of the paper it implements, or "not in the paper".
    pub implements: &'static str,
    run: fn(Expr, &mut Round<'_>) -> Result<Expr, SimplifyError>,
    when: fn(&Round<'_>) -> bool,
}

/// The state of one round, which the passes share.
struct Round<'a> {
    opts: &'a Options,
    reserved: &'a [gradlift_lang::Name],
    stats: &'a mut Stats,
    /// The names partial evaluation handed out, for CSE's temporaries.
    names: Option<names::Names>,
    /// CSE's temporaries: DCE inlines them without counting a rewrite.
    temps: names::FxSet<gradlift_lang::Name>,
    /// A pass exposed work for the next round (an array computation
    /// inlined into its use, a sum moved into branches, …).
    exposed: bool,
    /// `prune` changed the term: dead computations to drop.
    pruned: bool,
    /// `demand` removed a component or zeroed an unread real: dead
    /// computations to drop.
    demanded: bool,
    /// Not the last round: `merge` and `split` run.
    splitting: bool,
    /// What the round's input holds.
    features: Features,
}

/// The kinds of construct a term holds that some passes rewrite and
/// nothing else makes: a pass that rewrites only array operations skips a
/// term without any, and one that rewrites only matrix products a term
/// without a product. No pass introduces either kind into a term without
/// it (they rewrite loops and products that are there), so what a round's
/// input lacks, every pass of the round may assume is lacking.
#[derive(Clone, Copy, Debug, Default)]
struct Features {
    /// A `map`, `map2`, `reduce`, fold or scan.
    loops: bool,
    /// A `matmul` or a `transpose`.
    products: bool,
}

impl Features {
    /// One walk of `e` (with a stack of its own: a chain of a million
    /// `let`s is a million levels deep), stopping when both are found.
    fn of(e: &Expr) -> Features {
        use gradlift_lang::syntax::{Builtin, ExprKind};
        let mut found = Features::default();
        let mut stack = vec![e];
        while let Some(e) = stack.pop() {
            match &e.kind {
                ExprKind::ArrayOp(..) => found.loops = true,
                ExprKind::Builtin(Builtin::MatMul | Builtin::Transpose, _) => found.products = true,
                _ => {}
            }
            if found.loops && found.products {
                break;
            }
            term::for_each_child(e, &mut |c| stack.push(c));
        }
        found
    }
}

/// Every pass of a round, in order.
pub const PASSES: &[Pass] = &[
    Pass {
        name: "pe",
        description: "partial evaluation: β-reduction, forward substitution, tuple splitting, let normalisation, the rewrites of rules.rs on each node built",
        implements: "§5.1 and Figure 12",
        run: |e, r| {
            let (term, names) = pe::run(&e, r.opts, r.reserved, r.stats)?;
            r.names = Some(names);
            r.temps = Default::default();
            Ok(term)
        },
        when: |_| true,
    },
    Pass {
        name: "cse",
        description: "common subexpressions bound once (value numbering up to α)",
        implements: "not in the paper",
        run: |e, r| {
            let names = r.names.take().expect("partial evaluation ran first");
            if !cse::has_repeats(&e) {
                return Ok(e);
            }
            let (term, temps) = cse::run(e, names, r.stats);
            r.temps = temps;
            Ok(term)
        },
        when: |r| r.opts.cse,
    },
    Pass {
        name: "dce",
        description: "dead lets dropped, values used once inlined",
        implements: "§5.1 (let x = e₁ in e₂ ⇝ e₂ when x is dead)",
        run: |e, r| {
            let (term, report) = dce::run(e, &r.temps, r.stats);
            r.exposed |= report.exposed_arrays;
            Ok(term)
        },
        when: |_| true,
    },
    Pass {
        name: "prune",
        description: "sums of cotangents moved into the branches that build them, constant components read as constants (sum-into-branches, const-component)",
        implements: "not in the paper",
        run: |e, r| {
            let (term, pruned) = prune::run(e, r.stats);
            r.pruned = pruned.changed;
            r.exposed |= pruned.moved_sums;
            Ok(term)
        },
        when: |_| true,
    },
    Pass {
        name: "prune-dce",
        description: "the computations pruning left dead, dropped",
        implements: "§5.1",
        run: |e, r| {
            let (term, report) = dce::run(e, &Default::default(), r.stats);
            r.exposed |= report.exposed_arrays;
            Ok(term)
        },
        when: |r| r.pruned,
    },
    Pass {
        name: "demand",
        description: "the parts of values no result reads, by one backward analysis through components, elements and loop accumulators: dead components of tuple bindings and of maps written in place removed, other reals not computed (dead-component, dead-element-component, dead-leaf)",
        implements: "not in the paper",
        run: |e, r| {
            let (term, changed) = demand::run(e, r.stats);
            r.demanded = changed;
            Ok(term)
        },
        when: |_| true,
    },
    Pass {
        name: "demand-dce",
        description: "the computations the demand analysis left dead, dropped",
        implements: "§5.1",
        run: |e, r| Ok(dce::run(e, &Default::default(), r.stats).0),
        when: |r| r.demanded,
    },
    Pass {
        name: "reuse",
        description: "a fold that recomputes the elements of a stored map reads them (fold-reads-map)",
        implements: "not in the paper",
        run: |e, r| {
            let (term, reused) = reuse::run(e, r.stats);
            r.exposed |= reused;
            Ok(term)
        },
        when: |r| r.features.loops,
    },
    Pass {
        name: "merge",
        description: "a map over the arrays of a stored map of tuples becomes a component of it (map-merge)",
        implements: "not in the paper",
        run: |e, r| {
            let (term, merged) = merge::run(e, r.stats);
            r.exposed |= merged;
            Ok(term)
        },
        when: |r| r.splitting && r.features.loops,
    },
    Pass {
        name: "split",
        description: "derived and rebuilt components, maps split for the folds that read them (map-split)",
        implements: "not in the paper",
        run: |e, r| {
            let (term, split) = split::run(e, r.stats);
            r.exposed |= split;
            Ok(term)
        },
        when: |r| r.splitting && r.features.loops,
    },
    Pass {
        name: "products",
        description: "the transposes a matrix product reads put in its operands, where the kernel reads them without the program building them (product-operand), and transposes of transposes cancelled (transpose-twice)",
        implements: "not in the paper",
        run: |e, r| {
            let (term, changed) = products::run(e, r.stats);
            r.exposed |= changed;
            Ok(term)
        },
        when: |r| r.features.products,
    },
    Pass {
        name: "fold-merge",
        description: "the folds of a block over the same array merged into one of the tuple of their accumulators, for CSE to share their steps' work (fold-merge)",
        implements: "not in the paper",
        run: |e, r| {
            let (term, merged) = fold_merge::run(e, r.stats);
            r.exposed |= merged;
            Ok(term)
        },
        when: |r| r.splitting && r.features.loops,
    },
];

/// How many rounds of the passes run at most.
pub const MAX_ROUNDS: usize = limits::LIMITS.rounds;

/// Why the rounds stopped (egg's runner reports the same way).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// No pass exposed work for another round.
    Settled,
    /// A round left the term as it was, up to the names of binders.
    Saturated,
    /// [`MAX_ROUNDS`] rounds ran.
    RoundLimit,
    /// The pass whose output was asked for ran (`emit --stage`).
    Asked,
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Stop::Settled => "no pass exposed more work",
            Stop::Saturated => "a round changed nothing",
            Stop::RoundLimit => "the round limit",
            Stop::Asked => "the stage asked for",
        })
    }
}

/// What a run of the simplifier did.
#[derive(Clone, Debug)]
pub struct Report {
    /// How often each rule fired.
    pub stats: Stats,
    /// Rounds run.
    pub rounds: usize,
    /// Why it stopped.
    pub stop: Stop,
    /// Time in each pass, over all rounds, and how often it ran, in the
    /// order of [`PASSES`].
    pub times: Vec<(&'static str, std::time::Duration, usize)>,
}

/// How a term is checked after each pass (debug builds): it must have type
/// `ty` over `context` and `size_vars`, and, where the pass promises it,
/// distinct binders.
pub struct Check<'a> {
    /// The free variables and their types.
    pub context: &'a [(gradlift_lang::Name, gradlift_lang::Type)],
    /// The size variables.
    pub size_vars: &'a [gradlift_lang::Name],
    /// The term's type.
    pub ty: &'a gradlift_lang::Type,
}

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
    run(e.clone(), opts, reserved, None, None).map(|(e, _)| e)
}

/// [`simplify`], also returning how often each rule fired.
pub fn simplify_with_stats(e: &Expr, opts: &Options) -> Result<(Expr, Stats), SimplifyError> {
    run(e.clone(), opts, &[], None, None).map(|(e, r)| (e, r.stats))
}

/// The rounds: every pass of [`PASSES`] whose condition holds, in order,
/// until no pass exposes more work, a round changes nothing, or
/// [`MAX_ROUNDS`]. With `stop_after`, returns the term after that pass in
/// the first round. With `check`, each pass's output is verified
/// ([`crate::pipeline::verify_term`]) and a failure panics naming the pass.
/// Takes the term by value: the rounds rewrite it in place of a copy.
pub fn run(
    e: Expr,
    opts: &Options,
    reserved: &[gradlift_lang::Name],
    check: Option<&Check<'_>>,
    stop_after: Option<&str>,
) -> Result<(Expr, Report), SimplifyError> {
    let mut stats = Stats::default();
    let mut times: Vec<(&'static str, std::time::Duration, usize)> = PASSES
        .iter()
        .map(|p| (p.name, Default::default(), 0))
        .collect();
    let mut term = e;
    let mut stop = Stop::RoundLimit;
    let mut rounds = 0;
    for k in 0..MAX_ROUNDS {
        rounds = k + 1;
        let before = (k > 0).then(|| term.clone());
        let mut round = Round {
            opts,
            reserved,
            stats: &mut stats,
            names: None,
            temps: Default::default(),
            exposed: false,
            pruned: false,
            demanded: false,
            // Map splitting copies lambdas, whose names the next round's
            // partial evaluation makes fresh: not in the last round.
            splitting: k + 1 < MAX_ROUNDS,
            features: Features::of(&term),
        };
        for (i, pass) in PASSES.iter().enumerate() {
            if !(pass.when)(&round) {
                continue;
            }
            let start = std::time::Instant::now();
            term = (pass.run)(term, &mut round)?;
            times[i].1 += start.elapsed();
            times[i].2 += 1;
            if let Some(check) = check {
                if let Err(e) = crate::pipeline::verify_term(
                    check.context,
                    check.size_vars,
                    &term,
                    check.ty,
                    true,
                ) {
                    panic!(
                        "the simplifier's pass `{}` (round {rounds}) broke the term: {e}\n{term}",
                        pass.name
                    );
                }
            }
            if k == 0 && stop_after == Some(pass.name) {
                return Ok((
                    term,
                    Report {
                        stats,
                        rounds,
                        stop: Stop::Asked,
                        times,
                    },
                ));
            }
        }
        let exposed = round.exposed;
        // Partial evaluation binds every array term it builds and DCE
        // inlines them back, which reports arrays exposed at every round:
        // a round that changed nothing (up to the names of binders) ends
        // the rounds.
        if before.is_some_and(|b| alpha::Alpha::new(false).eq(&b, &term)) {
            stop = Stop::Saturated;
            break;
        }
        if !exposed {
            stop = Stop::Settled;
            break;
        }
    }
    Ok((
        term,
        Report {
            stats,
            rounds,
            stop,
            times,
        },
    ))
}
