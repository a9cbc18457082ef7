//! `gradlift gradbench` end to end: a scripted protocol exchange through the
//! binary, and every module's outputs at small sizes against a direct Rust
//! implementation of its formulas (including the ode gradient, by a
//! tangent-linear Runge–Kutta, and the kmeans Newton direction).

use serde_json::{json, Value as Json};
use std::io::Write;
use std::process::{Command, Output, Stdio};

/// Runs `gradlift gradbench` on `messages`, one per line.
fn session_output(lines: &[String]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_gradlift"))
        .arg("gradbench")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the gradlift binary runs");
    let mut stdin = child.stdin.take().expect("stdin");
    for line in lines {
        writeln!(stdin, "{line}").expect("write a message");
    }
    drop(stdin);
    child.wait_with_output().expect("gradlift finishes")
}

/// The answers to `messages` (the session must end cleanly).
fn session(messages: &[Json]) -> Vec<Json> {
    let lines: Vec<String> = messages.iter().map(Json::to_string).collect();
    let out = session_output(&lines);
    assert!(
        out.status.success(),
        "gradlift gradbench failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("UTF-8 answers")
        .lines()
        .map(|l| serde_json::from_str(l).expect("every answer is one JSON object"))
        .collect()
}

/// Defines `module` and evaluates `function` on each input; the outputs.
fn outputs(module: &str, calls: &[(&str, Json)]) -> Vec<Json> {
    let mut messages = vec![
        json!({"id": 0, "kind": "start", "eval": module}),
        json!({"id": 1, "kind": "define", "module": module}),
    ];
    for (i, (function, input)) in calls.iter().enumerate() {
        messages.push(json!({
            "id": 2 + i, "kind": "evaluate", "module": module,
            "function": function, "input": input
        }));
    }
    let answers = session(&messages);
    assert_eq!(answers.len(), messages.len());
    assert_eq!(answers[1]["success"], json!(true), "{}", answers[1]);
    answers[2..]
        .iter()
        .map(|a| {
            assert_eq!(a["success"], json!(true), "{a}");
            a["output"].clone()
        })
        .collect()
}

fn reals(v: &Json) -> Vec<f64> {
    match v {
        Json::Array(xs) => xs.iter().flat_map(reals).collect(),
        x => vec![x.as_f64().expect("a number")],
    }
}

#[track_caller]
fn assert_close(got: &Json, want: &[f64]) {
    let got = reals(got);
    assert_eq!(got.len(), want.len(), "{got:?} against {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g - w).abs() <= 1e-10 * (1.0 + w.abs()),
            "{got:?} against {want:?}"
        );
    }
}

/// Deterministic reals in [0, 1).
fn sample(n: usize, seed: u64) -> Vec<f64> {
    let mut state = seed;
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 11) as f64 / (1u64 << 53) as f64
        })
        .collect()
}

