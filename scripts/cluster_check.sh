#!/usr/bin/env bash
# The first command to run on a GPU node or cluster (or on CPU ranks): the suite's multi-rank
# checks at N ranks, each against a reference, one line per check, and what N ranks or the
# backend cannot check. Exit 0 when every check that ran passed, 1 when one failed, 2 for a bad
# option.
#   scripts/cluster_check.sh [--ranks N] [--backend cpu|cuda] [--launcher mpirun|srun] [--build DIR] [--work DIR]
# Under sbatch: sbatch -n N scripts/cluster_check.sh --launcher srun (N ranks by default in a job).
# --work: where the ranks write (default: a new folder under the current one, which the nodes of a
# cluster share; removed when every check passed).
# The checks:
#   launch        the launcher's PMIx barrier, the one that ends Open MPI's MPI_Init, waits for
#                 every task (runtime/launch_barrier.cpp): where it does not, a rank can crash in
#                 MPI_Init now and then, and the line says what to set;
#   collectives   every collective of the comm bench (all-reduce, all-gather, reduce-scatter,
#                 all-to-all, send/recv) checked element by element (its #wrong column) -- NCCL
#                 on cuda, MPI on cpu;
#   placement     the nodes the ranks ran on, and the link within and between them, as the
#                 comm bench's rows say;
#   dispatchers   one MoE layer per dispatcher (local, expert parallel = DPMoE, PPMoE over a
#                 split TP communicator) dumped and recomputed independently in numpy
#                 (tests/cli/check_dump.py): routing, output, input and weight gradients; the
#                 experts are the least multiple of the ranks from 8;
#   watchdog      a rank that stops inside a collective ends the whole job with its message
#                 within the comm timeout (the check itself gives up after 90 s);
#   pipeline      a 1F1B and a ZB-H1 step of the pipeline bench over the ranks with messages
#                 above NCCL's buffer (32 MiB on cuda; 5 MiB on cpu, in NCCL's order), where the
#                 two directions on one communicator would deadlock;
#   mpmoe         MPMoE's pipelined layer (its strategies and the FasterMoE/FastMoE baselines of
#                 Fig. 10) at the tiny scale;
#   mpi tests     at 1, 2 or 4 ranks: the multi-rank test suites (the communicator with split and
#                 dup, dispatchers, micro-batches, the pipelined layer and its strategies, the
#                 pipeline schedules GPipe / 1F1B / ZB-H1, TP, DP and ZeRO-1, the GPT pipeline,
#                 PPMoE layouts), each against its single-rank reference; on cuda those written
#                 for either backend, over NCCL (the others are listed as not run).
# Environment: MOEBENCH_BUILD (default build/), MPIRUN_FLAGS (extra mpirun flags, e.g. --oversubscribe).
# sbatch runs a copy of this script from its spool folder: run the original, which finds the project.
[ -f "$(dirname "$0")/usage.sh" ] || exec "$(scontrol show job "${SLURM_JOB_ID:?}" | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')" "$@"
source "$(dirname "$0")/usage.sh" && moebench_help_if_asked "$@"
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${MOEBENCH_BUILD:-$root/build}"
ranks="${SLURM_NTASKS:-2}"
backend=""
launcher=mpirun
work=""

die() { echo "cluster_check: error: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --ranks|--backend|--launcher|--build|--work)
      [ $# -ge 2 ] && [ -n "$2" ] || die "$1: needs a value"
      case "$1" in
        --ranks) ranks="$2" ;; --backend) backend="$2" ;; --launcher) launcher="$2" ;; --build) build="$2" ;; --work) work="$2" ;;
      esac
      shift 2 ;;
    *) die "unknown option '$1'; allowed: --ranks N, --backend cpu|cuda, --launcher mpirun|srun, --build DIR, --work DIR" ;;
  esac
done
[[ "$ranks" =~ ^[1-9][0-9]*$ ]] || die "--ranks: '$ranks' is not a whole number >= 1"
case "$launcher" in mpirun|srun) ;; *) die "--launcher: '$launcher'; allowed: mpirun, srun" ;; esac
if [ -z "$backend" ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q GPU; then backend=cuda; else backend=cpu; fi
  echo "cluster_check: --backend $backend (not given: $( [ "$backend" = cuda ] && echo "nvidia-smi lists a GPU" || echo "no GPU listed"))"
fi
case "$backend" in cpu|cuda) ;; *) die "--backend: '$backend'; allowed: cpu, cuda" ;; esac
for b in bench/moebench_comm bench/moebench_moe_layer; do
  [ -x "$build/$b" ] || die "$build/$b is not built; run scripts/build.sh (or scripts/gpu_box.sh build on a GPU box)"
