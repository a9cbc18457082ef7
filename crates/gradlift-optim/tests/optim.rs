//! The argmin problem agrees with the compiled gradient and the
//! interpreter; every method converges on small instances; bad input is a
//! named error.

use argmin::core::{CostFunction, Gradient};
use gradlift::{Args, GradOptions, Jit, Name, Program, Value};
use gradlift_optim::{fit, AdamOptions, Error, FitOptions, Loss, Method};

const MLP: &str = include_str!("../../../examples/mlp.grad");
const LOGREG: &str = include_str!("../../../examples/logistic_regression.grad");

/// A deterministic sequence in [-1, 1).
fn reals(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 11) as f64 / (1u64 << 52) as f64 - 1.0
        })
        .collect()
}

fn matrix(rows: usize, cols: usize, seed: u64) -> Value {
    let xs = reals(rows * cols, seed);
    Value::array(xs.chunks(cols).map(Value::reals).collect())
}

/// Two classes in the plane, labels ±1, separable up to noise.
fn classes(m: usize) -> (Value, Value) {
    let xs = reals(2 * m, 7);
    let rows: Vec<Value> = xs.chunks(2).map(Value::reals).collect();
    let labels: Vec<f64> = xs
        .chunks(2)
        .map(|p| {
            if 1.5 * p[0] - p[1] + 0.1 > 0.0 {
                1.0
            } else {
                -1.0
            }
        })
        .collect();
    (Value::array(rows), Value::reals(&labels))
}

fn mlp_values() -> Vec<Value> {
    vec![
        matrix(3, 2, 1),
        Value::reals(&reals(3, 2)),
        Value::reals(&reals(3, 3)),
        Value::Real(0.1),
        matrix(5, 2, 4),
        Value::reals(&reals(5, 5)),
    ]
}

#[test]
fn the_argmin_gradient_is_the_compiled_gradient() {
    let program = Program::parse("mlp.grad", MLP).unwrap();
    let f = program.function("loss").unwrap();
    let jit = Jit::new().unwrap();
    let values = mlp_values();
    let fitted: Vec<Name> = ["W1", "b1", "w2", "b2"].map(Name::from).to_vec();
    let loss = Loss::new(&f, &jit, &fitted, &values).unwrap();
    assert_eq!(loss.dim(), 6 + 3 + 3 + 1);
    let x = loss.start();

    // The compiled gradient, called on values, flattened in parameter order.
    let g = f
        .gradient(Some(&fitted), GradOptions::default())
        .unwrap()
        .compile(&jit)
        .unwrap();
    let (value, grads) = g.call(&values).unwrap();
    let mut want = Vec::new();
    grads.iter().for_each(|g| g.flatten(&mut want));

    let got = Gradient::gradient(&loss, &x).unwrap();
    assert_eq!(got, want, "argmin sees the compiled gradient, bit for bit");
    let cost = CostFunction::cost(&loss, &x).unwrap();
    let interp = f.eval(&values).unwrap().as_real().unwrap();
    assert!((cost - value).abs() <= 1e-12 * value.abs());
    assert!((cost - interp).abs() <= 1e-12 * interp.abs());

    // And both agree with central finite differences of the cost.
    for (i, g) in got.iter().enumerate() {
        let h = 1e-6;
        let (mut up, mut down) = (x.clone(), x.clone());
        up[i] += h;
        down[i] -= h;
        let fd = (loss.value(&up).unwrap() - loss.value(&down).unwrap()) / (2.0 * h);
        assert!(
            (g - fd).abs() <= 1e-6 * (1.0 + fd.abs()),
            "{i}: {g} vs {fd}"
        );
    }

    // The fitted parameters come back in their shapes.
    let shaped = loss.unflatten(&x);
    assert_eq!(shaped.len(), 4);
    for ((name, v), want) in shaped.iter().zip(&values) {
        assert!(v.same(want), "{name}: {v} vs {want}");
    }
}

