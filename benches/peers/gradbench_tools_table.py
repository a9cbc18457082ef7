#!/usr/bin/env python3
"""The table of benches/peers/run_gradbench_tools.sh: for each eval, the
lines `gradbench_relay.py` printed for each tool (function, input, valid,
median milliseconds), joined by function and input into one Markdown row.

    gradbench_tools_table.py OUT_DIR EVAL…
"""

import os
import sys

TOOLS = ["gradlift", "jax", "jax+block"]


def read(path):
    rows = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 5 and parts[-1] == "ms" and parts[-3] in ("valid", "INVALID"):
                rows[(parts[0], " ".join(parts[1:-3]))] = (parts[-3], float(parts[-2]))
    return rows


def fmt(ms):
    if ms != ms:
        return "—"
    if ms >= 1:
        return f"{ms:.3g} ms"
    if ms >= 1e-3:
        return f"{ms * 1e3:.3g} µs"
    return f"{ms * 1e6:.3g} ns"


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    out, evals = sys.argv[1], sys.argv[2:]
    print("| eval | function | input | gradlift | JAX tool | JAX tool, blocked | gradlift / blocked | gradlift / as it is | valid |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for e in evals:
        tools = [read(os.path.join(out, f"{e}.{t}.txt")) for t in TOOLS]
        for key, (valid, ms) in tools[0].items():
            others = [t.get(key, ("missing", float("nan"))) for t in tools[1:]]
            checks = [valid] + [o[0] for o in others]
            ok = "all" if all(c == "valid" for c in checks) else ", ".join(f"{t}: {c}" for t, c in zip(TOOLS, checks))
            stock, blocked = others[0][1], others[1][1]
            print(
                f"| {e} | {key[0]} | {key[1]} | {fmt(ms)} | {fmt(stock)} | {fmt(blocked)} | "
                f"{ms / blocked:.2f} | {ms / stock:.2f} | {ok} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