#[test]
fn a_scripted_session_answers_every_message_in_order() {
    let messages = [
        json!({"id": 0, "kind": "start", "eval": "hello"}),
        json!({"id": 1, "kind": "define", "module": "hello"}),
        json!({"id": 2, "kind": "evaluate", "module": "hello", "function": "square", "input": 3.0}),
        json!({"id": 3, "kind": "evaluate", "module": "hello", "function": "double", "input": 9.0}),
        json!({"id": 4, "kind": "analysis", "of": 3, "valid": true}),
        json!({"id": 5, "kind": "define", "module": "hessians"}),
        json!({"id": 6, "kind": "evaluate", "module": "lse", "function": "primal", "input": {"x": [1]}}),
        json!({"id": 7, "kind": "evaluate", "module": "hello", "function": "cube", "input": 2}),
        json!({"id": 8, "kind": "evaluate", "module": "hello", "function": "square", "input": [1, 2]}),
        json!({"id": 9, "kind": "define", "module": "ode"}),
        // s must be a whole number.
        json!({"id": 10, "kind": "evaluate", "module": "ode", "function": "primal",
               "input": {"x": [1, 2], "s": 1.5}}),
        json!({"id": 11, "kind": "evaluate", "module": "hello", "function": "square",
               "input": {"x": 2, "min_runs": 5, "min_seconds": 0}}),
        json!({"id": 12, "kind": "evaluate", "module": "hello", "function": "double",
               "input": {"x": 2, "min_runs": 1, "min_seconds": 0.02}}),
        json!({"id": 13, "kind": "something else"}),
        json!({"id": 14, "kind": "evaluate", "module": "ode", "function": "gradient",
               "input": {"x": [1, 2], "s": 1, "min_runs": -1}}),
        json!({"id": 15, "kind": "evaluate", "module": "hello", "function": "square",
               "input": {"x": 2, "runs": 3}}),
    ];
    let answers = session(&messages);
    assert_eq!(answers.len(), messages.len());
    for (i, a) in answers.iter().enumerate() {
        assert_eq!(a["id"], json!(i), "answers come in order: {a}");
    }
    assert_eq!(answers[0], json!({"id": 0, "tool": "gradlift"}));
    assert_eq!(answers[1]["success"], json!(true));
    let compile = &answers[1]["timings"][0];
    assert_eq!(compile["name"], json!("compile"));
    assert!(compile["nanoseconds"].as_u64().unwrap() > 0);
    assert_eq!(answers[2]["output"], json!(9.0));
    assert_eq!(answers[3]["output"], json!(18.0));
    assert_eq!(answers[3]["timings"][0]["name"], json!("evaluate"));
    assert_eq!(answers[4], json!({"id": 4}));
    let failed = |i: usize, needle: &str| {
        assert_eq!(answers[i]["success"], json!(false), "{}", answers[i]);
        let error = answers[i]["error"].as_str().expect("an error message");
        assert!(
            error.contains(needle),
            "`{error}` should mention `{needle}`"
        );
    };
    failed(5, "no module `hessians`");
    failed(6, "`lse` is not defined");
    failed(7, "no function `cube`");
    failed(8, "x");
    assert_eq!(answers[9]["success"], json!(true));
    failed(10, "s");
    // The tool kept serving after the errors.
    assert_eq!(answers[11]["output"], json!(4.0));
    assert_eq!(answers[11]["timings"].as_array().unwrap().len(), 5);
    let total: u64 = answers[12]["timings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["nanoseconds"].as_u64().unwrap())
        .sum();
    assert!(total >= 20_000_000, "min_seconds is honoured: {total} ns");
    assert_eq!(answers[13], json!({"id": 13}));
    failed(14, "min_runs");
    assert_eq!(answers[15]["timings"].as_array().unwrap().len(), 3);
}

#[test]
fn a_message_that_is_not_json_is_a_clean_error() {
    let out = session_output(&[
        json!({"id": 0, "kind": "start", "eval": "hello"}).to_string(),
        "{not json".to_string(),
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("error: line 2"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        r#"{"id":0,"tool":"gradlift"}"#
    );
    let out = session_output(&[json!({"kind": "start"}).to_string()]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("`id`"));
}

/// LSE(x) and its gradient, softmax(x).
fn lse(x: &[f64]) -> (f64, Vec<f64>) {
    let a = x.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let sum: f64 = x.iter().map(|v| (v - a).exp()).sum();
    let value = a + sum.ln();
    (value, x.iter().map(|v| (v - value).exp()).collect())
}

#[test]
fn lse_matches_the_formula() {
    for (n, seed) in [(1, 1), (5, 2), (40, 3)] {
        let x: Vec<f64> = sample(n, seed).iter().map(|v| 200.0 * v - 100.0).collect();
        let out = outputs(
            "lse",
            &[("primal", json!({"x": x})), ("gradient", json!({"x": x}))],
        );
        let (value, gradient) = lse(&x);
        assert_close(&out[0], &[value]);
        assert_close(&out[1], &gradient);
    }
}

/// y(x) = ½ Σᵢ (sᵢ − Σⱼ xⱼ tᵢʲ)² and ∂y/∂xⱼ = −Σᵢ rᵢ tᵢʲ.
fn llsq(x: &[f64], n: usize) -> (f64, Vec<f64>) {
    let mut value = 0.0;
    let mut gradient = vec![0.0; x.len()];
    for i in 0..n {
        let t = -1.0 + 2.0 * i as f64 / (n as f64 - 1.0);
        let s = if t > 0.0 {
            1.0
        } else if t < 0.0 {
            -1.0
        } else {
            0.0
        };
        let powers: Vec<f64> = (0..x.len()).map(|j| t.powi(j as i32)).collect();
        let r = s - x.iter().zip(&powers).map(|(a, p)| a * p).sum::<f64>();
        value += 0.5 * r * r;
        for (g, p) in gradient.iter_mut().zip(&powers) {
            *g -= r * p;
        }
    }
    (value, gradient)
}

#[test]
fn llsq_matches_the_formula() {
    for (m, n, seed) in [(1, 2, 4), (3, 5, 5), (8, 33, 6)] {
        let x = sample(m, seed);
        let input = json!({"x": x, "n": n});
        let out = outputs("llsq", &[("primal", input.clone()), ("gradient", input)]);
        let (value, gradient) = llsq(&x, n);
        assert_close(&out[0], &[value]);
        assert_close(&out[1], &gradient);
    }
}

/// The final y of the Runge–Kutta solve, and its derivative along `dx`
/// (the tangent-linear solve: every stage differentiated by hand).
fn ode(x: &[f64], dx: &[f64], s: usize) -> (Vec<f64>, Vec<f64>) {
    let n = x.len();
    let h = 2.0 / s as f64;
    // f(x, y) and its derivative along (dx, dy).
    let f = |y: &[f64], dy: &[f64]| -> (Vec<f64>, Vec<f64>) {
        let mut v = vec![x[0]; n];
        let mut dv = vec![dx[0]; n];
        for i in 1..n {
            v[i] = x[i] * y[i - 1];
            dv[i] = dx[i] * y[i - 1] + x[i] * dy[i - 1];
        }
        (v, dv)
    };
    let axpy = |a: f64, u: &[f64], v: &[f64]| -> Vec<f64> {
        u.iter().zip(v).map(|(ui, vi)| a * ui + vi).collect()
    };
    let (mut y, mut dy) = (vec![0.0; n], vec![0.0; n]);
    for _ in 0..s {
        let (k1, dk1) = f(&y, &dy);
        let (k2, dk2) = f(&axpy(h / 2.0, &k1, &y), &axpy(h / 2.0, &dk1, &dy));
        let (k3, dk3) = f(&axpy(h / 2.0, &k2, &y), &axpy(h / 2.0, &dk2, &dy));
        let (k4, dk4) = f(&axpy(h, &k3, &y), &axpy(h, &dk3, &dy));
        for i in 0..n {
            y[i] += h / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]);
            dy[i] += h / 6.0 * (dk1[i] + 2.0 * dk2[i] + 2.0 * dk3[i] + dk4[i]);
        }
    }
    (y, dy)
}

#[test]
fn ode_matches_runge_kutta_and_its_tangent() {
    for (n, s, seed) in [(1, 1, 7), (4, 10, 8), (9, 3, 9)] {
        let x = sample(n, seed);
        let input = json!({"x": x, "s": s});
        let out = outputs("ode", &[("primal", input.clone()), ("gradient", input)]);
        let (y, _) = ode(&x, &vec![0.0; n], s);
        assert_close(&out[0], &y);
        // ∂y[n-1]/∂x[j], one tangent solve per j.
        let gradient: Vec<f64> = (0..n)
            .map(|j| {
                let mut dx = vec![0.0; n];
                dx[j] = 1.0;
                ode(&x, &dx, s).1[n - 1]
            })
            .collect();
        assert_close(&out[1], &gradient);
    }
}

/// The cost, and J ⊘ H: every point pulls its nearest centroid with
/// gradient 2(Cⱼ − Pᵢ) and second derivative 2 per coordinate.
fn kmeans(points: &[Vec<f64>], centroids: &[Vec<f64>]) -> (f64, Vec<f64>) {
    let d = centroids[0].len();
    let mut cost = 0.0;
    let mut jacobian = vec![vec![0.0; d]; centroids.len()];
    let mut hessian = vec![vec![0.0; d]; centroids.len()];
    for p in points {
        let dist = |c: &Vec<f64>| c.iter().zip(p).map(|(a, b)| (a - b) * (a - b)).sum::<f64>();
        let (best, c) = centroids
            .iter()
            .enumerate()
            .min_by(|a, b| dist(a.1).total_cmp(&dist(b.1)))
            .expect("a centroid");
        cost += dist(c);
        for k in 0..d {
            jacobian[best][k] += 2.0 * (c[k] - p[k]);
            hessian[best][k] += 2.0;
        }
    }
    let dir = jacobian
        .iter()
        .flatten()
        .zip(hessian.iter().flatten())
        .map(|(j, h)| j / h)
        .collect();
    (cost, dir)
}

#[test]
fn kmeans_matches_the_formula() {
    for (n, k, d, seed) in [(3, 1, 1, 10), (20, 4, 3, 11), (50, 7, 8, 12)] {
        let flat = sample(n * d, seed);
        let points: Vec<Vec<f64>> = flat.chunks(d).map(<[f64]>::to_vec).collect();
        // The last k points as centroids, as GradBench does: no cluster is empty.
        let centroids = points[n - k..].to_vec();
        let input = json!({"points": points, "centroids": centroids});
        let out = outputs("kmeans", &[("cost", input.clone()), ("dir", input)]);
        let (cost, dir) = kmeans(&points, &centroids);
        assert_close(&out[0], &[cost]);
        assert_close(&out[1], &dir);
        assert_eq!(
            out[1].as_array().unwrap().len(),
            k,
            "dir has one row per centroid"
        );
    }
    // A point as near to two centroids counts once, for the first.
    let input = json!({"points": [[1.0], [3.0], [0.5]], "centroids": [[0.0], [2.0]]});
    let out = outputs("kmeans", &[("cost", input.clone()), ("dir", input)]);
    assert_close(&out[0], &[2.25]);
    // Centroid 0 has the points 1 and 0.5: J = 2(0 − 1) + 2(0 − 0.5), H = 4.
    assert_close(&out[1], &[-0.75, -1.0]);
}

/// GradBench's lstm objective, directly: `main` is 2l rows of 4b (weights
/// and biases of each layer, gates forget, input, output, change),
/// `extra` 3 rows of b, `state` 2l rows of b (hidden, cell), `sequence`
/// c rows of b.
fn lstm(main: &[Vec<f64>], extra: &[Vec<f64>], state: &[Vec<f64>], sequence: &[Vec<f64>]) -> f64 {
    let b = extra[0].len();
    let sigmoid = |x: f64| 1.0 / (1.0 + (-x).exp());
    let mut state = state.to_vec();
    let mut total = 0.0;
    for t in 0..sequence.len() - 1 {
        let mut x: Vec<f64> = (0..b).map(|i| sequence[t][i] * extra[0][i]).collect();
        for k in 0..main.len() / 2 {
            let (w, bias) = (&main[2 * k], &main[2 * k + 1]);
            let (h, c) = (state[2 * k].clone(), state[2 * k + 1].clone());
            for i in 0..b {
                let forget = sigmoid(x[i] * w[i] + bias[i]);
                let ingate = sigmoid(h[i] * w[b + i] + bias[b + i]);
                let outgate = sigmoid(x[i] * w[2 * b + i] + bias[2 * b + i]);
                let change = (h[i] * w[3 * b + i] + bias[3 * b + i]).tanh();
                state[2 * k + 1][i] = c[i] * forget + ingate * change;
                state[2 * k][i] = outgate * state[2 * k + 1][i].tanh();
            }
            x = state[2 * k].clone();
        }
        let y: Vec<f64> = (0..b).map(|i| x[i] * extra[1][i] + extra[2][i]).collect();
        let lse = (y.iter().map(|v| v.exp()).sum::<f64>() + 2.0).ln();
        total += (0..b)
            .map(|i| sequence[t + 1][i] * (y[i] - lse))
            .sum::<f64>();
    }
    -total / (b * (sequence.len() - 1)) as f64
}

#[test]
fn lstm_matches_the_formula_and_its_jacobian_finite_differences() {
    for (l, b, c, seed) in [(1, 1, 2, 20), (2, 3, 5, 21), (3, 2, 4, 22)] {
        let rows = |n: usize, w: usize, s: u64| -> Vec<Vec<f64>> {
            sample(n * w, s).chunks(w).map(<[f64]>::to_vec).collect()
        };
        let main = rows(2 * l, 4 * b, seed);
        let extra = rows(3, b, seed + 100);
        let state = rows(2 * l, b, seed + 200);
        let sequence: Vec<Vec<f64>> = rows(c, b, seed + 300)
            .into_iter()
            .map(|r| r.into_iter().map(|v| (v > 0.5) as u8 as f64).collect())
            .collect();
        let input = json!({"main_params": main, "extra_params": extra, "state": state, "sequence": sequence});
        let out = outputs("lstm", &[("objective", input.clone()), ("jacobian", input)]);
        assert_close(&out[0], &[lstm(&main, &extra, &state, &sequence)]);
        // The jacobian: main_params then extra_params, each row-major.
        let got = reals(&out[1]);
        assert_eq!(got.len(), 8 * l * b + 3 * b);
        let mut k = 0;
        for which in 0..2 {
            let rows = if which == 0 { 2 * l } else { 3 };
            let width = if which == 0 { 4 * b } else { b };
            for r in 0..rows {
                for j in 0..width {
                    let h = 1e-6;
                    let at = |delta: f64| {
                        let (mut m, mut e) = (main.clone(), extra.clone());
                        if which == 0 {
                            m[r][j] += delta;
                        } else {
                            e[r][j] += delta;
                        }
                        lstm(&m, &e, &state, &sequence)
                    };
                    let fd = (at(h) - at(-h)) / (2.0 * h);
                    assert!(
                        (got[k] - fd).abs() <= 1e-6 * (1.0 + fd.abs()),
                        "l={l} b={b} c={c}: entry {k}: {} against {fd}",
                        got[k]
                    );
                    k += 1;
                }
            }
        }
        assert_eq!(k, got.len());
    }
    // A parameter of an odd number of rows cannot be read as layers.
    let answers = session(&[
        json!({"id": 0, "kind": "define", "module": "lstm"}),
        json!({"id": 1, "kind": "evaluate", "module": "lstm", "function": "objective",
               "input": {"main_params": [[1.0, 1.0, 1.0, 1.0]], "extra_params": [[1.0], [1.0], [0.0]],
                         "state": [[0.0], [0.0]], "sequence": [[1.0], [0.0]]}}),
    ]);
    assert_eq!(answers[1]["success"], json!(false), "{}", answers[1]);
    assert!(
        answers[1]["error"]
            .as_str()
            .unwrap()
            .contains("even number of rows"),
        "{}",
        answers[1]
    );
}

extern "C" {
    fn lgamma(x: f64) -> f64;
}

/// GradBench's gmm log-posterior, directly (as its JAX tool writes it).
#[allow(clippy::too_many_arguments)]
fn gmm(
    d: usize,
    n: usize,
    x: &[Vec<f64>],
    m: usize,
    gamma: f64,
    alpha: &[f64],
    mu: &[Vec<f64>],
    q: &[Vec<f64>],
    l: &[Vec<f64>],
) -> f64 {
    let k = alpha.len();
    let lse = |v: &[f64]| {
        let a = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        a + v.iter().map(|x| (x - a).exp()).sum::<f64>().ln()
    };
    let mut fit = 0.0;
    for xi in x {
        let inner: Vec<f64> = (0..k)
            .map(|j| {
                let c: Vec<f64> = (0..d).map(|r| xi[r] - mu[j][r]).collect();
                let mut sq = 0.0;
                for r in 0..d {
                    let mut v = q[j][r].exp() * c[r];
                    for col in 0..r {
                        v += l[j][col * (2 * d - col - 1) / 2 + r - col - 1] * c[col];
                    }
                    sq += v * v;
                }
                alpha[j] + q[j].iter().sum::<f64>() - 0.5 * sq
            })
            .collect();
        fit += lse(&inner);
    }
    let dof = (d + m + 1) as f64;
    let wishart: f64 = (0..k)
        .map(|j| {
            let diag: f64 = q[j].iter().map(|v| (2.0 * v).exp()).sum();
            let low: f64 = l[j].iter().map(|v| v * v).sum();
            0.5 * gamma * gamma * (diag + low) - m as f64 * q[j].iter().sum::<f64>()
        })
        .sum();
    let mgl = (d * (d - 1)) as f64 / 4.0 * std::f64::consts::PI.ln()
        + (1..=d)
            .map(|j| unsafe { lgamma(0.5 * dof + (1.0 - j as f64) / 2.0) })
            .sum::<f64>();
    let c = dof * d as f64 * (gamma / 2f64.sqrt()).ln();
    -0.5 * (n * d) as f64 * (2.0 * std::f64::consts::PI).ln() + fit - n as f64 * lse(alpha)
        + k as f64 * (c - mgl)
        - wishart
}

#[test]
fn gmm_matches_the_formula_and_its_jacobian_finite_differences() {
    for (d, k, n, m, seed) in [(2, 2, 3, 0, 40), (3, 4, 5, 2, 41), (1, 2, 2, 1, 42)] {
        let rows = |r: usize, w: usize, s: u64| -> Vec<Vec<f64>> {
            (0..r)
                .map(|i| {
                    sample(w, s + 7 * i as u64)
                        .iter()
                        .map(|v| 2.0 * v - 1.0)
                        .collect()
                })
                .collect()
        };
        let t = d * (d - 1) / 2;
        let (x, mu, q, l) = (
            rows(n, d, seed),
            rows(k, d, seed + 1),
            rows(k, d, seed + 2),
            rows(k, t, seed + 3),
        );
        let alpha: Vec<f64> = sample(k, seed + 4);
        let gamma = 1.25;
        let input = json!({"d": d, "k": k, "n": n, "x": x, "m": m, "gamma": gamma,
            "alpha": alpha, "mu": mu, "q": q, "l": l});
        let out = outputs("gmm", &[("objective", input.clone()), ("jacobian", input)]);
        let want = gmm(d, n, &x, m, gamma, &alpha, &mu, &q, &l);
        assert!(
            (reals(&out[0])[0] - want).abs() <= 1e-10 * (1.0 + want.abs()),
            "{} against {want}",
            out[0]
        );
        // The jacobian: an object of the four, each shaped as its input.
        let h = 1e-6;
        let fd = |which: usize, r: usize, c: usize| {
            let at = |delta: f64| {
                let (mut a, mut mu, mut q, mut l) =
                    (alpha.clone(), mu.clone(), q.clone(), l.clone());
                match which {
                    0 => a[r] += delta,
                    1 => mu[r][c] += delta,
                    2 => q[r][c] += delta,
                    _ => l[r][c] += delta,
                }
                gmm(d, n, &x, m, gamma, &a, &mu, &q, &l)
            };
            (at(h) - at(-h)) / (2.0 * h)
        };
        for (which, key, width) in [(0, "alpha", 0), (1, "mu", d), (2, "q", d), (3, "l", t)] {
            let got = &out[1][key];
            for r in 0..k {
                for c in 0..width.max(1) {
                    let g = if which == 0 {
                        got[r].as_f64()
                    } else if width == 0 {
                        None
                    } else {
                        got[r][c].as_f64()
                    };
                    let Some(g) = g else {
                        assert_eq!(width, 0, "{key}: {got}");
                        continue;
                    };
                    let f = fd(which, r, c);
                    assert!(
                        (g - f).abs() <= 1e-5 * (1.0 + f.abs()),
                        "d={d} k={k}: {key}[{r}][{c}] = {g} against {f}"
                    );
                }
            }
        }
    }
}

#[test]
fn ba_objective_repeats_the_first_residual_of_each_kind() {
    let cam = [0.1, -0.2, 0.3, 1.0, 2.0, 3.0, 500.0, 0.5, -0.5, 0.01, 0.001];
    let (x, w, feat) = ([4.0, 5.0, 6.0], 0.9, [300.0, 200.0]);
    let out = outputs(
        "ba",
        &[(
            "objective",
            json!({"n": 2, "m": 3, "p": 5, "cam": cam, "x": x, "w": w, "feat": feat}),
        )],
    );
    // The projection, directly (ADBench's: Rodrigues, then radial distortion).
    let c: Vec<f64> = (0..3).map(|i| x[i] - cam[3 + i]).collect();
    let rot = &cam[..3];
    let theta = rot.iter().map(|r| r * r).sum::<f64>().sqrt();
    let wv: Vec<f64> = rot.iter().map(|r| r / theta).collect();
    let cross = [
        wv[1] * c[2] - wv[2] * c[1],
        wv[2] * c[0] - wv[0] * c[2],
        wv[0] * c[1] - wv[1] * c[0],
    ];
    let dot: f64 = (0..3).map(|i| wv[i] * c[i]).sum();
    let xc: Vec<f64> = (0..3)
        .map(|i| c[i] * theta.cos() + cross[i] * theta.sin() + wv[i] * dot * (1.0 - theta.cos()))
        .collect();
    let (u, v) = (xc[0] / xc[2], xc[1] / xc[2]);
    let rsq = u * u + v * v;
    let dist = 1.0 + cam[9] * rsq + cam[10] * rsq * rsq;
    let want = [
        w * (u * dist * cam[6] + cam[7] - feat[0]),
        w * (v * dist * cam[6] + cam[8] - feat[1]),
    ];
    assert_close(&out[0]["reproj_error"]["elements"], &want);
    assert_eq!(out[0]["reproj_error"]["repeated"], json!(5));
    assert_close(&out[0]["w_err"]["element"], &[1.0 - w * w]);
    assert_eq!(out[0]["w_err"]["repeated"], json!(5));
}

#[test]
fn ba_jacobian_is_the_sparse_jacobian_of_the_residuals() {
    let cam = [0.1, -0.2, 0.3, 1.0, 2.0, 3.0, 500.0, 0.5, -0.5, 0.01, 0.001];
    let (x, w, feat) = ([4.0, 5.0, 6.0], 0.9, [300.0, 200.0]);
    let (n, m, p) = (2, 3, 20);
    let input = |cam: &[f64], x: &[f64], w: f64| json!({"n": n, "m": m, "p": p, "cam": cam, "x": x, "w": w, "feat": feat});
    // The first residual moved along each of the 15 unknowns it depends
    // on (every camera, point and weight is a copy, so perturbing the
    // input perturbs the first observation's), by central differences.
    let mut calls = vec![("jacobian", input(&cam, &x, w))];
    let h = 1e-6;
    for k in 0..15 {
        for sign in [1.0, -1.0] {
            let (mut c, mut y, mut v) = (cam.to_vec(), x.to_vec(), w);
            match k {
                0..=10 => c[k] += sign * h * c[k].abs().max(1.0),
                11..=13 => y[k - 11] += sign * h * y[k - 11].abs().max(1.0),
                _ => v += sign * h,
            }
            calls.push(("objective", input(&c, &y, v)));
        }
    }
    let out = outputs("ba", &calls);
    let jac = &out[0];
    // Rows: two of 15 entries per observation, then one per weight; the
    // first 30 row starts and the last are sent.
    let rows: Vec<i64> = jac["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_i64().unwrap())
        .collect();
    let want_rows: Vec<i64> = (0..30).map(|i| 15 * i).chain([31 * p]).collect();
    assert_eq!(rows, want_rows);
    // Columns: camera 0's 11, point 0's 3, weight 0's, twice; then the
    // last weight's.
    let cols: Vec<i64> = jac["cols"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_i64().unwrap())
        .collect();
    let block: Vec<i64> = (0..11)
        .chain([11 * n, 11 * n + 1, 11 * n + 2, 11 * n + 3 * m])
        .collect();
    let want_cols: Vec<i64> = block
        .iter()
        .chain(&block)
        .copied()
        .chain([11 * n + 3 * m + p - 1])
        .collect();
    assert_eq!(cols, want_cols);
    let vals = reals(&jac["vals"]);
    assert_eq!(vals.len(), 31);
    for k in 0..15 {
        let step = match k {
            0..=10 => h * cam[k].abs().max(1.0),
            11..=13 => h * x[k - 11].abs().max(1.0),
            _ => h,
        };
        let plus = reals(&out[1 + 2 * k]["reproj_error"]["elements"]);
        let minus = reals(&out[2 + 2 * k]["reproj_error"]["elements"]);
        for row in 0..2 {
            let fd = (plus[row] - minus[row]) / (2.0 * step);
            let got = vals[15 * row + k];
            assert!(
                (got - fd).abs() <= 1e-5 * (1.0 + fd.abs()),
                "row {row}, unknown {k}: {got} against {fd}"
            );
        }
    }
    assert!((vals[30] + 2.0 * w).abs() < 1e-15, "{}", vals[30]);
}

/// The determinant by expansion along the first row.
fn det(a: &[f64], l: usize) -> f64 {
    if l == 1 {
        return a[0];
    }
    (0..l)
        .map(|c| {
            let minor: Vec<f64> = (1..l)
                .flat_map(|r| (0..l).filter(move |&j| j != c).map(move |j| a[r * l + j]))
                .collect();
            let sign = if c % 2 == 0 { 1.0 } else { -1.0 };
            sign * a[c] * det(&minor, l - 1)
        })
        .sum()
}

#[test]
fn det_matches_expansion_by_minors_and_its_gradient_finite_differences() {
    for (l, seed) in [(1, 50), (2, 51), (3, 52), (5, 53)] {
        let mut a: Vec<f64> = sample(l * l, seed).iter().map(|v| 2.0 * v - 1.0).collect();
        if l == 3 {
            a[0] = 0.0; // the first pivot must be searched for
        }
        let input = json!({"A": a, "ell": l});
        let out = outputs("det", &[("primal", input.clone()), ("gradient", input)]);
        assert_close(&out[0], &[det(&a, l)]);
        let got = reals(&out[1]);
        for (k, g) in got.iter().enumerate() {
            let h = 1e-6;
            let at = |d: f64| {
                let mut b = a.clone();
                b[k] += d;
                det(&b, l)
            };
            let fd = (at(h) - at(-h)) / (2.0 * h);
            assert!(
                (g - fd).abs() <= 1e-6 * (1.0 + fd.abs()),
                "l={l}: entry {k}: {g} against {fd}"
            );
        }
    }
}

/// GradBench's expected answers for saddle and particle (their evals'
/// `expect`), which every mode combination must give within GradBench's
/// tolerance (10⁻⁴).
#[test]
fn saddle_and_particle_agree_with_gradbench_in_every_mode_combination() {
    let modes = ["rr", "ff", "fr", "rf"];
    let calls: Vec<(&str, Json)> = modes
        .iter()
        .map(|m| (*m, json!({"start": [1.0, 1.0]})))
        .collect();
    let saddle = outputs("saddle", &calls);
    for (m, out) in modes.iter().zip(&saddle) {
        let got = reals(out);
        assert_eq!(got.len(), 4, "{m}: {out}");
        for g in &got {
            assert!(
                (g - 8.246324826140356e-06).abs() < 1e-4,
                "saddle {m}: {got:?}"
            );
        }
    }
    // The four modes compute the same arithmetic to rounding.
    for out in &saddle[1..] {
        for (a, b) in reals(out).iter().zip(reals(&saddle[0])) {
            assert!((a - b).abs() < 1e-12, "{out} against {}", saddle[0]);
        }
    }
    let calls: Vec<(&str, Json)> = modes.iter().map(|m| (*m, json!({"w": 0.0}))).collect();
    let particle = outputs("particle", &calls);
    for (m, out) in modes.iter().zip(&particle) {
        let w = out.as_f64().unwrap_or_else(|| panic!("{m}: {out}"));
        assert!((w - 0.2071918746486116).abs() < 1e-4, "particle {m}: {w}");
    }
}

/// A 4 × 4 matrix, by rows.
type M4 = [[f64; 4]; 4];

fn mul4(a: &M4, b: &M4) -> M4 {
    let mut c = [[0.0; 4]; 4];
    for i in 0..4 {
        for j in 0..4 {
            c[i][j] = (0..4).map(|k| a[i][k] * b[k][j]).sum();
        }
    }
    c
}

/// A small hand in GradBench's ht input format: ADBench's 22-bone tree,
/// random transforms, `m` vertices, `t` triangles and `n` points, with
/// barycentric coordinates when `complicated`.
fn ht_input(m: usize, t: usize, n: usize, complicated: bool, mirrored: bool, seed: u64) -> Json {
    let parents: Vec<i64> = vec![
        -1, 0, 1, 2, 3, 0, 5, 6, 7, 0, 9, 10, 11, 0, 13, 14, 15, 0, 17, 18, 19, 0,
    ];
    let b = parents.len();
    let mut draw = {
        let xs = sample(100_000, seed);
        let mut at = 0;
        move || {
            at += 1;
            xs[at - 1] - 0.5
        }
    };
    let mut transform = || -> Json {
        let mut rows: Vec<Vec<f64>> = (0..3).map(|_| (0..4).map(|_| draw()).collect()).collect();
        rows.push(vec![0.0, 0.0, 0.0, 1.0]);
        json!(rows)
    };
    let base_relatives: Vec<Json> = (0..b).map(|_| transform()).collect();
    let inverse_base_absolutes: Vec<Json> = (0..b).map(|_| transform()).collect();
    let positions: Vec<Vec<f64>> = (0..m).map(|_| vec![draw(), draw(), draw(), 1.0]).collect();
    // Every third weight 0, as most are in GradBench's models (the
    // program skips those bones).
    let weights: Vec<Vec<f64>> = (0..m)
        .map(|v| {
            (0..b)
                .map(|j| if (v + j) % 3 == 0 { 0.0 } else { draw() + 0.5 })
                .collect()
        })
        .collect();
    let index = |x: f64, k: usize| (((x + 0.5) * k as f64) as usize).min(k - 1);
    let triangles: Vec<Vec<usize>> = (0..t)
        .map(|_| (0..3).map(|_| index(draw(), m)).collect())
        .collect();
    let correspondences: Vec<usize> = (0..n)
        .map(|_| index(draw(), if complicated { t } else { m }))
        .collect();
    let points: Vec<Vec<f64>> = (0..n).map(|_| vec![draw(), draw(), draw()]).collect();
    let us: Vec<Vec<f64>> = if complicated {
        (0..n)
            .map(|_| vec![draw() + 0.5, 0.5 * (draw() + 0.5)])
            .collect()
    } else {
        Vec::new()
    };
    let theta: Vec<f64> = (0..26).map(|_| 2.0 * draw()).collect();
    json!({
        "theta": theta,
        "us": us,
        "data": {
            "model": {
                "bone_count": b,
                "bone_names": (0..b).map(|i| format!("bone{i}")).collect::<Vec<_>>(),
                "parents": parents,
                "base_relatives": base_relatives,
                "inverse_base_absolutes": inverse_base_absolutes,
                "base_positions": positions,
                "weights": weights,
                "triangles": triangles,
                "is_mirrored": mirrored,
            },
            "correspondences": correspondences,
            "points": points,
        },
    })
}

/// GradBench ht's residuals, directly (ADBench's hand objective).
fn ht_objective(input: &Json) -> Vec<f64> {
    let model = &input["data"]["model"];
    let theta = reals(&input["theta"]);
    let m4 = |v: &Json| -> M4 {
        let xs = reals(v);
        std::array::from_fn(|i| std::array::from_fn(|j| xs[4 * i + j]))
    };
    let ints = |v: &Json| -> Vec<i64> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_i64().unwrap())
            .collect()
    };
    let parents = ints(&model["parents"]);
    let b = parents.len();
    // Pose parameters: ADBench's to_pose_params.
    let mut pose = vec![[0.0; 3]; b + 3];
    pose[0] = [theta[0], theta[1], theta[2]];
    pose[1] = [1.0; 3];
    pose[2] = [theta[3], theta[4], theta[5]];
    let (mut it, mut ip) = (6, 5);
    for _finger in 0..5 {
        for i in 2..=4 {
            pose[ip][0] = theta[it];
            it += 1;
            if i == 2 {
                pose[ip][1] = theta[it];
                it += 1;
            }
            ip += 1;
        }
        ip += 1;
    }
    let mut absolutes: Vec<M4> = Vec::new();
    for i in 0..b {
        let (tx, tz, ty) = (pose[i + 3][0], pose[i + 3][1], pose[i + 3][2]);
        let rx = [
            [1.0, 0.0, 0.0],
            [0.0, tx.cos(), -tx.sin()],
            [0.0, tx.sin(), tx.cos()],
        ];
        let ry = [
            [ty.cos(), 0.0, ty.sin()],
            [0.0, 1.0, 0.0],
            [-ty.sin(), 0.0, ty.cos()],
        ];
        let rz = [
            [tz.cos(), -tz.sin(), 0.0],
            [tz.sin(), tz.cos(), 0.0],
            [0.0, 0.0, 1.0],
        ];
        let mut r: M4 = [[0.0; 4]; 4];
        r[3][3] = 1.0;
        for (p, row) in r.iter_mut().enumerate().take(3) {
            for (q, x) in row.iter_mut().enumerate().take(3) {
                *x = (0..3)
                    .map(|s| (0..3).map(|u| rz[p][u] * ry[u][s]).sum::<f64>() * rx[s][q])
                    .sum();
            }
        }
        let relative = mul4(&m4(&model["base_relatives"][i]), &r);
        let absolute = match parents[i] {
            -1 => relative,
            p => mul4(&absolutes[p as usize], &relative),
        };
        absolutes.push(absolute);
    }
    let transforms: Vec<M4> = (0..b)
        .map(|i| mul4(&absolutes[i], &m4(&model["inverse_base_absolutes"][i])))
        .collect();
    // The global rotation: Rodrigues' formula.
    let a = pose[0];
    let norm = (a[0] * a[0] + a[1] * a[1] + a[2] * a[2]).sqrt();
    let mut rot = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]];
    if norm >= 1e-4 {
        let w = [a[0] / norm, a[1] / norm, a[2] / norm];
        let cross = [[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]];
        for p in 0..3 {
            for q in 0..3 {
                let id = if p == q { 1.0 } else { 0.0 };
                rot[p][q] =
                    norm.cos() * id + norm.sin() * cross[p][q] + (1.0 - norm.cos()) * w[p] * w[q];
            }
        }
    }
    let mirrored = model["is_mirrored"].as_bool().unwrap();
    let vertices: Vec<[f64; 3]> = model["base_positions"]
        .as_array()
        .unwrap()
        .iter()
        .zip(model["weights"].as_array().unwrap())
        .map(|(p, w)| {
            let (p, w) = (reals(p), reals(w));
            let mut local = [0.0; 3];
            for (bone, t) in transforms.iter().enumerate() {
                for (r, x) in local.iter_mut().enumerate() {
                    *x += w[bone] * (0..4).map(|c| t[r][c] * p[c]).sum::<f64>();
                }
            }
            if mirrored {
                local[0] = -local[0];
            }
            std::array::from_fn(|r| (0..3).map(|c| rot[r][c] * local[c]).sum::<f64>() + pose[2][r])
        })
        .collect();
    let correspondences = ints(&input["data"]["correspondences"]);
    let points = input["data"]["points"].as_array().unwrap();
    let us = input["us"].as_array().unwrap();
    let mut residuals = Vec::new();
    for (i, &c) in correspondences.iter().enumerate() {
        let point = reals(&points[i]);
        let target: [f64; 3] = if us.is_empty() {
            vertices[c as usize]
        } else {
            let tri = ints(&model["triangles"][c as usize]);
            let u = reals(&us[i]);
            std::array::from_fn(|k| {
                u[0] * vertices[tri[0] as usize][k]
                    + u[1] * vertices[tri[1] as usize][k]
                    + (1.0 - u[0] - u[1]) * vertices[tri[2] as usize][k]
            })
        };
        residuals.extend((0..3).map(|k| point[k] - target[k]));
    }
    residuals
}

