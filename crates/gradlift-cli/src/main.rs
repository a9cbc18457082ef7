//! The `gradlift` command-line tool.

use clap::{Parser, Subcommand, ValueEnum};
use gradlift::lang::Spanned;
use gradlift::{Args, Construction, Function, Goal, GradOptions, Name, Program, Route};
use std::path::PathBuf;
use std::process::ExitCode;

mod fit;
mod gradbench;
mod plot;

const ARGS_HELP: &str =
    "ARGS names every parameter: 'x=1.5, A=[1,2,3], p=(1,2), M=[[1,2],[3,4]], s=100' \
(numbers may be inf, -inf, nan), or @file.json for a JSON object from parameter names to values \
(arrays and tuples as JSON arrays; \"inf\", \"-inf\", \"nan\" as strings).";

/// gradlift: exact gradients of a small functional array language.
///
/// A program is a file of definitions (see docs/language.md). Each
/// subcommand reads one, picks a function (`--fn`, by default the last
/// definition) and works on it.
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
    Eval(Run),
    /// Value and gradient of a real-valued function.
    ///
    /// Differentiates by reverse mode (the UNF route by default) with
    /// respect to every parameter that is not a size, or those named by
    /// --wrt. Prints the value and one gradient per parameter; with --json,
    /// one object {"value": v, "gradient": {"A": […], …}}.
    #[command(after_help = concat!(
        "Examples:\n",
        "  gradlift grad examples/dot.grad --at 'A=[1,2,3], B=[4,5,6]'\n",
        "  gradlift grad examples/prod.grad --at 'A=[1,0,3]' --via direct --json\n",
        "  gradlift grad examples/mlp.grad --at @inputs.json --wrt W1,b1"
    ))]
    Grad(GradArgs),
    /// The Jacobian of a vector-valued function.
    ///
    /// For a function returning `R` or `[R; m]`, the matrix of the
    /// derivatives of its results with respect to one parameter of type
    /// `R` or `[R; n]` (--wrt; by default the only one that holds reals):
    /// m rows of n. By default it takes whichever of forward mode (one pass
    /// per input) and reverse mode (one pass per output) needs fewer passes
    /// for the shape; --mode picks one. With --json, one object
    /// {"jacobian": […]}.
    #[command(after_help = concat!(
        "Examples:\n",
        "  gradlift jacobian examples/jacobian.grad --fn tip --at 'x=[0.3, 0.5, -0.4]'\n",
        "  gradlift jacobian examples/jacobian.grad --fn tip --at 'x=[0.3, 0.5, -0.4]' --mode reverse --json"
    ))]
    Jacobian(JacobianArgs),
    /// Print a stage of the pipeline.
    ///
    /// Stages: source (the function inlined into one term, every binder
    /// renamed apart), unf (Source UNF, Figure 9), target-unf (Figure 8),
    /// target (the gradient program, Figure 10 or Figure 5 with --via
    /// direct), opt (after partial evaluation and the rewrites of Figure
    /// 12), clif (the Cranelift IR the JIT compiles, with the source terms
    /// as comments), asm (the machine code). source, target and
    /// opt print definitions gradlift parses back;
    /// the UNF stages print a text form that the library reads back
    /// (gradlift_ad::unf::parse_unf, reverse_unf::parse_target_unf).
    ///
    /// With --object FILE, writes a relocatable object file exporting the
    /// function and, when it returns a real, its value and gradient (`NAME`
    /// and `NAME_grad`, ABI in docs/abi.md), each with the bytes of
    /// workspace it needs at given sizes (`NAME_workspace`,
    /// `NAME_grad_workspace`), for --target (default: the host's triple).
    #[command(after_help = concat!(
        "Examples:\n",
        "  gradlift emit examples/example_1_1.grad --stage unf\n",
        "  gradlift emit examples/dot.grad --stage target --via direct\n",
        "  gradlift emit examples/prod.grad --stage opt --grad\n",
        "  gradlift emit examples/dot.grad --stage opt --hvp\n",
        "  gradlift emit examples/dot.grad --stage asm --grad --target aarch64-unknown-linux-gnu\n",
        "  gradlift emit examples/dot.grad --target aarch64-unknown-linux-gnu --object dot.o"
    ))]
    Emit(EmitArgs),
    /// The cost model of Figure 11 and the cheap-gradient bound.
    ///
    /// Prints Cost(e) of the function and Cost(∇e) of its optimized gradient
    /// program — (MOVES, ADDS, MULTS, NLOPS), each a polynomial in the size
    /// variables evaluated at --sizes — their ratio per component and in
    /// total, p = NAO(e), the bound 4·3^p of Theorem 5.4, and whether the
    /// total ratio is within it. Writing out the zero gradient of a
    /// parameter nothing flows into is output, not work: it is reported
    /// apart and not counted (docs/cost-model.md). Below the totals, the
    /// bytes each term reads and writes in arrays (a model of memory
    /// traffic, not part of the bound). With --json, one object {"primal": {…},
    /// "gradient": {…}, "nao": p, "bound": b, "ratio": r, "holds": bool,
    /// "primal_bytes": {"read": …, "written": …}, "gradient_bytes": {…}}.
    #[command(after_help = concat!(
        "Examples:\n",
        "  gradlift cost examples/dot.grad --sizes n=1000\n",
        "  gradlift cost examples/mlp.grad --sizes d=8,h=16,m=100 --json"
    ))]
    Cost(CostArgs),
    /// Measure compile time, primal time and value-and-gradient time.
    ///
    /// Fills the parameters deterministically at the given sizes (reals in
    /// [0.5, 1.5), integers 1), compiles the function and its optimized gradient to
    /// native code, runs each repeatedly for about --seconds, and reports
    /// medians: compile time from text to native gradient, the primal's
    /// and the gradient's time per call, their ratio, and the cost model's
    /// ratio and bound. With --json, one object {"compile_ms", "primal_ns",
    /// "grad_ns", "ratio", "cost_ratio", "bound"} (`cost_ratio` is null
    /// for a loop on a binomial checkpoint schedule, which the cost model
    /// does not cover).
    #[command(after_help = concat!(
        "Examples:\n",
        "  gradlift bench examples/dot.grad --sizes n=1000000\n",
        "  gradlift bench examples/logistic_growth.grad --json"
    ))]
    Bench(BenchArgs),
    /// Value and directional derivative by forward mode.
    ///
    /// --dir gives a direction for every parameter that is not a size, in
    /// the syntax of --at. Prints the value and the tangent ⟨∇f, dir⟩ (for
    /// a function returning an array or tuple, the tangent has its shape);
    /// with --json, {"value": v, "tangent": t}.
    #[command(after_help = concat!(
        "Examples:\n",
        "  gradlift jvp examples/dot.grad --at 'A=[1,2,3], B=[4,5,6]' --dir 'A=[1,0,0], B=[0,0,0]'\n",
        "  gradlift jvp examples/ode.grad --fn primal --at 'x=[1,2,3,4], s=10' --dir 'x=[1,0,0,0]' --json"
    ))]
    Jvp(DirArgs),
    /// Hessian-vector product, forward mode over reverse mode.
    ///
    /// Prints the value, the gradient and the Hessian times --dir; with
    /// --json, {"value": v, "gradient": {…}, "hvp": {…}}.
    #[command(
        after_help = "Example:\n  gradlift hvp examples/prod.grad --at 'A=[1,2,3]' --dir 'A=[1,0,0]'"
    )]
    Hvp(DirArgs),
    /// The dense Hessian, one Hessian-vector product per input direction
    /// (for small inputs).
    ///
    /// Prints one row per input real, in parameter order; with --json,
    /// {"value": v, "hessian": [[…], …]}.
    #[command(
        after_help = "Example:\n  gradlift hessian examples/example_1_1.grad --at 'x1=2, x2=3, x3=5'"
    )]
    Hessian(Run),
    /// Minimize a loss over some of its parameters.
    ///
    /// --params names the parameters to fit with their starting values
    /// (the syntax of --at); --data gives every other parameter. Runs
    /// argmin's L-BFGS, BFGS, nonlinear conjugate gradient or steepest
    /// descent (each with its line search), or Adam, on the native
    /// gradient; shows a progress bar on a terminal; prints the fitted
    /// parameters, the loss, the gradient norm and the iterations, or with
    /// --json one object {"params": {…}, "loss": l, "iters": n,
    /// "grad_norm": g}. --plot draws the loss per iteration (SVG or PNG).
    #[command(after_help = concat!(
        "Examples:\n",
        "  gradlift fit examples/logistic_growth.grad --params 'rate=0.5, cap=30' --data @logistic.json\n",
        "  gradlift fit examples/logistic_growth.grad --params 'rate=0.5, cap=30' --data @logistic.json --method cg --plot loss.svg\n",
        "  gradlift fit examples/logistic_regression.grad --params 'w=[0,0]' --method adam --batch 2 \\\n",
        "      --data 'X=[[1,2],[-1,-2],[2,1],[-2,-1]], y=[1,-1,1,-1], lambda=0.01'\n",
        "(logistic.json: cargo run --example fit_logistic -- --write-data logistic.json)"
    ))]
    Fit(fit::FitArgs),
    /// Serve the GradBench protocol on stdin and stdout.
    ///
    /// Reads one JSON message per line and answers each in order on
    /// stdout: modules hello, lse, llsq, ode, kmeans, lstm, gmm, det and ba
    /// (its objective), written in the
    /// gradlift language (crates/gradlift-cli/gradbench/) and compiled to
    /// native code when defined. See docs/gradbench.md.
    #[command(
        after_help = "Example:\n  echo '{\"id\":0,\"kind\":\"define\",\"module\":\"lse\"}' | gradlift gradbench"
    )]
    Gradbench,
}

