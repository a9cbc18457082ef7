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

/// The reverse of `reduce max` and `min` sends the cotangent to the first
/// element equal to the result when one beats the start, else to the
/// start — with ties, signed zeros, NaN and infinities, by the
/// interpreter and natively.
#[test]
fn extrema_send_the_cotangent_to_the_first_position() {
    let jit = Jit::new().unwrap();
    let nan = f64::NAN;
    let inf = f64::INFINITY;
    let cases: &[(&str, f64, &[f64], Option<usize>)] = &[
        ("max", -inf, &[1.0, 3.0, 3.0, 2.0], Some(1)),
        ("max", -inf, &[0.0, -0.0], Some(0)),
        ("max", -inf, &[-0.0, 0.0], Some(0)),
        ("max", -0.0, &[0.0], None),
        ("max", -inf, &[nan, 1.0, nan, 2.0], Some(3)),
        ("max", -inf, &[-inf, -inf], None),
        ("max", 5.0, &[1.0, 5.0], None),
        ("max", -inf, &[], None),
        ("min", inf, &[2.0, 1.0, 1.0, 4.0], Some(1)),
        ("min", inf, &[inf, nan], None),
        ("min", 0.5, &[1.0, 0.25, 0.25], Some(1)),
    ];
    for (op, start, xs, position) in cases {
        let text = format!("def f(v: R, x: [R; n]) -> R = 2 * reduce {op} v x");
        let program = Program::parse("ext.grad", &text).unwrap();
        let f = program.last_function().unwrap();
        let args = vec![Value::Real(*start), Value::reals(xs)];
        let g = f.gradient(None, GradOptions::default()).unwrap();
        let (v1, g1) = g.eval(&args).unwrap();
        let (v2, g2) = g.compile(&jit).unwrap().call(&args).unwrap();
        assert_eq!(v1.to_bits(), v2.to_bits(), "{text} at {xs:?}");
        assert!(same(&g1, &g2), "{text}: interpreter {g1:?}, native {g2:?}");
        let mut want_x = vec![0.0; xs.len()];
        let want_v = match position {
            Some(k) => {
                want_x[*k] = 2.0;
                0.0
            }
            None => 2.0,
        };
        let want = [Value::Real(want_v), Value::reals(&want_x)];
        assert!(same(&g1, &want), "{text} at {xs:?}: {g1:?}, want {want:?}");
    }
}
