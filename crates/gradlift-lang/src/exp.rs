//! gradlift's `exp` and `tanh`: sequences of `f64` and integer operations
//! that the interpreter runs here and the native backend emits inline,
//! instruction for instruction, so both give the same bits on every input
//! (a NaN result is NaN in both, its payload left to the hardware), with no
//! call into the C library in generated loops. `tanh` is built on
//! the reduction of `exp` ([`tanh`]).
//!
//! The method is the classic table-driven reduction. With N = 128 and
//! k = round(x · N / ln 2), the remainder r = x − k · ln 2 / N lies in
//! [−ln 2 / 2N, ln 2 / 2N] (|r| < 0.0028), and
//!
//! ```text
//! exp(x) = 2^(k div N) · 2^((k mod N) / N) · exp(r)
//! ```
//!
//! `k` is rounded by adding and subtracting 1.5 · 2^52 (which leaves k in
//! the low bits of the sum); `k · ln 2 / N` is taken off in two parts, the
//! first exact; `exp(r) − 1` is its Taylor polynomial of degree 5 (the
//! first term left out, r⁶/720, is below 2^−60), evaluated by Estrin's
//! scheme; 2^(j/N) comes from a table of pairs (nearest double, the nearest
//! double to the rest) computed by `tools/exp_table.py`. Products and sums
//! are fused (`mul_add`, one rounding, which every target computes the
//! same way: an instruction, or the C library's `fma` where there is none).
//! The only rounding that matters is the last addition: the result is
//! within one unit in the last place of the exact value — the tests check
//! it against the C library's `exp`, which it differs from, by one unit, on
//! about one input in a thousand.
//!
//! For −[`FAST_K`] ≤ k < `FAST_K` (|x| below about 704.0) the power of two is built
//! in the exponent field and multiplied in, exactly. Other inputs are first
//! clamped to [−746, 710], outside of which the result is 0 or +∞ anyway,
//! and scaled by two products, so that neither overflows before the result
//! does (a subnormal result rounds once more, to within one unit of the
//! smallest subnormal); NaN passes through every step (the table index is
//! masked, so it stays in bounds whatever the bits).

#[rustfmt::skip]
#[path = "exp_table.rs"]
mod table;

pub use table::{INV_STEP, STEP_HI, STEP_LO, TABLE};

/// Inputs above this give +∞ (clamped to it first).
pub const CLAMP_HI: f64 = 710.0;
/// Inputs below this give 0 (clamped to it first).
pub const CLAMP_LO: f64 = -746.0;
/// 1.5 · 2^52: `z + SHIFT` rounds `z` to an integer k, and the bits of the
/// sum are `SHIFT`'s plus k.
pub const SHIFT: f64 = 6755399441055744.0;
/// `log2` of the table's length N.
pub const TABLE_BITS: i64 = 7;
/// The Taylor coefficient 1/2! of `exp(r) − 1`.
pub const C2: f64 = 0.5;
/// The Taylor coefficient 1/3!.
pub const C3: f64 = 1.0 / 6.0;
/// The Taylor coefficient 1/4!.
pub const C4: f64 = 1.0 / 24.0;
/// The Taylor coefficient 1/5!.
pub const C5: f64 = 1.0 / 120.0;

/// The common case: −FAST_K ≤ k < FAST_K (|x| below about 704.0), where
/// e^x and 2^(k div N) are normal numbers.
pub const FAST_K: u64 = 130_000;

/// Where the native code finds the table and the constants it multiplies
/// by (loads it can fold into the instructions that use them): the table's
/// 256 reals, then [`INV_STEP`], [`STEP_HI`], [`STEP_LO`], [`C3`], [`C5`]
/// at the indices [`AT_INV_STEP`] ….
pub static DATA: [f64; 261] = {
    let mut data = [0.0; 261];
    let mut i = 0;
    while i < TABLE.len() {
        data[i] = TABLE[i];
        i += 1;
    }
    data[AT_INV_STEP] = INV_STEP;
    data[AT_STEP_HI] = STEP_HI;
    data[AT_STEP_LO] = STEP_LO;
    data[AT_C3] = C3;
    data[AT_C5] = C5;
    data
};
/// The index of [`INV_STEP`] in [`DATA`].
pub const AT_INV_STEP: usize = 256;
/// The index of [`STEP_HI`] in [`DATA`].
pub const AT_STEP_HI: usize = 257;
/// The index of [`STEP_LO`] in [`DATA`].
pub const AT_STEP_LO: usize = 258;
/// The index of [`C3`] in [`DATA`].
pub const AT_C3: usize = 259;
/// The index of [`C5`] in [`DATA`].
pub const AT_C5: usize = 260;

