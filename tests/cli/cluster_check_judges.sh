#!/usr/bin/env bash
# scripts/cluster_check.sh refuses bad options and judges what it runs: beside stub benches that report a wrong element
# in one collective, a layer dump numpy disagrees with, and a stopped rank that never ends the
# job with its message, it prints FAILED for each and exits 1; with the real benches at 2 CPU
# ranks every check passes. Prints "cluster_check judges as expected" or what went wrong.
set -euo pipefail
src="$(cd "$(dirname "$0")/../.." && pwd)"
build="$1"
root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT
fail() { echo "cluster_check judges: $*"; exit 1; }
export MPIRUN_FLAGS=--oversubscribe
# Bad options: exit 2 with one line naming the option and what is allowed, before any check runs.
for bad in "--ranks 0|--ranks: '0' is not a whole number >= 1" "--backend tpu|--backend: 'tpu'; allowed: cpu, cuda" \
           "--launcher ssh|--launcher: 'ssh'; allowed: mpirun, srun" "--ranks|--ranks: needs a value" \
           "--nodes 2|unknown option '--nodes'" "--work /proc/moebench|--work: cannot write to '/proc/moebench'"; do
  args="${bad%%|*}" says="${bad#*|}"
  status=0
  out="$("$src/scripts/cluster_check.sh" $args 2>&1)" || status=$?
  [ "$status" = 2 ] || fail "$args: exit $status, not 2: $out"
  grep -qF "cluster_check: error: $says" <<<"$out" || fail "$args: no line saying \"$says\": $out"
  ! grep -q "collectives\|dispatchers" <<<"$out" || fail "$args: checks ran before the option was refused"
done
out="$("$src/scripts/cluster_check.sh" --ranks 2 --backend cpu --build "$build" --work "$root/real" 2>&1)" || fail "the real run failed: $out"
grep -q "every check that ran passed" <<<"$out" || fail "no closing line: $out"
for c in all_reduce all_to_all expert_parallel ppmoe "a stopped rank" MoEDistributed PipelineMechanism DataParallel; do
  grep -q "$c .*ok" <<<"$out" || fail "no ok line for $c: $out"
done
# Stubs: the comm bench writes one wrong element and never stalls; the layer dumps nothing.
mkdir -p "$root/bench"
cat > "$root/bench/moebench_comm" <<'STUB'
#!/usr/bin/env bash
out=""; while [ $# -gt 0 ]; do [ "$1" = --out ] && out="$2"; shift; done
mkdir -p "$out/comm"
printf 'collective,wrong\nall_reduce,0\nall_reduce,1\n' > "$out/comm/all_reduce.csv"
STUB
printf '#!/usr/bin/env bash\nexit 0\n' > "$root/bench/moebench_moe_layer"
# The pipeline's ranks each say what they waited on, and fail.
cat > "$root/bench/moebench_pipe_bubble" <<'STUB'
#!/usr/bin/env bash
echo "moebench_pipe_bubble: rank 1: error: barrier (mpi) did not complete within 120 s"
echo "moebench_pipe_bubble: rank 2: error: recv (mpi) did not complete within 120 s"
exit 1
STUB
chmod +x "$root/bench/"*
status=0
out="$("$src/scripts/cluster_check.sh" --ranks 2 --backend cpu --build "$root" --work "$root/stubs" 2>&1)" || status=$?
[ "$status" = 1 ] || fail "exit $status with failing checks, not 1: $out"
grep -q "collectives  all_reduce .*FAILED: 1 wrong elements" <<<"$out" || fail "the wrong element was not reported: $out"
grep -q "dispatchers  local .*FAILED" <<<"$out" || fail "a layer without a dump passed: $out"
grep -q "watchdog .*FAILED" <<<"$out" || fail "a job that did not end with the rank's message passed: $out"
grep -q "pipeline .*FAILED" <<<"$out" && grep -q "^    moebench_pipe_bubble: rank 2: error: recv" <<<"$out" ||
  fail "a failed pipeline check did not show every rank's error line: $out"
grep -q "mpi tests .*not run: not built" <<<"$out" || fail "missing test binaries were not named: $out"
grep -q "a check FAILED" <<<"$out" || fail "no closing line for a failure: $out"
echo "cluster_check judges as expected"
