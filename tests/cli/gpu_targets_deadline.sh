#!/usr/bin/env bash
# scripts/gpu_targets.sh with a deadline already past: no case starts, each is listed as out of
# time beside the verdicts, no target is judged, and the script exits 1 (a run that did not
# measure everything must not look complete). A bad --deadline is refused before any work. --cases
# runs only the cases it names.
#   gpu_targets_deadline.sh SOURCE_DIR
set -u
src="$1"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
fail() { echo "gpu_targets_deadline: $*"; exit 1; }

out="$("$src"/scripts/gpu_targets.sh --scale tiny --backend cpu --dtype fp32 --results "$dir" --deadline soon 2>&1)"
[ $? = 2 ] || fail "--deadline soon: exit 2 expected"
grep -q "error: --deadline: 'soon' is not a time" <<<"$out" || fail "--deadline soon: no error line naming it: $out"
[ ! -e "$dir/targets" ] || fail "--deadline soon: work was done before the error"

"$src"/scripts/gpu_targets.sh --scale tiny --backend cpu --dtype fp32 --results "$dir" --deadline 1 >"$dir/log" 2>&1
rc=$?
[ "$rc" = 1 ] || fail "a run with every case out of time exited $rc, not 1"
csv="$dir/targets/targets.csv"
[ -f "$csv" ] || fail "no targets.csv"
late=$(grep -c 'not run: out of time' "$csv")
cases=$(grep -c 'out of time$' "$dir/targets/cases.tsv")
announced=$(grep -c '^== gpu_targets: .* not started: the deadline has passed' "$dir/log")
[ "$cases" = "$announced" ] && [ "$cases" -ge 21 ] || fail "cases.tsv lists $cases cases out of time, the log $announced (21 at least)"
[ "$late" = "$cases" ] || fail "$late cases listed as out of time in targets.csv, not the $cases of cases.tsv"
! grep -q ',met,\|,missed,' "$csv" || fail "a target was judged with no case run"
[ "$(grep -c 'not run (no case of it ended well)' "$csv")" -ge 9 ] || fail "targets without a case are not 'not run'"
! ls -d "$dir"/targets/*/ >/dev/null 2>&1 || fail "a case wrote results after the deadline"
grep -q 'not started before the deadline' "$dir/log" || fail "the script did not say why it exits 1"

# --cases: a name that is no case is refused before any work; the cases named are the only ones
# tried (here out of time), every other listed as not selected.
rm -rf "$dir/targets"
out="$("$src"/scripts/gpu_targets.sh --scale tiny --backend cpu --dtype fp32 --results "$dir" --cases moe-top1-padded,moe-top9 2>&1)"
[ $? = 2 ] || fail "--cases moe-top9: exit 2 expected"
grep -q "error: --cases: 'moe-top9' is not a case; allowed: moe-top1-padded moe-top1-padded-gate-separate gpt-cudnn" <<<"$out" || fail "--cases: no error line naming it: $out"
[ ! -e "$dir/targets" ] || fail "--cases moe-top9: work was done before the error"
"$src"/scripts/gpu_targets.sh --scale tiny --backend cpu --dtype fp32 --results "$dir" --deadline 1 \
  --cases moe-top1-padded-zipf,moe-8x-top2-padded >"$dir/log" 2>&1
[ $? = 1 ] || fail "--cases with both cases out of time: exit 1 expected"
tried=$(grep -c 'out of time$' "$dir/targets/cases.tsv")
skipped=$(grep -c 'not selected$' "$dir/targets/cases.tsv")
[ "$tried" = 2 ] && [ "$skipped" -ge 19 ] || fail "--cases: $tried cases tried (2 expected), $skipped not selected"
grep -q $'^moe-top1-padded-zipf\t-\t-\tout of time$' "$dir/targets/cases.tsv" || fail "--cases: moe-top1-padded-zipf was not the one tried"
[ "$(grep -c 'not run: not selected (--cases)' "$dir/targets/targets.csv")" = "$skipped" ] ||
  fail "targets.csv does not say which cases were not selected"
echo "gpu_targets_deadline: ok"