#[test]
fn ht_matches_the_hand_model_and_its_jacobian_finite_differences() {
    // 9 vertices and 7 points pose every vertex in the complicated variant
    // (21 corners) and only those read in the simple one; 30 and 4 pose
    // only those read in both.
    for (m, t, n, complicated, mirrored) in [
        (9, 5, 7, true, false),
        (9, 5, 7, false, false),
        (9, 5, 7, true, true),
        (30, 5, 4, true, false),
        (30, 5, 4, false, true),
    ] {
        let input = ht_input(m, t, n, complicated, mirrored, 7 + u64::from(mirrored));
        // The residuals at theta (and us) moved along each column, by
        // central differences.
        let h = 1e-6;
        let mut calls = vec![("objective", input.clone()), ("jacobian", input.clone())];
        let columns = if complicated { 28 } else { 26 };
        for column in 0..columns {
            for sign in [1.0, -1.0] {
                let mut moved = input.clone();
                if complicated && column < 2 {
                    // Every point's coordinate `column`: a residual
                    // depends on its own point's only.
                    for u in moved["us"].as_array_mut().unwrap() {
                        u[column] = json!(u[column].as_f64().unwrap() + sign * h);
                    }
                } else {
                    let k = column - if complicated { 2 } else { 0 };
                    let x = moved["theta"][k].as_f64().unwrap();
                    moved["theta"][k] = json!(x + sign * h);
                }
                calls.push(("objective", moved));
            }
        }
        let out = outputs("ht", &calls);
        let want = ht_objective(&input);
        assert_eq!(want.len(), 3 * n);
        assert_close(&out[0], &want);
        let rows = out[1].as_array().unwrap();
        assert_eq!(rows.len(), 3 * n, "one row per residual");
        for (r, row) in rows.iter().enumerate() {
            let row = reals(row);
            assert_eq!(row.len(), columns, "complicated: {complicated}");
            for (column, got) in row.iter().enumerate() {
                let (plus, minus) = (reals(&out[2 + 2 * column]), reals(&out[3 + 2 * column]));
                let fd = (plus[r] - minus[r]) / (2.0 * h);
                assert!(
                    (got - fd).abs() <= 1e-6 * (1.0 + fd.abs()),
                    "complicated: {complicated}, row {r}, column {column}: {got} against {fd}"
                );
            }
        }
    }
}

