//! Differentiation of gradlift programs: the purely functional reverse mode
//! of Huot & Shaikhha, by the UNF route and the direct route, followed by
//! partial evaluation and the simplifications of Figure 12.
#![warn(missing_docs)]

pub mod adjoint;
pub mod cost;
pub mod derivatives;
pub mod direct;
pub mod forward;
pub mod inline;
pub use gradlift_lang::names;
pub mod pipeline;
pub mod reverse_unf;
pub mod reversed_loops;
mod rules;
pub mod simplify;
pub mod unf;
pub mod unf_inverse;
