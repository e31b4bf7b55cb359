# Shared by the experiment scripts: options, the launcher, the binaries and the plotter.
#   --scale tiny|local|paper   (env SCALE, default local)
#   --backend cpu|cuda         (env BACKEND, default cpu)
#   --ranks N                  (env RANKS; default: a Slurm job's tasks, else the script's, else 4 on
#                               cpu, the GPU count on cuda;
#                               single-rank experiments take 1 and refuse any other --ranks)
#   --results DIR              (env MOEBENCH_RESULTS) where the CSVs and plots go. Default: results/,
#                               the committed set, for the local scale on the cpu backend; results-<scale>/
#                               (results-cuda-<scale>/ on cuda) otherwise, so a run at another scale never
#                               writes into the committed set unless asked.
#   --replace                  a results folder holding another scale's or backend's CSVs for this
#                               experiment is refused (its CSVs would mix); --replace removes them first.
#   anything else is passed to the bench binary.
# Launcher: MOEBENCH_LAUNCHER=mpirun (default) | srun (default under Slurm; with --mpi=pmix unless
# MOEBENCH_LAUNCHER_ARGS names another --mpi) | none;
# MOEBENCH_LAUNCHER_ARGS adds arguments to it. MOEBENCH_NSYS=1 wraps each rank in
# `nsys profile --capture-range=cudaProfilerApi` and passes --profile to the bench.
# Everything is checked before anything is launched: a bad option, a missing binary or more
# ranks than this machine has GPUs is one line "<script>: error: ..." and exit code 2.
MOEBENCH_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MOEBENCH_BUILD="${MOEBENCH_BUILD:-$MOEBENCH_ROOT/build}"
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
  echo "--ranks N, --results DIR (default results/ for the local scale on cpu, else results-<scale>/),"
  echo "--replace; any other option goes to the bench. Environment: MOEBENCH_BUILD, MOEBENCH_RESULTS,"
  echo "MOEBENCH_LAUNCHER (mpirun, srun or none), MOEBENCH_LAUNCHER_ARGS, MOEBENCH_NSYS=1."
  local bin="$MOEBENCH_BUILD/bench/${MOEBENCH_BENCH:-}"
  if [ -n "${MOEBENCH_BENCH:-}" ] && [ -x "$bin" ]; then
    echo
    echo "Options of its bench ($bin --help):"
    "$bin" --help
  fi
}

# moebench_writable_folder OPTION DIR: DIR made if missing and written to, or one line naming
# OPTION and exit 2. A probe file, since root passes every permission test on a read-only file
# system.
moebench_writable_folder() {
  local option="$1" dir="$2" probe="$2/.write-probe.$$"
  if ! { mkdir -p "$dir" 2>/dev/null && : > "$probe" 2>/dev/null; }; then
    moebench_die "$option: cannot write to $dir; allowed: a folder this user can write"
  fi
  rm -f "$probe"
}

# moebench_parse_args [--single-rank] ARGS...: sets SCALE, BACKEND, RANKS and EXTRA.
moebench_parse_args() {
  local single_rank=0
  # A single-rank experiment ignores RANKS from the environment (set for the multi-rank ones);
  # only an explicit --ranks is checked.
  if [ "${1:-}" = --single-rank ]; then single_rank=1; RANKS=""; shift; fi
  SCALE="${SCALE:-local}"
  BACKEND="${BACKEND:-cpu}"
  REPLACE=0
  EXTRA=()
  while [ $# -gt 0 ]; do
    case "$1" in
      -h|--help) moebench_usage; exit 0 ;;
      --scale|--backend|--ranks|--results)
        [ $# -ge 2 ] && [ -n "$2" ] && [ "${2#--}" = "$2" ] || moebench_die "$1: needs a value"
        case "$1" in
          --scale) SCALE="$2" ;;
          --backend) BACKEND="$2" ;;
          --ranks) RANKS="$2" ;;
          --results) MOEBENCH_RESULTS="$2" ;;
        esac
        shift 2 ;;
      --scale=*) SCALE="${1#*=}"; shift ;;
      --backend=*) BACKEND="${1#*=}"; shift ;;
      --ranks=*) RANKS="${1#*=}"; shift ;;
      --results=*) MOEBENCH_RESULTS="${1#*=}"; [ -n "$MOEBENCH_RESULTS" ] || moebench_die "--results: needs a value"; shift ;;
      --replace) REPLACE=1; shift ;;
      --out|--out=*) moebench_die "--out: the experiment scripts take --results DIR (their plots draw from it too)" ;;
      *) EXTRA+=("$1"); shift ;;
    esac
  done
  case "$SCALE" in tiny|local|paper) ;; *) moebench_die "--scale: '$SCALE' is not a scale; allowed: tiny, local or paper" ;; esac
  case "$BACKEND" in cpu|cuda) ;; *) moebench_die "--backend: '$BACKEND' is not a backend; allowed: cpu or cuda" ;; esac
  if [ -z "${RANKS:-}" ]; then
    if [ "$single_rank" = 1 ]; then RANKS=1
    elif [ -n "${SLURM_NTASKS:-}" ]; then RANKS="$SLURM_NTASKS"  # a Slurm job's tasks
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
  if [ -z "${MOEBENCH_RESULTS:-}" ]; then
    if [ "$SCALE" = local ] && [ "$BACKEND" = cpu ]; then MOEBENCH_RESULTS="$MOEBENCH_ROOT/results"
    elif [ "$BACKEND" = cpu ]; then MOEBENCH_RESULTS="$MOEBENCH_ROOT/results-$SCALE"
    else MOEBENCH_RESULTS="$MOEBENCH_ROOT/results-cuda-$SCALE"
    fi
  fi
  if [ -e "$MOEBENCH_RESULTS" ] && [ ! -d "$MOEBENCH_RESULTS" ]; then moebench_die "--results: $MOEBENCH_RESULTS is not a folder"; fi
  # Writable before any work (a helper that writes first would name its own --out).
  moebench_writable_folder --results "$MOEBENCH_RESULTS"
  export MOEBENCH_RESULTS
}