/// What every command that runs a function takes.
#[derive(clap::Args, Debug)]
struct Run {
    #[command(flatten)]
    target: Target,
    /// The arguments.
    #[arg(long, value_name = "ARGS", long_help = ARGS_HELP)]
    at: String,
    /// Which engine runs the program.
    #[arg(long, value_enum, default_value_t = Engine::Jit)]
    engine: Engine,
    /// Print one JSON object on stdout.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    limits: Limits,
}

/// The limits of native code, for every command that runs it.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct Limits {
    /// The most workspace native code may allocate for one call: bytes, or
    /// a number with a unit (`512MiB`, `8GiB`, `10GB`). The arrays a
    /// program builds live there; a call that needs more stops with an
    /// error saying how much it needs.
    #[arg(long, value_name = "BYTES", default_value = "4GiB", value_parser = parse_bytes)]
    max_workspace: u64,
    /// The most steps a `while` loop takes, in either engine: a loop still
    /// going after that many stops the program with an error.
    #[arg(long, value_name = "STEPS", default_value_t = gradlift::lang::interp::DEFAULT_MAX_ITERATIONS)]
    max_iterations: u64,
    /// The threads native code runs its large matrix products (`matmul` of
    /// 2^24 multiply-adds or more) and its long maps and reduces of reals
    /// (114,689 elements or more, split into fixed chunks of 16,384) on (default: the cores of this machine). The
    /// results are the same bits for any count; 1 runs everything on the
    /// calling thread.
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// Keep the native code compiled in files under DIR, and load it from
    /// there when the same program is compiled again with the same
    /// options (by this build of gradlift, for this machine): the second
    /// run of a command skips differentiation and compilation. A damaged
    /// file is compiled again. The code in DIR runs: keep it writable by
    /// you alone. Nothing is evicted; delete DIR to empty it.
    /// Without it, $GRADLIFT_CACHE_DIR when that is set and not empty
    /// (but for `bench`, whose compile times would be load times).
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<std::path::PathBuf>,
}

impl Limits {
    /// The interpreter's limits under these.
    fn interp(&self) -> gradlift::lang::interp::Limits {
        gradlift::lang::interp::Limits {
            max_iterations: self.max_iterations,
            ..Default::default()
        }
    }
}

/// A round number of bytes, at least `needed`, as --max-workspace reads it.
fn enough(needed: u64) -> String {
    for (unit, size) in [("TiB", 1u64 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20)] {
        if needed > size {
            return format!("{}{unit}", needed.div_ceil(size));
        }
    }
    format!("{}KiB", needed.div_ceil(1 << 10))
}

/// `4096`, `4KiB`, `512MiB`, `8GiB`, `1TiB`, `10GB`, `1.5GiB`.
fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let scale: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        other => {
            return Err(format!(
                "`{other}` is not a unit of bytes (use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)"
            ))
        }
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a number of bytes, such as 4096 or 8GiB"))?;
    let bytes = value * scale as f64;
    if !(bytes.is_finite() && bytes >= 1.0 && bytes <= (1u64 << 62) as f64) {
        return Err(format!("`{text}` is not between 1 byte and 4 EiB"));
    }
    Ok(bytes as u64)
}

#[derive(clap::Args, Debug)]
struct GradArgs {
    #[command(flatten)]
    run: Run,
    /// Which transformation differentiates.
    #[arg(long, value_enum, default_value_t = Via::Unf)]
    via: Via,
    /// Differentiate with respect to these parameters only (comma-separated).
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    wrt: Option<Vec<String>>,
    #[command(flatten)]
    checkpoint: Checkpointing,
    /// Print each pass's time on stderr, and why the simplifier stopped.
    #[arg(long)]
    time_passes: bool,
}

