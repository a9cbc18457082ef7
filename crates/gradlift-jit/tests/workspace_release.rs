//! What the body of a `map`, or a step of a fold with an accumulator of
//! reals, builds in the workspace is released after each element: the
//! workspace such a loop needs does not grow with its number of iterations.

use gradlift_ad::inline::inline;
use gradlift_jit::{Compiled, Jit, Status};
use gradlift_lang::check_source;

fn compile(source: &str) -> Compiled {
    let checked = check_source("<test>", source).unwrap();
    let last = checked.module.defs.len() - 1;
    Jit::new()
        .unwrap()
        .compile(&inline(&checked, last))
        .unwrap()
}

/// Calls `f(A)` through the raw ABI, growing the workspace from 8 bytes to
/// what the call asks for; the result and the workspace bytes it took.
fn run(f: &Compiled, a: &[f64], out_len: usize) -> (Vec<f64>, usize) {
    let args = [a.len() as i64, a.as_ptr() as i64];
    let mut out = vec![0.0; out_len];
    let mut workspace = vec![0u64; 1];
    let mut info = 0i64;
    loop {
        let status = unsafe {
            f.raw()(
                args.as_ptr(),
                out.as_mut_ptr(),
                out.len() as i64,
                workspace.as_mut_ptr() as *mut u8,
                (workspace.len() * 8) as i64,
                &mut info,
            )
        };
        if status == Status::Ok as i64 {
            return (out, workspace.len() * 8);
        }
        assert_eq!(status, Status::WorkspaceTooSmall as i64);
        workspace.resize((info as usize).div_ceil(8), 0);
    }
}

fn data(n: usize) -> Vec<f64> {
    (0..n).map(|i| 0.5 + (i % 7) as f64 / 8.0).collect()
}

#[test]
fn a_map_releases_what_its_body_builds() {
    // Each element builds an array of n reals and reduces it.
    let f = compile("def f(A: [R; n]) -> [R; n] = map (a. reduce (+) 0 (map (b. a * b) A)) A");
    let a = data(1000);
    let (out, bytes) = run(&f, &a, a.len());
    let total: f64 = a.iter().sum();
    for (o, x) in out.iter().zip(&a) {
        assert!((o - x * total).abs() <= 1e-9 * o.abs());
    }
    // The result and one row: 16 KB, where keeping every row would take 8 MB.
    assert!(bytes <= 2 * 8 * a.len() + 64, "{bytes} bytes");
}

#[test]
fn a_fold_of_reals_releases_what_each_step_builds() {
    let f = compile(
        "def f(A: [R; n]) -> R = foldl (acc, a. acc + reduce (+) 0 (map (b. a * b) A)) 0 A",
    );
    let a = data(1000);
    let (out, bytes) = run(&f, &a, 1);
    let total: f64 = a.iter().sum();
    assert!((out[0] - total * total).abs() <= 1e-9 * out[0]);
    assert!(bytes <= 8 * a.len() + 64, "{bytes} bytes");
}

#[test]
fn a_fold_of_arrays_moves_its_accumulator_and_releases_the_rest() {
    // Every step builds the next accumulator (n reals) and a temporary
    // (n reals): the fold keeps two accumulators, not all of them.
    let f = compile(
        "def f(A: [R; n]) -> [R; n] = \
         foldl (acc, a. map2 (+) acc (map (x. x * 0 + a) acc)) A A",
    );
    let a = data(1000);
    let (out, bytes) = run(&f, &a, a.len());
    let total: f64 = a.iter().sum();
    for (o, x) in out.iter().zip(&a) {
        assert!((o - (x + total)).abs() <= 1e-9 * o.abs());
    }
    assert!(bytes <= 4 * 8 * a.len() + 64, "{bytes} bytes");
    // An accumulator that is a pair of arrays, swapped by every step.
    let f = compile(
        "def f(A: [R; n]) -> [R; n] = \
         let (p, q) = foldl ((u, v), a. (map (x. x + a) v, u)) (A, map (x. 0 - x) A) A in \
         map2 (+) p q",
    );
    let a = data(7);
    let (out, _) = run(&f, &a, a.len());
    // Each step adds its element to one of the two, alternately.
    let (even, odd): (f64, f64) =
        a.iter().enumerate().fold(
            (0.0, 0.0),
            |(e, o), (i, x)| {
                if i % 2 == 0 {
                    (e + x, o)
                } else {
                    (e, o + x)
                }
            },
        );
    for (o, _) in out.iter().zip(&a) {
        assert!((o - (even + odd)).abs() <= 1e-12, "{out:?}");
    }
}

