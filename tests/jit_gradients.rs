//! Native gradients equal the reference interpreter's, bit for bit (both
//! run the same optimized gradient program, in the same operation order),
//! on every real-valued example and on generated programs.

use gradlift::lang::testing::{generate, Config};
use gradlift::{Args, GradOptions, Jit, Program, Type, Value};

fn same(a: &[Value], b: &[Value]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.same(y))
}

#[test]
fn example_gradients_natively() {
    let root = env!("CARGO_MANIFEST_DIR");
    let cases: Vec<serde_json::Value> = serde_json::from_str(
        &std::fs::read_to_string(format!("{root}/tests/examples_expected.json")).unwrap(),
    )
    .unwrap();
    let jit = Jit::new().unwrap();
    let mut checked = 0;
    for case in &cases {
        let file = case["file"].as_str().unwrap();
        let text = std::fs::read_to_string(format!("{root}/{file}")).unwrap();
        let program = Program::parse(file, &text).unwrap();
        let f = program.function(case["fn"].as_str().unwrap()).unwrap();
        if f.signature().ret != Type::Real {
            continue;
        }
        let args = f.args(&Args::from_json(&case["at"]).unwrap()).unwrap();
        let g = f.gradient(None, GradOptions::default()).unwrap();
        let (v1, g1) = g.eval(&args).unwrap();
        let (v2, g2) = g.compile(&jit).unwrap().call(&args).unwrap();
        assert_eq!(v1.to_bits(), v2.to_bits(), "{file}");
        assert!(same(&g1, &g2), "{file}: interpreter {g1:?}, native {g2:?}");
        checked += 1;
    }
    assert!(checked >= 15);
}

#[test]
fn generated_gradients_natively() {
    let jit = Jit::new().unwrap();
    let mut checked = 0;
    for seed in 0..300 {
        let case = generate(seed, &Config::default());
        let program = Program::parse("gen.grad", &case.text()).unwrap();
        let f = program.last_function().unwrap();
        if f.signature().ret != Type::Real || f.signature().params.iter().all(|(_, t)| t.is_none())
        {
            continue;
        }
        let g = f.gradient(None, GradOptions::default()).unwrap();
        let (v1, g1) = g.eval(&case.args).unwrap();
        let (v2, g2) = g
            .compile(&jit)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}\n{}", g.term()))
            .call(&case.args)
            .unwrap();
        assert!(
            v1.to_bits() == v2.to_bits() || (v1.is_nan() && v2.is_nan()),
            "seed {seed}: {v1} vs {v2}"
        );
        assert!(
            same(&g1, &g2),
            "seed {seed}: interpreter {g1:?}, native {g2:?}\n{}",
            case.text()
        );
        checked += 1;
    }
    assert!(checked >= 150, "{checked}");
}
