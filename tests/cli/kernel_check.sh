#!/usr/bin/env bash
# moebench_kernel_check as a test: it runs, and kernels/check.csv holds WANT rows marked ok and
# none FAILED. With --backend cuda where there is no GPU: skipped (77), unless
# MOEBENCH_REQUIRE_GPU=1.
#   kernel_check.sh BIN OUT WANT [bench options]
set -u
bin=$1 out=$2 want=$3
shift 3
rm -rf "$out"
said="$("$bin" --out "$out" "$@" 2>&1)"
status=$?
echo "$said"
if [ "$status" != 0 ]; then
  if grep -q -- "--backend cuda: no usable GPU" <<<"$said" && [ "${MOEBENCH_REQUIRE_GPU:-0}" != 1 ]; then exit 77; fi
  echo "kernel_check: moebench_kernel_check exited $status"
  exit 1
fi
f="$out/kernels/check.csv"
ok=$(grep -c ',ok,' "$f")
failed=$(grep -c ',FAILED,' "$f")
if [ "$ok" != "$want" ] || [ "$failed" != 0 ]; then
  echo "kernel_check: $ok rows ok (want $want), $failed FAILED in $f"
  exit 1
fi
echo "kernel_check: $ok versions within their tolerance of the CPU reference"
