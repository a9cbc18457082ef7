//! `matmul`: the interpreter and native code call one matrix kernel
//! (`gradlift_lang::kernels`), so they agree bit for bit; its reverse and
//! forward rules agree with finite differences and with the same product
//! written as loops (to rounding: the kernel sums in its own order); empty
//! shapes and mismatched operands behave as the language reference says.

mod support;

use gradlift::{Jit, Program, Value};
use support::pipeline_oracle::check_program;

/// A deterministic matrix of `rows` × `cols` reals in (-1, 1).
fn matrix(rows: usize, cols: usize, seed: u64) -> Value {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    Value::array(
        (0..rows)
            .map(|_| {
                let row: Vec<f64> = (0..cols)
                    .map(|_| {
                        s ^= s << 13;
                        s ^= s >> 7;
                        s ^= s << 17;
                        (s >> 11) as f64 / (1u64 << 52) as f64 - 1.0
                    })
                    .collect();
                Value::reals(&row)
            })
            .collect(),
    )
}

/// The message of an error that must occur.
fn error<T, E: std::fmt::Display>(r: Result<T, E>) -> String {
    match r {
        Ok(_) => panic!("an error was expected"),
        Err(e) => e.to_string(),
    }
}

fn flat(vs: &[Value]) -> Vec<f64> {
    let mut out = Vec::new();
    for v in vs {
        v.flatten(&mut out);
    }
    out
}

/// The value and gradient of `text`'s last function, interpreted and
/// native, which must agree bit for bit.
fn gradient(text: &str, args: &[Value]) -> (f64, Vec<Value>) {
    let program = Program::parse("t.grad", text).unwrap_or_else(|e| panic!("{e}"));
    let f = program.last_function().unwrap();
    let g = f.gradient(None, Default::default()).unwrap();
    let interpreted = g.eval(args).unwrap();
    let native = g
        .compile(&Jit::new().unwrap().verify(true))
        .unwrap()
        .call(args)
        .unwrap();
    assert_eq!(interpreted.0.to_bits(), native.0.to_bits(), "{text}");
    for (a, b) in interpreted.1.iter().zip(&native.1) {
        assert!(a.same(b), "{a} vs {b}");
    }
    interpreted
}

const LAYER: &str = "def f(A: [[R; k]; m], B: [[R; n]; k]) -> R =
  let C = matmul(A, B) in
  reduce (+) 0 (map (r. reduce (+) 0 (map (x. sin(x) * x) r)) C)";

/// The same function, the product written as loops.
const LAYER_LOOPS: &str = "def f(A: [[R; k]; m], B: [[R; n]; k]) -> R =
  let C = map (a. map (b. reduce (+) 0 (map2 (*) a b)) (transpose(B))) A in
  reduce (+) 0 (map (r. reduce (+) 0 (map (x. sin(x) * x) r)) C)";

#[test]
fn every_engine_agrees_with_finite_differences() {
    let jit = Jit::new().unwrap().verify(true);
    for (m, k, n) in [(2, 3, 4), (1, 1, 1), (5, 2, 1), (3, 7, 2)] {
        let args = [matrix(m, k, 1), matrix(k, n, 2)];
        let outcome = check_program(LAYER, &args, false, &jit);
        assert!(outcome.native && outcome.gradients, "{m}×{k}×{n}");
        assert!(outcome.finite_differences > 0, "{m}×{k}×{n}");
    }
}

#[test]
fn the_kernel_agrees_with_the_loops_to_rounding() {
    // Sizes past the kernel's blocks, and thin shapes (vector products).
    for (m, k, n) in [(17, 70, 9), (1, 300, 40), (40, 300, 1), (64, 64, 64)] {
        let args = [matrix(m, k, 3), matrix(k, n, 4)];
        let (v, g) = gradient(LAYER, &args);
        let (v_loops, g_loops) = gradient(LAYER_LOOPS, &args);
        assert!(
            (v - v_loops).abs() <= 1e-12 * v.abs().max(1.0),
            "{v} vs {v_loops}"
        );
        for (x, y) in flat(&g).iter().zip(flat(&g_loops)) {
            assert!(
                (x - y).abs() <= 1e-11 * (1.0 + y.abs()),
                "{m}×{k}×{n}: {x} vs {y}"
            );
        }
    }
}