/// e^x. The native backend's lowering (`gradlift-jit`, `prims.rs`) emits
/// these operations in this order; change both together.
pub fn exp(x: f64) -> f64 {
    let (shifted, bits, hi, lo) = table_entry(x);
    // |k| < FAST_K, by one unsigned comparison (NaN and infinities give
    // other bits, far from SHIFT's).
    let key = bits.wrapping_sub(SHIFT.to_bits()).wrapping_add(FAST_K);
    if key < 2 * FAST_K {
        // The product is exact.
        times_exp_reduced(x, shifted, hi, lo) * scale(bits)
    } else {
        // Large, infinite or NaN: clamped, reduced again and scaled in two
        // steps.
        let x = if x > CLAMP_HI { CLAMP_HI } else { x };
        let x = if x < CLAMP_LO { CLAMP_LO } else { x };
        let (shifted, bits, hi, lo) = table_entry(x);
        let y = times_exp_reduced(x, shifted, hi, lo);
        let m = (bits as i64).wrapping_sub(SHIFT.to_bits() as i64) >> TABLE_BITS;
        let m1 = m >> 1;
        y * power_of_two(m1) * power_of_two(m.wrapping_sub(m1))
    }
}

/// `shifted` = x · N / ln 2 + SHIFT (k rounded), its bits (SHIFT's plus k),
/// and the table's pair for k mod N (SHIFT's bits are a multiple of N, so
/// the low bits are those of k mod N).
fn table_entry(x: f64) -> (f64, u64, f64, f64) {
    let shifted = x.mul_add(INV_STEP, SHIFT);
    let bits = shifted.to_bits();
    let j = (bits & ((1 << TABLE_BITS) - 1)) as usize;
    (shifted, bits, TABLE[2 * j], TABLE[2 * j + 1])
}

/// 2^(k div N) for k in the fast range, from `bits` (SHIFT's plus k): its
/// exponent field is (k div N) + 1023, and k div N is bits div N up to a
/// multiple of 2^12 (SHIFT's quotient by N), which the shift by 52 drops.
fn scale(bits: u64) -> f64 {
    f64::from_bits(((bits >> TABLE_BITS).wrapping_add(1023)) << 52)
}

/// (hi + lo) · e^r for r = x − k · ln 2 / N, given `shifted` = x · N / ln 2
/// + SHIFT: `hi + (lo + hi · p)` with p = e^r − 1.
fn times_exp_reduced(x: f64, shifted: f64, hi: f64, lo: f64) -> f64 {
    let p = expm1_reduced(x, shifted);
    hi + hi.mul_add(p, lo)
}

/// e^r − 1 for r = x − k · ln 2 / N, given `shifted` = x · N / ln 2 + SHIFT.
fn expm1_reduced(x: f64, shifted: f64) -> f64 {
    let kd = shifted - SHIFT;
    let r = (-kd).mul_add(STEP_HI, x);
    let r = (-kd).mul_add(STEP_LO, r);
    // Estrin's scheme: a shorter chain of dependent operations than Horner's.
    let r2 = r * r;
    let q = r2.mul_add(r.mul_add(C5, C4), r.mul_add(C3, C2));
    r2.mul_add(q, r)
}

/// From this magnitude on, `tanh` is ±1 (1 − tanh(22) is below 2^−62;
/// tanh rounds to 1 from about 19.06 on).
pub const TANH_BOUND: f64 = 22.0;

