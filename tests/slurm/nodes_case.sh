#!/usr/bin/env bash
# One case of the `nodes` CTest label, on the two-node cluster of tests/slurm/cluster.sh --nodes 2
# (in CLUSTER_DIR), its clients on the login node; WORK lies in the cluster's shared home. Prints
# what went wrong, exit 1, or exit 77 where there is no such cluster.
#   nodes_case.sh CASE SOURCE_DIR BUILD_DIR CLUSTER_DIR WORK
# Cases:
#   docs           docs/cluster.md's lines that take several nodes, as typed (tests/slurm/docs_commands.py),
#                  the self-check's among them, each job submitted from another folder
#   dead_node      a node dies in the middle of a run (every process of its namespaces killed, its
#                  slurmd included)
#   link_down      a node's link to the others goes down in the middle of a run
#                  In both: the job ends within --comm-timeout plus kMarginS; each surviving rank
#                  says in one line that the dead node's ranks do not answer, naming them and the
#                  host; no CSV is left half-written; with the node back, the same run passes.
#   no_root_build  docs/cluster.md's build without root, as typed (its dependency prefix in the
#                  checkout) with CUDA off, unoptimized, and moebench_comm alone (the whole build takes this
#                  machine minutes), into WORK/no-root; a prefix under /tmp is refused before it
#   no_root_run    then on both nodes that bench loads its libraries from the prefix, and runs
#   launch_barrier the PMIx barrier that ends Open MPI's MPI_Init waits for every node with the
#                  cluster's fence (mpi.conf: ring), and moebench_launch_barrier says it does not
#                  with Slurm's tree fence (on fewer nodes than TreeWidth, each node ends it alone)
set -uo pipefail
case_name="$1" src="$2" build="$3" cluster="$4" work_root="$5"
here="$(cd "$(dirname "$0")" && pwd)"
started="$(date +%Y-%m-%dT%H:%M:%S)"  # as Slurm stamps its logs
# What Slurm saw while the case ran (a node not responding, a step killed) follows a failure.
fail() {
  echo "nodes case $case_name: $*"
  for log in "$cluster"/slurmctld.log "$cluster"/slurmd-*.log; do
    [ -f "$log" ] && awk -v since="${started:-}" 'substr($1, 2, 19) >= since' "$log" |
      grep -iE 'not responding|down|killed|signal|timeout|error' | grep -v 'spmix_appdir\|pmixp_libpmix_finalize' |
      tail -5 | sed "s|^|  $(basename "$log"): |"
  done
  exit 1
}
[ -s "$cluster/nodes" ] && [ -f "$cluster/slurm.conf" ] ||
  { echo "nodes case $case_name: skipped: no test cluster of nodes (tests/slurm/cluster.sh start --nodes 2 skipped or failed)"; exit 77; }
mkdir -p "$work_root" && work="$(mktemp -d "$work_root/$case_name.XXXXXX")" || fail "cannot make a folder in $work_root"
trap 'rm -rf "$work"' EXIT
on_login() { (cd "$work" && bash "$here/cluster.sh" exec "$cluster" "$@"); }
export OPENBLAS_NUM_THREADS=1
timeout_s=10
margin_s=15  # the peers' probe (2 s), the answering linger (2 s) and srun's end of the step (KillWait 5 s and more)

wait_idle() {  # every node idle again, within 60 s
  for _ in $(seq 1 120); do
    [ "$(on_login sinfo -h -o %t 2>/dev/null | sort -u)" = idle ] && return 0
    sleep 0.5
  done
  fail "the nodes are not idle 60 s after the fault: $(on_login sinfo 2>&1)"
}

