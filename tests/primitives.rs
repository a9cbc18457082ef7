//! Every real primitive of the table, end to end, from its row alone:
//!
//! - its values are within one unit in the last place of the correctly
//!   rounded ones (computed with mpmath at 60 digits and rounded to the
//!   nearest double);
//! - for every primitive `p` and points in its domain column, `p` compiles,
//!   and native code gives the interpreter's bits for the value, the
//!   gradient by both routes, the forward-mode tangent and the
//!   Hessian-vector product;
//! - the gradient agrees with central differences of the value, the tangent
//!   with the gradient, and the Hessian-vector product with central
//!   differences of the gradient.
//!
//! A primitive added to the table is covered here without a new line; its
//! reference values are a few rows of [`REFERENCE`].

// The reference values are the correctly rounded numbers, some of which
// are also constants of `std` (ln 2).
#![allow(clippy::approx_constant)]

use gradlift::lang::prim::{Domain, Fixity, PrimKind};
use gradlift::lang::Prim;
use gradlift::{GradOptions, Jit, Program, Route, Value};

/// (primitive, arguments, correctly rounded value).
const REFERENCE: &[(&str, &[f64], f64)] = &[
    ("sin", &[0.5], 0.479425538604203),
    ("sin", &[2.0], 0.9092974268256817),
    ("sin", &[-3.1], -0.04158066243329049),
    ("cos", &[0.5], 0.8775825618903728),
    ("cos", &[2.0], -0.4161468365471424),
    ("cos", &[-3.1], -0.9991351502732795),
    ("tan", &[0.5], 0.5463024898437905),
    ("tan", &[1.2], 2.5721516221263188),
    ("tan", &[-0.7], -0.8422883804630794),
    ("exp", &[0.5], 1.6487212707001282),
    ("exp", &[-2.25], 0.10539922456186433),
    ("exp", &[10.0], 22026.465794806718),
    ("log", &[0.5], -0.6931471805599453),
    ("log", &[2.0], 0.6931471805599453),
    ("log", &[123.0], 4.812184355372417),
    ("log1p", &[1e-10], 9.999999999500001e-11),
    ("log1p", &[0.5], 0.4054651081081644),
    ("log1p", &[37.0], 3.6375861597263857),
    ("sqrt", &[2.0], 1.4142135623730951),
    ("sqrt", &[0.3], 0.5477225575051661),
    ("sqrt", &[10000000000.0], 100000.0),
    ("tanh", &[0.5], 0.46211715726000974),
    ("tanh", &[-1.7], -0.935409070603099),
    ("tanh", &[3.0], 0.9950547536867305),
    ("expm1", &[1e-10], 1.00000000005e-10),
    ("expm1", &[0.5], 0.6487212707001282),
    ("expm1", &[-3.0], -0.950212931632136),
    ("atan", &[0.5], 0.4636476090008061),
    ("atan", &[-2.0], -1.1071487177940904),
    ("atan", &[100000.0], 1.570786326794897),
    ("atan2", &[1.0, 2.0], 0.4636476090008061),
    ("atan2", &[-0.5, -1.5], -2.819842099193151),
    ("atan2", &[3.0, -0.25], 1.6539375586833378),
    ("erf", &[0.5], 0.5204998778130465),
    ("erf", &[-1.2], -0.9103139782296353),
    ("erf", &[3.0], 0.9999779095030014),
    ("erf", &[1e-08], 1.1283791670955126e-08),
    ("lgamma", &[0.5], 0.5723649429247001),
    ("lgamma", &[3.7], 1.428072326665388),
    ("lgamma", &[100.0], 359.1342053695754),
    ("lgamma", &[0.001], 6.907178885383853),
    ("digamma", &[0.5], -1.9635100260214235),
    ("digamma", &[3.7], 1.1671535393615113),
    ("digamma", &[100.0], 4.600161852738087),
    ("polygamma", &[1.0, 0.5], 4.934802200544679),
    ("polygamma", &[2.0, 3.7], -0.09539530872855403),
    ("polygamma", &[3.0, 1.5], 1.4090910340024372),
    ("polygamma", &[1.0, 40.0], 0.02531510384129103),
    ("sigmoid", &[0.5], 0.6224593312018546),
    ("sigmoid", &[-3.0], 0.04742587317756678),
    ("sigmoid", &[20.0], 0.9999999979388464),
    ("sigmoid", &[-40.0], 4.248354255291589e-18),
    ("softplus", &[0.5], 0.9740769841801067),
    ("softplus", &[-3.0], 0.04858735157374206),
    ("softplus", &[20.0], 20.000000002061153),
    ("softplus", &[-40.0], 4.248354255291589e-18),
    ("softplus", &[1e-08], 0.6931471855599454),
    ("pow", &[2.0, 0.5], 1.4142135623730951),
    ("pow", &[1.7, -2.3], 0.29509882538342097),
    ("pow", &[0.3, 3.1], 0.023937340065260753),
];

