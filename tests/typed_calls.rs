//! Typed calls on borrowed memory (`call_args`): the same bits as the
//! calls on values, sizes found from shapes (also through size
//! expressions), shapes that do not fit named by parameter, integer data
//! read in place. (That warm typed calls allocate nothing is in
//! `warm_calls.rs`, which counts allocations.)

use gradlift::jit::Arg;
use gradlift::{GradOptions, Jit, Program, Value};

const LAYER: &str = "def loss(W: [[R; d]; h], b: [R; h], x: [R; d], scale: R) -> R =
  scale * reduce (+) 0 (map2 (row, c. tanh(reduce (+) 0 (map2 (*) row x) + c)) W b)
";

fn filled(n: usize, seed: f64) -> Vec<f64> {
    (0..n).map(|i| ((i as f64 + seed) * 0.37).sin()).collect()
}

#[test]
fn typed_calls_give_the_bits_of_calls_on_values() {
    let jit = Jit::new().unwrap();
    let p = Program::parse("layer.grad", LAYER).unwrap();
    let f = p.function("loss").unwrap();
    let g = f
        .compile_gradient(&jit, None, GradOptions::default())
        .unwrap();
    let (h, d) = (5, 7);
    let (w, b, x) = (filled(h * d, 1.0), filled(h, 2.0), filled(d, 3.0));
    let values = [
        Value::array(
            (0..h)
                .map(|i| Value::reals(&w[i * d..(i + 1) * d]))
                .collect(),
        ),
        Value::reals(&b),
        Value::reals(&x),
        Value::Real(0.5),
    ];
    let (want, grads) = g.call(&values).unwrap();
    let args = [
        Arg::Reals(&[h, d], &w),
        Arg::Reals(&[h], &b),
        Arg::Reals(&[d], &x),
        Arg::Real(0.5),
    ];
    let mut out = vec![0.0; g.result_len(&args).unwrap()];
    assert_eq!(out.len(), 1 + h * d + h + d + 1);
    let v = g.call_args(&args, &mut out).unwrap();
    assert_eq!(v.to_bits(), want.to_bits());
    let mut flat = vec![want];
    for gr in &grads {
        let mut slots = Vec::new();
        gr.slots(&mut slots);
        flat.extend(slots);
    }
    assert_eq!(
        out.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        flat.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
    );
}

#[test]
fn shapes_that_do_not_fit_are_named_by_parameter() {
    let jit = Jit::new().unwrap();
    let p = Program::parse("layer.grad", LAYER).unwrap();
    let g = p
        .function("loss")
        .unwrap()
        .compile_gradient(&jit, None, GradOptions::default())
        .unwrap();
    let (w, b, x) = (filled(6, 1.0), filled(2, 2.0), filled(4, 3.0));
    let mut out = vec![0.0; 64];
    // x has 4 elements, W's rows 3.
    let e = g
        .call_args(
            &[
                Arg::Reals(&[2, 3], &w),
                Arg::Reals(&[2], &b),
                Arg::Reals(&[4], &x),
                Arg::Real(1.0),
            ],
            &mut out,
        )
        .unwrap_err();
    assert!(e.to_string().contains("`x`"), "{e}");
    assert!(e.to_string().contains("(4,)"), "{e}");
    // A shape whose product is not the data's length.
    let e = g
        .call_args(
            &[
                Arg::Reals(&[3, 3], &w),
                Arg::Reals(&[2], &b),
                Arg::Reals(&[3], &x[..3]),
                Arg::Real(1.0),
            ],
            &mut out,
        )
        .unwrap_err();
    assert!(e.to_string().contains("`W`"), "{e}");
    // A scalar where an array is expected, and the wrong count.
    let e = g
        .call_args(
            &[
                Arg::Real(1.0),
                Arg::Reals(&[2], &b),
                Arg::Reals(&[3], &x[..3]),
                Arg::Real(1.0),
            ],
            &mut out,
        )
        .unwrap_err();
    assert!(e.to_string().contains("`W`"), "{e}");
    assert!(g.call_args(&[Arg::Real(1.0)], &mut out).is_err());
    // An output buffer of the wrong length.
    let args = [
        Arg::Reals(&[2, 3], &w),
        Arg::Reals(&[2], &b),
        Arg::Reals(&[3], &x[..3]),
        Arg::Real(1.0),
    ];
    let e = g.call_args(&args, &mut out).unwrap_err();
    assert!(e.to_string().contains("result buffer"), "{e}");
    let mut out = vec![0.0; g.result_len(&args).unwrap()];
    g.call_args(&args, &mut out).unwrap();
}

#[test]
fn sizes_come_from_expressions_and_integers_are_read_in_place() {
    let jit = Jit::new().unwrap();
    let text = "def f(ys: [R; n], xs: [R; n + 1], idx: [Z; m], k: size) -> R =
  reduce (+) 0 (map (i. xs[i] * xs[i]) idx) + xs[n] * k + reduce (+) 0 ys
";
    let p = Program::parse("f.grad", text).unwrap();
    let f = p.function("f").unwrap();
    let c = f.compile(&jit).unwrap();
    let xs = [1.0, 2.0, 3.0, 4.0];
    let idx: [i64; 3] = [0, 2, 2];
    let ys = [0.5, 0.25, 0.125];
    let args = [
        Arg::Reals(&[3], &ys),
        Arg::Reals(&[4], &xs),
        Arg::Ints(&[3], &idx),
        Arg::Int(3),
    ];
    let mut out = [0.0];
    c.call_args(&args, &mut out).unwrap();
    assert_eq!(out[0], 1.0 + 9.0 + 9.0 + 4.0 * 3.0 + 0.875);
    let sizes = c.native().sizes_of(&args).unwrap();
    assert_eq!(sizes.len(), c.native().signature().size_vars.len());
    // xs's length disagreeing with ys's: named.
    let e = c
        .call_args(
            &[
                Arg::Reals(&[2], &ys[..2]),
                Arg::Reals(&[4], &xs),
                Arg::Ints(&[3], &idx),
                Arg::Int(3),
            ],
            &mut out,
        )
        .unwrap_err();
    assert!(
        e.to_string().contains("`xs`") || e.to_string().contains("`ys`"),
        "{e}"
    );
    // An index out of range is the program's run-time error, not a crash.
    let bad: [i64; 1] = [7];
    let e = c
        .call_args(
            &[
                Arg::Reals(&[3], &ys),
                Arg::Reals(&[4], &xs),
                Arg::Ints(&[1], &bad),
                Arg::Int(3),
            ],
            &mut out,
        )
        .unwrap_err();
    assert!(
        e.to_string().contains("index") || e.to_string().contains("bounds"),
        "{e}"
    );
}
