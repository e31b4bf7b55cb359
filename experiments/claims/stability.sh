#!/usr/bin/env bash
# claims.stability: whether the ledger's verdicts hold on a second run of the same commit. The
# results folder (default results/) is the first run. The second reruns the experiments, each
# into a copy of that folder, and both are judged. Then the two ledgers are compared claim by
# claim. Writes <results>/claims_stability.csv. REPORT.md states its figure: the share of claims
# with a run verdict (reproduced, partly, contradicted, not reproduced, noise) that got the same
# verdict both times, among those whose CSVs the second run wrote again. The results folder's experiments must be of this commit: run the main job
# (or the experiments named) first.
#   experiments/claims/stability.sh [--experiments "ppmoe/t2 m6t/t1"] [--work DIR] [--results DIR]
#     --experiments LIST  the experiments to rerun (run_all.sh's names; default: every one that
#                         measures, which takes as long as the main job)
#     --work DIR          where the second run goes (default: a new folder under /tmp)
set -euo pipefail
# sbatch runs a copy of this script from its spool folder: run the original, beside the project.
[ -f "$(dirname "$0")/../lib.sh" ] || exec "$(scontrol show job "${SLURM_JOB_ID:?}" | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')" "$@"
source "$(dirname "$0")/../lib.sh"
measuring="comm/run comm/emulated runtime/slowdown moe/run ppmoe/serial m6t/gating m6t/cv mpmoe/run pipe/bubble ppmoe/t2 ppmoe/breakdown nodes/run m6t/t1 gpt/step"
experiments="$measuring" work="" rest=()
while [ $# -gt 0 ]; do
  case "$1" in
    --experiments|--work)
      [ $# -ge 2 ] && [ -n "$2" ] || moebench_die "$1: needs a value"
      if [ "$1" = --experiments ]; then experiments="$2"; else work="$2"; fi
      shift 2 ;;
    *) rest+=("$1"); shift ;;
  esac
done
moebench_parse_args --single-rank ${rest[@]+"${rest[@]}"}
[ "${#EXTRA[@]}" = 0 ] || moebench_die "${EXTRA[0]}: not an option of this script; allowed: --experiments, --work, --results"
for e in $experiments; do
  case " $measuring " in *" $e "*) ;; *) moebench_die "--experiments: '$e' is not an experiment that measures; allowed: $measuring" ;; esac
done
[ -z "$work" ] || moebench_writable_folder --work "$work"
first="$MOEBENCH_RESULTS"
[ -f "$first/claims.csv" ] || moebench_die "--results: $first holds no claims.csv (run the main job first)"
bin="$MOEBENCH_BUILD/tools/moebench_claims_stability"
[ -x "$bin" ] || moebench_die "$bin is not built; run scripts/build.sh"
if [ -z "$work" ]; then work="$(mktemp -d /tmp/moebench-stability.XXXXXX)"; fi
[ -w "$first" ] || moebench_die "--results: cannot write claims_stability.csv to $first"
second="$work/second"
rm -rf "$second"
cp -r "$first" "$second"
rm -rf "$second/.stamps"
commit="$(git -C "$MOEBENCH_ROOT" rev-parse --short=7 HEAD 2>/dev/null || echo unknown)"
for e in $experiments; do
  echo "== second run: $e"
  "$MOEBENCH_ROOT/experiments/$e.sh" --results "$second"
done
"$MOEBENCH_ROOT/experiments/models/project.sh" --results "$second" > /dev/null
"$MOEBENCH_BUILD/tools/moebench_claims" --results "$second" > /dev/null
# The CSVs the second run wrote again: only the claims that read one of them are counted.
(cd "$first" && find . -name '*.csv' ! -name 'claims*.csv' | sed 's|^\./||' | sort | while read -r f; do
   cmp -s "$first/$f" "$second/$f" || echo "$f"
 done) > "$work/rerun.txt"
what="first: $(basename "$first")/ as it was; second: a rerun at $commit of $(echo $experiments | tr ' ' ',') on $(hostname)"
"$bin" --first "$first/claims.csv" --second "$second/claims.csv" --out "$first/claims_stability.csv" --runs "$what" \
  --rerun "$work/rerun.txt"
"$MOEBENCH_ROOT/experiments/claims/report.sh" --results "$first" > /dev/null
echo "claims.stability: $first/REPORT.md states the figure"