/// The distance in units in the last place.
fn ulps(a: f64, b: f64) -> u64 {
    let key = |x: f64| {
        let bits = x.to_bits() as i64;
        if bits < 0 {
            i64::MIN - bits
        } else {
            bits
        }
    };
    key(a).abs_diff(key(b))
}

#[test]
fn values_are_within_an_ulp_of_the_correctly_rounded_ones() {
    for (name, args, want) in REFERENCE {
        let p = Prim::from_call_name(name).unwrap_or_else(|| panic!("no primitive `{name}`"));
        let got = p.eval_real(args);
        assert!(
            ulps(got, *want) <= 1,
            "{name}{args:?} = {got:e}, correctly rounded {want:e} ({} ulps)",
            ulps(got, *want)
        );
    }
    // Every primitive called by name that is not piecewise constant or
    // exact has reference values.
    for p in Prim::ALL {
        let info = p.info();
        let exact = matches!(
            p,
            Prim::Abs | Prim::Sign | Prim::Min | Prim::Max | Prim::Floor | Prim::Ceil | Prim::Round
        );
        if info.fixity == Fixity::Call && info.kind() == PrimKind::Real && !exact {
            assert!(
                REFERENCE.iter().any(|(n, _, _)| *n == info.name),
                "`{}` has no reference values",
                info.name
            );
        }
    }
}

/// Points in `domain`, away from kinks at integers and half-integers.
fn points(domain: Domain) -> [f64; 3] {
    match domain {
        Domain::Any => [-1.3, 0.4, 2.1],
        Domain::Positive => [0.3, 1.7, 4.2],
        Domain::Bounded => [-0.6, 0.2, 0.9],
        Domain::Order => [1.0, 0.0, 2.0],
    }
}

fn central(f: &dyn Fn(f64) -> f64, x: f64) -> f64 {
    let h = 1e-6 * (1.0 + x.abs());
    (f(x + h) - f(x - h)) / (2.0 * h)
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * (1.0 + a.abs().max(b.abs()))
}