# moebench_results_dir_check DIR: refuses to write this run's CSVs beside another scale's or
# backend's in DIR (their first row's provenance says which); with --replace, removes those CSVs
# and their plots first.
moebench_results_dir_check() {
  local dir="$1" f other="" scale backend
  [ -d "$dir" ] || return 0
  local csvs=()
  for f in "$dir"/*.csv; do [ -f "$f" ] && csvs+=("$f"); done
  [ "${#csvs[@]}" -gt 0 ] || return 0
  # Each CSV's first row's scale and backend, read as CSV (a link such as "emulated: 1 GB/s, 5 us"
  # holds a comma), by one Python for the whole folder.
  while read -r scale backend f; do
    [ "$backend" != model ] || continue  # a model's projection (models/), not a run
    if { [ -n "$scale" ] && [ "$scale" != - ] && [ "$scale" != "$SCALE" ]; } ||
       { [ -n "$backend" ] && [ "$backend" != - ] && [ "$backend" != "$BACKEND" ]; }; then
      other="$f ($scale scale, $backend backend)"
      break
    fi
  done < <(python3 -c 'import csv, sys
for name in sys.argv[1:]:
    row = next(csv.DictReader(open(name, newline="")), None) or {}
    print(row.get("scale") or "-", row.get("backend") or "-", name)' "${csvs[@]}")
  [ -n "$other" ] || return 0
  if [ "$REPLACE" = 1 ]; then
    echo "$MOEBENCH_SCRIPT: --replace: removing the CSVs and plots of $dir (another run's: $other)"
    rm -f "$dir"/*.csv "$dir"/*.png
    return 0
  fi
  moebench_die "--results: $dir holds another run's results, $other; a --scale $SCALE --backend $BACKEND run would mix them: give another --results DIR, or --replace to remove them"
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
# moebench_check_options BIN ARGS...: the bench's own checks of ARGS (its options, the common
# ones, the environment's switches) against the $RANKS ranks it will run on, in one process and
# before any work the script does first or any launch: a bad option, or a --ranks the options do
# not divide over, is the bench's one error line and exit 2, not N processes and mpirun's text.
moebench_check_options() {
  local bin="$1" out
  shift
  [ -x "$bin" ] || moebench_die "$(basename "$bin") is not built ($bin); run scripts/build.sh (or set MOEBENCH_BUILD)"
  if ! out="$(MOEBENCH_LAUNCHER= MOEBENCH_CHECK_RANKS="$RANKS" "$bin" --check-options "$@" 2>&1 >/dev/null)"; then
    echo "$out" | grep -m1 "error:" >&2 || echo "$MOEBENCH_SCRIPT: error: $(basename "$bin") refused its options" >&2
    exit 2
  fi
}

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
  moebench_check_options "${cmd[@]}"
  moebench_results_dir_check "$result_dir"
  if [ "${MOEBENCH_NSYS:-0}" = 1 ]; then
    command -v nsys >/dev/null 2>&1 || moebench_die "MOEBENCH_NSYS=1: nsys is not installed"
    mkdir -p "$result_dir"
    cmd=(nsys profile --capture-range=cudaProfilerApi --capture-range-end=stop --trace=cuda,nvtx,osrt
         -o "$result_dir/nsys.%q{OMPI_COMM_WORLD_RANK}%q{SLURM_PROCID}" --force-overwrite true "${cmd[@]}" --profile)
  fi
  # shellcheck disable=SC2206
  local extra=(${MOEBENCH_LAUNCHER_ARGS:-})
  case "$launcher" in
    srun)
      # Open MPI finds srun's tasks only through PMIx; a task that fails ends the step.
      local mpi=(--mpi=pmix)
      [[ " ${extra[*]} " == *" --mpi="* ]] && mpi=()
      srun -n "$RANKS" "${mpi[@]}" --kill-on-bad-exit=1 "${extra[@]}" "${cmd[@]}" ;;
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

# A Python with matplotlib (Debian's python3-matplotlib lives under /usr/bin/python3). Asked of
# the package finder, not by importing matplotlib, which would cost every call its whole import.
moebench_python() {
  local py
  for py in python3 /usr/bin/python3; do
    if "$py" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('matplotlib') is None)" >/dev/null 2>&1; then
      echo "$py"
      return
    fi
  done
  moebench_die "no python3 with matplotlib; run scripts/setup.sh"
}

# moebench_experiment [--single-rank] SUBDIR BENCH PLOT ARGS...: the whole of a one-bench
# experiment script -- parse ARGS, run BENCH on $RANKS ranks writing results/SUBDIR, then
# draw plots/PLOT.
# moebench_torch_reference SCRIPT CSV ARGS...: PyTorch's run of the same work (experiments/*/
# torch_*.py) into CSV; REFERENCE=(--reference CSV) for the bench when it ran, empty (and said so)
# where PyTorch is not installed; any other failure ends the script with its code. With
# MOEBENCH_TORCH_REUSE (a folder: scripts/gpu_targets.sh sets one per run, on one device) the
# same script with the same arguments is measured once, and later cases get a copy of its CSV,
# whose rows keep the date they were measured. MOEBENCH_TORCH=off leaves PyTorch's run out.
moebench_torch_reference() {
  local script="$1" csv="$2" py status=0 kept=""
  shift 2
  REFERENCE=()
  if [ "${MOEBENCH_TORCH:-on}" = off ]; then
    echo "$MOEBENCH_SCRIPT: PyTorch's run left out (MOEBENCH_TORCH=off)"
    return 0
  fi
  py="$(moebench_python)" || exit 2
  if [ -n "${MOEBENCH_TORCH_REUSE:-}" ]; then
    kept="$MOEBENCH_TORCH_REUSE/$(printf '%s\n' "$(basename "$script")" "$@" | sha1sum | cut -c1-16).csv"
    if [ -f "$kept" ]; then
      mkdir -p "$(dirname "$csv")" && cp "$kept" "$csv"
      echo "$MOEBENCH_SCRIPT: PyTorch's $(basename "$script") with the same arguments ran earlier in this run: its CSV reused"
      REFERENCE=(--reference "$csv")
      return 0
    fi
  fi
  "$py" "$script" --out "$csv" "$@" || status=$?
  case "$status" in
    0) REFERENCE=(--reference "$csv")
       if [ -n "$kept" ]; then mkdir -p "$MOEBENCH_TORCH_REUSE" && cp "$csv" "$kept"; fi ;;
    77) echo "$MOEBENCH_SCRIPT: no PyTorch here: ours alone (the CSV says so)" ;;
    *) exit "$status" ;;
  esac
}