done
py=python3
"$py" -c "import numpy" 2>/dev/null || py=/usr/bin/python3
"$py" -c "import numpy" 2>/dev/null || die "no python3 with numpy (check_dump.py needs it)"
export OMPI_ALLOW_RUN_AS_ROOT="${OMPI_ALLOW_RUN_AS_ROOT:-1}" OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}"
# srun's tasks find each other through PMIx (Open MPI's only way under srun); a task that fails
# ends the step. LAUNCH_DEADLINE=S ends a launch that is still running after S seconds.
launch() {
  local deadline=()
  [ -n "${LAUNCH_DEADLINE:-}" ] && deadline=(timeout --kill-after 10 "$LAUNCH_DEADLINE")
  if [ "$launcher" = srun ]; then
    "${deadline[@]}" srun --ntasks "$ranks" --mpi=pmix --kill-on-bad-exit=1 ${SRUN_FLAGS:-} "$@"
  else
    "${deadline[@]}" mpirun ${MPIRUN_FLAGS:-} -np "$ranks" "$@"
  fi
}
[ -n "$work" ] || work="$PWD/cluster_check.$(date -u +%Y%m%dT%H%M%S).$$"
mkdir -p "$work" 2>/dev/null && [ -w "$work" ] || die "--work: cannot write to '$work'"
tmp="$(cd "$work" && pwd)"
experts=$(( (8 + ranks - 1) / ranks * ranks ))
failed=0
line() { printf 'cluster_check: %-12s %-34s %s\n' "$1" "$2" "$3"; }
# fail CHECK WHAT WHY [LOG]: with LOG, every rank's and the launcher's error lines follow (8 at
# most), so that a failure seen once, in CI say, shows what each rank was waiting on.
fail() {
  failed=1
  line "$1" "$2" "FAILED: $3"
  [ -n "${4:-}" ] && [ -f "$4" ] && grep -E 'error|srun: ' "$4" | awk '!seen[$0]++' | head -8 | sed 's/^/    /'
  return 0
}

echo "cluster_check: $ranks rank(s), $backend backend, $launcher; $(date -u +%Y-%m-%dT%H:%M:%SZ)"

# Launch: the last task enters the barrier 2 s late; every other one must wait for it.
if [ "$ranks" -lt 2 ]; then
  line launch "PMIx barrier (ends MPI_Init)" "not run: needs 2 ranks or more"
elif [ ! -x "$build/runtime/moebench_launch_barrier" ]; then
  line launch "PMIx barrier (ends MPI_Init)" "not run: moebench_launch_barrier is not built (no PMIx headers)"
elif LAUNCH_DEADLINE=60 launch "$build/runtime/moebench_launch_barrier" --delay 2 > "$tmp/launch.log" 2>&1; then
  line launch "PMIx barrier (ends MPI_Init)" "ok (every task waited for the last, 2 s late)"
else
  fail launch "PMIx barrier (ends MPI_Init)" "$(grep -m1 -o 'task .*' "$tmp/launch.log" || tail -1 "$tmp/launch.log")"
fi

