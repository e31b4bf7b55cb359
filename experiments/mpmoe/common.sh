# Shared by the MPMoE experiment scripts (003): the bench, its link, its plots.
# On the cpu backend the layer runs over an emulated link of MPMOE_LINK_GBPS (default 0.02 GB/s)
# and MPMOE_LINK_US (default 10 us): on this class of machine (4 ranks on 2 cores, one expert
# per rank) that puts GPT-S's all-to-all time at about its expert compute time, the regime where
# the paper's pipelining pays (comm and comp of one size). Every row says which link it used.
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

# mpmoe_link_args: the emulated link on the cpu backend, nothing on cuda (NCCL's link is real).
mpmoe_link_args() {
  # MPMOE_LINK=measured: the link the ranks have (real nodes: experiments/nodes/run.sh).
  if [ "$BACKEND" = cpu ] && [ "${MPMOE_LINK:-emulated}" != measured ]; then
    echo --link-bandwidth "${MPMOE_LINK_GBPS:-0.02}" --link-latency "${MPMOE_LINK_US:-10}"
  fi
}

# mpmoe_run RESULTS_ROOT ARGS...: moebench_mpmoe on $RANKS ranks writing RESULTS_ROOT/mpmoe.
mpmoe_run() {
  local root="$1"; shift
  # shellcheck disable=SC2046
  moebench_launch "$root/mpmoe" "$MOEBENCH_BUILD/bench/moebench_mpmoe" --scale "$SCALE" --backend "$BACKEND" \
    --out "$root" $(mpmoe_link_args) "$@"
}

# mpmoe_plot FOLDER: draws every MPMoE figure whose CSV is in FOLDER.
mpmoe_plot() {
  local py
  py="$(moebench_python)" || exit 2
  "$py" "$MOEBENCH_ROOT/plots/mpmoe.py" "$1"
}

# mpmoe_figure ID ARGS...: the whole of a one-figure script.
mpmoe_figure() {
  local id="$1"; shift
  moebench_parse_args "$@"
  mpmoe_run "$MOEBENCH_RESULTS" --experiments "$id" ${EXTRA[@]+"${EXTRA[@]}"}
  mpmoe_plot "$MOEBENCH_RESULTS/mpmoe"
}
