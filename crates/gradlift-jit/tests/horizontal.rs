//! Horizontal fusion: a fold over a stored `map` runs in the map's loop
//! when nothing it needs is computed after the map, and the results are
//! the interpreter's, bit for bit. Where the fold cannot ride along (it
//! reads a value computed from the map, its body can fail, the map's name
//! is shadowed), it runs as its own loop.

use gradlift_ad::inline::inline;
use gradlift_jit::Jit;
use gradlift_lang::{check_source, interp, Value};

/// The function's value by the JIT and by the interpreter (which must be
/// the same, bit for bit), and the number of loops in its Cranelift IR.
fn run(source: &str, args: &[Value]) -> (Value, usize) {
    let checked = check_source("<test>", source).unwrap();
    let last = checked.module.defs.len() - 1;
    let closed = inline(&checked, last);
    let jit = Jit::new().unwrap().verify(true);
    let got = jit.compile(&closed).unwrap().call(args).unwrap();
    let want = interp::call(&checked, last, args);
    match want {
        Ok(want) => assert!(got.same(&want), "JIT {got}, interpreter {want}"),
        Err(e) => panic!("the interpreter failed: {e}"),
    }
    // A loop is a block some later block branches back to.
    let clif = jit.clif(&closed).unwrap();
    let mut seen: Vec<String> = Vec::new();
    let mut headers = std::collections::BTreeSet::new();
    for line in clif.lines() {
        let l = line.trim();
        if l.starts_with("block") && l.contains(':') && !l.contains('=') {
            seen.push(l.split(['(', ':']).next().unwrap().to_string());
        } else if l.starts_with("brif") || l.starts_with("jump") {
            for w in l.split([' ', ',', '(']) {
                if w.starts_with("block") && seen.iter().any(|b| b == w) {
                    headers.insert(w.to_string());
                }
            }
        }
    }
    let loops = headers.len();
    (got, loops)
}

fn data(n: usize) -> Value {
    Value::reals(
        &(0..n)
            .map(|i| (i as f64 * 0.37).sin() * 3.0 + if i == 5 { f64::INFINITY } else { 0.0 })
            .collect::<Vec<_>>(),
    )
}

// (A `reduce` of reals by `(+)`, `(*)`, `max` or `min` combines its
// elements in lanes, not in a map's order: it never rides along; these
// tests use `foldl`.)

#[test]
fn a_fold_over_a_stored_map_runs_in_the_maps_loop() {
    // `t` and `s` ride along with `P`; `u` needs `t`, so it cannot. (Each
    // is used twice, or it would be computed where it is used.)
    let source = "def f(x: [R; n], a: R) -> (R, R, R, R, [R; n]) =
      let P = map (v. exp(v - a)) x in
      let t = foldl (acc, p. acc + p) 0 P in
      let s = foldl max (-inf) P in
      let u = foldl (acc, p. acc + p / t) 0 P in
      (t + s, t * s, u, u * 2, P)";
    let (_, loops) = run(source, &[data(50), Value::Real(0.5)]);
    // The map with `t` and `s`, then `u`, then the copy of `P` to the
    // result, which is two loops: 32 bytes an iteration, then the tail.
    assert_eq!(loops, 4);
}

#[test]
fn folds_that_cannot_ride_along_run_on_their_own() {
    for source in [
        // The fold's body indexes an array: it could fail before bindings
        // between the map and the fold do.
        "def f(x: [R; n], a: R) -> (R, R, R) =
           let P = map (v. v * a) x in
           let b = x[0] in
           let r = foldl (acc, p. acc + p * x[1]) b P in
           (r, r * 2, P[1])",
        // The start is computed after the map (from it).
        "def f(x: [R; n], a: R) -> (R, R, R) =
           let P = map (v. v * a) x in
           let b = P[0] + a in
           let r = foldl (acc, p. acc + p) b P in
           (r, r * 2, b)",
        // ... or not from it: still after it.
        "def f(x: [R; n], a: R) -> (R, R, R) =
           let P = map (v. v * a) x in
           let b = a * a in
           let r = foldl (acc, p. acc + p) b P in
           (r, r * 2, P[1] + b)",
    ] {
        let (_, loops) = run(source, &[data(20), Value::Real(1.5)]);
        assert_eq!(loops, 2, "{source}");
    }
}

