#!/usr/bin/env bash
# gradlift against GradBench's own JAX tool, on GradBench's real evals,
# every answer validated by the eval: three tools on each eval in turn —
#
#   gradlift       `gradlift gradbench`
#   jax            GradBench's JAX tool as it is (tools/jax/run.py)
#   jax+block      the same tool with `jax.block_until_ready` inside its
#                  timed region (gradbench_jax_blocked.py)
#
# — then one Markdown table of the tools' median `evaluate` times
# (gradbench_tools_table.py). Both JAX tools run with --multithreaded
# (both cores, as gradlift's default pool); JAX is the version in
# target/peers-venv (installed once, as run.sh does).
#
#   GRADBENCH_DIR=CHECKOUT benches/peers/run_gradbench_tools.sh [OUT_DIR] [EVAL…]
#
# The evals default to hello lse llsq ode kmeans; OUT_DIR to
# target/gradbench-tools, which gets one log per eval and tool and
# table.md. The evals run with --min-seconds 0.5 where they take it.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$root/target/gradbench-tools}
shift || true
evals=("$@")
[ ${#evals[@]} -gt 0 ] || evals=(hello lse llsq ode kmeans)
mkdir -p "$out"
venv=$root/target/peers-venv
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet jax numpy
fi
dir=${GRADBENCH_DIR:-$root/target/gradbench}
export GRADBENCH_DIR=$dir
for e in "${evals[@]}"; do
  opts=()
  [ "$e" = hello ] || opts=(--min-seconds 0.5)
  echo "== $e" >&2
  "$root/benches/peers/gradbench_eval.sh" "$e" "${opts[@]}" >"$out/$e.gradlift.txt"
  GRADBENCH_TOOL="$venv/bin/python python/gradbench/gradbench/tools/jax/run.py --multithreaded" \
    "$root/benches/peers/gradbench_eval.sh" "$e" "${opts[@]}" >"$out/$e.jax.txt"
  GRADBENCH_TOOL="$venv/bin/python $root/benches/peers/gradbench_jax_blocked.py $dir --multithreaded" \
    "$root/benches/peers/gradbench_eval.sh" "$e" "${opts[@]}" >"$out/$e.jax+block.txt"
done
python3 "$root/benches/peers/gradbench_tools_table.py" "$out" "${evals[@]}" | tee "$out/table.md"
