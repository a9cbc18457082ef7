//! The matrix kernel: one definition of `matmul`'s arithmetic, called by
//! the interpreter and by native code alike, so that the two agree bit for
//! bit on every product.
//!
//! The product runs in the `gemm` crate (the kernels under `faer`), which
//! picks its micro-kernel for this CPU at run time (FMA over AVX2 or
//! AVX-512 on x86-64, NEON on aarch64) and blocks the operands for the
//! caches. Given more than one thread it splits the result into blocks
//! across the current rayon pool (gemm decides by the product's size
//! whether splitting pays); each element is still summed by one thread in
//! the same order, so the result is the same bits for any thread count
//! (`products_are_the_same_bits_for_any_thread_count` checks it).
//!
//! **Operands.** An operand of `matmul` written `transpose(c, M)` is read
//! from `M` ([`operand`], the decision every engine follows): the program
//! never builds the transpose in its memory. `matmul(A, transpose(B))` must
//! be bit for bit the product of `A` and the built transpose, so that
//! rewriting one into the other (the simplifier's `product-operand`) keeps
//! every value. gemm's order of summation depends on its operands' layout
//! only on its paths for small and thin products: the dot-product kernel
//! for at most 16 × 16 results, the outer-product path for depths of 1
//! and 2, and the matrix–vector paths for a single row or column
//! ([`blocked`] names the rest). On its blocked path each element is
//! accumulated over the depth in order by the same micro-kernel whatever
//! the strides, the packing being a copy. So a column-read operand of a
//! blocked product is handed to gemm as it is, with its strides (gemm's
//! packing reads it once, as it would a row-major one), and one of any
//! other product is first transposed into scratch memory in tiles that fit
//! the cache (small, by those paths' definition, but for the depth of a
//! thin product). `operands_read_by_columns_give_the_bits_of_their_built_transposes`
//! checks the claim on shapes on both sides of every one of those bounds.
//!
//! Its order of summation is gemm's, not a left fold: a `matmul` agrees
//! with the loop `map (a. map (b. reduce (+) 0 (map2 (*) a b)) (transpose
//! B)) A` to rounding only.

use crate::syntax::{Builtin, Expr, ExprKind};

/// How the kernel reads an operand from memory holding a stored matrix
/// (rows contiguous).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// The operand is the stored matrix.
    Rows,
    /// The operand is the stored matrix transposed: read by columns.
    Columns,
}

/// The operand an argument of `matmul` stands for: `transpose(c, M)` is
/// `M` read by [`Layout::Columns`] (with `c`, the count of `M`'s
/// columns), anything else itself by [`Layout::Rows`].
pub fn operand(e: &Expr) -> (&Expr, Layout, Option<&Expr>) {
    match &e.kind {
        ExprKind::Builtin(Builtin::Transpose, args) if args.len() == 2 => {
            (&args[1], Layout::Columns, Some(&args[0]))
        }
        _ => (e, Layout::Rows, None),
    }
}

/// `c = A · B` for `A` (m × k) held in `a`, `B` (k × n) held in `b` and
/// `c` (m × n) row-major. `a` holds `A` as rows (m rows of k) or, with
/// [`Layout::Columns`], `Aᵀ` as rows (k rows of m); `b` likewise. `c` is
/// written, never read: its previous contents (uninitialised workspace,
/// NaNs) do not matter. With `k = 0`, `c` is all zeros.
///
/// # Panics
/// When a slice is shorter than its matrix.
pub fn matmul(
    (m, k, n): (usize, usize, usize),
    (a, la): (&[f64], Layout),
    (b, lb): (&[f64], Layout),
    c: &mut [f64],
) {
    assert!(
        a.len() >= m * k && b.len() >= k * n && c.len() >= m * n,
        "matmul: operands shorter than {m}×{k} · {k}×{n}"
    );
    // SAFETY: the slices hold the three matrices, as just checked.
    unsafe {
        matmul_raw(
            (m, k, n),
            (a.as_ptr(), la),
            (b.as_ptr(), lb),
            c.as_mut_ptr(),
            1,
        )
    }
}

