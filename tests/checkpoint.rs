//! Checkpointed loops give the gradient of full recording: every schedule,
//! on the examples with loops and on generated programs, through the
//! interpreter and native code, by both routes; and the chapter's
//! relaxation loop reproduces its figures.

use gradlift::lang::testing::{generate, Config};
use gradlift::lang::Schedule;
use gradlift::{Args, GradOptions, Jit, Program, Route, Type, Value};

const SCHEDULES: [Schedule; 7] = [
    Schedule::Every(1),
    Schedule::Every(2),
    Schedule::Every(3),
    Schedule::Every(16),
    Schedule::Binomial(1),
    Schedule::Binomial(2),
    Schedule::Binomial(5),
];

/// Within `tol` relative to the larger magnitude (NaNs agree with NaNs).
fn close(a: &Value, b: &Value, tol: f64) -> bool {
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    a.flatten(&mut xs);
    b.flatten(&mut ys);
    xs.len() == ys.len()
        && xs.iter().zip(&ys).all(|(x, y)| {
            (x.is_nan() && y.is_nan())
                || x == y
                || (x - y).abs() <= tol * x.abs().max(y.abs()).max(1e-300)
        })
}

fn options(route: Route, checkpoint: Option<Schedule>) -> GradOptions {
    GradOptions {
        route,
        checkpoint,
        ..GradOptions::default()
    }
}

#[test]
fn examples_with_loops() {
    let root = env!("CARGO_MANIFEST_DIR");
    let cases: Vec<serde_json::Value> = serde_json::from_str(
        &std::fs::read_to_string(format!("{root}/tests/examples_expected.json")).unwrap(),
    )
    .unwrap();
    let jit = Jit::new().unwrap();
    let mut checked = 0;
    for case in &cases {
        let file = case["file"].as_str().unwrap();
        let text = std::fs::read_to_string(format!("{root}/{file}")).unwrap();
        if !text.contains("foldl") {
            continue;
        }
        let program = Program::parse(file, &text).unwrap();
        let f = program.function(case["fn"].as_str().unwrap()).unwrap();
        if f.signature().ret != Type::Real {
            continue;
        }
        let args = f.args(&Args::from_json(&case["at"]).unwrap()).unwrap();
        for route in [Route::Unf, Route::Direct] {
            let full = f.gradient(None, options(route, None)).unwrap();
            let (v0, g0) = full.eval(&args).unwrap();
            // Few slots on long loops recompute quadratically: the generated
            // programs below try those on short loops.
            for s in [
                Schedule::Every(1),
                Schedule::Every(16),
                Schedule::Binomial(6),
            ] {
                let g = f.gradient(None, options(route, Some(s))).unwrap();
                assert!(
                    g.term().to_string().contains("revfold"),
                    "{file}: no checkpointed loop in\n{}",
                    g.term()
                );
                let (v1, g1) = g.eval(&args).unwrap();
                let (v2, g2) = g.compile(&jit).unwrap().call(&args).unwrap();
                assert_eq!(v0.to_bits(), v1.to_bits(), "{file} {s:?}");
                assert_eq!(v1.to_bits(), v2.to_bits(), "{file} {s:?}");
                for ((a, b), c) in g0.iter().zip(&g1).zip(&g2) {
                    assert!(close(a, b, 1e-12), "{file} {s:?}: {a} vs {b}");
                    // Interpreter and native code run the same schedule.
                    assert!(b.same(c), "{file} {s:?}: interpreter {b}, native {c}");
                }
            }
            checked += 1;
        }
    }
    assert!(checked >= 6, "{checked}");
}

