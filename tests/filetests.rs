//! Filetests: every `tests/filetests/<stage>/*.grad` is a program, a header
//! naming the pipeline stage to stop after, optional `structure` assertions,
//! and the stage's expected output as trailing comments. The format is
//! described in `tests/filetests/README.md`.
//!
//! Each file runs the stage through the library, compares the output with
//! its `# expected:` block (trailing whitespace ignored) and counts the
//! constructs its `structure` lines name. A stage that returns a term must
//! also print a definition that parses back to that term. All files run;
//! the failures are reported together.
//!
//! `GRADLIFT_BLESS=1 cargo test --test filetests` rewrites every
//! `# expected:` block with the actual output instead of comparing.

use gradlift::lang::syntax::{ArrayOp, Builtin};
use gradlift::lang::{Expr, ExprKind, Prim};
use gradlift::{Construction, Function, Goal, GradOptions, Program, Route, Stage};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The environment variable that turns comparison into regeneration.
const BLESS: &str = "GRADLIFT_BLESS";

/// The line that opens the expected output.
const EXPECTED: &str = "# expected:";

/// Runs pipeline stage `stage` on `function` (any stage of
/// `gradlift_ad::pipeline`, of the gradient but for `source`): its printed
/// output and, for stages whose output is a term, that term (what
/// `structure` lines count).
fn run_stage(
    stage: &str,
    _program: &Program,
    function: &Function,
    options: GradOptions,
) -> Result<(String, Option<Expr>), String> {
    let goal = if stage == "source" {
        Goal::Primal
    } else {
        Goal::Gradient
    };
    let out = function
        .stage(
            stage,
            goal,
            GradOptions {
                optimize: true,
                ..options
            },
        )
        .map_err(|e| format!("stage `{stage}` failed: {e}"))?;
    let term = match &out.stage {
        Stage::Program(p) => Some(p.body.clone()),
        Stage::Unf(_) | Stage::TargetUnf(_) => None,
    };
    Ok((out.stage.to_string(), term))
}

/// One parsed filetest.
struct FileTest {
    /// The stage to stop after.
    stage: String,
    /// Route and construction of differentiation.
    options: GradOptions,
    /// The function (`None`: the last definition).
    function: Option<String>,
    /// Construct name → expected count, with the line that asserts it.
    structure: Vec<(String, usize, usize)>,
    /// Every line before `# expected:`: header, program, structure lines.
    head: String,
    /// The expected output, `None` when the file has no `# expected:` line.
    expected: Option<String>,
}

/// Reads the header directives, structure lines and expected block.
fn parse_file(text: &str) -> Result<FileTest, String> {
    let lines: Vec<&str> = text.lines().collect();
    let split = lines.iter().position(|l| l.trim_end() == EXPECTED);
    let (head_lines, expected) = match split {
        Some(at) => {
            let mut out = Vec::new();
            for (i, line) in lines[at + 1..].iter().enumerate() {
                let line = line.trim_end();
                match line.strip_prefix("# ") {
                    Some(rest) => out.push(rest),
                    None if line == "#" => out.push(""),
                    None => {
                        return Err(format!(
                            "line {}: every line after `{EXPECTED}` starts with `# `",
                            at + 2 + i
                        ))
                    }
                }
            }
            (&lines[..at], Some(out.join("\n")))
        }
        None => (&lines[..], None),
    };

    let mut stage = None;
    let mut options = GradOptions::default();
    let mut function = None;
    let mut structure = Vec::new();
    for (i, line) in head_lines.iter().enumerate() {
        let number = i + 1;
        let Some(comment) = line.trim().strip_prefix('#') else {
            continue;
        };
        let comment = comment.trim();
        let directive = |key: &str| {
            comment
                .strip_prefix(key)
                .and_then(|rest| rest.strip_prefix(':'))
                .map(str::trim)
        };
        if let Some(value) = directive("stage") {
            if stage.replace(value.to_string()).is_some() {
                return Err(format!("line {number}: a second `# stage:` line"));
            }
        } else if let Some(value) = directive("via") {
            options.route = match value {
                "unf" => Route::Unf,
                "direct" => Route::Direct,
                _ => {
                    return Err(format!(
                        "line {number}: `# via: {value}`: expected `unf` or `direct`"
                    ))
                }
            };
        } else if let Some(value) = directive("fn") {
            function = Some(value.to_string());
        } else if let Some(value) = directive("structure") {
            for item in value.split(',') {
                let (name, count) = item.split_once('=').ok_or_else(|| {
                    format!("line {number}: `{}`: expected `NAME = COUNT`", item.trim())
                })?;
                let name = name.trim();
                if !construct_names().contains(&name) {
                    return Err(format!(
                        "line {number}: unknown construct `{name}` (known: {})",
                        construct_names().join(" ")
                    ));
                }
                let count = count.trim().parse::<usize>().map_err(|_| {
                    format!(
                        "line {number}: `{}`: the count is not a number",
                        item.trim()
                    )
                })?;
                structure.push((name.to_string(), count, number));
            }
        } else if comment == "literal" {
            options.construction = Construction::Literal;
        }
    }
    let stage = stage.ok_or("no `# stage:` line")?;
    let mut head = head_lines.join("\n");
    head.push('\n');
    Ok(FileTest {
        stage,
        options,
        function,
        structure,
        head,
        expected,
    })
}