/// Whether a product of `m·k·n` multiply–adds is worth splitting across
/// threads: from 2^24 on. A smaller one runs on the calling thread, where
/// handing it to the pool and waking its threads costs more than they
/// save. Measured on two cores (the primal of `reduce`s of `matmul(A,
/// transpose(B))`, `gradlift bench --threads 1` against `--threads 2`;
/// docs/benchmarks.md): two threads were 2.2× slower at 32 × 784 × 128
/// (3.2 M), 1.25× at 128 × 784 × 128 (12.8 M) and 1.15× at 200³ (8 M),
/// about as fast at 192 × 784 × 128 (19 M), and 7–8% faster at 256³
/// (16.8 M) and 256 × 784 × 128 (25.7 M). The bits are the same either way (gemm splits the
/// result, never a sum).
pub fn splits(m: usize, k: usize, n: usize) -> bool {
    m.saturating_mul(k).saturating_mul(n) >= 1 << 24
}

/// [`matmul`] on raw pointers, on up to `threads` threads of the current
/// rayon pool (one: the calling thread alone): what native code calls,
/// with more than one thread when [`splits`] says so.
///
/// # Safety
/// `a` points to `m·k` readable reals, `b` to `k·n` and `c` to `m·n`
/// writable reals (any of them dangling when its count is zero); `c`
/// overlaps neither operand.
pub unsafe fn matmul_raw(
    (m, k, n): (usize, usize, usize),
    (a, la): (*const f64, Layout),
    (b, lb): (*const f64, Layout),
    c: *mut f64,
    threads: usize,
) {
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        // SAFETY: `c` holds m·n reals.
        unsafe { std::slice::from_raw_parts_mut(c, m * n) }.fill(0.0);
        return;
    }
    // Operands read by columns: given with their strides to a blocked
    // product, made row-major in scratch memory for any other.
    let strided = blocked(m, k, n);
    // SAFETY: `a` holds m·k reals and `b` k·n, in either layout.
    let a_rows = (la == Layout::Columns && !strided).then(|| unsafe { transposed(k, m, a) });
    let b_rows = (lb == Layout::Columns && !strided).then(|| unsafe { transposed(n, k, b) });
    // (pointer, column stride, row stride) of A and B as gemm reads them.
    let (a, a_cs, a_rs) = match (&a_rows, la) {
        (Some(t), _) => (t.as_ptr(), 1, k as isize),
        (None, Layout::Rows) => (a, 1, k as isize),
        (None, Layout::Columns) => (a, m as isize, 1),
    };
    let (b, b_cs, b_rs) = match (&b_rows, lb) {
        (Some(t), _) => (t.as_ptr(), 1, n as isize),
        (None, Layout::Rows) => (b, 1, n as isize),
        (None, Layout::Columns) => (b, k as isize, 1),
    };
    // `dst := beta · a·b` (`read_dst` false: `c` is not read).
    // SAFETY: as documented; the strides stay inside the three matrices.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c,
            1,
            n as isize,
            false,
            a,
            a_cs,
            a_rs,
            b,
            b_cs,
            b_rs,
            0.0,
            1.0,
            false,
            false,
            false,
            if threads > 1 {
                gemm::Parallelism::Rayon(threads)
            } else {
                gemm::Parallelism::None
            },
        )
    }
}

/// Whether gemm computes the `m` × `k` · `k` × `n` product on its blocked
/// path, where the order of summation does not depend on the operands'
/// layout: not a result of at most 16 × 16 elements (its dot-product
/// kernel), a depth of at most 2 (its outer products) or a single row or
/// column (its matrix–vector paths).
pub fn blocked(m: usize, k: usize, n: usize) -> bool {
    m > 1 && n > 1 && k > 2 && m * n > 16 * 16
}