#[test]
fn a_scan_of_arrays_keeps_its_output_and_releases_the_rest() {
    let f = compile(
        "def f(A: [R; n]) -> [[R; n]; n+1] = \
         scanl (acc, a. map2 (+) acc (map (x. x * 0 + a) acc)) A A",
    );
    let a = data(300);
    let n = a.len();
    let (out, bytes) = run(&f, &a, (n + 1) * n);
    let mut row = a.clone();
    for (k, x) in a.iter().enumerate() {
        row.iter_mut().for_each(|r| *r += x);
        assert_eq!(&out[(k + 1) * n..(k + 2) * n], &row[..]);
    }
    // The output, and one step's two arrays.
    assert!(bytes <= 8 * (n + 1) * n + 2 * 8 * n + 64, "{bytes} bytes");
}

#[test]
fn maps_written_in_place_are_computed_in_their_consumers() {
    // A reduction of a map2 of a map: one loop, no array in the workspace.
    let f = compile("def f(A: [R; n]) -> R = reduce (+) 0 (map2 (*) A (map (x. x + 1) A))");
    let a = data(100_000);
    let (out, bytes) = run(&f, &a, 1);
    let want = a.iter().fold(0.0, |acc, x| acc + x * (x + 1.0));
    assert_eq!(out[0].to_bits(), want.to_bits());
    assert!(bytes <= 64, "{bytes} bytes");
    // A scan and a map of maps keep their own results only.
    let f = compile(
        "def f(A: [R; n]) -> [R; n+1] = \
         scanl (+) 0 (map2 (a, b. a * b) (map (x. x - 1) A) (map (x. sin(x)) A))",
    );
    let (out, bytes) = run(&f, &a, a.len() + 1);
    let mut acc = 0.0;
    for (k, x) in a.iter().enumerate() {
        acc += (x - 1.0) * x.sin();
        assert_eq!(out[k + 1].to_bits(), acc.to_bits());
    }
    assert!(bytes <= 8 * (a.len() + 1) + 64, "{bytes} bytes");
    let f = compile("def f(A: [R; n]) -> [R; n] = map (x. x * 2) (map2 (+) A (map (y. y * y) A))");
    let (out, bytes) = run(&f, &a, a.len());
    for (o, x) in out.iter().zip(&a) {
        assert_eq!(o.to_bits(), ((x + x * x) * 2.0).to_bits());
    }
    assert!(bytes <= 8 * a.len() + 64, "{bytes} bytes");
}

#[test]
fn the_last_state_of_a_scan_is_a_fold() {
    // `(scanr …)[0]` and `(scanl …)[-1]` store no states.
    let f = compile(
        "def f(A: [R; n]) -> R = \
         (scanr (acc, a. acc * 0.5 + a) 0 A)[0] + (scanl (acc, a. acc * 0.5 + a) 1 A)[-1]",
    );
    let a = data(100_000);
    let (out, bytes) = run(&f, &a, 1);
    let right = a.iter().rev().fold(0.0, |acc, x| acc * 0.5 + x);
    let left = a.iter().fold(1.0, |acc, x| acc * 0.5 + x);
    assert_eq!(out[0].to_bits(), (right + left).to_bits());
    assert!(bytes <= 64, "{bytes} bytes");
    // An empty array: the start.
    let (out, _) = run(&f, &[], 1);
    assert_eq!(out[0], 1.0);
}