#[test]
fn the_folds_of_an_empty_map_are_their_starts() {
    let source = "def f(x: [R; n], a: R) -> (R, R, R, R) =
      let P = map (v. v * a) x in
      let t = foldl (acc, p. acc + p) (-0.0) P in
      let m = foldl min inf P in
      (t, m, t * 2, m * 2)";
    let (got, loops) = run(source, &[data(0), Value::Real(1.5)]);
    assert_eq!(loops, 1);
    let want = [-0.0, f64::INFINITY, -0.0, f64::INFINITY].map(Value::Real);
    assert!(got.same(&Value::Tuple(want.to_vec().into())), "{got}");
    // And with elements: the interpreter's result, bit for bit (`run`).
    run(source, &[data(30), Value::Real(-1.5)]);
}

#[test]
fn a_fold_that_is_a_part_of_the_result_rides_along_a_map_reading_its_array() {
    // The fold reads `x`, which the map reads in full, in order: one loop.
    let source = "def f(x: [R; n]) -> (R, [R; n]) =
      (foldl (a, b. a * b) 1 x, map (v. v * 2) x)";
    let (_, loops) = run(source, &[data(40)]);
    assert_eq!(loops, 1);
    run(source, &[data(0)]);
    // Through a scan carried in the map's loop (prod's gradient, its
    // product a left fold): the product rides along the loop that reads
    // the prefix products; the right scan is its own loop.
    let source = "def f(x: [R; n]) -> (R, [R; n]) =
      (foldl (a, b. a * b) 1 x,
       map2 (a, b. a * b) (shift1L (scanr (a, b. a * b) 1 x)) (shift1R (scanl (a, b. a * b) 1 x)))";
    let (_, loops) = run(source, &[data(40)]);
    assert_eq!(loops, 2);
    run(source, &[data(1)]);
    run(source, &[data(0)]);
}

#[test]
fn folds_in_the_result_that_cannot_ride_along_run_on_their_own() {
    for source in [
        // The map reads the array shifted: not every element.
        "def f(x: [R; n + 1]) -> (R, [R; n]) =
           (foldl (a, b. a + b) 0 x, map (v. v * 2) (shift1L x))",
        // The fold's body indexes an array: it could fail.
        "def f(x: [R; n], y: [R; m]) -> (R, [R; n]) =
           (foldl (a, b. a + b * y[3]) 0 x, map (v. v * 2) x)",
        // The map reads another array.
        "def f(x: [R; n], y: [R; n]) -> (R, [R; n]) =
           (foldl (a, b. a + b) 0 x, map (v. v * 2) y)",
    ] {
        let checked = gradlift_lang::check_source("<test>", source).unwrap();
        let arity = checked.module.defs.last().unwrap().params.len();
        let args: Vec<Value> = (0..arity).map(|_| data(12)).collect();
        let (_, loops) = run(source, &args);
        assert_eq!(loops, 2, "{source}");
    }
    // An index out of bounds in the fold is the interpreter's error.
    let source = "def f(x: [R; n], y: [R; m]) -> (R, [R; n]) =
      (foldl (a, b. a + b * y[3]) 0 x, map (v. v * 2) x)";
    let checked = check_source("<test>", source).unwrap();
    let closed = inline(&checked, 0);
    let jit = Jit::new().unwrap().verify(true);
    let got = jit.compile(&closed).unwrap().call(&[data(5), data(2)]);
    assert!(got.is_err(), "{got:?}");
}

/// Rows of reals, some of them infinite, as a `[[R; d]; m]`.
fn rows(m: usize, d: usize) -> Value {
    Value::Array(
        (0..m)
            .map(|i| {
                Value::reals(
                    &(0..d)
                        .map(|j| {
                            ((i * d + j) as f64 * 0.61).cos()
                                + if i == 3 && j == 1 { f64::INFINITY } else { 0.0 }
                        })
                        .collect::<Vec<_>>(),
                )
            })
            .collect::<Vec<_>>()
            .into(),
    )
}

