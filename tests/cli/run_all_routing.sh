#!/usr/bin/env bash
# experiments/run_all.sh's routing, on a copy of it beside stub experiments that print their
# arguments: every experiment runs with the caller's options; a 16-bit --dtype reaches all but
# pipe/bubble and m6t/t1 (fp32, said so) and models/project; on cuda comm/emulated and nodes/run
# are left out, at --ranks 1 ppmoe/t2 too. Prints "routing as expected" or the first difference.
set -euo pipefail
root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT
dir="$root/experiments"
mkdir -p "$dir" "$root/scripts"
cp "$(dirname "$0")/../../experiments/run_all.sh" "$(dirname "$0")/../../experiments/lib.sh" "$dir/"
cp "$(dirname "$0")/../../scripts/usage.sh" "$root/scripts/"
exps=(comm/run comm/emulated runtime/slowdown moe/run ppmoe/serial m6t/gating m6t/cv mpmoe/run pipe/bubble ppmoe/t2
      ppmoe/breakdown nodes/run m6t/t1 gpt/step models/profile models/project claims/report)
for e in "${exps[@]}"; do
  mkdir -p "$dir/$(dirname "$e")"
  printf '#!/usr/bin/env bash\necho "ran %s: $*"\n' "$e" > "$dir/$e.sh"
  chmod +x "$dir/$e.sh"
done
fail() { echo "run_all routing: $*"; exit 1; }
out="$(bash "$dir/run_all.sh" --scale tiny)"
for e in "${exps[@]}"; do grep -qx "ran $e: --scale tiny" <<<"$out" || fail "$e did not run with the caller's options"; done
out="$(bash "$dir/run_all.sh" --scale tiny --backend cuda --ranks 1 --dtype fp16)"
for e in comm/run runtime/slowdown moe/run ppmoe/serial m6t/gating m6t/cv mpmoe/run ppmoe/breakdown gpt/step models/profile; do
  grep -qx "ran $e: --scale tiny --backend cuda --ranks 1 --dtype fp16" <<<"$out" || fail "$e did not get --dtype fp16"
done
for e in pipe/bubble m6t/t1; do
  grep -qx "ran $e: --scale tiny --backend cuda --ranks 1" <<<"$out" || fail "$e did not run in fp32"
  grep -q "$e computes in fp32 only" <<<"$out" || fail "$e ran in fp32 without saying so"
done
for e in models/project claims/report; do
  grep -qx "ran $e: --scale tiny --backend cuda --ranks 1" <<<"$out" || fail "$e got --dtype"
done
for e in comm/emulated ppmoe/t2 nodes/run; do
  ! grep -q "ran $e" <<<"$out" || fail "$e ran on one GPU"
  grep -q "$e left out" <<<"$out" || fail "$e was left out without a line"
done
bash "$dir/run_all.sh" --help | grep -q "Runs every experiment" || fail "--help did not print the usage"
! bash "$dir/run_all.sh" --help | grep -q "^ran " || fail "--help ran experiments"
echo "routing as expected"
