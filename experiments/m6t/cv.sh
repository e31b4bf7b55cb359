#!/usr/bin/env bash
# m6t.cv (M6-T Fig. 1, Eq. 2): expert-load c_v per layer while a stack of MoE layers trains on
# a Zipf mixture of Gaussian clusters, with and without the aux loss, and the dropped share at
# capacity factors 1.25 and 2.0. Writes results/m6t/cv.csv and results/m6t/cv.png, and the
# sweep of settings that explains the result: results/m6t/cv_sweep.csv and cv_sweep.png (the
# sweep trains the stack 16 more times: at the paper scale only when --sweep is given).
set -euo pipefail
# sbatch runs a copy of this script from its spool folder: run the original, beside the project.
[ -f "$(dirname "$0")/../lib.sh" ] || exec "$(scontrol show job "${SLURM_JOB_ID:?}" | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')" "$@"
source "$(dirname "$0")/../lib.sh"
scale="${SCALE:-local}"
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[$i]}" in
    --scale) scale="${args[$((i + 1))]:-}" ;;
    --scale=*) scale="${args[$i]#*=}" ;;
  esac
done
sweep=(--sweep)
[ "$scale" = paper ] && sweep=()
moebench_experiment --single-rank m6t moebench_m6t_cv m6t_cv.py ${sweep[@]+"${sweep[@]}"} "$@"
