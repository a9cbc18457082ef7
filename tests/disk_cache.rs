//! The disk cache of native code (`Jit::disk_cache`): a second `Jit` (as
//! another process would) loads what the first stored and computes the
//! same bits without compiling; split loops and matrix products on a
//! thread pool load too; a damaged, truncated or foreign file is compiled
//! again and overwritten; a change of text or of a setting that changes
//! the code is another entry.

use gradlift::{GradOptions, Jit, Program, Value};
use std::path::PathBuf;

const LOSS: &str = "def loss(w: [R; n], x: [R; n]) -> R =
  reduce (+) 0 (map2 (a, b. (a - b) * (a - b) + exp (a * b)) w x)
";

/// A fresh, empty directory for one test.
fn directory(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gradlift-disk-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn entries(dir: &PathBuf) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    files
}

fn args(n: usize) -> Vec<Value> {
    let w: Vec<f64> = (0..n).map(|i| (i as f64 * 0.37).sin()).collect();
    let x: Vec<f64> = (0..n).map(|i| (i as f64 * 0.11).cos()).collect();
    vec![Value::reals(&w), Value::reals(&x)]
}

/// Value and gradient of `text`'s `loss` compiled by `jit`, as bits.
fn gradient_bits(jit: &Jit, text: &str, args: &[Value]) -> Vec<u64> {
    let p = Program::parse("loss.grad", text).unwrap();
    let f = p.function("loss").unwrap();
    let g = f
        .compile_gradient(jit, None, GradOptions::default())
        .unwrap();
    let (v, grads) = g.call(args).unwrap();
    let mut out = vec![v];
    for g in &grads {
        g.flatten(&mut out);
    }
    out.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn a_second_jit_loads_the_stored_code_and_computes_the_same_bits() {
    let dir = directory("load");
    let first = Jit::new().unwrap().disk_cache(&dir);
    let compiled = gradient_bits(&first, LOSS, &args(5));
    let stats = first.disk_stats().unwrap();
    assert_eq!((stats.hits, stats.misses, stats.writes), (0, 1, 1));
    assert_eq!(entries(&dir).len(), 1);

    let second = Jit::new().unwrap().disk_cache(&dir);
    let loaded = gradient_bits(&second, LOSS, &args(5));
    assert_eq!(compiled, loaded);
    let stats = second.disk_stats().unwrap();
    assert_eq!((stats.hits, stats.misses, stats.damaged), (1, 0, 0));

    // The primal, too, is stored under its own key.
    let p = Program::parse("loss.grad", LOSS).unwrap();
    let f = p.function("loss").unwrap();
    let value = f.compile(&second).unwrap().call(&args(5)).unwrap();
    assert_eq!(value.as_real().unwrap().to_bits(), loaded[0]);
    assert_eq!(entries(&dir).len(), 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_loaded_entry_does_not_build_the_program() {
    let dir = directory("nobuild");
    let p = Program::parse("loss.grad", LOSS).unwrap();
    let closed = p
        .function("loss")
        .unwrap()
        .gradient(None, GradOptions::default())
        .unwrap()
        .closed();
    let first = Jit::new().unwrap().disk_cache(&dir);
    let a = first
        .compile_keyed("the key", || {
            Ok::<_, gradlift::jit::JitError>(closed.clone())
        })
        .unwrap();
    let second = Jit::new().unwrap().disk_cache(&dir);
    let b = second
        .compile_keyed("the key", || -> Result<_, gradlift::jit::JitError> {
            panic!("a stored entry is loaded, not built")
        })
        .unwrap();
    assert_eq!(a.signature(), b.signature());
    assert_eq!(
        a.workspace_bound().at(&[1000]),
        b.workspace_bound().at(&[1000])
    );
    let (x, y) = (a.call(&args(9)).unwrap(), b.call(&args(9)).unwrap());
    assert!(x.same(&y));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn split_loops_and_matrix_products_on_threads_load_and_agree() {
    let dir = directory("threads");
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/mlp.grad")).unwrap();
    let program = Program::parse("mlp.grad", &text).unwrap();
    let f = program.last_function().unwrap();
    // The example's shapes, with a batch large enough to be split across
    // the threads: W1 h × d, b1 h, w2 h, b2, X m × d, y m.
    let (d, h, m) = (16, 32, 4096);
    let mut seed = 7u64;
    let mut reals = |n: usize| -> Vec<f64> {
        (0..n)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                (seed >> 11) as f64 / (1u64 << 53) as f64 - 0.5
            })
            .collect()
    };
    let mut matrix = |rows: usize, cols: usize| {
        Value::array((0..rows).map(|_| Value::reals(&reals(cols))).collect())
    };
    let (w1, x) = (matrix(h, d), matrix(m, d));
    let mlp_args = vec![
        w1,
        Value::reals(&reals(h)),
        Value::reals(&reals(h)),
        Value::Real(0.1),
        x,
        Value::reals(&reals(m)),
    ];
    let run = |jit: &Jit| {
        let g = f
            .compile_gradient(jit, None, GradOptions::default())
            .unwrap();
        let (v, grads) = g.call(&mlp_args).unwrap();
        let mut out = vec![v];
        for g in &grads {
            g.flatten(&mut out);
        }
        out.iter().map(|x| x.to_bits()).collect::<Vec<u64>>()
    };
    let compiled = run(&Jit::new().unwrap().threads(2).disk_cache(&dir));
    let second = Jit::new().unwrap().threads(2).disk_cache(&dir);
    let loaded = run(&second);
    assert_eq!(second.disk_stats().unwrap().hits, 1);
    assert_eq!(compiled, loaded);
    // One thread computes the same bits, from another entry.
    let one = Jit::new().unwrap().threads(1).disk_cache(&dir);
    assert_eq!(run(&one), compiled);
    assert_eq!(one.disk_stats().unwrap().misses, 1);
    assert_eq!(entries(&dir).len(), 2);

    // A top-level reduce of a map2 runs as kernels (second functions of
    // the entry) on the pool, at a length the pool splits.
    let long = args(200_000);
    let p = Program::parse("loss.grad", LOSS).unwrap();
    let f = p.function("loss").unwrap();
    let value = |jit: &Jit| {
        let before = gradlift::jit::split_calls();
        let v = f.compile(jit).unwrap().call(&long).unwrap();
        (
            v.as_real().unwrap().to_bits(),
            gradlift::jit::split_calls() - before,
        )
    };
    let (compiled, splits) = value(&Jit::new().unwrap().threads(2).disk_cache(&dir));
    assert!(splits > 0, "the loop is split");
    let again = Jit::new().unwrap().threads(2).disk_cache(&dir);
    let (loaded, splits) = value(&again);
    assert_eq!(again.disk_stats().unwrap().hits, 1);
    assert!(splits > 0, "the loaded loop is split");
    assert_eq!(loaded, compiled);
    assert_eq!(value(&Jit::new().unwrap()).0, compiled);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn damaged_and_truncated_files_are_compiled_again_and_overwritten() {
    let dir = directory("damaged");
    let expected = gradient_bits(&Jit::new().unwrap().disk_cache(&dir), LOSS, &args(7));
    let file = entries(&dir).pop().unwrap();
    let whole = std::fs::read(&file).unwrap();
    let mut flipped = whole.clone();
    let middle = flipped.len() / 2;
    flipped[middle] ^= 0x40;
    for damaged in [
        flipped,
        whole[..whole.len() - 3].to_vec(),
        b"GLCODE01".to_vec(),
        Vec::new(),
    ] {
        std::fs::write(&file, &damaged).unwrap();
        let jit = Jit::new().unwrap().disk_cache(&dir);
        assert_eq!(gradient_bits(&jit, LOSS, &args(7)), expected);
        let stats = jit.disk_stats().unwrap();
        assert_eq!(
            (stats.hits, stats.damaged, stats.misses, stats.writes),
            (0, 1, 1, 1)
        );
        assert_eq!(std::fs::read(&file).unwrap(), whole, "overwritten");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn another_text_or_setting_is_another_entry() {
    let dir = directory("keys");
    let jit = Jit::new().unwrap().disk_cache(&dir);
    gradient_bits(&jit, LOSS, &args(3));
    let other = LOSS.replace("exp", "sin");
    gradient_bits(&jit, &other, &args(3));
    assert_eq!(entries(&dir).len(), 2);
    let limited = Jit::new().unwrap().max_iterations(1000).disk_cache(&dir);
    gradient_bits(&limited, LOSS, &args(3));
    assert_eq!(limited.disk_stats().unwrap().misses, 1);
    assert_eq!(entries(&dir).len(), 3);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_directory_that_cannot_be_written_still_compiles() {
    let dir = directory("unwritable");
    // A file where the directory should be.
    std::fs::write(&dir, b"not a directory").unwrap();
    let jit = Jit::new().unwrap().disk_cache(&dir);
    let bits = gradient_bits(&jit, LOSS, &args(4));
    assert_eq!(bits, gradient_bits(&Jit::new().unwrap(), LOSS, &args(4)));
    let stats = jit.disk_stats().unwrap();
    assert_eq!((stats.misses, stats.writes, stats.failed_writes), (1, 0, 1));
    let _ = std::fs::remove_file(&dir);
}

#[test]
fn every_example_and_its_gradient_load_with_their_signatures() {
    let dir = directory("examples");
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/examples");
    let mut sources = Vec::new();
    for entry in std::fs::read_dir(root).unwrap().flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "grad") {
            let text = std::fs::read_to_string(&path).unwrap();
            sources.push((path.display().to_string(), text));
        }
    }
    sources.sort();
    let compile_all = |jit: &Jit| {
        let mut signatures = Vec::new();
        for (name, text) in &sources {
            let p = Program::parse(name, text).unwrap();
            let f = p.last_function().unwrap();
            let primal = f.compile(jit).unwrap();
            signatures.push(format!("{:?}", primal.native().signature()));
            if let Ok(g) = f.compile_gradient(jit, None, GradOptions::default()) {
                signatures.push(format!("{:?}", g.native().signature()));
            }
        }
        signatures
    };
    let first = Jit::new().unwrap().disk_cache(&dir);
    let compiled = compile_all(&first);
    let stored = first.disk_stats().unwrap();
    assert_eq!(stored.writes, stored.misses);
    assert_eq!(stored.writes as usize, compiled.len());
    let second = Jit::new().unwrap().disk_cache(&dir);
    assert_eq!(compile_all(&second), compiled);
    let loaded = second.disk_stats().unwrap();
    assert_eq!(
        (loaded.hits, loaded.misses, loaded.damaged),
        (stored.writes, 0, 0)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
