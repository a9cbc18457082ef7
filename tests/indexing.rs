//! Computed indices (`A[e]`), `gather` and `reduce_by_index`: every engine
//! agrees (the interpreter, native code, both routes of reverse mode, with
//! finite differences: the `pipeline` oracle); an index out of range is an
//! error with its position in the interpreter and a status natively; the
//! gradient of m lookups into n elements costs O(m + n).

mod support;

use gradlift::{Jit, Program, Value};
use support::pipeline_oracle::check_program;

fn ints(xs: &[i64]) -> Value {
    Value::array(xs.iter().map(|&k| Value::Int(k)).collect())
}

fn reals(xs: &[f64]) -> Value {
    Value::reals(xs)
}

/// Every engine agrees on `text`'s last function, finite differences
/// included.
fn everywhere(text: &str, args: &[Value]) {
    let jit = Jit::new().unwrap().verify(true);
    let outcome = check_program(text, args, false, &jit);
    assert!(outcome.native && outcome.gradients, "{text}");
    assert!(outcome.finite_differences > 0, "{text}");
}

/// The gradient of `text`'s last function at `args`, interpreted and
/// native (which must agree bit for bit).
fn gradient(text: &str, args: &[Value]) -> (f64, Vec<Value>) {
    let program = Program::parse("t.grad", text).unwrap_or_else(|e| panic!("{e}"));
    let f = program.last_function().unwrap();
    let g = f.gradient(None, Default::default()).unwrap();
    let interpreted = g.eval(args).unwrap();
    let native = g.compile(&Jit::new().unwrap()).unwrap().call(args).unwrap();
    assert_eq!(interpreted.0.to_bits(), native.0.to_bits());
    for (a, b) in interpreted.1.iter().zip(&native.1) {
        assert!(a.same(b), "{a} vs {b}");
    }
    interpreted
}

/// How the gradient cost of `text`'s last function grows when every size
/// doubles from 10,000 (2 for linear growth).
fn doubling_ratio(text: &str) -> f64 {
    use gradlift::ad::cost::gradient_cost;
    let program = Program::parse("t.grad", text).unwrap();
    let f = program.last_function().unwrap();
    let closed = f.closed().unwrap();
    let g = f.gradient(None, Default::default()).unwrap();
    let cost = gradient_cost(&closed.context(), &closed.size_vars, g.term()).unwrap();
    let at = |n: f64| -> f64 {
        let sizes = closed.size_vars.iter().map(|v| (v.clone(), n)).collect();
        cost.eval(&sizes).iter().sum()
    };
    at(2e4) / at(1e4)
}

const W: [f64; 5] = [0.5, -1.2, 2.0, 0.3, 1.7];