#[test]
fn every_primitive_compiles_differentiates_and_agrees_with_differences() {
    let jit = Jit::new().unwrap();
    let mut checked = 0;
    for p in Prim::ALL {
        let info = p.info();
        if info.kind() != PrimKind::Real || info.fixity != Fixity::Call {
            continue;
        }
        let domain = p.domain();
        let params = ["a", "b"][..info.arity].to_vec();
        let text = format!(
            "def f({}) -> R = {}({})",
            params
                .iter()
                .map(|n| format!("{n}: R"))
                .collect::<Vec<_>>()
                .join(", "),
            info.name,
            params.join(", ")
        );
        let program = Program::parse("p.grad", &text).unwrap();
        let f = program.last_function().unwrap();
        let compiled = f.compile(&jit).unwrap();
        let grads: Vec<_> = [Route::Unf, Route::Direct]
            .into_iter()
            .map(|route| {
                let g = f
                    .gradient(
                        None,
                        GradOptions {
                            route,
                            ..GradOptions::default()
                        },
                    )
                    .unwrap();
                let native = g.compile(&jit).unwrap();
                (g, native)
            })
            .collect();
        for k in 0..3 {
            let xs: Vec<f64> = domain
                .iter()
                .enumerate()
                .map(|(i, d)| points(*d)[(k + i) % 3])
                .collect();
            let args: Vec<Value> = xs.iter().map(|x| Value::Real(*x)).collect();
            let value = f.eval(&args).unwrap();
            assert!(
                compiled.call(&args).unwrap().same(&value),
                "{text} at {xs:?}"
            );
            for (i, x) in xs.iter().enumerate() {
                if domain[i] == Domain::Order {
                    // An order is not differentiated.
                    continue;
                }
                let at = |y: f64| {
                    let mut a = args.clone();
                    a[i] = Value::Real(y);
                    f.eval(&a).unwrap().as_real().unwrap()
                };
                let want = central(&at, *x);
                for (g, native) in &grads {
                    let (v, gs) = g.eval(&args).unwrap();
                    let (nv, ngs) = native.call(&args).unwrap();
                    assert_eq!(v.to_bits(), nv.to_bits(), "{text}");
                    let got = gs[i].as_real().unwrap();
                    assert_eq!(got.to_bits(), ngs[i].as_real().unwrap().to_bits(), "{text}");
                    assert!(
                        close(got, want, 1e-6),
                        "∂{}{text} at {xs:?}: {got}, differences {want}",
                        i + 1
                    );
                }
                // Forward mode and the Hessian-vector product along axis i.
                let dirs: Vec<Value> = (0..xs.len())
                    .map(|j| Value::Real(if j == i { 1.0 } else { 0.0 }))
                    .collect();
                let (_, tangent) = f.jvp(&args, &dirs, None).unwrap();
                let (_, native_tangent) = f.jvp(&args, &dirs, Some(&jit)).unwrap();
                assert!(tangent.same(&native_tangent), "{text}");
                assert!(close(tangent.as_real().unwrap(), want, 1e-6), "{text}");
                let h = f.hvp(&args, &dirs, None).unwrap();
                let nh = f.hvp(&args, &dirs, Some(&jit)).unwrap();
                for j in (0..xs.len()).filter(|j| domain[*j] != Domain::Order) {
                    let hj = h.hvp[j].as_real().unwrap();
                    assert_eq!(
                        hj.to_bits(),
                        nh.hvp[j].as_real().unwrap().to_bits(),
                        "{text}"
                    );
                    let slope = |y: f64| {
                        let mut a = args.clone();
                        a[i] = Value::Real(y);
                        grads[0].0.eval(&a).unwrap().1[j].as_real().unwrap()
                    };
                    let second = central(&slope, *x);
                    assert!(
                        close(hj, second, 1e-5),
                        "∂{}∂{}{text} at {xs:?}: {hj}, differences {second}",
                        j + 1,
                        i + 1
                    );
                }
            }
            checked += 1;
        }
    }
    assert!(checked >= 3 * 12, "{checked}");
}

#[test]
fn object_files_refuse_what_the_c_library_does_not_have() {
    let jit = Jit::for_target(&Jit::host_triple()).unwrap();
    let object = |text: &str| {
        let program = Program::parse("o.grad", text).unwrap();
        let f = program.last_function().unwrap();
        jit.object(&[&f.optimized().unwrap()])
    };
    assert!(object(
        "def f(x: R) -> R = erf(x) + lgamma(x) + atan2(x, 2) + sigmoid(x) + softplus(x)"
    )
    .is_ok());
    let e = object("def f(x: R) -> R = digamma(x)").unwrap_err();
    assert!(e.to_string().contains("`digamma` in an object file"), "{e}");
}

