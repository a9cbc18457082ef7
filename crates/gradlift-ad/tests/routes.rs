//! Both routes — UNF (Figures 8–10) and direct (Figure 5) — with both
//! constructions of the continuations, against central finite differences
//! on the reference interpreter, construct by construct.

use gradlift_ad::direct::{Construction, Route};
use gradlift_ad::inline::inline;
use gradlift_lang::value::bind_sizes;
use gradlift_lang::{check_source, interp, CheckedModule, Name, Value};

fn module(src: &str) -> CheckedModule {
    check_source("test.grad", src).unwrap_or_else(|e| panic!("{e}\n{src}"))
}

/// Value and gradient (flattened per parameter) by the given construction.
fn gradient(
    m: &CheckedModule,
    args: &[Value],
    route: Route,
    construction: Construction,
) -> (f64, Vec<Value>) {
    let index = m.module.defs.len() - 1;
    let closed = inline(m, index);
    let wrt: Vec<Name> = closed.context().into_iter().map(|(n, _)| n).collect();
    let term = match route {
        Route::Direct => gradlift_ad::direct::reverse(&closed, &wrt, construction),
        Route::Unf => gradlift_ad::unf_inverse::reverse(&closed, &wrt, construction),
    }
    .unwrap_or_else(|e| panic!("{e}"));
    let sig = &m.sigs[index];
    let sizes = bind_sizes(&closed.name, sig, args).expect("arguments fit");
    let mut vars: Vec<(Name, Value)> = sizes.into_iter().map(|(n, v)| (n, Value::Int(v))).collect();
    for ((p, t), a) in sig.params.iter().zip(args) {
        if t.is_some() {
            vars.push((p.clone(), a.clone()));
        }
    }
    let out = interp::eval_expr(m, &vars, &term).unwrap_or_else(|e| panic!("{e}\n{term}"));
    let Value::Tuple(parts) = out else {
        panic!("(value, gradient) expected, got {out}")
    };
    let value = parts[0].as_real().expect("a real value");
    let grads = if wrt.len() == 1 {
        vec![parts[1].clone()]
    } else {
        match &parts[1] {
            Value::Tuple(gs) => gs.to_vec(),
            other => panic!("a gradient tuple expected, got {other}"),
        }
    };
    (value, grads)
}

/// Every real of `v` perturbed in turn: central differences of `f`.
fn finite_differences(m: &CheckedModule, args: &[Value]) -> Vec<Vec<f64>> {
    let index = m.module.defs.len() - 1;
    let f = |a: &[Value]| interp::call(m, index, a).unwrap().as_real().unwrap();
    let mut out = Vec::new();
    for (i, (_, ty)) in m.sigs[index].params.iter().enumerate() {
        if ty.is_none() {
            continue;
        }
        let mut flat = Vec::new();
        args[i].flatten(&mut flat);
        let mut grads = Vec::new();
        for k in 0..flat.len() {
            let h = 1e-6 * flat[k].abs().max(1.0);
            let mut plus = flat.clone();
            plus[k] += h;
            let mut minus = flat.clone();
            minus[k] -= h;
            let mut a_plus = args.to_vec();
            a_plus[i] = args[i].with_reals(&mut plus.into_iter());
            let mut a_minus = args.to_vec();
            a_minus[i] = args[i].with_reals(&mut minus.into_iter());
            grads.push((f(&a_plus) - f(&a_minus)) / (2.0 * h));
        }
        out.push(grads);
    }
    out
}

/// Every route with every construction of the continuations.
const ROUTES: [(Route, Construction); 4] = [
    (Route::Unf, Construction::Sparse),
    (Route::Unf, Construction::Literal),
    (Route::Direct, Construction::Sparse),
    (Route::Direct, Construction::Literal),
];

