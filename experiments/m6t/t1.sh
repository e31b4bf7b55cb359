#!/usr/bin/env bash
# m6t.t1 (M6-T Table 1): ms per training step of the 3- and 16-layer MoE models with top-1,
# top-4, top-16 and 4 top-4 routing, expert-parallel over the ranks (default 4), beside Table 1
# and each row's ratio to top-1. Writes results/m6t/t1.csv and t1.png.
#   experiments/m6t/t1.sh [--scale local] [--backend cpu|cuda] [--ranks N] [bench options]
set -euo pipefail
# sbatch runs a copy of this script from its spool folder: run the original, beside the project.
[ -f "$(dirname "$0")/../lib.sh" ] || exec "$(scontrol show job "${SLURM_JOB_ID:?}" | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')" "$@"
source "$(dirname "$0")/../lib.sh"
RANKS="${RANKS:-${SLURM_NTASKS:-4}}"
moebench_experiment m6t moebench_m6t_t1 m6t_t1.py "$@"
