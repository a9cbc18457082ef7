//! `gradlift fit` through the binary: it recovers the logistic-growth
//! parameters, prints JSON and draws plots, and bad input is a clear
//! one-line error with a non-zero status.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

const GROWTH: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../examples/logistic_growth.grad"
);
const LOGREG: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../examples/logistic_regression.grad"
);
/// The model of examples/logistic_growth.grad at rate 0.9, cap 50.
const OBS: &str = "obs=[4.644121347919671, 10.0531528024359, 19.111461910022545, \
30.17282134938769, 39.461555025789046, 45.10601852837243, 47.88933246750832, \
49.12064437514649, 49.639065041495606, 49.85277097114568]";

fn gradlift(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gradlift"))
        .args(args)
        .output()
        .expect("the gradlift binary runs")
}

fn temp_path(name: &str) -> PathBuf {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "gradlift-fit-test-{}-{}-{name}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ))
}

/// The first line of stderr of a failed run.
fn error(args: &[&str]) -> String {
    let out = gradlift(args);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "{args:?} succeeded");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        stderr.starts_with("error: ") || stderr.contains(": error: "),
        "{stderr}"
    );
    stderr.lines().next().unwrap_or("").to_string()
}

fn json(args: &[&str]) -> serde_json::Value {
    let out = gradlift(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

#[test]
fn every_method_recovers_the_logistic_growth_parameters() {
    let data = temp_path("growth.json");
    std::fs::write(&data, format!("{{\"{}\": {}}}", "obs", &OBS[4..])).unwrap();
    let data_arg = format!("@{}", data.display());
    for method in ["lbfgs", "bfgs", "cg", "gd"] {
        let r = json(&[
            "fit",
            GROWTH,
            "--params",
            "rate=0.5, cap=30",
            "--data",
            &data_arg,
            "--method",
            method,
            "--iters",
            "5000",
            "--json",
        ]);
        let rate = r["params"]["rate"].as_f64().unwrap();
        let cap = r["params"]["cap"].as_f64().unwrap();
        assert!((rate - 0.9).abs() < 1e-6, "{method}: {r}");
        assert!((cap - 50.0).abs() < 1e-4, "{method}: {r}");
        assert!(r["loss"].as_f64().unwrap() < 1e-12, "{method}: {r}");
        assert!(r["grad_norm"].as_f64().unwrap() < 1e-6, "{method}: {r}");
        assert!(r["iters"].as_u64().unwrap() >= 1, "{method}: {r}");
        assert_eq!(r.as_object().unwrap().len(), 4);
    }
}

#[test]
fn parameters_and_data_from_json_files() {
    let start = temp_path("start.json");
    std::fs::write(&start, r#"{"cap": 30, "rate": 0.5}"#).unwrap();
    let data = temp_path("obs.json");
    std::fs::write(&data, format!("{{\"obs\": {}}}", &OBS[4..])).unwrap();
    let r = json(&[
        "fit",
        GROWTH,
        "--params",
        &format!("@{}", start.display()),
        "--data",
        &format!("@{}", data.display()),
        "--json",
    ]);
    assert!(
        (r["params"]["rate"].as_f64().unwrap() - 0.9).abs() < 1e-6,
        "{r}"
    );
    // Parameters come out in the function's order, whatever the input's.
    let names: Vec<&String> = r["params"].as_object().unwrap().keys().collect();
    assert_eq!(names, ["rate", "cap"]);
}

#[test]
fn the_table_and_the_plots() {
    let svg = temp_path("loss.svg");
    let png = temp_path("loss.png");
    let out = gradlift(&[
        "fit",
        GROWTH,
        "--params",
        "rate=0.5, cap=30",
        "--data",
        OBS,
        "--plot",
        svg.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8(out.stdout).unwrap();
    for row in ["rate ", "cap ", "loss ", "gradient norm ", "iterations "] {
        assert!(table.lines().any(|l| l.starts_with(row)), "{row}: {table}");
    }
    // No progress bar when stderr is not a terminal.
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let drawn = std::fs::read_to_string(&svg).unwrap();
    assert!(drawn.starts_with("<svg") && drawn.contains("L-BFGS on loss ("));
    assert!(drawn.contains("<polyline"), "a line is drawn");
    let out = gradlift(&[
        "fit",
        GROWTH,
        "--params",
        "rate=0.5, cap=30",
        "--data",
        OBS,
        "--plot",
        png.to_str().unwrap(),
        "--method",
        "bfgs",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
}

#[test]
fn adam_fits_a_classifier_on_minibatches() {
    let r = json(&[
        "fit",
        LOGREG,
        "--params",
        "w=[0, 0]",
        "--data",
        "X=[[1,2],[-1,-2],[2,1],[-2,-1],[0.5,1],[-0.5,-1]], y=[1,-1,1,-1,1,-1], lambda=0.01",
        "--method",
        "adam",
        "--batch",
        "2",
        "--iters",
        "300",
        "--lr",
        "0.05",
        "--json",
    ]);
    let w = r["params"]["w"].as_array().unwrap();
    assert!(
        w[0].as_f64().unwrap() > 0.0 && w[1].as_f64().unwrap() > 0.0,
        "{r}"
    );
    assert_eq!(r["iters"], 300);
}

#[test]
fn bad_fit_input_is_a_clear_error() {
    let fit = |params: &str, data: &str, extra: &[&str]| {
        let mut args = vec!["fit", GROWTH, "--params", params, "--data", data];
        args.extend_from_slice(extra);
        error(&args)
    };
    assert_eq!(
        fit("rat=0.5, cap=30", OBS, &[]),
        "error: `rat` is not a parameter of `loss` (its parameters: rate, cap, obs)"
    );
    assert_eq!(
        fit("rate=0.5, cap=30", "", &[]),
        "error: no data for `obs: [R; 10]` of `loss`: every parameter that is not fitted needs a value in the data"
    );
    assert!(fit("rate=0.5, cap=30", "@/nonexistent/data.json", &[])
        .starts_with("error: cannot read `/nonexistent/data.json`"));
    assert_eq!(
        fit("rate=0.5, cap=30", "obs=[1, 2]", &[]),
        "error: size mismatch in call to `loss`: `obs` has length 2, but its type fixes the length at 10"
    );
    assert_eq!(
        fit("rate=0.5, cap=30", "obs=[1,2,3,4,5,6,7,8,9,10], z=1", &[]),
        "error: the data gives `z`, which is not a parameter of `loss` (its parameters: rate, cap, obs)"
    );
    assert_eq!(
        error(&["fit", GROWTH, "--params", "rate=0.5, cap=30"]),
        "error: no data for `obs: [R; 10]` of `loss`: every parameter that is not fitted needs a value in the data"
    );
    assert!(fit("rate=0.5", OBS, &[]).contains("no data for `cap: R`"));
    assert!(
        fit("rate=[0.5], cap=30", OBS, &[]).starts_with("--params:1:6: error: `rate` has type `R`")
    );
    assert!(
        fit("rate=0.5, cap=30", OBS, &["--plot", "loss.pdf"]).contains("must end in .svg or .png")
    );
    assert!(
        fit("rate=0.5, cap=30", OBS, &["--batch", "4"]).contains("--batch is for --method adam")
    );
    assert!(fit(
        "rate=0.5, cap=30",
        OBS,
        &["--method", "adam", "--batch", "4"]
    )
    .contains("minibatches need data with rows"));
    assert!(
        fit("rate=0.5, cap=30", OBS, &["--method", "adam", "--lr=0"])
            .contains("--lr must be a positive number")
    );
    assert_eq!(
        fit("rate=0.5, cap=30", OBS, &["--lr", "0.1"]),
        "error: --lr is for --method adam"
    );
    // A loss that is not a real, and a size.
    let program = temp_path("bad.grad");
    std::fs::write(
        &program,
        "def pair(a: R) -> (R, R) = (a, a)\ndef sized(s: size, c: R) -> R = s * c * c\n",
    )
    .unwrap();
    let file = program.to_str().unwrap();
    assert_eq!(
        error(&["fit", file, "--fn", "pair", "--params", "a=1"]),
        "error: `pair` returns `(R, R)`, not a real: only a real-valued loss can be minimized"
    );
    assert_eq!(
        error(&["fit", file, "--fn", "sized", "--params", "s=2, c=1"]),
        "error: `s` is a size, a whole number fixed by the data: it cannot be fitted"
    );
}

#[test]
fn a_loss_unbounded_below_stops() {
    // A line search along a loss that decreases for ever extended its step
    // for ever; now the first non-finite loss stops it.
    let path = temp_path("linear.grad");
    std::fs::write(&path, "def f(x: R) -> R = 12 * x\n").unwrap();
    let file = path.to_str().unwrap();
    let out = gradlift(&["fit", file, "--params", "x=1.5", "--iters", "5"]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("the loss may be unbounded below"), "{text}");
    let message = error(&[
        "fit", file, "--params", "x=1.5", "--iters", "5", "--method", "cg",
    ]);
    assert!(
        message.contains("the loss may be unbounded below"),
        "{message}"
    );
}
