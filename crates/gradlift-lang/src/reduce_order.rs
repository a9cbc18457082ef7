//! The order in which `reduce` combines its elements: one decision, read
//! by every engine that evaluates a `reduce` (the interpreter and the
//! native code), so that they agree bit for bit.
//!
//! `reduce F z A` requires `F` associative with unit `z` (docs/language.md
//! §4), so any grouping is legal. For a `reduce` of reals whose operator is
//! one of the commutative primitives of [`lane_identity`] — `(+)`, `(*)`,
//! `max`, `min`, written as the primitive or as `(a, b. a op b)` — the
//! grouping is fixed as [`LANES`] interleaved lanes, so that the additions
//! of a sum do not wait on each other:
//!
//! ```text
//! for each chunk C of A (CHUNK = 2^14 elements, the last one shorter; one
//! empty chunk when A is empty), of m elements:
//!   l[j] = e                            for j in 0..4   (e: the operator's identity)
//!   l[j] = l[j] op C[4b + j]            for each block b in 0..m/4, j in 0..4
//!   t    = e op C[i]…                   the left fold of the last m mod 4 elements from e
//!   r_C  = ((l0 op l2) op (l1 op l3)) op t
//! result = z op (((r_0 op r_1) op r_2) …)   the chunks' results from the left
//! ```
//!
//! The chunks are fixed by the length alone, so that the chunks of a long
//! array may be combined on several threads (`gradlift-jit`'s thread pool)
//! with the bits of one: an array of at most `CHUNK` elements is one
//! chunk, `result = z op r_0`.
//!
//! The identity is exact (`-0.0` for `+`, so that a sum of `+0.0`s stays
//! `+0.0`; `1` for `*`; `-inf` for `max`; `inf` for `min`), so every lane
//! holds exactly the combination of its elements (as does `t`), and an
//! empty array gives `z op e = z`. The elements are read once each, in increasing order. The
//! tree combines the lanes as two-lane vectors `[l0, l1]` and `[l2, l3]`
//! would: the two vectors, then the two halves.
//!
//! Four lanes, not more: the native loop holds each lane and both operands
//! of each element in registers (x86-64 has 16 for reals), and the
//! additions of a lane then follow each other at the latency of one.
//!
//! Every other `reduce` — of integers, of tuples or arrays, or with
//! another operator — is the left fold `foldl F z A`.

use crate::prim::Prim;
use crate::syntax::{Expr, ExprKind, Param, Pattern};

/// How many lanes a `reduce` of reals combines its elements in.
pub const LANES: usize = 4;

/// How many elements a chunk of a `reduce` in lanes holds (a power of
/// two, a multiple of [`LANES`]): 2¹⁴ reals, 128 KiB.
pub const CHUNK: usize = 1 << 14;

/// The identity of a primitive that a `reduce` of reals runs in lanes, or
/// `None` for the primitives that it folds from the left.
pub fn lane_identity(p: Prim) -> Option<f64> {
    match p {
        Prim::Add => Some(-0.0),
        Prim::Mul => Some(1.0),
        Prim::Max => Some(f64::NEG_INFINITY),
        Prim::Min => Some(f64::INFINITY),
        _ => None,
    }
}

/// The primitive of a `reduce`'s function when it is one that runs in
/// lanes: `(+)` as written, or `(a, b. a + b)`. (Whether the accumulator
/// is a real is the caller's to check: the same primitives also apply to
/// integers, which are folded from the left.)
pub fn lane_prim(f: &Expr) -> Option<Prim> {
    match &f.kind {
        ExprKind::PrimFn(p) => lane_identity(*p).map(|_| *p),
        ExprKind::Lambda(params, body) => lane_lambda(params, body),
        _ => None,
    }
}

/// [`lane_prim`] of the lambda `(params. body)`: `(a, b. a op b)`.
pub fn lane_lambda(params: &[Param], body: &Expr) -> Option<Prim> {
    let [pa, pb] = params else {
        return None;
    };
    let (Pattern::Var(a, _), Pattern::Var(b, _)) = (&pa.pat, &pb.pat) else {
        return None;
    };
    let ExprKind::Prim(p, args) = &body.kind else {
        return None;
    };
    match args.as_slice() {
        [x, y] if is_var(x, a) && is_var(y, b) => lane_identity(*p).map(|_| *p),
        _ => None,
    }
}

