#!/usr/bin/env bash
# gradlift against JAX on array programs a user writes (see
# programs_vs_jax.py), built and run by run.sh.
#
#   benches/peers/run_programs.sh [--seconds S] [--cases classifier]
exec env PEERS_SCRIPT=benches/peers/programs_vs_jax.py "$(dirname "$0")/run.sh" "$@"
