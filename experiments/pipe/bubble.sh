#!/usr/bin/env bash
# pipe.bubble (002 Sec. 8.3; the zero-bubble schedules): GPipe, 1F1B and ZB-H1 over M micro-batches
# of a fixed mini-batch, one pipeline stage per rank, with and without recomputation -- the
# bubble each stage measured from its own events, the simulator's prediction from the same
# table and the measured op times, (P-1)/(M+P-1), throughput and peak activation memory.
# Runs at RANKS stages (default 2: one core each here), then at 4 stages (oversubscribed on a
# 2-core machine: the stages take turns on the cores, and the simulator runs the table with at
# most as many ops at once as there are cores), merged into results/pipe/bubble.csv; bubble.png.
#   experiments/pipe/bubble.sh [--scale local] [--backend cpu|cuda] [--ranks N] [bench options]
set -euo pipefail
# sbatch runs a copy of this script from its spool folder: run the original, beside the project.
[ -f "$(dirname "$0")/../lib.sh" ] || exec "$(scontrol show job "${SLURM_JOB_ID:?}" | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')" "$@"
source "$(dirname "$0")/../lib.sh"
RANKS="${RANKS:-${SLURM_NTASKS:-2}}"
moebench_parse_args "$@"
py="$(moebench_python)" || exit 2
bin="$MOEBENCH_BUILD/bench/moebench_pipe_bubble"
moebench_launch "$MOEBENCH_RESULTS/pipe" "$bin" --scale "$SCALE" --backend "$BACKEND" --out "$MOEBENCH_RESULTS" \
  ${EXTRA[@]+"${EXTRA[@]}"}
if [ "$(moebench_launcher)" = none ] || [ "$BACKEND" = cuda ]; then
  echo "pipe/bubble.sh: the second stage count left out (one GPU per stage, or no launcher)"
else
  main_ranks="$RANKS"
  RANKS=4
  [ "$main_ranks" = 4 ] && RANKS=2
  moebench_launch "$MOEBENCH_RESULTS/pipe_ranks$RANKS/pipe" "$bin" --scale "$SCALE" --backend "$BACKEND" \
    --out "$MOEBENCH_RESULTS/pipe_ranks$RANKS" ${EXTRA[@]+"${EXTRA[@]}"}
  "$py" "$MOEBENCH_ROOT/plots/merge_csv.py" "$MOEBENCH_RESULTS/pipe/bubble.csv" "$MOEBENCH_RESULTS/pipe/bubble.csv" \
    "$MOEBENCH_RESULTS/pipe_ranks$RANKS/pipe/bubble.csv"
fi
"$py" "$MOEBENCH_ROOT/plots/pipe_bubble.py" "$MOEBENCH_RESULTS/pipe"
