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
