#!/usr/bin/env bash
# mpmoe.f9 (003 Fig. 9): time over volume of comm, comp and memcpy with their piecewise-linear
# fits (the performance model's speeds).
# Writes results/mpmoe/f9.csv and f9.png (with pm.csv where the performance model runs).
#   experiments/mpmoe/f9.sh [--scale local] [--backend cpu|cuda] [--ranks N] [bench options]
set -euo pipefail
# sbatch runs a copy of this script from its spool folder: run the original, beside the project.
[ -f "$(dirname "$0")/common.sh" ] || exec "$(scontrol show job "${SLURM_JOB_ID:?}" | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')" "$@"
source "$(dirname "$0")/common.sh"
mpmoe_figure f9 "$@"
