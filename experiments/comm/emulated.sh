#!/usr/bin/env bash
# comm.emulated: the comm sweep over an emulated interconnect (default 1 GB/s, 5 us), to show
# what the emulation gives: bus bandwidth at the set figure at large sizes, latency-bound at
# small ones. Writes results/comm_emulated/comm/<collective>.csv (each row labelled
# "emulated: ...") and results/comm_emulated/comm/busbw.png.
#   experiments/comm/emulated.sh [--scale local] [--ranks N] [--link-bandwidth GB/s] [--link-latency us] [bench options]
set -euo pipefail
# sbatch runs a copy of this script from its spool folder: run the original, beside the project.
[ -f "$(dirname "$0")/../lib.sh" ] || exec "$(scontrol show job "${SLURM_JOB_ID:?}" | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')" "$@"
source "$(dirname "$0")/../lib.sh"
MOEBENCH_NESTED=comm_emulated moebench_experiment comm moebench_comm comm.py --link-bandwidth 1 --link-latency 5 --min-bytes 64K "$@"
