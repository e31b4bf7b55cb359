#!/usr/bin/env bash
# The ledger's GPU evidence from one GPU (scripts/gpu_box.sh ledger runs this): at the paper
# scale and one rank, the experiments whose claims one GPU can judge, each given its share of
# BUDGET seconds and stopped at it (a run cut short writes nothing: its CSVs stay as they were,
# and the log says so):
#   - MPMoE's figures 2, 3, 9 and 11-16 (003; f15 at one rank; f10 and f17 need several GPUs);
#   - M6-T's gating (001 Sec. 3.1) and Table 1's step at one rank, where the all-to-all moves
#     nothing (the layer and the step without it);
#   - PPMoE's serial experts (000 Sec. 3.3.2);
#   - the MoE layer (moe/run).
# They write under RESULTS (default results/cuda), where experiments/claims/report.sh reads GPU
# evidence; it takes them beside this machine's runs of the same measured code only
# (docs/claims.md), so commit them with the code they ran.
#   scripts/gpu_ledger.sh BUILD RESULTS [BUDGET] [cuda|cpu]
# BUDGET: seconds for all of them (default 360). cpu: a dry run at the tiny scale on the CPU
# backend. Writes RESULTS/ledger.log, one line per experiment: "ledger: EXP ok|FAILED|cut (N s)";
# exit 0 when every experiment finished.
source "$(dirname "$0")/usage.sh" && moebench_help_if_asked "$@"
set -uo pipefail
cd "$(dirname "$0")/.."
build="${1:?BUILD}" results="${2:?RESULTS}" budget="${3:-360}" backend="${4:-cuda}"
case "$backend" in cuda|cpu) ;; *) echo "gpu_ledger.sh: error: backend '$backend'; allowed: cuda, cpu" >&2; exit 2 ;; esac
[[ "$budget" =~ ^[0-9]+$ ]] && [ "$budget" -ge 60 ] ||
  { echo "gpu_ledger.sh: error: budget '$budget' is not a whole number of seconds >= 60" >&2; exit 2; }
mkdir -p "$results" 2>/dev/null && [ -w "$results" ] || { echo "gpu_ledger.sh: error: cannot write to $results" >&2; exit 2; }
scale=paper
[ "$backend" = cpu ] && scale=tiny
log="$results/ledger.log"
: > "$log"
# Each experiment's share of the budget, and its own options: M6-T's Table 1 at its 3-layer model.
plan=("mpmoe/f2 1" "mpmoe/f3 2" "mpmoe/f9 2" "mpmoe/f11 2" "mpmoe/f12 2" "mpmoe/f13 1" "mpmoe/f14 2" "mpmoe/f15 2"
      "mpmoe/f16 2" "m6t/gating 1" "m6t/t1 2 --layers 3" "ppmoe/serial 1" "moe/run 2")
parts=0
for item in "${plan[@]}"; do read -r _ share _ <<< "$item"; parts=$((parts + share)); done
failed=0
for item in "${plan[@]}"; do
  read -r exp share options <<< "$item"
  limit=$((budget * share / parts))
  t0=$SECONDS
  # shellcheck disable=SC2086
  MOEBENCH_BUILD="$build" MOEBENCH_LAUNCHER=none F15_RANKS=1 timeout "$limit" "experiments/$exp.sh" --scale "$scale" \
    --backend "$backend" --ranks 1 --results "$results" $options > "$results/ledger_${exp//\//_}.log" 2>&1
  status=$?
  took=$((SECONDS - t0))
  if [ "$status" = 0 ]; then
    echo "ledger: $exp ok ($took s)" | tee -a "$log"
  elif [ "$status" = 124 ]; then
    failed=1
    echo "ledger: $exp cut at its $limit s (its CSVs were not written)" | tee -a "$log"
  else
    failed=1
    echo "ledger: $exp FAILED (exit $status after $took s): $(grep -m1 -i error "$results/ledger_${exp//\//_}.log")" | tee -a "$log"
  fi
done
[ "$failed" = 0 ] && echo "ledger: every experiment finished" | tee -a "$log"
exit "$failed"
