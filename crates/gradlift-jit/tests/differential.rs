//! The JIT agrees with the reference interpreter, bit for bit (NaN equals
//! NaN): on every shipped example and on random well-typed programs. Every
//! generated function passes Cranelift's verifier (on in debug builds).

use gradlift_ad::inline::inline;
use gradlift_jit::{CallError, Jit, JitError};
use gradlift_lang::testing::{generate, Config};
use gradlift_lang::{check_module, check_source, interp, Args, Value};

fn root() -> String {
    format!("{}/../..", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn every_example_matches_the_interpreter() {
    let jit = Jit::new().unwrap().verify(true);
    let text = std::fs::read_to_string(format!("{}/tests/examples_expected.json", root())).unwrap();
    let cases: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
    assert!(!cases.is_empty());
    for case in &cases {
        let file = case["file"].as_str().unwrap();
        let source = std::fs::read_to_string(format!("{}/{file}", root())).unwrap();
        let checked = check_source(file, &source).unwrap();
        let name = case["fn"].as_str().unwrap();
        let index = checked.index_of(name).unwrap();
        let args = Args::from_json(&case["at"])
            .unwrap()
            .values_for(name, &checked.sigs[index])
            .unwrap();
        // The program with its derivative operators expanded (for most,
        // the definition inlined), run by both.
        let closed = gradlift_ad::pipeline::expanded(&checked, index).unwrap();
        let sizes = gradlift_lang::value::bind_sizes(name, &checked.sigs[index], &args).unwrap();
        let mut vars: Vec<(gradlift_lang::Name, Value)> =
            sizes.into_iter().map(|(n, v)| (n, Value::Int(v))).collect();
        for ((p, t), a) in closed.params.iter().zip(&args) {
            if t.is_some() {
                vars.push((p.clone(), a.clone()));
            }
        }
        let want = interp::eval_expr(&checked, &vars, &closed.body).unwrap();
        if !checked
            .module
            .defs
            .iter()
            .any(|d| gradlift_ad::derivatives::has_derivatives(&d.body))
        {
            assert!(want.same(&interp::call(&checked, index, &args).unwrap()));
        }
        let compiled = jit
            .compile(&closed)
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        let got = compiled
            .call(&args)
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(
            got.same(&want),
            "{file} at {}: JIT {got}, interpreter {want}",
            case["at"]
        );
    }
}

/// Compiles and runs random programs; counts the supported ones.
#[test]
fn random_programs_match_the_interpreter() {
    let jit = Jit::new().unwrap().verify(true);
    let (mut supported, mut unsupported, mut runtime_errors) = (0, Vec::new(), 0);
    let seeds = 1000;
    for seed in 0..seeds {
        let case = generate(seed, &Config::default());
        let checked = check_module(case.module.clone()).unwrap();
        let index = checked.module.defs.len() - 1;
        let closed = inline(&checked, index);
        let want = interp::call(&checked, index, &case.args);
        let compiled = match jit.compile(&closed) {
            Ok(c) => c,
            Err(JitError::Unsupported(what)) => {
                unsupported.push((seed, what));
                continue;
            }
            Err(e) => panic!("seed {seed}: {e}\n{}", case.text()),
        };
        supported += 1;
        match (compiled.call(&case.args), want) {
            (Ok(got), Ok(want)) => assert!(
                got.same(&want),
                "seed {seed}: JIT {got}, interpreter {want}\n{}\nargs {:?}",
                case.text(),
                case.args.iter().map(Value::to_string).collect::<Vec<_>>()
            ),
            (Err(CallError::Status(_)), Err(_)) => runtime_errors += 1,
            (got, want) => panic!(
                "seed {seed}: JIT {got:?}, interpreter {want:?}\n{}",
                case.text()
            ),
        }
    }
    eprintln!(
        "{supported} of {seeds} random programs compiled and matched ({runtime_errors} failing in both); unsupported: {unsupported:?}"
    );
    assert!(
        supported * 10 >= seeds * 9,
        "only {supported} of {seeds} supported: {unsupported:?}"
    );
}

/// Simplified gradient programs write function arguments as sections
/// (`map2 (*) A B`); the JIT runs them like lambdas.
#[test]
fn sections_as_function_arguments() {
    let src = "def f(A: [R; n], B: [R; n]) -> (R, [R; n+1]) =
      (reduce (+) 0 (map2 (*) A B), scanl max (-inf) (map exp A))";
    let m = gradlift_lang::check_source("t.grad", src).unwrap();
    let mut closed = gradlift_ad::inline::inline(&m, 0);
    // Contract the inlined lambdas back to sections, as simplification does.
    closed.body =
        gradlift_lang::parse_expr("(reduce (+) 0.0 (map2 (*) A B), scanl max (-inf) (map exp A))")
            .unwrap();
    let f = gradlift_jit::Jit::new().unwrap().compile(&closed).unwrap();
    let args = [
        gradlift_lang::Value::reals(&[1.0, 2.0, 3.0]),
        gradlift_lang::Value::reals(&[4.0, 5.0, 6.0]),
    ];
    let got = f.call(&args).unwrap();
    let want = gradlift_lang::interp::call(&m, 0, &args).unwrap();
    assert!(got.same(&want), "{got} vs {want}");
}

#[test]
fn cheap_conditionals_are_selects_and_agree_with_the_interpreter() {
    // Sides of a few instructions, reals and conditions: a `select`, no
    // branch. NaN, infinities and signed zeros go through unchanged.
    let source = "def f(x: [R; n], v: R) -> ([R; n], R) =
      (map2 (a, i. if i == 0 then a + v else (if a < v then -a else a * 2)) x (iota(n)),
       if v > 0 then v / 3 else min(v, 1))";
    let checked = check_source("<test>", source).unwrap();
    let jit = Jit::new().unwrap().verify(true);
    let closed = inline(&checked, 0);
    let clif = jit.clif(&closed).unwrap();
    assert!(clif.contains("select"), "{clif}");
    let compiled = jit.compile(&closed).unwrap();
    let xs = [-0.0, 0.0, f64::NAN, f64::INFINITY, -2.5, 1e300];
    for v in [-0.0, 0.0, 1.5, -1.5, f64::NAN, f64::NEG_INFINITY] {
        let args = [Value::reals(&xs), Value::Real(v)];
        let want = interp::call(&checked, 0, &args).unwrap();
        let got = compiled.call(&args).unwrap();
        assert!(got.same(&want), "v = {v}: JIT {got}, interpreter {want}");
    }
    // A side that calls a library function or builds an array branches.
    // (The array has a constant length of one chunk: a reduce of a longer
    // one folds its chunks' results with a `select` of its own.)
    let source = "def f(x: [R; 2], v: R) -> R =
      if v > 0 then sin(v) else reduce (+) 0 x";
    let checked = check_source("<test>", source).unwrap();
    let closed = inline(&checked, 0);
    assert!(!jit.clif(&closed).unwrap().contains("select"));
    let compiled = jit.compile(&closed).unwrap();
    for v in [-1.0, 1.0] {
        let args = [Value::reals(&xs[4..]), Value::Real(v)];
        let want = interp::call(&checked, 0, &args).unwrap();
        assert!(compiled.call(&args).unwrap().same(&want));
    }
}
