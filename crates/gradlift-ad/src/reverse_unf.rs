//! Reverse mode on UNF, D_ρ (Figure 8): Source UNF → Target UNF.
//!
//! ```text
//! D_ρ(A₁,…,A_k) = A₁,…,A_k, (A₁×…×A_k) → ρ
//! D_ρ(P)        = F(P, Jᵀ P)      for every primitive P
//! D_ρ(e₁; e₂)   = D_ρ(e₁) ; D_ρ(e₂)
//! ```
//!
//! On the stack `(s, Y)` — the primal values `s : T` and a continuation
//! `Y : T̲ → ρ` — `F(P, Jᵀ P)` runs the primal step and precomposes the
//! continuation with P's transposed Jacobian taken at the primal input:
//! `(P(s), c ↦ Y(Jᵀ P|ₛ(c)))`. Target UNF (Figure 7) is therefore the
//! sequence of the primitives, each paired with its transpose; what a
//! transpose computes is given by UNF⁻¹ (Figure 10, `unf_inverse.rs`), whose
//! rules for the array primitives are those of `rules/`.
//!
//! By Lemma 4.3 the result types as `A₁,…,A_k, (A₁×…×A_k → ρ) ⊢ D_ρ(e) :
//! B₁,…,B_m, (B₁×…×B_m → ρ)`: the continuation's domain follows the stack.

use crate::unf::{parse_unf_with, Unf, UnfParseError, UnfPrim};
use std::fmt;

/// A Target UNF term: `F(P₁, Jᵀ P₁); …; F(P_n, Jᵀ P_n)`.
#[derive(Clone, Debug)]
pub struct TargetUnf {
    /// The Source UNF term it was derived from (its context, size
    /// variables and primitives).
    pub source: Unf,
}

impl TargetUnf {
    /// The primitives `P` of the `F(P, Jᵀ P)` items, in order.
    pub fn prims(&self) -> &[UnfPrim] {
        &self.source.prims
    }
}

/// D_ρ of Figure 8.
pub fn reverse_unf(e: Unf) -> TargetUnf {
    TargetUnf { source: e }
}

/// Written as the Source UNF term with every primitive `P` prefixed by
/// `F `, which stands for `F(P, Jᵀ P)`; [`parse_target_unf`] reads it back.
impl fmt::Display for TargetUnf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "# F P stands for F(P, Jᵀ P) (Figure 8)")?;
        self.source.write_with(f, "F ")
    }
}

/// Reads the text form of a Target UNF term back.
pub fn parse_target_unf(text: &str) -> Result<TargetUnf, UnfParseError> {
    Ok(reverse_unf(parse_unf_with(text, "F ")?))
}
