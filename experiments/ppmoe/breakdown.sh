#!/usr/bin/env bash
# ppmoe.t1 and ppmoe.t3 (000 Tables 1 and 3): the parts of a forward step of the MoE model in
# DPMoE (DP = EP over the ranks: its two all-to-alls, gating, the rest) and in PPMoE (TP over the
# ranks: gating, expert compute, the MoE all-reduce, the dense FFNs and their all-reduce), ms and
# % of the forward beside the paper's -- over this machine's MPI (results/ppmoe/t1.csv, t3.csv)
# and over the emulated link of experiments/ppmoe/t2.sh (results/ppmoe_emulated/ppmoe/); plots
# t1_t3.png beside them.
#   experiments/ppmoe/breakdown.sh [--scale local] [--backend cpu|cuda] [--ranks N] [bench options]
set -euo pipefail
source "$(dirname "$0")/../lib.sh"
RANKS="${RANKS:-4}"
moebench_parse_args "$@"
py="$(moebench_python)" || exit 2
bin="$MOEBENCH_BUILD/bench/moebench_ppmoe_breakdown"
moebench_launch "$MOEBENCH_RESULTS/ppmoe" "$bin" --scale "$SCALE" --backend "$BACKEND" --out "$MOEBENCH_RESULTS" \
  ${EXTRA[@]+"${EXTRA[@]}"}
"$py" "$MOEBENCH_ROOT/plots/ppmoe_breakdown.py" "$MOEBENCH_RESULTS/ppmoe"
if [ "$BACKEND" = cpu ]; then
  moebench_launch "$MOEBENCH_RESULTS/ppmoe_emulated/ppmoe" "$bin" --scale "$SCALE" --backend cpu \
    --out "$MOEBENCH_RESULTS/ppmoe_emulated" --link-bandwidth "${PPMOE_LINK_GBPS:-0.05}" --link-latency "${PPMOE_LINK_US:-10}" \
    ${EXTRA[@]+"${EXTRA[@]}"}
  "$py" "$MOEBENCH_ROOT/plots/ppmoe_breakdown.py" "$MOEBENCH_RESULTS/ppmoe_emulated/ppmoe"
fi
