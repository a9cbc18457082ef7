//! Arrays copied whole — a parameter returned in the result, the parts of
//! a `concat`, rows stored into a nested array — are moved 32 bytes at a
//! time with a tail of single reals. At every length from 0 to 40 (every
//! remainder of the 32-byte blocks, with and without whole blocks) the
//! native results are the interpreter's bit for bit, NaNs and signed
//! zeros included, and nothing next to the copied region is touched.

use gradlift_ad::inline::inline;
use gradlift_jit::Jit;
use gradlift_lang::{check_source, interp, Value};

/// Reals with a NaN, signed zeros and infinities among them.
fn reals(n: usize, salt: usize) -> Vec<f64> {
    let pool = [
        1.5,
        -0.0,
        f64::NAN,
        0.0,
        -7.25,
        f64::INFINITY,
        3.0,
        f64::NEG_INFINITY,
    ];
    (0..n)
        .map(|i| pool[(i + salt) % pool.len()] + (i % 3) as f64)
        .collect()
}

/// `source`'s function on arguments of length `n` (made by `args`)
/// for every `n` in 0..=40, natively and on the interpreter.
fn agrees(source: &str, args: impl Fn(usize) -> Vec<Value>) {
    let checked = check_source("<test>", source).unwrap();
    let jit = Jit::new().unwrap().verify(true);
    let compiled = jit
        .compile(&inline(&checked, 0))
        .unwrap_or_else(|e| panic!("{e}\n{source}"));
    for n in 0..=40 {
        let args = args(n);
        let want = interp::call(&checked, 0, &args).unwrap();
        let got = compiled.call(&args).unwrap();
        assert!(
            got.same(&want),
            "n = {n}: JIT {got}, interpreter {want}\n{source}"
        );
    }
}

#[test]
fn a_parameter_returned_is_copied_into_the_result() {
    agrees("def f(x: [R; n]) -> [R; n] = x", |n| {
        vec![Value::reals(&reals(n, 0))]
    });
    // Two copies side by side in the output, and a real between.
    agrees(
        "def f(x: [R; n], y: [R; n]) -> ([R; n], R, [R; n]) = (y, 2, x)",
        |n| vec![Value::reals(&reals(n, 0)), Value::reals(&reals(n, 5))],
    );
}

#[test]
fn the_parts_of_a_concat_are_copied() {
    agrees(
        "def f(x: [R; n], y: [R; m]) -> [R; n + m] = concat(x, y)",
        |n| vec![Value::reals(&reals(n, 1)), Value::reals(&reals(41 - n, 2))],
    );
    // A part of odd length first, so the copied one starts 24 bytes in.
    agrees(
        "def f(x: [R; n]) -> [R; n + 3] = concat([1, 2, 3], x)",
        |n| vec![Value::reals(&reals(n, 3))],
    );
}

#[test]
fn rows_are_copied_into_a_nested_array() {
    let matrix = |n: usize| Value::array((0..3).map(|r| Value::reals(&reals(n, r))).collect());
    agrees("def f(M: [[R; d]; m]) -> [[R; d]; m] = M", |n| {
        vec![matrix(n)]
    });
    agrees(
        "def f(M: [[R; d]; m]) -> ([[R; d]; m], [R; d]) = (M, M[1])",
        |n| vec![matrix(n)],
    );
}

#[test]
fn nothing_past_a_copy_is_written() {
    let checked = check_source(
        "<test>",
        "def f(x: [R; n], y: [R; n]) -> ([R; n], R, [R; n]) = (y, 2, x)",
    )
    .unwrap();
    let compiled = Jit::new()
        .unwrap()
        .verify(true)
        .compile(&inline(&checked, 0))
        .unwrap();
    for n in 0..=40 {
        let (x, y) = (reals(n, 0), reals(n, 4));
        // Room for 64 reals more than the result, each a sentinel.
        let sentinel = -12345.5;
        let mut out = vec![sentinel; 2 * n + 1 + 64];
        compiled
            .call_flat(&[n as i64], &[&x, &y], &mut out)
            .unwrap();
        let want: Vec<f64> = y
            .iter()
            .copied()
            .chain([2.0])
            .chain(x.iter().copied())
            .collect();
        for (i, (got, want)) in out.iter().zip(&want).enumerate() {
            assert_eq!(got.to_bits(), want.to_bits(), "n = {n}, element {i}");
        }
        assert!(
            out[2 * n + 1..].iter().all(|v| *v == sentinel),
            "n = {n}: written past the result"
        );
    }
}
