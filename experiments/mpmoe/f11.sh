#!/usr/bin/env bash
# mpmoe.f11 (003 Fig. 11): peak memory of FastMoE-, FasterMoE-style, PMoE and MPMoE (S1-S4)
# normalised to PMoE at n = 2, 4, 8; paper 23%, 34%, 38% less.
# Writes results/mpmoe/f11.csv and f11.png (with pm.csv where the performance model runs).
#   experiments/mpmoe/f11.sh [--scale local] [--backend cpu|cuda] [--ranks N] [bench options]
set -euo pipefail
# sbatch runs a copy of this script from its spool folder: run the original, beside the project.
[ -f "$(dirname "$0")/common.sh" ] || exec "$(scontrol show job "${SLURM_JOB_ID:?}" | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')" "$@"
source "$(dirname "$0")/common.sh"
mpmoe_figure f11 "$@"
