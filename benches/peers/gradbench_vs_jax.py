#!/usr/bin/env python3
"""gradlift against JAX on the GradBench modules hello, lse, llsq, ode, kmeans, lstm, gmm, det, ba, ht, saddle, particle.

Each module runs at the GradBench sizes through `gradlift gradbench` (the
GradBench protocol on a pipe: the times are those the tool reports, the
native call alone) and through the same functions written in JAX
(`jax.jit` of the function and of `jax.grad`, float64, CPU; inputs placed
on the device before timing, `block_until_ready` inside the timed region).
Both answers are compared before a row is written.

Columns: the median time per evaluation of each, their ratio
(gradlift / JAX), gradlift's compile time (once per module, at `define`:
every function of the module, for every size) and JAX's (per function and
size, since `jax.jit` compiles once per input shape: the first call's time
minus the median), and the first call of each with its compilation
included (gradlift: the module's compile time plus its first run).

Run it through benches/peers/run.sh, which builds gradlift in release
mode and installs JAX into a virtual environment:

    benches/peers/run.sh                 # every size
    benches/peers/run.sh --quick         # the smaller half of the sizes
"""

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

import jax
import jax.numpy as jnp

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_platforms", "cpu")


# ---------------------------------------------------------------- JAX side


def lse_primal(x):
    a = jnp.max(x)
    return a + jnp.log(jnp.sum(jnp.exp(x - a)))


def llsq_primal(x, n):
    m = x.shape[0]
    t = -1.0 + 2.0 * jnp.arange(n) / (n - 1)
    powers = jnp.vander(t, m, increasing=True)  # powers[i, j] = t_i^j
    r = jnp.sign(t) - powers @ x
    return 0.5 * jnp.sum(r * r)


def ode_primal(x, s):
    h = 2.0 / s

    def f(y):
        return jnp.concatenate([x[:1], x[1:] * y[:-1]])

    def step(y, _):
        k1 = f(y)
        k2 = f(y + h / 2 * k1)
        k3 = f(y + h / 2 * k2)
        k4 = f(y + h * k3)
        return y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4), None

    y, _ = jax.lax.scan(step, jnp.zeros_like(x), None, length=s)
    return y


def kmeans_cost(points, centroids):
    # |c - p|^2 = |p|^2 + |c|^2 - 2 p.c, the distances by one matrix product.
    d2 = (
        jnp.sum(points**2, axis=1)[:, None]
        + jnp.sum(centroids**2, axis=1)[None, :]
        - 2 * points @ centroids.T
    )
    return jnp.sum(jnp.min(d2, axis=1))


def kmeans_dir(points, centroids):
    grad = jax.grad(lambda c: kmeans_cost(points, c))
    j, h = jax.jvp(grad, (centroids,), (jnp.ones_like(centroids),))
    return j / h


def lstm_objective(main, extra, state, sequence):
    # main: 2l x 4b (weights, biases of each layer), extra: 3 x b, state:
    # 2l x b (hidden, cell), sequence: c x b; the layers unrolled (l is
    # static), the characters a scan.
    l, b = main.shape[0] // 2, extra.shape[1]

    def step(carry, io):
        state, total = carry
        x = io[0] * extra[0]
        new = []
        for k in range(l):
            w, bias = main[2 * k], main[2 * k + 1]
            h, c = state[2 * k], state[2 * k + 1]
            forget = jax.nn.sigmoid(x * w[:b] + bias[:b])
            ingate = jax.nn.sigmoid(h * w[b : 2 * b] + bias[b : 2 * b])
            outgate = jax.nn.sigmoid(x * w[2 * b : 3 * b] + bias[2 * b : 3 * b])
            change = jnp.tanh(h * w[3 * b :] + bias[3 * b :])
            c = c * forget + ingate * change
            h = outgate * jnp.tanh(c)
            new += [h, c]
            x = h
        y = x * extra[1] + extra[2]
        lse = jnp.log(jnp.sum(jnp.exp(y)) + 2)
        return (jnp.stack(new), total + jnp.sum(io[1] * (y - lse))), None

    pairs = jnp.stack([sequence[:-1], sequence[1:]], axis=1)
    (_, total), _ = jax.lax.scan(step, (state, 0.0), pairs)
    return -total / (b * (sequence.shape[0] - 1))


