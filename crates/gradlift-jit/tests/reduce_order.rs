//! A `reduce` of reals by `(+)`, `(*)`, `max` or `min` combines its
//! elements in the lanes of `gradlift_lang::reduce_order`, in native code
//! as in the interpreter: bit for bit, at every length around the lanes'
//! width, for elements that cost a few instructions (the unrolled loop)
//! and for elements that run a loop of their own (the rolled one).

use gradlift_ad::inline::inline;
use gradlift_jit::Jit;
use gradlift_lang::reduce_order::{reduce_in_lanes, LANES};
use gradlift_lang::{check_source, interp, Value};

/// Reals of very different magnitudes and both signs, so that any other
/// grouping of a sum or a product shows in the last bits.
fn reals(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let u = (s >> 11) as f64 / (1u64 << 53) as f64;
            let e = ((s >> 3) % 7) as i32 - 3;
            (u - 0.4) * 10f64.powi(e)
        })
        .collect()
}

fn check(source: &str, args: &[Value]) -> Value {
    let checked = check_source("<test>", source).unwrap();
    let want = interp::call(&checked, 0, args).unwrap();
    let closed = inline(&checked, 0);
    let f = Jit::new().unwrap().verify(true).compile(&closed).unwrap();
    let got = f.call(args).unwrap();
    assert!(
        got.same(&want),
        "{source} at {args:?}: native {got}, interpreter {want}"
    );
    want
}

#[test]
fn native_code_and_the_interpreter_reduce_in_the_same_order() {
    let y = Value::reals(&[0.5, -1.25, 2.0]);
    for (op, z) in [
        ("(+)", "0.25"),
        ("(*)", "1"),
        ("max", "(-1e300)"),
        ("min", "1e300"),
    ] {
        for body in [
            // A few instructions an element: the unrolled loop.
            "v * 1.5 - 0.25",
            // A loop an element: the rolled one.
            "v * reduce (+) 0 (map (u. u * v) y)",
        ] {
            let source =
                format!("def f(x: [R; n], y: [R; 3]) -> R = reduce {op} {z} (map (v. {body}) x)");
            for n in 0..=4 * LANES + 3 {
                let x = Value::reals(&reals(n, n as u64));
                check(&source, &[x, y.clone()]);
            }
        }
    }
}

#[test]
fn the_lanes_are_those_documented() {
    // Left to right, each 1 is lost against 1e16; in lanes the ones meet
    // each other first.
    let mut x = vec![1.0; 2 * LANES + 1];
    x[0] = 1e16;
    let source = "def f(x: [R; n]) -> R = reduce (+) 0 x";
    let got = check(source, &[Value::reals(&x)]).as_real().unwrap();
    let left = x.iter().fold(0.0, |a, b| a + b);
    assert_eq!(left, 1e16);
    assert_eq!(got, 1e16 + (2 * LANES) as f64);
    // And exactly the shared definition, for sums of random reals.
    for n in [5, 17, 100, 1001] {
        let x = reals(n, 7 + n as u64);
        let got = check(
            "def f(x: [R; n]) -> R = reduce (+) 0.5 (map (v. v * v) x)",
            &[Value::reals(&x)],
        );
        let want =
            reduce_in_lanes::<()>(-0.0, 0.5, n, |i| Ok(x[i] * x[i]), |a, b| Ok(a + b)).unwrap();
        assert_eq!(got.as_real().unwrap().to_bits(), want.to_bits(), "n = {n}");
    }
}

#[test]
fn other_reductions_are_left_folds() {
    // An integer sum, and a sum by a function that is not a primitive,
    // are folded from the left.
    let mut x = vec![1.0; 2 * LANES + 1];
    x[0] = 1e16;
    let got = check(
        "def f(x: [R; n]) -> R = reduce (a, b. b + a) 0 x",
        &[Value::reals(&x)],
    );
    assert_eq!(got.as_real(), Some(1e16));
}

#[test]
fn long_arrays_are_reduced_in_chunks_from_the_left() {
    use gradlift_lang::reduce_order::{chunk_in_lanes, CHUNK};
    // The chunks' results are combined from the left: a sum of chunks
    // whose results are 1e16, then ones, loses the ones one chunk at a
    // time as a left fold does; within a chunk the lanes meet first.
    let y = Value::reals(&[0.5, -1.25, 2.0]);
    for (op, z) in [
        ("(+)", "0.25"),
        ("(*)", "1"),
        ("max", "(-1e300)"),
        ("min", "1e300"),
    ] {
        for body in [
            "v * 1.5 - 0.25",
            "v * reduce (+) 0 (map (u. u * v) y)",
            // Not computed in pairs: a condition.
            "if v > 0 then v else v * 0.5",
        ] {
            let source =
                format!("def f(x: [R; n], y: [R; 3]) -> R = reduce {op} {z} (map (v. {body}) x)");
            for n in [
                CHUNK - 1,
                CHUNK,
                CHUNK + 1,
                CHUNK + 4,
                2 * CHUNK + 7,
                3 * CHUNK,
            ] {
                let x = Value::reals(&reals(n, n as u64));
                check(&source, &[x, y.clone()]);
            }
        }
    }
    // Exactly the shared definition: two chunks, then the third.
    let n = 2 * CHUNK + 3;
    let x = reals(n, 11);
    let got = check(
        "def f(x: [R; n]) -> R = reduce (+) 0.5 x",
        &[Value::reals(&x)],
    );
    let mut add = |a: f64, b: f64| Ok::<f64, ()>(a + b);
    let part = |k: usize, add: &mut dyn FnMut(f64, f64) -> Result<f64, ()>| {
        let from = k * CHUNK;
        let len = CHUNK.min(n - from);
        chunk_in_lanes(-0.0, len, |i| Ok(x[from + i]), &mut |a, b| add(a, b)).unwrap()
    };
    let (r0, r1, r2) = (part(0, &mut add), part(1, &mut add), part(2, &mut add));
    let want = 0.5 + ((r0 + r1) + r2);
    assert_eq!(got.as_real().unwrap().to_bits(), want.to_bits());
    // A constant length of one chunk or less needs no loop over chunks;
    // its order is the same.
    let x = reals(CHUNK, 3);
    check(
        &format!("def f(x: [R; {CHUNK}]) -> R = reduce (+) 0 x"),
        &[Value::reals(&x)],
    );
}
