#!/usr/bin/env bash
# moe.layer: one MoE layer forward + backward per dispatcher (single-rank reference,
# expert parallel = DPMoE, PPMoE) with its breakdown (gating, dispatch, expert, combine and
# their backward), the overhead ratio over the expert GEMMs alone (target <= 1.15), each row's
# roofline (FLOPs, least bytes, the floor at models/profile_this_machine.csv's rates, time over it),
# where its time goes kernel by kernel (--kernels, which MOEBENCH_KERNEL_LOG=off leaves out)
# and, beside the one-device row, the same layer in plain PyTorch (torch_layer.py: a loop over the
# experts, and torch._grouped_mm where PyTorch has it; skipped, and said so in the CSV, where
# PyTorch is not installed or the layer is not its dropless top-k). Writes
# results/moe/layer_<dispatcher>.csv, kernels_<dispatcher>.csv, torch_layer.csv and layer_breakdown.png.
#   experiments/moe/run.sh [--scale local] [--backend cpu|cuda] [--ranks N] [bench options, e.g. --popularity zipf:1.2]
set -euo pipefail
# sbatch runs a copy of this script from its spool folder: run the original, beside the project.
[ -f "$(dirname "$0")/../lib.sh" ] || exec "$(scontrol show job "${SLURM_JOB_ID:?}" | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')" "$@"
source "$(dirname "$0")/../lib.sh"
RANKS="${RANKS:-${SLURM_NTASKS:-2}}"  # local scale: one rank per core
MOEBENCH_BENCH=moebench_moe_layer
moebench_parse_args "$@"
py="$(moebench_python)" || exit 2
moebench_kernel_log_args "$MOEBENCH_RESULTS"/moe/kernels_*.csv
bin="$MOEBENCH_BUILD/bench/moebench_moe_layer"
[ -x "$bin" ] || moebench_die "$bin is not built; run scripts/build.sh"
# The layer's sizes, popularity and element type go to the PyTorch layer too.
same=()
torch_layer=1
for ((i = 0; i < ${#EXTRA[@]}; i++)); do
  case "${EXTRA[$i]}" in
    --tokens|--hidden|--ffn|--experts|--top-k|--popularity|--dtype) same+=("${EXTRA[$i]}" "${EXTRA[$((i + 1))]:-}") ;;
    --tokens=*|--hidden=*|--ffn=*|--experts=*|--top-k=*|--popularity=*|--dtype=*) same+=("${EXTRA[$i]%%=*}" "${EXTRA[$i]#*=}") ;;
    --capacity-factor|--capacity-factor=*|--prototypes|--prototypes=*|--reference|--reference=*) torch_layer=0 ;;
  esac
done
# The bench's own checks first: PyTorch's layer runs before it.
moebench_check_options "$bin" --scale "$SCALE" --backend "$BACKEND" ${EXTRA[@]+"${EXTRA[@]}"}
REFERENCE=()
if [ "$torch_layer" = 1 ]; then
  moebench_torch_reference "$MOEBENCH_ROOT/experiments/moe/torch_layer.py" "$MOEBENCH_RESULTS/moe/torch_layer.csv" \
    --scale "$SCALE" --device "$BACKEND" ${same[@]+"${same[@]}"}
else
  echo "$MOEBENCH_SCRIPT: PyTorch's layer left out: it is the dropless plain top-k layer (no --capacity-factor or --prototypes), or --reference was given"
fi
moebench_roofline_args
moebench_launch "$MOEBENCH_RESULTS/moe" "$bin" --scale "$SCALE" --backend "$BACKEND" --out "$MOEBENCH_RESULTS" \
  ${REFERENCE[@]+"${REFERENCE[@]}"} ${ROOFLINE[@]+"${ROOFLINE[@]}"} ${KERNELS[@]+"${KERNELS[@]}"} ${EXTRA[@]+"${EXTRA[@]}"}
"$py" "$MOEBENCH_ROOT/plots/moe_layer.py" "$MOEBENCH_RESULTS/moe"
