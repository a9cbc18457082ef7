//! A gradient called on slices: shapes and borrowed data in, the value
//! and gradient written into a buffer the caller owns, no `Value` trees
//! and no allocation once warm (docs/abi.md, "The typed call").
//!
//! The second half makes the same call on `ndarray` arrays (the
//! `ndarray` feature, which the examples and tests are built with).
//!
//!     cargo run --release --example typed_call

use gradlift::{jit::Arg, GradOptions, Jit, Program};

const LAYER: &str = "def loss(W: [[R; d]; h], b: [R; h], x: [R; d], scale: R) -> R =
  scale * reduce (+) 0 (map2 (row, c. tanh(reduce (+) 0 (map2 (*) row x) + c)) W b)
";

fn main() -> Result<(), gradlift::Error> {
    let jit = Jit::new()?;
    let program = Program::parse_in(&jit, "layer.grad", LAYER)?;
    let grad = program
        .function("loss")?
        .compile_gradient(&jit, None, GradOptions::default())?;
    let (h, d) = (128, 784);
    let w: Vec<f64> = (0..h * d)
        .map(|i| ((i % 97) as f64 - 48.0) * 1e-3)
        .collect();
    let b = vec![0.1; h];
    let x: Vec<f64> = (0..d).map(|i| (i as f64 * 0.01).sin()).collect();
    let args = [
        Arg::Reals(&[h, d], &w),
        Arg::Reals(&[h], &b),
        Arg::Reals(&[d], &x),
        Arg::Real(0.5),
    ];
    // The value, then ∂W (h·d reals, row-major), ∂b (h), ∂x (d), ∂scale.
    let mut out = vec![0.0; grad.result_len(&args)?];
    let value = grad.call_args(&args, &mut out)?;
    let start = std::time::Instant::now();
    let calls = 1000;
    for _ in 0..calls {
        grad.call_args(&args, &mut out)?;
    }
    let per_call = start.elapsed() / calls;
    let (dw, rest) = out[1..].split_at(h * d);
    let (db, rest) = rest.split_at(h);
    let (dx, dscale) = rest.split_at(d);
    println!("loss = {value:.12}");
    println!("∂W[0][0..3] = {:?}", &dw[..3]);
    println!("∂b[0..3] = {:?}", &db[..3]);
    println!("∂x[0..3] = {:?}", &dx[..3]);
    println!("∂scale = {}", dscale[0]);
    println!("{per_call:?} per warm call ({h} × {d} layer)");
    // The gradient of scale is the loss divided by scale.
    assert!((dscale[0] - value / 0.5).abs() <= 1e-12 * value.abs().max(1.0));

    // The same call on `ndarray` arrays and views (feature `ndarray`),
    // read in place; the gradient of W seen as a matrix in the buffer.
    let w = ndarray::Array2::from_shape_vec((h, d), w).expect("h·d elements");
    let b = ndarray::Array1::from(b);
    let x = ndarray::ArrayView1::from(&x);
    let args = [
        Arg::from_array(&w)?,
        Arg::from_array(&b)?,
        Arg::from_array(&x)?,
        Arg::Real(0.5),
    ];
    let mut again = vec![0.0; out.len()];
    assert_eq!(grad.call_args(&args, &mut again)?, value);
    assert_eq!(again, out);
    let dw = ndarray::ArrayView2::from_shape((h, d), &again[1..1 + h * d]).expect("h·d reals");
    println!(
        "∂W[1][0..3] via ndarray = {}",
        dw.row(1).slice(ndarray::s![..3])
    );
    // A transposed view is not in standard layout: it is refused, not
    // misread, and `as_standard_layout()` makes the copy.
    let wt = w.t();
    assert!(Arg::from_array(&wt).is_err());
    let copy = wt.as_standard_layout();
    assert!(Arg::from_array(&copy).is_ok());
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_example_runs_and_its_gradient_of_scale_is_the_loss_over_scale() {
        super::main().unwrap();
    }
}