# ROOFLINE: --roofline-profile with this results folder's profile of the machine
# (models/profile_this_machine.csv, experiments/models/profile.sh), unless the arguments give one
# or there is none; the bench leaves its roofline columns n/a, and says why, for a profile of
# another device.
moebench_roofline_args() {
  ROOFLINE=()
  local a profile="$MOEBENCH_RESULTS/models/profile_this_machine.csv"
  for a in ${EXTRA[@]+"${EXTRA[@]}"}; do
    case "$a" in --roofline-profile|--roofline-profile=*) return 0 ;; esac
  done
  if [ -f "$profile" ]; then ROOFLINE=(--roofline-profile "$profile"); fi
}

# The kernel log (the bench's --kernels): on unless MOEBENCH_KERNEL_LOG=off, or already among the
# bench options. A run without it removes the logs an earlier run left ($@), so that none sits
# beside this run's results. Sets KERNELS; a bad setting ends the script (exit 2).
moebench_kernel_log_args() {
  KERNELS=()
  local a setting="${MOEBENCH_KERNEL_LOG:-on}"
  case "$setting" in
    on|off) ;;
    *) moebench_die "MOEBENCH_KERNEL_LOG: '$setting' is not a setting; allowed: on or off" ;;
  esac
  for a in ${EXTRA[@]+"${EXTRA[@]}"}; do [ "$a" != --kernels ] || return 0; done
  if [ "$setting" = on ]; then KERNELS=(--kernels); else rm -f "$@"; fi
}

moebench_experiment() {
  local single=()
  if [ "$1" = --single-rank ]; then single=(--single-rank); shift; fi
  local subdir="$1" bench="$2" plot="$3"; shift 3
  MOEBENCH_BENCH="$bench"
  moebench_parse_args ${single[@]+"${single[@]}"} "$@"
  local bin="$MOEBENCH_BUILD/bench/$bench" py
  # MOEBENCH_NESTED=NAME: a variant of an experiment writes RESULTS/NAME/SUBDIR (comm/emulated).
  local root="$MOEBENCH_RESULTS${MOEBENCH_NESTED:+/$MOEBENCH_NESTED}"
  py="$(moebench_python)" || exit 2
  moebench_launch "$root/$subdir" "$bin" --scale "$SCALE" --backend "$BACKEND" \
    --out "$root" ${EXTRA[@]+"${EXTRA[@]}"}
  "$py" "$MOEBENCH_ROOT/plots/$plot" "$root/$subdir"
}