#[test]
fn generated_programs_with_loops() {
    let jit = Jit::new().unwrap();
    let mut checked = 0;
    for seed in 0..400u64 {
        let case = generate(seed, &Config::default());
        let text = case.text();
        if !text.contains("foldl") {
            continue;
        }
        let program = Program::parse("gen.grad", &text).unwrap();
        let f = program.last_function().unwrap();
        if f.signature().ret != Type::Real || f.signature().params.iter().all(|(_, t)| t.is_none())
        {
            continue;
        }
        let full = f.gradient(None, GradOptions::default()).unwrap();
        let (v0, g0) = full.eval(&case.args).unwrap();
        let s = SCHEDULES[seed as usize % SCHEDULES.len()];
        let g = f.gradient(None, options(Route::Unf, Some(s))).unwrap();
        let (v1, g1) = g.eval(&case.args).unwrap();
        let (v2, g2) = g
            .compile(&jit)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}\n{}", g.term()))
            .call(&case.args)
            .unwrap();
        assert!(
            close(&Value::Real(v0), &Value::Real(v1), 0.0),
            "seed {seed}"
        );
        assert!(
            close(&Value::Real(v1), &Value::Real(v2), 0.0),
            "seed {seed}"
        );
        for ((a, b), c) in g0.iter().zip(&g1).zip(&g2) {
            assert!(
                close(a, b, 1e-9),
                "seed {seed} {s:?}: {a} vs {b}\n{text}\n{}",
                g.term()
            );
            assert!(b.same(c), "seed {seed} {s:?}: interpreter {b}, native {c}");
        }
        checked += 1;
    }
    assert!(checked >= 20, "{checked}");
}

const RELAX: &str = "
def relax(x: R, y: R, steps: size) -> R =
  foldl (s, i. s + 0.001 * (y - s) * cos(s * 0.01)) x (iota(steps))

def relax_blocks(x: R, y: R, steps: size) -> R =
  @checkpoint(64) foldl (s, i. s + 0.001 * (y - s) * cos(s * 0.01)) x (iota(steps))

def relax_binomial(x: R, y: R, steps: size) -> R =
  @checkpoint(binomial 20) foldl (s, i. s + 0.001 * (y - s) * cos(s * 0.01)) x (iota(steps))
";

/// The chapter's relaxation loop: from x = 1 towards y = 3 over 100,000
/// steps, the value is 3 and dL/dy is 1.
#[test]
fn relaxation_loop() {
    let program = Program::parse("relax.grad", RELAX).unwrap();
    let jit = Jit::new().unwrap();
    let args = [Value::Real(1.0), Value::Real(3.0), Value::Real(100_000.0)];
    for name in ["relax", "relax_blocks", "relax_binomial"] {
        let f = program.function(name).unwrap();
        for s in [
            None,
            Some(Schedule::Every(1000)),
            Some(Schedule::Binomial(10)),
        ] {
            let g = f.gradient(None, options(Route::Unf, s)).unwrap();
            let (value, grads) = g.compile(&jit).unwrap().call(&args).unwrap();
            let Value::Real(dy) = grads[1] else { panic!() };
            assert!((value - 3.0).abs() < 1e-9, "{name} {s:?}: {value}");
            assert!((dy - 1.0).abs() < 1e-9, "{name} {s:?}: {dy}");
        }
    }
}

/// An annotation on the loop wins over the option for every loop.
#[test]
fn annotation_over_option() {
    let program = Program::parse("relax.grad", RELAX).unwrap();
    let f = program.function("relax_blocks").unwrap();
    let g = f
        .gradient(None, options(Route::Unf, Some(Schedule::Binomial(3))))
        .unwrap();
    let term = g.term().to_string();
    assert!(term.contains("@checkpoint(64) revfold"), "{term}");
    assert!(!term.contains("binomial"), "{term}");
}

