"""The Python package against numpy finite differences (and JAX, where it
is installed): values, gradients, Hessian-vector products, argument
conversion, errors, and calls from several threads."""

import concurrent.futures
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import gradlift

ROOT = pathlib.Path(__file__).resolve().parents[2]

LAYER = """
def loss(W: [[R; d]; h], b: [R; h], x: [R; d], scale: R) -> R =
  scale * reduce (+) 0 (map2 (row, c. tanh(reduce (+) 0 (map2 (*) row x) + c)) W b)
"""


def layer_args(rng, h=4, d=5):
    return [rng.normal(size=(h, d)), rng.normal(size=h), rng.normal(size=d), 0.7]


def numpy_layer(W, b, x, scale):
    return scale * np.sum(np.tanh(W @ x + b))


def finite_difference(f, args, i, eps=1e-6):
    """Central differences of f along every element of args[i]."""
    a = np.array(args[i], dtype=float)
    g = np.zeros_like(a)
    for k in np.ndindex(a.shape if a.shape else ()):
        plus = [np.array(x, copy=True) if j == i else x for j, x in enumerate(args)]
        minus = [np.array(x, copy=True) if j == i else x for j, x in enumerate(args)]
        if a.shape:
            plus[i][k] += eps
            minus[i][k] -= eps
        else:
            plus[i] = float(a) + eps
            minus[i] = float(a) - eps
        g[k] = (f(*plus) - f(*minus)) / (2 * eps)
    return g


def test_value_matches_numpy():
    f = gradlift.compile(LAYER)
    rng = np.random.default_rng(0)
    args = layer_args(rng)
    assert f(*args) == pytest.approx(numpy_layer(*args), rel=1e-13)


def test_gradient_matches_finite_differences():
    f = gradlift.compile(LAYER)
    rng = np.random.default_rng(1)
    args = layer_args(rng)
    value, grads = f.value_and_grad(*args)
    assert value == pytest.approx(numpy_layer(*args), rel=1e-13)
    assert len(grads) == 4
    for i, g in enumerate(grads):
        want = finite_difference(numpy_layer, args, i)
        np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-8)
        assert np.shape(g) == np.shape(args[i])


def test_wrt_selects_parameters_in_order():
    f = gradlift.compile(LAYER, fn="loss", wrt=["x", "W"])
    rng = np.random.default_rng(2)
    args = layer_args(rng)
    grads = f.grad(*args)
    full = gradlift.compile(LAYER).grad(*args)
    assert len(grads) == 2
    # In parameter order: W before x.
    np.testing.assert_array_equal(grads[0], full[0])
    np.testing.assert_array_equal(grads[1], full[2])
    with pytest.raises(ValueError, match="`nope`"):
        gradlift.compile(LAYER, wrt=["nope"])


def test_keyword_arguments_and_conversions():
    f = gradlift.compile(LAYER)
    rng = np.random.default_rng(3)
    W, b, x, s = layer_args(rng)
    want = f(W, b, x, s)
    assert f(W=W, b=b, x=x, scale=s) == want
    # Not contiguous, not float64, a list, an int for a real: converted.
    Wf = np.asfortranarray(W)
    assert f(Wf, list(b), x, s) == want
    x32 = x.astype(np.float32)
    assert f(W, b, x32, s) == f(W, b, x32.astype(np.float64), s)
    assert f(W[:, :], b, x, 1) == pytest.approx(want / s)
    assert f(np.ascontiguousarray(W.T).T, b, x, s) == want
    # Unaligned data (as arrays arrive through a buffer): copied, not misread.
    raw = np.zeros(x.nbytes + 1, dtype=np.uint8)
    unaligned = np.frombuffer(raw.data, dtype=np.float64, count=x.size, offset=1)
    raw[1:] = x.view(np.uint8)
    assert not unaligned.flags.aligned
    assert f(W, b, unaligned, s) == want


