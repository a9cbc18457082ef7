//! A fold whose accumulator is one array that its step rewrites element by
//! element (the step ends in a `map` or `map2` over the accumulator, its
//! only mention of it) updates the array where it is; rows a step leaves
//! as they are are not copied onto themselves. The results are the
//! interpreter's, bit for bit, in place or not: a step that reads the
//! accumulator anywhere else builds the next array apart.

use gradlift_ad::inline::inline;
use gradlift_jit::Jit;
use gradlift_lang::{check_source, interp, Value};

/// Runs the last definition of `source` by the JIT and by the interpreter
/// and checks that they agree bit for bit.
fn agree(source: &str, args: &[Value]) -> Value {
    let checked = check_source("<test>", source).unwrap();
    let last = checked.module.defs.len() - 1;
    let closed = inline(&checked, last);
    let jit = Jit::new().unwrap().verify(true);
    let got = jit.compile(&closed).unwrap().call(args).unwrap();
    let want = interp::call(&checked, last, args).expect("the interpreter runs it");
    assert!(got.same(&want), "{source}\nJIT {got}, interpreter {want}");
    got
}

fn reals(n: usize, k: f64) -> Value {
    Value::reals(
        &(0..n)
            .map(|i| ((i as f64 + k) * 0.37).sin() * 3.0)
            .collect::<Vec<_>>(),
    )
}

fn rows(m: usize, d: usize) -> Value {
    Value::array((0..m).map(|i| reals(d, i as f64 * 1.7)).collect())
}

#[test]
fn steps_that_rewrite_the_accumulator_elementwise_agree_with_the_interpreter() {
    for source in [
        // A map over the accumulator.
        "def f(A: [R; n], z: [R; k]) -> [R; k] = foldl (acc, x. map (a. a * 0.5 + x) acc) z A",
        // A map2 with another array, the accumulator second.
        "def f(A: [R; n], z: [R; k]) -> [R; k] = foldl (acc, x. map2 (b, a. a + b * x) z acc) z A",
        // `let`s before the map, which read the element only.
        "def f(A: [R; n], z: [R; k]) -> [R; k] =
           foldl (acc, x. let s = exp(x) in let t = s * s in map (a. a - t) acc) z A",
        // A reduction with an array accumulator.
        "def f(A: [R; n], z: [R; k]) -> [R; k] =
           reduce (u, v. map2 (+) u v) z (map (x. map (b. b * x) z) A)",
    ] {
        agree(source, &[reals(7, 0.0), reals(5, 3.0)]);
        agree(source, &[reals(0, 0.0), reals(5, 3.0)]);
        agree(source, &[reals(9, 0.0), reals(0, 3.0)]);
    }
}

#[test]
fn rows_left_unchanged_by_an_in_place_step_keep_their_values() {
    // The kmeans shape: each step adds to one row of the accumulator and
    // leaves the others as they are (in place: not copied onto themselves).
    let source = "def f(P: [[R; d]; n], C: [[R; d]; k]) -> [[R; d]; k] =
      foldl (acc, p. map2 (row, j. if j == 1 then map2 (+) row p else row) acc iota(k)) C P";
    let got = agree(source, &[rows(6, 4), rows(3, 4)]);
    // Rows 0 and 2 are the centroids as given.
    let (Value::Array(got), Value::Array(c)) = (&got, &rows(3, 4)) else {
        panic!("arrays")
    };
    assert!(got[0].same(&c[0]) && got[2].same(&c[2]), "{got:?}");
    agree(source, &[rows(0, 4), rows(3, 4)]);
    agree(source, &[rows(5, 0), rows(3, 0)]);
}

#[test]
fn steps_that_read_the_accumulator_elsewhere_build_the_next_array_apart() {
    let prelude = "def sum_rows(M: [[R; d]; m]) -> [R; m] = map (r. reduce (+) 0 r) M\n";
    for source in [
        // The map's function reads another element of the accumulator.
        "def f(A: [R; n], z: [R; k]) -> [R; k] = foldl (acc, x. map (a. a + acc[0] * x) acc) z A",
        // A `let` before the map reads it (a reduction of it).
        "def f(A: [R; n], z: [R; k]) -> [R; k] =
           foldl (acc, x. let s = reduce (+) 0 acc in map (a. a * x - s) acc) z A",
        // A row of the accumulator read shifted while it is rewritten.
        "def f(A: [R; n], z: [R; k]) -> [R; k] =
           let Z = map (a. map (b. b * a) z) z in
           sum_rows(foldl (acc, x. map (row. map2 (+) row (concat([x], shift1R row))) acc) Z A)",
        // The accumulator reversed.
        "def f(A: [R; n], z: [R; k]) -> [R; k] =
           foldl (acc, x. map2 (a, b. a + b * x) acc (concat(drop(1, acc), take(1, acc)))) z A",
    ] {
        let source = format!("{prelude}{source}");
        agree(&source, &[reals(6, 0.0), reals(5, 2.0)]);
        agree(&source, &[reals(6, 0.0), reals(1, 2.0)]);
    }
}
