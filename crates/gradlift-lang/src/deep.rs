//! Stack safety for recursive walks over deep terms.
//!
//! Every recursive function over [`crate::syntax::Expr`] calls [`guard`]
//! on entry. When less than [`RED_ZONE`] bytes of native stack remain, the
//! closure runs on a fresh [`STACK_SEGMENT`]-byte segment allocated on the
//! heap (the technique rustc uses for its own deep recursion), so terms of any
//! depth are walked on a thread with the default 8 MiB stack, or the 2 MiB of
//! a spawned thread.

/// Below this much remaining stack a new segment is allocated.
pub const RED_ZONE: usize = 128 * 1024;
/// Size of each heap-allocated stack segment.
pub const STACK_SEGMENT: usize = 4 * 1024 * 1024;

/// Runs `f`, first moving to a new stack segment if the current one is
/// nearly exhausted.
#[inline]
pub fn guard<R>(f: impl FnOnce() -> R) -> R {
    stacker::maybe_grow(RED_ZONE, STACK_SEGMENT, f)
}
