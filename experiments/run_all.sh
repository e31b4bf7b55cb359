#!/usr/bin/env bash
# Runs every experiment (at SCALE, default local) and draws its plots. A --dtype other than fp32
# goes to every experiment but two that compute in fp32 only, which run in fp32 and say so:
# pipe/bubble (its MLP stages keep fp32 weights) and m6t/t1 (M6-T's own gate is fp32; the table
# sets it beside ours); and models/project, which measures nothing (each projected table names
# the dtype it models), takes none. Last, claims/report judges the papers' claims from what the
# experiments wrote (results/claims.csv, results/REPORT.md). On the cuda backend comm/emulated
# and nodes/run are left out: an emulated link and namespaced nodes are cpu-backend settings (the GPU's links are measured as they
# are, by comm/run); with --ranks 1 (one GPU) ppmoe/t2 is, its layouts being DP x TP x PP = 4
# ranks and more.
source "$(dirname "$0")/../scripts/usage.sh" && moebench_help_if_asked "$@"
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
redo=0
args=()
for a in "$@"; do
  if [ "$a" = --redo ]; then redo=1; else args+=("$a"); fi
done
# The results folder, scale, backend and ranks as the experiment scripts will take them (lib.sh),
# parsed in a subshell so that nothing but the results folder is set for them here.
source "$here/lib.sh"
MOEBENCH_SCRIPT=run_all.sh
parsed="$(moebench_parse_args ${args[@]+"${args[@]}"} && echo "$MOEBENCH_RESULTS" && echo "$SCALE $BACKEND $RANKS")" || exit 2
MOEBENCH_RESULTS="$(sed -n 1p <<<"$parsed")"
export MOEBENCH_RESULTS
stamps="$MOEBENCH_RESULTS/.stamps"
mkdir -p "$stamps"
# --redo: every stamp goes first, so a redo cut short resumes as a redo.
[ "$redo" = 0 ] || rm -f "$stamps"/*.stamp
find "$MOEBENCH_RESULTS" -name '*.tmp.*' -type f -delete 2>/dev/null || true
# What the experiments run: the tree outside results/ as committed, and what is not committed yet.
code_id() {
  local root="$MOEBENCH_ROOT"
  if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    {
      git -C "$root" ls-tree -r HEAD | grep -v $'\tresults' || true
      git -C "$root" diff HEAD -- . ':(exclude)results' ':(exclude)results-*' ':(exclude).gitignore'
      git -C "$root" ls-files -o --exclude-standard -- . ':(exclude)results' ':(exclude)results-*' |
        (cd "$root" && xargs -r sha1sum)
    } | sha1sum | cut -c1-16
  else
    (cd "$root" && find . -path ./results -prune -o -path './results-*' -prune -o -path './build*' -prune -o -type f -print |
       sort | xargs -r sha1sum) | sha1sum | cut -c1-16
  fi
}
code="$(code_id)"
options="${args[*]:-} (scale, backend, ranks: $(sed -n 2p <<<"$parsed")) in $MOEBENCH_RESULTS"
stamp_of() { echo "$stamps/${1//\//_}.stamp"; }
# An experiment's stamp matches this run and every file it lists is there.
done_before() {
  local f
  f="$(stamp_of "$1")"
  [ "$redo" = 0 ] && [ -f "$f" ] || return 1
  [ "$(sed -n 1p "$f")" = "code $code" ] && [ "$(sed -n 2p "$f")" = "options $options" ] || return 1
  while read -r kind path; do
    [ "$kind" != output ] || [ -f "$MOEBENCH_RESULTS/$path" ] || return 1
  done < "$f"
}
# Runs an experiment script and, when it ends well, stamps it with what it wrote.
run_stamped() {
  local exp="$1"; shift
  local marker="$stamps/.started" f
  f="$(stamp_of "$exp")"
  rm -f "$f"
  touch "$marker"
  sleep 0.05  # what it writes is newer than the marker by more than the file clock's tick
  "$@"
  {
    echo "code $code"
    echo "options $options"
    (cd "$MOEBENCH_RESULTS" && find . -newer "$marker" -type f ! -path './.stamps/*' | sed 's|^\./|output |' | sort)
  } > "$f.tmp.$$"
  mv "$f.tmp.$$" "$f"
}
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
for exp in models/profile comm/run comm/emulated runtime/slowdown moe/run ppmoe/serial m6t/gating m6t/cv mpmoe/run pipe/bubble ppmoe/t2 ppmoe/breakdown nodes/run m6t/t1 gpt/step models/project claims/report; do
  echo "== experiment $exp"
  if done_before "$exp"; then
    echo "run_all.sh: $exp skipped: its outputs are complete for this code and these options (--redo runs it again)"
    continue
  fi
  if [ "$exp" = comm/emulated ] && [ "$backend" = cuda ]; then
    echo "run_all.sh: comm/emulated left out on the cuda backend (an emulated link is a cpu-backend setting)"
    continue
  fi
  if [ "$exp" = nodes/run ] && [ "$backend" = cuda ]; then
    echo "run_all.sh: nodes/run left out on the cuda backend (its nodes are namespaces of this machine's CPU ranks)"
    continue
  fi
  if [ "$exp" = ppmoe/t2 ] && [ "$ranks" = 1 ]; then
    echo "run_all.sh: ppmoe/t2 left out with --ranks 1 (its layouts need DP x TP x PP = 4 ranks and more)"
    continue
  fi
  case "$exp" in
    pipe/bubble|m6t/t1)
      if [ "$dtype" != fp32 ]; then echo "run_all.sh: $exp computes in fp32 only: run in fp32, not --dtype $dtype"; fi
      run_stamped "$exp" "$here/$exp.sh" ${fp32_args[@]+"${fp32_args[@]}"} ;;
    models/project|claims/report) run_stamped "$exp" "$here/$exp.sh" ${fp32_args[@]+"${fp32_args[@]}"} ;;
    *) run_stamped "$exp" "$here/$exp.sh" ${args[@]+"${args[@]}"} ;;
  esac
done
