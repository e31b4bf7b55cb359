# Shared by the experiment scripts: options, the launcher, the binaries and the plotter.
#   --scale tiny|local|paper   (env SCALE, default local)
#   --backend cpu|cuda         (env BACKEND, default cpu)
#   --ranks N                  (env RANKS; default: the script's, else 4 on cpu, the GPU count on cuda;
#                               single-rank experiments take 1 and refuse any other --ranks)
#   anything else is passed to the bench binary.
# Launcher: MOEBENCH_LAUNCHER=mpirun (default) | srun (default under Slurm) | none;
# MOEBENCH_LAUNCHER_ARGS adds arguments to it. MOEBENCH_NSYS=1 wraps each rank in
# `nsys profile --capture-range=cudaProfilerApi` and passes --profile to the bench.
# Everything is checked before anything is launched: a bad option, a missing binary or more
# ranks than this machine has GPUs is one line "<script>: error: ..." and exit code 2.
MOEBENCH_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MOEBENCH_BUILD="${MOEBENCH_BUILD:-$MOEBENCH_ROOT/build}"
MOEBENCH_RESULTS="${MOEBENCH_RESULTS:-$MOEBENCH_ROOT/results}"
MOEBENCH_SCRIPT="$(basename "$(dirname "$0")")/$(basename "$0")"

moebench_die() {
  echo "$MOEBENCH_SCRIPT: error: $*" >&2
  exit 2
}

# The script's own header comment, these common options, and its bench's options where the
# script names its bench (MOEBENCH_BENCH) and it is built; for -h / --help, before any work.
moebench_usage() {
  sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
  echo
  echo "Common options: --scale tiny|local|paper (default local), --backend cpu|cuda (default cpu),"
  echo "--ranks N; any other option goes to the bench. Environment: MOEBENCH_BUILD, MOEBENCH_RESULTS,"
  echo "MOEBENCH_LAUNCHER (mpirun, srun or none), MOEBENCH_LAUNCHER_ARGS, MOEBENCH_NSYS=1."
  local bin="$MOEBENCH_BUILD/bench/${MOEBENCH_BENCH:-}"
  if [ -n "${MOEBENCH_BENCH:-}" ] && [ -x "$bin" ]; then
    echo
    echo "Options of its bench ($bin --help):"
    "$bin" --help
  fi
}

# moebench_parse_args [--single-rank] ARGS...: sets SCALE, BACKEND, RANKS and EXTRA.
moebench_parse_args() {
  local single_rank=0
  # A single-rank experiment ignores RANKS from the environment (set for the multi-rank ones);
  # only an explicit --ranks is checked.
  if [ "${1:-}" = --single-rank ]; then single_rank=1; RANKS=""; shift; fi
  SCALE="${SCALE:-local}"
  BACKEND="${BACKEND:-cpu}"
  EXTRA=()
  while [ $# -gt 0 ]; do
    case "$1" in
      -h|--help) moebench_usage; exit 0 ;;
      --scale|--backend|--ranks)
        [ $# -ge 2 ] && [ -n "$2" ] && [ "${2#--}" = "$2" ] || moebench_die "$1: needs a value"
        case "$1" in
          --scale) SCALE="$2" ;;
          --backend) BACKEND="$2" ;;
          --ranks) RANKS="$2" ;;
        esac
        shift 2 ;;
      --scale=*) SCALE="${1#*=}"; shift ;;
      --backend=*) BACKEND="${1#*=}"; shift ;;
      --ranks=*) RANKS="${1#*=}"; shift ;;
      *) EXTRA+=("$1"); shift ;;
    esac
  done
  case "$SCALE" in tiny|local|paper) ;; *) moebench_die "--scale: '$SCALE' is not a scale; allowed: tiny, local or paper" ;; esac
  case "$BACKEND" in cpu|cuda) ;; *) moebench_die "--backend: '$BACKEND' is not a backend; allowed: cpu or cuda" ;; esac
  if [ -z "${RANKS:-}" ]; then
    if [ "$single_rank" = 1 ]; then RANKS=1
    elif [ "$BACKEND" = cuda ]; then RANKS="$(moebench_gpu_count)"; [ "${RANKS:-0}" -ge 1 ] || RANKS=1
    else RANKS=4
    fi
  fi
  case "$RANKS" in
    ''|*[!0-9]*|0*) moebench_die "--ranks: '$RANKS' is not a positive whole number" ;;
  esac
  if [ "$single_rank" = 1 ] && [ "$RANKS" != 1 ]; then
    moebench_die "--ranks: '$RANKS': this experiment measures one device and runs on 1 rank; allowed: 1"
  fi
}

# GPUs on this machine: per nvidia-smi, else per the bench binary BIN (--list-devices), else empty.
moebench_gpu_count() {
  if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true
  elif [ -n "${1:-}" ] && [ -x "$1" ]; then
    "$1" --list-devices 2>/dev/null | sed -n 's/^\([0-9][0-9]*\) CUDA device.*/\1/p'
  fi
}

