#!/usr/bin/env bash
# Runs every experiment (at SCALE, default local) and draws its plots. A --dtype other than fp32
# goes to every experiment but two that compute in fp32 only, which run in fp32 and say so:
# pipe/bubble (its MLP stages keep fp32 weights) and m6t/t1 (M6-T's own gate is fp32; the table
# sets it beside ours); and models/project, which measures nothing (each projected table names
# the dtype it models), takes none. Last, claims/report judges the papers' claims from what the
# experiments wrote (results/claims.csv, results/REPORT.md). On the cuda backend comm/emulated
# is left out: an emulated link is a cpu-backend setting (the GPU's links are measured as they
# are, by comm/run); with --ranks 1 (one GPU) ppmoe/t2 is, its layouts being DP x TP x PP = 4
# ranks and more.
source "$(dirname "$0")/../scripts/usage.sh" && moebench_help_if_asked "$@"
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
args=("$@")
fp32_args=()
dtype=fp32
backend="${BACKEND:-cpu}"
ranks="${RANKS:-}"
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[$i]}" in
    --backend) backend="${args[$((i + 1))]:-}" ;;
    --backend=*) backend="${args[$i]#*=}" ;;
    --ranks) ranks="${args[$((i + 1))]:-}" ;;
    --ranks=*) ranks="${args[$i]#*=}" ;;
  esac
  case "${args[$i]}" in
    --dtype) dtype="${args[$((i + 1))]:-}"; i=$((i + 1)) ;;
    --dtype=*) dtype="${args[$i]#*=}" ;;
    *) fp32_args+=("${args[$i]}") ;;
  esac
done
for exp in comm/run comm/emulated runtime/slowdown moe/run ppmoe/serial m6t/gating m6t/cv mpmoe/run pipe/bubble ppmoe/t2 ppmoe/breakdown m6t/t1 gpt/step models/profile models/project claims/report; do
  echo "== experiment $exp"
  if [ "$exp" = comm/emulated ] && [ "$backend" = cuda ]; then
    echo "run_all.sh: comm/emulated left out on the cuda backend (an emulated link is a cpu-backend setting)"
    continue
  fi
  if [ "$exp" = ppmoe/t2 ] && [ "$ranks" = 1 ]; then
    echo "run_all.sh: ppmoe/t2 left out with --ranks 1 (its layouts need DP x TP x PP = 4 ranks and more)"
    continue
  fi
  case "$exp" in
    pipe/bubble|m6t/t1)
      if [ "$dtype" != fp32 ]; then echo "run_all.sh: $exp computes in fp32 only: run in fp32, not --dtype $dtype"; fi
      "$here/$exp.sh" ${fp32_args[@]+"${fp32_args[@]}"} ;;
    models/project|claims/report) "$here/$exp.sh" ${fp32_args[@]+"${fp32_args[@]}"} ;;
    *) "$here/$exp.sh" ${args[@]+"${args[@]}"} ;;
  esac
done
