//! The `gradlift` command-line tool.

use clap::{Parser, Subcommand, ValueEnum};
use gradlift::{Args, Program};
use std::path::PathBuf;
use std::process::ExitCode;

const ARGS_HELP: &str =
    "ARGS names every parameter: 'x=1.5, A=[1,2,3], p=(1,2), M=[[1,2],[3,4]], s=100' \
(numbers may be inf, -inf, nan), or @file.json for a JSON object from parameter names to values \
(arrays and tuples as JSON arrays; \"inf\", \"-inf\", \"nan\" as strings).";

/// gradlift: exact gradients of a small functional array language.
///
/// A program is a file of definitions (see docs/language.md). Each
/// subcommand reads one, picks a function (`--fn`, by default the last
/// definition) and runs it on the arguments given with `--at`.
#[derive(Parser, Debug)]
#[command(name = "gradlift", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Evaluate a function at given arguments.
    ///
    /// Prints the value; with --json, one JSON object {"value": …} with
    /// arrays and tuples as JSON arrays.
    #[command(after_help = concat!(
        "Examples:\n",
        "  gradlift eval examples/dot.grad --at 'A=[1,2,3], B=[4,5,6]'\n",
        "  gradlift eval examples/ode.grad --fn primal --at 'x=[1,2,3,4], s=10' --json\n",
        "  gradlift eval examples/mlp.grad --at @inputs.json"
    ))]
    Eval(EvalArgs),
}

#[derive(clap::Args, Debug)]
struct EvalArgs {
    /// The program (a .grad file).
    file: PathBuf,
    /// The function to evaluate (default: the last definition in the file).
    #[arg(long = "fn", value_name = "NAME")]
    function: Option<String>,
    /// The arguments.
    #[arg(long, value_name = "ARGS", long_help = ARGS_HELP)]
    at: String,
    /// Which engine runs the program.
    #[arg(long, value_enum, default_value_t = Engine::Interp)]
    engine: Engine,
    /// Print one JSON object on stdout.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Engine {
    /// The reference interpreter (the semantics of the language).
    Interp,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Eval(a) => eval(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("{message}");
            ExitCode::FAILURE
        }
    }
}

/// Reads and checks a program file.
fn load(path: &PathBuf) -> Result<Program, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("error: cannot read `{}`: {e}", path.display()))?;
    Program::parse(&path.display().to_string(), &text).map_err(|e| e.to_string())
}

/// Reads `--at`-style arguments: inline text, or `@file.json`.
fn read_args(flag: &str, text: &str) -> Result<Args, String> {
    if let Some(path) = text.strip_prefix('@') {
        let data = std::fs::read_to_string(path)
            .map_err(|e| format!("error: cannot read `{path}`: {e}"))?;
        let json: serde_json::Value = serde_json::from_str(&data)
            .map_err(|e| format!("error: `{path}` is not valid JSON: {e}"))?;
        return Args::from_json(&json).map_err(|e| format!("error: {path}: {e}"));
    }
    Args::parse(flag, text).map_err(|e| {
        let src = gradlift::SourceFile::new(flag, text);
        gradlift::lang::Located {
            file: &src,
            error: &e,
        }
        .to_string()
    })
}

fn eval(a: EvalArgs) -> Result<(), String> {
    let program = load(&a.file)?;
    let function = match &a.function {
        Some(name) => program.function(name),
        None => program.last_function(),
    }
    .map_err(|e| format!("error: {e}"))?;
    let args = read_args("--at", &a.at)?;
    let values = function.args(&args).map_err(|e| e.to_string())?;
    let value = match a.engine {
        Engine::Interp => function.eval(&values).map_err(|e| e.to_string())?,
    };
    if a.json {
        println!("{}", serde_json::json!({ "value": value.to_json() }));
    } else {
        println!("{value}");
    }
    Ok(())
}
