//! Every threshold of the simplifier, in one place, with the decision it
//! governs. Each bounds the size of something a pass copies or searches, so
//! that simplification stays near-linear in the size of the term and a copy
//! never costs more than what it saves; none is tuned to one program.
//! (The native backend's own are listed in `gradlift-jit`'s `arrays/mod.rs`.)

/// The limits ([`LIMITS`]).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Rounds of the simplifier's passes at most (`MAX_ROUNDS`). Every
    /// gradient of the shipped examples, GradBench modules and benchmark
    /// programs stops before it, because a round changed nothing (at most
    /// 7 rounds: a fold merged in one round has the components no result
    /// reads dropped by `demand` in the next and the fold they leave
    /// unchanged removed by `pe` in the one after).
    pub rounds: usize,
    /// `dce`: the deepest value inlined into its single use (deeper ones
    /// stay bound, so that inlining never builds a term deeper than this
    /// times the original).
    pub inline_height: u32,
    /// `remat` (store or recompute, read by `inline-cheap-map`,
    /// `derived-component` and `rebuilt-component`): the price of storing
    /// a real and reading it back, in the cost model's operations (ADDS +
    /// MULTS + NLOPS); an element of cheap primitives within it is
    /// recomputed where it is read rather than stored.
    pub recompute_ops: u32,
    /// `dce` (`inline-iota`): the most nodes in the body of a map of a
    /// range that is substituted at its uses.
    pub range_map_nodes: u32,
    /// `pe` (`map2-arg-fusion`, `zero-split`): the most nodes of a function
    /// evaluated twice, once per branch.
    pub split_nodes: usize,
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
    rounds: 8,
    inline_height: 10,
    recompute_ops: 2,
    range_map_nodes: 12,
    split_nodes: 64,
    merge_lookahead: 64,
    demand_work_per_node: 16,
    demand_min_work: 100_000,
};
