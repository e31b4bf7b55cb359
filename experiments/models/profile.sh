#!/usr/bin/env bash
# models.profile: this machine's hardware profile for the performance models, from the suite's
# own micro-benchmarks on the ranks of a run (default 4, as the local experiments): a GEMM sweep
# with every rank computing (the efficiency curve and the peak), a copy and the elementwise
# kernels (memory and elementwise bandwidth), all-to-alls among every rank (link latency and bandwidth).
# Writes results/models/profile_this_machine.csv, which models/project.sh holds the model's
# predictions of the local runs against.
# On one GPU (--backend cuda --ranks 1) the link's values come from models/profiles/h100-node.csv.
#   experiments/models/profile.sh [--scale local] [--backend cpu|cuda] [--ranks N] [--name NAME] [--link-profile P]
set -euo pipefail
# sbatch runs a copy of this script from its spool folder: run the original, beside the project.
[ -f "$(dirname "$0")/../lib.sh" ] || exec "$(scontrol show job "${SLURM_JOB_ID:?}" | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')" "$@"
source "$(dirname "$0")/../lib.sh"
RANKS="${RANKS:-${SLURM_NTASKS:-4}}"
moebench_parse_args "$@"
bin="$MOEBENCH_BUILD/bench/moebench_profile"
# One GPU measures no link: its values come from the H100 node's shipped profile (said in each
# row), as on a GPU box (scripts/gpu_box.sh runs everything at one rank); --link-profile overrides.
link=()
if [ "$RANKS" = 1 ] && [ "$BACKEND" = cuda ]; then
  link=(--link-profile h100-node)
  for a in ${EXTRA[@]+"${EXTRA[@]}"}; do
    case "$a" in --link-profile|--link-profile=*) link=() ;; esac
  done
fi
moebench_launch "$MOEBENCH_RESULTS/models" "$bin" --scale "$SCALE" --backend "$BACKEND" --out "$MOEBENCH_RESULTS" \
  ${link[@]+"${link[@]}"} ${EXTRA[@]+"${EXTRA[@]}"}