fn check(src: &str, args: &[Value]) {
    let m = module(src);
    let want = finite_differences(&m, args);
    for (route, construction) in ROUTES {
        let (value, grads) = gradient(&m, args, route, construction);
        let primal = interp::call(&m, m.module.defs.len() - 1, args)
            .unwrap()
            .as_real()
            .unwrap();
        assert_eq!(
            value.to_bits(),
            primal.to_bits(),
            "{route:?}/{construction:?} value of\n{src}"
        );
        for (g, w) in grads.iter().zip(&want) {
            let mut got = Vec::new();
            g.flatten(&mut got);
            assert_eq!(
                got.len(),
                w.len(),
                "{route:?}/{construction:?} gradient shape of\n{src}: {g}"
            );
            for (a, b) in got.iter().zip(w) {
                assert!(
                    (a - b).abs() <= 1e-6 * (1.0 + b.abs()),
                    "{route:?}/{construction:?} gradient of\n{src}\nat {args:?}: got {got:?}, finite differences {w:?}"
                );
            }
        }
    }
}

fn r(x: f64) -> Value {
    Value::Real(x)
}
fn v(xs: &[f64]) -> Value {
    Value::reals(xs)
}

#[test]
fn example_1_1() {
    check(
        "def f(x1: R, x2: R, x3: R) -> R = let w1 = x1 * x2 in let w2 = w1 * x1 in w2",
        &[r(1.5), r(-0.7), r(2.0)],
    );
}

#[test]
fn scalar_primitives() {
    check(
        "def f(x: R, y: R) -> R = sin(x) * cos(y) + exp(x / y) - log(x * x + 1) + sqrt(y * y) + tanh(x) + tan(y) / 3",
        &[r(0.3), r(-1.2)],
    );
    check(
        "def f(x: R, y: R) -> R = pow(x, y) + abs(x - y) + min(x, y) * max(x, 2 * y) + sign(x) * x",
        &[r(1.3), r(0.4)],
    );
    check("def f(x: R) -> R = -x * (x - 3)", &[r(0.9)]);
}

#[test]
fn tuples_and_lets() {
    check(
        "def f(x: R, p: (R, R)) -> R = let (a, b) = p in let q = (a * x, (b, x)) in q.0 * q.1.0 + snd q.1",
        &[r(0.5), Value::tuple(vec![r(1.5), r(-2.0)])],
    );
}

#[test]
fn reductions() {
    for n in [0, 1, 2, 5] {
        let a: Vec<f64> = (0..n).map(|i| 0.3 + 0.4 * i as f64).collect();
        let b: Vec<f64> = (0..n).map(|i| 1.1 - 0.25 * i as f64).collect();
        check("def prod(A: [R; n]) -> R = reduce (*) 1 A", &[v(&a)]);
        check("def sum(A: [R; n]) -> R = reduce (+) 0 A", &[v(&a)]);
        check(
            "def dot(A: [R; n], B: [R; n]) -> R = reduce (+) 0 (map2 (*) A B)",
            &[v(&a), v(&b)],
        );
        check(
            "def f(A: [R; n]) -> R = reduce (x, y. x + y + x * y) 0 A",
            &[v(&a)],
        );
        check(
            "def f(w: R, A: [R; n]) -> R = reduce (x, y. x + y * w) 0 A",
            &[r(0.7), v(&a)],
        );
        check(
            "def f(A: [R; n]) -> R = reduce max (-inf) A + reduce min inf A",
            &[v(&b)],
        );
        check(
            "def f(w: R, A: [R; n]) -> R = foldl (acc, y. acc * sin(y) + w * y) (w * w) A",
            &[r(0.8), v(&a)],
        );
    }
    check(
        "def prod(A: [R; n]) -> R = reduce (*) 1 A",
        &[v(&[2.0, 0.0, 3.0, 0.0])],
    );
    check(
        "def prod(A: [R; n]) -> R = reduce (*) 1 A",
        &[v(&[2.0, 0.0, 3.0])],
    );
}

