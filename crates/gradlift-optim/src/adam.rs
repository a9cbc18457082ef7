//! Adam (Kingma & Ba, 2015), for stochastic and minibatch training.
//!
//! With `g` the gradient at step `t` (from 1):
//! `m ← β₁ m + (1 − β₁) g`, `v ← β₂ v + (1 − β₂) g²`,
//! `x ← x − α m̂ / (√v̂ + ε)` with `m̂ = m / (1 − β₁ᵗ)`, `v̂ = v / (1 − β₂ᵗ)`.
//!
//! On minibatches, every step draws `batch` distinct rows (of the loss's
//! [`RowAxis`](crate::RowAxis)) at random and evaluates the compiled
//! gradient with the row count set to `batch`; a loss that is a mean over
//! rows therefore gets an unbiased estimate of its gradient.

use crate::solve::{norm, Fit, FitOptions, Progress};
use crate::{Error, Loss};

/// Adam's settings.
#[derive(Clone, Debug)]
pub struct AdamOptions {
    /// The step size α.
    pub learning_rate: f64,
    /// β₁, the decay of the first moment.
    pub beta1: f64,
    /// β₂, the decay of the second moment.
    pub beta2: f64,
    /// ε, added to the root of the second moment.
    pub epsilon: f64,
    /// Rows per minibatch (`None`: all rows every step).
    pub batch: Option<usize>,
    /// Seed of the row sampler.
    pub seed: u64,
    /// On all rows, stop when the gradient norm falls below this.
    pub grad_tolerance: f64,
}

impl Default for AdamOptions {
    fn default() -> AdamOptions {
        AdamOptions {
            learning_rate: 0.01,
            beta1: 0.9,
            beta2: 0.999,
            epsilon: 1e-8,
            batch: None,
            seed: 1,
            grad_tolerance: f64::EPSILON.sqrt(),
        }
    }
}

/// Adam's state: the two moment estimates and the step count.
#[derive(Clone, Debug)]
pub struct Adam {
    options: AdamOptions,
    m: Vec<f64>,
    v: Vec<f64>,
    t: i32,
}

impl Adam {
    /// Adam for `dim` parameters.
    pub fn new(dim: usize, options: AdamOptions) -> Adam {
        Adam {
            options,
            m: vec![0.0; dim],
            v: vec![0.0; dim],
            t: 0,
        }
    }

    /// One step: moves `x` against `gradient`.
    pub fn step(&mut self, x: &mut [f64], gradient: &[f64]) {
        let AdamOptions {
            learning_rate,
            beta1,
            beta2,
            epsilon,
            ..
        } = self.options;
        self.t += 1;
        let (c1, c2) = (1.0 - beta1.powi(self.t), 1.0 - beta2.powi(self.t));
        for (((x, g), m), v) in x.iter_mut().zip(gradient).zip(&mut self.m).zip(&mut self.v) {
            *m = beta1 * *m + (1.0 - beta1) * g;
            *v = beta2 * *v + (1.0 - beta2) * g * g;
            *x -= learning_rate * (*m / c1) / ((*v / c2).sqrt() + epsilon);
        }
    }
}

/// A small deterministic generator (SplitMix64) for drawing rows.
struct Rows(u64);

impl Rows {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// `k` distinct indices below `n` (a partial Fisher–Yates shuffle of
    /// `all`, which holds a permutation of `0..n`).
    fn draw(&mut self, all: &mut [usize], k: usize) -> Vec<usize> {
        let n = all.len();
        for i in 0..k {
            let j = i + (self.next() % (n - i) as u64) as usize;
            all.swap(i, j);
        }
        all[..k].to_vec()
    }
}

pub(crate) fn run(
    loss: &mut Loss,
    mut x: Vec<f64>,
    options: &FitOptions,
    mut progress: Progress,
) -> Result<Fit, Error> {
    let settings = options.adam.clone();
    let axis = match settings.batch {
        Some(batch) => {
            let axis = loss.row_axis().ok_or(Error::NoRows)?;
            if batch == 0 || batch > axis.rows {
                return Err(Error::BatchSize {
                    batch,
                    rows: axis.rows,
                    size: axis.size.to_string(),
                });
            }
            Some((axis, batch))
        }
        None => None,
    };
    let mut adam = Adam::new(x.len(), settings.clone());
    let mut rows = Rows(settings.seed);
    let mut order: Vec<usize> = (0..axis.as_ref().map_or(0, |(a, _)| a.rows)).collect();
    let mut history = vec![loss.value(&x)?];
    let mut iters = 0;
    let mut evaluations = (1, 0);
    let mut stop = "Maximum number of iterations reached".to_string();
    while iters < options.max_iters {
        if let Some((axis, batch)) = &axis {
            let chosen = rows.draw(&mut order, *batch);
            loss.select_rows(axis, Some(&chosen));
        }
        let evaluated = loss.value_and_gradient(&x);
        evaluations.1 += 1;
        if let Some((axis, _)) = &axis {
            loss.select_rows(axis, None);
        }
        let (value, gradient) = evaluated?;
        if axis.is_none() && norm(&gradient) < settings.grad_tolerance {
            stop = "Gradient norm below tolerance".to_string();
            break;
        }
        if !value.is_finite() {
            stop = format!("stopped: the loss became {value}");
            break;
        }
        adam.step(&mut x, &gradient);
        iters += 1;
        history.push(loss.value(&x)?);
        evaluations.0 += 1;
        progress(iters, *history.last().expect("not empty"));
    }
    let (value, gradient) = loss.value_and_gradient(&x)?;
    Ok(Fit {
        x,
        loss: value,
        grad_norm: norm(&gradient),
        iters,
        history,
        evaluations,
        stop,
    })
}