#[test]
fn shifts_of_maps_ranges_and_concat_parts_are_not_stored() {
    // The map under `shift1R` is computed in the map2's loop, `iota` is
    // not stored, and the map2 writes its elements into the concat.
    let f = compile(
        "def f(A: [R; n]) -> [R; n] = \
         concat([A[0]], map2 (i, y. i * y) (shift1L iota(len(A))) (shift1R (map (x. x * 2) A)))",
    );
    let a = data(100_000);
    let (out, bytes) = run(&f, &a, a.len());
    assert_eq!(out[0], a[0]);
    for k in 1..a.len() {
        assert_eq!(out[k].to_bits(), (k as f64 * (a[k - 1] * 2.0)).to_bits());
    }
    assert!(bytes <= 8 * a.len() + 64, "{bytes} bytes");
}

#[test]
fn a_shift_skips_no_element_that_fails() {
    // `B[3]` fails for x = -1; the first element, which `shift1L` drops,
    // must still be computed so that the error is the same.
    assert_fails_on_a_skipped_element(
        "def f(A: [R; n], B: [R; m]) -> R = \
         reduce (+) 0 (shift1L (map (x. if x < 0 then B[3] else x) A))",
        [-1.0, 2.0, 3.0],
    );
    // Likewise the last element, which `take` drops.
    assert_fails_on_a_skipped_element(
        "def f(A: [R; n], B: [R; m]) -> R = \
         reduce (+) 0 (take(2, concat([0.5], map (x. if x < 0 then B[3] else x) A)))",
        [2.0, -1.0, 3.0],
    );
}

/// Calls `f(A, B)` with `B = [1, 2]`, which `B[3]` reads out of bounds.
fn assert_fails_on_a_skipped_element(source: &str, args: [f64; 3]) {
    let f = compile(source);
    let b = [1.0, 2.0];
    let raw = [
        args.len() as i64,
        b.len() as i64,
        args.as_ptr() as i64,
        b.as_ptr() as i64,
    ];
    let mut out = [0.0];
    let mut workspace = vec![0u64; 1 << 12];
    let mut info = 0i64;
    let status = unsafe {
        f.raw()(
            raw.as_ptr(),
            out.as_mut_ptr(),
            1,
            workspace.as_mut_ptr() as *mut u8,
            (workspace.len() * 8) as i64,
            &mut info,
        )
    };
    assert_eq!(status, Status::IndexOutOfBounds as i64);
}

#[test]
fn a_fold_keeps_reals_in_registers_and_builds_arrays_in_their_buffers() {
    // A tuple of a real and an array: the array is built in place in one
    // of its two buffers, the real is carried as a value.
    let f = compile(
        "def f(A: [R; n]) -> [R; n] = \
         let (s, acc) = foldl ((s, acc), a. (s + a, map (x. x * 0.5 + s) acc)) (0, A) A in \
         map (x. x + s) acc",
    );
    let a = data(1000);
    let (out, bytes) = run(&f, &a, a.len());
    let (mut s, mut acc) = (0.0, a.clone());
    for x in &a {
        acc = acc.iter().map(|y| y * 0.5 + s).collect();
        s += x;
    }
    for (o, y) in out.iter().zip(&acc) {
        assert_eq!(o.to_bits(), (y + s).to_bits());
    }
    // Two buffers and the result.
    assert!(bytes <= 3 * 8 * a.len() + 64, "{bytes} bytes");
}

/// `acc` after each step of `step`, from `init`, over `a` (the reference
/// for the folds below).
fn fold_ref(a: &[f64], init: Vec<f64>, step: impl Fn(f64, &[f64]) -> Option<Vec<f64>>) -> Vec<f64> {
    let mut acc = init;
    for &x in a {
        if let Some(next) = step(x, &acc) {
            acc = next;
        }
    }
    acc
}

/// `reduce (+) 0 acc`, in the lanes of `gradlift_lang::reduce_order`.
fn sum_in_lanes(acc: &[f64]) -> f64 {
    gradlift_lang::reduce_order::reduce_in_lanes::<()>(
        -0.0,
        0.0,
        acc.len(),
        |i| Ok(acc[i]),
        |s, y| Ok(s + y),
    )
    .unwrap()
}

