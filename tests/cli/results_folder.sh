#!/usr/bin/env bash
# Results that cannot be mixed up (experiments/lib.sh): the default folder is the committed
# results/ only for the local scale on the cpu backend; a folder holding another scale's or
# backend's CSVs for an experiment is refused, and --replace clears them first; --out is refused.
#   results_folder.sh SOURCE_DIR
set -u
src="$(cd "$1" && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "results_folder: $*"; exit 1; }
default_for() {  # the results folder a script would use for these options
  (unset MOEBENCH_RESULTS; source "$src/experiments/lib.sh"; moebench_parse_args "$@" >/dev/null; echo "$MOEBENCH_RESULTS")
}
[ "$(default_for --scale local)" = "$src/results" ] || fail "local cpu does not default to results/"
[ "$(default_for --scale tiny)" = "$src/results-tiny" ] || fail "tiny does not default to results-tiny/: $(default_for --scale tiny)"
[ "$(default_for --scale paper --backend cuda --ranks 1)" = "$src/results-cuda-paper" ] || fail "cuda paper does not default to results-cuda-paper/"
[ "$(default_for --scale tiny --results "$tmp/mine")" = "$tmp/mine" ] || fail "--results is not taken"
# A folder with a tiny-scale CSV, checked by a local-scale run.
mkdir -p "$tmp/r/moe"
printf 'a,backend,scale\n1,cpu,tiny\n' > "$tmp/r/moe/layer_local.csv"
out="$(source "$src/experiments/lib.sh"; moebench_parse_args --scale local --results "$tmp/r"; moebench_results_dir_check "$tmp/r/moe" 2>&1)"
rc=$?
[ "$rc" = 2 ] || fail "a folder of tiny-scale CSVs was not refused to a local run (exit $rc)"
grep -q "holds another run's results.*tiny scale" <<<"$out" || fail "the refusal does not name the other run: $out"
[ -f "$tmp/r/moe/layer_local.csv" ] || fail "the refusal removed a file"
(source "$src/experiments/lib.sh"; moebench_parse_args --scale tiny --results "$tmp/r"; moebench_results_dir_check "$tmp/r/moe") ||
  fail "the same scale was refused"
(source "$src/experiments/lib.sh"; moebench_parse_args --scale local --results "$tmp/r" --replace; moebench_results_dir_check "$tmp/r/moe") >/dev/null ||
  fail "--replace was refused"
[ ! -f "$tmp/r/moe/layer_local.csv" ] || fail "--replace left the other run's CSV"
# The models' projections (backend "model", the paper scale) stand beside a local profile.
printf 'a,backend,scale\n1,model,paper\n' > "$tmp/r/moe/projection.csv"
(source "$src/experiments/lib.sh"; moebench_parse_args --scale local --results "$tmp/r"; moebench_results_dir_check "$tmp/r/moe") ||
  fail "a projection (backend model) was taken for another run"
rm "$tmp/r/moe/projection.csv"
# A row whose link holds a comma (quoted) is read as CSV: the same run's kind is not refused.
printf 'a,link,backend,scale\n1,"emulated: 1 GB/s, 5 us",cpu,local\n' > "$tmp/r/moe/layer_local.csv"
(source "$src/experiments/lib.sh"; moebench_parse_args --scale local --results "$tmp/r"; moebench_results_dir_check "$tmp/r/moe") ||
  fail "a quoted comma in the link misread the CSV's scale"
out="$(source "$src/experiments/lib.sh"; moebench_parse_args --out "$tmp/x" 2>&1)"
grep -q -- "--out: the experiment scripts take --results DIR" <<<"$out" || fail "--out was not refused: $out"
# merge_csv.py refuses rows of two scales in one CSV.
printf 'a,scale\n1,tiny\n' > "$tmp/a.csv"; printf 'a,scale\n2,local\n' > "$tmp/b.csv"
if python3 "$src/plots/merge_csv.py" "$tmp/m.csv" "$tmp/a.csv" "$tmp/b.csv" 2>/dev/null; then fail "merge_csv.py merged two scales"; fi
[ ! -f "$tmp/m.csv" ] || fail "merge_csv.py wrote a mixed CSV"
echo "results folders as expected"