#[test]
fn folds_in_the_result_ride_along_a_stored_map_reading_its_pairs_with_an_input() {
    // The shape of a gradient with respect to a weight vector: `P` holds
    // per-row partials; the sum of the rows scaled by them (an array
    // updated in place) reads `zip(P, X)`, and a sum of reals reads `P`,
    // both deep in the result. Both ride along `P`'s loop.
    let riding = "def f(w: [R; d], X: [[R; d]; m], y: [R; m]) -> (R, [R; d], [R; m]) =
      let P = map2 (xi, yi. let t = reduce (+) 0 (map2 (*) w xi) in (t * yi, exp(-t))) X y in
      (foldl (acc, g. acc + g.1) 0 P / 2,
       map2 (+) w (foldl (acc, q. map2 (+) acc (map (b. b * q.0.0) q.1)) (replicate(d, 0)) (map2 (a, b. (a, b)) P X)),
       map (g. g.0 * 3) P)";
    // The same folds in a branch: evaluated only there, so not earlier.
    let alone = "def f(w: [R; d], X: [[R; d]; m], y: [R; m]) -> (R, [R; d], [R; m]) =
      let P = map2 (xi, yi. let t = reduce (+) 0 (map2 (*) w xi) in (t * yi, exp(-t))) X y in
      (if y[0] > 100 then 0 else foldl (acc, g. acc + g.1) 0 P / 2,
       if y[0] > 100 then w else map2 (+) w (foldl (acc, q. map2 (+) acc (map (b. b * q.0.0) q.1)) (replicate(d, 0)) (map2 (a, b. (a, b)) P X)),
       map (g. g.0 * 3) P)";
    let args = [data(4), rows(9, 4), data(9)];
    let (_, with) = run(riding, &args);
    let (_, without) = run(alone, &args);
    assert!(
        with + 2 <= without,
        "two loops fewer at least: {with}, {without}"
    );
    // The pairs the other way round; no rows; one row.
    let flipped = riding.replace(
        "q.0.0) q.1)) (replicate(d, 0)) (map2 (a, b. (a, b)) P X)",
        "q.1.0) q.0)) (replicate(d, 0)) (map2 (a, b. (a, b)) X P)",
    );
    let (_, loops) = run(&flipped, &args);
    assert_eq!(loops, with);
    run(riding, &[data(4), rows(0, 4), data(0)]);
    run(riding, &[data(4), rows(1, 4), data(1)]);
}

#[test]
fn folds_that_cannot_ride_along_a_stored_map_with_its_pairs_run_on_their_own() {
    for source in [
        // The step reads the accumulator shifted: not updated in place.
        "def f(w: [R; d], X: [[R; d]; m], y: [R; m]) -> [R; d] =
           let P = map2 (xi, yi. reduce (+) 0 (map2 (*) w xi) * yi) X y in
           foldl (acc, q. map2 (+) (concat([acc[0]], shift1L acc)) (map (b. b * q.0) q.1)) (replicate(d, 0)) (map2 (a, b. (a, b)) P X)",
        // The other array of the pairs is not the map's.
        "def f(w: [R; d], X: [[R; d]; m], Z: [[R; d]; m], y: [R; m]) -> [R; d] =
           let P = map2 (xi, yi. reduce (+) 0 (map2 (*) w xi) * yi) X y in
           foldl (acc, q. map2 (+) acc (map (b. b * q.0) q.1)) (replicate(d, 0)) (map2 (a, b. (a, b)) P Z)",
        // Inside a loop (the body of a map).
        "def f(w: [R; d], X: [[R; d]; m], y: [R; m]) -> [[R; d]; m] =
           map (c. let P = map2 (xi, yi. reduce (+) 0 (map2 (*) w xi) * yi * c) X y in
                   foldl (acc, q. map2 (+) acc (map (b. b * q.0) q.1)) (replicate(d, 0)) (map2 (a, b. (a, b)) P X)) y",
    ] {
        let checked = check_source("<test>", source).unwrap();
        let arity = checked.module.defs.last().unwrap().params.len();
        let args: Vec<Value> = match arity {
            3 => vec![data(3), rows(5, 3), data(5)],
            _ => vec![data(3), rows(5, 3), rows(5, 3), data(5)],
        };
        run(source, &args);
    }
}

#[test]
fn folds_ride_along_a_map_computed_two_elements_at_a_time() {
    // The map's elements are reals from an array by primitives: its loop
    // computes them in pairs, and the folds take their steps on each
    // element in order, the odd last one included.
    let source = "def f(x: [R; n], a: R) -> (R, R, R, R, [R; n]) =
      let P = map (v. exp(v - a) * 0.5) x in
      let t = foldl (acc, p. acc + p) 0 P in
      let s = foldl (acc, q. acc * 0.5 + q.0 * q.1) 1 (zip(P, x)) in
      (t + s, t * s, s, t, P)";
    for n in 0..10 {
        let (_, loops) = run(source, &[data(n), Value::Real(0.25)]);
        // The map with both folds, then the copy of `P` to the result.
        assert_eq!(loops, 3, "n = {n}");
    }
}
