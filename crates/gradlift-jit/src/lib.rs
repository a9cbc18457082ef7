//! Native code for gradlift programs with Cranelift.
//!
//! A first-order closed term ([`gradlift_lang::closed::Closed`]) is lowered
//! to Cranelift IR (`lower.rs`, `arrays.rs`, the primitive table in
//! `prims.rs`), compiled for the host by the JIT module, and called through
//! a safe API that checks shapes ([`Compiled::call`]) or through the raw
//! native ABI of [`abi`] (documented in `docs/abi.md`).
//!
//! ```
//! use gradlift_lang::{check_source, Value};
//! let checked = check_source("<doc>", "def dot(a: [R; n], b: [R; n]) -> R = reduce (+) 0 (map2 (*) a b)").unwrap();
//! let closed = gradlift_ad::inline::inline(&checked, 0);
//! let f = gradlift_jit::Jit::new().unwrap().compile(&closed).unwrap();
//! let v = f.call(&[Value::reals(&[1.0, 2.0]), Value::reals(&[3.0, 4.0])]).unwrap();
//! assert_eq!(v.as_real(), Some(11.0));
//! ```
#![warn(missing_docs)]

pub mod abi;
mod annotate;
mod arrays;
mod bind;
pub mod cache;
mod carried;
mod checkpoint;
mod disk;
mod eta;
mod guard;
mod horizontal;
mod jit;
mod layout;
mod lower;
mod prims;
mod runtime;
mod sizes;
mod split;
mod tape;
pub mod typed;
mod values;
mod workspace;

pub use abi::{RawFn, Status};
pub use cache::{CacheStats, DiskStats};
pub use jit::{Compiled, Jit, DEFAULT_MAX_WORKSPACE};
pub use runtime::split_calls;
pub use typed::Arg;
pub use workspace::WorkspaceBound;

/// Why a term could not be compiled.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum JitError {
    /// A construct the backend does not lower yet.
    #[error("the JIT does not support {0} yet")]
    Unsupported(String),
    /// The term breaks an invariant of its input (a bug upstream).
    #[error("malformed input to the JIT: {0}")]
    Internal(String),
    /// Cranelift rejected the function.
    #[error("code generation failed: {0}")]
    Codegen(String),
    /// Cranelift's verifier rejected the generated IR (a bug here).
    #[error("the generated IR does not verify: {0}")]
    Verifier(String),
}

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CallError {
    /// The arguments do not fit the parameters.
    #[error("{0}")]
    Arguments(String),
    /// The code stopped with an error status.
    #[error("{}", .0.describe())]
    Status(Status),
    /// The code needs more workspace than the limit ([`Jit::max_workspace`]).
    #[error(
        "the native code needs at least {} of workspace for this call, more than its limit of {}",
        bytes_text(*.needed), bytes_text(*.limit)
    )]
    WorkspaceLimit {
        /// The bytes the call needs at least.
        needed: u64,
        /// The limit, in bytes.
        limit: u64,
    },
    /// The result takes more memory than the limit ([`Jit::max_workspace`]).
    #[error(
        "the result of this call takes {}, more than the limit of {} on the memory a call allocates",
        bytes_text(*.needed), bytes_text(*.limit)
    )]
    OutputLimit {
        /// The bytes of the result.
        needed: u64,
        /// The limit, in bytes.
        limit: u64,
    },
    /// The allocator refused memory within the limit.
    #[error("the system could not allocate {} for this call", bytes_text(*.bytes))]
    OutOfMemory {
        /// The bytes asked for.
        bytes: u64,
    },
}

impl CallError {
    /// Whether a limit of [`Jit::max_workspace`] stopped the call (raising
    /// it lets the call run).
    pub fn is_limit(&self) -> bool {
        matches!(
            self,
            CallError::WorkspaceLimit { .. } | CallError::OutputLimit { .. }
        )
    }
}

/// A number of bytes for people: `4 GiB`, `1.5 MiB`, `4800000000 bytes (4.5 GiB)`.
pub fn bytes_text(bytes: u64) -> String {
    const UNITS: [(&str, u64); 4] = [
        ("TiB", 1 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ];
    for (unit, size) in UNITS {
        if bytes >= size {
            return if bytes.is_multiple_of(size) {
                format!("{} {unit}", bytes / size)
            } else {
                format!("{bytes} bytes ({:.1} {unit})", bytes as f64 / size as f64)
            };
        }
    }
    format!("{bytes} bytes")
}
