#!/usr/bin/env python3
"""Two builds of gradlift side by side, in one run: before and after.

For every example of the native table (`native_tables.ROWS`), runs
`gradlift bench --json` with the binary of each build in turn, A B A B …
(`--pairs` times), so that both see the same machine, and prints the
medians of compile time, primal and value-and-gradient time for each build
and their ratio new / old per row, in Markdown.

    python3 benches/compare_builds.py OLD_GRADLIFT NEW_GRADLIFT [--pairs 5] [--seconds 0.5]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from native_tables import ROOT, ROWS, fmt_ns  # noqa: E402


def bench(binary, file, function, sizes, seconds):
    cmd = [binary, "bench", os.path.join(ROOT, "examples", file), "--json", "--seconds", str(seconds)]
    if function:
        cmd += ["--fn", function]
    if sizes:
        cmd += ["--sizes", sizes]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("--seconds", type=float, default=0.5)
    a = p.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    print()
    print("| example | sizes | compile old → new | primal old → new | value and gradient old → new | ratios new/old (compile, primal, gradient) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for file, function, sizes, label in ROWS:
        runs = {"old": [], "new": []}
        for _ in range(a.pairs):
            for which in ("old", "new"):
                runs[which].append(bench(getattr(a, which), file, function, sizes, a.seconds))
        med = {w: {k: statistics.median(r[k] for r in runs[w]) for k in ("compile_ms", "primal_ns", "grad_ns")} for w in runs}
        ratio = lambda k: med["new"][k] / med["old"][k]
        print(
            f"| {file} | {label} | {med['old']['compile_ms']:.3f} → {med['new']['compile_ms']:.3f} ms "
            f"| {fmt_ns(med['old']['primal_ns'])} → {fmt_ns(med['new']['primal_ns'])} "
            f"| {fmt_ns(med['old']['grad_ns'])} → {fmt_ns(med['new']['grad_ns'])} "
            f"| {ratio('compile_ms'):.2f}, {ratio('primal_ns'):.2f}, {ratio('grad_ns'):.2f} |",
            flush=True,
        )
    print()
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