def lstm_jacobian(main, extra, state, sequence):
    gm, ge = jax.grad(lstm_objective, argnums=(0, 1))(main, extra, state, sequence)
    return jnp.concatenate([gm.ravel(), ge.ravel()])


def gmm_objective(x, m, gamma, alpha, mu, q, l):
    """The log-posterior of GradBench's gmm: k components in d dimensions,
    the inverse-covariance factors exp(q) on the diagonal and the packed
    columns of l below it."""
    n, d = x.shape
    k = alpha.shape[0]
    # Packed column by column: (row, col) for col ascending, then row.
    cols, rows = np.triu_indices(d, 1)
    lower = jnp.zeros((k, d, d)).at[:, rows, cols].set(l)
    centered = x[:, None, :] - mu[None, :, :]  # n × k × d
    qx = jnp.exp(q)[None] * centered + jnp.einsum("krc,nkc->nkr", lower, centered)
    inner = alpha[None] + jnp.sum(q, axis=1)[None] - 0.5 * jnp.sum(qx * qx, axis=2)
    fit = jnp.sum(jax.scipy.special.logsumexp(inner, axis=1))
    dof = d + m + 1
    wishart = jnp.sum(
        0.5 * gamma**2 * (jnp.sum(jnp.exp(2 * q), axis=1) + jnp.sum(l * l, axis=1))
        - m * jnp.sum(q, axis=1)
    )
    prior = k * (
        dof * d * jnp.log(gamma / np.sqrt(2))
        - jax.scipy.special.multigammaln(0.5 * dof, d)
    ) - wishart
    return (
        -0.5 * n * d * np.log(2 * np.pi)
        + fit
        - n * jax.scipy.special.logsumexp(alpha)
        + prior
    )


def gmm_jacobian(x, m, gamma, alpha, mu, q, l):
    grads = jax.grad(gmm_objective, argnums=(3, 4, 5, 6))(x, m, gamma, alpha, mu, q, l)
    return jnp.concatenate([g.ravel() for g in grads])


def det_primal(a, ell):
    return jnp.linalg.det(a.reshape(ell, ell))


# saddle and particle: nested derivatives through loops that stop on a
# condition, GradBench's solver written with `lax.while_loop` (as its
# Futhark tool writes it with `loop … while`). JAX differentiates
# `lax.while_loop` in forward mode only: the outer derivative by `jacfwd`
# (`ff`, `fr`) compiles and runs under `jax.jit`; by `jax.grad` (`rr`,
# `rf`) JAX refuses ("Reverse-mode differentiation does not work for
# lax.while_loop"), and the table says so.


def _norm(v):
    return jnp.sqrt(jnp.sum(v * v))


def argmin(grad, f, x):
    g = grad(f)

    def step(s):
        x, fx, gx, eta, i, _ = s
        done = (x, fx, gx, eta, i, False)

        def move(_):
            x2 = x - eta * gx

            def far(_):
                fx2 = f(x2)
                return jax.lax.cond(
                    fx2 < fx,
                    lambda _: (x2, fx2, g(x2), eta, i + 1, True),
                    lambda _: (x, fx, gx, eta / 2, jnp.int32(0), True),
                    None,
                )

            return jax.lax.cond(_norm(x - x2) <= 1e-5, lambda _: done, far, None)

        def go_on(_):
            return jax.lax.cond(
                i == 10, lambda _: (x, fx, gx, 2 * eta, jnp.int32(0), True), move, None
            )

        return jax.lax.cond(_norm(gx) <= 1e-5, lambda _: done, go_on, None)

    start = (x, f(x), g(x), jnp.float64(1e-5), jnp.int32(0), True)
    return jax.lax.while_loop(lambda s: s[5], step, start)[0]


def argmax(grad, f, x):
    return argmin(grad, lambda y: -f(y), x)


def saddle(grad0, grad1, start):
    def f(p1, p2):
        return (p1[0] ** 2 + p1[1] ** 2) - (p2[0] ** 2 + p2[1] ** 2)

    def r1_cost(p1):
        return f(p1, argmax(grad1, lambda p: f(p1, p), start))

    r1 = argmin(grad0, r1_cost, start)
    r2 = argmax(grad0, lambda p: f(r1, p), start)
    return jnp.concatenate([r1, r2])


