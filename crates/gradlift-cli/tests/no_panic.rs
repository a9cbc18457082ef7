//! No subcommand panics on a program the type checker accepts.
//!
//! Every subcommand that takes a program (`eval` on both engines, `grad` by
//! both routes and with checkpoints, `jvp`, `hvp`, `hessian`, every stage
//! of `emit`, `cost`, `bench`, `fit` with a one-step budget) runs on
//! programs written to use every construct of the grammar — function
//! values included — and on generated ones, with and without function
//! values. Each run either succeeds or fails with an `error:` message; an
//! exit status of 101 (a panic) or a signal fails the test.

use gradlift_lang::testing::{generate, Config};
use gradlift_lang::Value;
use std::path::PathBuf;
use std::process::Command;

/// A program and what to call it with.
struct Program {
    text: String,
    /// Name, value as `--at` writes it, whether it is a size parameter.
    args: Vec<(String, String, bool)>,
    /// `--sizes` for `cost` and `bench`.
    sizes: String,
}

fn written(text: &str, args: &[(&str, &str)], sizes: &str) -> Program {
    let size_params: Vec<&str> = text
        .lines()
        .last()
        .unwrap_or("")
        .split(['(', ',', ')'])
        .filter_map(|p| p.trim().strip_suffix(": size"))
        .collect();
    Program {
        text: text.to_string(),
        args: args
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string(), size_params.contains(n)))
            .collect(),
        sizes: sizes.to_string(),
    }
}

