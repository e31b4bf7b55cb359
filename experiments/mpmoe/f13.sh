#!/usr/bin/env bash
# mpmoe.f13 (003 Fig. 13): dispatch + recovery communication, not overlapped, FasterMoE-style per
# group size g against MPMoE per n.
# Writes results/mpmoe/f13.csv and f13.png (with pm.csv where the performance model runs).
#   experiments/mpmoe/f13.sh [--scale local] [--backend cpu|cuda] [--ranks N] [bench options]
set -euo pipefail
source "$(dirname "$0")/common.sh"
mpmoe_figure f13 "$@"
