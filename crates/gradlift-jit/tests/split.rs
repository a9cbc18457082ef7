//! Loops split across the `Jit`'s thread pool (`split.rs`): a long map or
//! reduce of reals computed in pairs runs as fixed chunks on the pool, and
//! gives the interpreter's bits — so the same bits — on 1, 2 and 8
//! threads, called from one thread or from several at once.

use gradlift_ad::inline::inline;
use gradlift_jit::Jit;
use gradlift_lang::reduce_order::CHUNK;
use gradlift_lang::{check_source, interp, Value};

/// Reals of very different magnitudes and both signs (any other grouping
/// of a sum shows in the last bits), with a NaN, an infinity and signed
/// zeros at fixed places when `special`.
fn reals(n: usize, seed: u64, special: bool) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut xs: Vec<f64> = (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let u = (s >> 11) as f64 / (1u64 << 53) as f64;
            let e = ((s >> 3) % 7) as i32 - 3;
            (u - 0.4) * 10f64.powi(e)
        })
        .collect();
    if special && n > 40_000 {
        xs[17] = -0.0;
        xs[CHUNK + 3] = f64::INFINITY;
        xs[2 * CHUNK + 1] = 0.0;
        xs[40_000] = f64::NAN;
    }
    xs
}

const PROGRAMS: &[&str] = &[
    // A map of a map2 with a real computed before it, and a shift.
    "def f(x: [R; n], y: [R; n], a: R) -> [R; n - 1] =
       let b = a * 2 in
       map2 (u, v. exp(u * 0.01 - b) * v + tanh(v)) (shift1L x) (shift1R (map2 (p, q. p - q * a) y x))",
    // Reduces in lanes of fused maps, by each lane primitive.
    "def f(x: [R; n], y: [R; n], a: R) -> R = reduce (+) 0.5 (map2 (u, v. u * v - a) x y)",
    "def f(x: [R; n], y: [R; n], a: R) -> R = reduce (*) 1 (map (u. 1 + u * 1e-6 * a) x)",
    "def f(x: [R; n], y: [R; n], a: R) -> R = reduce max (-inf) (map2 (u, v. sigmoid(u) - v) x y)",
    "def f(x: [R; n], y: [R; n], a: R) -> R = reduce min inf (map2 (u, v. max(u, v * a)) x y)",
    // Conditions and integers: an index compared with one computed
    // before the loop (a one-hot cotangent), `and`, `not`, integer
    // arithmetic on the index, a component of a tuple.
    "def f(x: [R; n], y: [R; n], a: R) -> [R; n] =
       let k = (int(a * 1000), a) in
       map2 (u, i. if i == k.0 or (i * 3 - 1 > 70000 and not (u < k.1)) then u * a else (if u < 0.1 then -u else u + 1)) x (iota(n))",
    "def f(x: [R; n], y: [R; n], a: R) -> R =
       reduce (+) 0 (map2 (u, i. if i == 5 then u else 0.5 * u) x (iota(n)))",
    // A log-sum-exp: a reduce, a map, a reduce of the map.
    "def f(x: [R; n], y: [R; n], a: R) -> (R, [R; n]) =
       let m = reduce max (-inf) x in
       let e = map (v. exp(v - m)) x in
       (m + log(reduce (+) 0 e), e)",
];

fn run(source: &str, n: usize, special: bool, threads: &[usize]) {
    let checked = check_source("<test>", source).unwrap();
    let closed = inline(&checked, 0);
    let args = [
        Value::reals(&reals(n, n as u64, special)),
        Value::reals(&reals(n, 3 * n as u64 + 1, special)),
        Value::Real(0.75),
    ];
    let want = interp::call(&checked, 0, &args).unwrap();
    for &k in threads {
        let f = Jit::new()
            .unwrap()
            .verify(true)
            .threads(k)
            .compile(&closed)
            .unwrap();
        let got = f.call(&args).unwrap();
        assert!(
            got.same(&want),
            "{source} at n = {n} on {k} threads: {got} vs {want}"
        );
    }
}

#[test]
fn split_loops_give_the_interpreters_bits_on_any_number_of_threads() {
    for source in PROGRAMS {
        for n in [7 * CHUNK, 7 * CHUNK + 1, 8 * CHUNK + 3, 8 * CHUNK + 4] {
            run(source, n, true, &[1, 2, 8]);
        }
        // Past the runtime's batch of 64 chunks at a time.
        if source.contains("reduce (+)") {
            run(source, 64 * CHUNK + 5, false, &[2]);
        }
        // Below the threshold, the chunks run in turn on the calling thread.
        for n in [1001, 3 * CHUNK, 3 * CHUNK + 1, 5 * CHUNK + 3] {
            run(source, n, false, &[2]);
        }
    }
}

#[test]
fn long_loops_are_split_and_short_ones_are_not() {
    let source = PROGRAMS[1];
    let checked = check_source("<test>", source).unwrap();
    let closed = inline(&checked, 0);
    let f = Jit::new().unwrap().threads(2).compile(&closed).unwrap();
    let args = |n: usize| {
        [
            Value::reals(&reals(n, 1, false)),
            Value::reals(&reals(n, 2, false)),
            Value::Real(0.5),
        ]
    };
    let before = gradlift_jit::split_calls();
    f.call(&args(8 * CHUNK)).unwrap();
    assert!(gradlift_jit::split_calls() > before);
    // On one thread nothing is split (other tests may split meanwhile, so
    // this one compares the results only).
    let one = Jit::new().unwrap().threads(1).compile(&closed).unwrap();
    assert!(one
        .call(&args(8 * CHUNK))
        .unwrap()
        .same(&f.call(&args(8 * CHUNK)).unwrap()));
}

#[test]
fn a_split_function_is_callable_from_several_threads_at_once() {
    let source = PROGRAMS[7];
    let checked = check_source("<test>", source).unwrap();
    let closed = inline(&checked, 0);
    let f = Jit::new().unwrap().threads(2).compile(&closed).unwrap();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|k| {
                let (f, checked) = (&f, &checked);
                s.spawn(move || {
                    let n = 7 * CHUNK + 100 * k;
                    let args = [
                        Value::reals(&reals(n, k as u64, false)),
                        Value::reals(&reals(n, 9, false)),
                        Value::Real(0.25),
                    ];
                    let want = interp::call(checked, 0, &args).unwrap();
                    for _ in 0..3 {
                        assert!(f.call(&args).unwrap().same(&want));
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    });
}
