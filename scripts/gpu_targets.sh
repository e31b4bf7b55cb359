#!/usr/bin/env bash
# The GPU targets of docs/gpu.md in one call, each run beside PyTorch on the same device in its
# own folder under RESULTS/targets (nothing mixes two runs' rows), then a verdict per target
# (scripts/gpu_targets.py: targets.csv and one line each):
#   moe-top1-ROUTE    the scale's MoE layer (at the paper scale 64 experts, top-1, 8192 tokens,
#                     hidden 1024, ffn 4096), each --expert-gemm route
#   moe-8x-top2-ROUTE the same widths with 8 experts top-2, each route
#   moe-top1-ROUTE-P  padded and grouped under skewed popularity P (zipf:1.2, hot:0.25)
#   gpt-ATTENTION     the GPT step, dense and MoE (its experts by the default route: padded on
#                     cuda), with each attention (the dense step replayed from a graph on cuda);
#                     gpt-cudnn-grouped its MoE experts grouped
#   gpt-blocked-eager the same with blocked attention, every step enqueued op by op
#   moe-top1-padded-gate-separate  moe-top1-padded with the gate's routing kernels apart
#                     (--gate-kernels separate), beside its one pass: CUDA's choice, so on another
#                     backend listed as cuda only
# every one with the device's profile (models/profile_this_machine.csv) for its roofline, the
# most telling cases first. A case that fails is logged (RESULTS/targets/CASE.log), listed in
# cases.tsv and named beside the verdicts, the others still run, and the script exits 1 at the
# end; so does a run with cases left unstarted at --deadline (seconds since the epoch), which
# cases.tsv lists as out of time. cases.tsv gives each case's exit status and its seconds (what
# the next lease's --cases has to fit), or why it did not run. PyTorch's reference for the same work is measured once per run
# and reused by the cases that share it. On a GPU box scripts/gpu_box.sh targets (or lease) runs
# it at the paper scale in bf16; elsewhere (and in the tests) it runs the same cases at any scale
# on the CPU.
# --cases NAME[,NAME...] runs those cases alone (a follow-up call that re-measures a few), the
# others listed in cases.tsv as not selected; --list prints every case's name and exits.
#   scripts/gpu_targets.sh [--scale paper] [--backend cuda] [--dtype bf16] [--results DIR] [--deadline EPOCH]
#                          [--cases NAME[,NAME...]] [--list]
source "$(dirname "$0")/usage.sh" && moebench_help_if_asked "$@"
set -euo pipefail
cd "$(dirname "$0")/.."
scale=paper backend=cuda dtype=bf16 results="$PWD/results/cuda" deadline="" cases="" list=0
while [ $# -gt 0 ]; do
  case "$1" in
    --list) list=1; shift ;;
    --scale|--backend|--dtype|--results|--deadline|--cases)
      [ $# -ge 2 ] && [ -n "$2" ] || { echo "gpu_targets.sh: error: $1: needs a value" >&2; exit 2; }
      case "$1" in
        --scale) scale="$2" ;; --backend) backend="$2" ;; --dtype) dtype="$2" ;; --results) results="$2" ;;
        --deadline) deadline="$2" ;; --cases) cases="$2" ;;
      esac
      shift 2 ;;
    *) echo "gpu_targets.sh: error: unknown option '$1' (allowed: --scale, --backend, --dtype, --results, --deadline, --cases, --list)" >&2
       exit 2 ;;
  esac
done
# Every case, in the order they run (run_case refuses a name not here).
all_cases=(moe-top1-padded moe-top1-padded-gate-separate gpt-cudnn moe-8x-top2-padded moe-top1-padded-zipf moe-top1-padded-hot moe-top1-grouped
           moe-8x-top2-grouped gpt-cudnn-grouped moe-top1-grouped-zipf moe-top1-grouped-hot
           gpt-blocked moe-top1-segmented gpt-moe-segmented moe-8x-top2-segmented gpt-blocked-eager gpt-cudnn-eager
           moe-top1-streams moe-8x-top2-streams moe-top1-serial moe-8x-top2-serial gpt-materialized)
cuda_only=(moe-top1-padded-gate-separate)  # a choice among CUDA's kernels: refused on the cpu backend
if [ "$list" = 1 ]; then printf '%s\n' "${all_cases[@]}"; exit 0; fi
if [ -n "$cases" ]; then
  IFS=, read -r -a wanted <<< "$cases"
  for c in "${wanted[@]}"; do
    [[ " ${all_cases[*]} " == *" $c "* ]] ||
      { echo "gpu_targets.sh: error: --cases: '$c' is not a case; allowed: ${all_cases[*]}" >&2; exit 2; }
  done
fi
if [ -n "$deadline" ] && ! [[ "$deadline" =~ ^[0-9]+$ ]]; then
  echo "gpu_targets.sh: error: --deadline: '$deadline' is not a time in seconds since the epoch (date +%s)" >&2
  exit 2
