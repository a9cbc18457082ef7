//! Trains two classifiers with argmin's L-BFGS on native gradients, through
//! `gradlift-optim`: logistic regression (examples/logistic_regression.grad)
//! and a one-hidden-layer tanh MLP (examples/mlp.grad, its mean squared
//! error to labels ±1), on points of the square [-1.5, 1.5]² labelled by
//! whether they lie inside the unit circle. A linear boundary cannot
//! separate those classes; the MLP's can.
//!
//! ```sh
//! cargo run --release --example train_classifier
//! cargo run --release --example train_classifier -- --write-data circle.json
//! ```
//!
//! `--write-data FILE` writes the points as `{"X": […], "y": […]}`, the
//! `--data` of `gradlift fit` for examples/mlp.grad.

use gradlift::{Jit, Name, Program, Value};
use gradlift_optim::{fit, FitOptions, Loss, Method};

const ROWS: usize = 200;
const HIDDEN: usize = 8;

/// SplitMix64, for reproducible data and starting weights.
struct Random(u64);

impl Random {
    /// A real in [lo, hi).
    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        lo + (hi - lo) * ((z >> 11) as f64 / (1u64 << 53) as f64)
    }

    fn reals(&mut self, n: usize, scale: f64) -> Vec<f64> {
        (0..n).map(|_| self.uniform(-scale, scale)).collect()
    }
}

fn rows(xs: &[[f64; 2]], bias: bool) -> Value {
    Value::array(
        xs.iter()
            .map(|p| {
                if bias {
                    Value::reals(&[p[0], p[1], 1.0])
                } else {
                    Value::reals(p)
                }
            })
            .collect(),
    )
}

/// The share of `predictions` whose sign is the label's.
fn accuracy(predictions: &[f64], labels: &[f64]) -> f64 {
    let right = predictions
        .iter()
        .zip(labels)
        .filter(|(p, y)| p.signum() == y.signum())
        .count();
    right as f64 / labels.len() as f64
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut random = Random(2024);
    let points: Vec<[f64; 2]> = (0..ROWS)
        .map(|_| [random.uniform(-1.5, 1.5), random.uniform(-1.5, 1.5)])
        .collect();
    let labels: Vec<f64> = points
        .iter()
        .map(|p| {
            if p[0] * p[0] + p[1] * p[1] < 1.0 {
                1.0
            } else {
                -1.0
            }
        })
        .collect();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        match (flag.as_str(), args.next()) {
            ("--write-data", Some(path)) => {
                let json = serde_json::json!({ "X": points, "y": labels });
                std::fs::write(&path, json.to_string() + "\n")?;
                println!("wrote {ROWS} points to {path}");
            }
            _ => {
                return Err(
                    format!("usage: train_classifier [--write-data FILE], not `{flag}`").into(),
                )
            }
        }
    }
    let jit = Jit::new()?;
    let inside = labels.iter().filter(|&&y| y > 0.0).count();
    println!("{ROWS} points, {inside} inside the unit circle");

    // Logistic regression on (x1, x2, 1), from w = 0.
    let program = Program::parse(
        "examples/logistic_regression.grad",
        include_str!("logistic_regression.grad"),
    )?;
    let f = program.function("loss")?;
    let values = [
        Value::reals(&[0.0; 3]),
        rows(&points, true),
        Value::reals(&labels),
        Value::Real(1e-3),
    ];
    let mut loss = Loss::new(&f, &jit, &[Name::from("w")], &values)?;
    let x0 = loss.start();
    let r = fit(
        &mut loss,
        Method::Lbfgs,
        x0,
        &FitOptions::default(),
        Box::new(|_, _| {}),
    )?;
    let w = &r.x;
    let scores: Vec<f64> = points
        .iter()
        .map(|p| w[0] * p[0] + w[1] * p[1] + w[2])
        .collect();
    println!(
        "logistic regression: {} L-BFGS iterations, training loss {:.4}, accuracy {:.1}% ({})",
        r.iters,
        r.loss,
        100.0 * accuracy(&scores, &labels),
        r.stop
    );

    // The MLP, from small random weights.
    let program = Program::parse("examples/mlp.grad", include_str!("mlp.grad"))?;
    let f = program.function("loss")?;
    let matrix = |random: &mut Random, rows: usize, cols: usize| {
        Value::array(
            (0..rows)
                .map(|_| Value::reals(&random.reals(cols, 1.0)))
                .collect(),
        )
    };
    let values = [
        matrix(&mut random, HIDDEN, 2),
        Value::reals(&random.reals(HIDDEN, 0.5)),
        Value::reals(&random.reals(HIDDEN, 0.5)),
        Value::Real(0.0),
        rows(&points, false),
        Value::reals(&labels),
    ];
    let fitted: Vec<Name> = ["W1", "b1", "w2", "b2"].map(Name::from).to_vec();
    let mut loss = Loss::new(&f, &jit, &fitted, &values)?;
    let x0 = loss.start();
    let start = loss.value(&x0)?;
    let r = fit(
        &mut loss,
        Method::Lbfgs,
        x0,
        &FitOptions::default(),
        Box::new(|_, _| {}),
    )?;
    // Predictions by the compiled `predict` at the fitted weights.
    let predict = program.function("predict")?.compile(&jit)?;
    let weights: Vec<Value> = loss.unflatten(&r.x).into_iter().map(|(_, v)| v).collect();
    let mut scores = Vec::with_capacity(ROWS);
    for p in &points {
        let mut call = weights.clone();
        call.push(Value::reals(p));
        scores.push(predict.call(&call)?.as_real().expect("a real"));
    }
    println!(
        "MLP ({} weights): {} L-BFGS iterations, training loss {start:.4} → {:.4}, accuracy {:.1}% ({})",
        loss.dim(),
        r.iters,
        r.loss,
        100.0 * accuracy(&scores, &labels),
        r.stop
    );
    Ok(())
}