/// tanh(x) = t / (t + 2) with t = e^(2|x|) − 1, the sign of x: gradlift's
/// own, from the reduction and table of [`exp`] (so the native backend
/// emits it inline, as for `exp`). e^y − 1 for y in [0, 44) is
/// (hi·2^m − 1) + (lo·2^m + hi·2^m · p): the first difference is exact
/// for m ≤ 52 (hi·2^m ≥ 1 has no bits below 2^−52 · 2^m), so nothing
/// cancels near 0; past that (|x| above about 18.4) it rounds, where the
/// result is 1 − 2^−53 or 1 anyway. Within three units in the last place
/// of the exact value (the C library's is within two; this one reaches
/// three just below powers of two, where t sits at the bottom of its
/// binade and the quotient at the top — the tests hold it to that against
/// correctly rounded values); tanh(±0) = ±0, NaN stays NaN (the argument
/// itself).
/// The native backend's lowering (`gradlift-jit`, `prims.rs`) emits these
/// operations in this order; change both together.
pub fn tanh(x: f64) -> f64 {
    let a = x.abs();
    if a < TANH_BOUND {
        let t = expm1_small(a + a);
        (t / (t + 2.0)).copysign(x)
    } else if a >= TANH_BOUND {
        1f64.copysign(x)
    } else {
        x
    }
}

/// e^y − 1 for y in [0, 2 · TANH_BOUND).
fn expm1_small(y: f64) -> f64 {
    let (shifted, bits, hi, lo) = table_entry(y);
    // 2^(k div N), k ≥ 0 and below 2^13: exact products.
    let scale = scale(bits);
    let (hi, lo) = (hi * scale, lo * scale);
    let p = expm1_reduced(y, shifted);
    (hi - 1.0) + hi.mul_add(p, lo)
}

