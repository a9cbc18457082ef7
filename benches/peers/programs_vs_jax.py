#!/usr/bin/env python3
"""gradlift against JAX on array programs a user writes (benches/peers/programs):

- classifier: a d–h–k tanh classifier with a softmax cross-entropy loss
  over m rows, the gradient with respect to the weights and biases, at
  d–h–k = 784–128–10 and m = 32, 256 and 2,048 rows;
- classifier_matmul: the same loss with each layer one `matmul` over all
  rows, as JAX's is written;
- mlp: examples/mlp.grad, a d–h–1 tanh network's mean squared error over
  m rows (its layer applied one row at a time, through a call of
  `predict`), at d = h = 100 and m = 1,000 and 10,000.

Timing and checking as in indexed_vs_jax.py (the same code): gradlift
through `gradlift bench --at @input.json --json`, JAX jit(value_and_grad)
with `block_until_ready` inside the timed region, medians; values and
gradients compared at the first size.

    benches/peers/run_programs.sh [--seconds S] [--cases classifier]
"""

import sys

import numpy as np

import jax
import jax.numpy as jnp

from indexed_vs_jax import main


def classifier(W1, b1, W2, b2, X, Y):
    hidden = jnp.tanh(X @ W1.T + b1)
    logits = hidden @ W2.T + b2
    lse = jax.scipy.special.logsumexp(logits, axis=1)
    return jnp.mean(lse - jnp.sum(Y * logits, axis=1))


def classifier_input(rng, m):
    d, h, k = 784, 128, 10
    return {
        "W1": rng.normal(0, 1 / np.sqrt(d), (h, d)),
        "b1": rng.normal(0, 0.1, h),
        "W2": rng.normal(0, 1 / np.sqrt(h), (k, h)),
        "b2": rng.normal(0, 0.1, k),
        "X": rng.random((m, d)),
        "Y": np.eye(k)[rng.integers(0, k, m)],
    }


def mlp(W1, b1, w2, b2, X, y):
    errors = jnp.tanh(X @ W1.T + b1) @ w2 + b2 - y
    return jnp.sum(errors * errors) / X.shape[0]


def mlp_input(rng, m):
    d, h = 100, 100
    return {
        "W1": rng.normal(0, 1 / np.sqrt(d), (h, d)),
        "b1": rng.normal(0, 0.1, h),
        "w2": rng.normal(0, 1 / np.sqrt(h), h),
        "b2": np.float64(0.1),
        "X": rng.random((m, d)),
        "y": rng.random(m),
    }


CASES = [
    ("classifier", "benches/peers/programs/classifier.grad", "classifier", classifier,
     classifier_input, [32, 256, 2048], ["W1", "b1", "W2", "b2"]),
    ("classifier_matmul", "benches/peers/programs/classifier_matmul.grad", "classifier",
     classifier, classifier_input, [32, 256, 2048], ["W1", "b1", "W2", "b2"]),
    ("mlp", "examples/mlp.grad", "loss", mlp, mlp_input, [1000, 10000],
     ["W1", "b1", "w2", "b2"]),
]


if __name__ == "__main__":
    sys.exit(main(CASES))
