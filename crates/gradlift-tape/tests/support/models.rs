//! The worked examples, written once over [`Real`] so that each runs on
//! `f64`, on dual numbers and on the tape.

use gradlift_tape::Real;
use std::ops::{Mul, Sub};

/// The chapter's `$ad.forward()` example: `scale(a, k) = a · k`, then
///
/// ```text
/// s = Σ_{i=1..n} scale(x, i) / y;  t = x·y + 3;  t = t > 1 ? t² : −t
/// model = sin(t)/x − 2y + s
/// ```
pub fn forward_model<R: Real>(x: R, y: R, n: u32) -> R
where
    f64: Mul<R, Output = R>,
{
    let scale = |a: R, k: u32| a * f64::from(k);
    let mut s = x.lift(0.0);
    for i in 1..=n {
        s += scale(x, i) / y;
    }
    let mut t = x * y + 3.0;
    if t > 1.0 {
        t *= t;
    } else {
        t = -t;
    }
    t.sin() / x - 2.0 * y + s
}

/// The chapter's `$ad.reverse()` example, with its `continue`, `break` and
/// early return.
pub fn reverse_model<R: Real>(x: R, y: R, n: u32) -> R
where
    f64: Mul<R, Output = R>,
{
    let mut s = x.lift(0.0);
    for i in 0..n {
        if i == 1 {
            continue;
        }
        if s > 40.0 {
            break;
        }
        s += x * x * f64::from(i);
    }
    let t = x * y + 3.0;
    if t > 100.0 {
        return t * s;
    }
    t.sin() / x - 2.0 * y + s
}

/// The observations in the header of `examples/logistic_growth.grad`: the
/// model at rate 0.9, capacity 50, rounded to six decimals.
pub const LOGISTIC_OBS: [f64; 10] = [
    4.644121, 10.053153, 19.111462, 30.172821, 39.461555, 45.106019, 47.889332, 49.120644,
    49.639065, 49.852771,
];

/// `loss` of `examples/logistic_growth.grad`: 4000 Euler steps of
/// `dP/dt = rate · P · (1 − P/cap)` from `P(0) = 2` with `dt = 0.0025`,
/// adding `(P − obs_j)²` after steps 399, 799, …, 3999 (counting from 0).
/// The operations are in the order the `.grad` file writes them.
pub fn logistic_loss<R: Real>(rate: R, cap: R, obs: &[f64; 10]) -> R
where
    f64: Mul<R, Output = R> + Sub<R, Output = R>,
{
    let sq = |x: R| x * x;
    let mut p = rate.lift(2.0);
    let mut total = rate.lift(0.0);
    for i in 0..4000 {
        p = p + 0.0025 * rate * p * (1.0 - p / cap);
        if i % 400 == 399 {
            total += sq(p - obs[i / 400]);
        }
    }
    total
}
