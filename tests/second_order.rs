//! Second order, forward over reverse, on generated programs: the
//! Hessian-vector product agrees with central differences of the gradient,
//! and ⟨u, Hv⟩ == ⟨v, Hu⟩; native and interpreted results (of forward
//! mode and of the Hessian-vector products) agree bit for bit.

use gradlift::lang::testing::{generate, Config};
use gradlift::{GradOptions, Jit, Program, Type, Value};

fn flat(vs: &[Value]) -> Vec<f64> {
    let mut out = Vec::new();
    vs.iter().for_each(|v| v.flatten(&mut out));
    out
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * (1.0 + a.abs().max(b.abs()))
}

#[test]
fn hessian_vector_products() {
    let jit = Jit::new().unwrap();
    let (mut checked, mut kinks) = (0, 0);
    for seed in 0..300u64 {
        let case = generate(seed, &Config::default());
        let program = Program::parse("gen.grad", &case.text()).unwrap();
        let f = program.last_function().unwrap();
        let sig = f.signature();
        if sig.ret != Type::Real || sig.params.iter().all(|(_, t)| t.is_none()) {
            continue;
        }
        let inputs: Vec<(usize, &Value)> = sig
            .params
            .iter()
            .zip(&case.args)
            .enumerate()
            .filter(|(_, ((_, t), _))| t.is_some())
            .map(|(i, (_, v))| (i, v))
            .collect();
        let mut state = seed.wrapping_mul(0x9e3779b97f4a7c15) | 1;
        let mut direction = || -> Vec<Value> {
            inputs
                .iter()
                .map(|(_, v)| {
                    let mut xs = Vec::new();
                    v.flatten(&mut xs);
                    let ds: Vec<f64> = xs
                        .iter()
                        .map(|_| {
                            state ^= state << 13;
                            state ^= state >> 7;
                            state ^= state << 17;
                            (state >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
                        })
                        .collect();
                    v.with_reals(&mut ds.into_iter())
                })
                .collect()
        };
        let (u, v) = (direction(), direction());
        let hv = f.hvp(&case.args, &v, None).unwrap();
        let hu = f.hvp(&case.args, &u, None).unwrap();
        // Native code computes the same.
        let native = f.hvp(&case.args, &v, Some(&jit)).unwrap();
        assert_eq!(flat(&native.hvp).len(), flat(&hv.hvp).len());
        for (a, b) in flat(&native.hvp).iter().zip(flat(&hv.hvp)) {
            assert!(
                a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                "seed {seed}: native {a} vs {b}"
            );
        }
        // Forward mode alone, native against interpreted.
        let (jv, jt) = f.jvp(&case.args, &v, None).unwrap();
        let (nv, nt) = f.jvp(&case.args, &v, Some(&jit)).unwrap();
        assert!(
            jv.same(&nv) && jt.same(&nt),
            "seed {seed}: jvp {jv} {jt} vs native {nv} {nt}"
        );
        let (hv_flat, hu_flat) = (flat(&hv.hvp), flat(&hu.hvp));
        if hv_flat.iter().chain(&hu_flat).any(|x| !x.is_finite()) {
            continue;
        }
        // ⟨u, Hv⟩ == ⟨v, Hu⟩.
        let (uhv, vhu) = (dot(&flat(&u), &hv_flat), dot(&flat(&v), &hu_flat));
        assert!(
            close(uhv, vhu, 1e-8),
            "seed {seed}: ⟨u,Hv⟩ = {uhv}, ⟨v,Hu⟩ = {vhu}\n{}",
            case.text()
        );
        // Central differences of the gradient along v, at two steps.
        let g = f.gradient(None, GradOptions::default()).unwrap();
        let grad_at = |t: f64| -> Vec<f64> {
            let mut args = case.args.clone();
            for ((i, x), d) in inputs.iter().zip(&v) {
                let (mut xs, mut ds) = (Vec::new(), Vec::new());
                x.flatten(&mut xs);
                d.flatten(&mut ds);
                let moved: Vec<f64> = xs.iter().zip(&ds).map(|(a, b)| a + t * b).collect();
                args[*i] = x.with_reals(&mut moved.into_iter());
            }
            flat(&g.eval(&args).unwrap().1)
        };
        let fd = |h: f64| -> Vec<f64> {
            let (p, m) = (grad_at(h), grad_at(-h));
            p.iter().zip(&m).map(|(a, b)| (a - b) / (2.0 * h)).collect()
        };
        let (fd1, fd2) = (fd(1e-5), fd(5e-6));
        if !fd1.iter().zip(&fd2).all(|(a, b)| close(*a, *b, 1e-4)) {
            kinks += 1; // the gradient is not smooth here (abs, min, max, if)
            continue;
        }
        for (a, b) in hv_flat.iter().zip(&fd1) {
            assert!(
                close(*a, *b, 1e-4),
                "seed {seed}: Hv {hv_flat:?} vs finite differences {fd1:?}\n{}",
                case.text()
            );
        }
        checked += 1;
    }
    eprintln!("{checked} programs checked, {kinks} skipped at kinks");
    assert!(checked >= 100, "{checked} checked, {kinks} at kinks");
}