/// Programs that use every construct of the grammar, one or a few each.
fn constructs() -> Vec<Program> {
    let x = [("x", "1.5")];
    let a = [("A", "[1, 2, 3]")];
    let ab = [("A", "[1, 2, 3]"), ("B", "[4, 5, 6]")];
    vec![
        written("def f(x: R) -> R = 2 * x - x / 3 + -x", &x, ""),
        written(
            "def f(x: R) -> R = sin(x) + cos(x) + tan(x) + exp(x) + log(x) + sqrt(x) + tanh(x) + abs(x) + sign(x)",
            &x,
            "",
        ),
        written(
            "def f(x: R) -> R = pow(x, 2) + min(x, 1) + max(x, 1) + inf * 0 + nan",
            &x,
            "",
        ),
        written(
            "def f(x: R) -> R = if x < 1 and not (x >= 2) or x == 3 or x != 4 and x <= 5 and x > 0 then x else -x",
            &x,
            "",
        ),
        written(
            "def f(x: R) -> R = let (a, (b, _)) = (x, (2 * x, 3)) in let c: R = a * b in c",
            &x,
            "",
        ),
        written(
            "def f(x: R) -> R = let p = (x, 2 * x) in fst p + snd p * p.0 + p.1 + let u = () in x",
            &x,
            "",
        ),
        written(
            "def f(x: R, k: Z, v: [Z; n], p: (R, Z)) -> R = x * real(k // 2 + v[0] % 3) * p.0 + real(p.1 * len(v))",
            &[("x", "1.5"), ("k", "3"), ("v", "[1, 2]"), ("p", "(0.5, 4)")],
            "n=2",
        ),
        written(
            "def f(A: [R; n]) -> R = A[0] + A[-1] + len(A) + [1, 2][1]",
            &a,
            "n=3",
        ),
        // Loops that stop on a condition, with a derivative in the step.
        written(
            "def f(x: R) -> R = let (y, k) = loop (y, k) = (x, int(0)) while y < 10 and k < 50 do (y * 2 + grad((z. z * z), y) * 0.01, k + 1) in y + real(k) + loop z = x while z > 0.5 do z / 3",
            &x,
            "",
        ),
        // Derivative operators, nested and inside maps.
        written(
            "def g(y: R) -> R = y * y * sin(y)\ndef f(x: R) -> R = grad(g, x) + grad((y. grad(g, y) * x), x) + (jvp((y. y * x), x, 1)).1 + reduce (+) 0 (vjp((v. map (a. a * x) v), [x, x], [1.0, 2.0])) + reduce (+) 0 (map (y. grad(g, y)) [x, x])",
            &x,
            "",
        ),
        written(
            "def f(A: [R; n]) -> R = let j = jacobian((v. map (a. a * a) v), A) in reduce (+) 0 (map (r. reduce (+) 0 r) j) + reduce (+) 0 (jacrev((v. [v[0] * v[1], v[1]]), [A[0], A[1]])[0]) + reduce (+) 0 (map (r. r[0]) (jacfwd((v. [v[0] * v[1], v[1]]), [A[0], A[1]])))",
            &a,
            "n=3",
        ),
        // Computed indices, gather, reduce_by_index, transpose and unzip.
        written(
            "def f(A: [R; n], I: [Z; m]) -> R = let h = reduce_by_index(replicate(n, 0.0), (+), I, gather(A, I)) in reduce (+) 0 (map (i. A[I[i]] * h[i % n]) (iota(m))) + reduce (+) 0 (reduce_by_index(A, max, I, gather(A, I))) + reduce (+) 0 (map (r. r[0]) (transpose([A, A]))) + reduce (+) 0 (unzip(map (x. (x, x)) A)).1",
            &[("A", "[1, 2, 3]"), ("I", "[2, 0, -1]")],
            "n=3,m=3",
        ),

        written(
            "def f(A: [R; n], s: size) -> R = reduce (+) 0 (concat(A, map (i. real(i)) iota(s))) + reduce (*) 1 (replicate(s, A[0])) + real(reduce (+) 0 (iota(s)))",
            &[("A", "[1, 2, 3]"), ("s", "2")],
            "n=3,s=2",
        ),
        written(
            "def f(A: [R; n]) -> R = reduce (+) 0 (take(2, A)) + reduce max (-inf) (drop(1, A)) + reduce min inf (shift1L A) + reduce (+) 0 (shift1R A)",
            &a,
            "n=3",
        ),
        written(
            "def f(A: [R; n], B: [R; n]) -> R = reduce (+) 0 (map2 (*) A B) + reduce (a, b. a + b * 2) 0 (map exp A)",
            &ab,
            "n=3",
        ),
        written(
            "def f(A: [R; n]) -> R = foldl (acc, y. acc * 0.5 + sin(y)) 0 A + reduce (+) 0 (scanl (+) 0 A) + reduce (+) 0 (scanr (*) 1 A)",
            &a,
            "n=3",
        ),
        written(
            "def f(A: [R; n]) -> R = @checkpoint(2) foldl (acc, y. acc * y + 1) 1 A + @checkpoint(binomial 2) foldl (acc, y. sin(acc) + y) 0 A",
            &a,
            "n=3",
        ),
        written(
            "def sq(x: R) -> R = x * x\ndef g(v: [R; k]) -> R = reduce (+) 0 (map sq v)\ndef f(A: [R; n]) -> R = g(A) + sq(A[0])",
            &a,
            "n=3",
        ),
        written(
            "def f(M: [[R; m]; n], p: (R, [R; n])) -> R = reduce (+) 0 (map (row. reduce (+) 0 row) M) + reduce (+) 0 (map2 (r, q. r[0] * q) M p.1) + p.0",
            &[("M", "[[1, 2], [3, 4]]"), ("p", "(1, [2, 3])")],
            "m=2,n=2",
        ),
        written(
            "def f(A: [R; n]) -> R = reduce (+) 0 (map ((a, b). a * b) (map (a. (a, a + 1)) A))",
            &a,
            "n=3",
        ),
        written(
            "def f(A: [R; n]) -> [R; n+1] = scanl (+) 0 A",
            &a,
            "n=3",
        ),
        written(
            "def f(x: R) -> (R, [R; 2]) = (x, [x, 2 * x])",
            &x,
            "",
        ),
        // Function values.
        written(
            "def f(x: R) -> R = let g = fun (y: R) -> y * y in g(x)",
            &x,
            "",
        ),
        written(
            "def f(x: R) -> R = (fun (y: R, z: R) -> y * z)(x, 2) + (fun ((a, b): (R, R)) -> a - b)((x, 1))",
            &x,
            "",
        ),
        written(
            "def f(A: [R; n]) -> R = let g = fun (y: R) -> exp(y) in let h = g in reduce (+) 0 (map h A)",
            &a,
            "n=3",
        ),
        written(
            "def f(x: R) -> R = let a = 2 * x in let g = fun (y: R) -> a * y in let a = 100 in g(x) + a",
            &x,
            "",
        ),
        written(
            "def f(x: R) -> R = let g = let k = 3 in fun (y: R) -> k * y in g(x) + g(g(x))",
            &x,
            "",
        ),
        written(
            "def f(x: R) -> R = let g = sin in let h = max in g(x) + h(x, 1) + (cos)(x)",
            &x,
            "",
        ),
        written(
            "def f(x: R) -> R = let compose = fun (u: R) -> (fun (v: R) -> v + u)(u * 2) in compose(x)",
            &x,
            "",
        ),
        // Function values the differentiating commands refuse.
        written(
            "def f(x: R) -> R = let p = (fun (y: R) -> y * y, 2) in p.0(x) * p.1",
            &x,
            "",
        ),
        written(
            "def f(x: R) -> R = let g = if x > 0 then (fun (y: R) -> y * y) else (fun (y: R) -> y) in g(x)",
            &x,
            "",
        ),
        written(
            "def f(x: R) -> R = let fs = [fun (y: R) -> y, fun (y: R) -> 2 * y] in x",
            &x,
            "",
        ),
    ]
}

