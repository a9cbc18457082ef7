//! The oracle of the `commands` fuzz target (fuzz/), shared with the test
//! suite (tests/reliability_commands.rs): a generated program through what
//! every subcommand does besides `eval` and `grad` (which
//! [`super::pipeline_oracle`] covers), as library calls.
//!
//! On every case, [`check`] panics if a step panics or disagrees:
//!
//! - `emit`: the inlined source prints and parses back to a definition that
//!   type-checks with the same signature; the Source and Target UNF print
//!   and parse back to the same text; the gradient program, unoptimized and
//!   optimized, prints to a definition that type-checks; the Cranelift IR
//!   and the assembly of the function and its gradient are produced;
//! - `grad --checkpoint K` and `binomial:C`: the checkpointed gradients,
//!   native and interpreted, equal the plain gradient to 1e-9;
//! - `jvp`: native and interpreted tangents agree bit for bit, and with
//!   finite values equal ⟨∇f, v⟩ to 1e-8;
//! - `hvp`: native and interpreted agree bit for bit, and with finite
//!   values ⟨u, Hv⟩ = ⟨v, Hu⟩ to 1e-7;
//! - `cost`: the cost model of the function and of its gradient is
//!   computed (a binomial schedule is outside it: an error, not a panic);
//! - `fit`: a loss fitting every value parameter takes one L-BFGS iteration
//!   and one Adam step, or stops with an error.
//!
//! Errors are allowed where the program fails at these arguments (both
//! engines then fail alike) or the JIT does not support a construct.

use super::pipeline_oracle::Input;
use gradlift::lang::Schedule;
use gradlift::{Error, ErrorKind, GradOptions, Jit, Program, Type, Value};

/// What the check compared.
#[derive(Clone, Copy, Debug, Default)]
pub struct Outcome {
    /// The function returns a real and was differentiated.
    pub gradients: bool,
    /// Hessian-vector products compared.
    pub hvp: bool,
    /// A fit ran.
    pub fit: bool,
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * (1.0 + a.abs().max(b.abs())) || (a.is_nan() && b.is_nan()) || a == b
}

fn flat(vs: &[Value]) -> Vec<f64> {
    let mut out = Vec::new();
    vs.iter().for_each(|v| v.flatten(&mut out));
    out
}

fn same_bits(a: &Value, b: &Value) -> bool {
    a.same(b)
}

/// A failure both engines may give alike.
fn expected(e: &Error) -> bool {
    e.is_runtime() || matches!(e.kind(), ErrorKind::Arguments | ErrorKind::Unsupported)
}

/// Runs the case through the subcommands' paths; panics on a failure.
pub fn check(input: &Input, jit: &Jit) -> Outcome {
    let (text, args) = input.program();
    check_program(&text, &args, input.picks.is_none(), input.seed, jit)
}

