#!/usr/bin/env bash
# runtime.slowdown (MPMoE Sec. 2.3, Fig. 3): slowdown factors alpha(y, x) of communication,
# computation and memory copies running beside each other on this machine, and the overlap of
# a comm with a GEMM of the same length -- over the world communicator and, on the cpu backend,
# over an emulated link. Writes results/runtime/slowdown.csv, overlap.csv and slowdown.png.
#   experiments/runtime/slowdown.sh [--scale local] [--backend cpu|cuda] [--ranks N] [bench options]
set -euo pipefail
# sbatch runs a copy of this script from its spool folder: run the original, beside the project.
[ -f "$(dirname "$0")/../lib.sh" ] || exec "$(scontrol show job "${SLURM_JOB_ID:?}" | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')" "$@"
source "$(dirname "$0")/../lib.sh"
RANKS="${RANKS:-${SLURM_NTASKS:-2}}"  # comm needs a peer; one rank per core here
moebench_experiment runtime moebench_slowdown runtime_slowdown.py "$@"
