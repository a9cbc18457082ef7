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
        let want = interp::call(&checked, index, &args).unwrap();
        let compiled = jit
            .compile(&inline(&checked, index))
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
        gradlift_lang::parse_expr("(reduce (+) 0 (map2 (*) A B), scanl max (-inf) (map exp A))")
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