/// The transpose of the `rows` × `cols` row-major matrix at `p`, row-major,
/// copied in square tiles so that both the reads and the writes of a tile
/// stay in the cache.
///
/// # Safety
/// `p` points to `rows·cols` readable reals.
unsafe fn transposed(rows: usize, cols: usize, p: *const f64) -> Vec<f64> {
    const TILE: usize = 32;
    // SAFETY: as documented.
    let src = unsafe { std::slice::from_raw_parts(p, rows * cols) };
    let mut out = vec![0.0; rows * cols];
    for i0 in (0..rows).step_by(TILE) {
        for j0 in (0..cols).step_by(TILE) {
            for i in i0..(i0 + TILE).min(rows) {
                for j in j0..(j0 + TILE).min(cols) {
                    out[j * rows + i] = src[i * cols + j];
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The naive product, summed left to right.
    fn naive(m: usize, k: usize, n: usize, a: &[f64], b: &[f64]) -> Vec<f64> {
        let mut c = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                c[i * n + j] = (0..k).map(|l| a[i * k + l] * b[l * n + j]).sum();
            }
        }
        c
    }

    fn filled(len: usize, seed: u64) -> Vec<f64> {
        let mut s = seed;
        (0..len)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((s >> 11) as f64 / (1u64 << 53) as f64) - 0.5
            })
            .collect()
    }

    #[test]
    fn products_agree_with_the_naive_loop_to_rounding_and_ignore_the_destination() {
        for &(m, k, n) in &[
            (1, 1, 1),
            (3, 5, 2),
            (17, 33, 9),
            (64, 1, 70),
            (5, 200, 1),
            (1, 784, 128),
        ] {
            let (a, b) = (filled(m * k, 1), filled(k * n, 2));
            let mut c = vec![f64::NAN; m * n];
            matmul((m, k, n), (&a, Layout::Rows), (&b, Layout::Rows), &mut c);
            for (x, y) in c.iter().zip(naive(m, k, n, &a, &b)) {
                assert!(
                    (x - y).abs() <= 1e-12 * (k as f64),
                    "{m}×{k}×{n}: {x} against {y}"
                );
            }
        }
    }

    /// `m` (rows × cols, row-major) transposed.
    fn transposed(rows: usize, cols: usize, m: &[f64]) -> Vec<f64> {
        (0..cols)
            .flat_map(|j| (0..rows).map(move |i| m[i * cols + j]))
            .collect()
    }

    #[test]
    fn operands_read_by_columns_give_the_bits_of_their_built_transposes() {
        // Both sides of every bound of `blocked`, and the classifier's
        // shapes.
        let mut shapes = vec![
            (13, 29, 7),
            (1, 50, 9),
            (9, 50, 1),
            (40, 2, 30),
            (70, 90, 65),
        ];
        for &(m, n) in &[
            (1, 40),
            (40, 1),
            (1, 300),
            (300, 1),
            (2, 129),
            (16, 16),
            (16, 17),
            (17, 16),
            (2, 2),
            (64, 64),
        ] {
            for k in [1, 2, 3, 4, 17, 300, 1100] {
                shapes.push((m, k, n));
            }
        }
        shapes.extend([
            (256, 784, 128),
            (128, 256, 784),
            (256, 128, 10),
            (10, 256, 128),
        ]);
        for &(m, k, n) in &shapes {
            let (a, b) = (filled(m * k, 8), filled(k * n, 9));
            let (at, bt) = (transposed(m, k, &a), transposed(k, n, &b));
            let want = naive(m, k, n, &a, &b);
            let mut rows = vec![0.0; m * n];
            matmul((m, k, n), (&a, Layout::Rows), (&b, Layout::Rows), &mut rows);
            for (x, lx) in [(&a, Layout::Rows), (&at, Layout::Columns)] {
                for (y, ly) in [(&b, Layout::Rows), (&bt, Layout::Columns)] {
                    let mut c = vec![f64::NAN; m * n];
                    matmul((m, k, n), (x, lx), (y, ly), &mut c);
                    for (p, q) in c.iter().zip(&want) {
                        assert!(
                            (p - q).abs() <= 1e-12 * k as f64,
                            "{lx:?} {ly:?}: {p} vs {q}"
                        );
                    }
                    assert!(
                        c.iter().zip(&rows).all(|(p, q)| p.to_bits() == q.to_bits()),
                        "{lx:?} {ly:?}: not the bits of the product by rows"
                    );
                }
            }
        }
    }

    /// Why the simplifier leaves `transpose(matmul(A, B))` alone: the
    /// kernel sums `Bᵀ·Aᵀ` in another order for some shapes.
    #[test]
    fn a_transposed_product_is_not_always_the_product_of_the_transposes() {
        let differs = [(13, 29, 7), (1, 50, 9), (9, 50, 1), (300, 500, 20)]
            .iter()
            .any(|&(m, k, n)| {
                let (a, b) = (filled(m * k, 10), filled(k * n, 11));
                let (at, bt) = (transposed(m, k, &a), transposed(k, n, &b));
                let mut c = vec![0.0; m * n];
                matmul((m, k, n), (&a, Layout::Rows), (&b, Layout::Rows), &mut c);
                let mut d = vec![0.0; n * m];
                matmul((n, k, m), (&bt, Layout::Rows), (&at, Layout::Rows), &mut d);
                transposed(m, n, &c)
                    .iter()
                    .zip(&d)
                    .any(|(p, q)| p.to_bits() != q.to_bits())
            });
        assert!(differs);
    }

    #[test]
    fn an_empty_inner_dimension_gives_zeros_and_empty_outer_ones_nothing() {
        let mut c = vec![f64::NAN; 6];
        matmul((2, 0, 3), (&[], Layout::Rows), (&[], Layout::Rows), &mut c);
        assert_eq!(c, vec![0.0; 6]);
        let mut none: Vec<f64> = vec![];
        matmul(
            (0, 4, 3),
            (&[], Layout::Rows),
            (&filled(12, 3), Layout::Rows),
            &mut none,
        );
        matmul(
            (3, 4, 0),
            (&filled(12, 3), Layout::Rows),
            (&[], Layout::Rows),
            &mut none,
        );
    }

    #[test]
    fn products_are_the_same_bits_for_any_thread_count() {
        for &(m, k, n) in &[(320, 256, 256), (300, 200, 100), (64, 900, 40), (7, 3, 500)] {
            let (a, b) = (filled(m * k, 6), filled(k * n, 7));
            let mut one = vec![0.0; m * n];
            matmul(
                (m, k, n),
                (&a, Layout::Rows),
                (&b, Layout::Columns),
                &mut one,
            );
            for threads in [2, 3, 8] {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap();
                let mut c = vec![f64::NAN; m * n];
                // SAFETY: the vectors hold the three matrices.
                pool.install(|| unsafe {
                    matmul_raw(
                        (m, k, n),
                        (a.as_ptr(), Layout::Rows),
                        (b.as_ptr(), Layout::Columns),
                        c.as_mut_ptr(),
                        threads,
                    )
                });
                assert!(
                    one.iter().zip(&c).all(|(x, y)| x.to_bits() == y.to_bits()),
                    "{m}×{k}×{n} on {threads} threads"
                );
            }
        }
    }

    #[test]
    fn a_product_is_the_same_bits_every_time() {
        let (m, k, n) = (40, 300, 30);
        let (a, b) = (filled(m * k, 4), filled(k * n, 5));
        let mut c1 = vec![0.0; m * n];
        let mut c2 = vec![f64::NAN; m * n];
        matmul((m, k, n), (&a, Layout::Rows), (&b, Layout::Rows), &mut c1);
        matmul((m, k, n), (&a, Layout::Rows), (&b, Layout::Rows), &mut c2);
        assert!(c1.iter().zip(&c2).all(|(x, y)| x.to_bits() == y.to_bits()));
    }
}