#[derive(clap::Args, Debug)]
struct JacobianArgs {
    #[command(flatten)]
    run: Run,
    /// The parameter to differentiate with respect to (`R` or `[R; n]`).
    #[arg(long, value_name = "NAME")]
    wrt: Option<String>,
    /// Forward mode (a pass per input), reverse mode (a pass per output),
    /// or whichever needs fewer passes.
    #[arg(long, value_enum, default_value_t = Mode::Auto)]
    mode: Mode,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Mode {
    /// One forward-mode pass per input.
    Forward,
    /// One reverse-mode pass per output.
    Reverse,
    /// Forward when the inputs are no more than the outputs, else reverse.
    Auto,
}

/// The checkpoint option of the commands that differentiate.
#[derive(clap::Args, Debug)]
struct Checkpointing {
    /// How the reverse of every `foldl` without its own `@checkpoint`
    /// recomputes its states: `none` keeps them all; `K` stores a snapshot
    /// every K steps and replays one block at a time (memory ≈ n/K + K
    /// states, time ≈ 1.5× the forward pass more); `binomial:C` uses C
    /// snapshots on Griewank's binomial schedule (memory C states, the
    /// fewest recomputations possible with C). Forward mode (`jvp`) keeps
    /// no states, so there it changes nothing.
    #[arg(long, value_name = "none|K|binomial:C", default_value = "none", value_parser = parse_checkpoint)]
    checkpoint: CheckpointArg,
}

#[derive(Clone, Copy, Debug)]
struct CheckpointArg(Option<gradlift::lang::Schedule>);

fn parse_checkpoint(text: &str) -> Result<CheckpointArg, String> {
    if text.trim() == "none" {
        return Ok(CheckpointArg(None));
    }
    gradlift::lang::Schedule::parse(text).map(|s| CheckpointArg(Some(s)))
}

#[derive(clap::Args, Debug)]
struct DirArgs {
    #[command(flatten)]
    run: Run,
    /// The direction: one value per parameter that is not a size, in the
    /// syntax of --at.
    #[arg(long, value_name = "ARGS")]
    dir: String,
    #[command(flatten)]
    checkpoint: Checkpointing,
}

#[derive(clap::Args, Debug)]
struct BenchArgs {
    #[command(flatten)]
    target: Target,
    /// Values of the size variables and size parameters: `n=1000,s=10`.
    /// Each is named once and is at most 2^40; the inputs they make may
    /// hold at most 2^28 reals (2 GiB). Checked before anything is compiled.
    #[arg(long, value_name = "SIZES", default_value = "")]
    sizes: String,
    /// Benchmark at these arguments instead of generated ones (then
    /// --sizes is not needed): as for `grad --at`, or @file.json. Generated
    /// arguments fill integers with 1, a valid index of any array of two
    /// elements or more; give indices here to measure real access patterns.
    #[arg(long, value_name = "ARGS")]
    at: Option<String>,
    /// About how long to run each of the primal and the gradient.
    #[arg(long, default_value_t = 1.0)]
    seconds: f64,
    /// Print one JSON object on stdout.
    #[arg(long)]
    json: bool,
    /// Differentiate with respect to these parameters only (comma-separated).
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    wrt: Option<Vec<String>>,
    #[command(flatten)]
    checkpoint: Checkpointing,
    #[command(flatten)]
    limits: Limits,
}

#[derive(clap::Args, Debug)]
struct CostArgs {
    #[command(flatten)]
    target: Target,
    /// Values of the size variables: `n=1000,k=5`.
    #[arg(long, value_name = "SIZES", default_value = "")]
    sizes: String,
    /// Which transformation differentiates.
    #[arg(long, value_enum, default_value_t = Via::Unf)]
    via: Via,
    /// Print one JSON object on stdout.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args, Debug)]
struct Target {
    /// The program (a .grad file).
    file: PathBuf,
    /// The function (default: the last definition in the file).
    #[arg(long = "fn", value_name = "NAME")]
    function: Option<String>,
}

#[derive(clap::Args, Debug)]
struct EmitArgs {
    /// The program (a .grad file).
    #[arg(required_unless_present = "list_stages")]
    file: Option<PathBuf>,
    /// The function (default: the last definition in the file).
    #[arg(long = "fn", value_name = "NAME")]
    function: Option<String>,
    /// The stage to print: a pass of the pipeline (see --list-stages:
    /// source, first-order, checkpoint, unf, target-unf, target, opt,
    /// forward, forward-opt, the simplifier's pe, cse, dce, prune, demand,
    /// reuse, merge, split, …) or a stage of the native backend (clif, asm).
    /// The term after that pass; after a member of the simplifier, after
    /// its first round.
    #[arg(long, value_name = "NAME", required_unless_present_any = ["object", "list_stages"])]
    stage: Option<String>,
    /// Print every stage, in pipeline order, with what it implements.
    #[arg(long)]
    list_stages: bool,
    /// Print each pass's time on stderr, and why the simplifier stopped.
    #[arg(long)]
    time_passes: bool,
    /// For --stage clif and asm, and --object: the target triple
    /// (`aarch64-unknown-linux-gnu`, `x86_64-unknown-linux-gnu`, …), with
    /// its baseline features. Default: the host, with the features of this
    /// CPU for clif and asm (what the JIT runs), the triple's baseline for
    /// --object.
    #[arg(long = "target", value_name = "TRIPLE")]
    triple: Option<String>,
    /// Write an object file exporting the function and its gradient (and
    /// the workspace each needs).
    #[arg(long, value_name = "FILE", conflicts_with = "stage")]
    object: Option<PathBuf>,
    /// Which transformation differentiates (for --stage target and opt).
    #[arg(long, value_enum, default_value_t = Via::Unf)]
    via: Via,
    /// Build every continuation as a lambda over the whole context, as
    /// Figure 5 prints them (quadratic in the program's length), instead of
    /// applying their sparse updates as they are built.
    #[arg(long)]
    literal: bool,
    /// For --stage opt, clif and asm: the gradient program rather than the
    /// function itself. The target and UNF stages are always of the
    /// gradient; the source stage is always the function.
    #[arg(long)]
    grad: bool,
    /// For --stage opt, clif and asm: the Hessian-vector product program
    /// (forward mode over the optimized gradient, what `gradlift hvp` and
    /// GradBench's kmeans `dir` run), which takes a direction `dNAME` for
    /// each value parameter after the parameters.
    #[arg(long, conflicts_with = "grad")]
    hvp: bool,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Engine {
    /// Native code compiled with Cranelift.
    Jit,
    /// The reference interpreter (the semantics of the language).
    Interp,
}

/// The command line's `Jit`. A command compiles each thing once, and
/// `bench` times compiles, so it keeps no compile cache in memory; on disk
/// under `--cache-dir` or `$GRADLIFT_CACHE_DIR`.
pub(crate) fn jit(limits: &Limits) -> Result<gradlift::Jit, String> {
    jit_with(limits, true)
}

/// [`jit`], reading `$GRADLIFT_CACHE_DIR` when `env` (`bench`, which
/// times compiles, takes a disk cache from its flag alone).
fn jit_with(limits: &Limits, env: bool) -> Result<gradlift::Jit, String> {
    gradlift::Jit::new()
        .map(|jit| {
            let jit = jit
                .cache(false)
                .max_workspace(limits.max_workspace)
                .max_iterations(limits.max_iterations);
            let jit = match limits.threads {
                Some(n) => jit.threads(n),
                None => jit,
            };
            let from_env = || {
                std::env::var_os("GRADLIFT_CACHE_DIR")
                    .filter(|d| env && !d.is_empty())
                    .map(std::path::PathBuf::from)
            };
            match limits.cache_dir.clone().or_else(from_env) {
                Some(dir) => jit.disk_cache(dir),
                None => jit,
            }
        })
        .map_err(|e| format!("error: {e}"))
}

/// A facade error as the command line prints it: the message with its
/// position, and for a workspace limit, the flag that raises it.
pub(crate) fn explain(e: gradlift::Error) -> String {
    match e.kind() {
        gradlift::ErrorKind::MemoryLimit { needed, .. } => {
            gradlift::Error::new(e.kind(), e.message())
                .with_note(format!(
                    "raise the limit with --max-workspace (--max-workspace {} is enough), or run on the interpreter with --engine interp",
                    enough(needed)
                ))
                .to_string()
        }
        _ => e.to_string(),
    }
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Via {
    /// Source → UNF → reverse mode on UNF → UNF⁻¹ (Figures 8–10).
    Unf,
    /// The direct transform of Figure 5.
    Direct,
}

fn main() -> ExitCode {
    // Like other command-line tools, stop quietly when the reader of stdout
    // goes away (`gradlift emit … | head`), instead of failing a write.
    #[cfg(unix)]
    // SAFETY: setting a signal's disposition to the default before any
    // other thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Eval(a) => eval(a),
        Command::Grad(a) => grad(a),
        Command::Jacobian(a) => jacobian(a),
        Command::Emit(a) => emit(a),
        Command::Cost(a) => cost(a),
        Command::Bench(a) => bench(a),
        Command::Jvp(a) => jvp(a),
        Command::Hvp(a) => hvp(a),
        Command::Hessian(a) => hessian(a),
        Command::Fit(a) => fit::run(a),
        Command::Gradbench => gradbench::serve(std::io::stdin().lock(), std::io::stdout().lock()),
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
    Program::parse(&path.display().to_string(), &text).map_err(explain)
}

fn function<'p>(program: &'p Program, target: &Target) -> Result<Function<'p>, String> {
    match &target.function {
        Some(name) => program.function(name),
        None => program.last_function(),
    }
    .map_err(explain)
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

fn eval(a: Run) -> Result<(), String> {
    let program = load(&a.target.file)?;
    let function = function(&program, &a.target)?;
    let args = read_args("--at", &a.at)?;
    let values = function.args(&args).map_err(explain)?;
    let interp = || function.eval_with(&values, a.limits.interp());
    let value = match a.engine {
        Engine::Interp => interp(),
        Engine::Jit => native(
            function.compile(&jit(&a.limits)?).map(|f| f.call(&values)),
            interp,
        ),
    }
    .map_err(explain)?;
    if a.json {
        println!("{}", serde_json::json!({ "value": value.to_json() }));
    } else {
        println!("{value}");
    }
    Ok(())
}

fn jacobian(a: JacobianArgs) -> Result<(), String> {
    let run = &a.run;
    let program = load(&run.target.file)?;
    let function = function(&program, &run.target)?;
    let args = read_args("--at", &run.at)?;
    let values = function.args(&args).map_err(explain)?;
    let mode = match a.mode {
        Mode::Forward => gradlift::JacobianMode::Forward,
        Mode::Reverse => gradlift::JacobianMode::Reverse,
        Mode::Auto => gradlift::JacobianMode::Auto,
    };
    let with_jacobian = function.jacobian(a.wrt.as_deref(), mode).map_err(explain)?;
    let jacobian = with_jacobian.last_function().map_err(explain)?;
    let interp = || jacobian.eval_with(&values, run.limits.interp());
    let value = match run.engine {
        Engine::Interp => interp(),
        Engine::Jit => native(
            jacobian
                .compile(&jit(&run.limits)?)
                .map(|f| f.call(&values)),
            interp,
        ),
    }
    .map_err(explain)?;
    if run.json {
        println!("{}", serde_json::json!({ "jacobian": value.to_json() }));
    } else {
        // A matrix, a row per line; a vector or a real as it is.
        match &value {
            gradlift::Value::Array(rows)
                if rows.iter().all(|r| matches!(r, gradlift::Value::Array(_)))
                    && !rows.is_empty() =>
            {
                for row in rows.iter() {
                    println!("{row}");
                }
            }
            other => println!("{other}"),
        }
    }
    Ok(())
}

/// The result of native code, with the reference interpreter as the
/// authority on errors: a run-time error in native code is reported as the
/// interpreter reports it, with its position in the source, and a program
/// the JIT cannot compile (a Target-only form) runs on the interpreter. A
/// call refused for its workspace is the native code's own error (the
/// interpreter, with limits of its own, would be slower to say less).
fn native<T>(
    compiled: Result<Result<T, gradlift::Error>, gradlift::Error>,
    interp: impl FnOnce() -> Result<T, gradlift::Error>,
) -> Result<T, gradlift::Error> {
    use gradlift::ErrorKind;
    match compiled {
        Ok(Ok(v)) => Ok(v),
        // A loop past its limit: the interpreter would take as many steps,
        // far more slowly, to say where.
        Ok(Err(native)) if native.kind() == ErrorKind::IterationLimit => Err(native),
        Ok(Err(native)) if native.kind() == ErrorKind::Runtime => match interp() {
            Err(e) => Err(e),
            // Native code failed where the interpreter does not: report it.
            Ok(_) => Err(native),
        },
        Ok(Err(e)) => Err(e),
        Err(e) if e.kind() == ErrorKind::Unsupported => {
            eprintln!("note: {}; running on the interpreter", e.message());
            interp()
        }
        Err(e) => Err(e),
    }
}

fn options(via: Via, literal: bool, optimize: bool) -> GradOptions {
    with_checkpoint(via, literal, optimize, None)
}

fn with_checkpoint(
    via: Via,
    literal: bool,
    optimize: bool,
    checkpoint: Option<gradlift::lang::Schedule>,
) -> GradOptions {
    GradOptions {
        checkpoint,
        route: match via {
            Via::Unf => Route::Unf,
            Via::Direct => Route::Direct,
        },
        construction: if literal {
            Construction::Literal
        } else {
            Construction::Sparse
        },
        optimize,
    }
}

fn grad(a: GradArgs) -> Result<(), String> {
    let program = load(&a.run.target.file)?;
    let function = function(&program, &a.run.target)?;
    let args = read_args("--at", &a.run.at)?;
    let values = function.args(&args).map_err(explain)?;
    let wrt: Option<Vec<Name>> = a
        .wrt
        .map(|w| w.iter().map(|n| Name::from(n.trim())).collect());
    let options = with_checkpoint(a.via, false, true, a.checkpoint.checkpoint.0);
    // Differentiated here when its passes are printed or it is
    // interpreted; else by the compile, which a disk cache may skip.
    let differentiated = match a.time_passes || matches!(a.run.engine, Engine::Interp) {
        true => Some(
            function
                .gradient(wrt.as_deref(), options)
                .map_err(explain)?,
        ),
        false => None,
    };
    if let Some(program) = differentiated.as_ref().filter(|_| a.time_passes) {
        print_times(program.times(), program.simplifier());
    }
    let interp = || match &differentiated {
        Some(program) => program.eval_with(&values, a.run.limits.interp()),
        None => function
            .gradient(wrt.as_deref(), options)?
            .eval_with(&values, a.run.limits.interp()),
    };
    let (value, grads) = match a.run.engine {
        Engine::Interp => interp(),
        Engine::Jit => {
            let jit = jit(&a.run.limits)?;
            let compiled = match &differentiated {
                Some(program) => program.compile(&jit),
                None => function.compile_gradient(&jit, wrt.as_deref(), options),
            };
            native(compiled.map(|g| g.call(&values)), interp)
        }
    }
    .map_err(|e| {
        // The gradient program is generated: where the function itself
        // fails at these arguments, its error points into the user's source.
        if e.kind() == gradlift::ErrorKind::Runtime {
            if let Err(primal) = function.eval(&values) {
                if primal.kind() == gradlift::ErrorKind::Runtime {
                    return explain(primal);
                }
            }
        }
        explain(e)
    })?;
    let names = function.gradient_params(wrt.as_deref());
    if a.run.json {
        let gradient: serde_json::Map<String, serde_json::Value> = names
            .iter()
            .zip(&grads)
            .map(|(n, g)| (n.to_string(), g.to_json()))
            .collect();
        let value = gradlift::Value::Real(value).to_json();
        println!(
            "{}",
            serde_json::json!({ "value": value, "gradient": gradient })
        );
    } else {
        println!("value: {}", gradlift::Value::Real(value));
        for (n, g) in names.iter().zip(&grads) {
            println!("d/d{n}: {g}");
        }
    }
    Ok(())
}

fn emit(a: EmitArgs) -> Result<(), String> {
    if a.list_stages {
        list_stages();
        return Ok(());
    }
    let target = Target {
        file: a.file.clone().expect("clap requires the file"),
        function: a.function.clone(),
    };
    let program = load(&target.file)?;
    let function = function(&program, &target)?;
    let closed = function.closed().map_err(explain)?;
    let target_jit = || match &a.triple {
        Some(t) => gradlift::Jit::for_target(t).map_err(|e| format!("error: {e}")),
        None => jit(&Limits {
            max_workspace: gradlift::jit::DEFAULT_MAX_WORKSPACE,
            max_iterations: gradlift::lang::interp::DEFAULT_MAX_ITERATIONS,
            threads: None,
            cache_dir: None,
        }),
    };
    let gradient = || {
        function
            .gradient(None, options(a.via, false, true))
            .map_err(explain)
    };
    let hvp = || {
        function
            .hvp_program(options(a.via, false, true))
            .map_err(explain)
    };
    if let Some(path) = &a.object {
        let triple = a.triple.clone().unwrap_or_else(gradlift::Jit::host_triple);
        let jit = gradlift::Jit::for_target(&triple).map_err(|e| format!("error: {e}"))?;
        // The gradient too when there is one (the function returns a real).
        let grad = if function.signature().ret == gradlift::Type::Real {
            Some(gradient()?.closed())
        } else {
            None
        };
        let own = function.optimized().map_err(explain)?;
        let mut functions = vec![&own];
        functions.extend(grad.as_ref());
        let bytes = jit.object(&functions).map_err(|e| format!("error: {e}"))?;
        std::fs::write(path, bytes)
            .map_err(|e| format!("error: cannot write {}: {e}", path.display()))?;
        let names: Vec<String> = functions.iter().map(|c| format!("`{}`", c.name)).collect();
        eprintln!(
            "wrote {} ({triple}): {}",
            path.display(),
            names.join(" and ")
        );
        if grad.is_none() {
            eprintln!(
                "note: `{}` returns `{}`, not `R`: no gradient exported",
                closed.name,
                function.signature().ret
            );
        }
        return Ok(());
    }
    let Some(stage) = a.stage.as_deref() else {
        return Err("error: give --stage or --object".into());
    };
    if let "clif" | "asm" = stage {
        let program = if a.hvp {
            hvp()?
        } else if a.grad {
            gradient()?.closed()
        } else {
            function.optimized().map_err(explain)?
        };
        let jit = target_jit()?;
        let text = match stage {
            "clif" => jit.clif(&program),
            _ => jit.asm(&program),
        };
        print!("{}", text.map_err(|e| format!("error: {e}"))?);
        return Ok(());
    }
    // The goal: what --grad or --hvp asks for; else the gradient for the
    // stages only a gradient has, forward mode for its own, the function
    // itself otherwise.
    let goal = if a.hvp {
        Goal::Hvp
    } else if a.grad {
        Goal::Gradient
    } else {
        match stage {
            "first-order" | "reversed-loops" | "checkpoint" | "unf" | "target-unf" | "target" => {
                Goal::Gradient
            }
            "forward" | "forward-opt" => Goal::Jvp,
            _ => Goal::Primal,
        }
    };
    // With --hvp, `opt` is the simplified Hessian-vector product program.
    let stage = if a.hvp && stage == "opt" {
        "forward-opt"
    } else {
        stage
    };
    let out = function
        .stage(stage, goal, options(a.via, a.literal, true))
        .map_err(explain)?;
    print!("{}", out.stage);
    if a.time_passes {
        print_times(&out.times, &out.simplifier);
    }
    Ok(())
}

/// The passes' times on stderr (`--time-passes`), and why the simplifier
/// stopped.
fn print_times(
    times: &[gradlift::ad::pipeline::PassTime],
    simplifier: &[(gradlift::ad::simplify::Stop, usize)],
) {
    eprintln!("{:<16} {:>10} {:>5}", "pass", "time (ms)", "runs");
    for t in times {
        eprintln!(
            "{:<16} {:>10.3} {:>5}",
            t.name,
            t.time.as_secs_f64() * 1e3,
            t.runs
        );
    }
    for (stop, rounds) in simplifier {
        eprintln!(
            "the simplifier stopped after {rounds} round{}: {stop}",
            if *rounds == 1 { "" } else { "s" }
        );
    }
}

/// `--list-stages`: every stage, in pipeline order.
fn list_stages() {
    for p in gradlift::ad::pipeline::PASSES {
        let view = if p.view { " (a view)" } else { "" };
        println!("{:<12} {}{view} [{}]", p.name, p.description, p.implements);
        if p.name == "opt" {
            for m in gradlift::ad::simplify::PASSES {
                println!("  {:<10} {} [{}]", m.name, m.description, m.implements);
            }
        }
    }
    println!("{:<12} the Cranelift IR the JIT compiles, with the source terms as comments [not in the paper]", "clif");
    println!(
        "{:<12} the machine code, disassembled by Cranelift [not in the paper]",
        "asm"
    );
}

/// The primitives `e` applies that Theorem 5.4 is not proven for (the
/// `paper` column of the primitive table), each once, as `name`.
fn beyond_the_paper(e: &gradlift::lang::Expr) -> Vec<String> {
    let mut found = std::collections::BTreeSet::new();
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        if let gradlift::lang::ExprKind::Prim(p, _) = &e.kind {
            if !p.info().paper {
                found.insert(format!("`{p}`"));
            }
        }
        stack.extend(e.children());
    }
    found.into_iter().collect()
}

/// Reads `n=1000,k=5`.
fn read_sizes(text: &str) -> Result<std::collections::HashMap<Name, f64>, String> {
    let mut sizes = std::collections::HashMap::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((name, value)) = part.split_once('=') else {
            return Err(format!(
                "error: --sizes: `{part}` is not of the form name=value"
            ));
        };
        if sizes.contains_key(name.trim()) {
            return Err(format!("error: --sizes: `{}` is given twice", name.trim()));
        }
        let v: u64 = value.trim().parse().map_err(|_| {
            format!(
                "error: --sizes: the size `{}` must be a whole number ≥ 0, not `{}`",
                name.trim(),
                value.trim()
            )
        })?;
        sizes.insert(Name::from(name.trim()), v as f64);
    }
    Ok(sizes)
}

fn cost(a: CostArgs) -> Result<(), String> {
    use gradlift::ad::cost::{cost, gradient_cost, nao};
    let program = load(&a.target.file)?;
    let function = function(&program, &a.target)?;
    let sizes = read_sizes(&a.sizes)?;
    let closed = function.closed().map_err(explain)?;
    check_size_names(&closed.name, &closed.size_vars, &sizes)?;
    let g = function
        .gradient(None, options(a.via, false, true))
        .map_err(explain)?;
    let ctx = closed.context();
    let primal = cost(&ctx, &closed.size_vars, &closed.body).map_err(|e| format!("error: {e}"))?;
    let gradient =
        gradient_cost(&ctx, &closed.size_vars, g.term()).map_err(|e| format!("error: {e}"))?;
    let with_zeros = cost(&ctx, &closed.size_vars, g.term()).map_err(|e| format!("error: {e}"))?;
    let zeros_cost: f64 =
        with_zeros.eval(&sizes).iter().sum::<f64>() - gradient.eval(&sizes).iter().sum::<f64>();
    let p = nao(&closed.body);
    let bound = 4.0 * 3f64.powi(p as i32);
    let (pv, gv) = (primal.eval(&sizes), gradient.eval(&sizes));
    let (pb, gb) = (primal.bytes(&sizes), gradient.bytes(&sizes));
    let (pt, gt): (f64, f64) = (pv.iter().sum(), gv.iter().sum());
    let ratio = gt / pt;
    let holds = gt <= bound * pt;
    let names = ["moves", "adds", "mults", "nlops"];
    if a.json {
        let obj = |v: [f64; 4]| {
            let m: serde_json::Map<String, serde_json::Value> = names
                .iter()
                .zip(v)
                .map(|(n, x)| (n.to_string(), serde_json::json!(x)))
                .collect();
            serde_json::Value::Object(m)
        };
        let bytes =
            |[read, written]: [f64; 2]| serde_json::json!({"read": read, "written": written});
        println!(
            "{}",
            serde_json::json!({
                "primal": obj(pv), "gradient": obj(gv), "nao": p, "bound": bound, "ratio": ratio, "holds": holds,
                "primal_bytes": bytes(pb), "gradient_bytes": bytes(gb)
            })
        );
        return Ok(());
    }
    println!(
        "{:<8} {:>14} {:>14} {:>8}",
        "", "Cost(e)", "Cost(∇e)", "ratio"
    );
    for (i, n) in names.iter().enumerate() {
        let r = if pv[i] == 0.0 {
            "-".to_string()
        } else {
            format!("{:.2}", gv[i] / pv[i])
        };
        println!("{:<8} {:>14} {:>14} {:>8}", n, pv[i], gv[i], r);
    }
    println!("{:<8} {:>14} {:>14} {:>8.2}", "total", pt, gt, ratio);
    for (i, n) in ["read B", "written B"].iter().enumerate() {
        let r = if pb[i] == 0.0 {
            "-".to_string()
        } else {
            format!("{:.2}", gb[i] / pb[i])
        };
        println!("{:<8} {:>14} {:>14} {:>8}", n, pb[i], gb[i], r);
    }
    if zeros_cost > 0.0 {
        println!(
            "(not counted: {zeros_cost} moves writing the zero gradients of parameters nothing flows into)"
        );
    }
    println!(
        "NAO p = {p}, bound 4·3^p = {bound}: {}",
        if holds { "holds" } else { "DOES NOT HOLD" }
    );
    let beyond = beyond_the_paper(&closed.body);
    if !beyond.is_empty() {
        println!(
            "(Theorem 5.4 is proven for the paper's primitives; {} {}: its derivative is several operations of the model)",
            beyond.join(", "),
            if beyond.len() == 1 { "is not one" } else { "are not" }
        );
    }
    Ok(())
}

/// The most reals `gradlift bench` fills its inputs with (2 GiB).
const BENCH_MAX_REALS: u128 = 1 << 28;

/// Checks the sizes given to `gradlift bench` before anything is built:
/// every size variable of `name` has a value, no other name is given, each
/// is at most 2^40 (what compiled code takes), and the inputs they make fit
/// in [`BENCH_MAX_REALS`].
fn check_bench_sizes(
    name: &str,
    sig: &gradlift::lang::types::Signature,
    sizes: &std::collections::HashMap<Name, i64>,
) -> Result<(), String> {
    check_size_names(name, &sig.size_vars, sizes)?;
    let mut given: Vec<&Name> = sizes.keys().collect();
    given.sort();
    const MAX_LEN: i64 = 1 << 40;
    if let Some(v) = given.iter().find(|v| sizes[**v] > MAX_LEN) {
        return Err(format!(
            "error: --sizes: `{v}` = {} is more than 2^40 = {MAX_LEN}, the largest size compiled code takes",
            sizes[*v]
        ));
    }
    let mut reals: u128 = 0;
    for (_, t) in &sig.params {
        if let Some(t) = t {
            reals = reals.saturating_add(flat_reals(t, sizes));
        }
    }
    if reals > BENCH_MAX_REALS {
        return Err(format!(
            "error: at these sizes the inputs of `{name}` are {reals} reals ({:.1} GiB); gradlift bench fills at most {BENCH_MAX_REALS} (2 GiB)",
            reals as f64 * 8.0 / (1u64 << 30) as f64
        ));
    }
    Ok(())
}

/// The number of reals of a value of type `ty` at `sizes` (saturating; a
/// negative length counts as 0).
fn flat_reals(ty: &gradlift::Type, sizes: &std::collections::HashMap<Name, i64>) -> u128 {
    use gradlift::Type;
    match ty {
        Type::Real => 1,
        Type::Tuple(ts) => ts
            .iter()
            .fold(0u128, |acc, t| acc.saturating_add(flat_reals(t, sizes))),
        Type::Array(t, n) => {
            let len = n.terms.iter().fold(n.constant as i128, |acc, (v, k)| {
                acc.saturating_add(
                    (*k as i128).saturating_mul(sizes.get(v).copied().unwrap_or(0) as i128),
                )
            });
            (len.max(0) as u128).saturating_mul(flat_reals(t, sizes))
        }
        _ => 0,
    }
}

/// Every name given to `--sizes` is a size variable of the function `name`
/// (an unknown one is named with the function's sizes), and every size
/// variable has a value.
fn check_size_names<V>(
    name: &str,
    size_vars: &[Name],
    sizes: &std::collections::HashMap<Name, V>,
) -> Result<(), String> {
    let mut given: Vec<&Name> = sizes.keys().collect();
    given.sort();
    if let Some(v) = given.iter().find(|v| !size_vars.contains(v)) {
        let known: Vec<&str> = size_vars.iter().map(|v| &**v).collect();
        return Err(format!(
            "error: --sizes: `{v}` is not a size variable of `{name}` ({})",
            if known.is_empty() {
                format!("`{name}` has no sizes")
            } else {
                format!("its sizes: {}", known.join(", "))
            }
        ));
    }
    if let Some(v) = size_vars.iter().find(|v| !sizes.contains_key(*v)) {
        return Err(format!(
            "error: the size `{v}` of `{name}` has no value: give it with --sizes {v}=…"
        ));
    }
    Ok(())
}

/// Deterministic inputs: reals in [0.5, 1.5) from a fixed sequence, and
/// integers 1 (a divisor that is not 0, a count of one).
fn bench_value(
    ty: &gradlift::Type,
    sizes: &std::collections::HashMap<Name, i64>,
    state: &mut u64,
) -> gradlift::Value {
    use gradlift::{Type, Value};
    match ty {
        Type::Real => {
            *state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            Value::Real(0.5 + (*state >> 11) as f64 / (1u64 << 53) as f64)
        }
        Type::Int => Value::Int(1),
        Type::Tuple(ts) => Value::tuple(ts.iter().map(|t| bench_value(t, sizes, state)).collect()),
        Type::Array(t, n) => {
            let len = n.constant
                + n.terms
                    .iter()
                    .map(|(v, k)| k * sizes.get(v).copied().unwrap_or(0))
                    .sum::<i64>();
            Value::array(
                (0..len.max(0))
                    .map(|_| bench_value(t, sizes, state))
                    .collect(),
            )
        }
        _ => Value::Real(0.0),
    }
}

/// The median time per call of `f`, run for about `seconds`.
fn median_ns(seconds: f64, mut f: impl FnMut() -> Result<(), String>) -> Result<f64, String> {
    let start = std::time::Instant::now();
    f()?;
    let once = start.elapsed().as_secs_f64().max(1e-9);
    // Batches of calls long enough to time, at least 11 of them.
    let batch = ((1e-3 / once).ceil() as usize).max(1);
    let batches = ((seconds / (once * batch as f64)) as usize).clamp(11, 1001);
    let mut times = Vec::with_capacity(batches);
    for _ in 0..batches {
        let t = std::time::Instant::now();
        for _ in 0..batch {
            f()?;
        }
        times.push(t.elapsed().as_secs_f64() * 1e9 / batch as f64);
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

fn bench(a: BenchArgs) -> Result<(), String> {
    let text = std::fs::read_to_string(&a.target.file)
        .map_err(|e| format!("error: cannot read `{}`: {e}", a.target.file.display()))?;
    let sizes_f = read_sizes(&a.sizes)?;
    let sizes: std::collections::HashMap<Name, i64> = sizes_f
        .iter()
        .map(|(k, v)| (k.clone(), *v as i64))
        .collect();
    let program = load(&a.target.file)?;
    let function = function(&program, &a.target)?;
    let sig = function.signature();
    let given = match &a.at {
        Some(at) => Some(function.args(&read_args("--at", at)?).map_err(explain)?),
        None => {
            check_bench_sizes(function.name(), sig, &sizes)?;
            None
        }
    };
    let jit = jit_with(&a.limits, false)?;
    let schedule = a.checkpoint.checkpoint.0;
    let wrt: Option<Vec<Name>> = a
        .wrt
        .as_ref()
        .map(|w| w.iter().map(|n| Name::from(n.trim())).collect());
    // Compile time: text to native gradient, the median of several runs.
    let name = a.target.function.clone();
    let compile = || -> Result<(), String> {
        let program =
            Program::parse(&a.target.file.display().to_string(), &text).map_err(explain)?;
        let f = match &name {
            Some(n) => program.function(n),
            None => program.last_function(),
        }
        .map_err(explain)?;
        let g = f
            .gradient(
                wrt.as_deref(),
                with_checkpoint(Via::Unf, false, true, schedule),
            )
            .map_err(explain)?;
        g.compile(&jit).map_err(explain)?;
        Ok(())
    };
    let compile_ns = median_ns(a.seconds.min(0.5), compile)?;
    let mut state = 42u64;
    let mut args = Vec::new();
    for (p, t) in &sig.params {
        if given.is_some() {
            break;
        }
        args.push(match t {
            Some(t) => bench_value(t, &sizes, &mut state),
            None => gradlift::Value::Real(*sizes.get(p).ok_or_else(|| {
                format!("error: the size parameter `{p}` has no value: give it with --sizes {p}=…")
            })? as f64),
        });
    }
    if let Some(given) = given {
        args = given;
    }
    let primal = function.compile(&jit).map_err(explain)?;
    let g = function
        .gradient(
            wrt.as_deref(),
            with_checkpoint(Via::Unf, false, true, schedule),
        )
        .map_err(explain)?;
    let grad = g.compile(&jit).map_err(explain)?;
    // Flat buffers, prepared once: the timed region is the native call.
    let bound = gradlift::lang::value::bind_sizes(function.name(), sig, &args)
        .map_err(|e| format!("error: {e}"))?;
    let size_values: Vec<i64> = sig.size_vars.iter().map(|v| bound[v]).collect();
    // The cost model is evaluated at the sizes of the arguments.
    let sizes_f: std::collections::HashMap<Name, f64> = match &a.at {
        Some(_) => bound.iter().map(|(k, v)| (k.clone(), *v as f64)).collect(),
        None => sizes_f,
    };
    let flat: Vec<Vec<f64>> = sig
        .params
        .iter()
        .zip(&args)
        .filter(|((_, t), _)| t.is_some())
        .map(|(_, v)| {
            // The native layout: integers' slots too.
            let mut xs = Vec::new();
            v.slots(&mut xs);
            xs
        })
        .collect();
    let inputs: Vec<&[f64]> = flat.iter().map(Vec::as_slice).collect();
    let out_len = |v: gradlift::Value| {
        let mut xs = Vec::new();
        v.slots(&mut xs);
        xs.len()
    };
    let mut primal_out = vec![0.0; out_len(primal.call(&args).map_err(explain)?)];
    let (value, grads) = grad.call(&args).map_err(explain)?;
    let mut grad_out = vec![0.0; 1 + grads.into_iter().map(out_len).sum::<usize>()];
    let _ = value;
    let primal_ns = median_ns(a.seconds, || {
        primal
            .native()
            .call_flat(&size_values, &inputs, &mut primal_out)
            .map_err(|e| format!("error: {e}"))
    })?;
    let grad_ns = median_ns(a.seconds, || {
        grad.native()
            .call_flat(&size_values, &inputs, &mut grad_out)
            .map_err(|e| format!("error: {e}"))
    })?;
    // The cost model beside the measurements.
    let closed = function.closed().map_err(explain)?;
    let ctx = closed.context();
    // A binomial checkpoint schedule and a `while` loop are outside the
    // cost model: the ratio is then reported as null, with the reason in
    // the text output.
    let pc = gradlift::ad::cost::cost(&ctx, &closed.size_vars, &closed.body);
    let gc = gradlift::ad::cost::gradient_cost(&ctx, &closed.size_vars, g.term());
    let total = |c: [f64; 4]| c.iter().sum::<f64>();
    let cost_ratio = pc.and_then(|pc| {
        gc.as_ref()
            .map(|gc| total(gc.eval(&sizes_f)) / total(pc.eval(&sizes_f)))
            .map_err(Clone::clone)
    });
    let bound = 4.0 * 3f64.powi(gradlift::ad::cost::nao(&closed.body) as i32);
    let ratio = grad_ns / primal_ns;
    if a.json {
        println!(
            "{}",
            serde_json::json!({
                "compile_ms": compile_ns / 1e6, "primal_ns": primal_ns, "grad_ns": grad_ns,
                "ratio": ratio, "cost_ratio": cost_ratio.as_ref().ok(), "bound": bound
            })
        );
    } else {
        println!(
            "compile (text → native gradient): {:.3} ms",
            compile_ns / 1e6
        );
        println!("primal:            {:>14.0} ns", primal_ns);
        println!("value and gradient:{:>14.0} ns", grad_ns);
        match &cost_ratio {
            Ok(c) => println!(
                "gradient / primal: {ratio:.2}   (cost model: {c:.2}, bound 4·3^p = {bound})"
            ),
            Err(e) => println!("gradient / primal: {ratio:.2}   (cost model: {e})"),
        }
    }
    Ok(())
}

/// The values of `--dir`: one per parameter that is not a size.
fn directions(function: &Function, text: &str) -> Result<Vec<gradlift::Value>, String> {
    let dirs = read_args("--dir", text)?;
    let sig = function.signature();
    // The direction of a parameter has the parameter's type.
    let mut values_only = sig.clone();
    values_only.params.retain(|(_, t)| t.is_some());
    dirs.values_for(function.name(), &values_only)
        .map_err(|e| match &dirs.source {
            Some(src) if e.span() != gradlift::Span::DUMMY => gradlift::lang::Located {
                file: src,
                error: &e,
            }
            .to_string(),
            _ => format!("error: --dir: {e}"),
        })
}

fn jvp(a: DirArgs) -> Result<(), String> {
    let program = load(&a.run.target.file)?;
    let function = function(&program, &a.run.target)?;
    let values = function
        .args(&read_args("--at", &a.run.at)?)
        .map_err(explain)?;
    let dirs = directions(&function, &a.dir)?;
    let jit = match a.run.engine {
        Engine::Jit => Some(jit(&a.run.limits)?),
        Engine::Interp => None,
    };
    let (value, tangent) = function
        .jvp(&values, &dirs, jit.as_ref())
        .map_err(explain)?;
    if a.run.json {
        println!(
            "{}",
            serde_json::json!({ "value": value.to_json(), "tangent": tangent.to_json() })
        );
    } else {
        println!("value: {value}");
        println!("tangent: {tangent}");
    }
    Ok(())
}

fn hvp(a: DirArgs) -> Result<(), String> {
    let program = load(&a.run.target.file)?;
    let function = function(&program, &a.run.target)?;
    let values = function
        .args(&read_args("--at", &a.run.at)?)
        .map_err(explain)?;
    let dirs = directions(&function, &a.dir)?;
    let jit = match a.run.engine {
        Engine::Jit => Some(jit(&a.run.limits)?),
        Engine::Interp => None,
    };
    let r = function
        .hvp_with(
            &values,
            &dirs,
            jit.as_ref(),
            with_checkpoint(Via::Unf, false, true, a.checkpoint.checkpoint.0),
        )
        .map_err(explain)?;
    let names: Vec<String> = function
        .signature()
        .params
        .iter()
        .filter(|(_, t)| t.as_ref().is_some_and(gradlift::ad::direct::has_reals))
        .map(|(n, _)| n.to_string())
        .collect();
    let object = |vs: &[gradlift::Value]| {
        let m: serde_json::Map<String, serde_json::Value> = names
            .iter()
            .zip(vs)
            .map(|(n, v)| (n.clone(), v.to_json()))
            .collect();
        serde_json::Value::Object(m)
    };
    if a.run.json {
        println!(
            "{}",
            serde_json::json!({
                "value": gradlift::Value::Real(r.value).to_json(),
                "gradient": object(&r.gradient),
                "hvp": object(&r.hvp)
            })
        );
    } else {
        println!("value: {}", gradlift::Value::Real(r.value));
        for ((n, g), h) in names.iter().zip(&r.gradient).zip(&r.hvp) {
            println!("d/d{n}: {g}");
            println!("(H·dir)_{n}: {h}");
        }
    }
    Ok(())
}

/// The largest Hessian `hessian` computes (input reals).
const HESSIAN_LIMIT: usize = 1000;

fn hessian(a: Run) -> Result<(), String> {
    let program = load(&a.target.file)?;
    let function = function(&program, &a.target)?;
    let values = function.args(&read_args("--at", &a.at)?).map_err(explain)?;
    let sig = function.signature();
    let inputs: Vec<&gradlift::Value> = sig
        .params
        .iter()
        .zip(&values)
        .filter(|((_, t), _)| t.is_some())
        .map(|(_, v)| v)
        .collect();
    let sizes: Vec<usize> = inputs
        .iter()
        .map(|v| {
            let mut xs = Vec::new();
            v.flatten(&mut xs);
            xs.len()
        })
        .collect();
    let total: usize = sizes.iter().sum();
    if total > HESSIAN_LIMIT {
        return Err(format!(
            "error: the input has {total} reals; hessian computes dense Hessians of at most {HESSIAN_LIMIT} (use hvp)"
        ));
    }
    let jit = match a.engine {
        Engine::Jit => Some(jit(&a.limits)?),
        Engine::Interp => None,
    };
    let mut rows = Vec::with_capacity(total);
    let mut value = 0.0;
    for k in 0..total {
        // The k-th basis direction, shaped like the inputs.
        let mut i = 0;
        let dirs: Vec<gradlift::Value> = inputs
            .iter()
            .map(|v| {
                let mut xs = Vec::new();
                v.flatten(&mut xs);
                let unit: Vec<f64> = xs
                    .iter()
                    .map(|_| {
                        i += 1;
                        if i - 1 == k {
                            1.0
                        } else {
                            0.0
                        }
                    })
                    .collect();
                v.with_reals(&mut unit.into_iter())
            })
            .collect();
        let r = function
            .hvp(&values, &dirs, jit.as_ref())
            .map_err(explain)?;
        value = r.value;
        let mut row = Vec::new();
        for h in &r.hvp {
            h.flatten(&mut row);
        }
        rows.push(row);
    }
    if a.json {
        println!(
            "{}",
            serde_json::json!({ "value": gradlift::Value::Real(value).to_json(), "hessian": rows })
        );
    } else {
        println!("value: {}", gradlift::Value::Real(value));
        for row in rows {
            let cells: Vec<String> = row
                .iter()
                .map(|x| gradlift::Value::Real(*x).to_string())
                .collect();
            println!("{}", cells.join("  "));
        }
    }
    Ok(())
}
