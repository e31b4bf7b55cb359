#!/usr/bin/env bash
# mpmoe.f3 (003 Fig. 3): slowdown factors alpha(y, x) of the layer's own all-to-all, expert
# compute and offload copy beside each other.
# Writes results/mpmoe/f3.csv and f3.png (with pm.csv where the performance model runs).
#   experiments/mpmoe/f3.sh [--scale local] [--backend cpu|cuda] [--ranks N] [bench options]
set -euo pipefail
# sbatch runs a copy of this script from its spool folder: run the original, beside the project.
[ -f "$(dirname "$0")/common.sh" ] || exec "$(scontrol show job "${SLURM_JOB_ID:?}" | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')" "$@"
source "$(dirname "$0")/common.sh"
mpmoe_figure f3 "$@"
