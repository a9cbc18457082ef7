#!/usr/bin/env bash
# gradlift against JAX on losses that read arrays at computed positions
# (see indexed_vs_jax.py), built and run by run.sh.
#
#   benches/peers/run_indexed.sh [--seconds S] [--cases lookup ba]
exec env PEERS_SCRIPT=benches/peers/indexed_vs_jax.py "$(dirname "$0")/run.sh" "$@"
