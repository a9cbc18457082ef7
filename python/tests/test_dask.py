"""A data-parallel gradient on a Dask LocalCluster of two worker processes
on loopback equals the single-process gradient, and each worker compiles
the loss once."""

import numpy as np
import pytest

import gradlift

distributed = pytest.importorskip("dask.distributed", reason="dask.distributed is not installed")

from gradlift import distributed as gd  # noqa: E402

LEAST_SQUARES = """
def sq(x: R) -> R = x * x
def loss(w: [R; d], b: R, X: [[R; d]; m], y: [R; m]) -> R =
  reduce (+) 0 (map2 (row, t. sq(tanh(reduce (+) 0 (map2 (*) row w) + b) - t)) X y)
"""


def test_sharded_gradient_on_two_workers_equals_the_single_process_gradient():
    rng = np.random.default_rng(0)
    d, m = 6, 1000
    X = rng.normal(size=(m, d))
    y = rng.normal(size=m)
    w = rng.normal(size=d) * 0.3
    b = 0.1
    f = gradlift.compile(LEAST_SQUARES, fn="loss", wrt=["w", "b"])
    want_v, (want_w, want_b) = f.value_and_grad(w, b, X, y)

    shards = [(X[i:i + 125], y[i:i + 125]) for i in range(0, m, 125)]
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True,
        host="127.0.0.1", dashboard_address=None,
    ) as cluster, distributed.Client(cluster) as client:
        on_workers = client.scatter(shards)
        v, (gw, gb) = gd.value_and_grad(client, LEAST_SQUARES, "loss", ["w", "b"], (w, b), on_workers)
        # Again: every worker finds the loss in its compile cache.
        v2, _ = gd.value_and_grad(client, LEAST_SQUARES, "loss", ["w", "b"], (w, b), on_workers)
        stats = gd.cache_stats_on_workers(client)

    assert len(stats) == 2
    for hits, misses, entries in stats.values():
        # A parse, the function and its gradient: compiled once per worker.
        assert misses <= 3 and entries <= 3, stats
        assert hits > 0, stats
    # Summed in another order than the one loop: equal to rounding.
    assert v == pytest.approx(want_v, rel=1e-12)
    assert v2 == v
    np.testing.assert_allclose(gw, want_w, rtol=1e-11, atol=1e-13)
    assert gb == pytest.approx(want_b, rel=1e-11)
