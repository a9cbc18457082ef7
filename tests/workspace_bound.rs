//! The workspace bound computed at compile time is enough: called through
//! the raw ABI with exactly the bytes it gives for the sizes of the call,
//! every shipped example, its gradient, and generated programs and their
//! gradients run to the end without asking for more (status 1), and
//! return what the safe call returns.

use gradlift::jit::{Compiled, Status};
use gradlift::lang::testing::{generate, Config};
use gradlift::lang::value::bind_sizes;
use gradlift::{Args, GradOptions, Jit, Program, Type, Value};

/// The bound at the sizes of `args`, and the bytes the call takes when
/// the workspace is grown from nothing to what the code asks for; `None`
/// if the call fails (as it does through the safe API).
fn check(c: &Compiled, args: &[Value], what: &str) -> Option<(u64, u64)> {
    let sig = c.signature();
    let want = c.call(args).ok()?;
    let bound = bind_sizes("f", sig, args).unwrap();
    let sizes: Vec<i64> = sig.size_vars.iter().map(|v| bound[v]).collect();
    let inputs: Vec<Vec<f64>> = sig
        .params
        .iter()
        .zip(args)
        .filter(|((_, t), _)| t.is_some())
        .map(|(_, a)| {
            let mut v = Vec::new();
            a.flatten(&mut v);
            v
        })
        .collect();
    let mut words = sizes.clone();
    words.extend(inputs.iter().map(|v| v.as_ptr() as i64));
    let mut flat_want = Vec::new();
    want.flatten(&mut flat_want);
    let bytes = c
        .workspace_bound()
        .at(&sizes)
        .unwrap_or_else(|| panic!("{what}: no bound: {:?}", c.workspace_bound().missing()));
    let run = |workspace_bytes: u64| -> (i64, i64, Vec<f64>) {
        let mut out = vec![0.0; flat_want.len()];
        let mut workspace = vec![0u64; workspace_bytes.div_ceil(8) as usize];
        let mut info = 0i64;
        // SAFETY: the buffers have the lengths of the ABI (docs/abi.md).
        let status = unsafe {
            c.raw()(
                words.as_ptr(),
                out.as_mut_ptr(),
                out.len() as i64,
                workspace.as_mut_ptr() as *mut u8,
                (workspace.len() * 8) as i64,
                &mut info,
            )
        };
        (status, info, out)
    };
    let (status, info, out) = run(bytes);
    assert_eq!(
        status,
        Status::Ok as i64,
        "{what}: with the bound's {bytes} bytes, status {status} (info {info})"
    );
    let same = out
        .iter()
        .zip(&flat_want)
        .all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()));
    assert!(same, "{what}: {out:?} against {flat_want:?}");
    // What the code asks for, growing from nothing.
    let mut have = 0u64;
    loop {
        let (status, info, _) = run(have);
        if status == Status::Ok as i64 {
            break;
        }
        assert_eq!(status, Status::WorkspaceTooSmall as i64, "{what}");
        have = (info as u64).max(have + 8);
    }
    assert!(have <= bytes.max(8), "{what}: needs {have}, bound {bytes}");
    Some((bytes, have))
}

fn examples() -> Vec<(String, Program, String, Vec<Value>)> {
    let root = env!("CARGO_MANIFEST_DIR");
    let cases: Vec<serde_json::Value> = serde_json::from_str(
        &std::fs::read_to_string(format!("{root}/tests/examples_expected.json")).unwrap(),
    )
    .unwrap();
    cases
        .iter()
        .map(|case| {
            let file = case["file"].as_str().unwrap().to_string();
            let text = std::fs::read_to_string(format!("{root}/{file}")).unwrap();
            let program = Program::parse(&file, &text).unwrap();
            let name = case["fn"].as_str().unwrap().to_string();
            let f = program.function(&name).unwrap();
            let args = f.args(&Args::from_json(&case["at"]).unwrap()).unwrap();
            (file, program, name, args)
        })
        .collect()
}

