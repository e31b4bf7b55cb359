#!/usr/bin/env bash
# moe.layer: one MoE layer forward + backward per dispatcher (single-rank reference,
# expert parallel = DPMoE, PPMoE) with its breakdown (gating, dispatch, expert, combine and
# their backward) and the overhead ratio over the expert GEMMs alone (target <= 1.15).
# Writes results/moe/layer_<dispatcher>.csv and results/moe/layer_breakdown.png.
#   experiments/moe/run.sh [--scale local] [--backend cpu|cuda] [--ranks N] [bench options]
set -euo pipefail
source "$(dirname "$0")/../lib.sh"
RANKS="${RANKS:-2}"  # local scale: one rank per core
moebench_experiment moe moebench_moe_layer moe_layer.py "$@"