def test_hessian_vector_product_matches_finite_differences_of_the_gradient():
    f = gradlift.compile(LAYER)
    rng = np.random.default_rng(4)
    args = layer_args(rng)
    dirs = [rng.normal(size=np.shape(a)) if np.shape(a) else 0.3 for a in args]
    value, grad, hv = f.hvp(*args, *dirs)
    assert value == pytest.approx(numpy_layer(*args), rel=1e-13)
    eps = 1e-6
    plus = f.grad(*[a + eps * d for a, d in zip(args, dirs)])
    minus = f.grad(*[a - eps * d for a, d in zip(args, dirs)])
    for h, p, m in zip(hv, plus, minus):
        np.testing.assert_allclose(h, (np.asarray(p) - np.asarray(m)) / (2 * eps), rtol=1e-5, atol=1e-7)


def test_integer_data_and_arrays_returned():
    src = """
def pick(xs: [R; n], idx: [Z; m]) -> [R; m] = map (i. xs[i] * 2) idx
def total(xs: [R; n], idx: [Z; m]) -> R = reduce (+) 0 (pick(xs, idx))
"""
    pick = gradlift.compile(src, fn="pick")
    xs = np.array([1.0, 2.0, 3.0])
    out = pick(xs, np.array([2, 0, 2]))
    np.testing.assert_array_equal(out, [6.0, 2.0, 6.0])
    total = gradlift.compile(src, fn="total", wrt=["xs"])
    v, (g,) = total.value_and_grad(xs, [2, 0, 2])
    assert v == 14.0
    np.testing.assert_array_equal(g, [2.0, 0.0, 4.0])
    with pytest.raises(gradlift.RuntimeError, match="index"):
        pick(xs, np.array([5]))


def test_errors_carry_positions_and_kinds():
    with pytest.raises(gradlift.ParseError) as e:
        gradlift.compile("def f(x: R) -> R = (x", path="bad.grad")
    assert "bad.grad:1:" in str(e.value) and "^" in str(e.value)
    with pytest.raises(gradlift.TypeCheckError, match="unknown variable `y`"):
        gradlift.compile("def f(x: R) -> R = y")
    with pytest.raises(gradlift.UnknownFunctionError):
        gradlift.compile(LAYER, fn="nothing")
    assert issubclass(gradlift.ParseError, gradlift.Error)
    f = gradlift.compile(LAYER)
    rng = np.random.default_rng(5)
    W, b, x, s = layer_args(rng)
    with pytest.raises(ValueError, match="`x`"):
        f(W, b, np.ones(7), s)
    with pytest.raises(ValueError, match="`W`"):
        f(np.ones(3), b, x, s)
    with pytest.raises(TypeError, match="missing parameter `scale`"):
        f(W, b, x)


def test_one_function_from_many_threads():
    f = gradlift.compile(LAYER)
    rng = np.random.default_rng(6)
    inputs = [layer_args(rng, h=30, d=40) for _ in range(16)]
    want = [f.value_and_grad(*a) for a in inputs]

    def run(k):
        got = f.value_and_grad(*inputs[k % len(inputs)])
        return k, got

    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        for k, (v, grads) in pool.map(run, range(200)):
            w_v, w_grads = want[k % len(inputs)]
            assert v == w_v
            for g, w in zip(grads, w_grads):
                np.testing.assert_array_equal(g, w)


def test_compile_file_and_the_cache():
    path = ROOT / "examples" / "logsumexp.grad"
    f = gradlift.compile_file(path)
    x = np.array([1.0, 2.0, 3.0])
    v, (g,) = f.value_and_grad(x)
    assert v == pytest.approx(np.log(np.sum(np.exp(x))), rel=1e-14)
    np.testing.assert_allclose(g, np.exp(x) / np.sum(np.exp(x)), rtol=1e-14)
    again = gradlift.compile_file(path)
    assert again.value_and_grad(x)[0] == v


