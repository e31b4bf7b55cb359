#!/usr/bin/env bash
# mpmoe.f13 (003 Fig. 13): dispatch + recovery communication, not overlapped, FasterMoE-style per
# group size g against MPMoE per n.
# Writes results/mpmoe/f13.csv and f13.png (with pm.csv where the performance model runs).
#   experiments/mpmoe/f13.sh [--scale local] [--backend cpu|cuda] [--ranks N] [bench options]
set -euo pipefail
# sbatch runs a copy of this script from its spool folder: run the original, beside the project.
[ -f "$(dirname "$0")/common.sh" ] || exec "$(scontrol show job "${SLURM_JOB_ID:?}" | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')" "$@"
source "$(dirname "$0")/common.sh"
mpmoe_figure f13 "$@"
