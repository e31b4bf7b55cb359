#!/usr/bin/env bash
# runtime.before_after: does a change cost the plain MoE layer time? Builds the layer bench of
# an earlier commit (default: the last one before the overlap-ready runtime) in a worktree under
# build-before/, then runs it and the current build alternately, --rounds times, on the same
# configuration, and writes results/runtime/before_after.csv: per dispatcher the median total
# time and overhead ratio of each, and their after / before ratios (target <= 1.03).
#   experiments/runtime/before_after.sh [--commit REV] [--rounds 3] [--ranks 2] [--scale local]
set -euo pipefail
# sbatch runs a copy of this script from its spool folder: run the original, beside the project.
[ -f "$(dirname "$0")/../lib.sh" ] || exec "$(scontrol show job "${SLURM_JOB_ID:?}" | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')" "$@"
source "$(dirname "$0")/../lib.sh"
commit=4dbc02d
rounds=3
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --commit|--rounds)
      [ $# -ge 2 ] && [ -n "$2" ] || moebench_die "$1: needs a value"
      if [ "$1" = --commit ]; then commit="$2"; else rounds="$2"; fi
      shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
case "$rounds" in ''|*[!0-9]*|0) moebench_die "--rounds: '$rounds' is not a positive whole number" ;; esac
RANKS="${RANKS:-${SLURM_NTASKS:-2}}"
moebench_parse_args ${args[@]+"${args[@]}"}
[ "$BACKEND" = cpu ] || moebench_die "--backend: the comparison builds the cpu backend; allowed: cpu"
git -C "$MOEBENCH_ROOT" rev-parse --verify -q "$commit^{commit}" >/dev/null || moebench_die "--commit: '$commit' is not a commit here"
before="$MOEBENCH_ROOT/build-before/$commit"
if [ ! -x "$before/build/bench/moebench_moe_layer" ]; then
  rm -rf "$before"
  git -C "$MOEBENCH_ROOT" worktree add -f --detach "$before" "$commit" >/dev/null
  cmake -S "$before" -B "$before/build" -DCMAKE_BUILD_TYPE=Release -DMOEBENCH_CUDA=OFF -DMOEBENCH_TESTS=OFF >/dev/null
  cmake --build "$before/build" -j "$(nproc)" --target moebench_moe_layer >/dev/null
fi
after_bin="$MOEBENCH_BUILD/bench/moebench_moe_layer"
[ -x "$after_bin" ] || moebench_die "moebench_moe_layer is not built; run scripts/build.sh"
work="$(mktemp -d)"
for round in $(seq "$rounds"); do
  for which in before after; do
    bin="$after_bin"
    [ "$which" = before ] && bin="$before/build/bench/moebench_moe_layer"
    echo "== round $round: $which"
    moebench_launch "$work" "$bin" --scale "$SCALE" --out "$work/$which$round" ${EXTRA[@]+"${EXTRA[@]}"} | grep "overhead ratio"
  done
done
"$(moebench_python)" "$MOEBENCH_ROOT/plots/runtime_before_after.py" "$work" "$rounds" "$commit" \
  "$(git -C "$MOEBENCH_ROOT" rev-parse --short HEAD)" "$MOEBENCH_RESULTS/runtime/before_after.csv"
rm -rf "$work"
