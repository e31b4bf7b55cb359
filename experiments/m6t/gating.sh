#!/usr/bin/env bash
# m6t.gating (M6-T Table 1): gate kernel, gate and layer time for top-1/2/4/16 and
# 4 prototypes x top-4 (and x top-1), beside Table 1's ms/step ratios.
# Writes results/m6t/gating.csv and results/m6t/gating.png.
set -euo pipefail
# sbatch runs a copy of this script from its spool folder: run the original, beside the project.
[ -f "$(dirname "$0")/../lib.sh" ] || exec "$(scontrol show job "${SLURM_JOB_ID:?}" | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')" "$@"
source "$(dirname "$0")/../lib.sh"
moebench_experiment --single-rank m6t moebench_m6t_gating m6t_gating.py "$@"