#[test]
fn computed_indices_of_every_kind() {
    // An element of an integer array, `i * d + j`, a map parameter over
    // indices, a negative index counting from the end.
    let text = "def f(w: [R; n], idx: [Z; m], k: Z) -> R =
  let a = reduce (+) 0 (map (i. w[idx[i]] * w[i]) (iota(m))) in
  let b = w[k * 2 + 1] * w[-1] + w[k - 5] in
  a + b * b";
    everywhere(text, &[reals(&W), ints(&[4, 0, -2, 4]), Value::Int(1)]);
    // A matrix read through a flat index.
    let text = "def g(flat: [R; r], d: Z, rows: [Z; m]) -> R =
  reduce (+) 0 (map (i. let row = rows[i] in flat[row * d] * flat[row * d + 1]) (iota(m)))";
    everywhere(
        text,
        &[
            reals(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
            Value::Int(2),
            ints(&[2, 0, 2]),
        ],
    );
}

#[test]
fn indexing_arrays_of_arrays_and_tuples() {
    let text = "def f(m: [[R; d]; n], p: [(R, R); n], idx: [Z; k]) -> R =
  reduce (+) 0 (map (j. let row = m[idx[j]] in
    let q = p[idx[j]] in
    reduce (+) 0 (map (x. x * q.0) row) + q.1 * q.1) (iota(k)))";
    let m = Value::array(vec![
        reals(&[1.0, 2.0]),
        reals(&[3.0, -1.0]),
        reals(&[0.5, 0.25]),
    ]);
    let p = Value::array(vec![
        Value::tuple(vec![Value::Real(1.5), Value::Real(-0.5)]),
        Value::tuple(vec![Value::Real(2.0), Value::Real(0.7)]),
        Value::tuple(vec![Value::Real(-1.0), Value::Real(0.1)]),
    ]);
    everywhere(text, &[m, p, ints(&[2, 2, 0, 1])]);
}

#[test]
fn gather_and_reduce_by_index_with_each_operator() {
    let text = "def f(w: [R; n], idx: [Z; m], x: [R; m]) -> R =
  let g = gather(w, idx) in
  let s = map2 (a, b. a * b) g x in
  let h = reduce_by_index(replicate(n, 0.0), (+), idx, s) in
  let hi = reduce_by_index(map (v. v * 0.5) w, max, idx, x) in
  let lo = reduce_by_index(w, min, idx, map (v. v * v) x) in
  let pr = reduce_by_index(map (v. v + 1.0) w, (*), idx, map (v. v - 0.5) x) in
  reduce (+) 0 (map (i. (h[i] + hi[i] * 2.0 - lo[i]) * w[i] + pr[i] * pr[i]) (iota(n)))";
    everywhere(
        text,
        &[
            reals(&W),
            ints(&[2, 0, 2, -1, 1, 2]),
            reals(&[1.5, 0.7, -0.4, 2.2, 0.9, 3.1]),
        ],
    );
    // Rows: `+` adds them component by component.
    let text = "def g(e: [[R; d]; v], bag: [Z; m], c: [R; m]) -> R =
  let rows = map2 (r, k. map (x. x * k) r) (gather(e, bag)) c in
  let sums = reduce_by_index(map (r. map (x. 0.0) r) e, (+), bag, rows) in
  reduce (+) 0 (map (r. reduce (+) 0 (map (x. x * x) r)) sums)";
    let e = Value::array(vec![
        reals(&[1.0, 2.0]),
        reals(&[3.0, -1.0]),
        reals(&[0.5, 0.25]),
    ]);
    everywhere(
        text,
        &[
            e,
            ints(&[1, 1, 0, 2, 1]),
            reals(&[0.5, 1.5, -2.0, 1.0, 0.25]),
        ],
    );
}

#[test]
fn products_by_index_with_zeros_get_exact_cotangents() {
    // Bin 0: one zero among its values; bin 1: two zeros; bin 2: none; the
    // initial value of bin 3 is the zero.
    let text = "def f(d: [R; 4], x: [R; 6]) -> R =
  let p = reduce_by_index(d, (*), [0, 0, 1, 1, 2, 3], x) in
  p[0] + 2.0 * p[1] + 3.0 * p[2] + 4.0 * p[3]";
    let args = [
        reals(&[2.0, 3.0, 0.5, 0.0]),
        reals(&[0.0, 1.5, 0.0, 0.0, -2.0, 7.0]),
    ];
    let (v, g) = gradient(text, &args);
    assert_eq!(v, 0.0 + 0.0 + 3.0 * (0.5 * -2.0) + 0.0);
    // Bin 0's cotangent reaches only its zero: ∂/∂x₀ = 2 · 1.5.
    assert!(
        g[0].same(&reals(&[0.0, 0.0, 3.0 * -2.0, 4.0 * 7.0])),
        "{}",
        g[0]
    );
    assert!(
        g[1].same(&reals(&[3.0, 0.0, 0.0, 0.0, 3.0 * 0.5, 0.0])),
        "{}",
        g[1]
    );
    everywhere(
        text,
        &[
            reals(&[2.0, 3.0, 0.5, 1.5]),
            reals(&[0.25, 1.5, -1.0, 3.0, -2.0, 7.0]),
        ],
    );
}

#[test]
fn extremum_ties_send_the_cotangent_to_the_first_contributor() {
    let text = "def f(d: [R; 2], x: [R; 4]) -> R =
  let m = reduce_by_index(d, max, [0, 0, 1, 1], x) in
  m[0] + 10.0 * m[1]";
    // Bin 0: the two values tie above the initial one; bin 1: the initial
    // value ties with one of the values.
    let (v, g) = gradient(text, &[reals(&[-1.0, 5.0]), reals(&[2.0, 2.0, 5.0, 1.0])]);
    assert_eq!(v, 52.0);
    assert!(g[0].same(&reals(&[0.0, 10.0])), "{}", g[0]);
    assert!(g[1].same(&reals(&[1.0, 0.0, 0.0, 0.0])), "{}", g[1]);
}

#[test]
fn an_index_out_of_range_is_an_error_with_its_position() {
    let text = "def f(w: [R; n], idx: [Z; m]) -> R =
  let g = gather(w, idx) in
  let h = reduce_by_index(w, (+), idx, g) in
  w[idx[0] * 3] + h[0]";
    let program = Program::parse("t.grad", text).unwrap();
    let f = program.function("f").unwrap();
    let native = f.compile(&Jit::new().unwrap()).unwrap();
    let w = reals(&[1.0, 2.0, 3.0]);
    for (idx, says, column) in [
        (
            vec![0, 5],
            "`gather`: index 5 (element 1 of the indices)",
            11,
        ),
        (vec![-4], "`gather`: index -4", 11),
        (vec![i64::MIN], "`gather`: index -9223372036854775808", 11),
        (
            vec![1],
            "index 3 is out of bounds for an array of length 3",
            3,
        ),
    ] {
        let args = [w.clone(), ints(&idx)];
        let err = f.eval(&args).expect_err("out of range");
        assert!(err.to_string().contains(says), "{idx:?}: {err}");
        assert_eq!(
            err.span().map(|s| s.start as usize),
            Some(
                text.find(if column == 11 { "gather(" } else { "w[idx[0]" })
                    .unwrap()
            ),
            "{idx:?}: {err}"
        );
        let err = native.call(&args).expect_err("out of range natively");
        assert!(err.to_string().contains("out of bounds"), "{idx:?}: {err}");
    }
    // Every engine agrees in range, negative indices included.
    assert!(f
        .eval(&[w.clone(), ints(&[-1, 0])])
        .unwrap()
        .same(&native.call(&[w, ints(&[-1, 0])]).unwrap()));
}

#[test]
fn forward_mode_agrees_with_reverse_mode_for_every_operator() {
    for op in ["(+)", "(*)", "min", "max"] {
        let text = format!(
            "def f(w: [R; n], idx: [Z; m], x: [R; m]) -> R =
  let h = reduce_by_index(map (v. v * 0.5) w, {op}, idx, map2 (a, b. a * b) (gather(w, idx)) x) in
  reduce (+) 0 (map (i. h[idx[i]] * w[idx[i]] + h[i] * h[i]) (iota(n)))"
        );
        let program = Program::parse("t.grad", &text).unwrap();
        let f = program.function("f").unwrap();
        let args = [
            reals(&[0.5, -1.0, 2.0]),
            ints(&[2, 0, 2, 1]),
            reals(&[1.5, 0.0, -0.75, 2.0]),
        ];
        let dirs = [
            reals(&[1.0, 0.5, -0.25]),
            ints(&[0, 0, 0, 0]),
            reals(&[0.5, 2.0, 1.0, -1.0]),
        ];
        let (_, g) = gradient(&text, &args);
        let mut want = 0.0;
        for (g, d) in g.iter().zip([&dirs[0], &dirs[2]]) {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            g.flatten(&mut a);
            d.flatten(&mut b);
            want += a.iter().zip(&b).map(|(x, y)| x * y).sum::<f64>();
        }
        for jit in [None, Some(Jit::new().unwrap())] {
            let (_, d) = f.jvp(&args, &dirs, jit.as_ref()).unwrap();
            let d = d.as_real().unwrap();
            assert!(
                (d - want).abs() < 1e-12 * (1.0 + want.abs()),
                "{op}: {d} vs {want}"
            );
        }
        // Forward over reverse: a Hessian-vector product through the rules.
        let h = f.hvp(&args, &dirs, None).unwrap();
        let step = 1e-6;
        let shifted = |s: f64| {
            let moved: Vec<Value> = args
                .iter()
                .zip(&dirs)
                .map(|(a, d)| match a {
                    Value::Array(xs) if xs.first().is_some_and(|x| x.as_real().is_some()) => {
                        let (mut x, mut v) = (Vec::new(), Vec::new());
                        a.flatten(&mut x);
                        d.flatten(&mut v);
                        reals(&x.iter().zip(&v).map(|(x, v)| x + s * v).collect::<Vec<_>>())
                    }
                    _ => a.clone(),
                })
                .collect();
            gradient(&text, &moved).1
        };
        let (up, down) = (shifted(step), shifted(-step));
        for k in 0..2 {
            let (mut hv, mut a, mut b) = (Vec::new(), Vec::new(), Vec::new());
            h.hvp[k].flatten(&mut hv);
            up[k].flatten(&mut a);
            down[k].flatten(&mut b);
            for ((h, a), b) in hv.iter().zip(&a).zip(&b) {
                let fd = (a - b) / (2.0 * step);
                assert!(
                    (h - fd).abs() < 1e-5 * (1.0 + fd.abs()),
                    "{op}: Hv {h} vs {fd}"
                );
            }
        }
    }
}

#[test]
fn the_gradient_of_lookups_is_linear_in_lookups_and_elements() {
    use gradlift::ad::cost::{cost, gradient_cost};
    let text = "def f(w: [R; n], idx: [Z; m], x: [R; m]) -> R =
  reduce (+) 0 (map (i. w[idx[i]] * x[i] + w[idx[i] + 1]) (iota(m)))";
    let program = Program::parse("t.grad", text).unwrap();
    let f = program.function("f").unwrap();
    let closed = f.closed().unwrap();
    let g = f.gradient(None, Default::default()).unwrap();
    let ctx = closed.context();
    let total = |c: &gradlift::ad::cost::Cost, n: f64, m: f64| -> f64 {
        let sizes = [("n", n), ("m", m)]
            .into_iter()
            .map(|(k, v)| (gradlift::Name::from(k), v))
            .collect();
        c.eval(&sizes).iter().sum()
    };
    let primal = cost(&ctx, &closed.size_vars, &closed.body).unwrap();
    let grad = gradient_cost(&ctx, &closed.size_vars, g.term()).unwrap();
    // Doubling both sizes doubles the cost: no n·m term.
    for (n, m) in [(1e3, 1e3), (1e4, 1e2), (1e2, 1e4)] {
        let ratio = total(&grad, 2.0 * n, 2.0 * m) / total(&grad, n, m);
        assert!((ratio - 2.0).abs() < 0.01, "{n} {m}: {ratio}");
        assert!(total(&grad, n, m) <= 12.0 * total(&primal, n, m) + 4.0 * n);
    }
}

#[test]
fn programs_with_indices_print_and_read_back() {
    let text = "def f(w: [R; n], idx: [Z; m], x: [R; m], k: Z) -> R =
  let h = reduce_by_index(replicate(n, 0.0), (+), idx, gather(w, idx)) in
  let lo = reduce_by_index(w, min, idx, x) in
  h[k * 2 - 1] + lo[idx[k]] + w[-1] + w[2]";
    let checked = gradlift::lang::check_source("t.grad", text).unwrap();
    let printed = checked.module.to_string();
    let again = gradlift::lang::check_source("t.grad", &printed).unwrap();
    assert!(again.module.same(&checked.module), "{printed}");
}

#[test]
fn ill_typed_indexing_is_refused_with_a_message() {
    for (text, says) in [
        ("def f(w: [R; n], x: R) -> R = w[x]", "an index must be an integer"),
        ("def f(w: [R; n]) -> R = w[1.5]", "an index must be an integer"),
        (
            "def f(w: [R; n], i: [R; m]) -> [R; m] = gather(w, i)",
            "the indices of `gather` must be an array of integers",
        ),
        (
            "def f(w: [R; n], i: [Z; m]) -> [R; n] = reduce_by_index(w, (-), i, w)",
            "the operator of `reduce_by_index` is one of",
        ),
        (
            "def f(w: [R; n], i: [Z; m], v: [R; k]) -> [R; n] = reduce_by_index(w, (+), i, v)",
            "as many values as indices",
        ),
        (
            "def f(w: [(R, R); n], i: [Z; m], v: [(R, R); m]) -> [(R, R); n] = reduce_by_index(w, max, i, v)",
            "takes values that are reals",
        ),
    ] {
        let err = gradlift::lang::check_source("t.grad", text).expect_err("refused");
        assert!(err.to_string().contains(says), "{text}: {err}");
    }
}

#[test]
fn folds_reading_by_index_are_exact_and_linear_with_any_checkpointing() {
    let scalar = "def r(w: [R; n], idx: [Z; m]) -> R =
  FOLD (acc, i. acc * 0.9 + w[idx[i]] * w[idx[i]] + w[i % 2]) 0.0 (iota(m))";
    let pair = "def s(w: [R; n], idx: [Z; m]) -> R =
  let (a, b) = FOLD ((a, b), i. (a * 0.9 + w[idx[i]] * b, b + w[i % 2] * 0.1)) (0.0, 1.0) (iota(m)) in
  a + b";
    let args = [reals(&W), ints(&[2, 0, 2, -1, 1, 4, 3])];
    for text in [scalar, pair] {
        for fold in [
            "foldl",
            "@checkpoint(2) foldl",
            "@checkpoint(binomial 2) foldl",
        ] {
            let text = text.replace("FOLD", fold);
            everywhere(&text, &args);
            if fold != "foldl" {
                continue;
            }
            let ratio = doubling_ratio(&text);
            assert!((ratio - 2.0).abs() < 0.01, "{text}: {ratio}");
        }
    }
}

#[test]
fn scans_reading_by_index_are_exact() {
    for scan in ["scanl", "scanr"] {
        let text = format!(
            "def s(w: [R; n], idx: [Z; m]) -> R =
  reduce (+) 0 ({scan} (acc, i. acc * 0.5 + w[idx[i]] * w[idx[i]]) 0.25 (iota(m)))"
        );
        everywhere(&text, &[reals(&W), ints(&[2, 0, 2, -1, 1, 4, 3])]);
        let text = format!(
            "def s(w: [R; n], idx: [Z; m]) -> R =
  reduce (+) 0 (map (p. p.0 * p.1) ({scan} ((a, b), i. (a * 0.5 + w[idx[i]], b + w[i % 3])) (0.25, 1.0) (iota(m))))"
        );
        everywhere(&text, &[reals(&W), ints(&[2, 0, 2, -1, 1, 4, 3])]);
    }
}

#[test]
fn reads_inside_a_branch_stay_linear_and_exact() {
    let text = "def f(w: [R; n], idx: [Z; m], x: [R; m]) -> R =
  reduce (+) 0 (map (i. if x[i] > 0 then w[idx[i]] * x[i] else w[idx[m - 1 - i]] + w[0] * x[i]) (iota(m)))";
    let args = [
        reals(&W),
        ints(&[2, 0, 2, -1, 1, 4]),
        reals(&[1.5, -0.5, 2.0, -1.0, 0.25, 3.0]),
    ];
    everywhere(text, &args);
    let ratio = doubling_ratio(text);
    assert!((ratio - 2.0).abs() < 0.01, "{ratio}");
    // The branch that reads `w` is never taken and `w` is empty: the
    // records the other branch pads with have nowhere to go, and are not
    // scattered.
    let text = "def g(w: [R; n], idx: [Z; m], x: [R; m], k: Z) -> R =
  reduce (+) 0 (map (i. if k > 0 then w[idx[i]] * x[i] else x[i] * x[i]) (iota(m)))";
    let args = [
        reals(&[]),
        ints(&[0, 0]),
        reals(&[1.5, -2.0]),
        Value::Int(0),
    ];
    let (v, g) = gradient(text, &args);
    assert_eq!(v, 1.5 * 1.5 + 4.0);
    assert!(g[0].same(&reals(&[])), "{}", g[0]);
    assert!(g[1].same(&reals(&[3.0, -4.0])), "{}", g[1]);
    everywhere(
        text,
        &[
            reals(&[1.0, 2.0]),
            ints(&[1, 0]),
            reals(&[1.5, -2.0]),
            Value::Int(1),
        ],
    );
}