# fault KIND: a 4-rank comm run over both nodes, the fault on mb-node2 after 5 s, then the checks.
fault() {
  local kind="$1" status=0 t0 t_fault t_end out
  t0=$(date +%s.%N)
  on_login srun -N 2 --ntasks-per-node 2 --mpi=pmix --kill-on-bad-exit=1 "$build/bench/moebench_comm" --scale local \
    --comm-timeout "$timeout_s" --out "$work/out" > "$work/run.log" 2>&1 &
  local job=$!
  sleep 5
  t_fault=$(date +%s.%N)
  if [ "$kind" = dead_node ]; then bash "$here/cluster.sh" kill-node "$cluster" mb-node2; else bash "$here/cluster.sh" link "$cluster" mb-node2 down; fi
  for _ in $(seq 1 240); do kill -0 "$job" 2>/dev/null || break; sleep 0.25; done
  if kill -0 "$job" 2>/dev/null; then
    kill -9 "$job" 2>/dev/null
    fail "the job still ran 60 s after the fault: $(grep -v '^ ' "$work/run.log" | tail -5)"
  fi
  wait "$job" || status=$?
  t_end=$(date +%s.%N)
  [ "$kind" = dead_node ] && bash "$here/cluster.sh" revive "$cluster" mb-node2
  [ "$kind" = link_down ] && bash "$here/cluster.sh" link "$cluster" mb-node2 up
  out="$(cat "$work/run.log")"
  python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) - float(sys.argv[2]) <= float(sys.argv[3]) else 1)' \
    "$t_end" "$t_fault" "$((timeout_s + margin_s))" ||
    fail "the job ended $(python3 -c "print(round($t_end - $t_fault, 1))") s after the fault, past --comm-timeout $timeout_s s + ${margin_s} s"
  [ "$status" != 0 ] || fail "the job exited 0 though a node was lost"
  for r in 0 1; do
    grep -q "moebench_comm: rank $r: error: .* did not complete within $timeout_s s .*ranks 2, 3 on mb-node2 do not answer" <<<"$out" ||
      fail "rank $r (mb-node1) did not name ranks 2, 3 on mb-node2 in its line: $(grep -m3 'error' <<<"$out")"
  done
  ! grep -q "rank [0-9]* on mb-node1\|ranks [0-9, ]* on mb-node1" <<<"$(grep 'error:' <<<"$out")" ||
    fail "a surviving rank was named as not answering: $(grep 'error:' <<<"$out")"
  ! find "$work/out" -name '*.tmp.*' 2>/dev/null | grep -q . || fail "a CSV was left half-written: $(find "$work/out" -name '*.tmp.*')"
  wait_idle
  on_login srun -N 2 --ntasks-per-node 2 --mpi=pmix --kill-on-bad-exit=1 "$build/bench/moebench_comm" --scale tiny \
    --repetitions 1 --comm-timeout "$timeout_s" --out "$work/out" > "$work/rerun.log" 2>&1 ||
    fail "the rerun with mb-node2 back failed: $(tail -5 "$work/rerun.log")"
  python3 -c 'import csv,sys; rows=list(csv.DictReader(open(sys.argv[1]))); sys.exit(0 if rows and all(r["wrong"]=="0" and r["nodes"]=="2" for r in rows) else 1)' \
    "$work/out/comm/all_to_all.csv" || fail "the rerun's all_to_all.csv is not whole, right and from 2 nodes"
  echo "nodes case $case_name: the job ended $(python3 -c "print(round($t_end - $t_fault, 1))") s after the fault ($(grep -m1 -o 'rank 0: error: .*' <<<"$out" | cut -c1-160)...)"
}

