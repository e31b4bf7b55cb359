#!/usr/bin/env bash
# mpmoe.f14 (003 Fig. 14): PMoE's layer time over n = 1..8 for each B with Algorithm 1's pick
# (paper, GPT-XL: n = 2 below 8k tokens, 4 to 22k, 8 above).
# Writes results/mpmoe/f14.csv and f14.png (with pm.csv where the performance model runs).
#   experiments/mpmoe/f14.sh [--scale local] [--backend cpu|cuda] [--ranks N] [bench options]
set -euo pipefail
# sbatch runs a copy of this script from its spool folder: run the original, beside the project.
[ -f "$(dirname "$0")/common.sh" ] || exec "$(scontrol show job "${SLURM_JOB_ID:?}" | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')" "$@"
source "$(dirname "$0")/common.sh"
mpmoe_figure f14 "$@"
