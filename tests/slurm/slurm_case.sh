#!/usr/bin/env bash
# One case of the `slurm` CTest label, on the one-node cluster of tests/slurm/cluster.sh
# (SLURM_CONF points at it), run as a user types it; prints what went wrong, exit 1, or exit 77
# where there is no cluster (Slurm not installed, or not root).
#   slurm_case.sh CASE SOURCE_DIR BUILD_DIR [N]
# Cases:
#   srun_bench N              srun --mpi=pmix of the comm bench at N tasks: every element right
#   srun_without_pmi          srun without PMI at 2 tasks: refused before MPI starts, exit 2, one
#                             line naming --mpi=pmix, no MPI banner
#   srun_world_unlike_tasks   a rank whose world size is not srun's task count: refused, naming both
#   sbatch_cluster_check N    sbatch -n N of scripts/cluster_check.sh, submitted from another folder
#   sbatch_experiment         sbatch -n 2 of experiments/comm/run.sh --scale tiny, from another folder:
#                             its CSVs land in its --results folder
set -uo pipefail
case_name="$1" src="$2" build="$3" n="${4:-2}"
here="$(cd "$(dirname "$0")" && pwd)"
fail() { echo "slurm case $case_name: $*"; exit 1; }
[ -n "${SLURM_CONF:-}" ] && [ -f "$SLURM_CONF" ] && command -v srun >/dev/null 2>&1 ||
  { echo "slurm case $case_name: skipped: no test cluster (tests/slurm/cluster.sh start skipped or failed)"; exit 77; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
export OPENBLAS_NUM_THREADS=1

case "$case_name" in
  srun_bench)
    out="$(srun -n "$n" -O --mpi=pmix "$build/bench/moebench_comm" --scale tiny --repetitions 1 --out "$work/out" 2>&1)" ||
      fail "exit $?: $(tail -5 <<<"$out")"
    for f in all_reduce all_to_all send_recv; do
      [ -f "$work/out/comm/$f.csv" ] || fail "no $f.csv: $(tail -5 <<<"$out")"
      python3 -c "import csv,sys; rows=list(csv.DictReader(open(sys.argv[1]))); sys.exit(0 if rows and all(r['wrong']=='0' and r['ranks']==sys.argv[2] for r in rows) else 1)" \
        "$work/out/comm/$f.csv" "$n" || fail "$f.csv: a wrong element, or not $n ranks"
    done ;;
  srun_without_pmi)
    status=0
    out="$(srun -n 2 -O "$build/bench/moebench_comm" --scale tiny --out "$work/out" 2>&1)" || status=$?
    [ "$status" = 2 ] || fail "exit $status, not 2: $out"
    [ "$(grep -c 'moebench_comm: error:' <<<"$out")" = 1 ] || fail "not one line from the bench: $out"
    grep -q 'moebench_comm: error: .*srun --mpi=pmix' <<<"$out" || fail "the line does not name --mpi=pmix: $out"
    ! grep -qi 'PMI support\|OPAL' <<<"$out" || fail "MPI started and printed its banner: $out"
    [ ! -e "$work/out" ] || fail "it wrote results" ;;
  srun_world_unlike_tasks)
    # One task under PMIx that is told the step has two: as under an MPI that starts each task alone.
    status=0
    out="$(srun -n 1 --mpi=pmix env SLURM_STEP_NUM_TASKS=2 "$build/bench/moebench_comm" --scale tiny --out "$work/out" 2>&1)" ||
      status=$?
    [ "$status" = 2 ] || fail "exit $status, not 2: $out"
    grep -q "moebench_comm: error: MPI's world has 1 rank(s) but srun started 2 tasks (SLURM_NTASKS)" <<<"$out" ||
      fail "no line naming both counts: $out" ;;
  sbatch_cluster_check)
    status=0
    "$here/sbatch_wait.sh" -n "$n" -O -o "$work/job.out" "$src/scripts/cluster_check.sh" --launcher srun --backend cpu \
      --build "$build" > "$work/sbatch.out" 2>&1 || status=$?
    out="$(cat "$work/job.out" 2>/dev/null)"
    [ "$status" = 0 ] || fail "job exit $status: $(cat "$work/sbatch.out"); $out"
    grep -q "cluster_check: $n rank(s), cpu backend, srun" <<<"$out" || fail "not $n ranks under srun: $out"
    grep -q "every check that ran passed" <<<"$out" || fail "no passing line: $out"
    ! grep -q FAILED <<<"$out" || fail "a check failed: $out"
    ! ls -d "$work"/cluster_check.* >/dev/null 2>&1 || fail "its work folder was left behind after passing" ;;
  sbatch_experiment)
    status=0
    "$here/sbatch_wait.sh" -n 2 -O -o "$work/job.out" "$src/experiments/comm/run.sh" --scale tiny --results "$work/results" \
      > "$work/sbatch.out" 2>&1 || status=$?
    [ "$status" = 0 ] || fail "job exit $status: $(cat "$work/sbatch.out"); $(tail -5 "$work/job.out")"
    for f in all_reduce all_to_all; do
      grep -q ',2,' "$work/results/comm/$f.csv" 2>/dev/null || fail "no 2-rank $f.csv in its --results folder: $(tail -5 "$work/job.out")"
    done ;;
  *) fail "unknown case" ;;
esac
echo "slurm case $case_name: ok"