# The launcher this run uses.
moebench_launcher() {
  local launcher="${MOEBENCH_LAUNCHER:-}"
  if [ -z "$launcher" ]; then
    if [ -n "${SLURM_JOB_ID:-}" ]; then launcher=srun; else launcher=mpirun; fi
  fi
  case "$launcher" in
    mpirun|srun|none) echo "$launcher" ;;
    *) moebench_die "MOEBENCH_LAUNCHER: '$launcher' is not a launcher; allowed: mpirun, srun or none" ;;
  esac
}

# Checks that can be made here before a job starts: the binary, the launcher, and on this
# machine (no hosts given to the launcher) enough GPUs for one rank each.
moebench_preflight() {
  local bin="$1" launcher="$2"
  [ -x "$bin" ] || moebench_die "$(basename "$bin") is not built ($bin); run scripts/build.sh (or set MOEBENCH_BUILD)"
  case "$launcher" in
    mpirun) command -v mpirun >/dev/null 2>&1 || moebench_die "MOEBENCH_LAUNCHER: mpirun is not installed; run scripts/setup.sh" ;;
    srun) command -v srun >/dev/null 2>&1 || moebench_die "MOEBENCH_LAUNCHER: srun is not installed" ;;
    none) [ "$RANKS" = 1 ] || moebench_die "--ranks: '$RANKS' needs a launcher; MOEBENCH_LAUNCHER=none runs 1 rank" ;;
  esac
  if [ "$BACKEND" = cuda ] && [ "$launcher" != srun ] && [ -z "${MOEBENCH_LAUNCHER_ARGS:-}" ]; then
    local gpus
    gpus="$(moebench_gpu_count "$bin")"
    if [ -n "$gpus" ]; then
      [ "$gpus" -ge 1 ] || moebench_die "--backend cuda: no usable GPU on this machine; use --backend cpu"
      [ "$RANKS" -le "$gpus" ] ||
        moebench_die "--ranks: '$RANKS' ranks with --backend cuda need one GPU each, this machine has $gpus (name more hosts in MOEBENCH_LAUNCHER_ARGS)"
    fi
  fi
}

# moebench_launch RESULT_DIR BIN ARGS...: runs BIN on $RANKS ranks with the chosen launcher.
moebench_launch() {
  local result_dir="$1"; shift
  local cmd=("$@")
  local launcher
  launcher="$(moebench_launcher)" || exit 2
  moebench_preflight "$1" "$launcher"
  if [ "${MOEBENCH_NSYS:-0}" = 1 ]; then
    command -v nsys >/dev/null 2>&1 || moebench_die "MOEBENCH_NSYS=1: nsys is not installed"
    mkdir -p "$result_dir"
    cmd=(nsys profile --capture-range=cudaProfilerApi --capture-range-end=stop --trace=cuda,nvtx,osrt
         -o "$result_dir/nsys.%q{OMPI_COMM_WORLD_RANK}%q{SLURM_PROCID}" --force-overwrite true "${cmd[@]}" --profile)
  fi
  # shellcheck disable=SC2206
  local extra=(${MOEBENCH_LAUNCHER_ARGS:-})
  case "$launcher" in
    srun) srun -n "$RANKS" "${extra[@]}" "${cmd[@]}" ;;
    mpirun)
      local flags=(-np "$RANKS")
      [ "$(id -u)" -eq 0 ] && flags+=(--allow-run-as-root)
      # Ranks on this machine may outnumber its cores (cpu ranks share them; GPU ranks were counted above).
      [ -z "${MOEBENCH_LAUNCHER_ARGS:-}" ] && flags+=(--oversubscribe)
      # One OpenBLAS thread per rank: ranks, not threads, share the cores.
      OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}" mpirun "${flags[@]}" "${extra[@]}" "${cmd[@]}" ;;
    none) "${cmd[@]}" ;;
  esac
}

# A Python with matplotlib (Debian's python3-matplotlib lives under /usr/bin/python3).
moebench_python() {
  local py
  for py in python3 /usr/bin/python3; do
    if "$py" -c "import matplotlib" >/dev/null 2>&1; then echo "$py"; return; fi
  done
  moebench_die "no python3 with matplotlib; run scripts/setup.sh"
}

# moebench_experiment [--single-rank] SUBDIR BENCH PLOT ARGS...: the whole of a one-bench
# experiment script -- parse ARGS, run BENCH on $RANKS ranks writing results/SUBDIR, then
# draw plots/PLOT.
moebench_experiment() {
  local single=()
  if [ "$1" = --single-rank ]; then single=(--single-rank); shift; fi
  local subdir="$1" bench="$2" plot="$3"; shift 3
  MOEBENCH_BENCH="$bench"
  moebench_parse_args ${single[@]+"${single[@]}"} "$@"
  local bin="$MOEBENCH_BUILD/bench/$bench" py
  py="$(moebench_python)" || exit 2
  moebench_launch "$MOEBENCH_RESULTS/$subdir" "$bin" --scale "$SCALE" --backend "$BACKEND" \
    --out "$MOEBENCH_RESULTS" ${EXTRA[@]+"${EXTRA[@]}"}
  "$py" "$MOEBENCH_ROOT/plots/$plot" "$MOEBENCH_RESULTS/$subdir"
}
