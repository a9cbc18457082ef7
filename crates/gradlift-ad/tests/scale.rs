//! Differentiating long programs: a 100,000-binding `let` chain and a
//! 10,000-deep expression are differentiated by both routes (sparse
//! continuations) on a thread with an 8 MiB stack, and the gradient checks
//! against the closed form.

use gradlift_ad::direct::{Construction, Route};
use gradlift_ad::pipeline::{gradient, Options};
use gradlift_lang::testing::{let_chain, nested};
use gradlift_lang::value::bind_sizes;
use gradlift_lang::{check_source, interp, Name, Value};

fn differentiate(text: String, steps: usize) {
    let m = check_source("scale.grad", &text).unwrap();
    for route in [Route::Unf, Route::Direct] {
        let g = gradient(
            &m,
            0,
            None,
            Options {
                route,
                construction: Construction::Sparse,
                optimize: true,
                checkpoint: None,
            },
        )
        .unwrap();
        let sizes = bind_sizes("f", &m.sigs[0], &[Value::Real(2.0)]).unwrap();
        assert!(sizes.is_empty());
        let vars = vec![(Name::from(&*m.sigs[0].params[0].0), Value::Real(2.0))];
        let out = interp::eval_expr(&m, &vars, &g.term).unwrap();
        let Value::Tuple(parts) = out else {
            panic!("a pair")
        };
        let grad = parts[1].as_real().unwrap();
        let want = 0.9999f64.powi(steps as i32);
        assert!(
            (grad - want).abs() <= 1e-9 * want,
            "{route:?}: {grad} vs {want}"
        );
    }
}

#[test]
fn gradient_of_a_100k_let_chain() {
    std::thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(|| differentiate(let_chain(100_000), 100_000))
        .unwrap()
        .join()
        .expect("no stack overflow");
}

#[test]
fn gradient_of_a_10k_deep_expression() {
    std::thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(|| differentiate(nested(10_000), 10_000))
        .unwrap()
        .join()
        .expect("no stack overflow");
}