# Collectives: the comm bench checks every element it receives.
if launch "$build/bench/moebench_comm" --scale tiny --backend "$backend" --repetitions 1 --out "$tmp/comm" \
    > "$tmp/comm.log" 2>&1; then
  for f in "$tmp"/comm/comm/*.csv; do
    name="$(basename "$f" .csv)"
    wrong="$("$py" -c "import csv,sys; print(sum(int(r['wrong']) for r in csv.DictReader(open(sys.argv[1]))))" "$f")"
    sizes="$("$py" -c "import csv,sys; print(len(list(csv.DictReader(open(sys.argv[1])))))" "$f")"
    if [ "$wrong" = 0 ]; then line collectives "$name" "ok ($sizes sizes, every element checked)"; else fail collectives "$name" "$wrong wrong elements"; fi
  done
  # Where the ranks ran, as the rows' provenance says: the nodes, and the link within and between them.
  f="$tmp/comm/comm/all_reduce.csv"
  line placement "$("$py" -c "import csv,sys; r=next(csv.DictReader(open(sys.argv[1]))); print(f\"{r['ranks']} ranks on {r['nodes']} node(s)\")" "$f")" \
    "$("$py" -c "import csv,sys; r=next(csv.DictReader(open(sys.argv[1]))); print(f\"{r['hosts']} ({r['link']})\")" "$f")"
else
  fail collectives "moebench_comm" "exit $? ($(tail -1 "$tmp/comm.log"))" "$tmp/comm.log"
fi

# Dispatchers: each layer's state recomputed independently.
tp=()
if [ $((ranks % 2)) = 0 ] && [ "$ranks" -ge 4 ]; then tp=(--tp 2); fi
if launch "$build/bench/moebench_moe_layer" --scale tiny --backend "$backend" --repetitions 1 --iters 1 \
    --experts "$experts" --dump "$tmp/dump" ${tp[@]+"${tp[@]}"} --out "$tmp/moe" > "$tmp/moe.log" 2>&1; then
  for d in local expert_parallel ppmoe; do
    label="$d"
    if [ "$d" = ppmoe ] && [ -n "${tp[*]:-}" ]; then label="ppmoe, TP 2 (split)"; fi
    if out="$("$py" "$root/tests/cli/check_dump.py" "$tmp/dump/$d" 2>&1)"; then
      line dispatchers "$label" "ok (numpy's recomputation: $(tail -1 <<<"$out" | sed 's/.*: routing/routing/'))"
    else
      fail dispatchers "$d" "$(tail -1 <<<"$out")"
    fi
  done
else
  fail dispatchers "moebench_moe_layer" "exit $? ($(tail -1 "$tmp/moe.log"))" "$tmp/moe.log"
fi

# Watchdog: rank 1 stops inside a collective; the job must end with the message within the timeout.
if [ "$ranks" -ge 2 ]; then
  start=$SECONDS
  # Its own deadline: a job the watchdog fails to end must not hang the check.
  LAUNCH_DEADLINE=90 launch "$build/bench/moebench_comm" --scale tiny --backend "$backend" --stall-rank 1 --comm-timeout 5 \
    --out "$tmp/stall" > "$tmp/stall.log" 2>&1
  status=$?
  took=$((SECONDS - start))
  # The CPU's watchdog says "did not complete within 5 s", NCCL's wait "did not complete in 5 s".
  if [ "$status" != 0 ] && grep -qE "did not complete (within|in) 5 s" "$tmp/stall.log" && [ "$took" -lt 60 ]; then
    line watchdog "a stopped rank" "ok (the job ended in ${took} s, exit $status, with the rank's message)"
  else
    fail watchdog "a stopped rank" "exit $status after ${took} s; $(grep -m1 "error" "$tmp/stall.log" || tail -1 "$tmp/stall.log")" "$tmp/stall.log"
  fi
else
  line watchdog "a stopped rank" "not run: needs 2 ranks or more"
fi

# Pipeline schedules whose two directions share a communicator, with messages a send waits on.
if [ "$ranks" -ge 2 ] && [ -x "$build/bench/moebench_pipe_bubble" ]; then
  # A micro-batch of ROWS x HIDDEN fp32 values a message; on the CPU a narrow FFN keeps the step short.
  rows=2048 hidden=4096 ffn=4096
  [ "$backend" = cpu ] && rows=1280 hidden=1024 ffn=64
  mib=$((rows * hidden * 4 >> 20))
  if MOEBENCH_MPI_AS_NCCL=1 LAUNCH_DEADLINE=300 launch "$build/bench/moebench_pipe_bubble" --backend "$backend" --scale tiny \
       --schedules 1f1b,zb-h1 --micro-batches 4 --mini-batch $((4 * rows)) --hidden "$hidden" --ffn "$ffn" --layers "$ranks" \
       --repetitions 1 --comm-timeout 120 --out "$tmp/pipe" > "$tmp/pipe.log" 2>&1; then
    line pipeline "1F1B and ZB-H1, $mib MiB messages" "ok (no deadlock between the two directions)"
  else
    fail pipeline "1F1B and ZB-H1, $mib MiB messages" "exit $? ($(grep -m1 'error' "$tmp/pipe.log" || tail -1 "$tmp/pipe.log"))" "$tmp/pipe.log"
  fi
elif [ "$ranks" -ge 2 ]; then
  line pipeline "1F1B and ZB-H1" "not run: moebench_pipe_bubble is not built"
else
  line pipeline "1F1B and ZB-H1" "not run: needs 2 ranks or more"
fi

# MPMoE's pipelined layer: its strategies and baselines, each a whole run.
if [ -x "$build/bench/moebench_mpmoe" ]; then
  if LAUNCH_DEADLINE=300 launch "$build/bench/moebench_mpmoe" --backend "$backend" --scale tiny --experiments f10 \
       --repetitions 1 --out "$tmp/mpmoe" > "$tmp/mpmoe.log" 2>&1 && [ -s "$tmp/mpmoe/mpmoe/f10.csv" ]; then
    line mpmoe "pipelined layer (Fig. 10's cases)" "ok ($(($(wc -l < "$tmp/mpmoe/mpmoe/f10.csv") - 1)) rows)"
  else
    fail mpmoe "pipelined layer (Fig. 10's cases)" "exit $? ($(grep -m1 'error' "$tmp/mpmoe.log" || tail -1 "$tmp/mpmoe.log"))" "$tmp/mpmoe.log"
  fi
else
  line mpmoe "pipelined layer" "not run: moebench_mpmoe is not built"
fi

# The multi-rank test suites (they build their own reference on one rank).
if [ "$ranks" != 1 ] && [ "$ranks" != 2 ] && [ "$ranks" != 4 ]; then
  line "mpi tests" "schedules, TP, DP, ZeRO-1, ..." "not run at $ranks ranks: the suites' layouts are written for 1, 2 and 4 ranks"
else
  for t in moebench_mpi_tests moebench_mpi_pipeline_tests; do
    [ -x "$build/tests/$t" ] || { line "mpi tests" "$t" "not run: not built (a build with tests)"; continue; }
    # Not the emulated link's timing bounds: on ranks that share cores with other work, the scheduler
    # decides them (CTest's mpi.comm.* judges them on their own). On cuda the suites written for
    # either backend run over NCCL; the others are listed as not run.
    MOEBENCH_TEST_BACKEND="$backend" MOEBENCH_MPI_AS_NCCL=1 launch bash -c 'exec "$0" --gtest_filter=-EmulatedLinkOps.* --gtest_output=json:"$1/$(basename "$0")_${OMPI_COMM_WORLD_RANK:-${SLURM_PROCID:-0}}.json"' \
      "$build/tests/$t" "$tmp" > "$tmp/$t.log" 2>&1
    "$py" - "$tmp" "$t" <<'PY' || failed=1
import glob, json, sys
tmp, binary = sys.argv[1], sys.argv[2]
suites = {}
for path in sorted(glob.glob(f"{tmp}/{binary}_*.json")):
    for s in json.load(open(path)).get("testsuites", []):
        for t in s.get("testsuite", []):
            entry = suites.setdefault(s["name"], {})
            r = entry.setdefault(t["name"], {"failed": False, "skipped": None})
            r["failed"] |= bool(t.get("failures"))
            if t.get("result") == "SKIPPED":
                r["skipped"] = (t.get("skipped") or [{}])[0].get("message", "skipped").strip().splitlines()[-1]
if not suites:
    print(f"cluster_check: mpi tests    {binary:34s} FAILED: no results (see the launcher's output)")
    sys.exit(1)
bad = False
for name, tests in suites.items():
    failed = [t for t, r in tests.items() if r["failed"]]
    skipped = {t: r["skipped"] for t, r in tests.items() if r["skipped"] and not r["failed"]}
    ran = len(tests) - len(skipped)
    if failed:
        bad = True
        print(f"cluster_check: mpi tests    {name:34s} FAILED: {', '.join(failed)}")
    else:
        extra = f"; not run here: {'; '.join(f'{t} ({why})' for t, why in skipped.items())}" if skipped else ""
        print(f"cluster_check: mpi tests    {name:34s} ok ({ran} of {len(tests)}{extra})")
sys.exit(1 if bad else 0)
PY
  done
  line "mpi tests" "EmulatedLinkOps" "not run: its timing bounds need cores of their own (CTest's mpi.comm.* runs it)"
fi

if [ "$failed" = 0 ]; then
  rm -rf "$tmp"
  echo "cluster_check: every check that ran passed"
else
  echo "cluster_check: a check FAILED (the ranks' output is in $tmp)"
fi
exit "$failed"
