#!/usr/bin/env bash
# ppmoe.t1 and ppmoe.t3 (000 Tables 1 and 3): the parts of a forward step of the MoE model in
# DPMoE (DP = EP over the ranks: its two all-to-alls, gating, the rest) and in PPMoE (TP over the
# ranks: gating, expert compute, the MoE all-reduce, the dense FFNs and their all-reduce), ms and
# % of the forward beside the paper's -- over this machine's MPI (results/ppmoe/t1.csv, t3.csv)
# and over the emulated link of common.sh (results/ppmoe_emulated/ppmoe/); t1_t3.png beside them.
#   experiments/ppmoe/breakdown.sh [--scale local] [--backend cpu|cuda] [--ranks N] [bench options]
set -euo pipefail
# sbatch runs a copy of this script from its spool folder: run the original, beside the project.
[ -f "$(dirname "$0")/common.sh" ] || exec "$(scontrol show job "${SLURM_JOB_ID:?}" | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')" "$@"
source "$(dirname "$0")/common.sh"
ppmoe_experiment moebench_ppmoe_breakdown ppmoe_breakdown.py "$@"
