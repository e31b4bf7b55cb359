#!/usr/bin/env bash
# m6t.cv (M6-T Fig. 1, Eq. 2): expert-load c_v per layer while a stack of MoE layers trains on
# a Zipf mixture of Gaussian clusters, with and without the aux loss, and the dropped share at
# capacity factors 1.25 and 2.0. Writes results/m6t/cv.csv and results/m6t/cv.png.
set -euo pipefail
source "$(dirname "$0")/../lib.sh"
RANKS="${RANKS:-1}"
moebench_parse_args "$@"
moebench_launch "$MOEBENCH_RESULTS/m6t" "$(moebench_bin moebench_m6t_cv)" --scale "$SCALE" --backend "$BACKEND" \
  --out "$MOEBENCH_RESULTS" ${EXTRA[@]+"${EXTRA[@]}"}
"$(moebench_python)" "$MOEBENCH_ROOT/plots/m6t_cv.py" "$MOEBENCH_RESULTS/m6t"
