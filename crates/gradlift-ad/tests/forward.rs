//! Forward mode against reverse mode: ⟨∇f(x), v⟩ == jvp(f)(x, v) on the
//! examples and on generated programs; the value is the primal's.

use gradlift_ad::forward::jvp;
use gradlift_ad::inline::{inline, Closed};
use gradlift_ad::pipeline::{gradient, Options};
use gradlift_lang::testing::{generate, Config};
use gradlift_lang::value::bind_sizes;
use gradlift_lang::{check_module, interp, CheckedModule, Name, Type, Value};

fn run(
    m: &CheckedModule,
    closed: &Closed,
    index: usize,
    args: &[Value],
    extra: &[Value],
    term: &gradlift_lang::Expr,
) -> Value {
    let sizes = bind_sizes(&closed.name, &m.sigs[index], args).unwrap();
    let mut vars: Vec<(Name, Value)> = sizes.into_iter().map(|(n, v)| (n, Value::Int(v))).collect();
    let mut values = args.iter().chain(extra);
    for (p, _) in &closed.params {
        if let Some(v) = values.next() {
            vars.push((p.clone(), v.clone()));
        }
    }
    interp::eval_expr(m, &vars, term).unwrap_or_else(|e| panic!("{e}\n{term}"))
}

#[test]
fn jvp_equals_the_gradient_times_the_direction() {
    let mut checked = 0;
    for seed in 0..400 {
        let case = generate(seed, &Config::default());
        let m = check_module(case.module.clone()).unwrap();
        let index = m.module.defs.len() - 1;
        let sig = &m.sigs[index];
        if sig.ret != Type::Real || sig.params.iter().all(|(_, t)| t.is_none()) {
            continue;
        }
        let closed = inline(&m, index);
        // A direction: one value per value parameter, reals in (-1, 1).
        let mut state = seed.wrapping_mul(2654435761) | 1;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        };
        let dirs: Vec<Value> = sig
            .params
            .iter()
            .zip(&case.args)
            .filter(|((_, t), _)| t.is_some())
            .map(|(_, a)| {
                let mut flat = Vec::new();
                a.flatten(&mut flat);
                let xs: Vec<f64> = flat.iter().map(|_| next()).collect();
                a.with_reals(&mut xs.into_iter())
            })
            .collect();
        let mut j = jvp(&closed).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        // Simplified as the pipeline simplifies: structural zero tangents
        // are dropped rather than multiplied by a partial that may be inf.
        j.body = gradlift_ad::simplify::simplify(&j.body, &Default::default()).unwrap();
        let out = run(&m, &j, index, &case.args, &dirs, &j.body);
        let Value::Tuple(parts) = out else {
            panic!("a pair")
        };
        let (value, tangent) = (parts[0].as_real().unwrap(), parts[1].as_real().unwrap());
        let primal = interp::call(&m, index, &case.args)
            .unwrap()
            .as_real()
            .unwrap();
        assert!(
            value.to_bits() == primal.to_bits() || (value.is_nan() && primal.is_nan()),
            "seed {seed}"
        );
        let g = gradient(&m, index, None, Options::default()).unwrap();
        let Value::Tuple(gparts) = run(&m, &closed, index, &case.args, &[], &g.term) else {
            panic!("a pair")
        };
        let grads: Vec<Value> = if g.wrt.len() == 1 {
            vec![gparts[1].clone()]
        } else {
            match &gparts[1] {
                Value::Tuple(gs) => gs.to_vec(),
                _ => panic!("a tuple"),
            }
        };
        let mut dot = 0.0;
        for (gv, dv) in grads.iter().zip(&dirs) {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            gv.flatten(&mut a);
            dv.flatten(&mut b);
            dot += a.iter().zip(&b).map(|(x, y)| x * y).sum::<f64>();
        }
        assert!(
            (dot - tangent).abs() <= 1e-9 * (1.0 + dot.abs()) || (dot.is_nan() && tangent.is_nan()),
            "seed {seed}: ⟨∇f, v⟩ = {dot}, jvp = {tangent}\n{}",
            case.text()
        );
        checked += 1;
    }
    assert!(checked >= 200, "{checked}");
}

/// `(gradient, Hessian·direction)` without the value is the same, bit for
/// bit, as those parts of the full forward-over-reverse program.
#[test]
fn gradient_and_hessian_vector_product_without_the_value() {
    use gradlift_ad::pipeline::{gradient_hvp_program_wrt, hvp_program_wrt};
    let part = |v: &Value, i: usize, j: usize| match v {
        Value::Tuple(xs) => match &xs[i] {
            Value::Tuple(ys) => ys[j].clone(),
            other => panic!("{other}"),
        },
        other => panic!("{other}"),
    };
    let mut checked = 0;
    for seed in 0..200 {
        let case = generate(seed, &Config::default());
        let m = check_module(case.module.clone()).unwrap();
        let index = m.module.defs.len() - 1;
        let sig = &m.sigs[index];
        if sig.ret != Type::Real || sig.params.iter().all(|(_, t)| t.is_none()) {
            continue;
        }
        let Some(wrt) = sig
            .params
            .iter()
            .find(|(_, t)| t.is_some())
            .map(|(p, _)| p.clone())
        else {
            continue;
        };
        let wrt = [wrt];
        let (Ok(full), Ok(parts)) = (
            hvp_program_wrt(&m, index, Some(&wrt), Options::default()),
            gradient_hvp_program_wrt(&m, index, Some(&wrt), Options::default()),
        ) else {
            continue;
        };
        // The direction: the arguments themselves.
        let extra: Vec<Value> = sig
            .params
            .iter()
            .zip(&case.args)
            .filter(|((_, t), _)| t.is_some())
            .map(|(_, v)| v.clone())
            .collect();
        let want = run(&m, &full, index, &case.args, &extra, &full.body);
        let got = run(&m, &parts, index, &case.args, &extra, &parts.body);
        let Value::Tuple(got) = got else {
            panic!("{got}")
        };
        assert!(
            got[0].same(&part(&want, 0, 1)),
            "seed {seed}: {} vs {want}",
            got[0]
        );
        assert!(
            got[1].same(&part(&want, 1, 1)),
            "seed {seed}: {} vs {want}",
            got[1]
        );
        checked += 1;
    }
    assert!(checked > 50, "{checked} programs checked");
}

/// The length of a range is a size: forward mode keeps it one, lifting the
/// arrays under its `len` (the `commands` fuzz target found the Hessian-
/// vector product of this shape ill-typed: `x0 * x0` on lifted pairs).
#[test]
fn a_range_whose_length_reads_an_array_stays_a_size() {
    let text = "def main(x0: R) -> R = reduce min inf (map (i. log(x0 * x0 + 0.5)) (iota(len(map (j. log(x0 * x0 + 0.5)) (iota(3))))))";
    let m = gradlift_lang::check_source("t.grad", text).unwrap();
    let h = gradlift_ad::pipeline::hvp_program(&m, 0, Default::default()).unwrap();
    let ty = gradlift_lang::types::check_expr(&h.context(), &h.size_vars, &h.body).unwrap();
    assert_eq!(ty, h.ret);
}