DISK_SCRIPT = """
import json, numpy as np, gradlift
f = gradlift.compile_file(%r)
v, (g,) = f.value_and_grad(np.array([1.0, 2.0, 3.0]))
print(json.dumps({"value": v.hex(), "grad": [x.hex() for x in g],
                  "disk": gradlift.disk_cache_stats()}))
"""


def test_a_new_process_loads_the_code_from_the_disk_cache(tmp_path):
    script = DISK_SCRIPT % str(ROOT / "examples" / "logsumexp.grad")
    env = dict(os.environ, GRADLIFT_CACHE_DIR=str(tmp_path / "cache"))

    def run():
        out = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
        )
        return json.loads(out.stdout)

    first, second = run(), run()
    # The first process compiles and stores the function and its
    # gradient, the second loads both.
    counts = dict(hits=0, misses=0, writes=0, failed_writes=0, damaged=0)
    assert first["disk"] == dict(counts, misses=2, writes=2)
    assert second["disk"] == dict(counts, hits=2)
    assert (first["value"], first["grad"]) == (second["value"], second["grad"])
    assert len(list((tmp_path / "cache").iterdir())) == 2


def test_against_jax_where_installed():
    jax = pytest.importorskip("jax", reason="JAX is not installed: the JAX reference is skipped")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    def layer(W, b, x, scale):
        return scale * jnp.sum(jnp.tanh(W @ x + b))

    f = gradlift.compile(LAYER)
    rng = np.random.default_rng(7)
    args = layer_args(rng)
    v, grads = f.value_and_grad(*args)
    jv, jgrads = jax.value_and_grad(layer, argnums=(0, 1, 2, 3))(*args)
    assert v == pytest.approx(float(jv), rel=1e-13)
    for g, j in zip(grads, jgrads):
        np.testing.assert_allclose(g, np.asarray(j), rtol=1e-12, atol=1e-14)


def test_scipy_fits_the_logistic_growth_example():
    optimize = pytest.importorskip("scipy.optimize", reason="scipy is not installed")
    f = gradlift.compile_file(ROOT / "examples" / "logistic_growth.grad", wrt=["rate", "cap"])
    obs = np.array([4.644121, 10.053153, 19.111462, 30.172821, 39.461555,
                    45.106019, 47.889332, 49.120644, 49.639065, 49.852771])
    x0 = f.pack(0.5, 30.0)
    assert f.unpack(x0) == [0.5, 30.0]
    v, g = f.value_and_grad_flat(x0, obs)
    assert g.shape == (2,)
    assert v == f.value_flat(x0, obs)
    result = optimize.minimize(f.value_and_grad_flat, x0, args=(obs,), jac=True, method="L-BFGS-B")
    rate, cap = f.unpack(result.x)
    assert rate == pytest.approx(0.9, rel=1e-4)
    assert cap == pytest.approx(50.0, rel=1e-4)


def test_packing_arrays_round_trips():
    f = gradlift.compile(LAYER, wrt=["W", "x"])
    rng = np.random.default_rng(8)
    W, b, x, s = layer_args(rng)
    theta = f.pack(W, x)
    assert theta.shape == (W.size + x.size,)
    W2, x2 = f.unpack(theta)
    np.testing.assert_array_equal(W2, W)
    np.testing.assert_array_equal(x2, x)
    v, g = f.value_and_grad_flat(theta, b, s)
    gW, gx = f.grad(W, b, x, s)
    np.testing.assert_array_equal(g, np.concatenate([gW.ravel(), gx.ravel()]))
    with pytest.raises(ValueError):
        f.unpack(theta[:-1])


