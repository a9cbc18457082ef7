#!/usr/bin/env python3
"""The native-code tables of docs/benchmarks.md, from one run.

Runs, one after the other on the same build:

1. `gradlift bench … --json` on every shipped example at the sizes of the
   table (compile time, primal, value and gradient, their ratio, the cost
   model's ratio and bound);
2. `cargo bench --bench native` (criterion: primal and value-and-gradient
   times of dot, prod and logsumexp at n = 10³ and 10⁶, and of the
   logistic-growth loss);
3. `cargo bench --bench handwritten` (gradlift against the same gradients
   written by hand in Rust: dot, prod and logsumexp at n = 10³ and 10⁶,
   the logistic-growth loss);
4. `cargo bench --bench compile` (criterion: text → native code per
   example, the function and its value and gradient);

and prints the four tables in Markdown, with the commit and the load
average before and after. Medians throughout.

    python3 benches/native_tables.py > target/native.md
    python3 benches/native_tables.py --quick   # shorter measurements
"""

import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (file, function or None, sizes, label of the sizes)
ROWS = [
    ("example_1_1.grad", None, "", "—"),
    ("dot.grad", None, "n=1000", "n=10³"),
    ("dot.grad", None, "n=1000000", "n=10⁶"),
    ("sum.grad", None, "n=1000000", "n=10⁶"),
    ("prod.grad", None, "n=1000", "n=10³"),
    ("prod.grad", None, "n=1000000", "n=10⁶"),
    ("logistic_regression.grad", None, "d=100,m=10000", "d=100, m=10⁴"),
    ("mlp.grad", None, "d=16,h=64,m=1000", "d=16, h=64, m=10³"),
    ("logistic_growth.grad", None, "", "4,000 steps"),
    ("ode.grad", "last", "n=1000,s=100", "n=10³, s=100"),
    ("logsumexp.grad", None, "n=1000000", "n=10⁶"),
]


def run(cmd, **kw):
    print("+ " + " ".join(cmd), file=sys.stderr)
    return subprocess.run(cmd, cwd=ROOT, check=True, **kw)


def fmt_ns(ns):
    if ns < 1e3:
        return f"{ns:.0f} ns"
    if ns < 1e6:
        return f"{ns / 1e3:.3g} µs"
    return f"{ns / 1e6:.3g} ms"


def fmt_ms(ms):
    return f"{ms:.2f} ms" if ms < 10 else f"{ms:.1f} ms"


def median_ns(*path):
    with open(os.path.join(ROOT, "target", "criterion", *path, "new", "estimates.json")) as f:
        return json.load(f)["median"]["point_estimate"]


def loadavg():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="shorter measurements")
    args = ap.parse_args()
    seconds = "0.3" if args.quick else "1"
    criterion = (
        ["--warm-up-time", "0.3", "--measurement-time", "1"]
        if args.quick
        else ["--warm-up-time", "1", "--measurement-time", "3"]
    )
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    load_before = loadavg()
    run(["cargo", "build", "--release", "--bin", "gradlift"])
    run(["cargo", "bench", "--no-run", "--bench", "native", "--bench", "handwritten", "--bench", "compile"])

    bench_rows = []
    for file, fn, sizes, label in ROWS:
        cmd = [os.path.join(ROOT, "target", "release", "gradlift"), "bench", f"examples/{file}"]
        if fn:
            cmd += ["--fn", fn]
        if sizes:
            cmd += ["--sizes", sizes]
        cmd += ["--seconds", seconds, "--json"]
        out = run(cmd, capture_output=True, text=True).stdout
        bench_rows.append((file, fn, label, json.loads(out)))

    quiet = ["--", *criterion]
    for bench in ["native", "handwritten", "compile"]:
        run(["cargo", "bench", "--bench", bench, *quiet], stdout=subprocess.DEVNULL)
    load_after = loadavg()

    print(f"Commit {commit}; load average {load_before} before the run, {load_after} after.\n")
    print("`gradlift bench FILE --fn NAME --sizes SIZES --seconds 1 --json`:\n")
    print("| function | sizes | compile | primal | value and gradient | gradient / primal | cost model ratio | bound |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for file, fn, label, r in bench_rows:
        name = fn or {
            "example_1_1.grad": "f",
            "dot.grad": "dot",
            "sum.grad": "sum",
            "prod.grad": "prod",
            "logistic_regression.grad": "loss",
            "mlp.grad": "loss",
            "logistic_growth.grad": "loss",
            "logsumexp.grad": "lse",
        }[file]
        cost = "—" if r["cost_ratio"] is None else f"{r['cost_ratio']:.2f}"
        print(
            f"| `{file}` `{name}` | {label} | {fmt_ms(r['compile_ms'])} | {fmt_ns(r['primal_ns'])} "
            f"| {fmt_ns(r['grad_ns'])} | {r['ratio']:.2f} | {cost} | {r['bound']:.0f} |"
        )

    print("\n`cargo bench --bench native -- " + " ".join(criterion) + "`:\n")
    print("| function | n | primal | value and gradient | gradient / primal |")
    print("| --- | --- | ---: | ---: | ---: |")
    for name, sizes in [("dot", [1000, 1000000]), ("prod", [1000, 1000000]),
                        ("logsumexp", [1000, 1000000]), ("logistic_growth", [4000])]:
        for n in sizes:
            p = median_ns("native", f"{name}_primal", str(n))
            g = median_ns("native", f"{name}_gradient", str(n))
            label = "4,000 steps" if name == "logistic_growth" else ("10³" if n == 1000 else "10⁶")
            print(f"| {name} | {label} | {fmt_ns(p)} | {fmt_ns(g)} | {g / p:.2f} |")

    print("\n`cargo bench --bench handwritten -- " + " ".join(criterion) + "`:\n")
    print("| gradient | gradlift | hand-written Rust | gradlift / hand-written |")
    print("| --- | ---: | ---: | ---: |")
    for name, n, label in [
        ("dot", 1000, "dot, n = 10³"), ("dot", 1000000, "dot, n = 10⁶"),
        ("prod", 1000, "prod, n = 10³"), ("prod", 1000000, "prod, n = 10⁶"),
        ("logsumexp", 1000, "logsumexp, n = 10³"), ("logsumexp", 1000000, "logsumexp, n = 10⁶"),
        ("logistic_growth", 4000, "logistic-growth loss"),
    ]:
        a = median_ns("handwritten", f"{name}_gradlift", str(n))
        b = median_ns("handwritten", f"{name}_rust", str(n))
        print(f"| {label} | {fmt_ns(a)} | {fmt_ns(b)} | {a / b:.2f} |")

    print("\n`cargo bench --bench compile -- " + " ".join(criterion) + "`:\n")
    print("| example | function | value and gradient |")
    print("| --- | ---: | ---: |")
    examples = sorted(
        f[: -len(".grad")] for f in os.listdir(os.path.join(ROOT, "examples")) if f.endswith(".grad")
    )
    rows = []
    for e in examples:
        f = median_ns("compile", f"{e}_function") / 1e6
        try:
            g = median_ns("compile", f"{e}_gradient") / 1e6
        except FileNotFoundError:
            g = None
        rows.append((g if g is not None else f, e, f, g))
    for _, e, f, g in sorted(rows):
        gs = "—" if g is None else fmt_ms(g)
        print(f"| `{e}` | {fmt_ms(f)} | {gs} |")


if __name__ == "__main__":
    main()
