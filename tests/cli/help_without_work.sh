#!/usr/bin/env bash
# Every script and program answers --help without doing work: exit 0 within a few seconds, a
# usage on stdout, and nothing written where results go.
#   help_without_work.sh SOURCE_DIR BUILD_DIR
set -u
src=$1 build=$2
results="$(mktemp -d)"
trap 'rm -rf "$results"' EXIT
fail=0
check() {
  local out rc
  out="$(cd "$src" && MOEBENCH_BUILD="$build" MOEBENCH_RESULTS="$results" timeout 20 "$@" --help 2>&1)"
  rc=$?
  if [ "$rc" != 0 ] || [ -z "$out" ]; then
    echo "help_without_work: $*: --help ended $rc: ${out:0:300}"
    fail=1
  fi
  if [ -n "$(ls -A "$results")" ]; then
    echo "help_without_work: $* --help wrote into the results folder"
    fail=1
    rm -rf "${results:?}"/*
  fi
}
for s in "$src"/scripts/*.sh "$src"/experiments/run_all.sh "$src"/experiments/*/*.sh; do
  case "$(basename "$s")" in usage.sh|common.sh) continue ;; esac
  check "$s"
done
for b in "$build"/bench/moebench_* "$build"/tools/moebench_*; do
  [ -x "$b" ] && [ -f "$b" ] && check "$b"
done
check "$src/scripts/mutation_check.py"
[ "$fail" = 0 ] && echo "help_without_work: every script and program answers --help without work"
exit "$fail"
