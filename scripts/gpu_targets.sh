#!/usr/bin/env bash
# The GPU targets of docs/gpu.md in one call, each run beside PyTorch on the same device in its
# own folder under RESULTS/targets (nothing mixes two runs' rows), then a verdict per target
# (scripts/gpu_targets.py: targets.csv and one line each):
#   moe-top1-ROUTE    the scale's MoE layer (at the paper scale 64 experts, top-1, 8192 tokens,
#                     hidden 1024, ffn 4096), each --expert-gemm route
#   moe-8x-top2-ROUTE the same widths with 8 experts top-2, each route
#   moe-top1-ROUTE-P  grouped and padded under skewed popularity P (zipf:1.2, hot:0.25)
#   gpt-ATTENTION     the GPT step, dense and MoE, with blocked and materialized attention (the
#                     dense step replayed from a graph on cuda)
#   gpt-blocked-eager the same with blocked attention, every step enqueued op by op
# every one with the device's profile (models/profile_this_machine.csv) for its roofline. A case
# that fails is logged (RESULTS/targets/CASE.log), listed in cases.tsv and named beside the
# verdicts, the others still run, and the script exits 1 at the end. On a GPU
# box scripts/gpu_box.sh targets runs it at the paper scale in bf16; elsewhere (and in the tests)
# it runs the same cases at any scale on the CPU.
#   scripts/gpu_targets.sh [--scale paper] [--backend cuda] [--dtype bf16] [--results DIR]
source "$(dirname "$0")/usage.sh" && moebench_help_if_asked "$@"
set -euo pipefail
cd "$(dirname "$0")/.."
scale=paper backend=cuda dtype=bf16 results="$PWD/results/cuda"
while [ $# -gt 0 ]; do
  case "$1" in
    --scale|--backend|--dtype|--results)
      [ $# -ge 2 ] && [ -n "$2" ] || { echo "gpu_targets.sh: error: $1: needs a value" >&2; exit 2; }
      case "$1" in --scale) scale="$2" ;; --backend) backend="$2" ;; --dtype) dtype="$2" ;; --results) results="$2" ;; esac
      shift 2 ;;
    *) echo "gpu_targets.sh: error: unknown option '$1' (allowed: --scale, --backend, --dtype, --results)" >&2; exit 2 ;;
  esac
done
case "$scale" in tiny|local|paper) ;; *) echo "gpu_targets.sh: error: --scale: '$scale' is not a scale; allowed: tiny, local or paper" >&2; exit 2 ;; esac
case "$backend" in cpu|cuda) ;; *) echo "gpu_targets.sh: error: --backend: '$backend' is not a backend; allowed: cpu or cuda" >&2; exit 2 ;; esac
case "$dtype" in fp32|fp16|bf16) ;; *) echo "gpu_targets.sh: error: --dtype: '$dtype' is not a type; allowed: fp32, fp16 or bf16" >&2; exit 2 ;; esac
mkdir -p "$results" 2>/dev/null && [ -w "$results" ] || { echo "gpu_targets.sh: error: --results: cannot write to $results" >&2; exit 2; }
results="$(cd "$results" && pwd)"
# The profile: on one GPU its link values come from the H100 node's shipped profile (as in
# gpu_box.sh bench); a CPU measures its link between 2 ranks (through the launcher).
# Without a profile the cases still run, their roofline columns n/a.
profile="$results/models/profile_this_machine.csv" profiled=0
if [ "$backend" = cuda ]; then
  MOEBENCH_LAUNCHER="${MOEBENCH_LAUNCHER:-none}" experiments/models/profile.sh --scale "$scale" --backend cuda --ranks 1 \
    --results "$results" && profiled=1
else
  experiments/models/profile.sh --scale "$scale" --backend cpu --ranks 2 --results "$results" && profiled=1
fi
roofline=(--roofline-profile "$profile")
[ "$profiled" = 1 ] || { roofline=(); echo "gpu_targets.sh: the profile failed: the cases run without rooflines" >&2; }
export MOEBENCH_LAUNCHER="${MOEBENCH_LAUNCHER:-none}"  # the rest runs on one rank: no launcher needed
common=(--scale "$scale" --backend "$backend" --ranks 1 --dtype "$dtype")
layer=("${common[@]}" --dispatchers local ${roofline[@]+"${roofline[@]}"})
# A case that fails (a kernel's first contact with a new GPU, say) is logged and recorded in
# cases.tsv, and the others still run: the verdicts name it, and the script exits 1 at the end.
targets="$results/targets"
mkdir -p "$targets"
printf 'case\texit\tlog\n' > "$targets/cases.tsv"
failed=0
run_case() {
  local name="$1" status=0
  shift
  rm -rf "${targets:?}/$name"
  echo "== gpu_targets: $name"
  "$@" --results "$targets/$name" 2>&1 | tee "$targets/$name.log" || status=$?
  printf '%s\t%s\t%s\n' "$name" "$status" "$name.log" >> "$targets/cases.tsv"
  [ "$status" = 0 ] || { failed=$((failed + 1)); echo "gpu_targets.sh: case $name failed (exit $status): $targets/$name.log" >&2; }
}
for route in grouped padded streams serial; do
  run_case "moe-top1-$route" experiments/moe/run.sh "${layer[@]}" --expert-gemm "$route"
  run_case "moe-8x-top2-$route" experiments/moe/run.sh "${layer[@]}" --experts 8 --top-k 2 --expert-gemm "$route"
done
for pop in zipf:1.2 hot:0.25; do
  for route in grouped padded; do
    run_case "moe-top1-$route-${pop%%:*}" experiments/moe/run.sh "${layer[@]}" --expert-gemm "$route" --popularity "$pop"
  done
done
for attention in blocked materialized; do
  run_case "gpt-$attention" experiments/gpt/step.sh "${common[@]}" ${roofline[@]+"${roofline[@]}"} --attention "$attention"
done
run_case "gpt-blocked-eager" experiments/gpt/step.sh "${common[@]}" ${roofline[@]+"${roofline[@]}"} --attention blocked \
  --step-graph eager
python3 scripts/gpu_targets.py "$targets"
[ "$failed" = 0 ] || { echo "gpu_targets.sh: $failed case(s) failed; the verdicts above name them" >&2; exit 1; }
[ "$profiled" = 1 ] || exit 1
