#!/usr/bin/env bash
# ppmoe.t2 (000 Table 2): training-step throughput of the dense backbone, DPMoE and PPMoE in the
# paper's DP / TP / PP / EP / ZeRO layouts (the small setting's rows shrunk to 4 ranks at the
# local scale), with the speed ratio to the slowest dense row -- over this machine's MPI
# (results/ppmoe/t2.csv) and over the emulated link of common.sh
# (results/ppmoe_emulated/ppmoe/t2.csv); t2.png beside each.
#   experiments/ppmoe/t2.sh [--scale local] [--backend cpu|cuda] [--ranks N] [bench options]
set -euo pipefail
# sbatch runs a copy of this script from its spool folder: run the original, beside the project.
[ -f "$(dirname "$0")/common.sh" ] || exec "$(scontrol show job "${SLURM_JOB_ID:?}" | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')" "$@"
source "$(dirname "$0")/common.sh"
ppmoe_experiment moebench_ppmoe_layouts ppmoe_t2.py "$@"