/// A generated case as a program.
fn generated(seed: u64, higher_order: bool) -> Program {
    let case = generate(
        seed,
        &Config {
            depth: 3,
            max_size: 2,
            higher_order,
        },
    );
    let def = case.module.defs.last().expect("main");
    let args = def
        .params
        .iter()
        .zip(&case.args)
        .map(|(p, v)| (p.name.to_string(), at_text(v), p.ty.is_none()))
        .collect();
    let sizes: Vec<String> = case.sizes.iter().map(|(k, v)| format!("{k}={v}")).collect();
    Program {
        text: case.text(),
        args,
        sizes: sizes.join(","),
    }
}

/// A value as `--at` reads it.
fn at_text(v: &Value) -> String {
    match v {
        Value::Real(x) => format!("{x:?}"),
        Value::Int(k) => format!("{k}"),
        Value::Tuple(xs) => format!(
            "({})",
            xs.iter().map(at_text).collect::<Vec<_>>().join(", ")
        ),
        Value::Array(xs) => format!(
            "[{}]",
            xs.iter().map(at_text).collect::<Vec<_>>().join(", ")
        ),
        other => panic!("not an argument: {other:?}"),
    }
}

fn temp_file(name: &str, contents: &str) -> PathBuf {
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "gradlift-no-panic-{}-{name}.grad",
        std::process::id()
    ));
    std::fs::write(&path, contents).expect("write a temporary file");
    path
}

/// What running every subcommand on a program found.
#[derive(Default)]
struct Found {
    /// Runs that panicked, were killed, or failed without an error message.
    failures: Vec<String>,
    /// Runs that succeeded, by subcommand and its first flag.
    succeeded: Vec<String>,
    runs: usize,
}

