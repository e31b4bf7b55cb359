#!/usr/bin/env bash
# mpmoe.f16 (003 Fig. 16): breakdown of no tensor cores, seq(n = 1), seq(n = 6), MPMoE-pb and -pm;
# pipelined against the ideal max(comm, comp) of seq(n) (target >= 0.90, paper 0.70).
# Writes results/mpmoe/f16.csv and f16.png (with pm.csv where the performance model runs).
#   experiments/mpmoe/f16.sh [--scale local] [--backend cpu|cuda] [--ranks N] [bench options]
set -euo pipefail
# sbatch runs a copy of this script from its spool folder: run the original, beside the project.
[ -f "$(dirname "$0")/common.sh" ] || exec "$(scontrol show job "${SLURM_JOB_ID:?}" | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')" "$@"
source "$(dirname "$0")/common.sh"
mpmoe_figure f16 "$@"
