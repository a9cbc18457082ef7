//! Prints the figures of the autodiff chapter's worked examples and the
//! gradient of the logistic-growth loss, by dual numbers and by the tape.
//!
//! ```text
//! cargo run -p gradlift-tape --example chapter
//! ```

#[path = "../tests/support/models.rs"]
mod models;

use gradlift_tape::{second_derivative, Dual, Real, Tape};
use models::{forward_model, logistic_loss, reverse_model, LOGISTIC_OBS};

fn main() {
    let y = {
        let x = Dual::variable(2.0);
        x * x * x - 2.0 * x
    };
    println!("x³ − 2x at 2: value {}, slope {}", y.value, y.tangent);
    println!("d²/dx² x³ at 2: {}", second_derivative(|x| x * x * x, 2.0));

    let df_dx = forward_model(Dual::variable(1.0), Dual::constant(2.0), 3).tangent;
    let df_dy = forward_model(Dual::constant(1.0), Dual::variable(2.0), 3).tangent;
    println!("forward model at (1, 2, n=3): df/dx {df_dx:.6}  df/dy {df_dy:.6}");

    let tape = Tape::new();
    let (x, y) = (tape.var(1.0), tape.var(2.0));
    let value = reverse_model(x, y, 6);
    tape.backward(value);
    println!(
        "reverse model at (1, 2, n=6): value {:.6}  x_grad {:.6}  y_grad {:.6}",
        value.value(),
        x.adjoint(),
        y.adjoint()
    );

    let tape = Tape::new();
    let (x, y) = (tape.var(1.5), tape.var(2.0));
    let mut t = x * y;
    while t < 100.0 {
        t = t * t;
    }
    let r = t.log() - y.exp();
    tape.backward(r);
    println!(
        "while (t < 100) t = t * t: r {:.6}  x adjoint {:.15}  y adjoint {:.15}",
        r.value(),
        x.adjoint(),
        y.adjoint()
    );

    let (rate0, cap0) = (0.7, 40.0);
    let tape = Tape::with_capacity(40_000);
    let (rate, cap) = (tape.var(rate0), tape.var(cap0));
    let loss = logistic_loss(rate, cap, &LOGISTIC_OBS);
    let gradient = tape.gradient(loss, &[rate, cap]);
    let by_rate = logistic_loss(Dual::variable(rate0), Dual::constant(cap0), &LOGISTIC_OBS);
    let by_cap = logistic_loss(Dual::constant(rate0), Dual::variable(cap0), &LOGISTIC_OBS);
    println!(
        "logistic growth at rate {rate0}, cap {cap0}: loss {:.6} ({} tape nodes)",
        loss.value(),
        tape.len()
    );
    println!(
        "  tape  d/drate {:.9}  d/dcap {:.9}",
        gradient[0], gradient[1]
    );
    println!(
        "  dual  d/drate {:.9}  d/dcap {:.9}",
        by_rate.tangent, by_cap.tangent
    );
}
