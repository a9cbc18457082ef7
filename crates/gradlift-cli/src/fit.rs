//! `gradlift fit`: minimizes a loss over some of its parameters with
//! argmin's solvers or Adam (crate `gradlift-optim`), the other parameters
//! held fixed as data.

use crate::{function, jit, load, read_args, Target};
use clap::ValueEnum;
use gradlift::Args;
use gradlift_optim::{fit, AdamOptions, Error, FitOptions, Loss, Method};
use std::io::IsTerminal;
use std::path::PathBuf;

/// The arguments of `gradlift fit`.
#[derive(clap::Args, Debug)]
pub(crate) struct FitArgs {
    #[command(flatten)]
    target: Target,
    /// The parameters to fit and their starting values, in the syntax of
    /// --at: 'rate=0.5, cap=30', or @file.json.
    #[arg(long, value_name = "ARGS")]
    params: String,
    /// Every other parameter, in the syntax of --at or as @file.json.
    #[arg(long, value_name = "ARGS")]
    data: Option<String>,
    /// The optimizer.
    #[arg(long, value_enum, default_value_t = FitMethod::Lbfgs)]
    method: FitMethod,
    /// The most iterations.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    iters: u64,
    /// Adam's step size (default 0.01).
    #[arg(long, value_name = "RATE")]
    lr: Option<f64>,
    /// Adam on minibatches of N data rows (the rows counted by the size
    /// variable that is the outer length of the data arrays).
    #[arg(long, value_name = "N")]
    batch: Option<usize>,
    /// Seed of Adam's minibatch sampler (default 1).
    #[arg(long)]
    seed: Option<u64>,
    /// Draw the loss per iteration to this file (.svg or .png).
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// Print one JSON object on stdout.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    limits: crate::Limits,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum FitMethod {
    /// L-BFGS with the More–Thuente line search (argmin).
    Lbfgs,
    /// BFGS with a dense inverse Hessian and More–Thuente (argmin).
    Bfgs,
    /// Nonlinear conjugate gradient, Polak–Ribière, More–Thuente (argmin).
    Cg,
    /// Steepest descent with the Hager–Zhang line search (argmin).
    Gd,
    /// Adam, on all rows or on minibatches (--batch).
    Adam,
}

impl FitMethod {
    fn label(self) -> &'static str {
        match self {
            FitMethod::Lbfgs => "L-BFGS",
            FitMethod::Bfgs => "BFGS",
            FitMethod::Cg => "Nonlinear CG",
            FitMethod::Gd => "Steepest descent",
            FitMethod::Adam => "Adam",
        }
    }

    fn method(self) -> Method {
        match self {
            FitMethod::Lbfgs => Method::Lbfgs,
            FitMethod::Bfgs => Method::Bfgs,
            FitMethod::Cg => Method::Cg,
            FitMethod::Gd => Method::Gd,
            FitMethod::Adam => Method::Adam,
        }
    }
}

/// An error of the optimizer crate as the CLI prints it.
fn report(e: Error) -> String {
    match e {
        Error::Gradlift(g) => crate::explain(g),
        Error::Start {
            message,
            located: true,
        }
        | Error::Data {
            message,
            located: true,
        } => message,
        other => format!("error: {other}"),
    }
}

pub(crate) fn run(a: FitArgs) -> Result<(), String> {
    let plot_format = match &a.plot {
        None => None,
        Some(path) => Some(crate::plot::Format::of(path)?),
    };
    if !matches!(a.method, FitMethod::Adam) {
        let adam_only = [
            ("--batch", a.batch.is_some()),
            ("--lr", a.lr.is_some()),
            ("--seed", a.seed.is_some()),
        ];
        if let Some((flag, _)) = adam_only.iter().find(|(_, given)| *given) {
            return Err(format!("error: {flag} is for --method adam"));
        }
    }
    let defaults = AdamOptions::default();
    let learning_rate = a.lr.unwrap_or(defaults.learning_rate);
    if !(learning_rate > 0.0 && learning_rate.is_finite()) {
        return Err(format!(
            "error: --lr must be a positive number, not {learning_rate}"
        ));
    }
    let program = load(&a.target.file)?;
    let function = function(&program, &a.target)?;
    let start = read_args("--params", &a.params)?;
    let data = match &a.data {
        Some(text) => read_args("--data", text)?,
        None => Args::default(),
    };
    let mut loss = Loss::from_args(&function, &jit(&a.limits)?, &start, &data).map_err(report)?;
    let bar = if std::io::stderr().is_terminal() {
        indicatif::ProgressBar::new(a.iters)
    } else {
        indicatif::ProgressBar::hidden()
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} iteration {pos}/{len} [{bar:30}] loss {msg} ({elapsed})",
        )
        .expect("a valid template")
        .progress_chars("=> "),
    );
    let progress_bar = bar.clone();
    let options = FitOptions {
        max_iters: a.iters,
        adam: AdamOptions {
            learning_rate,
            batch: a.batch,
            seed: a.seed.unwrap_or(defaults.seed),
            ..defaults
        },
    };
    let x0 = loss.start();
    let result = fit(
        &mut loss,
        a.method.method(),
        x0,
        &options,
        Box::new(move |iter, value| {
            progress_bar.set_position(iter);
            progress_bar.set_message(format!("{value:.6e}"));
        }),
    );
    bar.finish_and_clear();
    let result = result.map_err(report)?;
    if let (Some(path), Some(format)) = (&a.plot, plot_format) {
        let caption = format!(
            "{} on {} ({})",
            a.method.label(),
            function.name(),
            a.target.file.display()
        );
        crate::plot::loss_curve(path, format, &result.history, &caption)?;
    }
    let params = loss.unflatten(&result.x);
    if a.json {
        let map: serde_json::Map<String, serde_json::Value> = params
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_json()))
            .collect();
        let real = |x: f64| gradlift::Value::Real(x).to_json();
        println!(
            "{}",
            serde_json::json!({
                "params": map,
                "loss": real(result.loss),
                "iters": result.iters,
                "grad_norm": real(result.grad_norm),
            })
        );
        return Ok(());
    }
    let width = params
        .iter()
        .map(|(n, _)| n.chars().count())
        .max()
        .unwrap_or(0)
        .max("gradient norm".len());
    for (name, value) in &params {
        println!("{name:<width$}  {value}");
    }
    println!("{:<width$}  {}", "loss", gradlift::Value::Real(result.loss));
    println!(
        "{:<width$}  {}",
        "gradient norm",
        gradlift::Value::Real(result.grad_norm)
    );
    println!("{:<width$}  {}", "iterations", result.iters);
    println!(
        "{:<width$}  {} loss and {} gradient evaluations; {}",
        "", result.evaluations.0, result.evaluations.1, result.stop
    );
    Ok(())
}
