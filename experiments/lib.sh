# Shared by the experiment scripts: options, the launcher, the binaries and the plotter.
#   --scale tiny|local|paper   (env SCALE, default local)
#   --backend cpu|cuda         (env BACKEND, default cpu)
#   --ranks N                  (env RANKS; default 4 on cpu, the GPU count on cuda)
#   anything else is passed to the bench binary.
# Launcher: MOEBENCH_LAUNCHER=mpirun (default) | srun (default under Slurm) | none;
# MOEBENCH_LAUNCHER_ARGS adds arguments to it. MOEBENCH_NSYS=1 wraps each rank in
# `nsys profile --capture-range=cudaProfilerApi` and passes --profile to the bench.
MOEBENCH_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MOEBENCH_BUILD="${MOEBENCH_BUILD:-$MOEBENCH_ROOT/build}"
MOEBENCH_RESULTS="${MOEBENCH_RESULTS:-$MOEBENCH_ROOT/results}"

moebench_parse_args() {
  SCALE="${SCALE:-local}"
  BACKEND="${BACKEND:-cpu}"
  EXTRA=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --scale) SCALE="$2"; shift 2 ;;
      --backend) BACKEND="$2"; shift 2 ;;
      --ranks) RANKS="$2"; shift 2 ;;
      *) EXTRA+=("$1"); shift ;;
    esac
  done
  if [ -z "${RANKS:-}" ]; then
    if [ "$BACKEND" = cuda ]; then
      RANKS="$(nvidia-smi -L 2>/dev/null | wc -l)"
      [ "$RANKS" -ge 1 ] || RANKS=1
    else
      RANKS=4
    fi
  fi
  case "$RANKS" in ''|*[!0-9]*|0) echo "error: --ranks: '$RANKS' is not a positive number" >&2; exit 2 ;; esac
}

moebench_bin() {
  local bin="$MOEBENCH_BUILD/bench/$1"
  if [ ! -x "$bin" ]; then
    echo "error: $bin not built; run scripts/build.sh (or set MOEBENCH_BUILD)" >&2
    exit 2
  fi
  echo "$bin"
}

# moebench_launch RESULT_DIR BIN ARGS...: runs BIN on $RANKS ranks with the chosen launcher.
moebench_launch() {
  local result_dir="$1"; shift
  local cmd=("$@")
  if [ "${MOEBENCH_NSYS:-0}" = 1 ]; then
    mkdir -p "$result_dir"
    cmd=(nsys profile --capture-range=cudaProfilerApi --capture-range-end=stop --trace=cuda,nvtx,osrt
         -o "$result_dir/nsys.%q{OMPI_COMM_WORLD_RANK}%q{SLURM_PROCID}" --force-overwrite true "${cmd[@]}" --profile)
  fi
  local launcher="${MOEBENCH_LAUNCHER:-}"
  if [ -z "$launcher" ]; then
    if [ -n "${SLURM_JOB_ID:-}" ]; then launcher=srun; else launcher=mpirun; fi
  fi
  # shellcheck disable=SC2206
  local extra=(${MOEBENCH_LAUNCHER_ARGS:-})
  case "$launcher" in
    srun) srun -n "$RANKS" "${extra[@]}" "${cmd[@]}" ;;
    mpirun)
      local flags=(-np "$RANKS")
      [ "$(id -u)" -eq 0 ] && flags+=(--allow-run-as-root)
      [ "$BACKEND" = cpu ] && flags+=(--oversubscribe)
      # One OpenBLAS thread per rank: ranks, not threads, share the cores.
      OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}" mpirun "${flags[@]}" "${extra[@]}" "${cmd[@]}" ;;
    none) "${cmd[@]}" ;;
    *) echo "error: MOEBENCH_LAUNCHER: '$launcher' is not mpirun, srun or none" >&2; exit 2 ;;
  esac
}

# A Python with matplotlib (Debian's python3-matplotlib lives under /usr/bin/python3).
moebench_python() {
  local py
  for py in python3 /usr/bin/python3; do
    if "$py" -c "import matplotlib" >/dev/null 2>&1; then echo "$py"; return; fi
  done
  echo "error: no python3 with matplotlib; run scripts/setup.sh" >&2
  exit 2
}

# moebench_experiment SUBDIR BENCH PLOT ARGS...: the whole of a one-bench experiment script --
# parse ARGS, run BENCH on $RANKS ranks writing results/SUBDIR, then draw plots/PLOT.
moebench_experiment() {
  local subdir="$1" bench="$2" plot="$3"; shift 3
  moebench_parse_args "$@"
  moebench_launch "$MOEBENCH_RESULTS/$subdir" "$(moebench_bin "$bench")" --scale "$SCALE" --backend "$BACKEND" \
    --out "$MOEBENCH_RESULTS" ${EXTRA[@]+"${EXTRA[@]}"}
  "$(moebench_python)" "$MOEBENCH_ROOT/plots/$plot" "$MOEBENCH_RESULTS/$subdir"
}