def particle(grad0, grad1, w0):
    def flight(w):
        charges = [jnp.stack([10.0, 10.0 - w]), jnp.array([10.0, 0.0])]

        def potential(x):
            return sum(1 / _norm(x - c) for c in charges)

        def step(s):
            x, xdot, _ = s
            xddot = -grad1(potential)(x)
            x2 = x + 0.1 * xdot
            return jax.lax.cond(
                x2[1] > 0,
                lambda _: (x2, xdot + 0.1 * xddot, True),
                lambda _: (x, xdot, False),
                None,
            )

        start = (jnp.array([0.0, 8.0]), jnp.array([0.75, 0.0]), True)
        x, xdot, _ = jax.lax.while_loop(lambda s: s[2], step, start)
        dt = -x[1] / xdot[1]
        landing = x[0] + dt * xdot[0]
        return landing * landing

    return argmin(grad0, lambda v: flight(v[0]), jnp.stack([w0]))[0]


# ba: bundle adjustment as GradBench sends it (one camera, point, weight
# and feature, repeated n, m, p and p times; observation j sees camera
# j mod n and point j mod m). The JAX side builds the repeated arrays
# before timing and computes every residual, or every observation's 2 × 15
# Jacobian (`jax.jacrev` under `jax.vmap`); the answer compared is
# GradBench's: the first of each kind (and the last weight's derivative).


def ba_project(cam, x):
    rot, centre, f, c, k = cam[:3], cam[3:6], cam[6], cam[7:9], cam[9:11]
    xc = x - centre
    theta2 = jnp.dot(rot, rot)
    theta = jnp.sqrt(theta2)
    w = rot / theta
    cos, sin = jnp.cos(theta), jnp.sin(theta)
    rotated = xc * cos + jnp.cross(w, xc) * sin + w * jnp.dot(w, xc) * (1 - cos)
    small = xc + jnp.cross(rot, xc)
    p = jnp.where(theta2 != 0, rotated, small)
    uv = p[:2] / p[2]
    r2 = jnp.dot(uv, uv)
    distortion = 1 + k[0] * r2 + k[1] * r2 * r2
    return uv * distortion * f + c


def ba_residual(unknowns, feat):
    cam, x, w = unknowns[:11], unknowns[11:14], unknowns[14]
    return w * (ba_project(cam, x) - feat)


def ba_objective(cams, points, weights, feats, cam_of, point_of):
    unknowns = jnp.concatenate(
        [cams[cam_of], points[point_of], weights[:, None]], axis=1
    )
    reproj = jax.vmap(ba_residual)(unknowns, feats)
    return jnp.concatenate([reproj[0], jnp.array([1 - weights[0] ** 2])])


def ba_jacobian(cams, points, weights, feats, cam_of, point_of):
    unknowns = jnp.concatenate(
        [cams[cam_of], points[point_of], weights[:, None]], axis=1
    )
    blocks = jax.vmap(jax.jacrev(ba_residual))(unknowns, feats)
    return jnp.concatenate([jnp.ravel(blocks[0]), jnp.array([-2 * weights[-1]])])


def ht_euler(p):
    """The rotation of the Euler angles (x, z, y), 3 × 3: Rz·Ry·Rx."""
    cx, sx = jnp.cos(p[0]), jnp.sin(p[0])
    cy, sy = jnp.cos(p[2]), jnp.sin(p[2])
    cz, sz = jnp.cos(p[1]), jnp.sin(p[1])
    return jnp.array([
        [cy * cz, sx * sy * cz - cx * sz, sx * sz + cx * sy * cz],
        [cy * sz, cx * cz + sx * sy * sz, cx * sy * sz - sx * cz],
        [-sy, sx * cy, cx * cy],
    ])


def ht_angle_axis(a):
    n = jnp.sqrt(jnp.sum(a * a))
    safe = jnp.where(n < 1e-4, 1.0, n)
    x, y, z = a / safe
    s, c = jnp.sin(safe), jnp.cos(safe)
    r = jnp.array([
        [x * x + (1 - x * x) * c, x * y * (1 - c) - z * s, x * z * (1 - c) + y * s],
        [x * y * (1 - c) + z * s, y * y + (1 - y * y) * c, y * z * (1 - c) - x * s],
        [x * z * (1 - c) - y * s, z * y * (1 - c) + x * s, z * z + (1 - z * z) * c],
    ])
    return jnp.where(n < 1e-4, jnp.eye(3), r)


