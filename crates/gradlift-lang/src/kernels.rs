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
//! Its order of summation is gemm's, not a left fold: a `matmul` agrees
//! with the loop `map (a. map (b. reduce (+) 0 (map2 (*) a b)) (transpose
//! B)) A` to rounding only. Every engine computes `matmul` here, with the
//! operands laid out the same way (rows contiguous), so every engine
//! rounds alike on one machine.

/// `c = a · b` for row-major `a` (m × k), `b` (k × n) and `c` (m × n),
/// each with its rows contiguous. `c` is written, never read: its
/// previous contents (uninitialised workspace, NaNs) do not matter. With
/// `k = 0`, `c` is all zeros.
///
/// # Panics
/// When a slice is shorter than its matrix.
pub fn matmul(m: usize, k: usize, n: usize, a: &[f64], b: &[f64], c: &mut [f64]) {
    assert!(
        a.len() >= m * k && b.len() >= k * n && c.len() >= m * n,
        "matmul: operands shorter than {m}×{k} · {k}×{n}"
    );
    // SAFETY: the slices hold the three matrices, as just checked.
    unsafe { matmul_raw(m, k, n, a.as_ptr(), b.as_ptr(), c.as_mut_ptr(), 1) }
}

/// [`matmul`] on raw pointers, on up to `threads` threads of the current
/// rayon pool (one: the calling thread alone): what native code calls.
///
/// # Safety
/// `a` points to `m·k` readable reals, `b` to `k·n` and `c` to `m·n`
/// writable reals (any of them dangling when its count is zero); `c`
/// overlaps neither operand.
pub unsafe fn matmul_raw(
    m: usize,
    k: usize,
    n: usize,
    a: *const f64,
    b: *const f64,
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
    // Row-major: the column stride is 1, the row stride the row's length.
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
            1,
            k as isize,
            b,
            1,
            n as isize,
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
            matmul(m, k, n, &a, &b, &mut c);
            for (x, y) in c.iter().zip(naive(m, k, n, &a, &b)) {
                assert!(
                    (x - y).abs() <= 1e-12 * (k as f64),
                    "{m}×{k}×{n}: {x} against {y}"
                );
            }
        }
    }

    #[test]
    fn an_empty_inner_dimension_gives_zeros_and_empty_outer_ones_nothing() {
        let mut c = vec![f64::NAN; 6];
        matmul(2, 0, 3, &[], &[], &mut c);
        assert_eq!(c, vec![0.0; 6]);
        let mut none: Vec<f64> = vec![];
        matmul(0, 4, 3, &[], &filled(12, 3), &mut none);
        matmul(3, 4, 0, &filled(12, 3), &[], &mut none);
    }

    #[test]
    fn products_are_the_same_bits_for_any_thread_count() {
        for &(m, k, n) in &[(300, 200, 100), (64, 900, 40), (7, 3, 500)] {
            let (a, b) = (filled(m * k, 6), filled(k * n, 7));
            let mut one = vec![0.0; m * n];
            matmul(m, k, n, &a, &b, &mut one);
            for threads in [2, 3, 8] {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap();
                let mut c = vec![f64::NAN; m * n];
                // SAFETY: the vectors hold the three matrices.
                pool.install(|| unsafe {
                    matmul_raw(m, k, n, a.as_ptr(), b.as_ptr(), c.as_mut_ptr(), threads)
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
        matmul(m, k, n, &a, &b, &mut c1);
        matmul(m, k, n, &a, &b, &mut c2);
        assert!(c1.iter().zip(&c2).all(|(x, y)| x.to_bits() == y.to_bits()));
    }
}
