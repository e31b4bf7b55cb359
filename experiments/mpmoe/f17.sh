#!/usr/bin/env bash
# mpmoe.f17 (003 Fig. 17): throughput scaling with the number of nodes. Under Slurm with more
# than one node, runs the MPMoE layer (f10: FastMoE-, FasterMoE-style, MPMoE-pb, -pm) on 1, 2,
# 4, ... of the job's nodes with RANKS_PER_NODE ranks each (default: the GPUs of a node on cuda,
# SLURM_NTASKS_PER_NODE otherwise) into results/mpmoe_scaling/N<nodes>/, then writes
# results/mpmoe/f17_scaling.csv and .png (throughput over one node's, and the share of ideal
# scaling; paper: MPMoE 5.76x on 8 nodes, 72% of ideal; FasterMoE 5.4x). Anywhere else the
# bench writes results/mpmoe/f17.csv saying why it was not measured.
#   sbatch -N 8 --gpus-per-node 8 --ntasks-per-node 8 experiments/mpmoe/f17.sh --scale paper --backend cuda
set -euo pipefail
# sbatch runs a copy of this script from its spool folder: run the original, beside the project.
[ -f "$(dirname "$0")/common.sh" ] || exec "$(scontrol show job "${SLURM_JOB_ID:?}" | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')" "$@"
source "$(dirname "$0")/common.sh"
moebench_parse_args "$@"
nodes="${SLURM_JOB_NUM_NODES:-1}"
if [ "$nodes" -le 1 ]; then
  mpmoe_run "$MOEBENCH_RESULTS" --experiments f17 ${EXTRA[@]+"${EXTRA[@]}"}
  exit 0
fi
per_node="${RANKS_PER_NODE:-${SLURM_NTASKS_PER_NODE:-}}"
[ -n "$per_node" ] || per_node="$(moebench_gpu_count "$MOEBENCH_BUILD/bench/moebench_mpmoe")"
case "$per_node" in ''|*[!0-9]*|0*) moebench_die "RANKS_PER_NODE: '$per_node' is not a positive whole number" ;; esac
py="$(moebench_python)" || exit 2
n=1
while [ "$n" -le "$nodes" ]; do
  RANKS=$((n * per_node))
  MOEBENCH_LAUNCHER=srun MOEBENCH_LAUNCHER_ARGS="-N $n --ntasks-per-node $per_node ${MOEBENCH_LAUNCHER_ARGS:-}" \
    mpmoe_run "$MOEBENCH_RESULTS/mpmoe_scaling/N$n" --experiments f10,f17 ${EXTRA[@]+"${EXTRA[@]}"}
  n=$((n * 2))
done
"$py" "$MOEBENCH_ROOT/plots/mpmoe_scaling.py" "$MOEBENCH_RESULTS/mpmoe_scaling" "$MOEBENCH_RESULTS/mpmoe"
