//! Every shipped example evaluates to the values in
//! `tests/examples_expected.json`, computed independently of gradlift.

use gradlift::{Args, Program};

fn close(got: &serde_json::Value, want: &serde_json::Value) -> bool {
    match (got, want) {
        (serde_json::Value::Array(a), serde_json::Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| close(x, y))
        }
        (a, b) => {
            let (a, b) = (a.as_f64().expect("a number"), b.as_f64().expect("a number"));
            (a - b).abs() <= 1e-12 * b.abs().max(1.0)
        }
    }
}

#[test]
fn examples_evaluate_to_their_expected_values() {
    let root = env!("CARGO_MANIFEST_DIR");
    let cases: Vec<serde_json::Value> = serde_json::from_str(
        &std::fs::read_to_string(format!("{root}/tests/examples_expected.json")).unwrap(),
    )
    .unwrap();
    let mut files = std::collections::BTreeSet::new();
    for case in &cases {
        let file = case["file"].as_str().unwrap();
        files.insert(file.to_string());
        let text = std::fs::read_to_string(format!("{root}/{file}")).unwrap();
        let program = Program::parse(file, &text).unwrap_or_else(|e| panic!("{e}"));
        let f = program.function(case["fn"].as_str().unwrap()).unwrap();
        let args = f.args(&Args::from_json(&case["at"]).unwrap()).unwrap();
        let value = f.eval(&args).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(
            close(&value.to_json(), &case["value"]),
            "{file} at {}: got {value}, expected {}",
            case["at"],
            case["value"]
        );
    }
    // Every example has at least one case.
    for entry in std::fs::read_dir(format!("{root}/examples")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "grad") {
            let rel = format!("examples/{}", path.file_name().unwrap().to_str().unwrap());
            assert!(files.contains(&rel), "{rel} has no expected values");
        }
    }
}

/// The gradient of every real-valued example, by both routes, agrees with
/// central finite differences (h = 1e-6·max(1, |x|), relative tolerance 1e-5;
/// the logistic-growth loss sums 4,000 steps, so its differences are taken
/// with the same step and a tolerance of 1e-4).
#[test]
fn example_gradients_match_finite_differences() {
    use gradlift::{Construction, GradOptions, Route, Type};
    let root = env!("CARGO_MANIFEST_DIR");
    let cases: Vec<serde_json::Value> = serde_json::from_str(
        &std::fs::read_to_string(format!("{root}/tests/examples_expected.json")).unwrap(),
    )
    .unwrap();
    let mut checked = 0;
    for case in &cases {
        let file = case["file"].as_str().unwrap();
        let text = std::fs::read_to_string(format!("{root}/{file}")).unwrap();
        let program = Program::parse(file, &text).unwrap();
        let f = program.function(case["fn"].as_str().unwrap()).unwrap();
        if f.signature().ret != Type::Real {
            continue;
        }
        let args = f.args(&Args::from_json(&case["at"]).unwrap()).unwrap();
        let tol = if file.contains("logistic_growth") {
            1e-4
        } else {
            1e-5
        };
        for route in [Route::Unf, Route::Direct] {
            let g = f
                .gradient(
                    None,
                    GradOptions {
                        route,
                        construction: Construction::Sparse,
                        optimize: true,
                        checkpoint: None,
                    },
                )
                .unwrap();
            let (value, grads) = g.eval(&args).unwrap();
            assert_eq!(
                value.to_bits(),
                f.eval(&args).unwrap().as_real().unwrap().to_bits()
            );
            let mut k = 0;
            for (i, (_, ty)) in f.signature().params.iter().enumerate() {
                if ty.is_none() {
                    continue;
                }
                let mut flat = Vec::new();
                args[i].flatten(&mut flat);
                let mut got = Vec::new();
                grads[k].flatten(&mut got);
                k += 1;
                for j in 0..flat.len() {
                    let h = 1e-6 * flat[j].abs().max(1.0);
                    let at = |delta: f64| {
                        let mut xs = flat.clone();
                        xs[j] += delta;
                        let mut a = args.clone();
                        a[i] = args[i].with_reals(&mut xs.into_iter());
                        f.eval(&a).unwrap().as_real().unwrap()
                    };
                    let fd = (at(h) - at(-h)) / (2.0 * h);
                    assert!(
                        (got[j] - fd).abs() <= tol * (1.0 + fd.abs()),
                        "{file} ({route:?}): d/d{}[{j}] = {} but finite differences give {fd}",
                        f.signature().params[i].0,
                        got[j]
                    );
                }
            }
        }
        checked += 1;
    }
    assert!(checked >= 15, "{checked} cases");
}