/// Hessian-vector products of checkpointed loops (forward over the
/// checkpointed reverse) equal those of full recording.
#[test]
fn hessian_vector_products() {
    let program = Program::parse("relax.grad", RELAX).unwrap();
    let f = program.function("relax").unwrap();
    let args = [Value::Real(1.0), Value::Real(3.0), Value::Real(300.0)];
    let dirs = [Value::Real(0.5), Value::Real(-1.0)];
    let jit = Jit::new().unwrap();
    let full = f.hvp(&args, &dirs, Some(&jit)).unwrap();
    for s in [Schedule::Every(7), Schedule::Binomial(3)] {
        for engine in [None, Some(&jit)] {
            let h = f
                .hvp_with(&args, &dirs, engine, options(Route::Unf, Some(s)))
                .unwrap();
            for (a, b) in full.hvp.iter().zip(&h.hvp) {
                assert!(close(a, b, 1e-10), "{s:?}: {a} vs {b}");
            }
        }
    }
}

const NESTED: &str = "
def plain(A: [R; n], B: [R; m]) -> R =
  foldl (s, b. s + foldl (t, a. sin(t * a + b)) s A) 0.5 B

def nested(A: [R; n], B: [R; m]) -> R =
  @checkpoint(2) foldl (s, b. s + @checkpoint(binomial 2) foldl (t, a. sin(t * a + b)) s A) 0.5 B

def inside_map(A: [R; n], B: [R; m]) -> R =
  reduce (+) 0 (map (b. @checkpoint(3) foldl (t, a. t * cos(a + b) + a) b A) B)

def inside_map_plain(A: [R; n], B: [R; m]) -> R =
  reduce (+) 0 (map (b. foldl (t, a. t * cos(a + b) + a) b A) B)
";

/// A checkpointed loop inside another loop's step, or inside a `map`,
/// differentiates like the plain loops, natively and in the interpreter.
#[test]
fn nested_loops() {
    let program = Program::parse("nested.grad", NESTED).unwrap();
    let jit = Jit::new().unwrap();
    let a = Value::array((0..7).map(|i| Value::Real(0.3 + 0.1 * i as f64)).collect());
    let b = Value::array(
        (0..5)
            .map(|i| Value::Real(-0.2 + 0.15 * i as f64))
            .collect(),
    );
    let args = [a, b];
    for (plain, checkpointed) in [("plain", "nested"), ("inside_map_plain", "inside_map")] {
        let full = program.function(plain).unwrap();
        let (v0, g0) = full
            .gradient(None, GradOptions::default())
            .unwrap()
            .eval(&args)
            .unwrap();
        for route in [Route::Unf, Route::Direct] {
            let g = program
                .function(checkpointed)
                .unwrap()
                .gradient(None, options(route, None))
                .unwrap();
            let (v1, g1) = g.eval(&args).unwrap();
            let (v2, g2) = g.compile(&jit).unwrap().call(&args).unwrap();
            assert_eq!(v0.to_bits(), v1.to_bits(), "{checkpointed}");
            assert_eq!(v1.to_bits(), v2.to_bits(), "{checkpointed}");
            for ((x, y), z) in g0.iter().zip(&g1).zip(&g2) {
                assert!(close(x, y, 1e-12), "{checkpointed}: {x} vs {y}");
                assert!(y.same(z), "{checkpointed}: interpreter {y}, native {z}");
            }
        }
    }
}

const LOOKUPS: &str = "
def lookups(w: [R; m], rows: [[R; 2]; k], idx: [Z; n], x: R) -> R =
  foldl (s, i. let j = idx[i] in
    s * 0.5 + w[j] * s + rows[j % k][1] * w[(j + 1) % m] + x) x (iota(n))

def elements(w: [R; m], a: [R; n], idx: [Z; n]) -> R =
  foldl (s, p. let (v, j) = p in sin(s + v * w[j]) + w[(j + 2) % m]) 0.3 (zip(a, idx))

def checkpointed(w: [R; m], rows: [[R; 2]; k], idx: [Z; n], x: R) -> R =
  @checkpoint(binomial 2) foldl (s, i. let j = idx[i] in
    s * 0.5 + w[j] * s + rows[j % k][1] * w[(j + 1) % m] + x) x (iota(n))