#[test]
fn native_code_gives_the_interpreters_bits_everywhere() {
    // Outside the smooth domain too: halves, whole numbers, signed zeros,
    // infinities, NaN, huge and tiny numbers.
    let special = [
        -2.5,
        -1.0,
        -0.5,
        -0.0,
        0.0,
        0.5,
        1.0,
        1.5,
        2.5,
        3.0,
        1e-310,
        1e300,
        -1e300,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
    ];
    let jit = Jit::new().unwrap();
    for p in Prim::ALL {
        let info = p.info();
        if info.kind() != PrimKind::Real || info.fixity != Fixity::Call {
            continue;
        }
        let text = match info.arity {
            1 => format!("def f(a: R, b: R) -> R = {}(a)", info.name),
            _ => format!("def f(a: R, b: R) -> R = {}(a, b)", info.name),
        };
        let program = Program::parse("p.grad", &text).unwrap();
        let f = program.last_function().unwrap();
        let compiled = f.compile(&jit).unwrap();
        for a in special {
            for b in [0.5, -2.0, 3.0, f64::NAN] {
                let args = [Value::Real(a), Value::Real(b)];
                let (native, interpreted) = (compiled.call(&args).unwrap(), f.eval(&args).unwrap());
                assert!(
                    native.same(&interpreted),
                    "{text} at {a}, {b}: {native} vs {interpreted}"
                );
            }
        }
    }
}

#[test]
fn maps_and_sums_in_pairs_give_the_interpreters_bits() {
    // Native loops over arrays of reals compute two elements at once
    // (`f64x2`); every lane must keep the scalar bits, and a sum the
    // order of `reduce_order`, for every length (odd ones end with a
    // scalar element; a sum's tail is folded apart from its lanes).
    let special = [
        -2.5,
        -0.0,
        0.0,
        0.5,
        1.0,
        3.0,
        1e-310,
        1e300,
        -1e300,
        745.5,
        -745.5,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        0.7,
        -1.3,
        2.1,
    ];
    let jit = Jit::new().unwrap().verify(true);
    let lengths = [0usize, 1, 2, 3, 4, 5, 6, 7, 8, 9, 17, 40];
    for p in Prim::ALL {
        let info = p.info();
        if info.kind() != PrimKind::Real || info.fixity != Fixity::Call {
            continue;
        }
        let call = match info.arity {
            1 => format!("{}(a)", info.name),
            _ => format!("{}(a, b)", info.name),
        };
        // The elements alone; a map fused into a sum; a map reading a
        // shifted map of an array and a real computed before the loop.
        let texts = [
            format!("def f(xs: [R; n], ys: [R; n]) -> [R; n] = map2 (a, b. {call}) xs ys"),
            format!(
                "def f(xs: [R; n], ys: [R; n]) -> R = reduce (+) 0 (map2 (a, b. {call} * a) xs ys)"
            ),
            format!(
                "def f(xs: [R; n], ys: [R; n]) -> R = reduce max (-1) (map2 (a, b. {call}) xs ys)"
            ),
            format!(
                "def f(xs: [R; n], ys: [R; n]) -> R =
                   let s = xs[0] * 2 in
                   reduce (+) 0 (map2 (a, b. let c = {call} in c * s - a) (shift1L (map (x. x + 1) xs)) (shift1R ys))"
            ),
        ];
        for text in &texts {
            let program = Program::parse("p.grad", text).unwrap_or_else(|e| panic!("{e}"));
            let f = program.last_function().unwrap();
            let compiled = f.compile(&jit).unwrap_or_else(|e| panic!("{text}: {e}"));
            for (k, &n) in lengths.iter().enumerate() {
                let xs: Vec<f64> = (0..n).map(|i| special[(i + k) % special.len()]).collect();
                let ys: Vec<f64> = (0..n)
                    .map(|i| special[(3 * i + 1) % special.len()])
                    .collect();
                let args = [Value::reals(&xs), Value::reals(&ys)];
                let interpreted = f.eval(&args);
                let native = compiled.call(&args);
                match (interpreted, native) {
                    (Ok(i), Ok(v)) => assert!(v.same(&i), "{text} at n = {n}: {v} vs {i}"),
                    (Err(_), Err(_)) => {}
                    (i, v) => panic!("{text} at n = {n}: {v:?} vs {i:?}"),
                }
            }
        }
    }
}
