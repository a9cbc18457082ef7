//! Loops split across the `Jit`'s thread pool.
//!
//! A loop computed in pairs (`arrays/pairs.rs`) at the top of a function —
//! a `map`/`map2` of reals with no fold riding along, or a `reduce` in
//! lanes of a pair source longer than one chunk — runs as chunks of
//! `gradlift_lang::reduce_order::CHUNK` elements: its body is a second
//! Cranelift function, a *kernel* `kernel(env, c) -> f64` that computes
//! chunk `c` (a map's elements, or a reduce chunk's result), reading the
//! values the loop uses from before it (array addresses and lengths,
//! reals) from `env`, a stack slot of the calling function. The runtime's
//! `gradlift_split` runs the chunks — on the pool from
//! [`PARALLEL_CHUNKS`] chunks on, in turn on the calling thread below —
//! and combines a reduce's results from the left. The loop's code exists
//! once, in the kernel. Loops of a constant length below
//! [`PARALLEL_MIN`], loops inside loops, and every loop when the pool has
//! one thread or the code is an object file (no runtime) or printed
//! (`emit --stage clif`), run in the function itself.
//!
//! ## The contract: the bits do not depend on the threads
//!
//! The chunks are fixed by the length alone, never by the thread count:
//! a map's elements are computed each by the same operations wherever
//! they are computed, and a reduce's chunks are those of
//! `gradlift_lang::reduce_order` — the kernel runs the chunk code the
//! function itself runs (`Translator::chunk_in_lanes`), and the chunks'
//! results are combined from the left, in chunk order, by the same
//! primitive ([`Combine`]). So a function gives the same bits on 1, 2 or
//! 8 threads, and the interpreter's. A kernel's loop reads only pair
//! sources through pair terms, which cannot fail, so no chunk can stop
//! the call, and chunks write disjoint parts of a map's result.

use crate::lower::Translator;
use crate::JitError;
use cranelift_codegen::ir::{FuncRef, Function, Value};
use gradlift_lang::Prim;

/// The fewest chunks run on the pool's threads: 8, 114,689 elements or
/// more. Fewer run in turn on the calling thread: handing chunks to the
/// pool and waiting for them (10–20 µs on the 2-core machine of
/// docs/benchmarks.md, "Loops split across threads") costs more than a
/// cheap loop (a sum) of fewer chunks saves; `lse`'s loops of `exp`
/// would gain from two chunks on.
pub(crate) const PARALLEL_CHUNKS: i64 = 8;

/// The shortest length that has [`PARALLEL_CHUNKS`] chunks, below which a
/// loop of a constant length is not made a kernel at all.
pub(crate) const PARALLEL_MIN: i64 =
    (PARALLEL_CHUNKS - 1) * gradlift_lang::reduce_order::CHUNK as i64 + 1;

/// Defines kernel functions in the module the calling function goes into.
pub(crate) trait KernelSink {
    /// Defines `kernel(env: i64, c: i64) -> f64`, whose body `body` emits
    /// given a translator of the kernel and the values `env` and `c`
    /// (returning the kernel's result), and imports it into `parent`.
    fn define(
        &mut self,
        parent: &mut Function,
        body: &mut dyn FnMut(&mut Translator<'_, '_>, Value, Value) -> Result<Value, JitError>,
    ) -> Result<FuncRef, JitError>;
}

/// How `gradlift_split` combines the results of a split `reduce`'s
/// chunks: the lane primitive's own operation, exactly as the generated
/// code and the interpreter apply it (`min` and `max` keep the first
/// argument on a tie or a NaN).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Combine {
    Add = 1,
    Mul = 2,
    Max = 3,
    Min = 4,
}

impl Combine {
    /// The combination of a lane primitive.
    pub(crate) fn of(p: Prim) -> Option<Combine> {
        match p {
            Prim::Add => Some(Combine::Add),
            Prim::Mul => Some(Combine::Mul),
            Prim::Max => Some(Combine::Max),
            Prim::Min => Some(Combine::Min),
            _ => None,
        }
    }

    /// From its code (0, a map's, is none).
    pub(crate) fn from_code(code: i64) -> Option<Combine> {
        [Combine::Add, Combine::Mul, Combine::Max, Combine::Min]
            .into_iter()
            .find(|c| *c as i64 == code)
    }

    /// `a op b`.
    pub(crate) fn apply(self, a: f64, b: f64) -> f64 {
        match self {
            Combine::Add => a + b,
            Combine::Mul => a * b,
            Combine::Max => {
                if b > a {
                    b
                } else {
                    a
                }
            }
            Combine::Min => {
                if b < a {
                    b
                } else {
                    a
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combinations_are_the_primitives() {
        for p in [Prim::Add, Prim::Mul, Prim::Max, Prim::Min] {
            let c = Combine::of(p).unwrap();
            assert_eq!(Combine::from_code(c as i64), Some(c));
            for (a, b) in [
                (1.5, -2.0),
                (0.0, -0.0),
                (-0.0, 0.0),
                (f64::NAN, 1.0),
                (1.0, f64::NAN),
                (f64::INFINITY, 3.0),
            ] {
                let want = p.eval_real(&[a, b]);
                assert_eq!(c.apply(a, b).to_bits(), want.to_bits(), "{p} {a} {b}");
            }
        }
        assert_eq!(Combine::from_code(0), None);
    }
}
