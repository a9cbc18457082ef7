#!/usr/bin/env python3
"""gradlift against JAX on losses that read arrays at computed positions.

Three programs, each at three sizes growing tenfold, so that the cost of
the gradient of m lookups into n elements shows itself as O(m + n):

- lookup (benches/peers/indexed/lookup.grad): Σᵢ w[idx[i]]² · x[i];
- embedding_bag (benches/peers/indexed/embedding_bag.grad): m rows of a
  v × 16 table, scaled, scattered into v bins by reduce_by_index, scored
  against a target row;
- ba (crates/gradlift-cli/gradbench/ba.grad, `loss`): the sum of squares of
  bundle adjustment's residuals, observation j reading camera camera_of[j]
  and point point_of[j], at the sizes of ADBench's ba1, ba5 and ba10
  (random observations).

Inputs are random (fixed seeds) and the same for both. gradlift runs
through `gradlift bench --at @input.json --json` (the native call alone,
the median of repeated calls); JAX is `jax.jit` of the loss and of
`jax.value_and_grad`, float64, CPU, inputs on the device before timing and
`block_until_ready` inside the timed region, the median of repeated calls
after one call that compiles. The value and gradient of both are compared
at the first size of each program before its row is written.

    benches/peers/run_indexed.sh            # builds gradlift, installs JAX
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import jax
import jax.numpy as jnp

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_platforms", "cpu")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# ---------------------------------------------------------------- JAX side


def lookup(w, idx, x):
    a = w[idx]
    return jnp.sum(a * a * x)


def embedding_bag(E, bag, c, t):
    rows = E[bag] * c[:, None]
    pooled = jnp.zeros_like(E).at[bag].add(rows)
    return jnp.sum((pooled - t[None, :]) ** 2)


def rodrigues(rot, x):
    sqtheta = jnp.sum(rot * rot)
    nonzero = sqtheta != 0
    theta = jnp.sqrt(jnp.where(nonzero, sqtheta, 1.0))
    w = rot / theta
    c, s = jnp.cos(theta), jnp.sin(theta)
    rotated = x * c + jnp.cross(w, x) * s + w * (jnp.dot(w, x) * (1 - c))
    return jnp.where(nonzero, rotated, x + jnp.cross(rot, x))


def project(cam, x):
    xcam = rodrigues(cam[0:3], x - cam[3:6])
    p = xcam[0:2] / xcam[2]
    rsq = jnp.sum(p * p)
    return p * (1 + cam[9] * rsq + cam[10] * rsq * rsq) * cam[6] + cam[7:9]


def ba(cams, points, weights, feats, camera_of, point_of):
    proj = jax.vmap(project)(cams[camera_of], points[point_of])
    e = weights[:, None] * (proj - feats)
    v = 1 - weights * weights
    return jnp.sum(e * e) + jnp.sum(v * v)


# ------------------------------------------------------------------ inputs


def lookup_input(rng, n):
    return {
        "w": rng.standard_normal(n),
        "idx": rng.integers(0, n, n),
        "x": rng.standard_normal(n),
    }


def embedding_input(rng, v):
    d, m = 16, 2 * v
    return {
        "E": rng.standard_normal((v, d)),
        "bag": rng.integers(0, v, m),
        "c": rng.standard_normal(m),
        "t": rng.standard_normal(d),
    }


def ba_input(rng, size):
    n, m, p = size
    cams = np.empty((n, 11))
    cams[:, 0:3] = rng.normal(0, 0.1, (n, 3))
    cams[:, 3:6] = rng.normal(0, 1, (n, 3))
    cams[:, 6] = 500 + rng.normal(0, 10, n)
    cams[:, 7:9] = rng.normal(0, 1, (n, 2))
    cams[:, 9:11] = rng.normal(0, 1e-3, (n, 2))
    points = rng.normal(0, 1, (m, 3))
    points[:, 2] += 10
    return {
        "cams": cams,
        "points": points,
        "weights": 1 + rng.normal(0, 0.1, p),
        "feats": rng.normal(0, 100, (p, 2)),
        "camera_of": rng.integers(0, n, p),
        "point_of": rng.integers(0, m, p),
    }


CASES = [
    ("lookup", "benches/peers/indexed/lookup.grad", "lookup", lookup, lookup_input,
     [10_000, 100_000, 1_000_000], ["w", "x"]),
    ("embedding_bag", "benches/peers/indexed/embedding_bag.grad", "embedding_bag",
     embedding_bag, embedding_input, [5_000, 50_000, 500_000], ["E", "c", "t"]),
    ("ba", "crates/gradlift-cli/gradbench/ba.grad", "loss", ba, ba_input,
     [(49, 7776, 31843), (257, 65132, 225911), (1197, 126327, 563734)],
     ["cams", "points", "weights", "feats"]),
]


# ----------------------------------------------------------------- timing


def median_seconds(f, seconds):
    f()  # compiles
    times = []
    start = time.perf_counter()
    while len(times) < 5 or time.perf_counter() - start < seconds:
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def jax_times(fn, inputs, wrt, seconds):
    names = list(inputs)
    args = [jnp.asarray(inputs[k]) for k in names]
    args = [jax.device_put(a) for a in args]
    argnums = tuple(names.index(k) for k in wrt)
    primal = jax.jit(fn)
    both = jax.jit(jax.value_and_grad(fn, argnums=argnums))
    t0 = time.perf_counter()
    jax.block_until_ready(both(*args))
    first = time.perf_counter() - t0
    p = median_seconds(lambda: jax.block_until_ready(primal(*args)), seconds)
    g = median_seconds(lambda: jax.block_until_ready(both(*args)), seconds)
    value, grads = both(*args)
    return p, g, first, float(value), [np.asarray(x) for x in grads]


def gradlift_times(gradlift, path, fn, input_file, seconds, wrt):
    out = subprocess.run(
        [gradlift, "bench", path, "--fn", fn, "--at", "@" + input_file, "--json",
         "--seconds", str(seconds), "--wrt", ",".join(wrt)],
        capture_output=True, text=True, check=True, cwd=ROOT,
    )
    r = json.loads(out.stdout)
    return r["primal_ns"] * 1e-9, r["grad_ns"] * 1e-9, r["compile_ms"] * 1e-3


def gradlift_gradient(gradlift, path, fn, input_file, wrt):
    out = subprocess.run(
        [gradlift, "grad", path, "--fn", fn, "--at", "@" + input_file, "--json",
         "--wrt", ",".join(wrt)],
        capture_output=True, text=True, check=True, cwd=ROOT,
    )
    r = json.loads(out.stdout)
    return r["value"], [np.asarray(r["gradient"][k], dtype=float) for k in wrt]


def main(cases=CASES):
    parser = argparse.ArgumentParser()
    parser.add_argument("--gradlift", default=os.path.join(ROOT, "target/release/gradlift"))
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--cases", nargs="*", default=[c[0] for c in cases])
    args = parser.parse_args()
    print(f"JAX {jax.__version__}, numpy {np.__version__}")
    print()
    print("| program | size | gradlift primal | gradlift value+grad | grad/primal | JAX primal | JAX value+grad | gradlift/JAX (value+grad) | gradlift compile | JAX first call |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, path, fn, jfn, make, sizes, wrt in cases:
        if name not in args.cases:
            continue
        for k, size in enumerate(sizes):
            rng = np.random.default_rng(7 + k)
            inputs = make(rng, size)
            with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
                json.dump({key: v.tolist() for key, v in inputs.items()}, f)
                input_file = f.name
            try:
                jp, jg, jfirst, jvalue, jgrads = jax_times(jfn, inputs, wrt, args.seconds)
                if k == 0:
                    value, grads = gradlift_gradient(args.gradlift, path, fn, input_file, wrt)
                    scale = max(1.0, abs(jvalue))
                    assert abs(value - jvalue) <= 1e-9 * scale, (name, value, jvalue)
                    for key, a, b in zip(wrt, grads, jgrads):
                        err = np.max(np.abs(a.reshape(b.shape) - b)) / max(1.0, np.max(np.abs(b)))
                        assert err <= 1e-9, (name, key, err)
                gp, gg, gc = gradlift_times(args.gradlift, path, fn, input_file, args.seconds, wrt)
            finally:
                os.unlink(input_file)
            ms = lambda s: f"{s * 1e3:.3f} ms"
            print(f"| {name} | {size} | {ms(gp)} | {ms(gg)} | {gg / gp:.2f} | {ms(jp)} | {ms(jg)} | {gg / jg:.2f} | {ms(gc)} | {ms(jfirst)} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
