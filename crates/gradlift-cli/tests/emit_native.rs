//! `gradlift emit --stage clif|asm` and `--object`: the Cranelift IR with
//! the source terms as comments, the disassembly for the host and for
//! aarch64, and object files.

use std::process::{Command, Output};

const DOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/dot.grad");
const GROWTH: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../examples/logistic_growth.grad"
);

fn gradlift(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gradlift"))
        .args(args)
        .output()
        .expect("the gradlift binary runs")
}

fn success(out: &Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    String::from_utf8(out.stdout.clone()).expect("UTF-8 output")
}

#[test]
fn clif_has_the_source_terms_as_comments() {
    let text = success(&gradlift(&["emit", DOT, "--stage", "clif"]));
    assert!(text.contains("function "), "{text}");
    for comment in [
        "; parameter `A: [R; n]` (args[1])",
        "; parameter `B: [R; n]` (args[2])",
        "; reduce (a, b. a + b) 0.0 (map2 (a_1, b_1. a_1 * b_1) A B)",
        "; map2 (a_1, b_1. a_1 * b_1) A B",
        "; the result `R` fits in out",
        "; failure: *info = detail, return the status",
    ] {
        assert!(text.contains(comment), "no `{comment}` in\n{text}");
    }
    // The map's multiplication comes after its label and before the
    // reduce's addition.
    let map = text.find("; map2").unwrap();
    let fmul = text.find("fmul").unwrap();
    let fadd = text.find("fadd").unwrap();
    assert!(map < fmul && fmul < fadd, "{text}");
}

#[test]
fn clif_comments_of_a_gradient_name_let_bindings_and_are_one_line() {
    let text = success(&gradlift(&["emit", GROWTH, "--stage", "clif", "--grad"]));
    let comments: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("; "))
        .collect();
    assert!(comments.iter().any(|c| c.starts_with("; let ")), "{text}");
    assert!(comments.iter().any(|c| c.contains("scanl")), "{text}");
    // Long terms are truncated.
    assert!(comments.iter().any(|c| c.ends_with('…')), "{text}");
    assert!(comments.iter().all(|c| c.chars().count() <= 102), "{text}");
}

#[test]
fn asm_prints_machine_code_for_the_host_and_for_aarch64() {
    let host = success(&gradlift(&["emit", DOT, "--stage", "asm", "--grad"]));
    assert!(host.starts_with("; dot_grad: "), "{host}");
    assert!(host.contains("bytes of code"), "{host}");
    assert!(host.contains("block0:"), "{host}");
    if cfg!(target_arch = "x86_64") {
        assert!(host.contains("ret"), "{host}");
        assert!(host.contains("mulsd"), "{host}");
    }
    let arm = success(&gradlift(&[
        "emit",
        DOT,
        "--stage",
        "asm",
        "--target",
        "aarch64-unknown-linux-gnu",
    ]));
    assert!(arm.starts_with("; dot: aarch64-unknown-linux-gnu"), "{arm}");
    assert!(arm.contains("fmul d"), "{arm}");
    assert!(arm.contains("ldr "), "{arm}");
}

#[test]
fn object_for_aarch64_is_an_elf_file_exporting_both_functions() {
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("gradlift-emit-{}.o", std::process::id()));
    let p = path.to_str().unwrap();
    let out = gradlift(&[
        "emit",
        DOT,
        "--target",
        "aarch64-unknown-linux-gnu",
        "--object",
        p,
    ]);
    success(&out);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(&bytes[..4], b"\x7fELF");
    // ELFCLASS64, e_machine EM_AARCH64 (183).
    assert_eq!(bytes[4], 2);
    assert_eq!(u16::from_le_bytes([bytes[18], bytes[19]]), 183);
    let has = |s: &[u8]| bytes.windows(s.len()).any(|w| w == s);
    assert!(has(b"\0dot\0") && has(b"\0dot_grad\0"));
    assert!(has(b"\0dot_workspace\0") && has(b"\0dot_grad_workspace\0"));
}

#[test]
fn bad_targets_and_missing_stages_are_clear_errors() {
    let out = gradlift(&["emit", DOT, "--stage", "asm", "--target", "nonsense-cpu"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("error: "), "{err}");
    assert!(err.contains("nonsense-cpu"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let out = gradlift(&["emit", DOT]);
    assert!(!out.status.success());
    let out = gradlift(&["emit", DOT, "--object", "/nonexistent-dir/x.o"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("error: cannot write"), "{err}");
}

#[test]
fn object_of_a_function_without_a_gradient_exports_the_function_alone() {
    let ode = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/ode.grad");
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("gradlift-emit-primal-{}.o", std::process::id()));
    let out = gradlift(&[
        "emit",
        ode,
        "--fn",
        "primal",
        "--object",
        path.to_str().unwrap(),
    ]);
    success(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no gradient exported"), "{err}");
    let bytes = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let has = |s: &[u8]| bytes.windows(s.len()).any(|w| w == s);
    assert!(has(b"\0primal\0") && !has(b"primal_grad"));
}

#[test]
fn clif_and_asm_of_every_example_and_its_gradient() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "grad"))
        .collect();
    files.sort();
    assert!(files.len() >= 10);
    for file in &files {
        let f = file.to_str().unwrap();
        for stage in ["clif", "asm"] {
            for grad in [false, true] {
                let mut args = vec!["emit", f, "--stage", stage];
                if grad {
                    args.push("--grad");
                }
                let out = gradlift(&args);
                if grad && !out.status.success() {
                    // Only functions returning a real have a gradient.
                    let err = String::from_utf8_lossy(&out.stderr);
                    assert!(err.contains("returns"), "{f}: {err}");
                    continue;
                }
                let text = success(&out);
                if stage == "clif" {
                    assert!(text.contains("; the result"), "{f}");
                } else {
                    assert!(text.contains("bytes of code"), "{f}");
                }
            }
        }
    }
}