fi
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
  # 3 repetitions: at the paper scale the sweep's largest GEMMs took two minutes at 5 on an H200.
  # In the cases' dtype: a GPU's GEMM peak is its precision's (the bench refuses the other's).
  MOEBENCH_LAUNCHER="${MOEBENCH_LAUNCHER:-none}" experiments/models/profile.sh --scale "$scale" --backend cuda --ranks 1 \
    --results "$results" --repetitions 3 --dtype "$dtype" && profiled=1
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
rm -rf "${targets:?}"  # an earlier run's cases must not be judged beside this one's
mkdir -p "$targets"
printf 'case\texit\tseconds\tlog\n' > "$targets/cases.tsv"
MOEBENCH_TORCH_REUSE="$(mktemp -d)"
export MOEBENCH_TORCH_REUSE
trap 'rm -rf "$MOEBENCH_TORCH_REUSE"' EXIT
failed=0 late=0
run_case() {
  local name="$1" status=0
  shift
  [[ " ${all_cases[*]} " == *" $name "* ]] || { echo "gpu_targets.sh: case $name is not in all_cases" >&2; exit 1; }
  if [ -n "$cases" ] && [[ ",$cases," != *",$name,"* ]]; then
    printf '%s\t-\t-\tnot selected\n' "$name" >> "$targets/cases.tsv"
    return 0
  fi
  if [ "$backend" != cuda ] && [[ " ${cuda_only[*]} " == *" $name "* ]]; then
    printf '%s\t-\t-\tcuda only\n' "$name" >> "$targets/cases.tsv"
    return 0
  fi
  if [ -n "$deadline" ] && [ "$(date +%s)" -ge "$deadline" ]; then
    printf '%s\t-\t-\tout of time\n' "$name" >> "$targets/cases.tsv"
    late=$((late + 1))
    echo "== gpu_targets: $name not started: the deadline has passed"
    return 0
  fi
  echo "== gpu_targets: $name"
  local started=$SECONDS
  "$@" --results "$targets/$name" 2>&1 | tee "$targets/$name.log" || status=$?
  printf '%s\t%s\t%s\t%s\n' "$name" "$status" "$((SECONDS - started))" "$name.log" >> "$targets/cases.tsv"
  [ "$status" = 0 ] || { failed=$((failed + 1)); echo "gpu_targets.sh: case $name failed (exit $status): $targets/$name.log" >&2; }
}
moe() { run_case "$1" experiments/moe/run.sh "${layer[@]}" "${@:2}"; }
gpt() { run_case "$1" experiments/gpt/step.sh "${common[@]}" ${roofline[@]+"${roofline[@]}"} "${@:2}"; }
# The fastest routes and the step first (on the H200 leases: padded experts, cuDNN's attention),
# so that a run cut short at --deadline has the headline targets; then the padded layer under
# skew, then the grouped route beside it.
# segmented: our segment GEMMs with the counts on the device; its GPT case captures the MoE step.
moe moe-top1-padded --expert-gemm padded
moe moe-top1-padded-gate-separate --expert-gemm padded --gate-kernels separate
gpt gpt-cudnn --attention cudnn
moe moe-8x-top2-padded --experts 8 --top-k 2 --expert-gemm padded
for pop in zipf:1.2 hot:0.25; do moe "moe-top1-padded-${pop%%:*}" --expert-gemm padded --popularity "$pop"; done
moe moe-top1-grouped --expert-gemm grouped
moe moe-8x-top2-grouped --experts 8 --top-k 2 --expert-gemm grouped
gpt gpt-cudnn-grouped --attention cudnn --expert-gemm grouped
for pop in zipf:1.2 hot:0.25; do moe "moe-top1-grouped-${pop%%:*}" --expert-gemm grouped --popularity "$pop"; done
gpt gpt-blocked --attention blocked
moe moe-top1-segmented --expert-gemm segmented
gpt gpt-moe-segmented --attention blocked --expert-gemm segmented
moe moe-8x-top2-segmented --experts 8 --top-k 2 --expert-gemm segmented
gpt gpt-blocked-eager --attention blocked --step-graph eager
gpt gpt-cudnn-eager --attention cudnn --step-graph eager
for route in streams serial; do
  moe "moe-top1-$route" --expert-gemm "$route"
  moe "moe-8x-top2-$route" --experts 8 --top-k 2 --expert-gemm "$route"
done
gpt gpt-materialized --attention materialized
python3 scripts/gpu_targets.py "$targets"
[ "$failed" = 0 ] || { echo "gpu_targets.sh: $failed case(s) failed; the verdicts above name them" >&2; exit 1; }
[ "$late" = 0 ] || { echo "gpu_targets.sh: $late case(s) not started before the deadline; cases.tsv lists them" >&2; exit 1; }
[ "$profiled" = 1 ] || exit 1
