//! Loops whose sources test the index (a `concat` with a part of constant
//! length, a one-hot map of a range) run their interior with the tests
//! decided and their first and last iterations as they are. They agree
//! with the interpreter bit for bit at every length, including those too
//! short to have an interior.

use gradlift_ad::inline::inline;
use gradlift_jit::Jit;
use gradlift_lang::{check_source, interp, Value};

/// `f(x, v)` at every length of `x` from 0 to 7 and at 40, against the
/// interpreter; `v` and the elements include a NaN and signed zeros.
fn agrees(source: &str) {
    let checked = check_source("<test>", source).unwrap();
    let jit = Jit::new().unwrap().verify(true);
    let compiled = jit
        .compile(&inline(&checked, 0))
        .unwrap_or_else(|e| panic!("{e}\n{source}"));
    let pool = [1.5, -0.0, 2.25, f64::NAN, -3.0, 0.0, 7.0];
    for n in (0..=7).chain([40]) {
        let x: Vec<f64> = (0..n).map(|i| pool[i % pool.len()] + i as f64).collect();
        for v in [0.5, -0.0, f64::NAN] {
            let args = [Value::reals(&x), Value::Real(v)];
            let want = interp::call(&checked, 0, &args);
            let got = compiled.call(&args);
            match (got, want) {
                (Ok(got), Ok(want)) => assert!(
                    got.same(&want),
                    "n = {n}, v = {v}: JIT {got}, interpreter {want}\n{source}"
                ),
                (Err(_), Err(_)) => {}
                (got, want) => panic!("n = {n}: JIT {got:?}, interpreter {want:?}\n{source}"),
            }
        }
    }
}

#[test]
fn concats_with_a_part_of_constant_length() {
    // One part of constant length first, one last, in the same loop.
    agrees(
        "def f(x: [R; n], v: R) -> [R; n + 1] =
           map2 (a, b. a * b + a) (concat([v], x)) (concat(x, [v * 2]))",
    );
    // Nested: the inner `concat`'s test changes near the end.
    agrees(
        "def f(x: [R; n], v: R) -> [R; n + 3] =
           map (a. a * 3 - v) (concat([v, v + 1], concat(x, [v])))",
    );
    // Shifted, so the tests change one element later or earlier.
    agrees(
        "def f(x: [R; n], v: R) -> [R; n] =
           map2 (a, b. a - b) (shift1L (concat([v], x))) (shift1R (concat(x, [v])))",
    );
}

#[test]
fn folds_and_right_scans_over_concats() {
    agrees(
        "def f(x: [R; n], v: R) -> R =
           foldl (a, e. a * 0.5 + e) v (concat([v], map (a. a * 3) x))",
    );
    // `scanr` reads its elements from the last: the interior is mirrored.
    agrees(
        "def f(x: [R; n], v: R) -> [R; n + 3] =
           scanr (a, e. a * 0.5 - e) v (concat([v], concat(x, [v + 1])))",
    );
    agrees("def f(x: [R; n], v: R) -> R = reduce (+) 0 (concat(x, [v, 2 * v]))");
}

#[test]
fn one_hot_maps_of_ranges() {
    // The reverse of `x[c]`: zero but at `c`, which may be past the end.
    agrees(
        "def f(x: [R; n], v: R) -> [R; n] =
           map2 (+) x (map (i. if i == 2 then v else 0.5) iota(n))",
    );
    agrees(
        "def f(x: [R; n], v: R) -> [R; n] =
           let r = iota(n) in
           map2 (a, b. a * b) (map (i. if 0 == i then v else 0) r)
             (map2 (+) x (map (i. if i == 5 then v * v else -0.0) r))",
    );
    // Inside a loop, with the range bound outside it.
    agrees(
        "def f(x: [R; n], v: R) -> [R; n] =
           let r = iota(n) in
           foldl (acc, k. map2 (+) acc (map (i. if i == 1 then k + v else 0) r)) x iota(3)",
    );
    // Shifted one-hots and a `concat` in one loop.
    agrees(
        "def f(x: [R; n], v: R) -> [R; n] =
           map2 (+) (shift1L (concat([v], map (i. if i == 0 then v else 1) iota(n))))
                    (shift1R (map (i. if i == 3 then 2 else v) iota(n + 1)))",
    );
}

#[test]
fn the_interior_decides_the_tests() {
    // The interior of `map2 (+) x onehot` adds the one-hot's zero: its
    // test (an integer comparison) and the `concat`'s are at the edges.
    let source = "def f(x: [R; n], v: R) -> [R; n] =
      map2 (+) (concat([v], shift1L x)) (map (i. if i == 0 then v else 0) iota(n))";
    let checked = check_source("<test>", source).unwrap();
    let clif = Jit::new().unwrap().clif(&inline(&checked, 0)).unwrap();
    assert_eq!(clif.matches("select").count(), 1, "{clif}");
    // One `fadd` at the edges, one in the interior.
    assert_eq!(clif.matches("= fadd").count(), 2, "{clif}");
    agrees(source);
}
