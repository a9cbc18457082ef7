#!/usr/bin/env python3
"""Time and peak memory of checkpointed gradients, across schedules.

Runs the release `gradlift` on two loops:
- the chapter's relaxation loop (examples/relaxation.grad, `relax`) at
  2,000,000 steps;
- the GradBench ode (examples/ode.grad, `last`) with n = 10,000 and s = 100;
for full recording and every schedule in SCHEDULES. For each it reports
- the median time of one value-and-gradient call (`gradlift bench --json`);
- the peak resident memory of a process that compiles the gradient and
  calls it once (`/usr/bin/time -f %M gradlift grad ...`).
Prints a Markdown table and writes an SVG plot of memory against time.

    cargo build --release --bin gradlift
    python3 benches/checkpoint/run.py [--out docs/checkpoint.svg]
"""

import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GRADLIFT = os.path.join(ROOT, "target", "release", "gradlift")
SCHEDULES = ["none", "16", "64", "256", "1024", "binomial:10", "binomial:20", "binomial:40"]


def run(args):
    out = subprocess.run(args, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(args)} failed:\n{out.stderr}")
    return out


def measure(file, fn, sizes, at, schedule):
    bench = run([GRADLIFT, "bench", file, "--fn", fn, "--sizes", sizes,
                 "--checkpoint", schedule, "--seconds", "2", "--json"])
    grad_ns = json.loads(bench.stdout)["grad_ns"]
    primal_ns = json.loads(bench.stdout)["primal_ns"]
    mem = run(["/usr/bin/time", "-f", "%M", GRADLIFT, "grad", file, "--fn", fn,
               "--at", at, "--checkpoint", schedule, "--json"])
    peak_kib = int(mem.stderr.strip().splitlines()[-1])
    return grad_ns, primal_ns, peak_kib


def svg(series, path):
    """Memory (MiB, log scale) against time (ms, log scale), one panel per loop."""
    import math
    width, height, pad = 460, 320, 60
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * width}" height="{height}" '
             'font-family="sans-serif" font-size="11">',
             f'<rect width="{2 * width}" height="{height}" fill="white"/>']
    for k, (title, rows) in enumerate(series):
        x0 = k * width
        ts = [r[1] / 1e6 for r in rows]
        ms = [r[3] / 1024 for r in rows]
        lt = (math.log10(min(ts)) - 0.1, math.log10(max(ts)) + 0.1)
        lm = (math.log10(min(ms)) - 0.1, math.log10(max(ms)) + 0.1)
        sx = lambda t: x0 + pad + (math.log10(t) - lt[0]) / (lt[1] - lt[0]) * (width - 1.5 * pad)
        sy = lambda m: height - pad + -(math.log10(m) - lm[0]) / (lm[1] - lm[0]) * (height - 1.7 * pad)
        parts.append(f'<text x="{x0 + width / 2}" y="20" text-anchor="middle" font-size="13">{title}</text>')
        parts.append(f'<line x1="{x0 + pad}" y1="{height - pad}" x2="{x0 + width - pad / 2}" '
                     f'y2="{height - pad}" stroke="black"/>')
        parts.append(f'<line x1="{x0 + pad}" y1="{height - pad}" x2="{x0 + pad}" y2="{pad * 0.6}" stroke="black"/>')
        parts.append(f'<text x="{x0 + width / 2}" y="{height - 20}" text-anchor="middle">'
                     'gradient time per call (ms, log scale)</text>')
        parts.append(f'<text x="{x0 + 15}" y="{height / 2}" text-anchor="middle" '
                     f'transform="rotate(-90 {x0 + 15} {height / 2})">peak memory (MiB, log scale)</text>')
        for e in range(math.floor(lt[0]), math.ceil(lt[1]) + 1):
            for m in (1, 2, 5):
                t = m * 10 ** e
                if lt[0] <= math.log10(t) <= lt[1]:
                    parts.append(f'<text x="{sx(t)}" y="{height - pad + 14}" text-anchor="middle">{t:g}</text>')
        for e in range(math.floor(lm[0]), math.ceil(lm[1]) + 1):
            for m in (1, 2, 5):
                v = m * 10 ** e
                if lm[0] <= math.log10(v) <= lm[1]:
                    parts.append(f'<text x="{x0 + pad - 5}" y="{sy(v) + 4}" text-anchor="end">{v:g}</text>')
        for (name, grad_ns, _, kib) in rows:
            cx, cy = sx(grad_ns / 1e6), sy(kib / 1024)
            color = "#c0392b" if name == "none" else ("#2471a3" if name.startswith("binomial") else "#229954")
            parts.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="4" fill="{color}"/>')
            parts.append(f'<text x="{cx + 6:.1f}" y="{cy - 5:.1f}">{name}</text>')
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")


def main():
    out = sys.argv[sys.argv.index("--out") + 1] if "--out" in sys.argv else None
    if not os.path.exists(GRADLIFT):
        sys.exit("build first: cargo build --release --bin gradlift")
    with tempfile.TemporaryDirectory() as tmp:
        x = os.path.join(tmp, "ode.json")
        with open(x, "w") as f:
            json.dump({"x": [1.0 + (i % 7) / 10 for i in range(10000)], "s": 100}, f)
        loops = [
            ("relaxation, 2,000,000 steps", "examples/relaxation.grad", "relax",
             "steps=2000000", "x=1, y=3, steps=2000000"),
            ("GradBench ode, n = 10,000, s = 100", "examples/ode.grad", "last",
             "n=10000,s=100", "@" + x),
        ]
        series = []
        for title, file, fn, sizes, at in loops:
            rows = []
            print(f"\n**{title}** (`{file}`, `--fn {fn}`)\n")
            print("| schedule | gradient (ms) | gradient / primal | peak memory (MiB) |")
            print("|---|---:|---:|---:|")
            for s in SCHEDULES:
                grad_ns, primal_ns, kib = measure(os.path.join(ROOT, file), fn, sizes, at, s)
                rows.append((s, grad_ns, primal_ns, kib))
                print(f"| {s} | {grad_ns / 1e6:.2f} | {grad_ns / primal_ns:.1f} | {kib / 1024:.1f} |",
                      flush=True)
            series.append((title, rows))
    if out:
        svg(series, out)
        print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
