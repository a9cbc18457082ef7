//! Store or recompute: the one decision the simplifier makes about an
//! array whose elements later loops read.
//!
//! An array that a map computes can be *stored* — each element written
//! once and read back at every use — or *recomputed*: each reader computes
//! the element itself from the map's operands, which it reads instead, and
//! the array is never written. Three rewrites ask this question and all
//! three ask [`Recompute`]:
//!
//! | rule | pass | the array |
//! | --- | --- | --- |
//! | `inline-cheap-map` | `dce` | `let P = map (x. e) V`, substituted at every use |
//! | `derived-component` | `split` | a component of a map's tuple that is a function of another component |
//! | `rebuilt-component` | `split` | an array component `map (a. e) W` of a map's tuple, stored as `e`'s reals |
//!
//! The answer comes from the cost model's tables: an element is recomputed
//! when every primitive in it is `cheap` in the primitive table (an
//! instruction or a short branch-free sequence; a library call, or an
//! inline `exp` with its table lookup, is never repeated), and their work
//! — ADDS + MULTS + NLOPS of the table's `cost` column (Figure 11), at
//! least one per primitive — is at most [`LIMITS`]`.recompute_ops`, the
//! price of storing a real: 8 bytes written and 8 bytes read back (the
//! traffic `cost.rs` counts for the stored array), one store and one load,
//! priced as two operations. The price is a setting, the one the rules
//! had before they shared it, not a measurement. Projections and tuples are moves,
//! not work: a map that only regroups components (`map (g. (g.0.0,
//! g.0.1)) P`) is always recomputed. Recomputing costs nothing in
//! accuracy: the reader computes the same operations on the same operands
//! and gets the same bits.
//!
//! Not this decision: `inline-iota` (`dce`) substitutes a map of an index
//! range, which reads no array at all, at its uses — a question of code
//! size, bounded by `range_map_nodes`; `fold-reads-map` (`reuse`) reads a
//! map that is stored anyway rather than recompute it; the native
//! backend's speculation of both sides of an `if` reads the same `cheap`
//! column.

use super::limits::LIMITS;
use gradlift_lang::Prim;

/// The budget of one element: how much more work recomputing it may take.
#[derive(Clone, Copy, Debug)]
pub(super) struct Recompute {
    left: u32,
}

impl Recompute {
    /// The budget of one element of a stored array.
    pub(super) fn element() -> Recompute {
        Recompute {
            left: LIMITS.recompute_ops,
        }
    }

    /// Spends the work of one application of `p`; whether it fits (a
    /// primitive that is not `cheap` never does).
    pub(super) fn spend(&mut self, p: Prim) -> bool {
        let info = p.info();
        let w = work(p);
        if !info.cheap || w > self.left {
            return false;
        }
        self.left -= w;
        true
    }
}

/// The work of `p` in the cost model: its additions, multiplications and
/// non-linear operations (Figure 11), and at least one.
fn work(p: Prim) -> u32 {
    let [_moves, adds, mults, nlops] = p.info().cost.map(u32::from);
    (adds + mults + nlops).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_fits_twice_and_a_library_call_never() {
        let mut b = Recompute::element();
        assert!(b.spend(Prim::Mul) && b.spend(Prim::Neg));
        assert!(
            !b.spend(Prim::Add),
            "a third operation costs more than the store"
        );
        assert!(!Recompute::element().spend(Prim::Sin));
        assert!(!Recompute::element().spend(Prim::Exp));
        assert!(Recompute::element().spend(Prim::Sqrt));
    }
}