#[test]
fn maps_with_free_variables_and_nesting() {
    let a = v(&[0.5, 1.2, -0.7]);
    let b = v(&[1.1, -0.3, 0.9]);
    check("def f(w: R, A: [R; n], B: [R; n]) -> R = reduce (+) 0 (map2 (a, b. a * b * w + sin(a)) A B)", &[r(0.4), a.clone(), b.clone()]);
    check(
        "def f(A: [R; n]) -> R = reduce (+) 0 (map (x. exp(x) * x) A)",
        std::slice::from_ref(&a),
    );
    check(
        "def f(A: [R; n], B: [R; n], U: [R; m], W: [R; m]) -> R =
           reduce (+) 0 (map2 (a, b. a * reduce (+) 0 (map2 (c, d. c * d * b) U W)) A B)",
        &[a.clone(), b.clone(), v(&[0.2, 0.9]), v(&[1.3, -0.4])],
    );
    check(
        "def dot(a: [R; n], b: [R; n]) -> R = reduce (+) 0 (map2 (*) a b)
         def f(w: [R; d], X: [[R; d]; m]) -> R = reduce (+) 0 (map (x. log(1 + exp(dot(w, x)))) X)",
        &[
            v(&[0.3, -0.2]),
            Value::array(vec![v(&[1.0, 2.0]), v(&[-1.0, 0.5]), v(&[0.3, 0.3])]),
        ],
    );
}

#[test]
fn inactive_values_get_no_cotangent_and_active_ones_keep_theirs() {
    // A step size computed from a size and an abscissa computed from
    // `iota` are inactive; the loop's parameters still get their gradients.
    check(
        "def f(x: [R; n], s: size) -> R =
           let h = 2 / s in
           reduce (+) 0 (foldl (y, i. map2 (a, b. a * h * (i + 1) + sin(b)) x y) x iota(s))",
        &[v(&[0.4, 0.9]), r(3.0)],
    );
    // Two lambdas with tuple parameters (one name for both in UNF), the
    // first over an inactive array, the second over an active one.
    check(
        "def f(x: [R; m]) -> R =
           foldl (acc, el. 0.5 * acc + sin(min(reduce min inf (map ((a, b). acc) [el, el]), el.0)))
                 (reduce (p, q. p + q + p * q) 0 (map ((a, b). a * a + sin(b)) (map (t. (t, t)) x)))
                 (map (t. (1.3, -0.6)) [1, 2, 3])",
        &[v(&[0.5, 0.25, 0.1, 0.2])],
    );
}

#[test]
fn folds_with_tuple_and_array_state() {
    let a = v(&[0.5, 1.2, -0.7, 0.1]);
    check(
        "def f(w: R, A: [R; n]) -> R = let (p, s) = foldl ((p, s), y. (p * cos(y) + w, s + p * y)) (1, 0) A in p + s",
        &[r(0.3), a.clone()],
    );
    check(
        "def f(x: [R; n], s: size) -> R = reduce (+) 0 (foldl (y, _. map2 (a, b. a + 0.1 * sin(b)) y x) x iota(s))",
        &[v(&[0.4, 0.9]), r(3.0)],
    );
}

#[test]
fn scans_and_shifts() {
    for n in [0, 1, 3] {
        let a: Vec<f64> = (0..n).map(|i| 0.3 + 0.4 * i as f64).collect();
        check("def f(w: R, A: [R; n]) -> R = reduce (+) 0 (map (x. x * x) (scanl (s, y. s * y + w) w A))", &[r(0.6), v(&a)]);
        check("def f(w: R, A: [R; n]) -> R = reduce (+) 0 (map (x. x * x) (scanr (s, y. 2 * s + y * w) w A))", &[r(0.6), v(&a)]);
        check("def f(A: [R; n]) -> R = reduce (+) 0 (map2 (a, b. a * b) (shift1L (concat(A, [1]))) (shift1R (concat([2], A))))", &[v(&a)]);
        check("def f(A: [R; n]) -> R = reduce (+) 0 (map (x. x * x) (shift1L A)) + reduce (+) 0 (shift1R A)", &[v(&a)]);
    }
}