#[test]
fn the_bound_is_enough_for_every_example_and_gradient() {
    let jit = Jit::new().unwrap();
    let (mut checked, mut loosest) = (0, (1.0f64, String::new()));
    for (file, program, name, args) in examples() {
        let f = program.function(&name).unwrap();
        let c = f.compile(&jit).unwrap();
        let mut runs = vec![(format!("{file} {name}"), check(c.native(), &args, &file))];
        if f.signature().ret == Type::Real {
            let g = f.gradient(None, GradOptions::default()).unwrap();
            let gc = g.compile(&jit).unwrap();
            let what = format!("{file} {name}, gradient");
            runs.push((what.clone(), check(gc.native(), &args, &what)));
        }
        for (what, r) in runs {
            let Some((bound, need)) = r else { continue };
            checked += 1;
            let ratio = bound as f64 / need.max(1) as f64;
            if need > 0 && ratio > loosest.0 {
                loosest = (ratio, format!("{what}: bound {bound}, needs {need}"));
            }
        }
    }
    eprintln!(
        "{checked} calls; loosest bound {:.2}× ({})",
        loosest.0, loosest.1
    );
    assert!(checked >= 30, "{checked}");
}

#[test]
fn the_bound_is_enough_for_generated_programs_and_gradients() {
    let jit = Jit::new().unwrap();
    let mut checked = 0;
    for seed in 0..300 {
        let case = generate(seed, &Config::default());
        let program = Program::parse("gen.grad", &case.text()).unwrap();
        let f = program.last_function().unwrap();
        let what = format!("seed {seed}\n{}", case.text());
        let Ok(c) = f.compile(&jit) else { continue };
        if check(c.native(), &case.args, &what).is_some() {
            checked += 1;
        }
        if f.signature().ret == Type::Real && f.signature().params.iter().any(|(_, t)| t.is_some())
        {
            let g = f.gradient(None, GradOptions::default()).unwrap();
            let gc = g.compile(&jit).unwrap();
            if check(gc.native(), &case.args, &format!("{what}\n(gradient)")).is_some() {
                checked += 1;
            }
        }
    }
    eprintln!("{checked} calls of generated programs ran within the bound");
    assert!(checked >= 300, "{checked}");
}

#[test]
fn the_bound_is_enough_for_checkpointed_loops() {
    use gradlift::lang::Schedule;
    let jit = Jit::new().unwrap();
    let mut checked = 0;
    for (file, program, name, args) in examples() {
        let f = program.function(&name).unwrap();
        let text = std::fs::read_to_string(format!("{}/{file}", env!("CARGO_MANIFEST_DIR")));
        if f.signature().ret != Type::Real || !text.unwrap().contains("foldl") {
            continue;
        }
        for s in [
            Schedule::Every(1),
            Schedule::Every(3),
            Schedule::Binomial(1),
            Schedule::Binomial(4),
        ] {
            let options = GradOptions {
                checkpoint: Some(s),
                ..GradOptions::default()
            };
            let g = f.gradient(None, options).unwrap();
            assert!(g.term().to_string().contains("revfold"), "{file}");
            let gc = g.compile(&jit).unwrap();
            if check(gc.native(), &args, &format!("{file} {name}, {s:?}")).is_some() {
                checked += 1;
            }
        }
    }
    assert!(checked >= 12, "{checked}");
}

#[test]
fn the_bound_grows_with_the_sizes_as_the_need_does() {
    // The scan stores n + 1 states, and the fold keeps its accumulator of
    // n + 1 in two buffers: 3(n + 1) reals, what the code needs, at every n.
    let program = Program::parse(
        "<test>",
        "def f(A: [R; n]) -> R =
           let S = scanl (+) 0 A in
           reduce (+) 0 (foldl (acc, a. map2 (s, x. s * a + x) S acc) S A)",
    )
    .unwrap();
    let f = program.last_function().unwrap();
    let c = f.compile(&Jit::new().unwrap()).unwrap();
    for n in [0usize, 1, 7, 1000] {
        let a = Value::reals(&(0..n).map(|i| i as f64 * 0.25).collect::<Vec<_>>());
        let (bound, need) = check(c.native(), &[a], "scan").unwrap();
        assert_eq!(bound, 24 * (n as u64 + 1), "n = {n}");
        assert_eq!(need, bound, "n = {n}");
    }
}