/// examples/logistic_regression.grad on `m` rows of two classes, from
/// w = 0, with λ = 0.01.
fn logistic_loss(m: usize) -> (Program, Vec<Value>) {
    let program = Program::parse("logistic_regression.grad", LOGREG).unwrap();
    let (x, y) = classes(m);
    let values = vec![Value::reals(&[0.0, 0.0]), x, y, Value::Real(0.01)];
    (program, values)
}

#[test]
fn every_method_converges_on_a_small_logistic_regression() {
    let jit = Jit::new().unwrap();
    let (program, values) = logistic_loss(40);
    let f = program.function("loss").unwrap();
    let mut reference = None;
    for method in [
        Method::Lbfgs,
        Method::Bfgs,
        Method::Cg,
        Method::Gd,
        Method::Adam,
    ] {
        let mut loss = Loss::new(&f, &jit, &["w".into()], &values).unwrap();
        let options = FitOptions {
            max_iters: 5000,
            adam: AdamOptions {
                learning_rate: 0.05,
                ..AdamOptions::default()
            },
        };
        let start = loss.value(&loss.start()).unwrap();
        let x0 = loss.start();
        let r = fit(&mut loss, method, x0, &options, Box::new(|_, _| {})).unwrap();
        assert!(r.loss < start, "{method:?}");
        assert!(
            r.grad_norm < 1e-6,
            "{method:?}: gradient norm {} after {} iterations ({})",
            r.grad_norm,
            r.iters,
            r.stop
        );
        assert_eq!(r.history.len() as u64, r.iters + 1, "{method:?}");
        assert_eq!(r.history[0], start);
        // The minimum is unique (the loss is strictly convex).
        let w = reference.get_or_insert(r.x.clone());
        for (a, b) in w.iter().zip(&r.x) {
            assert!((a - b).abs() < 1e-4, "{method:?}: {:?} vs {:?}", r.x, w);
        }
    }
}

