#!/usr/bin/env bash
# The main job: set-up, build (the programs the experiments run, not the tests), then every
# experiment at the local scale (CPU backend, MPI ranks on this machine), writing
# results/<experiment>/*.csv and their PNG plots.
# SCALE=tiny|local|paper, BACKEND=cpu|cuda and RANKS=N override the defaults.
source "$(dirname "$0")/usage.sh" && moebench_help_if_asked "$@"
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh moebench_experiments
experiments/run_all.sh
