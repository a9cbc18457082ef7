"""A data-parallel gradient over shards with Dask: fits a one-layer tanh
regression by gradient descent, each gradient computed shard by shard on
the workers of a cluster (here a LocalCluster of two processes).

    pip install ./python "dask[distributed]"
    python python/examples/dask_gradient.py [scheduler-address]
"""

import sys

import numpy as np
from dask.distributed import Client, LocalCluster

from gradlift import distributed as gd

LOSS = """
def sq(x: R) -> R = x * x
def loss(w: [R; d], b: R, X: [[R; d]; m], y: [R; m]) -> R =
  reduce (+) 0 (map2 (row, t. sq(tanh(reduce (+) 0 (map2 (*) row w) + b) - t)) X y)
"""


def main():
    rng = np.random.default_rng(1)
    d, m = 8, 20000
    truth = rng.normal(size=d) * 0.5
    X = rng.normal(size=(m, d))
    y = np.tanh(X @ truth + 0.2)
    if len(sys.argv) > 1:
        client = Client(sys.argv[1])
    else:
        client = Client(LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None))
    shards = client.scatter([(X[i:i + 2500], y[i:i + 2500]) for i in range(0, m, 2500)])
    w, b = np.zeros(d), 0.0
    for step in range(200):
        v, (gw, gb) = gd.value_and_grad(client, LOSS, "loss", ["w", "b"], (w, b), shards)
        w, b = w - 0.5 * gw / m, b - 0.5 * gb / m
        if step % 50 == 0:
            print(f"step {step}: loss {v / m:.3e}")
    print("recovered w:", np.round(w, 3))
    print("true w:     ", np.round(truth, 3))
    print("compile cache per worker (hits, misses, entries):", gd.cache_stats_on_workers(client))
    client.close()


if __name__ == "__main__":
    main()
