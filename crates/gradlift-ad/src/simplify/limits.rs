//! Every threshold of the simplifier, in one place, with the decision it
//! governs. Each bounds the size of something a pass copies or searches, so
//! that simplification stays near-linear in the size of the term and a copy
//! never costs more than what it saves; none is tuned to one program.
//! (The native backend's own are listed in `gradlift-jit`'s `arrays/mod.rs`.)

/// The limits ([`LIMITS`]).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Rounds of the simplifier's passes at most (`MAX_ROUNDS`).
    pub rounds: usize,
    /// `dce`: the deepest value inlined into its single use (deeper ones
    /// stay bound, so that inlining never builds a term deeper than this
    /// times the original).
    pub inline_height: u32,
    /// `dce` (`inline-cheap-map`): the most arithmetic operations in the
    /// body of a map of a variable that is substituted at each use rather
    /// than stored (recomputing it costs no more than reading it).
    pub cheap_map_ops: u32,
    /// `dce` (`inline-iota`): the most nodes in the body of a map of a
    /// range that is substituted at its uses.
    pub range_map_nodes: u32,
    /// `pe` (`map2-arg-fusion`, `zero-split`): the most nodes of a function
    /// evaluated twice, once per branch.
    pub split_nodes: usize,
    /// `split` (`derived-component`): the most primitive operations in a
    /// component recomputed from another rather than stored.
    pub derived_ops: u32,
    /// `merge`: how many bindings after a map are searched for maps to
    /// merge into it.
    pub merge_lookahead: usize,
    /// `demand`: the analysis gives up (and changes nothing) after this
    /// many visits per node of the term (a loop's step is visited once per
    /// round of its fixed point) …
    pub demand_work_per_node: usize,
    /// … or this many visits, if more.
    pub demand_min_work: usize,
}

/// The limits every pass reads.
pub const LIMITS: Limits = Limits {
    rounds: 5,
    inline_height: 10,
    cheap_map_ops: 2,
    range_map_nodes: 12,
    split_nodes: 64,
    derived_ops: 2,
    merge_lookahead: 64,
    demand_work_per_node: 16,
    demand_min_work: 100_000,
};