#[test]
fn a_layer_with_its_transposed_products_agrees_bit_for_bit_natively() {
    // Two layers: the reverse pass multiplies by both weights transposed.
    let text = "def net(W1: [[R; d]; h], W2: [[R; h]; c], X: [[R; m]; d]) -> R =
  let H = map (r. map (x. tanh(x)) r) (matmul(W1, X)) in
  let Y = matmul(W2, H) in
  reduce (+) 0 (map (r. reduce (+) 0 (map (y. y * y) r)) Y)";
    let args = [matrix(20, 30, 5), matrix(4, 20, 6), matrix(30, 50, 7)];
    let (v, g) = gradient(text, &args);
    assert!(v.is_finite() && v > 0.0);
    assert_eq!(g.len(), 3);
}

#[test]
fn forward_mode_and_hessian_vector_products_agree_with_the_loops() {
    let args = [matrix(3, 4, 8), matrix(4, 5, 9)];
    let dirs = [matrix(3, 4, 10), matrix(4, 5, 11)];
    let jit = Jit::new().unwrap();
    let program = Program::parse("t.grad", LAYER).unwrap();
    let loops = Program::parse("t.grad", LAYER_LOOPS).unwrap();
    let (f, fl) = (
        program.last_function().unwrap(),
        loops.last_function().unwrap(),
    );
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * (1.0 + b.abs());
    for engine in [None, Some(&jit)] {
        let (v, t) = f.jvp(&args, &dirs, engine).unwrap();
        let (vl, tl) = fl.jvp(&args, &dirs, engine).unwrap();
        assert!(close(v.as_real().unwrap(), vl.as_real().unwrap()));
        assert!(
            close(t.as_real().unwrap(), tl.as_real().unwrap()),
            "{t} vs {tl}"
        );
        let h = f.hvp(&args, &dirs, engine).unwrap();
        let hl = fl.hvp(&args, &dirs, engine).unwrap();
        for (x, y) in flat(&h.hvp).iter().zip(flat(&hl.hvp)) {
            assert!(close(*x, y), "{x} vs {y}");
        }
    }
}

#[test]
fn empty_shapes_give_empty_products_and_zeros() {
    let empty_rows = |rows: usize| Value::array((0..rows).map(|_| Value::reals(&[])).collect());
    let cases = [
        // k = 0: an m × n matrix of zeros (n from the type: `B` has no rows).
        (
            "def f(A: [[R; k]; m], B: [[R; 3]; k]) -> [[R; 3]; m] = matmul(A, B)",
            empty_rows(2),
            Value::array(vec![]),
            "[[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]",
        ),
        // k = 0 and n unknown: the size variable `n` is 0.
        (
            "def f(A: [[R; k]; m], B: [[R; n]; k]) -> [[R; n]; m] = matmul(A, B)",
            empty_rows(2),
            Value::array(vec![]),
            "[[], []]",
        ),
        // m = 0: no rows.
        (
            "def f(A: [[R; k]; m], B: [[R; n]; k]) -> [[R; n]; m] = matmul(A, B)",
            Value::array(vec![]),
            matrix(2, 3, 1),
            "[]",
        ),
        // n = 0: m empty rows.
        (
            "def f(A: [[R; k]; m], B: [[R; n]; k]) -> [[R; n]; m] = matmul(A, B)",
            matrix(2, 2, 1),
            empty_rows(2),
            "[[], []]",
        ),
    ];
    let jit = Jit::new().unwrap();
    for (text, a, b, want) in cases {
        let program = Program::parse("t.grad", text).unwrap();
        let f = program.last_function().unwrap();
        let args = &[a, b];
        let interpreted = f.eval(args).unwrap();
        let native = f.compile(&jit).unwrap().call(args).unwrap();
        assert_eq!(interpreted.to_string(), want, "{text}");
        assert!(interpreted.same(&native), "{interpreted} vs {native}");
    }
}