/// Every name a `structure` line may count.
fn construct_names() -> Vec<&'static str> {
    let ops = [
        ArrayOp::Map,
        ArrayOp::Map2,
        ArrayOp::Reduce,
        ArrayOp::FOLDL,
        ArrayOp::Revfold(gradlift::lang::Schedule::Every(1)),
        ArrayOp::Scanl,
        ArrayOp::Scanr,
    ];
    let builtins = [
        Builtin::Shift1L,
        Builtin::Shift1R,
        Builtin::Len,
        Builtin::Iota,
        Builtin::Replicate,
        Builtin::Concat,
        Builtin::Take,
        Builtin::Drop,
    ];
    let mut names: Vec<&'static str> = ops.iter().map(|o| o.name()).collect();
    names.extend(builtins.iter().map(|b| b.name()));
    names.extend(["let", "fun", "if", "apply"]);
    names.extend(Prim::ALL.iter().map(|&p| prim_name(p)));
    names
}

/// A primitive's name in `structure` lines: its operator or call name, and
/// `neg` for unary minus (so `-` is subtraction only).
fn prim_name(p: Prim) -> &'static str {
    match p {
        Prim::Neg => "neg",
        p => p.info().name,
    }
}

/// The name `e`'s own node counts under, if any.
fn construct_of(e: &Expr) -> Option<&'static str> {
    match &e.kind {
        ExprKind::ArrayOp(op, ..) => Some(op.name()),
        ExprKind::Builtin(b, _) => Some(b.name()),
        ExprKind::Let { .. } => Some("let"),
        ExprKind::Lambda(..) => Some("fun"),
        ExprKind::If(..) => Some("if"),
        ExprKind::Apply(..) => Some("apply"),
        ExprKind::Prim(p, _) | ExprKind::PrimFn(p) => Some(prim_name(*p)),
        _ => None,
    }
}

/// Counts the constructs of `term`, walking it with an explicit stack so a
/// deep term cannot overflow the native one.
fn count_constructs(term: &Expr) -> BTreeMap<&'static str, usize> {
    let mut counts = BTreeMap::new();
    let mut stack = vec![term];
    while let Some(e) = stack.pop() {
        if let Some(name) = construct_of(e) {
            *counts.entry(name).or_insert(0) += 1;
        }
        stack.extend(e.children());
    }
    counts
}

/// The lines of `text` without trailing whitespace or trailing blank lines.
fn normalize(text: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = text.lines().map(str::trim_end).collect();
    while lines.last() == Some(&"") {
        lines.pop();
    }
    lines
}