def ht_pose(theta, bones):
    """The pose parameters, (bones + 3) × 3 (ADBench's to_pose_params)."""
    rows = [theta[0:3], jnp.ones(3), theta[3:6]]
    zero = jnp.zeros(())
    for j in range(3, bones + 3):
        if j >= 25 or j == 3 or j % 4 == 0:
            rows.append(jnp.zeros(3))
        elif j % 4 == 1:
            rows.append(jnp.stack([theta[j + 1], theta[j + 2], zero]))
        else:
            rows.append(jnp.stack([theta[j + 2], zero, zero]))
    return jnp.stack(rows)


def ht_vertices(theta, parents, base_relatives, inverse_base_absolutes, base_positions, weights, mirrored):
    bones = base_relatives.shape[0]
    poses = ht_pose(theta, bones)
    rot = jax.vmap(ht_euler)(poses[3:])
    tr = jnp.zeros((bones, 4, 4)).at[:, :3, :3].set(rot).at[:, 3, 3].set(1.0)
    relatives = base_relatives @ tr

    def absolute(i, acc):
        parent = parents[i]
        t = jnp.where(parent == -1, relatives[i], acc[jnp.maximum(parent, 0)] @ relatives[i])
        return acc.at[i].set(t)

    absolutes = jax.lax.fori_loop(0, bones, absolute, relatives)
    transforms = (absolutes @ inverse_base_absolutes)[:, :3, :].reshape(bones, 12)
    blend = (weights @ transforms).reshape(-1, 3, 4)
    local = jnp.einsum("vrc,vc->vr", blend, base_positions)
    local = local.at[:, 0].multiply(jnp.where(mirrored, -1.0, 1.0))
    rotation = ht_angle_axis(poses[0]) * poses[1][None, :]
    return local @ rotation.T + poses[2]


def ht_objective(theta, us, parents, base_relatives, inverse_base_absolutes, base_positions, weights, triangles, mirrored, correspondences, points):
    v = ht_vertices(theta, parents, base_relatives, inverse_base_absolutes, base_positions, weights, mirrored)
    if us.shape[0] == 0:
        model = v[correspondences]
    else:
        tri = triangles[correspondences]
        model = (us[:, 0:1] * v[tri[:, 0]] + us[:, 1:2] * v[tri[:, 1]]
                 + (1 - us[:, 0:1] - us[:, 1:2]) * v[tri[:, 2]])
    return jnp.ravel(points - model)


def ht_jacobian(theta, us, *rest):
    """The rows of the residuals' Jacobian: by forward mode for theta's 26
    columns and, when there are barycentric coordinates, two compressed
    forward passes for theirs (each residual depends on its own only),
    placed first as GradBench takes them."""
    dtheta = jax.jacfwd(lambda t: ht_objective(t, us, *rest))(theta)
    if us.shape[0] == 0:
        return dtheta
    f = lambda u: ht_objective(theta, u, *rest)
    du = [jax.jvp(f, (us,), (jnp.zeros_like(us).at[:, c].set(1.0),))[1] for c in range(2)]
    return jnp.concatenate([jnp.stack(du, axis=1), dtheta], axis=1)