#[test]
fn mismatched_operands_are_type_errors_with_their_position() {
    let text = "def f(A: [[R; 3]; 2], B: [[R; 4]; 2]) -> R =\n  reduce (+) 0 (map (r. r[0]) (matmul(A, B)))";
    let err = error(Program::parse("t.grad", text));
    assert!(
        err.contains("`matmul` of a matrix of `3` columns and a matrix of `2` rows"),
        "{err}"
    );
    assert!(err.contains("t.grad:2:"), "{err}");
    let text = "def f(A: [R; 3], B: [[R; 4]; 3]) -> [[R; 4]; 1] = matmul(A, B)";
    let err = error(Program::parse("t.grad", text));
    assert!(err.contains("expected a matrix of reals"), "{err}");
    let text = "def f(A: [[R; 3]; 2]) -> [[R; 3]; 2] = matmul(A)";
    let err = error(Program::parse("t.grad", text));
    assert!(err.contains("matmul"), "{err}");
}

#[test]
fn ragged_rows_are_refused_by_every_engine() {
    // A size-polymorphic program called with rows of different lengths.
    let text = "def f(A: [[R; k]; m], B: [[R; n]; k]) -> R =
  reduce (+) 0 (map (r. reduce (+) 0 r) (matmul(A, B)))";
    let program = Program::parse("t.grad", text).unwrap();
    let f = program.last_function().unwrap();
    let ragged = Value::array(vec![Value::reals(&[1.0, 2.0]), Value::reals(&[1.0])]);
    let args = [ragged, matrix(2, 2, 1)];
    assert!(f.eval(&args).is_err());
    assert!(f
        .compile(&Jit::new().unwrap())
        .unwrap()
        .call(&args)
        .is_err());
}

#[test]
fn an_object_file_refuses_matmul_with_the_reason() {
    let program = Program::parse("t.grad", LAYER).unwrap();
    let f = program.last_function().unwrap();
    let closed = f.optimized().unwrap();
    let jit = Jit::for_target("x86_64-unknown-linux-gnu").unwrap();
    let err = error(jit.object(&[&closed]));
    assert!(err.contains("matmul"), "{err}");
}

#[test]
fn products_are_the_same_bits_on_1_2_and_8_threads_and_from_many_callers() {
    // Large enough for the kernel to split the result across threads.
    let text = "def net(W: [[R; d]; h], X: [[R; m]; d]) -> R =
  reduce (+) 0 (map (r. reduce (+) 0 (map (x. tanh(x)) r)) (matmul(W, X)))";
    let args = [matrix(200, 300, 12), matrix(300, 150, 13)];
    let program = Program::parse("t.grad", text).unwrap();
    let g = program
        .last_function()
        .unwrap()
        .gradient(None, Default::default())
        .unwrap();
    let interpreted = g.eval(&args).unwrap();
    for threads in [1, 2, 8] {
        let jit = Jit::new().unwrap().threads(threads);
        let compiled = std::sync::Arc::new(g.compile(&jit).unwrap());
        let callers: Vec<_> = (0..3)
            .map(|_| {
                let (compiled, args) = (compiled.clone(), args.clone());
                std::thread::spawn(move || compiled.call(&args).unwrap())
            })
            .collect();
        for caller in callers {
            let native = caller.join().unwrap();
            assert_eq!(
                native.0.to_bits(),
                interpreted.0.to_bits(),
                "{threads} threads"
            );
            for (a, b) in native.1.iter().zip(&interpreted.1) {
                assert!(a.same(b), "{threads} threads");
            }
        }
    }
}

#[test]
fn transposed_operands_are_read_in_place_by_every_engine() {
    let jit = Jit::new().unwrap().verify(true);
    let texts = [
        // Operands written as transposes.
        "def f(A: [[R; m]; k], B: [[R; k]; n]) -> R =
  reduce (+) 0 (map (r. reduce (+) 0 (map (x. sin(x)) r)) (matmul(transpose(A), transpose(B))))",
        // A transposed product, and a transpose bound by `let` and read twice.
        "def f(A: [[R; k]; k], B: [[R; n]; k]) -> R =
  let T = transpose(B) in
  let C = transpose(matmul(A, B)) in
  reduce (+) 0 (map2 (r, t. reduce (+) 0 (map2 (x, y. x * y) r (map (z. exp(z)) t))) C T) + reduce (+) 0 (map (r. reduce (+) 0 r) (matmul(T, transpose(A))))",
        // A binder inside the scope of a bound transpose shadows its matrix:
        // the transpose may not be written there.
        "def f(W: [[R; c]; r], X: [[R; c]; n]) -> R =
  let T = transpose(W) in
  reduce (+) 0 (map (W. reduce (+) 0 (map (q. reduce (+) 0 (map (x. x * x) q)) (matmul(W, T)))) [X, X])",
    ];
    let args = [
        [matrix(4, 3, 14), matrix(2, 4, 15)],
        [matrix(4, 4, 16), matrix(4, 3, 17)],
        [matrix(3, 2, 18), matrix(5, 2, 19)],
    ];
    for (text, args) in texts.iter().zip(&args) {
        let outcome = check_program(text, args, false, &jit);
        assert!(outcome.native && outcome.gradients, "{text}");
        assert!(outcome.finite_differences > 0, "{text}");
    }
}

