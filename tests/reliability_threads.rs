//! One compiled gradient called from 8 threads, 10,000 calls each, on
//! inputs that differ from call to call: every result is bit-identical to
//! the result of the same call made on one thread.

use gradlift::{GradOptions, Jit, Program, Value};

const THREADS: usize = 8;
const CALLS: usize = 10_000;
/// Distinct inputs, cycled through.
const INPUTS: usize = 64;

fn input(k: usize) -> Vec<Value> {
    let t = k as f64;
    let w = Value::reals(&[0.3 + 0.01 * t, -0.2, 0.1 - 0.003 * t]);
    let rows = (0..20)
        .map(|i| {
            let i = i as f64;
            Value::reals(&[(i + t) * 0.01, 1.0 - 0.02 * i, (i * t).sin()])
        })
        .collect();
    let y = Value::reals(
        &(0..20)
            .map(|i| if (i + k).is_multiple_of(3) { 1.0 } else { -1.0 })
            .collect::<Vec<_>>(),
    );
    vec![w, Value::array(rows), y, Value::Real(0.01)]
}

type Output = (u64, Vec<Value>);

#[test]
fn eight_threads_agree_with_one_bit_for_bit() {
    let root = env!("CARGO_MANIFEST_DIR");
    let text =
        std::fs::read_to_string(format!("{root}/examples/logistic_regression.grad")).unwrap();
    let program = Program::parse("logistic_regression.grad", &text).unwrap();
    let f = program.function("loss").unwrap();
    let jit = Jit::new().unwrap();
    let g = f
        .gradient(None, GradOptions::default())
        .unwrap()
        .compile(&jit)
        .unwrap();
    let inputs: Vec<Vec<Value>> = (0..INPUTS).map(input).collect();
    let alone: Vec<Output> = inputs
        .iter()
        .map(|a| {
            let (v, grads) = g.call(a).unwrap();
            (v.to_bits(), grads)
        })
        .collect();
    let same = |a: &Output, b: &Output| {
        a.0 == b.0 && a.1.len() == b.1.len() && a.1.iter().zip(&b.1).all(|(x, y)| x.same(y))
    };
    let mismatches: usize = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (g, inputs, alone) = (&g, &inputs, &alone);
                s.spawn(move || {
                    let mut bad = 0;
                    for call in 0..CALLS {
                        // Each thread walks the inputs in its own order.
                        let k = (call * (2 * t + 1) + t) % INPUTS;
                        let (v, grads) = g.call(&inputs[k]).unwrap();
                        if !same(&(v.to_bits(), grads), &alone[k]) {
                            bad += 1;
                        }
                    }
                    bad
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(mismatches, 0, "of {} calls", THREADS * CALLS);
    // The inputs do give different gradients.
    assert!(!same(&alone[0], &alone[1]));
}