/// A line diff of `expected` and `actual` (longest common subsequence),
/// changed lines with two lines of context; `-` expected, `+` actual.
fn diff(expected: &[&str], actual: &[&str]) -> String {
    let (n, m) = (expected.len(), actual.len());
    // common[i][j]: the LCS length of expected[i..] and actual[j..].
    let mut common = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            common[i][j] = if expected[i] == actual[j] {
                common[i + 1][j + 1] + 1
            } else {
                common[i + 1][j].max(common[i][j + 1])
            };
        }
    }
    let mut lines: Vec<(char, &str)> = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && expected[i] == actual[j] {
            lines.push((' ', expected[i]));
            (i, j) = (i + 1, j + 1);
        } else if i < n && (j == m || common[i + 1][j] >= common[i][j + 1]) {
            lines.push(('-', expected[i]));
            i += 1;
        } else {
            lines.push(('+', actual[j]));
            j += 1;
        }
    }
    const CONTEXT: usize = 2;
    let changed: Vec<usize> = (0..lines.len()).filter(|&k| lines[k].0 != ' ').collect();
    let near = |k: usize| changed.iter().any(|&c| c.abs_diff(k) <= CONTEXT);
    let mut out = String::from("--- expected\n+++ actual\n");
    let mut skipped = false;
    for (k, (tag, line)) in lines.iter().enumerate() {
        if near(k) {
            if skipped {
                out.push_str("@@\n");
                skipped = false;
            }
            out.push_str(&format!("{tag}{line}\n"));
        } else {
            skipped = true;
        }
    }
    out
}

/// The expected block for `output`.
fn expected_block(output: &str) -> String {
    let mut block = format!("{EXPECTED}\n");
    for line in normalize(output) {
        if line.is_empty() {
            block.push_str("#\n");
        } else {
            block.push_str(&format!("# {line}\n"));
        }
    }
    block
}

/// Runs one file; `Err` carries every problem found.
fn run_file(path: &Path, rel: &str, bless: bool) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read: {e}"))?;
    let test = parse_file(&text)?;
    let dir_stage = rel.split('/').next().unwrap_or_default();
    if dir_stage != test.stage {
        return Err(format!(
            "the file is under `{dir_stage}/` but its stage is `{}`",
            test.stage
        ));
    }
    let program = Program::parse(rel, &test.head).map_err(|e| e.to_string())?;
    let function = match &test.function {
        Some(name) => program.function(name),
        None => program.last_function(),
    }
    .map_err(|e| e.to_string())?;
    let (output, term) = run_stage(&test.stage, &program, &function, test.options)?;

    let mut problems = Vec::new();
    if let Some(term) = &term {
        check_round_trip(&output, term, &mut problems);
    }
    check_structure(&test, term.as_ref(), &mut problems);

    let actual = normalize(&output);
    if bless {
        // The lines before the block stay as they are; a new block is set
        // off by a blank line.
        let head = match test.expected {
            Some(_) => test.head.clone(),
            None => format!("{}\n\n", test.head.trim_end()),
        };
        let blessed = format!("{head}{}", expected_block(&output));
        if blessed != text {
            std::fs::write(path, blessed).map_err(|e| format!("cannot write: {e}"))?;
        }
    } else {
        match &test.expected {
            None => problems.push(format!(
                "no `{EXPECTED}` block (run with {BLESS}=1 to write one)"
            )),
            Some(expected) => {
                let expected = normalize(expected);
                if expected != actual {
                    problems.push(format!(
                        "the output differs from the expected block:\n{}",
                        diff(&expected, &actual)
                    ));
                }
            }
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

/// A term's printed definition parses back to the same term: as it is
/// read, or, for what the type checker decides (the integers among the
/// literals and operations, `transpose`'s count of columns), once checked.
fn check_round_trip(output: &str, term: &Expr, problems: &mut Vec<String>) {
    let checked = || {
        gradlift::lang::check_source("printed.grad", output)
            .ok()
            .and_then(|m| m.module.defs.last().map(|d| d.body.same(term)))
            .unwrap_or(false)
    };
    match gradlift::lang::parse_module(output) {
        Ok(module) => match module.defs.last() {
            Some(def) if def.body.same(term) || checked() => {}
            Some(_) => problems.push("the printed definition parses to a different term".into()),
            None => problems.push("the output defines nothing".into()),
        },
        Err(e) => problems.push(format!("the printed definition does not parse back: {e}")),
    }
}

/// Every `structure` line's count matches the term.
fn check_structure(test: &FileTest, term: Option<&Expr>, problems: &mut Vec<String>) {
    if test.structure.is_empty() {
        return;
    }
    let Some(term) = term else {
        problems.push(format!(
            "`structure` lines count the constructs of a term; stage `{}` prints no term",
            test.stage
        ));
        return;
    };
    let counts = count_constructs(term);
    for (name, want, line) in &test.structure {
        let got = counts.get(name.as_str()).copied().unwrap_or(0);
        if got != *want {
            problems.push(format!(
                "line {line}: structure `{name}`: expected {want}, found {got}"
            ));
        }
    }
}

/// The `.grad` files under `dir`, sorted.
fn grad_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        let entries =
            std::fs::read_dir(&d).unwrap_or_else(|e| panic!("cannot read `{}`: {e}", d.display()));
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "grad") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

#[test]
fn filetests() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/filetests");
    let bless = std::env::var_os(BLESS).is_some_and(|v| v == "1");
    let files = grad_files(&root);
    assert!(!files.is_empty(), "no .grad files under {}", root.display());
    let mut failures = Vec::new();
    for path in &files {
        let rel = path
            .strip_prefix(&root)
            .expect("under the root")
            .to_string_lossy()
            .replace('\\', "/");
        if let Err(message) = run_file(path, &rel, bless) {
            failures.push(format!("FAIL tests/filetests/{rel}\n{message}\n"));
        }
    }
    if !failures.is_empty() {
        panic!(
            "{} of {} filetests failed:\n\n{}",
            failures.len(),
            files.len(),
            failures.join("\n")
        );
    }
}