/// [`check`] of a program given as text, at `args` (all finite when
/// `finite`); `seed` chooses the directions of `jvp` and `hvp`.
pub fn check_program(text: &str, args: &[Value], finite: bool, seed: u64, jit: &Jit) -> Outcome {
    let mut outcome = Outcome::default();
    let (text, args) = (text.to_string(), args.to_vec());
    let program = Program::parse("gen.grad", &text)
        .unwrap_or_else(|e| panic!("a generated program does not check: {e}\n{text}"));
    let f = program.last_function().unwrap();
    let sig = f.signature().clone();
    let ok = |what: &str, r: &Result<Value, Error>| {
        if let Err(e) = r {
            assert!(expected(e), "{what}: {e}\n{text}");
        }
    };

    // emit --stage source: prints and parses back.
    let closed = f.closed().unwrap();
    let def = gradlift::lang::Def {
        name: closed.name.clone(),
        name_span: Default::default(),
        params: closed
            .params
            .iter()
            .map(|(n, t)| gradlift::lang::syntax::DefParam {
                name: n.clone(),
                span: Default::default(),
                ty: t.clone(),
            })
            .collect(),
        ret: Some(closed.ret.clone()),
        body: closed.body.clone(),
    };
    let printed = def.to_string();
    let back = gradlift::lang::check_source("source.grad", &printed)
        .unwrap_or_else(|e| panic!("the source stage does not read back: {e}\n{printed}"));
    assert_eq!(back.sigs[0].ret, sig.ret, "{printed}");
    // emit --stage unf, target-unf: print and parse back.
    if let Ok(unf) = f.source_unf() {
        let t = unf.to_string();
        let back = gradlift::ad::unf::parse_unf(&t)
            .unwrap_or_else(|e| panic!("unf does not read back: {e}\n{t}"));
        assert_eq!(back.to_string(), t);
        let tu = f.target_unf().unwrap().to_string();
        let back = gradlift::ad::reverse_unf::parse_target_unf(&tu)
            .unwrap_or_else(|e| panic!("target-unf does not read back: {e}\n{tu}"));
        assert_eq!(back.to_string(), tu);
    }
    // emit --stage clif, asm of the function.
    if let Ok(own) = f.optimized() {
        for text_of in [Jit::clif, Jit::asm] {
            if let Err(e) = text_of(jit, &own) {
                assert!(
                    matches!(e, gradlift::jit::JitError::Unsupported(_)),
                    "{e}\n{text}"
                );
            }
        }
    }

    // jvp, natively and on the interpreter.
    let values: Vec<&Value> = sig
        .params
        .iter()
        .zip(&args)
        .filter(|((_, t), _)| t.is_some())
        .map(|(_, v)| v)
        .collect();
    let mut state = seed | 1;
    let mut direction = || -> Vec<Value> {
        values
            .iter()
            .map(|v| {
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
    let v = direction();
    let native_jvp = f.jvp(&args, &v, Some(jit));
    let interp_jvp = f.jvp(&args, &v, None);
    match (&native_jvp, &interp_jvp) {
        (Ok(a), Ok(b)) => assert!(
            same_bits(&a.0, &b.0) && same_bits(&a.1, &b.1),
            "jvp: native {a:?}, interpreted {b:?}\n{text}"
        ),
        (Err(a), Err(b)) => assert!(expected(a) && expected(b), "jvp: {a}; {b}\n{text}"),
        (Err(e), Ok(_)) if e.kind() == ErrorKind::Unsupported => {}
        (a, b) => panic!("jvp: native {a:?}, interpreted {b:?}\n{text}"),
    }

    if sig.ret != Type::Real || values.is_empty() {
        return outcome;
    }
    outcome.gradients = true;
    let plain = match f.gradient(None, GradOptions::default()) {
        Ok(g) => g,
        Err(e) => panic!("no gradient: {e}\n{text}"),
    };
    let want = plain.eval(&args);
    // emit --stage target, opt: print as definitions that type-check.
    for optimize in [false, true] {
        let g = f
            .gradient(
                None,
                GradOptions {
                    optimize,
                    ..GradOptions::default()
                },
            )
            .unwrap();
        let c = g.closed();
        let def = gradlift::lang::Def {
            name: c.name.clone(),
            name_span: Default::default(),
            params: c
                .params
                .iter()
                .map(|(n, t)| gradlift::lang::syntax::DefParam {
                    name: n.clone(),
                    span: Default::default(),
                    ty: t.clone(),
                })
                .collect(),
            ret: Some(c.ret.clone()),
            body: c.body.clone(),
        };
        let printed = def.to_string();
        gradlift::lang::check_source("target.grad", &printed)
            .unwrap_or_else(|e| panic!("the gradient does not read back: {e}\n{printed}"));
        if optimize {
            if let Err(e) = jit.clif(&c) {
                assert!(matches!(e, gradlift::jit::JitError::Unsupported(_)), "{e}");
            }
        }
    }
    // jvp = ⟨∇f, v⟩.
    if let (true, Ok((_, grads)), Ok((_, tangent))) = (finite, &want, &interp_jvp) {
        let t = tangent.as_real().expect("a real tangent");
        let g = flat(grads);
        let dot: f64 = g.iter().zip(flat(&v)).map(|(a, b)| a * b).sum();
        if t.is_finite() && dot.is_finite() {
            assert!(close(t, dot, 1e-8), "jvp {t}, <grad, v> {dot}\n{text}");
        }
    }

    // grad --checkpoint: the same gradient.
    for schedule in [
        Schedule::parse("2").unwrap(),
        Schedule::parse("binomial:2").unwrap(),
    ] {
        let options = GradOptions {
            checkpoint: Some(schedule),
            ..GradOptions::default()
        };
        let g = f
            .gradient(None, options)
            .unwrap_or_else(|e| panic!("{schedule:?}: no gradient: {e}\n{text}"));
        let interpreted = g.eval(&args);
        let native = g.compile(jit).map(|c| c.call(&args));
        for got in [Some(interpreted), native.ok()].into_iter().flatten() {
            match (&got, &want) {
                (Ok((v1, g1)), Ok((v2, g2))) if finite => {
                    assert!(close(*v1, *v2, 1e-9), "{schedule:?}: {v1} vs {v2}\n{text}");
                    for (a, b) in flat(g1).iter().zip(flat(g2)) {
                        assert!(close(*a, b, 1e-9), "{schedule:?}: {a} vs {b}\n{text}");
                    }
                }
                (Ok(_), Ok(_)) => {}
                (Err(a), Err(b)) => assert!(expected(a) && expected(b), "{a}; {b}"),
                (a, b) => panic!("{schedule:?}: {a:?} against {b:?}\n{text}"),
            }
        }
    }

    // hvp, natively and on the interpreter; symmetric.
    let u = direction();
    let native_hv = f.hvp(&args, &v, Some(jit));
    let interp_hv = f.hvp(&args, &v, None);
    match (&native_hv, &interp_hv) {
        (Ok(a), Ok(b)) => {
            assert!(
                flat(&a.hvp)
                    .iter()
                    .zip(flat(&b.hvp))
                    .all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())),
                "hvp: native {:?}, interpreted {:?}\n{text}",
                a.hvp,
                b.hvp
            );
            outcome.hvp = true;
            if let (true, Ok(hu)) = (finite, f.hvp(&args, &u, None)) {
                let dot = |x: &[Value], y: &[Value]| -> f64 {
                    flat(x).iter().zip(flat(y)).map(|(a, b)| a * b).sum()
                };
                let (uhv, vhu) = (dot(&u, &b.hvp), dot(&v, &hu.hvp));
                if uhv.is_finite() && vhu.is_finite() {
                    assert!(close(uhv, vhu, 1e-7), "<u,Hv> {uhv}, <v,Hu> {vhu}\n{text}");
                }
            }
        }
        (Err(a), Err(b)) => assert!(expected(a) && expected(b), "hvp: {a}; {b}\n{text}"),
        (Err(e), Ok(_)) if e.kind() == ErrorKind::Unsupported => {}
        (a, b) => panic!("hvp: native {a:?}, interpreted {b:?}\n{text}"),
    }

    // cost: computed for the function and its gradient.
    let ctx = closed.context();
    gradlift::ad::cost::cost(&ctx, &closed.size_vars, &closed.body)
        .unwrap_or_else(|e| panic!("cost: {e}\n{text}"));
    gradlift::ad::cost::gradient_cost(&ctx, &closed.size_vars, plain.term())
        .unwrap_or_else(|e| panic!("gradient cost: {e}\n{text}"));
    let _ = gradlift::ad::cost::nao(&closed.body);

    // fit: one L-BFGS iteration, one Adam step.
    let fitted: Vec<gradlift::Name> = sig
        .params
        .iter()
        .filter(|(_, t)| t.is_some())
        .map(|(n, _)| n.clone())
        .collect();
    match gradlift_optim::Loss::new(&f, jit, &fitted, &args) {
        Ok(mut loss) => {
            outcome.fit = true;
            for method in [gradlift_optim::Method::Lbfgs, gradlift_optim::Method::Adam] {
                let options = gradlift_optim::FitOptions {
                    max_iters: 1,
                    ..Default::default()
                };
                let x0 = loss.start();
                let _ = gradlift_optim::fit(&mut loss, method, x0, &options, Box::new(|_, _| {}));
            }
        }
        Err(gradlift_optim::Error::Gradlift(e)) => assert!(expected(&e), "fit: {e}\n{text}"),
        // Arguments that do not fit (a special value as a size).
        Err(gradlift_optim::Error::Shape(_)) => {}
        Err(e) => panic!("fit: {e}\n{text}"),
    }
    ok("eval", &f.eval(&args));
    outcome
}
