#!/usr/bin/env bash
# Runs one of GradBench's real evals against `gradlift gradbench`, without
# Docker, as docs/gradbench.md describes: the eval's own Python program
# sends its inputs, and GradBench's `manual` C++ tool validates every
# answer.
#
#   benches/peers/gradbench_eval.sh MODULE [eval options…]
#   benches/peers/gradbench_eval.sh ht --model small --variant simple --min-seconds 0
#
# GRADBENCH_DIR is a checkout of github.com/gradbench/gradbench (default
# target/gradbench, cloned when missing; its data files for ba and ht are
# Git LFS objects: clone with git-lfs installed). Needs make, a C++17
# compiler, python3 (a virtual environment with numpy, scipy and pydantic
# is made once in target/gradbench-venv) and nlohmann's json.hpp (Debian:
# nlohmann-json3-dev), copied where GradBench's C++ code includes it.
# Prints each answer valid or INVALID with the tool's median time, then
# `valid V of N`; the exit status is 0 only when all are valid.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
module=${1:?usage: benches/peers/gradbench_eval.sh MODULE [eval options...]}
shift
dir=${GRADBENCH_DIR:-$root/target/gradbench}
if [ ! -d "$dir/python/gradbench" ]; then
  git clone --quiet https://github.com/gradbench/gradbench "$dir"
fi
if [ ! -f "$dir/cpp/json.hpp" ]; then
  if [ -f /usr/include/nlohmann/json.hpp ]; then
    cp /usr/include/nlohmann/json.hpp "$dir/cpp/json.hpp"
  else
    echo "gradbench_eval.sh: needs nlohmann's json.hpp (apt install nlohmann-json3-dev)" >&2
    exit 2
  fi
fi
if [ ! -f "$dir/python/gradbench/gradbench/evals/$module/run.py" ]; then
  echo "gradbench_eval.sh: GradBench has no eval \`$module\` (see $dir/python/gradbench/gradbench/evals)" >&2
  exit 2
fi
# The evals that validate against the manual tool (saddle and particle
# validate by themselves).
if grep -q "cpp.evaluate" "$dir/python/gradbench/gradbench/evals/$module/run.py"; then
  make -s -C "$dir/tools/manual" NATIVE=no "bin/$module" >/dev/null
fi
venv=$root/target/gradbench-venv
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet numpy scipy pydantic dataclasses-json
fi
(cd "$root" && cargo build --quiet --release --bin gradlift)
cd "$dir"
export PYTHONPATH=$dir/python/gradbench
# GRADBENCH_TOOL, a command run in the checkout, replaces gradlift as the
# tool (benches/peers/run_gradbench_tools.sh runs GradBench's JAX tool so).
read -r -a tool <<<"${GRADBENCH_TOOL:-$root/target/release/gradlift gradbench}"
exec "$venv/bin/python" "$root/benches/peers/gradbench_relay.py" \
  "$venv/bin/python" "python/gradbench/gradbench/evals/$module/run.py" "$@" \
  -- "${tool[@]}"
