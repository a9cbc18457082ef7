#!/usr/bin/env python3
"""Connects one of GradBench's evals to a tool, as GradBench's own runner
does without Docker: every line the eval writes goes to the tool, and every
answer of the tool back to the eval, which validates it.

    gradbench_relay.py EVAL COMMAND… -- TOOL COMMAND…

Prints, for each `analysis` the eval sends, the function, the input's
description, `valid` or `INVALID` (with the eval's reason) and the median of
the tool's `evaluate` timings (a tool that compiles at its first call,
as JAX's does, reports that call among them); then `valid V of N`. Exits with status 0
when every analysis is valid, 1 otherwise, 2 when a process fails.
"""

import json
import statistics
import subprocess
import sys


def main() -> int:
    args = sys.argv[1:]
    if "--" not in args or args.index("--") == 0 or args[-1] == "--":
        print(__doc__, file=sys.stderr)
        return 2
    cut = args.index("--")
    eval_cmd, tool_cmd = args[:cut], args[cut + 1 :]
    ev = subprocess.Popen(eval_cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    tool = subprocess.Popen(tool_cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    asked = {}
    valid = total = 0
    for line in ev.stdout:
        message = json.loads(line)
        tool.stdin.write(line if line.endswith("\n") else line + "\n")
        tool.stdin.flush()
        answer = tool.stdout.readline()
        if not answer:
            print("the tool stopped answering", file=sys.stderr)
            return 2
        response = json.loads(answer)
        kind = message.get("kind")
        if kind == "define" and not response.get("success"):
            print(f"define {message.get('module')}: {response.get('error')}", flush=True)
        if kind == "evaluate":
            times = [t["nanoseconds"] for t in response.get("timings", []) if t["name"] == "evaluate"]
            median = statistics.median(times) / 1e6 if times else float("nan")
            asked[message["id"]] = (message.get("function"), message.get("description"), median, response.get("error"))
        if kind == "analysis":
            total += 1
            ok = bool(message.get("valid"))
            valid += ok
            function, description, median, error = asked.get(message.get("of"), ("?", "?", float("nan"), None))
            reason = "" if ok else " " + str(message.get("error") or error or "")[:300]
            print(f"{function:10} {str(description):28} {'valid' if ok else 'INVALID'} {median:12.6f} ms{reason}", flush=True)
        ev.stdin.write(answer)
        ev.stdin.flush()
    ev.stdin.close()
    tool.stdin.close()
    if ev.wait() != 0:
        print(f"the eval exited with status {ev.returncode}", file=sys.stderr)
        return 2
    tool.wait()
    print(f"valid {valid} of {total}")
    return 0 if total > 0 and valid == total else 1


if __name__ == "__main__":
    sys.exit(main())
