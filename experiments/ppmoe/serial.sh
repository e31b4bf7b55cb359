#!/usr/bin/env bash
# ppmoe.serial (PPMoE Sec. 3.3.2): N serial expert GEMMs vs one grouped GEMM vs one dense GEMM
# of equal FLOPs. Writes results/ppmoe/serial.csv and results/ppmoe/serial.png.
#   experiments/ppmoe/serial.sh [--scale local] [--backend cpu|cuda] [bench options]
set -euo pipefail
# sbatch runs a copy of this script from its spool folder: run the original, beside the project.
[ -f "$(dirname "$0")/../lib.sh" ] || exec "$(scontrol show job "${SLURM_JOB_ID:?}" | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')" "$@"
source "$(dirname "$0")/../lib.sh"
moebench_experiment --single-rank ppmoe moebench_ppmoe_serial ppmoe_serial.py "$@"
