#!/usr/bin/env bash
# gradlift against JAX on losses that read arrays at computed positions
# (see indexed_vs_jax.py). Builds gradlift in release mode and reuses the
# virtual environment of run.sh (target/peers-venv).
#
#   benches/peers/run_indexed.sh [--seconds S] [--cases lookup ba]
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release --bin gradlift
venv=target/peers-venv
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet jax numpy
fi
exec "$venv/bin/python" benches/peers/indexed_vs_jax.py --gradlift target/release/gradlift "$@"