fn is_var(e: &Expr, name: &crate::Name) -> bool {
    matches!(&e.kind, ExprKind::Var(x) if x == name)
}

/// `reduce op z A` in the order of the module doc, for `n` elements read
/// by `element` (each once, in increasing order) and combined by `op`.
pub fn reduce_in_lanes<E>(
    identity: f64,
    z: f64,
    n: usize,
    mut element: impl FnMut(usize) -> Result<f64, E>,
    mut op: impl FnMut(f64, f64) -> Result<f64, E>,
) -> Result<f64, E> {
    let mut s = None;
    for c in 0..chunks(n) {
        let start = c * CHUNK;
        let len = CHUNK.min(n - start);
        let r = chunk_in_lanes(identity, len, |i| element(start + i), &mut op)?;
        s = Some(match s {
            None => r,
            Some(s) => op(s, r)?,
        });
    }
    op(z, s.expect("at least one chunk"))
}

/// How many chunks a `reduce` of `n` elements in lanes has: `n / CHUNK`
/// rounded up, and one (empty) for `n = 0`.
pub fn chunks(n: usize) -> usize {
    n.div_ceil(CHUNK).max(1)
}

/// The combination of one chunk's `n` elements, read by `element`, in
/// lanes from the identity: `((l0 op l2) op (l1 op l3)) op t`.
pub fn chunk_in_lanes<E>(
    identity: f64,
    n: usize,
    mut element: impl FnMut(usize) -> Result<f64, E>,
    op: &mut impl FnMut(f64, f64) -> Result<f64, E>,
) -> Result<f64, E> {
    let mut lanes = [identity; LANES];
    let blocks = n / LANES;
    for b in 0..blocks {
        for (j, lane) in lanes.iter_mut().enumerate() {
            *lane = op(*lane, element(b * LANES + j)?)?;
        }
    }
    let mut t = identity;
    for i in blocks * LANES..n {
        t = op(t, element(i)?)?;
    }
    let s = combine_lanes(&lanes, op)?;
    op(s, t)
}

/// The tree that combines the lanes: `(l0 op l2) op (l1 op l3)`.
pub fn combine_lanes<T: Copy, E>(
    l: &[T; LANES],
    op: &mut impl FnMut(T, T) -> Result<T, E>,
) -> Result<T, E> {
    let even = op(l[0], l[2])?;
    let odd = op(l[1], l[3])?;
    op(even, odd)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(z: f64, xs: &[f64]) -> f64 {
        reduce_in_lanes::<()>(-0.0, z, xs.len(), |i| Ok(xs[i]), |a, b| Ok(a + b)).unwrap()
    }

    #[test]
    fn lanes_group_the_elements_as_documented() {
        // 1e16 + 1 rounds back to 1e16 when added in turn; in lanes the
        // ones meet each other first.
        let mut xs = vec![1.0; 9];
        xs[0] = 1e16;
        let left: f64 = xs.iter().fold(0.0, |a, b| a + b);
        assert_eq!(left, 1e16);
        // Lane 0: 1e16 + 1; lanes 1..3: 2 each; the tail: 1.
        let l: Vec<f64> = (0..4).map(|j| xs[j] + xs[j + 4]).collect();
        let lanes = ((l[0] + l[2]) + (l[1] + l[3])) + (-0.0 + xs[8]);
        assert_eq!(sum(0.0, &xs), 0.0 + lanes);
        assert_eq!(sum(0.0, &xs), 1e16 + 8.0);
    }

    #[test]
    fn the_identity_is_exact() {
        assert_eq!(sum(0.0, &[]).to_bits(), 0f64.to_bits());
        assert_eq!(sum(-0.0, &[]).to_bits(), (-0f64).to_bits());
        assert_eq!(sum(0.0, &[0.0; 20]).to_bits(), 0f64.to_bits());
        assert_eq!(sum(-0.0, &[-0.0; 20]).to_bits(), (-0f64).to_bits());
        assert_eq!(sum(3.0, &[1.5]), 4.5);
    }
}