def test_size_parameters_and_keywords():
    f = gradlift.compile("def f(x: [R; n], s: size) -> R = reduce (+) 0 (map (v. v * v * s) x)")
    x = np.array([1.0, -2.0, 0.5])
    assert f(x, 3) == pytest.approx(3 * np.sum(x * x), rel=1e-15)
    (g,) = f.grad(x, s=3)
    np.testing.assert_array_equal(g, 6 * x)
    # One direction per parameter that is not a size.
    d = np.array([1.0, 0.0, 2.0])
    value, (grad,), (hv,) = f.hvp(x, 3, d)
    np.testing.assert_array_equal(hv, 6 * d)
    value, (grad,), (hv,) = f.hvp(x=x, s=3, dx=d)
    np.testing.assert_array_equal(hv, 6 * d)
    with pytest.raises(TypeError, match="no parameter `y`"):
        f(x, 3, y=1)
    with pytest.raises(TypeError, match="twice"):
        f(x, 3, x=x)
    with pytest.raises(TypeError, match="takes 2 arguments"):
        f(x, 3, 4)
    with pytest.raises(ValueError, match="`s`"):
        f(x, 2.5)


TUPLES = """
def f(p: (R, [R; n]), q: ((Z, [R; n]), R), z: [R; m]) -> R =
  let (a, xs) = p in
  let (inner, c) = q in
  let (k, ys) = inner in
  a * reduce (+) 0 (map2 (x, y. sin(x) * y) xs ys) + c * c * k + reduce (+) 0 (map (t. t * t) z)
"""


def numpy_tuples(p, q, z):
    (a, xs), ((k, ys), c) = p, q
    return a * np.sum(np.sin(xs) * ys) + c * c * k + np.sum(z * z)


def test_tuple_parameters_are_python_tuples():
    f = gradlift.compile(TUPLES, wrt=["p", "q"])
    rng = np.random.default_rng(8)
    xs, ys, z = rng.normal(size=4), rng.normal(size=4), rng.normal(size=3)
    p, q = (1.5, xs), ((3, ys), -0.5)
    assert f(p, q, z) == pytest.approx(numpy_tuples(p, q, z), rel=1e-13)
    value, (gp, gq) = f.value_and_grad(p, q, z)
    assert value == pytest.approx(numpy_tuples(p, q, z), rel=1e-13)
    # The cotangents have the parameters' structure (an integer's is 0).
    (ga, gxs), ((gk, gys), gc) = gp, gq
    assert ga == pytest.approx(np.sum(np.sin(xs) * ys), rel=1e-13)
    np.testing.assert_allclose(gxs, 1.5 * np.cos(xs) * ys, rtol=1e-13)
    np.testing.assert_allclose(gys, 1.5 * np.sin(xs), rtol=1e-13)
    assert gc == pytest.approx(2 * -0.5 * 3, rel=1e-13)
    assert gk == 0
    # Against finite differences through the flat packing.
    theta = f.pack(p, q)
    (_, flat) = f.value_and_grad_flat(theta, z)
    for i in range(theta.size):
        e = np.zeros_like(theta)
        e[i] = 1e-6
        fd = (f.value_flat(theta + e, z) - f.value_flat(theta - e, z)) / 2e-6
        if i != 5:  # the integer k, whose packed slot is not a real
            assert flat[i] == pytest.approx(fd, rel=1e-6, abs=1e-8)
    # The Hessian-vector product takes tuple directions.
    g = gradlift.compile(TUPLES)
    dirs = ((0.3, rng.normal(size=4)), ((0, rng.normal(size=4)), 0.2), rng.normal(size=3))
    value, grad, hd = g.hvp(p, q, z, *dirs)
    assert value == pytest.approx(numpy_tuples(p, q, z), rel=1e-13)
    assert len(grad) == 3 and len(hd) == 3
    np.testing.assert_allclose(hd[2], 2 * dirs[2], rtol=1e-13)
    # The wrong arity, or an array for a tuple, names the parameter.
    with pytest.raises(ValueError, match="`p`"):
        f((1.5,), q, z)
    with pytest.raises(ValueError, match="`p`"):
        f(xs, q, z)
    with pytest.raises(ValueError, match="`q.0.1`"):
        f(p, ((3, rng.normal(size=5)), -0.5), z)