/// Runs every subcommand on `program`.
fn run_all(name: &str, program: &Program) -> Found {
    let path = temp_file(name, &program.text);
    let file = path.to_str().unwrap();
    let join = |pick: &dyn Fn(&(String, String, bool)) -> bool| {
        program
            .args
            .iter()
            .filter(|a| pick(a))
            .map(|(n, v, _)| format!("{n}={v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let at = join(&|_| true);
    let dir = join(&|a| !a.2);
    let sizes_data = join(&|a| a.2);
    let mut runs: Vec<Vec<&str>> = vec![
        vec!["eval", file, "--at", &at],
        vec!["eval", file, "--at", &at, "--engine", "interp", "--json"],
        vec!["grad", file, "--at", &at],
        vec![
            "grad", file, "--at", &at, "--via", "direct", "--engine", "interp",
        ],
        vec!["grad", file, "--at", &at, "--checkpoint", "2", "--json"],
        vec!["grad", file, "--at", &at, "--checkpoint", "binomial:2"],
        vec!["jvp", file, "--at", &at, "--dir", &dir],
        vec![
            "jvp", file, "--at", &at, "--dir", &dir, "--engine", "interp",
        ],
        vec!["hvp", file, "--at", &at, "--dir", &dir],
        vec!["hessian", file, "--at", &at],
        vec!["jacobian", file, "--at", &at],
        vec![
            "jacobian", file, "--at", &at, "--mode", "reverse", "--engine", "interp",
        ],
        vec!["cost", file, "--sizes", &program.sizes],
        vec!["cost", file, "--sizes", &program.sizes, "--via", "direct"],
        vec![
            "bench",
            file,
            "--sizes",
            &program.sizes,
            "--seconds",
            "0.001",
        ],
        vec!["emit", file, "--stage", "clif", "--grad"],
        vec!["emit", file, "--stage", "asm"],
        vec!["emit", file, "--stage", "opt", "--hvp"],
        vec!["emit", file, "--stage", "target", "--literal"],
        vec!["emit", file, "--stage", "target", "--via", "direct"],
    ];
    for stage in gradlift::ad::pipeline::stage_names().chain(["clif"]) {
        runs.push(vec!["emit", file, "--stage", stage]);
    }
    runs.push(vec![
        "emit",
        file,
        "--stage",
        "pe",
        "--grad",
        "--time-passes",
    ]);
    runs.push(vec!["grad", file, "--at", &at, "--time-passes"]);
    let fit_data = sizes_data.clone();
    if !dir.is_empty() {
        let mut fit = vec!["fit", file, "--params", &dir, "--iters", "1"];
        if !fit_data.is_empty() {
            fit.extend(["--data", &fit_data]);
        }
        runs.push(fit);
        runs.push(vec![
            "fit", file, "--params", &dir, "--iters", "1", "--method", "adam",
        ]);
    }
    let mut found = Found::default();
    for args in &runs {
        found.runs += 1;
        let out = Command::new(env!("CARGO_BIN_EXE_gradlift"))
            .args(args)
            .output()
            .expect("the gradlift binary runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let ok = match out.status.code() {
            None => false,
            Some(0) => true,
            Some(101) => false,
            Some(_) => stderr.contains("error"),
        };
        if out.status.success() {
            found.succeeded.push(args[0].to_string());
        }
        if !ok || stderr.contains("panicked") {
            found.failures.push(format!(
                "gradlift {} (status {:?})\n{}\n{stderr}",
                args.join(" "),
                out.status.code(),
                program.text
            ));
        }
    }
    std::fs::remove_file(&path).ok();
    found
}

/// Runs the programs on two threads; panics listing every failure.
/// Returns, per program, the subcommands that succeeded.
fn check_all(programs: Vec<(String, Program)>) -> Vec<(String, Vec<String>)> {
    let programs = std::sync::Mutex::new(programs);
    let results = std::sync::Mutex::new(Vec::new());
    let failures = std::sync::Mutex::new(Vec::new());
    let runs = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let next = programs.lock().unwrap().pop();
                let Some((name, program)) = next else { break };
                let found = run_all(&name, &program);
                runs.fetch_add(found.runs, std::sync::atomic::Ordering::Relaxed);
                failures.lock().unwrap().extend(found.failures);
                results.lock().unwrap().push((name, found.succeeded));
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    let mut results = results.into_inner().unwrap();
    results.sort();
    let succeeded: usize = results.iter().map(|(_, s)| s.len()).sum();
    eprintln!(
        "{} runs, {succeeded} succeeded, none panicked",
        runs.into_inner()
    );
    results
}

#[test]
fn every_construct_under_every_subcommand() {
    let programs: Vec<(String, Program)> = constructs()
        .into_iter()
        .enumerate()
        .map(|(i, p)| (format!("construct{i:02}"), p))
        .collect();
    // Every program evaluates; those that return a real differentiate,
    // but for the last three (function values that are data).
    let refused = programs.len() - 3;
    let real: Vec<bool> = programs
        .iter()
        .map(|(_, p)| p.text.lines().last().unwrap().contains(") -> R ="))
        .collect();
    for (name, succeeded) in check_all(programs) {
        let ok = |c: &str| succeeded.iter().any(|s| s == c);
        assert!(ok("eval"), "{name}: {succeeded:?}");
        let index: usize = name["construct".len()..].parse().unwrap();
        assert_eq!(
            ok("grad"),
            real[index] && index < refused,
            "{name}: {succeeded:?}"
        );
    }
}

#[test]
fn generated_programs_under_every_subcommand() {
    let programs = (0..16u64)
        .map(|seed| (format!("gen{seed}"), generated(seed, seed % 2 == 1)))
        .collect();
    for (name, succeeded) in check_all(programs) {
        assert!(
            succeeded.iter().any(|s| s == "eval"),
            "{name}: {succeeded:?}"
        );
    }
}

#[test]
fn the_written_programs_type_check() {
    for p in constructs() {
        let checked = gradlift_lang::check_source("<test>", &p.text);
        assert!(checked.is_ok(), "{}: {:?}", p.text, checked.err());
        let sig = checked.unwrap().sigs.last().cloned().unwrap();
        assert_eq!(sig.params.len(), p.args.len(), "{}", p.text);
    }
}
