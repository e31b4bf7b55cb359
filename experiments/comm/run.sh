#!/usr/bin/env bash
# comm: nccl-tests-style sweep of all-to-all, all-reduce, all-gather, reduce-scatter and
# send/recv. Writes results/comm/<collective>.csv (time, algbw, busbw, #wrong, provenance)
# and results/comm/busbw.png. Fails if any element arrived wrong.
#   experiments/comm/run.sh [--scale local] [--backend cpu|cuda] [--ranks N] [bench options]
set -euo pipefail
# sbatch runs a copy of this script from its spool folder: run the original, beside the project.
[ -f "$(dirname "$0")/../lib.sh" ] || exec "$(scontrol show job "${SLURM_JOB_ID:?}" | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')" "$@"
source "$(dirname "$0")/../lib.sh"
moebench_experiment comm moebench_comm comm.py "$@"