mod harness {
    use super::*;

    #[test]
    fn parses_header_structure_and_expected_block() {
        let text = "# stage: target\n# via: direct\n# literal\n# fn: f\n\
                    def f(x: R) -> R = x\n# structure: map2 = 1, neg = 0\n\
                    # expected:\n# def f_grad(x: R) -> (R, R) =\n#\n#   (x, 1)\n";
        let t = parse_file(text).unwrap();
        assert_eq!(t.stage, "target");
        assert_eq!(t.options.route, Route::Direct);
        assert_eq!(t.options.construction, Construction::Literal);
        assert_eq!(t.function.as_deref(), Some("f"));
        assert_eq!(
            t.structure,
            [("map2".to_string(), 1, 6), ("neg".to_string(), 0, 6)]
        );
        assert_eq!(
            t.expected.as_deref(),
            Some("def f_grad(x: R) -> (R, R) =\n\n  (x, 1)")
        );
        assert!(t.head.ends_with("neg = 0\n"));
    }

    #[test]
    fn rejects_unknown_constructs_and_missing_stages() {
        assert!(parse_file("# stage: source\n# structure: mapp = 1\n").is_err());
        assert!(parse_file("def f(x: R) -> R = x\n").is_err());
        assert!(parse_file("# stage: source\n# expected:\nx\n").is_err());
    }

    #[test]
    fn counts_constructs_by_name() {
        let e = gradlift::lang::parse_expr(
            "let s = reduce (a, b. a * b) 1 (map2 (*) x (shift1L y)) in -s - 1",
        )
        .unwrap();
        let counts = count_constructs(&e);
        assert_eq!(counts["let"], 1);
        assert_eq!(counts["reduce"], 1);
        assert_eq!(counts["map2"], 1);
        assert_eq!(counts["shift1L"], 1);
        assert_eq!(counts["fun"], 1);
        assert_eq!(counts["*"], 2);
        assert_eq!(counts["neg"], 1);
        assert_eq!(counts["-"], 1);
    }

    #[test]
    fn diff_marks_changed_lines() {
        let d = diff(&["a", "b", "c"], &["a", "x", "c"]);
        assert!(d.contains("-b\n+x\n"), "{d}");
        assert!(d.contains(" a\n") && d.contains(" c\n"), "{d}");
    }
}