JAX = {
    ("ba", "objective"): jax.jit(ba_objective),
    ("ba", "jacobian"): jax.jit(ba_jacobian),
    ("hello", "square"): jax.jit(lambda x: x * x),
    ("hello", "double"): jax.jit(jax.grad(lambda x: x * x)),
    ("lse", "primal"): jax.jit(lse_primal),
    ("lse", "gradient"): jax.jit(jax.grad(lse_primal)),
    ("llsq", "primal"): jax.jit(llsq_primal, static_argnums=1),
    ("llsq", "gradient"): jax.jit(jax.grad(llsq_primal), static_argnums=1),
    ("ode", "primal"): jax.jit(ode_primal, static_argnums=1),
    ("ode", "gradient"): jax.jit(
        jax.grad(lambda x, s: ode_primal(x, s)[-1]), static_argnums=1
    ),
    ("kmeans", "cost"): jax.jit(kmeans_cost),
    ("kmeans", "dir"): jax.jit(kmeans_dir),
    ("lstm", "objective"): jax.jit(lstm_objective),
    ("lstm", "jacobian"): jax.jit(lstm_jacobian),
    ("gmm", "objective"): jax.jit(gmm_objective, static_argnums=1),
    ("gmm", "jacobian"): jax.jit(gmm_jacobian, static_argnums=1),
    ("ht", "objective"): jax.jit(ht_objective),
    ("ht", "jacobian"): jax.jit(ht_jacobian),
    ("det", "primal"): jax.jit(det_primal, static_argnums=1),
    ("det", "gradient"): jax.jit(jax.grad(det_primal), static_argnums=1),
}
for _mode, (_g0, _g1) in {
    "rr": (jax.grad, jax.grad),
    "ff": (jax.jacfwd, jax.jacfwd),
    "fr": (jax.jacfwd, jax.grad),
    "rf": (jax.grad, jax.jacfwd),
}.items():
    JAX[("saddle", _mode)] = jax.jit(lambda start, g0=_g0, g1=_g1: saddle(g0, g1, start))
    JAX[("particle", _mode)] = jax.jit(lambda w, g0=_g0, g1=_g1: particle(g0, g1, w))


def jax_args(module, input):
    """The JAX arguments of an input, on the device."""
    if module == "hello":
        return (jnp.float64(input),)
    if module == "lse":
        return (jax.device_put(np.array(input["x"])),)
    if module == "llsq":
        return (jax.device_put(np.array(input["x"])), input["n"])
    if module == "ode":
        return (jax.device_put(np.array(input["x"])), input["s"])
    if module == "kmeans":
        return (
            jax.device_put(np.array(input["points"])),
            jax.device_put(np.array(input["centroids"])),
        )
    if module == "lstm":
        return tuple(
            jax.device_put(np.array(input[k]))
            for k in ["main_params", "extra_params", "state", "sequence"]
        )
    if module == "gmm":
        arrays = [jax.device_put(np.array(input[k])) for k in ["alpha", "mu", "q", "l"]]
        return (jax.device_put(np.array(input["x"])), input["m"], input["gamma"], *arrays)
    if module == "det":
        return (jax.device_put(np.array(input["A"])), input["ell"])
    if module == "ba":
        n, m, p = input["n"], input["m"], input["p"]
        j = np.arange(p)
        return tuple(
            jax.device_put(a)
            for a in [
                np.tile(np.array(input["cam"]), (n, 1)),
                np.tile(np.array(input["x"]), (m, 1)),
                np.full(p, input["w"]),
                np.tile(np.array(input["feat"]), (p, 1)),
                j % n,
                j % m,
            ]
        )
    if module == "ht":
        data, model = input["data"], input["data"]["model"]
        arrays = [
            np.array(input["theta"]),
            np.array(input["us"], dtype=np.float64).reshape(-1, 2),
            np.array(model["parents"]),
            np.array(model["base_relatives"]),
            np.array(model["inverse_base_absolutes"]),
            np.array(model["base_positions"]),
            np.array(model["weights"]),
            np.array(model["triangles"]),
            np.array(model["is_mirrored"]),
            np.array(data["correspondences"]),
            np.array(data["points"]),
        ]
        return tuple(jax.device_put(a) for a in arrays)
    if module == "saddle":
        return (jax.device_put(np.array(input["start"])),)
    if module == "particle":
        return (jnp.float64(input["w"]),)
    raise ValueError(module)


def time_jax(module, function, input, min_runs, min_seconds):
    f = JAX[(module, function)]
    args = jax_args(module, input)
    start = time.perf_counter_ns()
    out = jax.block_until_ready(f(*args))
    first = time.perf_counter_ns() - start
    times = []
    while len(times) < min_runs or sum(times) < min_seconds * 1e9:
        start = time.perf_counter_ns()
        out = jax.block_until_ready(f(*args))
        times.append(time.perf_counter_ns() - start)
    return np.asarray(out), first, float(np.median(times))


# ------------------------------------------------------------ gradlift side