/// Whether every `transpose` of `e` is an operand of a `matmul` (which
/// the program does not build) or the transpose of one's result.
fn transposes_only_in_products(e: &gradlift::lang::syntax::Expr) -> bool {
    use gradlift::lang::syntax::{Builtin, ExprKind};
    match &e.kind {
        ExprKind::Builtin(Builtin::Transpose, t) => {
            matches!(t[1].kind, ExprKind::Builtin(Builtin::MatMul, _))
                && transposes_only_in_products(&t[1])
        }
        ExprKind::Builtin(Builtin::MatMul, args) => args.iter().all(|a| match &a.kind {
            ExprKind::Builtin(Builtin::Transpose, t) => t.iter().all(transposes_only_in_products),
            _ => transposes_only_in_products(a),
        }),
        _ => e.children().into_iter().all(transposes_only_in_products),
    }
}

#[test]
fn a_classifiers_gradient_builds_no_transpose_of_its_inputs() {
    let root = env!("CARGO_MANIFEST_DIR");
    let file = format!("{root}/benches/peers/programs/classifier_matmul.grad");
    let program = Program::parse(&file, &std::fs::read_to_string(&file).unwrap()).unwrap();
    let g = program
        .last_function()
        .unwrap()
        .gradient(None, Default::default())
        .unwrap();
    assert!(transposes_only_in_products(g.term()), "{}", g.term());
    // And it computes what the classifier written with loops does.
    let loops = format!("{root}/benches/peers/programs/classifier.grad");
    let loops = Program::parse(&loops, &std::fs::read_to_string(&loops).unwrap()).unwrap();
    let gl = loops
        .last_function()
        .unwrap()
        .gradient(None, Default::default())
        .unwrap();
    let (d, h, k, m) = (12, 5, 3, 7);
    let mut y = vec![vec![0.0; k]; m];
    for (i, row) in y.iter_mut().enumerate() {
        row[i % k] = 1.0;
    }
    let y = Value::array(y.iter().map(|r| Value::reals(r)).collect());
    let args = [
        matrix(h, d, 20),
        matrix(1, h, 21).as_array().unwrap()[0].clone(),
        matrix(k, h, 22),
        matrix(1, k, 23).as_array().unwrap()[0].clone(),
        matrix(m, d, 24),
        y,
    ];
    let native = g
        .compile(&Jit::new().unwrap())
        .unwrap()
        .call(&args)
        .unwrap();
    let (v, grads) = gl.eval(&args).unwrap();
    assert!((native.0 - v).abs() <= 1e-12 * v.abs());
    for (x, y) in flat(&native.1).iter().zip(flat(&grads)) {
        assert!((x - y).abs() <= 1e-11 * (1.0 + y.abs()), "{x} vs {y}");
    }
}

