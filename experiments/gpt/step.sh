#!/usr/bin/env bash
# gpt.step: one training step of the GPT model on one device (TP = PP = DP = 1), dense and MoE,
# in tokens/s, beside the same model in plain PyTorch on the same device (torch_step.py; skipped,
# and said so in the CSV, where PyTorch is not installed), each row with its roofline from the
# results folder's profile of this machine, and where an eager step's time goes, phase by phase.
# Writes results/gpt/step.csv, step_breakdown.csv, step_kernels.csv (eager steps kernel by kernel:
# --kernels, which MOEBENCH_KERNEL_LOG=off leaves out), torch_step.csv, step.png and
# step_breakdown.png.
#   experiments/gpt/step.sh [--scale local] [--backend cpu|cuda] [bench options, e.g. --sequences N, --dtype bf16]
set -euo pipefail
# sbatch runs a copy of this script from its spool folder: run the original, beside the project.
[ -f "$(dirname "$0")/../lib.sh" ] || exec "$(scontrol show job "${SLURM_JOB_ID:?}" | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')" "$@"
source "$(dirname "$0")/../lib.sh"
moebench_parse_args --single-rank "$@"
py="$(moebench_python)" || exit 2
moebench_kernel_log_args "$MOEBENCH_RESULTS/gpt/step_kernels.csv"
bin="$MOEBENCH_BUILD/bench/moebench_gpt_step"
[ -x "$bin" ] || moebench_die "$bin is not built; run scripts/build.sh"
# The batch and the element type go to the PyTorch step too (16-bit: its AMP autocast).
sequences=()
for ((i = 0; i < ${#EXTRA[@]}; i++)); do
  case "${EXTRA[$i]}" in
    --sequences|--dtype) sequences+=("${EXTRA[$i]}" "${EXTRA[$((i + 1))]:-}") ;;
    --sequences=*|--dtype=*) sequences+=("${EXTRA[$i]%%=*}" "${EXTRA[$i]#*=}") ;;
  esac
done
# The bench's own checks first: PyTorch's step runs before it.
moebench_check_options "$bin" --scale "$SCALE" --backend "$BACKEND" ${EXTRA[@]+"${EXTRA[@]}"}
moebench_torch_reference "$MOEBENCH_ROOT/experiments/gpt/torch_step.py" "$MOEBENCH_RESULTS/gpt/torch_step.csv" \
  --scale "$SCALE" --device "$BACKEND" ${sequences[@]+"${sequences[@]}"}
moebench_roofline_args
moebench_launch "$MOEBENCH_RESULTS/gpt" "$bin" --scale "$SCALE" --backend "$BACKEND" --out "$MOEBENCH_RESULTS" \
  ${REFERENCE[@]+"${REFERENCE[@]}"} ${ROOFLINE[@]+"${ROOFLINE[@]}"} ${KERNELS[@]+"${KERNELS[@]}"} ${EXTRA[@]+"${EXTRA[@]}"}
"$py" "$MOEBENCH_ROOT/plots/gpt_step.py" "$MOEBENCH_RESULTS/gpt"