def lookups_again(w: [R; m], rows: [[R; 2]; k], idx: [Z; n], x: R) -> R =
  grad((y. checkpointed(w, rows, idx, y)), x) + reduce (+) 0 (map2 (*) w (grad((v. checkpointed(v, rows, idx, x)), w)))
";

/// Whether the step's reverse of some `revfold` in `e` scatters into an
/// array (which costs the array's size at every step).
fn steps_scatter(e: &gradlift::lang::Expr) -> bool {
    use gradlift::lang::syntax::{ArrayOp, Builtin, ExprKind};
    fn scatters(e: &gradlift::lang::Expr) -> bool {
        matches!(e.kind, ExprKind::Builtin(Builtin::ReduceByIndex(_), _))
            || e.children().into_iter().any(scatters)
    }
    match &e.kind {
        ExprKind::ArrayOp(ArrayOp::Revfold(_), vjp, _) if scatters(vjp) => true,
        _ => e.children().into_iter().any(steps_scatter),
    }
}

/// A checkpointed loop whose step reads free arrays at computed positions
/// keeps their cotangents sparse: each step returns its positions and
/// values, scattered once after the loop (a step costs what it reads, not
/// the arrays' sizes). The gradients are those of full recording, in both
/// engines and by both routes, and the loop's reverse inside a derivative
/// (`lookups_again`) is differentiated again by reverse mode.
#[test]
fn loops_reading_at_computed_positions() {
    let program = Program::parse("lookups.grad", LOOKUPS).unwrap();
    let jit = Jit::new().unwrap();
    let reals = |xs: &[f64]| Value::reals(xs);
    let ints = |xs: &[i64]| Value::array(xs.iter().map(|&i| Value::Int(i)).collect());
    let rows = Value::array(vec![
        reals(&[0.4, -0.7]),
        reals(&[1.1, 0.2]),
        reals(&[-0.3, 0.9]),
    ]);
    let w = reals(&[0.1, 0.25, -0.3, 0.45, 0.05]);
    let cases = [
        (
            "lookups",
            vec![
                w.clone(),
                rows.clone(),
                ints(&[0, 2, 2, 4, 1, 3, 0]),
                Value::Real(0.7),
            ],
        ),
        (
            "elements",
            vec![
                w.clone(),
                reals(&[0.5, -1.2, 0.8, 0.3]),
                ints(&[1, 4, 1, 0]),
            ],
        ),
        (
            "lookups_again",
            vec![w, rows, ints(&[0, 2, 2, 4, 1, 3, 0]), Value::Real(0.7)],
        ),
    ];
    for (name, args) in &cases {
        let f = program.function(name).unwrap();
        let (v0, g0) = f
            .gradient(None, GradOptions::default())
            .unwrap()
            .eval(args)
            .unwrap();
        for route in [Route::Unf, Route::Direct] {
            for s in [Schedule::Every(2), Schedule::Binomial(2)] {
                let g = f.gradient(None, options(route, Some(s))).unwrap();
                // The free arrays' cotangents are scattered after the
                // loop, not summed in its accumulator. (`lookups_again`'s
                // loops are the scans of its inner gradients' reverses.)
                let term = g.term().to_string();
                if *name != "lookups_again" {
                    assert!(term.contains("revfold"), "{name}: {term}");
                    assert!(term.contains("reduce_by_index"), "{name}: {term}");
                    assert!(!steps_scatter(g.term()), "{name}: {term}");
                }
                let (v1, g1) = g.eval(args).unwrap();
                let (v2, g2) = g.compile(&jit).unwrap().call(args).unwrap();
                assert_eq!(v0.to_bits(), v1.to_bits(), "{name} {s:?}");
                assert_eq!(v1.to_bits(), v2.to_bits(), "{name} {s:?}");
                for ((x, y), z) in g0.iter().zip(&g1).zip(&g2) {
                    assert!(close(x, y, 1e-12), "{name} {s:?}: {x} vs {y}");
                    assert!(y.same(z), "{name} {s:?}: interpreter {y}, native {z}");
                }
            }
        }
    }
}
