//! The tail of a `reduce` in lanes (the last `len mod 4` elements) runs
//! as a short loop that copies nothing on entry or exit
//! (`Translator::for_range_short`). Nested inside two loops, as in a
//! k-means cost, at every row length from 0 to 11 — every tail length,
//! with and without whole blocks of lanes, in pairs and not — the native
//! results are the interpreter's, bit for bit.

use gradlift_ad::inline::inline;
use gradlift_jit::Jit;
use gradlift_lang::{check_source, interp, Value};

fn matrix(rows: usize, cols: usize, salt: usize) -> Value {
    Value::array(
        (0..rows)
            .map(|r| {
                let row: Vec<f64> = (0..cols)
                    .map(|c| ((r * 7 + c * 3 + salt) % 11) as f64 * 0.37 - 1.9)
                    .collect();
                Value::reals(&row)
            })
            .collect(),
    )
}

fn agrees(source: &str) {
    let checked = check_source("<test>", source).unwrap();
    let last = checked.module.defs.len() - 1;
    let closed = inline(&checked, last);
    for threads in [1, 2] {
        let jit = Jit::new().unwrap().verify(true).threads(threads);
        let compiled = jit.compile(&closed).unwrap();
        for d in 0..=11 {
            let args = [matrix(5, d, 1), matrix(3, d, 4)];
            let got = compiled.call(&args).unwrap();
            let want = interp::call(&checked, last, &args).unwrap();
            assert!(
                got.same(&want),
                "d = {d}, {threads} threads: JIT {got}, interpreter {want}"
            );
        }
    }
}

#[test]
fn tails_of_nested_reduces_are_the_interpreters() {
    // The distance's elements in pairs.
    agrees(
        "def dist2(a: [R; d], b: [R; d]) -> R =
           reduce (+) 0 (map2 (ai, bi. (ai - bi) * (ai - bi)) a b)
         def f(P: [[R; d]; n], C: [[R; d]; k]) -> R =
           reduce (+) 0 (map (p. reduce min inf (map (c. dist2(c, p)) C)) P)",
    );
    // Not in pairs: each element reads a `reduce` of its own.
    agrees(
        "def f(P: [[R; d]; n], C: [[R; d]; k]) -> R =
           reduce (+) 0 (map (p. reduce max (-inf) (map (c.
             reduce (*) 1 (map2 (a, b. a - b + reduce (+) 0 c) c p)) C)) P)",
    );
}
