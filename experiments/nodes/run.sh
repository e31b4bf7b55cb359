#!/usr/bin/env bash
# nodes.run: the papers' two-level network as a measured setting. Two nodes on this machine
# (tests/slurm/cluster.sh --nodes 2: each in network, UTS and mount namespaces of its own, under a
# real Slurm; shared memory between the ranks of a node, TCP shaped with tbf between the nodes),
# and on them, launched by srun, the experiments whose claims rest on the split between nodes, in
# the papers' placement (tensor parallelism inside a node, data and expert parallelism across):
#   ppmoe/t2        Table 2's rows, 4 ranks, 2 a node (TP 2 in a node, DP or EP across)
#   ppmoe/t1        Table 1 (DPMoE's forward), 2 ranks, one a node (each rank has a core)
#   ppmoe/t3        Table 3 (PPMoE's forward), TP 2 in one node (its all-reduce stays inside)
#   moe/run         the MoE layer's expert-parallel dispatcher (DPMoE's; Eq. 1), 1024 tokens a
#                   rank, 2 ranks, one a node
#   mpmoe/f10, f13  MPMoE against FastMoE and FasterMoE (GPT-S, B = 512), 2 ranks, one a node
#   comm/run        the collectives up to 64 KiB, 2 ranks, one a node
# into RESULTS/nodes/<experiment>/. The link's rate is set by a rule, not by what it gives: the
# papers' balance of compute to network -- a V100's 125 TFLOP/s of fp16 over 100 Gb/s
# InfiniBand's 12.5 GB/s is 10^4 FLOP per byte -- with this machine's GEMM rate per rank
# (RESULTS/models/profile_this_machine.csv's peak_fp32, every rank computing; experiments/models/
# profile.sh): rate = FLOP/s / 10^4, unless --rate GBPS gives one. Then Table 2 again at half and
# at twice the rate (RESULTS/nodes_half/, RESULTS/nodes_twice/): the sensitivity of its verdict.
# RESULTS/nodes/setting.csv says what was measured (the rule, its inputs, the rates, the nodes),
# or why nothing was: the ledger reads it, and its claims say "not measured here" with the reason.
#   experiments/nodes/run.sh [--scale local] [--rate GBPS] [--results DIR]
set -euo pipefail
source "$(dirname "$0")/../lib.sh"
rate=""
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rate) [ $# -ge 2 ] || moebench_die "--rate: needs a value"; rate="$2"; shift 2 ;;
    --rate=*) rate="${1#*=}"; shift ;;
    *) args+=("$1"); shift ;;
  esac
done
moebench_parse_args ${args[@]+"${args[@]}"}
[ "$BACKEND" = cpu ] || moebench_die "--backend: '$BACKEND': the namespaced nodes are CPU ranks of this machine; allowed: cpu (on a GPU cluster, run the experiments themselves under sbatch)"
[ -z "$rate" ] || python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) > 0 else 1)' "$rate" 2>/dev/null ||
  moebench_die "--rate: '$rate'; allowed: a rate in GB/s above 0"
out="$MOEBENCH_RESULTS/nodes"
moebench_writable_folder --results "$out"
profile="$MOEBENCH_RESULTS/models/profile_this_machine.csv"
cluster="$MOEBENCH_BUILD/nodes-cluster"
here="$(cd "$(dirname "$0")" && pwd)"
py="$(moebench_python)" || exit 2

# setting STATUS: RESULTS/nodes/setting.csv, one row per rate, with the suite's provenance columns.
setting() {
  "$py" "$here/setting.py" "$out/setting.csv" "$1" "$rate_rule" "$gemm" "${rate:-}" "$SCALE" \
    "$(awk 'NR > 2 {print $2}' "$cluster/hosts" 2>/dev/null | tr '\n' ' ')" "$device"
}

