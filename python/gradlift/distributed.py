"""Data-parallel gradients over shards with Dask (`dask.distributed`).

A loss that is a sum over data rows is a sum of the same loss over
shards of the rows, and so is its gradient. `value_and_grad` sends the
loss's *source text* to the workers with each shard; a worker compiles it
on its first shard and finds it in its compile cache on every later one
(the cache of the worker process's `Jit`: a lookup of a few
microseconds), computes the shard's value and gradient natively, and the
partial results are summed on the cluster.

On a real cluster the same code runs against a `Client` connected to a
scheduler (`Client("tcp://scheduler:8786")`) whose workers have gradlift
installed (`pip install ./python` on each machine, or in the image they
run); the shards are best placed on the workers first (`client.scatter`)
or loaded there (`client.map(load, paths)`), so that only the parameters
and the partial gradients travel.
"""

import numpy as _np


def shard_value_and_grad(source, fn, wrt, params, shard):
    """The value and gradient of `fn` (with respect to `wrt`) at
    `params` followed by the data of one `shard`, on this process: what a
    worker runs."""
    import gradlift

    f = gradlift.compile(source, fn=fn, wrt=wrt)
    value, grads = f.value_and_grad(*params, *shard)
    return value, tuple(_np.asarray(g) for g in grads)


def _sum(parts):
    value = sum(p[0] for p in parts)
    grads = tuple(sum(gs) for gs in zip(*(p[1] for p in parts)))
    return value, grads


def value_and_grad(client, source, fn, wrt, params, shards):
    """Σ over `shards` of `fn`'s value and gradient with respect to `wrt`
    at `params` (the differentiated parameters, first in `fn`'s parameter
    list, then each shard's data): each shard on a worker of `client`, the
    partial results summed on the cluster. `shards` may be data or futures
    of data already on the workers."""
    parts = client.map(
        shard_value_and_grad,
        [source] * len(shards),
        [fn] * len(shards),
        [wrt] * len(shards),
        [params] * len(shards),
        shards,
        pure=False,
    )
    return client.submit(_sum, parts).result()


def cache_stats_on_workers(client):
    """Each worker's compile cache counts: {worker address: (hits, misses, entries)}."""
    import gradlift

    return client.run(gradlift.cache_stats)