#[test]
fn a_fold_keeps_an_array_its_step_leaves_as_it_is() {
    // Most steps leave the accumulator as it is (no copy), some build a
    // new one in a buffer, some take the input (a copy); the accumulator
    // starts as the input, which no step may write. Each new element
    // reads the whole accumulator, so writing it in place would show.
    let f = compile(
        "def f(A: [R; n]) -> [R; n] = \
         foldl (acc, a. if a > 0.9 then map (x. x * 0.5 + reduce (+) 0 acc * 0.001) acc \
                        else if a < 0.6 then A else acc) A A",
    );
    let a = data(300);
    let (out, bytes) = run(&f, &a, a.len());
    assert_eq!(a, data(300), "the input was written");
    let want = fold_ref(&a, a.clone(), |x, acc| {
        if x > 0.9 {
            let sum = sum_in_lanes(acc);
            Some(acc.iter().map(|y| y * 0.5 + sum * 0.001).collect())
        } else if x < 0.6 {
            Some(a.clone())
        } else {
            None
        }
    });
    for (o, y) in out.iter().zip(&want) {
        assert_eq!(o.to_bits(), y.to_bits());
    }
    assert!(bytes <= 3 * 8 * a.len() + 64, "{bytes} bytes");
}

#[test]
fn a_fold_keeps_an_array_chosen_by_a_bound_branch() {
    // The branch is bound by `let` and its components projected: whether
    // the array is the accumulator's is checked at run time.
    let f = compile(
        "def f(A: [R; n]) -> [R; n] = \
         let (s, acc) = foldl ((s, acc), a. \
             let r = if a > 1 then (s + a, map (x. x * 0.5 + reduce (+) 0 acc * 0.001) acc) \
                     else (s, acc) in \
             (r.0, r.1)) (0, A) A in \
         map (x. x + s) acc",
    );
    let a = data(300);
    let (out, bytes) = run(&f, &a, a.len());
    assert_eq!(a, data(300), "the input was written");
    let (mut s, mut acc) = (0.0, a.clone());
    for &x in &a {
        if x > 1.0 {
            let sum = sum_in_lanes(&acc);
            acc = acc.iter().map(|y| y * 0.5 + sum * 0.001).collect();
            s += x;
        }
    }
    for (o, y) in out.iter().zip(&acc) {
        assert_eq!(o.to_bits(), (y + s).to_bits());
    }
    assert!(bytes <= 3 * 8 * a.len() + 64, "{bytes} bytes");
}

#[test]
fn a_concat_read_by_a_loop_is_not_stored() {
    // Both concats are computed in the loops that read them, their maps
    // included: only the one-element literals are stored (and the result).
    let f = compile(
        "def f(A: [R; n]) -> [R; n] = \
         map2 (+) (concat(map (x. x + 1) (shift1L A), [A[0]])) (concat([0.5], shift1R A))",
    );
    let a = data(10_000);
    let (out, bytes) = run(&f, &a, a.len());
    let n = a.len();
    for k in 0..n {
        let first = if k + 1 < n { a[k + 1] + 1.0 } else { a[0] };
        let second = if k == 0 { 0.5 } else { a[k - 1] };
        assert_eq!(out[k].to_bits(), (first + second).to_bits(), "element {k}");
    }
    // The result and the literals.
    assert!(bytes <= 8 * n + 64, "{bytes} bytes");

    let g = compile(
        "def g(A: [R; n]) -> R = \
         reduce (+) 0 (map2 (*) (concat([A[0]], map (x. x * 2) (shift1L A))) A)",
    );
    let (out, bytes) = run(&g, &a, 1);
    let mut want = 0.0;
    for k in 0..n {
        let c = if k == 0 { a[0] } else { a[k] * 2.0 };
        want += c * a[k];
    }
    assert_eq!(out[0].to_bits(), want.to_bits());
    assert!(bytes <= 64, "{bytes} bytes");
}

