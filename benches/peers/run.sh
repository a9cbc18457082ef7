#!/usr/bin/env bash
# gradlift against JAX on the GradBench modules (see gradbench_vs_jax.py).
#
# Builds gradlift in release mode, creates a virtual environment with JAX
# (target/peers-venv, once), and runs the comparison; arguments are passed
# on: --quick for the smaller sizes, --modules lse ode, --out FILE.
# PEERS_SCRIPT names another comparison to run the same way
# (run_indexed.sh, run_programs.sh).
#
#   benches/peers/run.sh --out target/peers.md
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release --bin gradlift
venv=target/peers-venv
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet jax numpy
fi
exec "$venv/bin/python" "${PEERS_SCRIPT:-benches/peers/gradbench_vs_jax.py}" --gradlift target/release/gradlift "$@"
