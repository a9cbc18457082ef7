//! The differential oracle of the `pipeline` fuzz target (fuzz/), shared
//! with the test suite (tests/reliability_pipeline.rs).
//!
//! A case is a generated program (crates/gradlift-lang/src/testing.rs)
//! with its arguments, some reals optionally replaced by special values
//! (NaN, ±∞, ±0, huge, tiny). [`check`] panics on any disagreement:
//!
//! - the program type-checks, differentiates, and compiles with the
//!   Cranelift verifier on;
//! - the native value equals the interpreter's bit for bit (NaN equal to
//!   NaN), or both stop with an error;
//! - for a function returning `R`: the gradient programs by the UNF and the
//!   direct route, sparse and literal constructions, optimized or not, are
//!   built; each optimized one compiled natively equals its interpreted
//!   self bit for bit; with finite inputs and value, the routes agree to
//!   1e-9 and, where the function is smooth around the input, with central
//!   finite differences of the interpreted function.

use gradlift::lang::testing::{generate, Config};
use gradlift::{Construction, Error, ErrorKind, GradOptions, Jit, Program, Route, Type, Value};

/// Reals that may replace an argument's reals.
pub const SPECIAL: [f64; 8] = [
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    0.0,
    -0.0,
    1e300,
    -1e-300,
    f64::MAX,
];

/// One case: a generator seed and knobs, and which reals to replace.
#[derive(Clone, Debug)]
pub struct Input {
    /// The generator's seed.
    pub seed: u64,
    /// Nesting depth and largest size.
    pub config: Config,
    /// When present, real k of the arguments (in order) becomes
    /// `SPECIAL[picks[k]]` where `picks[k]` indexes `SPECIAL`.
    pub picks: Option<Vec<u8>>,
}

impl Input {
    /// The case a fuzzer's bytes stand for: 8 bytes of seed, one of depth
    /// (1 to 5, default 4), one of largest size (0 to 4, default 3), one
    /// whose low bit asks for special values and whose bit 3 (0x08) for
    /// function values (`Config::higher_order`), then one byte per real.
    pub fn from_bytes(data: &[u8]) -> Input {
        let mut seed = [0u8; 8];
        for (s, d) in seed.iter_mut().zip(data) {
            *s = *d;
        }
        let byte = |i: usize| data.get(i).copied().unwrap_or(0);
        Input {
            seed: u64::from_le_bytes(seed),
            // Absent knobs (a short input) take the generator's defaults.
            config: Config {
                depth: data.get(8).map_or(4, |&b| 1 + u32::from(b) % 5),
                max_size: data.get(9).map_or(3, |&b| i64::from(b) % 5),
                higher_order: byte(10) & 0x08 != 0,
            },
            picks: (byte(10) & 1 == 1).then(|| data.iter().skip(11).copied().collect()),
        }
    }
}

/// What a check compared.
#[derive(Clone, Copy, Debug, Default)]
pub struct Outcome {
    /// The function compiled natively and was compared.
    pub native: bool,
    /// Gradient programs were built and compared.
    pub gradients: bool,
    /// Reals whose derivative was compared with finite differences.
    pub finite_differences: usize,
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * (1.0 + a.abs().max(b.abs())) || (a.is_nan() && b.is_nan()) || a == b
}

fn flat(vs: &[Value]) -> Vec<f64> {
    let mut out = Vec::new();
    for v in vs {
        v.flatten(&mut out);
    }
    out
}

fn same(a: &[Value], b: &[Value]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.same(y))
}

fn unsupported(e: &Error) -> bool {
    e.kind() == ErrorKind::Unsupported
}

/// Both engines fail the same way: at run time, or on the arguments.
fn same_failure(a: &Error, b: &Error) -> bool {
    (a.is_runtime() && b.is_runtime())
        || (a.kind() == ErrorKind::Arguments && b.kind() == ErrorKind::Arguments)
}

impl Input {
    /// The program's text and its arguments, special values put in.
    pub fn program(&self) -> (String, Vec<Value>) {
        let case = generate(self.seed, &self.config);
        let args: Vec<Value> = match &self.picks {
            None => case.args.clone(),
            Some(picks) => {
                let mut picks = picks.iter();
                case.args
                    .iter()
                    .map(|a| {
                        let mut reals = Vec::new();
                        a.flatten(&mut reals);
                        for r in &mut reals {
                            match picks.next() {
                                Some(&p) if (p as usize) < SPECIAL.len() => {
                                    *r = SPECIAL[p as usize]
                                }
                                _ => {}
                            }
                        }
                        a.with_reals(&mut reals.into_iter())
                    })
                    .collect()
            }
        };
        (case.text(), args)
    }
}

/// Runs the case through every engine; panics on a disagreement.
pub fn check(input: &Input, jit: &Jit) -> Outcome {
    let (text, args) = input.program();
    check_program(&text, &args, input.picks.is_some(), jit)
}