#[test]
fn a_take_of_a_concat_read_by_a_loop_is_not_stored() {
    // The cotangent of a shift, `take(len A, concat(…, [0]))`, computed in
    // the loop that reads it.
    let f = compile(
        "def f(A: [R; n]) -> R = \
         reduce (+) 0 (map2 (*) (take(len(A), concat(map (x. x * 2) (shift1L A), [0.5]))) A)",
    );
    let a = data(10_000);
    let (out, bytes) = run(&f, &a, 1);
    let n = a.len();
    let mut want = 0.0;
    for k in 0..n {
        let c = if k + 1 < n { a[k + 1] * 2.0 } else { 0.5 };
        want += c * a[k];
    }
    assert_eq!(out[0].to_bits(), want.to_bits());
    assert!(bytes <= 64, "{bytes} bytes");
    // An empty A: the padded element is cut back to nothing.
    let (out, _) = run(&f, &[], 1);
    assert_eq!(out[0], 0.0);
}

#[test]
fn a_shifted_scan_read_in_order_is_not_stored() {
    // The gradient of a product: the prefix products are computed in the
    // map2's loop (the suffix products, a right scan, are stored).
    let f = compile(
        "def f(A: [R; n]) -> [R; n] = \
         map2 (*) (shift1L (scanr (*) 1 A)) (shift1R (scanl (*) 1 A))",
    );
    let a = data(1000);
    let n = a.len();
    let (out, bytes) = run(&f, &a, n);
    let mut suffix = vec![1.0; n + 1];
    for k in (0..n).rev() {
        suffix[k] = a[k] * suffix[k + 1];
    }
    let mut prefix = 1.0;
    for k in 0..n {
        assert_eq!(
            out[k].to_bits(),
            (suffix[k + 1] * prefix).to_bits(),
            "element {k}"
        );
        prefix *= a[k];
    }
    // The result and the right scan, not the left one.
    assert!(bytes <= 8 * (2 * n + 1) + 64, "{bytes} bytes");

    // A state of two reals, the states after each element.
    let g = compile(
        "def g(A: [R; n]) -> [R; n] = \
         map (p. p.0 - p.1) (shift1L (scanl ((s, q), x. (s + x, q * x)) (0, 1) A))",
    );
    let (out, bytes) = run(&g, &a, n);
    let (mut s, mut q) = (0.0, 1.0);
    for k in 0..n {
        s += a[k];
        q *= a[k];
        assert_eq!(out[k].to_bits(), (s - q).to_bits(), "element {k}");
    }
    assert!(bytes <= 8 * n + 64, "{bytes} bytes");
}

#[test]
fn a_shifted_scan_read_out_of_order_is_stored() {
    // A right scan reads from the last element, a shift skips the first:
    // the states are stored, and the results are the same.
    let f = compile(
        "def f(A: [R; n]) -> [R; n + n] = \
         concat(scanr (+) 0 (shift1L (scanl (*) 1 A)), shift1L (shift1L (scanl (+) 0 A)))",
    );
    let a = data(100);
    let n = a.len();
    let (out, _) = run(&f, &a, 2 * n);
    let mut prefix = vec![1.0; n + 1];
    let mut sums = vec![0.0; n + 1];
    for k in 0..n {
        prefix[k + 1] = prefix[k] * a[k];
        sums[k + 1] = sums[k] + a[k];
    }
    let mut right = vec![0.0; n + 1];
    for k in (0..n).rev() {
        right[k] = right[k + 1] + prefix[k + 1];
    }
    let want: Vec<f64> = right.iter().chain(&sums[2..]).copied().collect();
    assert_eq!(out.len(), want.len());
    for (k, (o, w)) in out.iter().zip(&want).enumerate() {
        assert_eq!(o.to_bits(), w.to_bits(), "element {k}");
    }
}

#[test]
fn an_element_of_a_map_of_a_range_is_computed_alone() {
    let f = compile(
        "def f(A: [R; n]) -> R = \
         (map (i. if i == 0 then 2 else 0) iota(len(A) + 1))[0] \
         + (map (i. i * 0.5) iota(len(A)))[-1]",
    );
    let a = data(1000);
    let (out, bytes) = run(&f, &a, 1);
    assert_eq!(out[0], 2.0 + 999.0 * 0.5);
    assert!(bytes <= 64, "{bytes} bytes");
}