class Tool:
    """`gradlift gradbench` on a pipe."""

    def __init__(self, binary):
        self.proc = subprocess.Popen(
            [binary, "gradbench"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.id = 0

    def send(self, message):
        message = dict(message, id=self.id)
        self.id += 1
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()
        answer = json.loads(self.proc.stdout.readline())
        assert answer["id"] == message["id"], answer
        return answer

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


# ------------------------------------------------------------------ sizes


def inputs(module, quick):
    """(description, input) at the GradBench sizes, inputs as GradBench
    draws them (uniform in [0, 1), fixed seed)."""
    rng = np.random.default_rng(31337)
    if module == "hello":
        yield "x=1.5", 1.5
    elif module == "lse":
        ns = [2500 * 2**i for i in range(10)]  # 2,500 … 1,280,000
        for n in ns[:5] if quick else ns:
            yield f"n={n}", {"x": rng.random(n).tolist()}
    elif module == "llsq":
        ns = [16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8196, 16392]
        for n in ns[::2] if quick else ns:
            yield f"m=128,n={n}", {"x": rng.random(128).tolist(), "n": n}
    elif module == "ode":
        cases = sorted(
            [(n, s) for n in [1000, 10000, 100000] for s in [1, 10, 100]],
            key=lambda c: c[0] * c[1],
        )
        for n, s in [c for c in cases if c[0] * c[1] <= 100000] if quick else cases:
            yield f"n={n},s={s}", {"x": rng.random(n).tolist(), "s": s}
    elif module == "kmeans":
        for n in [1000] if quick else [1000, 10000]:
            for k in [10, 100, 1000]:
                for d in [8, 16]:
                    points = rng.random((n, d))
                    # The last k points as centroids: every cluster has a point.
                    yield f"n={n},k={k},d={d}", {
                        "points": points.tolist(),
                        "centroids": points[-k:].tolist(),
                    }
    elif module == "lstm":
        # GradBench's sizes, ordered by l·c; b = 14 bits a character, the
        # sequence random bits (GradBench's are a text's).
        b = 14
        cases = sorted(
            [(l, c) for l in [2, 4, 6] for c in [1024, 4096, 8192]],
            key=lambda lc: lc[0] * lc[1],
        )
        for l, c in [lc for lc in cases if lc[1] == 1024] if quick else cases:
            yield f"l={l},c={c}", {
                "main_params": rng.random((2 * l, 4 * b)).tolist(),
                "extra_params": rng.random((3, b)).tolist(),
                "state": rng.random((2 * l, b)).tolist(),
                "sequence": (rng.random((c, b)) < 0.5).astype(float).tolist(),
            }
    elif module == "gmm":
        # GradBench's sizes, ordered by d·k, n = 1,000.
        cases = sorted(
            [(d, k) for d in [2, 10, 20, 32, 64] for k in [5, 10, 25, 50, 100]],
            key=lambda dk: dk[0] * dk[1],
        )
        for d, k in [c for c in cases if c[0] <= 20 and c[1] <= 25] if quick else cases:
            n = 1000
            yield f"d={d},k={k},n={n}", {
                "d": d, "k": k, "n": n, "m": 0, "gamma": 1.0,
                "x": rng.normal(size=(n, d)).tolist(),
                "alpha": rng.normal(size=k).tolist(),
                "mu": rng.uniform(size=(k, d)).tolist(),
                "q": rng.normal(size=(k, d)).tolist(),
                "l": rng.normal(size=(k, d * (d - 1) // 2)).tolist(),
            }
    elif module == "det":
        for ell in [5, 8, 11] if quick else range(5, 12):
            yield f"ell={ell}", {"A": rng.random(ell * ell).tolist(), "ell": ell}
    elif module == "ba":
        # GradBench's ADBench files (GRADBENCH_BA_DATA, a directory of
        # ba*_n*_m*_p*.txt): ba1 … ba5, or ba1 and ba3 with --quick.
        data = os.environ.get("GRADBENCH_BA_DATA", "/tmp/gradbench/evals/ba/data")
        for i in [1, 3] if quick else range(1, 6):
            found = [f for f in os.listdir(data) if f.startswith(f"ba{i}_")] if os.path.isdir(data) else []
            if not found:
                sys.exit(f"no ba{i} data in {data} (set GRADBENCH_BA_DATA)")
            lines = open(os.path.join(data, found[0])).read().split("\n")
            n, m, p = (int(v) for v in lines[0].split())
            yield found[0].removesuffix(".txt"), {
                "n": n, "m": m, "p": p,
                "cam": [float(v) for v in lines[1].split()],
                "x": [float(v) for v in lines[2].split()],
                "w": float(lines[3]),
                "feat": [float(v) for v in lines[4].split()],
            }
    elif module == "ht":
        # GradBench's ADBench files (GRADBENCH_HT_DATA, holding
        # complicated_big/ and simple_big/): hand1, 4, 8 and 11 of each
        # variant, or hand1 and 8 with --quick.
        data = os.environ.get("GRADBENCH_HT_DATA", "/tmp/gradbench/evals/ht/data")
        for variant in ["complicated", "simple"]:
            folder = os.path.join(data, f"{variant}_big")
            if not os.path.isdir(folder):
                sys.exit(f"no ht data in {folder} (set GRADBENCH_HT_DATA)")
            model = ht_model(os.path.join(folder, "model"))
            for i in [1, 8] if quick else [1, 4, 8, 11]:
                name = next(f for f in sorted(os.listdir(folder)) if f.startswith(f"hand{i}_"))
                yield f"{variant} {name.removesuffix('.txt')}", ht_input(
                    model, os.path.join(folder, name), variant == "complicated"
                )
    elif module == "saddle":
        yield "start=[1,1]", {"start": [1.0, 1.0]}
    elif module == "particle":
        yield "w=0", {"w": 0.0}


def ht_model(folder):
    """ADBench's hand model files, as GradBench sends the model."""
    def rows(name):
        with open(os.path.join(folder, name)) as f:
            return [line.strip().split(":") for line in f if line.strip()]

    bones = rows("bones.txt")
    vertices = rows("vertices.txt")
    weights = np.zeros((len(vertices), len(bones)))
    for v, atoms in enumerate(vertices):
        for k in range(int(atoms[8])):
            weights[v, int(atoms[9 + 2 * k])] = float(atoms[10 + 2 * k])
    return {
        "bone_count": len(bones),
        "bone_names": [b[0] for b in bones],
        "parents": [int(b[1]) for b in bones],
        "base_relatives": [np.array(b[2:18], float).reshape(4, 4).tolist() for b in bones],
        "inverse_base_absolutes": [np.array(b[18:34], float).reshape(4, 4).tolist() for b in bones],
        "base_positions": [[float(x) for x in v[:3]] + [1.0] for v in vertices],
        "weights": weights.tolist(),
        "triangles": [[int(x) for x in t] for t in rows("triangles.txt")],
        "is_mirrored": False,
    }


def ht_input(model, path, complicated):
    """A GradBench ht input from an ADBench hand file."""
    with open(path) as f:
        lines = f.read().split("\n")
    npts, ntheta = (int(v) for v in lines[0].split())
    points = [lines[1 + i].split() for i in range(npts)]
    rest = lines[1 + npts:]
    us = [[float(x) for x in rest[i].split()] for i in range(npts)] if complicated else []
    theta = [float(rest[(npts if complicated else 0) + i]) for i in range(ntheta)]
    return {
        "theta": theta,
        "us": us,
        "data": {
            "model": model,
            "correspondences": [int(p[0]) for p in points],
            "points": [[float(x) for x in p[1:]] for p in points],
        },
    }


FUNCTIONS = {
    "hello": ["square", "double"],
    "lse": ["primal", "gradient"],
    "llsq": ["primal", "gradient"],
    "ode": ["primal", "gradient"],
    "kmeans": ["cost", "dir"],
    "lstm": ["objective", "jacobian"],
    "gmm": ["objective", "jacobian"],
    "det": ["primal", "gradient"],
    "ba": ["objective", "jacobian"],
    "ht": ["objective", "jacobian"],
    "saddle": ["rr", "ff", "fr", "rf"],
    "particle": ["rr", "ff", "fr", "rf"],
}


def fmt_ns(ns):
    if ns < 1e3:
        return f"{ns:.0f} ns"
    if ns < 1e6:
        return f"{ns / 1e3:.3g} µs"
    if ns < 1e9:
        return f"{ns / 1e6:.3g} ms"
    return f"{ns / 1e9:.3g} s"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gradlift", default="target/release/gradlift")
    parser.add_argument("--modules", nargs="+", default=list(FUNCTIONS))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--min-runs", type=int, default=3)
    parser.add_argument("--min-seconds", type=float, default=0.5)
    parser.add_argument("--out", help="also write the table to this file")
    args = parser.parse_args()

    rows = []
    header = (
        "| module | function | size | gradlift | JAX | gradlift / JAX "
        "| gradlift compile (module) | JAX compile | gradlift first call "
        "| JAX first call |\n"
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    )
    print(header, flush=True)
    for module in args.modules:
        tool = Tool(args.gradlift)
        tool.send({"kind": "start", "eval": module})
        defined = tool.send({"kind": "define", "module": module})
        assert defined["success"], defined
        compile_ns = sum(t["nanoseconds"] for t in defined["timings"])
        for description, input in inputs(module, args.quick):
            for function in FUNCTIONS[module]:
                runs = {"min_runs": args.min_runs, "min_seconds": args.min_seconds}
                message = {"kind": "evaluate", "module": module, "function": function}
                if isinstance(input, dict):
                    answer = tool.send(message | {"input": input | runs})
                else:
                    # A bare input (hello's number) has no room for the run
                    # counts: one message per run, a thousand of them (the
                    # messages, not the runs, would take the seconds).
                    answer, timings = None, []
                    for _ in range(max(args.min_runs, 1000)):
                        answer = tool.send(message | {"input": input})
                        if not answer["success"]:
                            break
                        timings += answer["timings"]
                    if answer["success"]:
                        answer["timings"] = timings
                try:
                    expected, jax_first, jax_ns = time_jax(
                        module, function, input, args.min_runs, args.min_seconds
                    )
                except Exception as refused:  # JAX cannot differentiate it
                    reason = str(refused).splitlines()[0][:90]
                    ours = [t["nanoseconds"] for t in answer["timings"]] if answer["success"] else []
                    our = fmt_ns(float(np.median(ours))) if ours else "fails"
                    row = (
                        f"| {module} | {function} | {description} | {our} "
                        f"| JAX refuses: {reason} | — | {fmt_ns(compile_ns)} | — "
                        f"| {fmt_ns(compile_ns + ours[0]) if ours else '—'} | — |"
                    )
                    rows.append(row)
                    print(row, flush=True)
                    continue
                if not answer["success"]:
                    row = (
                        f"| {module} | {function} | {description} | fails: {answer['error']} "
                        f"| {fmt_ns(jax_ns)} | — | {fmt_ns(compile_ns)} "
                        f"| {fmt_ns(max(jax_first - jax_ns, 0))} | — | {fmt_ns(jax_first)} |"
                    )
                    rows.append(row)
                    print(row, flush=True)
                    continue
                ours = [t["nanoseconds"] for t in answer["timings"]]
                output = answer["output"]
                if module == "ba" and function == "objective":
                    output = output["reproj_error"]["elements"] + [output["w_err"]["element"]]
                elif module == "ba":
                    output = output["vals"]
                elif isinstance(output, dict):
                    # gmm's jacobian: its members, flattened in order.
                    output = np.concatenate([np.ravel(output[k]) for k in output])
                got = np.asarray(output, dtype=np.float64)
                if not np.allclose(got, expected, rtol=1e-6, atol=1e-9):
                    sys.exit(
                        f"{module} {function} {description}: gradlift and JAX disagree"
                        f" (largest difference {np.max(np.abs(got - expected))})"
                    )
                our_ns = float(np.median(ours))
                row = (
                    f"| {module} | {function} | {description} | {fmt_ns(our_ns)} "
                    f"| {fmt_ns(jax_ns)} | {our_ns / jax_ns:.2f} | {fmt_ns(compile_ns)} "
                    f"| {fmt_ns(max(jax_first - jax_ns, 0))} "
                    f"| {fmt_ns(compile_ns + ours[0])} | {fmt_ns(jax_first)} |"
                )
                rows.append(row)
                print(row, flush=True)
        tool.close()
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join([header] + rows) + "\n")


if __name__ == "__main__":
    main()
