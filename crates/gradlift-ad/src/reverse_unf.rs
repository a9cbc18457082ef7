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

use crate::unf::{Unf, UnfPrim};
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

impl fmt::Display for TargetUnf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("# context:")?;
        for (n, t) in &self.source.context {
            write!(f, " {n}: {t}")?;
        }
        f.write_str(", Y: (context) -> ρ\n")?;
        for (i, p) in self.source.prims.iter().enumerate() {
            if i > 0 {
                f.write_str(";\n")?;
            }
            write!(f, "F({p}, Jᵀ {p})")?;
        }
        f.write_str("\n")
    }
}