#[test]
fn maps_of_dot_products_are_read_as_products() {
    let source = |text: &str| -> String {
        let program = Program::parse("t.grad", text).unwrap();
        program
            .last_function()
            .unwrap()
            .closed()
            .unwrap()
            .body
            .to_string()
    };
    // Literal, either order, and through a definition of the dot product.
    for body in [
        "map (x. map (w. reduce (+) 0 (map2 (*) x w)) W) X",
        "map (x. map (w. reduce (+) 0.0 (map2 (*) w x)) W) X",
        "map (x. map (w. dot(w, x)) W) X",
    ] {
        let text = format!(
            "def dot(a: [R; n], b: [R; n]) -> R = reduce (+) 0 (map2 (*) a b)
def f(X: [[R; d]; m], W: [[R; d]; h]) -> [[R; h]; m] = {body}"
        );
        let printed = source(&text);
        assert!(
            printed.contains("matmul(X, transpose(W))"),
            "{body}: {printed}"
        );
        // And it is the product: the kernel's bits in every engine.
        let program = Program::parse("t.grad", &text).unwrap();
        let f = program.last_function().unwrap();
        let args = [matrix(5, 7, 25), matrix(3, 7, 26)];
        let interpreted = f.eval(&args).unwrap();
        let native = f
            .compile(&Jit::new().unwrap())
            .unwrap()
            .call(&args)
            .unwrap();
        assert!(interpreted.same(&native));
    }
    // Not a product: the inner array reads the outer element; a dot
    // product that is not of the two rows; a sum that is not `reduce (+)
    // 0`; a product of another operator.
    for body in [
        "map (x. map (w. reduce (+) 0 (map2 (*) x w)) (map (r. map2 (*) r x) W)) X",
        "map (x. map (w. reduce (+) 0 (map2 (*) x x)) W) X",
        "map (x. map (w. reduce (+) 1 (map2 (*) x w)) W) X",
        "map (x. map (w. reduce (+) 0 (map2 (+) x w)) W) X",
    ] {
        let text = format!("def f(X: [[R; d]; m], W: [[R; d]; h]) -> [[R; h]; m] = {body}");
        assert!(!source(&text).contains("matmul"), "{body}");
    }
}

#[test]
fn a_recognised_product_differentiates_as_one() {
    let text = "def f(X: [[R; d]; m], W: [[R; d]; h]) -> R =
  reduce (+) 0 (map (r. reduce (+) 0 (map (z. tanh(z)) r)) (map (x. map (w. reduce (+) 0 (map2 (*) w x)) W) X))";
    let jit = Jit::new().unwrap().verify(true);
    let outcome = check_program(text, &[matrix(6, 4, 27), matrix(3, 4, 28)], false, &jit);
    assert!(outcome.native && outcome.gradients && outcome.finite_differences > 0);
}

#[test]
fn a_layer_applied_one_row_at_a_time_is_batched_into_one_product() {
    let source = |text: &str| -> String {
        let program = Program::parse("t.grad", text).unwrap_or_else(|e| panic!("{e}"));
        program
            .last_function()
            .unwrap()
            .closed()
            .unwrap()
            .body
            .to_string()
    };
    let layer = "def dot(a: [R; n], b: [R; n]) -> R = reduce (+) 0 (map2 (*) a b)
def f(W: [[R; d]; h], c: [R; h], V: [R; h], X: [[R; d]; m], Y: [R; m]) -> R =
  reduce (+) 0 (map2 (x, y. let hidden = map2 (w, b. tanh(dot(w, x) + b)) W c in
    let out = reduce (+) 0 (map2 (*) V hidden) in (out - y) * (out - y)) X Y)";
    let printed = source(layer);
    assert!(printed.contains("matmul(X, transpose(W))"), "{printed}");
    let jit = Jit::new().unwrap().verify(true);
    let args = [
        matrix(3, 4, 29),
        matrix(1, 3, 30).as_array().unwrap()[0].clone(),
        matrix(1, 3, 31).as_array().unwrap()[0].clone(),
        matrix(5, 4, 32),
        matrix(1, 5, 33).as_array().unwrap()[0].clone(),
    ];
    let outcome = check_program(layer, &args, false, &jit);
    assert!(outcome.native && outcome.gradients && outcome.finite_differences > 0);
    // Not batched: the weights are bound inside the row's body; the row
    // variable is bound again; the rows are not a variable.
    for text in [
        "def f(W: [[R; d]; h], X: [[R; d]; m]) -> R =
  reduce (+) 0 (map (x. let U = map (r. map (v. v * 2) r) W in reduce (+) 0 (map (u. reduce (+) 0 (map2 (*) u x)) U)) X)",
        "def f(W: [[R; d]; h], X: [[R; d]; m]) -> R =
  reduce (+) 0 (map (x. let x = map (v. v + 1) x in reduce (+) 0 (map (w. reduce (+) 0 (map2 (*) w x)) W)) X)",
        "def f(W: [[R; d]; h], X: [[R; d]; m]) -> R =
  reduce (+) 0 (map (x. reduce (+) 0 (map (w. reduce (+) 0 (map2 (*) w x)) W)) (map (r. r) X))",
    ] {
        assert!(!source(text).contains("matmul"), "{text}");
    }
}