/// 2^e for e in [−1022, 1023]; other values (only from NaN inputs) give
/// another power of two, 0 or +∞, never NaN.
fn power_of_two(e: i64) -> f64 {
    f64::from_bits(((e.wrapping_add(1023) & 0x7ff) as u64) << 52)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Distance in units in the last place between two finite doubles of
    /// the same sign.
    fn ulps(a: f64, b: f64) -> u64 {
        (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs()
    }

    /// A deterministic sweep: uniform over the whole finite range of
    /// results, and dense near 0.
    fn inputs() -> impl Iterator<Item = f64> {
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        (0..400_000).map(move |i| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let u = (state >> 11) as f64 / (1u64 << 53) as f64;
            match i % 4 {
                0 => -745.0 + u * (709.7 + 745.0),
                1 => -1.0 + 2.0 * u,
                2 => (u - 0.5) * 1e-6,
                _ => -40.0 + 80.0 * u,
            }
        })
    }

    #[test]
    fn within_one_unit_of_the_c_library() {
        let (mut differ, mut total) = (0, 0);
        for x in inputs() {
            let (ours, libc) = (exp(x), x.exp());
            let d = ulps(ours, libc);
            assert!(d <= 1, "exp({x:e}) = {ours:e}, C library {libc:e}");
            differ += (d != 0) as usize;
            total += 1;
        }
        // Both are within about half a unit of e^x, so they rarely differ.
        assert!(differ * 500 < total, "{differ} of {total} differ");
    }

    #[test]
    fn exact_where_it_must_be() {
        assert_eq!(exp(0.0).to_bits(), 1f64.to_bits());
        assert_eq!(exp(-0.0).to_bits(), 1f64.to_bits());
        assert_eq!(exp(f64::INFINITY), f64::INFINITY);
        assert_eq!(exp(f64::NEG_INFINITY).to_bits(), 0);
        assert_eq!(exp(710.0), f64::INFINITY);
        assert_eq!(exp(1e300), f64::INFINITY);
        assert_eq!(exp(-746.0).to_bits(), 0);
        assert_eq!(exp(-1e300).to_bits(), 0);
        assert!(exp(f64::NAN).is_nan());
        assert!(exp(-f64::NAN).is_nan());
        // The table's entries: e^(j ln 2 / 128) is 2^(j / 128), j = 1 … 127.
        for j in 1..128 {
            let x = j as f64 * (std::f64::consts::LN_2 / 128.0);
            assert!(ulps(exp(x), (j as f64 / 128.0).exp2()) <= 1, "j = {j}");
        }
    }

    #[test]
    fn tanh_within_three_units_of_the_c_library() {
        for x in inputs()
            .map(|x| x / 20.0)
            .chain((0..2000).map(|i| i as f64 * 0.0125 - 12.5))
        {
            let (ours, libc) = (tanh(x), x.tanh());
            let d = ulps(ours, libc);
            // Ours errs by up to three units, the C library's by two (see
            // `against_exact_values`), in different places: a third of
            // these results differ by one.
            assert!(d <= 3, "tanh({x:e}) = {ours:e}, C library {libc:e}");
        }
        assert_eq!(tanh(0.0).to_bits(), 0f64.to_bits());
        assert_eq!(tanh(-0.0).to_bits(), (-0f64).to_bits());
        assert_eq!(tanh(5e-324).to_bits(), 5e-324f64.to_bits());
        assert_eq!(tanh(-1e-300), -1e-300);
        assert_eq!(tanh(1e-10), 1e-10f64.tanh());
        assert_eq!(tanh(TANH_BOUND), 1.0);
        assert_eq!(tanh(-21.99), -1.0);
        assert_eq!(tanh(f64::INFINITY), 1.0);
        assert_eq!(tanh(f64::NEG_INFINITY), -1.0);
        assert_eq!(tanh(-1e300), -1.0);
        assert!(tanh(f64::NAN).is_nan());
        // Odd, exactly.
        for x in [1e-5, 0.1, 0.5, 0.9, 1.0, 3.0, 10.0, 21.0] {
            assert_eq!(tanh(-x).to_bits(), (-tanh(x)).to_bits());
        }
    }

    /// Against values correctly rounded from 50-digit arithmetic
    /// (`tools/reference.py`): the largest error of each function, ours
    /// and the C library's.
    #[test]
    fn against_exact_values() {
        let text = include_str!("../tests/data/exp_tanh_reference.txt");
        let hex = |w: &str| f64::from_bits(u64::from_str_radix(w, 16).unwrap());
        let (mut exp_worst, mut tanh_worst, mut libc_worst) = (0, 0, [0, 0]);
        let mut lines = 0;
        for line in text.lines() {
            let words: Vec<&str> = line.split(' ').collect();
            let (x, want) = (hex(words[1]), hex(words[2]));
            let (ours, libc, worst, slot) = match words[0] {
                "exp" => (exp(x), x.exp(), &mut exp_worst, 0),
                _ => (tanh(x), x.tanh(), &mut tanh_worst, 1),
            };
            *worst = (*worst).max(ulps(ours, want));
            libc_worst[slot] = libc_worst[slot].max(ulps(libc, want));
            lines += 1;
        }
        assert!(lines > 6000);
        eprintln!("worst: exp {exp_worst}, tanh {tanh_worst}; C library {libc_worst:?}");
        assert!(exp_worst <= 1, "exp is off by {exp_worst} units");
        assert!(tanh_worst <= 3, "tanh is off by {tanh_worst} units");
    }

    #[test]
    fn edges_of_the_range() {
        // The largest finite result and the first infinite one.
        let top = 709.782_712_893_383_9;
        assert!(exp(top).is_finite());
        assert!(ulps(exp(top), top.exp()) <= 1);
        assert_eq!(exp(709.782_712_893_384_1), f64::INFINITY);
        // Subnormal results: within one unit of the smallest subnormal.
        for x in [-708.5, -720.0, -730.25, -740.0, -744.4, -745.0, -745.13] {
            let (ours, libc) = (exp(x), x.exp());
            assert!(
                ulps(ours, libc) <= 1,
                "exp({x}) = {ours:e}, C library {libc:e}"
            );
        }
        assert_eq!(exp(-745.2).to_bits(), 0);
        // At multiples of ln 2 (the table's first entry).
        for e in -1074..1024 {
            let x = e as f64 * std::f64::consts::LN_2;
            assert!(ulps(exp(x), x.exp()) <= 1, "e = {e}");
        }
    }
}