#[test]
fn adam_on_minibatches_lowers_the_loss() {
    let jit = Jit::new().unwrap();
    let (program, values) = logistic_loss(200);
    let f = program.function("loss").unwrap();
    let mut loss = Loss::new(&f, &jit, &["w".into()], &values).unwrap();
    let axis = loss.row_axis().expect("X and y have m rows");
    assert_eq!(axis.size, Name::from("m"));
    assert_eq!(axis.rows, 200);
    assert_eq!(axis.params, vec![Name::from("X"), Name::from("y")]);

    // The loss over a subset of rows is the loss of that subset.
    let x = vec![0.3, -0.2];
    loss.select_rows(&axis, Some(&[3, 17, 42]));
    let batch = loss.value(&x).unwrap();
    loss.select_rows(&axis, None);
    let sub = |v: &Value| {
        Value::array(
            [3, 17, 42]
                .map(|i| v.as_array().unwrap()[i].clone())
                .to_vec(),
        )
    };
    let direct = f
        .eval(&[
            Value::reals(&x),
            sub(&values[1]),
            sub(&values[2]),
            Value::Real(0.01),
        ])
        .unwrap()
        .as_real()
        .unwrap();
    assert!((batch - direct).abs() < 1e-12);

    let options = FitOptions {
        max_iters: 300,
        adam: AdamOptions {
            learning_rate: 0.05,
            batch: Some(16),
            ..AdamOptions::default()
        },
    };
    let x0 = loss.start();
    let start = loss.value(&x0).unwrap();
    let r = fit(&mut loss, Method::Adam, x0, &options, Box::new(|_, _| {})).unwrap();
    assert_eq!(r.iters, 300);
    assert!(r.loss < 0.6 * start, "{} vs {start}", r.loss);

    let too_big = FitOptions {
        adam: AdamOptions {
            batch: Some(201),
            ..AdamOptions::default()
        },
        ..FitOptions::default()
    };
    let x0 = loss.start();
    let e = fit(&mut loss, Method::Adam, x0, &too_big, Box::new(|_, _| {})).unwrap_err();
    assert!(
        matches!(
            e,
            Error::BatchSize {
                batch: 201,
                rows: 200,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn bad_input_is_a_named_error() {
    let jit = Jit::new().unwrap();
    let program = Program::parse(
        "t.grad",
        "def sq(x: R) -> R = x * x\n\
         def pair(a: R, b: R) -> (R, R) = (a, b)\n\
         def sized(s: size, c: R) -> R = s * c * c\n\
         def loss(rate: R, obs: [R; n]) -> R = reduce (+) 0 (map (o. (o - rate) * (o - rate)) obs)",
    )
    .unwrap();
    let loss = program.function("loss").unwrap();
    let args = |t: &str| Args::parse("--params", t).unwrap();
    let data = |t: &str| Args::parse("--data", t).unwrap();
    let err = |f, p: &str, d: &str| {
        Loss::from_args(&f, &jit, &args(p), &data(d))
            .err()
            .expect("an error")
    };
    let e = err(loss, "rat=1", "obs=[1,2]");
    assert!(matches!(e, Error::UnknownParameter { .. }), "{e}");
    assert!(e
        .to_string()
        .contains("`rat` is not a parameter of `loss` (its parameters: rate, obs)"));
    let e = err(loss, "rate=1", "");
    assert!(matches!(e, Error::MissingData { .. }), "{e}");
    assert!(e.to_string().contains("`obs: [R; n]`"), "{e}");
    let e = err(loss, "rate=1", "obs=[1], rate=2");
    assert!(matches!(e, Error::FittedAndData(_)), "{e}");
    let e = err(loss, "rate=1", "obs=[1], other=2");
    assert!(matches!(e, Error::UnknownData { .. }), "{e}");
    let e = err(loss, "rate=[1]", "obs=[1]");
    assert!(matches!(e, Error::Start { located: true, .. }), "{e}");
    assert!(
        e.to_string()
            .starts_with("--params:1:6: error: `rate` has type `R`"),
        "{e}"
    );
    let e = err(loss, "rate=1", "obs=2");
    assert!(matches!(e, Error::Data { located: true, .. }), "{e}");
    let e = err(loss, "", "obs=[1]");
    assert!(matches!(e, Error::NothingToFit { .. }), "{e}");
    let pair = program.function("pair").unwrap();
    let e = err(pair, "a=1", "b=2");
    assert!(matches!(e, Error::NotScalar { .. }), "{e}");
    assert!(
        e.to_string().contains("returns `(R, R)`, not a real"),
        "{e}"
    );
    let sized = program.function("sized").unwrap();
    let e = err(sized, "s=3", "c=2");
    assert!(matches!(e, Error::SizeParameter(ref s) if s == "s"), "{e}");

    // A start where the loss is not finite.
    let sq = program.function("sq").unwrap();
    let mut l = Loss::from_args(&sq, &jit, &args("x=inf"), &data("")).unwrap();
    let x0 = l.start();
    let e = fit(
        &mut l,
        Method::Lbfgs,
        x0,
        &FitOptions::default(),
        Box::new(|_, _| {}),
    )
    .unwrap_err();
    assert!(matches!(e, Error::NotFinite { .. }), "{e}");
    // Minibatches need rows.
    let options = FitOptions {
        adam: AdamOptions {
            batch: Some(1),
            ..AdamOptions::default()
        },
        ..FitOptions::default()
    };
    let x0 = vec![1.0];
    let e = fit(&mut l, Method::Adam, x0, &options, Box::new(|_, _| {})).unwrap_err();
    assert!(matches!(e, Error::NoRows), "{e}");
    // A parameter vector of the wrong length.
    assert!(matches!(
        l.value(&[1.0, 2.0]),
        Err(Error::Dimension {
            given: 2,
            expected: 1
        })
    ));
}
