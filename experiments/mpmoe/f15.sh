#!/usr/bin/env bash
# mpmoe.f15 (003 Fig. 15): time overhead of the restore strategies S1-S4 over PMoE at the n
# Algorithm 1 picks for each, per (ranks, B), with the strategy MPMoE-pb and MPMoE-pm pick
# (paper: no single best). Runs the bench once per rank count in F15_RANKS (default "2 4"; on
# a cluster e.g. "8 32 64") and merges the rows into results/mpmoe/f15.csv and f15.png.
#   experiments/mpmoe/f15.sh [--scale local] [--backend cpu|cuda] [bench options]
set -euo pipefail
# sbatch runs a copy of this script from its spool folder: run the original, beside the project.
[ -f "$(dirname "$0")/common.sh" ] || exec "$(scontrol show job "${SLURM_JOB_ID:?}" | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')" "$@"
source "$(dirname "$0")/common.sh"
moebench_parse_args "$@"
py="$(moebench_python)" || exit 2
parts=()
for RANKS in ${F15_RANKS:-2 4}; do
  case "$RANKS" in ''|*[!0-9]*|0*) moebench_die "F15_RANKS: '$RANKS' is not a positive whole number" ;; esac
  mpmoe_run "$MOEBENCH_RESULTS/mpmoe_f15/ranks$RANKS" --experiments f15 ${EXTRA[@]+"${EXTRA[@]}"}
  parts+=("$MOEBENCH_RESULTS/mpmoe_f15/ranks$RANKS/mpmoe/f15.csv")
done
"$py" "$MOEBENCH_ROOT/plots/merge_csv.py" "$MOEBENCH_RESULTS/mpmoe/f15.csv" "${parts[@]}"
mpmoe_plot "$MOEBENCH_RESULTS/mpmoe"
