# Shared by the PPMoE layout experiments (t2, breakdown): one bench over this machine's MPI into
# results/ppmoe, and on the cpu backend again over an emulated link of PPMOE_LINK_GBPS (default
# 0.05 GB/s) and PPMOE_LINK_US (default 10 us), slower than the compute as the paper's inter-node
# links are, into results/ppmoe_emulated (not with PPMOE_LINKS=measured); each run's plot beside
# it. Every row names its link.
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

# ppmoe_experiment BENCH PLOT ARGS...: the whole of such a script (RANKS defaults to a job's tasks, else 4).
ppmoe_experiment() {
  local bench="$1" plot="$2"; shift 2
  RANKS="${RANKS:-${SLURM_NTASKS:-4}}"
  moebench_parse_args "$@"
  local py bin="$MOEBENCH_BUILD/bench/$bench"
  py="$(moebench_python)" || exit 2
  moebench_launch "$MOEBENCH_RESULTS/ppmoe" "$bin" --scale "$SCALE" --backend "$BACKEND" --out "$MOEBENCH_RESULTS" \
    ${EXTRA[@]+"${EXTRA[@]}"}
  "$py" "$MOEBENCH_ROOT/plots/$plot" "$MOEBENCH_RESULTS/ppmoe"
  # PPMOE_LINKS=measured: this run's link alone (a run over real nodes: experiments/nodes/run.sh).
  if [ "$BACKEND" = cpu ] && [ "${PPMOE_LINKS:-both}" != measured ]; then
    moebench_launch "$MOEBENCH_RESULTS/ppmoe_emulated/ppmoe" "$bin" --scale "$SCALE" --backend cpu \
      --out "$MOEBENCH_RESULTS/ppmoe_emulated" --link-bandwidth "${PPMOE_LINK_GBPS:-0.05}" \
      --link-latency "${PPMOE_LINK_US:-10}" ${EXTRA[@]+"${EXTRA[@]}"}
    "$py" "$MOEBENCH_ROOT/plots/$plot" "$MOEBENCH_RESULTS/ppmoe_emulated/ppmoe"
  fi
}
