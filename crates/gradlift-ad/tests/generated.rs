//! Differential tests on random well-typed programs: the gradient by the
//! UNF and direct routes (both constructions) against central finite differences of
//! the interpreted primal.
//!
//! Tolerance: |got − fd| ≤ 1e-5·(1 + |fd|) with h = 1e-6·max(1, |x|). The
//! generator keeps primitives in their smooth domain, but `abs`, `min`,
//! `max`, `sign` and `if` make programs piecewise smooth: an input within h
//! of a kink (a tie, a comparison that flips) gives a finite difference that
//! is no derivative. Such inputs are detected by comparing a second finite
//! difference with half the step, and skipped.

use gradlift_ad::direct::{Construction, Route};
use gradlift_ad::inline::inline;
use gradlift_lang::testing::{generate, Config};
use gradlift_lang::value::bind_sizes;
use gradlift_lang::{check_module, interp, CheckedModule, Name, Type, Value};

/// Central differences with step `h` for every real of every value argument.
fn fd(m: &CheckedModule, index: usize, args: &[Value], scale: f64) -> Vec<Vec<f64>> {
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
            let h = scale * flat[k].abs().max(1.0);
            let (mut p, mut q) = (flat.clone(), flat.clone());
            p[k] += h;
            q[k] -= h;
            let (mut ap, mut aq) = (args.to_vec(), args.to_vec());
            ap[i] = args[i].with_reals(&mut p.into_iter());
            aq[i] = args[i].with_reals(&mut q.into_iter());
            grads.push((f(&ap) - f(&aq)) / (2.0 * h));
        }
        out.push(grads);
    }
    out
}

fn gradient(
    m: &CheckedModule,
    index: usize,
    args: &[Value],
    route: Route,
    construction: Construction,
) -> Vec<Vec<f64>> {
    let closed = inline(m, index);
    let wrt: Vec<Name> = closed.context().into_iter().map(|(n, _)| n).collect();
    let term = match route {
        Route::Direct => gradlift_ad::direct::reverse(&closed, &wrt, construction),
        Route::Unf => gradlift_ad::unf_inverse::reverse(&closed, &wrt, construction),
    }
    .unwrap_or_else(|e| panic!("{e}"));
    let sig = &m.sigs[index];
    let sizes = bind_sizes(&closed.name, sig, args).unwrap();
    let mut vars: Vec<(Name, Value)> = sizes.into_iter().map(|(n, v)| (n, Value::Int(v))).collect();
    for ((p, _), a) in sig.params.iter().zip(args) {
        vars.push((p.clone(), a.clone()));
    }
    let out = interp::eval_expr(m, &vars, &term).unwrap_or_else(|e| panic!("{e}\n{term}"));
    let Value::Tuple(parts) = out else {
        panic!("a pair")
    };
    let grads: Vec<Value> = if wrt.len() == 1 {
        vec![parts[1].clone()]
    } else {
        match &parts[1] {
            Value::Tuple(gs) => gs.to_vec(),
            other => panic!("a tuple, got {other}"),
        }
    };
    grads
        .iter()
        .map(|g| {
            let mut flat = Vec::new();
            g.flatten(&mut flat);
            flat
        })
        .collect()
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * (1.0 + b.abs()) || (a.is_nan() && b.is_nan())
}

#[test]
fn both_routes_match_finite_differences_on_generated_programs() {
    let config = Config::default();
    let (mut tested, mut skipped_kinks, mut nonzero) = (0, 0, 0);
    for seed in 0..1000u64 {
        let case = generate(seed, &config);
        let checked = check_module(case.module.clone()).unwrap();
        let index = checked.module.defs.len() - 1;
        if checked.sigs[index].ret != Type::Real
            || checked.sigs[index].params.iter().all(|(_, t)| t.is_none())
        {
            continue;
        }
        let primal = interp::call(&checked, index, &case.args)
            .unwrap()
            .as_real()
            .unwrap();
        if !primal.is_finite() || primal.abs() > 1e6 {
            continue;
        }
        let want = fd(&checked, index, &case.args, 1e-6);
        let again = fd(&checked, index, &case.args, 5e-7);
        let smooth = want
            .iter()
            .flatten()
            .zip(again.iter().flatten())
            .all(|(a, b)| close(*a, *b, 1e-4));
        if !smooth {
            skipped_kinks += 1;
            continue;
        }
        for (route, construction) in [
            (Route::Unf, Construction::Sparse),
            (Route::Unf, Construction::Literal),
            (Route::Direct, Construction::Sparse),
            (Route::Direct, Construction::Literal),
        ] {
            let got = gradient(&checked, index, &case.args, route, construction);
            for (g, w) in got.iter().zip(&want) {
                assert_eq!(g.len(), w.len(), "seed {seed}");
                for (a, b) in g.iter().zip(w) {
                    assert!(
                        close(*a, *b, 1e-5),
                        "seed {seed} ({route:?}/{construction:?}): gradient {g:?} vs finite differences {w:?}\n{}",
                        case.text()
                    );
                }
            }
        }
        tested += 1;
        if want.iter().flatten().any(|g| *g != 0.0) {
            nonzero += 1;
        }
    }
    eprintln!("{tested} programs tested ({nonzero} with a nonzero gradient), {skipped_kinks} skipped at kinks");
    assert!(
        tested >= 400 && nonzero >= tested / 3,
        "only {tested} programs tested ({skipped_kinks} skipped at kinks)"
    );
}

/// Proposition 6.14: the UNF route and the direct route compute the same
/// gradient (to rounding: the two forward passes order no operation
/// differently, so in practice bit for bit).
#[test]
fn unf_route_equals_direct_route() {
    let config = Config::default();
    let mut compared = 0;
    for seed in 0..1000u64 {
        let case = generate(seed, &config);
        let checked = check_module(case.module.clone()).unwrap();
        let index = checked.module.defs.len() - 1;
        if checked.sigs[index].ret != Type::Real
            || checked.sigs[index].params.iter().all(|(_, t)| t.is_none())
        {
            continue;
        }
        let unf = gradient(
            &checked,
            index,
            &case.args,
            Route::Unf,
            Construction::Sparse,
        );
        let direct = gradient(
            &checked,
            index,
            &case.args,
            Route::Direct,
            Construction::Sparse,
        );
        for (u, d) in unf.iter().flatten().zip(direct.iter().flatten()) {
            assert!(
                close(*u, *d, 1e-12),
                "seed {seed}: UNF {unf:?} vs direct {direct:?}\n{}",
                case.text()
            );
        }
        compared += 1;
    }
    assert!(compared >= 400);
}
