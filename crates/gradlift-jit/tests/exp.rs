//! `exp` and `tanh` are emitted inline: their native code must give the
//! bits of the interpreter's [`gradlift_lang::exp::exp`] and
//! [`gradlift_lang::exp::tanh`] on every input, and stay within one unit
//! (`exp`) or three (`tanh`: ours is within three units of the exact value,
//! the C library's within two) in the last place of the C library's.

use gradlift_ad::inline::inline;
use gradlift_jit::Jit;
use gradlift_lang::{check_source, interp, Value};

/// Inputs over the whole range: both sides of every boundary of the code
/// (the fast case's |k| < 130,000, about |x| < 703.9; the clamps at −746
/// and 710; overflow at 709.78 and the subnormal range below −708.4), the
/// special values, and a deterministic sweep.
fn inputs() -> Vec<f64> {
    let fast_edge = 130_000.0 * std::f64::consts::LN_2 / 128.0;
    let mut xs = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        f64::MIN_POSITIVE,
        1e-300,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        -f64::NAN,
        f64::MAX,
        f64::MIN,
        709.782_712_893_383_9,
        709.782_712_893_384_1,
        710.0,
        -745.13,
        -745.2,
        -746.0,
        -1e300,
    ];
    for edge in [fast_edge, -fast_edge, 708.4, -708.4, 744.0, -744.0] {
        for i in -20..=20 {
            xs.push(edge + i as f64 * 1e-3);
        }
    }
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    for i in 0..20_000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let u = (state >> 11) as f64 / (1u64 << 53) as f64;
        xs.push(match i % 3 {
            0 => -750.0 + 1465.0 * u,
            1 => -3.0 + 6.0 * u,
            _ => (u - 0.5) * 1e-9,
        });
    }
    xs
}

/// Compiles `map (v. NAME(v)) x` and checks it against the interpreter
/// (bit for bit), `ours` and the C library's `libc` (within `units`).
fn agrees(name: &str, ours: fn(f64) -> f64, libc: fn(f64) -> f64, units: u64, xs: &[f64]) {
    let source = format!("def f(x: [R; n]) -> [R; n] = map (v. {name}(v)) x");
    let checked = check_source("<test>", &source).unwrap();
    let compiled = Jit::new()
        .unwrap()
        .verify(true)
        .compile(&inline(&checked, 0))
        .unwrap();
    let got = compiled.call(&[Value::reals(xs)]).unwrap();
    let want = interp::call(&checked, 0, &[Value::reals(xs)]).unwrap();
    let (Value::Array(got), Value::Array(want)) = (got, want) else {
        panic!("arrays expected");
    };
    for ((x, g), w) in xs.iter().zip(got.iter()).zip(want.iter()) {
        let (Value::Real(g), Value::Real(w)) = (g, w) else {
            panic!("reals expected");
        };
        assert!(
            g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
            "{name}({x:e}): native {g:e}, interpreter {w:e}"
        );
        assert_eq!(w.to_bits(), ours(*x).to_bits());
        let reference = libc(*x);
        if reference.is_nan() {
            assert!(g.is_nan(), "{name}({x:e}) = {g:e}");
        } else {
            let off = (g.to_bits() as i64 - reference.to_bits() as i64).unsigned_abs();
            assert!(
                off <= units,
                "{name}({x:e}): native {g:e}, C library {reference:e}"
            );
        }
    }
}

#[test]
fn native_exp_has_the_interpreters_bits() {
    agrees("exp", gradlift_lang::exp::exp, f64::exp, 1, &inputs());
}

#[test]
fn exp_of_a_pair_with_one_slow_lane_has_the_interpreters_bits() {
    // A map of `exp` runs in pairs of lanes; when one lane leaves the fast
    // range, both take the slow branch. Every input beside every value of
    // the slow range (large, subnormal results, infinite, NaN), in both
    // lanes: `[x, s, s, x]` puts `x` first in one pair and second in the
    // next.
    let slow = [
        710.0,
        -746.0,
        -708.5,
        709.7,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        1e300,
    ];
    let mut xs = Vec::new();
    for &x in &inputs() {
        for &s in &slow {
            xs.extend([x, s, s, x]);
        }
    }
    agrees("exp", gradlift_lang::exp::exp, f64::exp, 1, &xs);
}

#[test]
fn native_tanh_has_the_interpreters_bits() {
    // The same sweep scaled to where tanh is not ±1, and the bound.
    let mut xs: Vec<f64> = inputs().iter().map(|x| x / 30.0).collect();
    for i in -40..=40 {
        xs.push(22.0 + i as f64 * 1e-3);
        xs.push(-22.0 + i as f64 * 1e-3);
    }
    xs.extend([5e-324, -5e-324, 1e-300, 1e-9, -0.0, 0.0]);
    agrees("tanh", gradlift_lang::exp::tanh, f64::tanh, 3, &xs);
}

#[test]
fn exp_in_folds_and_branches_agrees_with_the_interpreter() {
    // In a fold's step, in one side of a branch (with `tanh`), nested, and
    // next to a call of the C library. (Gradients with `exp` run in the examples' tests:
    // logsumexp, logistic regression.)
    let source = "def f(x: [R; n], v: R) -> R =
      let s = foldl (acc, a. acc + exp(a - v)) 0 x in
      let t = if v > 0 then exp(v) * tanh(-v) else log(1 + exp(v)) in
      s * t + reduce (+) 0 (map (a. exp(exp(a) - 3)) x)";
    let checked = check_source("<test>", source).unwrap();
    let jit = Jit::new().unwrap().verify(true);
    let compiled = jit.compile(&inline(&checked, 0)).unwrap();
    let xs = [-800.0, -1.5, 0.0, 0.25, 3.0, 700.0];
    for v in [-2.0, 0.5, 720.0, f64::NAN] {
        let args = [Value::reals(&xs), Value::Real(v)];
        let want = interp::call(&checked, 0, &args).unwrap();
        let got = compiled.call(&args).unwrap();
        assert!(got.same(&want), "v = {v}: native {got}, interpreter {want}");
    }
}
