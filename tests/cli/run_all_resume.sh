#!/usr/bin/env bash
# experiments/run_all.sh resumes: on a copy of it in a scratch git checkout beside stub
# experiments that each write one CSV (and log that they ran), a second run skips everything;
# a missing output reruns only its experiment; --redo reruns all; a change to the code reruns
# all; and after a kill -9 in the middle of an experiment the next run skips what had finished,
# reruns the rest, and no temporary file is left. Prints "resume as expected" or what failed.
set -euo pipefail
root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT
src="$(cd "$(dirname "$0")/../.." && pwd)"
dir="$root/experiments"
mkdir -p "$dir" "$root/scripts"
cp "$src/experiments/run_all.sh" "$src/experiments/lib.sh" "$dir/"
cp "$src/scripts/usage.sh" "$root/scripts/"
exps=(comm/run comm/emulated runtime/slowdown moe/run ppmoe/serial m6t/gating m6t/cv mpmoe/run pipe/bubble ppmoe/t2
      ppmoe/breakdown nodes/run m6t/t1 gpt/step models/profile models/project claims/report)
for e in "${exps[@]}"; do
  mkdir -p "$dir/$(dirname "$e")"
  cat > "$dir/$e.sh" <<STUB
#!/usr/bin/env bash
echo "$e" >> "$root/ran.log"
[ "$e" != mpmoe/run ] || [ -z "\${STUB_SLOW:-}" ] || { : > "\$MOEBENCH_RESULTS/half.csv.tmp.1"; sleep 30; }
mkdir -p "\$MOEBENCH_RESULTS/${e%/*}"
echo "x,scale" > "\$MOEBENCH_RESULTS/$e.csv"
STUB
  chmod +x "$dir/$e.sh"
done
git -C "$root" init -q && git -C "$root" add -A && git -C "$root" -c user.email=t@t -c user.name=t commit -qm stubs
fail() { echo "run_all resume: $*"; exit 1; }
run() { : > "$root/ran.log"; bash "$dir/run_all.sh" --scale tiny "$@" > "$root/out.log" 2>&1 || fail "run_all ended $?: $(tail -3 "$root/out.log")"; }
ran() { grep -c . "$root/ran.log" || true; }
run
[ "$(ran)" = 17 ] || fail "the first run ran $(ran) experiments, not 17"
run
[ "$(ran)" = 0 ] || fail "a second run ran $(ran) experiments again"
[ "$(grep -c 'skipped: its outputs are complete' "$root/out.log")" = 17 ] || fail "the skips were not said"
rm "$root/results-tiny/m6t/t1.csv"
run
[ "$(cat "$root/ran.log")" = m6t/t1 ] || fail "a missing output reran: $(tr '\n' ' ' < "$root/ran.log")"
run --redo
[ "$(ran)" = 17 ] || fail "--redo ran $(ran) experiments, not 17"
echo "# changed" >> "$dir/moe/run.sh"
run
[ "$(ran)" = 17 ] || fail "a change to the code reran $(ran) experiments, not 17"
# A kill -9 of the whole job while mpmoe/run (the 9th) is running.
: > "$root/ran.log"
STUB_SLOW=1 setsid bash "$dir/run_all.sh" --scale tiny --redo > "$root/out.log" 2>&1 &
job=$!
for _ in $(seq 100); do grep -q mpmoe/run "$root/ran.log" 2>/dev/null && break; sleep 0.1; done
grep -q mpmoe/run "$root/ran.log" || fail "the slow experiment did not start"
kill -9 -- -"$job"
wait "$job" 2>/dev/null || true
run
[ "$(head -1 "$root/ran.log")" = mpmoe/run ] || fail "after the kill the rerun began with $(head -1 "$root/ran.log"), not mpmoe/run"
[ "$(ran)" = 9 ] || fail "after the kill $(ran) experiments ran, not the 9 from mpmoe/run on"
[ -z "$(find "$root/results-tiny" -name '*.tmp.*')" ] || fail "a temporary file the kill left is still there"
echo "resume as expected"