/// Runs the last function of `text` at `args` through every engine;
/// `special` says whether special values may be among the arguments.
pub fn check_program(text: &str, args: &[Value], special: bool, jit: &Jit) -> Outcome {
    let mut outcome = Outcome::default();
    let args = args.to_vec();
    let text = text.to_string();
    let program = Program::parse("gen.grad", &text)
        .unwrap_or_else(|e| panic!("a generated program does not check: {e}\n{text}"));
    let f = program.last_function().unwrap();
    let want = f.eval(&args);

    match f.compile(jit) {
        Ok(compiled) => {
            match (compiled.call(&args), &want) {
                (Ok(got), Ok(want)) => assert!(
                    got.same(want),
                    "JIT {got}, interpreter {want}\n{text}\nargs {args:?}"
                ),
                // A run-time error, or a special value given as a size.
                (Err(a), Err(b)) if same_failure(&a, b) => {}
                (got, want) => panic!("JIT {got:?}, interpreter {want:?}\n{text}\nargs {args:?}"),
            }
            outcome.native = true;
        }
        Err(e) if unsupported(&e) => {}
        Err(e) => panic!("does not compile: {e}\n{text}"),
    }

    let sig = f.signature();
    if sig.ret != Type::Real || sig.params.iter().all(|(_, t)| t.is_none()) {
        return outcome;
    }
    outcome.gradients = true;
    let mut results = Vec::new();
    for (route, construction, optimize) in [
        (Route::Unf, Construction::Sparse, true),
        (Route::Direct, Construction::Sparse, true),
        (Route::Unf, Construction::Literal, true),
        (Route::Direct, Construction::Literal, true),
        (Route::Unf, Construction::Sparse, false),
        (Route::Direct, Construction::Sparse, false),
    ] {
        let options = GradOptions {
            route,
            construction,
            optimize,
            checkpoint: None,
        };
        let g = f
            .gradient(None, options)
            .unwrap_or_else(|e| panic!("{options:?}: no gradient: {e}\n{text}"));
        let interpreted = g.eval(&args);
        if optimize {
            match g.compile(jit) {
                Ok(compiled) => match (compiled.call(&args), &interpreted) {
                    (Ok((v1, g1)), Ok((v2, g2))) => assert!(
                        (v1.to_bits() == v2.to_bits() || (v1.is_nan() && v2.is_nan()))
                            && same(&g1, g2),
                        "{options:?}: native ({v1}, {g1:?}), interpreted ({v2}, {g2:?})\n{text}\nargs {args:?}\n{}",
                        g.term()
                    ),
                    (Err(a), Err(b)) if same_failure(&a, b) => {}
                    (got, want) => panic!(
                        "{options:?}: native {got:?}, interpreted {want:?}\n{text}\nargs {args:?}"
                    ),
                },
                Err(e) if unsupported(&e) => {}
                Err(e) => panic!("{options:?}: the gradient does not compile: {e}\n{text}"),
            }
        }
        match (&interpreted, &want) {
            (Ok((v, _)), Ok(w)) => {
                let w = w.as_real().unwrap();
                assert!(
                    close(*v, w, 1e-9) || special,
                    "{options:?}: value {v}, primal {w}\n{text}\nargs {args:?}"
                );
            }
            (Err(_), Err(_)) => {}
            (got, want) => panic!(
                "{options:?}: gradient program {got:?}, primal {want:?}\n{text}\nargs {args:?}"
            ),
        }
        if let Ok((_, grads)) = interpreted {
            results.push((options, flat(&grads)));
        }
    }

    let Ok(primal) = want.map(|v| v.as_real().unwrap()) else {
        return outcome;
    };
    if special || !primal.is_finite() || flat(&args).iter().any(|x| !x.is_finite()) {
        return outcome;
    }
    let (first, reference) = &results[0];
    for (options, grads) in &results[1..] {
        for (a, b) in grads.iter().zip(reference) {
            assert!(
                close(*a, *b, 1e-9),
                "{options:?}: {grads:?}, {first:?}: {reference:?}\n{text}\nargs {args:?}"
            );
        }
    }
    if primal.abs() > 1e3 || reference.iter().any(|g| !g.is_finite()) {
        return outcome;
    }
    // Central differences of the interpreted function, with two steps.
    let at = |a: &[Value]| f.eval(a).ok().and_then(|v| v.as_real());
    let mut k_all = 0;
    for (i, (_, ty)) in sig.params.iter().enumerate() {
        if ty.is_none() {
            continue;
        }
        let mut xs = Vec::new();
        args[i].flatten(&mut xs);
        let Some(f0) = at(&args) else {
            return outcome;
        };
        for k in 0..xs.len() {
            let mut estimates = [0.0; 2];
            // One-sided differences at the larger step: they differ at a
            // kink exactly at the point (a tie of `max(x, c)` at `x = c`),
            // where the central ones agree on the mean of the two sides,
            // which is no derivative.
            let mut sides = [0.0; 2];
            for (e, scale) in estimates.iter_mut().zip([1e-6, 5e-7]) {
                let h = scale * xs[k].abs().max(1.0);
                let (mut p, mut q) = (xs.clone(), xs.clone());
                p[k] += h;
                q[k] -= h;
                let (mut ap, mut aq) = (args.clone(), args.clone());
                ap[i] = args[i].with_reals(&mut p.into_iter());
                aq[i] = args[i].with_reals(&mut q.into_iter());
                let (Some(fp), Some(fq)) = (at(&ap), at(&aq)) else {
                    return outcome;
                };
                *e = (fp - fq) / (2.0 * h);
                if scale == 1e-6 {
                    sides = [(fp - f0) / h, (f0 - fq) / h];
                }
            }
            let [fd, fd2] = estimates;
            let noise = (fd - fd2).abs();
            let at_kink = (sides[0] - sides[1]).abs() > 1e-3 * (1.0 + fd.abs());
            // A kink (abs, min, max, sign, a comparison) within the step.
            if noise <= 1e-4 * (1.0 + fd.abs()) && !at_kink {
                let got = reference[k_all];
                assert!(
                    (got - fd).abs() <= 1e-5 * (1.0 + fd.abs()) + 10.0 * noise,
                    "gradient {got} vs finite differences {fd} (and {fd2}) at real {k_all}\n{text}\nargs {args:?}"
                );
                outcome.finite_differences += 1;
            }
            k_all += 1;
        }
    }
    outcome
}