case "$case_name" in
  docs) on_login "${MOEBENCH_TEST_PYTHON:-python3}" "$here/docs_commands.py" "$src" "$build" --nodes 2 --work "$work" ||
          fail "a line failed" ;;
  dead_node|link_down) fault "$case_name" ;;
  no_root_build)
    # Into a folder the run case below finds; the build needs no node but the login node, so it
    # runs beside the other cases.
    project="$work_root/no-root/project"
    rm -rf "$work_root/no-root" && mkdir -p "$project"
    for entry in "$src"/*; do ln -s "$entry" "$project/"; done
    cd "$project" || fail "no project"
    # Refused before any work: the default prefix, node-local.
    status=0
    said="$(MOEBENCH_CMAKE_ARGS=-DMOEBENCH_MPI=ON scripts/gpu_box.sh build 2>&1)" || status=$?
    [ "$status" = 2 ] && grep -q "MOEBENCH_DEPS_PREFIX: '/tmp/moebench-deps' is node-local" <<<"$said" ||
      fail "a prefix under /tmp was not refused (exit $status): $said"
    # The route as docs/cluster.md types it: the packages fetched on a machine with apt (this one,
    # outside the cluster, whose nodes reach nothing else), then the prefix and the build on the
    # login node. Unoptimized and without debug information: what is checked is where the
    # libraries come from, and -O0 halves the compile (the suite's slowest test, on the cores
    # every other test shares); -g would cost it another sixth.
    scripts/fetch_gpu_deps.sh > "$work/fetch.log" 2>&1 || fail "scripts/fetch_gpu_deps.sh failed: $(tail -3 "$work/fetch.log")"
    on_login bash -c "cd '$project' && export MOEBENCH_DEPS_PREFIX=\$PWD/.deps/prefix &&
      MOEBENCH_CMAKE_ARGS='-DMOEBENCH_MPI=ON -DMOEBENCH_CUDA=OFF -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-O0' scripts/gpu_box.sh build --targets moebench_comm" \
      > "$work/build.log" 2>&1 || fail "the build failed: $(tail -5 "$work/build.log")" ;;
  no_root_run)
    project="$work_root/no-root/project"
    bench="$project/build-gpu/bench/moebench_comm"
    [ -x "$bench" ] || fail "no $bench"
    prefix="$project/.deps/prefix"
    # Each node loads the bench's libraries from the prefix (the machine's own copies stand in for
    # none on a cluster's compute node): ldd there names the prefix for Google Benchmark's.
    libs="$(on_login srun -N 2 --ntasks-per-node 1 bash -c 'echo "$(hostname): $(ldd "$0" | grep -m1 libbenchmark)"' "$bench" 2>&1)"
    [ "$(grep -c "libbenchmark.* => $prefix/" <<<"$libs")" = 2 ] ||
      fail "the bench does not load its libraries from $prefix on both nodes: $libs"
    on_login srun -N 2 --ntasks-per-node 2 --mpi=pmix "$bench" --scale tiny --repetitions 1 --out "$work/out" \
      > "$work/run.log" 2>&1 || fail "the bench of that build failed on the nodes: $(tail -5 "$work/run.log")"
    grep -q ',2,mb-node1 mb-node2,' "$work/out/comm/all_reduce.csv" || fail "its rows are not from both nodes"
    rm -rf "$work_root/no-root" ;;
  launch_barrier)
    barrier="$build/runtime/moebench_launch_barrier"
    [ -x "$barrier" ] || { echo "nodes case $case_name: skipped: $barrier is not built (no PMIx headers)"; exit 77; }
    said="$(on_login srun -N 2 --ntasks-per-node 2 --mpi=pmix "$barrier" --delay 2 2>&1)" ||
      fail "the cluster's barrier did not wait for every node: $said"
    [ "$(grep -c ': ok (waited' <<<"$said")" = 4 ] || fail "not every task said ok: $said"
    status=0
    said="$(on_login env SLURM_PMIX_FENCE=tree srun -N 2 --ntasks-per-node 2 --mpi=pmix "$barrier" --delay 2 2>&1)" || status=$?
    [ "$status" = 1 ] && grep -q "does not wait for every node.*SLURM_PMIX_FENCE=ring" <<<"$said" ||
      fail "Slurm's tree fence was not found out (exit $status): $said" ;;
  *) fail "unknown case" ;;
esac
echo "nodes case $case_name: ok"