# The rate, by the rule where none was given.
gemm="$("$py" -c 'import csv,sys
for r in csv.DictReader(open(sys.argv[1])):
    if r["field"] == "peak_fp32": print(float(r["value"]) * 1e12)' "$profile" 2>/dev/null || true)"
device="$("$py" -c 'import csv,sys; print(next(csv.DictReader(open(sys.argv[1])))["device"])' "$profile" 2>/dev/null || true)"
rate_rule="given (--rate)"
if [ -z "$rate" ]; then
  [ -n "$gemm" ] || moebench_die "no GEMM rate in $profile to set the link's rate by; run experiments/models/profile.sh first, or give --rate GBPS"
  rate="$("$py" -c 'import sys; print(f"{float(sys.argv[1]) / 1e4 / 1e9:.3g}")' "$gemm")"
  rate_rule="the papers' 10^4 FLOP per byte with this machine's GEMM rate per rank"
fi

status=0
why="$(bash "$MOEBENCH_ROOT/tests/slurm/cluster.sh" start "$cluster" --nodes 2 --link "$rate" --home "$MOEBENCH_ROOT" \
  --home "$MOEBENCH_BUILD" --home "$MOEBENCH_RESULTS" 2>&1)" || status=$?
if [ "$status" != 0 ]; then
  reason="$(tail -1 <<<"$why" | sed 's/^slurm cluster: \(skipped\|error\): //')"
  echo "$MOEBENCH_SCRIPT: the two-node setting is not measured here: $reason"
  setting "not measured here: two namespaced nodes could not be made ($reason)"
  exit 0
fi
trap 'bash "$MOEBENCH_ROOT/tests/slurm/cluster.sh" stop "$cluster"' EXIT
echo "$MOEBENCH_SCRIPT: $(tail -1 <<<"$why")"

# on_nodes NODES PER_NODE SCRIPT ARGS...: an experiment script on the login node, its bench under srun.
on_nodes() {
  local nodes="$1" per_node="$2"; shift 2
  (cd "$MOEBENCH_ROOT" && RANKS=$((nodes * per_node)) MOEBENCH_LAUNCHER=srun \
    MOEBENCH_LAUNCHER_ARGS="-N $nodes --ntasks-per-node $per_node" PPMOE_LINKS=measured MPMOE_LINK=measured \
    bash "$MOEBENCH_ROOT/tests/slurm/cluster.sh" exec "$cluster" "$@" --scale "$SCALE")
}
setting "measured"
# Fewer repetitions and cases than the flat runs where a case takes seconds over this link (the
# main job's time): each row still gives its median and spread.
on_nodes 2 2 experiments/ppmoe/t2.sh --results "$out" --repetitions 5
on_nodes 2 1 experiments/ppmoe/breakdown.sh --results "$out" --tables t1
on_nodes 1 2 experiments/ppmoe/breakdown.sh --results "$out" --tables t3
# PyTorch's layer is one process on one core whatever the network: moe/run's flat run has it.
MOEBENCH_TORCH=off on_nodes 2 1 experiments/moe/run.sh --results "$out" --dispatchers expert_parallel --tokens 1024 \
  --repetitions 3
# f10 and f13 in one run: one granularity search and one calibration serve both.
on_nodes 2 1 experiments/mpmoe/f10.sh --results "$out" --experiments f10,f13 --tokens 512 --repetitions 3
on_nodes 2 1 experiments/comm/run.sh --results "$out" --max-bytes 64K
# The sensitivity of Table 2's MoE verdicts: its DPMoE and PPMoE rows at half and at twice the rate.
for side in half twice; do
  factor=0.5; [ "$side" = twice ] && factor=2
  bash "$MOEBENCH_ROOT/tests/slurm/cluster.sh" rate "$cluster" "$("$py" -c "print(f'{$rate * $factor:.3g}')")"
  on_nodes 2 2 experiments/ppmoe/t2.sh --results "$MOEBENCH_RESULTS/nodes_$side" --repetitions 3 \
    --benchmark_filter='DPMoE|PPMoE'
done
