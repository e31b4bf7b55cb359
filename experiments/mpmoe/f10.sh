#!/usr/bin/env bash
# mpmoe.f10 (003 Fig. 10): speedup of MPMoE-pb (Algorithm 1) and MPMoE-pm (performance model) over
# the FastMoE-style (n = 1) and FasterMoE-style (g = 1) layers; paper 1.66x / 1.55x over
# FasterMoE, 2.34x / 2.20x over FastMoE.
# Writes results/mpmoe/f10.csv and f10.png (with pm.csv where the performance model runs).
#   experiments/mpmoe/f10.sh [--scale local] [--backend cpu|cuda] [--ranks N] [bench options]
set -euo pipefail
# sbatch runs a copy of this script from its spool folder: run the original, beside the project.
[ -f "$(dirname "$0")/common.sh" ] || exec "$(scontrol show job "${SLURM_JOB_ID:?}" | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')" "$@"
source "$(dirname "$0")/common.sh"
mpmoe_figure f10 "$@"
