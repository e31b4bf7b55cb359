#!/usr/bin/env bash
# mpmoe: every MPMoE figure (003 Figs. 2, 3, 9-17) in one bench run over the emulated link
# (common.sh), then Figs. 3, 9, 10, 14 again over this machine's own MPI link (measured), and
# Fig. 15 at a second rank count. Writes results/mpmoe/ (emulated link), results/mpmoe_mpi_link/
# (measured link) and results/mpmoe_f15/; every row names its link. Main-job size at local scale:
# GPT-S, B = 512 and 1024 tokens per rank, 4 ranks, one expert each; the paper scale takes the
# three Table 3 layers, B from 2k to 32k, one rank per GPU.
#   experiments/mpmoe/run.sh [--scale local] [--backend cpu|cuda] [--ranks N] [bench options]
set -euo pipefail
# sbatch runs a copy of this script from its spool folder: run the original, beside the project.
[ -f "$(dirname "$0")/common.sh" ] || exec "$(scontrol show job "${SLURM_JOB_ID:?}" | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')" "$@"
source "$(dirname "$0")/common.sh"
moebench_parse_args "$@"
py="$(moebench_python)" || exit 2
mpmoe_run "$MOEBENCH_RESULTS" --fresh-search ${EXTRA[@]+"${EXTRA[@]}"}
if [ "$BACKEND" = cpu ]; then
  moebench_launch "$MOEBENCH_RESULTS/mpmoe_mpi_link/mpmoe" "$MOEBENCH_BUILD/bench/moebench_mpmoe" --scale "$SCALE" \
    --backend cpu --out "$MOEBENCH_RESULTS/mpmoe_mpi_link" --experiments f3,f9,f10,f14 --tokens 512 --fresh-search \
    ${EXTRA[@]+"${EXTRA[@]}"}
  mpmoe_plot "$MOEBENCH_RESULTS/mpmoe_mpi_link/mpmoe"
fi
if [ "$(moebench_launcher)" = none ]; then
  echo "mpmoe/run.sh: f15 at a second rank count left out: MOEBENCH_LAUNCHER=none runs 1 rank"
else
  main_ranks="$RANKS"
  RANKS=2
  [ "$main_ranks" = 2 ] && RANKS=4
  mpmoe_run "$MOEBENCH_RESULTS/mpmoe_f15/ranks$RANKS" --experiments f15 ${EXTRA[@]+"${EXTRA[@]}"}
  "$py" "$MOEBENCH_ROOT/plots/merge_csv.py" "$MOEBENCH_RESULTS/mpmoe/f15.csv" "$MOEBENCH_RESULTS/mpmoe/f15.csv" \
    "$MOEBENCH_RESULTS/mpmoe_f15/ranks$RANKS/mpmoe/f15.csv"
fi
mpmoe_plot "$MOEBENCH_RESULTS/mpmoe"
