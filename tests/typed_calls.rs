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

#[test]
fn tuple_parameters_are_given_by_components() {
    let jit = Jit::new().unwrap();
    let text = "def f(p: (R, [R; n]), q: ((Z, [R; n]), R), z: [R; m]) -> R =
  let (a, xs) = p in
  let (inner, c) = q in
  let (k, ys) = inner in
  a * reduce (+) 0 (map2 (*) xs ys) + c * k + reduce (+) 0 z
";
    let p = Program::parse("f.grad", text).unwrap();
    let f = p.function("f").unwrap();
    let g = f
        .compile_gradient(&jit, None, GradOptions::default())
        .unwrap();
    let (xs, ys, z) = (filled(4, 1.0), filled(4, 2.0), filled(3, 3.0));
    let values = [
        Value::tuple(vec![Value::Real(1.5), Value::reals(&xs)]),
        Value::tuple(vec![
            Value::tuple(vec![Value::Int(3), Value::reals(&ys)]),
            Value::Real(-2.0),
        ]),
        Value::reals(&z),
    ];
    let (want, grads) = g.call(&values).unwrap();
    let inner = [Arg::Int(3), Arg::Reals(&[4], &ys)];
    let q = [Arg::Tuple(&inner), Arg::Real(-2.0)];
    let p_ = [Arg::Real(1.5), Arg::Reals(&[4], &xs)];
    let args = [Arg::Tuple(&p_), Arg::Tuple(&q), Arg::Reals(&[3], &z)];
    let mut out = vec![0.0; g.result_len(&args).unwrap()];
    let v = g.call_args(&args, &mut out).unwrap();
    assert_eq!(v.to_bits(), want.to_bits());
    let mut flat = vec![want];
    for gr in &grads {
        gr.slots(&mut flat);
    }
    assert_eq!(
        out.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        flat.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
    );
    // The same call again (the tuples' buffers reused) gives the same bits.
    let mut again = vec![0.0; out.len()];
    g.call_args(&args, &mut again).unwrap();
    assert_eq!(again, out);

    // A component of the wrong shape is named by its position.
    let short = [Arg::Int(3), Arg::Reals(&[3], &ys[..3])];
    let q_bad = [Arg::Tuple(&short), Arg::Real(-2.0)];
    let e = g
        .call_args(
            &[Arg::Tuple(&p_), Arg::Tuple(&q_bad), Arg::Reals(&[3], &z)],
            &mut out,
        )
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`q.0.1`") || e.contains("`p.1`"),
        "the component is named: {e}"
    );
    // The wrong arity, a scalar for a tuple, a tuple for an array.
    let e = g
        .call_args(
            &[Arg::Tuple(&p_[..1]), Arg::Tuple(&q), Arg::Reals(&[3], &z)],
            &mut out,
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("`p`") && e.contains("1 components"), "{e}");
    let e = g
        .call_args(
            &[Arg::Real(1.0), Arg::Tuple(&q), Arg::Reals(&[3], &z)],
            &mut out,
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("`p`"), "{e}");
    let e = g
        .call_args(
            &[Arg::Tuple(&p_), Arg::Tuple(&q), Arg::Tuple(&p_)],
            &mut out,
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("`z`"), "{e}");
}

#[test]
fn arrays_of_tuples_are_refused_with_a_pointer_to_call_flat() {
    let jit = Jit::new().unwrap();
    let text = "def f(ps: [(R, R); n]) -> R = reduce (+) 0 (map (p. let (a, b) = p in a * b) ps)\n";
    let c = Program::parse("f.grad", text)
        .unwrap()
        .function("f")
        .unwrap()
        .compile(&jit)
        .unwrap();
    let data = [1.0, 2.0, 3.0, 4.0];
    let e = c
        .call_args(&[Arg::Reals(&[2, 2], &data)], &mut [0.0])
        .unwrap_err()
        .to_string();
    assert!(e.contains("call_flat"), "{e}");
    let mut out = [0.0];
    c.native().call_flat(&[2], &[&data], &mut out).unwrap();
    assert_eq!(out[0], 2.0 + 12.0);
}

#[test]
fn ndarray_views_in_standard_layout_are_read_in_place_and_others_refused() {
    let jit = Jit::new().unwrap();
    let p = Program::parse("layer.grad", LAYER).unwrap();
    let g = p
        .function("loss")
        .unwrap()
        .compile_gradient(&jit, None, GradOptions::default())
        .unwrap();
    let (h, d) = (5, 7);
    let (w, b, x) = (filled(h * d, 1.0), filled(h, 2.0), filled(d, 3.0));
    let slices = [
        Arg::Reals(&[h, d], &w),
        Arg::Reals(&[h], &b),
        Arg::Reals(&[d], &x),
        Arg::Real(0.5),
    ];
    let mut want = vec![0.0; g.result_len(&slices).unwrap()];
    g.call_args(&slices, &mut want).unwrap();
    let wa = ndarray::Array2::from_shape_vec((h, d), w.clone()).unwrap();
    let ba = ndarray::ArrayView1::from(&b);
    let xa = ndarray::arr1(&x).into_dyn();
    let scale = ndarray::arr0(0.5);
    let args = [
        Arg::from_array(&wa).unwrap(),
        Arg::from_array(&ba).unwrap(),
        Arg::from_array(&xa).unwrap(),
        Arg::from_array(&scale).unwrap(),
    ];
    // Borrowed, not copied.
    match args[0] {
        Arg::Reals(_, data) => assert_eq!(data.as_ptr(), wa.as_ptr()),
        _ => panic!("an array of reals"),
    }
    let mut out = vec![0.0; want.len()];
    g.call_args(&args, &mut out).unwrap();
    assert_eq!(out, want);
    // A transposed view and a strided slice are refused with the remedy.
    let t = wa.t();
    let e = Arg::from_array(&t).unwrap_err().to_string();
    assert!(e.contains("as_standard_layout"), "{e}");
    let every_other = wa.slice(ndarray::s![.., ..;2]);
    assert!(Arg::from_array(&every_other).is_err());
    // Integer arrays too.
    let ks = ndarray::arr1(&[1i64, 2, 3]);
    assert!(matches!(Arg::from_array(&ks).unwrap(), Arg::Ints(&[3], _)));
}
