#!/usr/bin/env python3
"""GradBench's own JAX tool, with its clock stopped after the computation.

GradBench's JAX tool (`python/gradbench/gradbench/tools/jax/run.py` of a
GradBench checkout) times a jitted call as it returns; JAX dispatches
asynchronously, so at large sizes the call returns before XLA has
finished, and the tool reports the time to dispatch. This runs the same
tool, unchanged, with GradBench's timing helpers (`gradbench.wrap`)
replaced by ones that call `jax.block_until_ready` on the result inside
the timed region; everything else (inputs, outputs, protocol) is the
tool's own.

    PYTHONPATH=GRADBENCH/python/gradbench gradbench_jax_blocked.py GRADBENCH [--multithreaded]

benches/peers/run_gradbench_tools.sh runs it.
"""

import os
import runpy
import sys
import time

import jax
from gradbench import wrap


def _timed(function, input):
    start = time.perf_counter_ns()
    output = jax.block_until_ready(function(input))
    end = time.perf_counter_ns()
    return output, wrap.Timing(name="evaluate", nanoseconds=end - start)


def function(*, pre, post):
    def decorator(f):
        def wrapped(input_raw):
            output, timing = _timed(f, pre(input_raw))
            return wrap.OutputAndTimings(success=True, output=post(output), timings=[timing])

        return wrap.Wrapped(function=f, wrapped=wrapped)

    return decorator


def multiple_runs(*, min_runs=lambda x: x["min_runs"], min_seconds=lambda x: x["min_seconds"], pre, post):
    def decorator(f):
        def wrapped(input_raw):
            input = pre(input_raw)
            runs, seconds = min_runs(input_raw), min_seconds(input_raw)
            timings, elapsed, output = [], 0.0, None
            while len(timings) < runs or elapsed < seconds:
                output, timing = _timed(f, input)
                timings.append(timing)
                elapsed += timing["nanoseconds"] / 1e9
            return wrap.OutputAndTimings(success=True, output=post(output), timings=timings)

        return wrap.Wrapped(function=f, wrapped=wrapped)

    return decorator


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    tool = os.path.join(sys.argv[1], "python/gradbench/gradbench/tools/jax")
    wrap.function = function
    wrap.multiple_runs = multiple_runs
    # The tool imports its modules (`lse`, `kmeans`, …) by name, from its
    # own directory.
    sys.path.insert(0, tool)
    sys.argv = [os.path.join(tool, "run.py")] + sys.argv[2:]
    runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
