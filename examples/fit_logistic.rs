//! Fits the rate and capacity of a logistic growth model to observations:
//! the worked example of docs/optimizers.md.
//!
//! The loss (examples/logistic_growth.grad) integrates
//! dP/dt = rate · P · (1 − P / cap) from P(0) = 2 with 4,000 Euler steps and
//! adds the squared residuals at the ten sample times t = 1, …, 10 inside
//! the loop. The observations are the same model run at rate 0.9 and
//! capacity 50. The program prints the compiled
//! gradient beside central finite differences, then fits both parameters
//! with argmin's L-BFGS on the native gradient.
//!
//! ```sh
//! cargo run --release --example fit_logistic
//! cargo run --release --example fit_logistic -- --write-data logistic.json
//! ```
//!
//! With `--write-data FILE` it also writes the observations as
//! `{"obs": […]}`, the `--data` of `gradlift fit`.

use argmin::core::observers::{Observe, ObserverMode};
use argmin::core::{CostFunction, Error, Executor, Gradient, IterState, State, KV};
use argmin::solver::linesearch::MoreThuenteLineSearch;
use argmin::solver::quasinewton::LBFGS;
use gradlift::{CompiledFunction, CompiledGradient, GradOptions, Jit, Program, Value};
use gradlift_optim::FirstStep;

const TRUE_RATE: f64 = 0.9;
const TRUE_CAP: f64 = 50.0;
const P0: f64 = 2.0;

/// The logistic loss as an argmin problem: the parameters are
/// `[rate, cap]`, the observations are fixed.
struct LogisticFit {
    loss: CompiledFunction,
    gradient: CompiledGradient,
    obs: Value,
}

impl LogisticFit {
    fn args(&self, p: &[f64]) -> [Value; 3] {
        [Value::Real(p[0]), Value::Real(p[1]), self.obs.clone()]
    }
}

impl CostFunction for LogisticFit {
    type Param = Vec<f64>;
    type Output = f64;

    fn cost(&self, p: &Vec<f64>) -> Result<f64, Error> {
        let value = self.loss.call(&self.args(p))?;
        Ok(value.as_real().expect("the loss is a real"))
    }
}

impl Gradient for LogisticFit {
    type Param = Vec<f64>;
    type Gradient = Vec<f64>;

    fn gradient(&self, p: &Vec<f64>) -> Result<Vec<f64>, Error> {
        // One cotangent per parameter differentiated: d/drate, d/dcap.
        let (_, grads) = self.gradient.call(&self.args(p))?;
        Ok(grads.iter().map(|g| g.as_real().expect("a real")).collect())
    }
}

/// Prints the loss and the parameters as L-BFGS goes.
struct Print;

impl Observe<IterState<Vec<f64>, Vec<f64>, (), (), (), f64>> for Print {
    fn observe_iter(
        &mut self,
        state: &IterState<Vec<f64>, Vec<f64>, (), (), (), f64>,
        _kv: &KV,
    ) -> Result<(), Error> {
        let p = state.get_param().expect("L-BFGS has a parameter");
        println!(
            "step {:>3}  loss {:>13.6e}  rate {:.4}  cap {:.4}",
            state.get_iter(),
            state.get_cost(),
            p[0],
            p[1]
        );
        Ok(())
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let write_data = match args.as_slice() {
        [] => None,
        [flag, path] if flag == "--write-data" => Some(path.as_str()),
        _ => return Err("usage: fit_logistic [--write-data FILE]".into()),
    };
    let [rate, cap] = fit_logistic(write_data)?;
    if (rate - TRUE_RATE).abs() > 5e-4 || (cap - TRUE_CAP).abs() > 5e-2 {
        return Err(format!("the fit missed the truth: rate {rate}, cap {cap}").into());
    }
    println!("recovered the truth (rate {TRUE_RATE}, cap {TRUE_CAP}) to three digits");
    Ok(())
}

/// Generates the observations (and writes them to `write_data`), prints
/// the gradient beside finite differences, fits, and returns the fitted
/// rate and capacity.
fn fit_logistic(write_data: Option<&str>) -> Result<[f64; 2], Box<dyn std::error::Error>> {
    let program = Program::parse(
        "examples/logistic_growth.grad",
        include_str!("logistic_growth.grad"),
    )?;
    let loss = program.function("loss")?;
    let jit = Jit::new()?;
    // Observations: the model itself at the true parameters (4,000 Euler
    // steps from P(0) = 2, sampled after every 400th).
    let mut obs = Vec::new();
    let mut p = P0;
    for step in 1..=4000 {
        p += 0.0025 * TRUE_RATE * p * (1.0 - p / TRUE_CAP);
        if step % 400 == 0 {
            obs.push(p);
        }
    }
    if let Some(path) = write_data {
        std::fs::write(path, serde_json::json!({ "obs": obs }).to_string() + "\n")?;
        println!("wrote the observations to {path}");
    }
    let problem = LogisticFit {
        loss: loss.compile(&jit)?,
        gradient: loss
            .gradient(Some(&["rate".into(), "cap".into()]), GradOptions::default())?
            .compile(&jit)?,
        obs: Value::reals(&obs),
    };

    // The gradient at the start, beside central finite differences.
    let start = vec![0.5, 30.0];
    let value = problem.cost(&start)?;
    let gradient = problem.gradient(&start)?;
    println!("loss {value:.6}");
    for (i, name) in ["rate", "cap"].iter().enumerate() {
        let h = 1e-6 * start[i].abs();
        let (mut up, mut down) = (start.clone(), start.clone());
        up[i] += h;
        down[i] -= h;
        let fd = (problem.cost(&up)? - problem.cost(&down)?) / (2.0 * h);
        println!(
            "d/d{name:<5} {:>16.6}  finite difference {fd:>16.6}",
            gradient[i]
        );
    }

    // L-BFGS with the More–Thuente line search, on the native gradient.
    // FirstStep starts the first line search at a unit move: the unscaled
    // first direction −g would send the rate to about 12,700, where the
    // Euler steps overflow.
    let solver = LBFGS::new(FirstStep::new(MoreThuenteLineSearch::new()), 7);
    let result = Executor::new(problem, solver)
        .add_observer(Print, ObserverMode::Every(5))
        .configure(|state| state.param(start).max_iters(100))
        .run()?;
    let state = result.state();
    let best = state.get_best_param().expect("L-BFGS ran");
    println!(
        "L-BFGS: {} iterations, loss {:.3e}, rate {:.6}, cap {:.6} ({})",
        state.get_iter(),
        state.get_best_cost(),
        best[0],
        best[1],
        state
            .get_termination_reason()
            .map_or("stopped", |r| r.text())
    );
    Ok([best[0], best[1]])
}

#[test]
fn recovers_the_truth() {
    let [rate, cap] = fit_logistic(None).unwrap();
    assert!((rate - TRUE_RATE).abs() < 1e-6, "rate {rate}");
    assert!((cap - TRUE_CAP).abs() < 1e-4, "cap {cap}");
}
