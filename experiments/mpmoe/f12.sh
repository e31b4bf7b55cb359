#!/usr/bin/env bash
# mpmoe.f12 (003 Fig. 12): achieved against theoretical (Eq. 5) memory saving for n = 2, 4, 8
# (target >= 0.98, paper ~0.95).
# Writes results/mpmoe/f12.csv and f12.png (with pm.csv where the performance model runs).
#   experiments/mpmoe/f12.sh [--scale local] [--backend cpu|cuda] [--ranks N] [bench options]
set -euo pipefail
# sbatch runs a copy of this script from its spool folder: run the original, beside the project.
[ -f "$(dirname "$0")/common.sh" ] || exec "$(scontrol show job "${SLURM_JOB_ID:?}" | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')" "$@"
source "$(dirname "$0")/common.sh"
mpmoe_figure f12 "$@"
