#!/usr/bin/env bash
# ppmoe.t2 (000 Table 2): training-step throughput of the dense backbone, DPMoE and PPMoE in the
# paper's DP / TP / PP / EP / ZeRO layouts (the small setting's rows shrunk to 4 ranks at the
# local scale), with the speed ratio to the slowest dense row -- over this machine's MPI link
# (results/ppmoe/t2.csv) and over an emulated link of PPMOE_LINK_GBPS (default 0.05 GB/s, 10 us),
# slower than the compute as the paper's inter-node links are (results/ppmoe_emulated/ppmoe/t2.csv);
# t2.png beside each. Every row names its link.
#   experiments/ppmoe/t2.sh [--scale local] [--backend cpu|cuda] [--ranks N] [bench options]
set -euo pipefail
source "$(dirname "$0")/../lib.sh"
RANKS="${RANKS:-4}"
moebench_parse_args "$@"
py="$(moebench_python)" || exit 2
bin="$MOEBENCH_BUILD/bench/moebench_ppmoe_layouts"
moebench_launch "$MOEBENCH_RESULTS/ppmoe" "$bin" --scale "$SCALE" --backend "$BACKEND" --out "$MOEBENCH_RESULTS" \
  ${EXTRA[@]+"${EXTRA[@]}"}
"$py" "$MOEBENCH_ROOT/plots/ppmoe_t2.py" "$MOEBENCH_RESULTS/ppmoe"
if [ "$BACKEND" = cpu ]; then
  moebench_launch "$MOEBENCH_RESULTS/ppmoe_emulated/ppmoe" "$bin" --scale "$SCALE" --backend cpu \
    --out "$MOEBENCH_RESULTS/ppmoe_emulated" --link-bandwidth "${PPMOE_LINK_GBPS:-0.05}" --link-latency "${PPMOE_LINK_US:-10}" \
    ${EXTRA[@]+"${EXTRA[@]}"}
  "$py" "$MOEBENCH_ROOT/plots/ppmoe_t2.py" "$MOEBENCH_RESULTS/ppmoe_emulated/ppmoe"
fi
