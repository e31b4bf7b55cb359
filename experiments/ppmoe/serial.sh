#!/usr/bin/env bash
# ppmoe.serial (PPMoE Sec. 3.3.2): N serial expert GEMMs vs one grouped GEMM vs one dense GEMM
# of equal FLOPs. Writes results/ppmoe/serial.csv and results/ppmoe/serial.png.
#   experiments/ppmoe/serial.sh [--scale local] [--backend cpu|cuda] [bench options]
set -euo pipefail
source "$(dirname "$0")/../lib.sh"
moebench_experiment --single-rank ppmoe moebench_ppmoe_serial ppmoe_serial.py "$@"