#[test]
fn ht_input_errors_are_answered() {
    let mut input = ht_input(4, 2, 3, true, false, 3);
    input["data"]["model"]["is_mirrored"] = json!("no");
    let mut bad_shape = ht_input(4, 2, 3, true, false, 3);
    bad_shape["theta"] = json!([1.0, 2.0]);
    let mut out_of_range = ht_input(4, 2, 3, true, false, 3);
    out_of_range["data"]["correspondences"][1] = json!(2);
    let messages = vec![
        json!({"id": 0, "kind": "define", "module": "ht"}),
        json!({"id": 1, "kind": "evaluate", "module": "ht", "function": "objective", "input": input}),
        json!({"id": 2, "kind": "evaluate", "module": "ht", "function": "jacobian", "input": bad_shape}),
        json!({"id": 3, "kind": "evaluate", "module": "ht", "function": "objective", "input": out_of_range}),
    ];
    let answers = session(&messages);
    assert_eq!(answers[0]["success"], json!(true), "{}", answers[0]);
    for (a, needle) in answers[1..].iter().zip(["is_mirrored", "theta", "index"]) {
        assert_eq!(a["success"], json!(false), "{a}");
        let error = a["error"].as_str().unwrap();
        assert!(error.contains(needle), "{error}");
    }
}