#[test]
fn arrays_literals_indexing_replicate() {
    let a = v(&[0.5, 1.2, -0.7]);
    check("def f(A: [R; n], x: R) -> R = A[0] * A[-1] + reduce (+) 0 (map (y. y * x) (replicate(n, x))) + [x, 2 * x][1]", &[a.clone(), r(1.7)]);
    check(
        "def f(M: [[R; d]; m]) -> R = M[1][0] * reduce (+) 0 (map (row. reduce (+) 0 row) M)",
        &[Value::array(vec![v(&[1.0, 2.0]), v(&[3.0, 4.0])])],
    );
    check("def f(A: [R; n]) -> R = let B = concat(A, A) in reduce (+) 0 (map2 (*) (take(n, B)) (drop(n, B)))", std::slice::from_ref(&a));
    check(
        "def f(A: [R; n]) -> R = len(A) * reduce (+) 0 (map (i. i * A[0]) iota(n))",
        &[a],
    );
}

#[test]
fn conditionals() {
    for x in [-0.7, 0.7] {
        check(
            "def f(x: R, y: R) -> R = if x > 0 then x * y else sin(x)",
            &[r(x), r(1.3)],
        );
        check("def f(x: R, A: [R; n]) -> R = reduce (+) 0 (map (a. if a < x and not (a == 0) then a * x else a + x) A)", &[r(x), v(&[0.1, -0.9, 1.4])]);
    }
}

#[test]
fn logistic_growth_example() {
    let src = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/logistic_growth.grad"
    ))
    .unwrap();
    let m = module(&src);
    let sig = &m.sigs[m.module.defs.len() - 1];
    let names: Vec<String> = sig.params.iter().map(|(n, _)| n.to_string()).collect();
    let obs = v(&[
        4.644121, 10.053153, 19.111462, 30.172821, 39.461555, 45.106019, 47.889332, 49.120644,
        49.639065, 49.852771,
    ]);
    let args: Vec<Value> = names
        .iter()
        .map(|n| match n.as_str() {
            "obs" => obs.clone(),
            "rate" => r(0.7),
            "cap" => r(40.0),
            other => panic!("unexpected parameter {other}"),
        })
        .collect();
    let (_, grads) = gradient(&m, &args, Route::Unf, Construction::Sparse);
    let want = finite_differences(&m, &args);
    for (g, w) in grads.iter().zip(&want) {
        let mut got = Vec::new();
        g.flatten(&mut got);
        for (a, b) in got.iter().zip(w) {
            assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "{got:?} vs {w:?}");
        }
    }
}

/// The verifier the pipeline runs after every pass finds what breaks an
/// invariant: a type other than the program's, a binder shadowing a name in
/// scope.
#[test]
fn the_verifier_finds_broken_terms() {
    use gradlift_ad::pipeline::verify_term;
    use gradlift_lang::{parse_expr, Name, Type};
    let ctx = [(Name::from("x"), Type::Real)];
    let ok = parse_expr("let y = x * 2.0 in map (a. a + y) [y, x]").unwrap();
    let ty = Type::array(Type::Real, gradlift_lang::Size::lit(2));
    assert!(verify_term(&ctx, &[], &ok, &ty, true).is_ok());
    assert!(verify_term(&ctx, &[], &ok, &Type::Real, true)
        .unwrap_err()
        .contains("expected `R`"));
    let shadow = parse_expr("let y = x in let x = y in x").unwrap();
    let e = verify_term(&ctx, &[], &shadow, &Type::Real, true).unwrap_err();
    assert!(
        e.contains("`x` is bound where it is already in scope"),
        "{e}"
    );
    // The same name in disjoint scopes is not shadowing.
    let disjoint = parse_expr("(map (a. a) [x])[0] + (map (a. a * 2.0) [x])[0]").unwrap();
    assert!(verify_term(&ctx, &[], &disjoint, &Type::Real, true).is_ok());
}
