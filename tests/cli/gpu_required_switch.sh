#!/usr/bin/env bash
# The "GPU required" switch, checked on any machine by hiding every GPU (CUDA_VISIBLE_DEVICES=):
# with MOEBENCH_REQUIRE_GPU=1 the GPU tests and a GPU bench's smoke run fail on a missing device;
# without it they are skipped (the GPU tests' marker line, the smoke run's exit code 77).
#   gpu_required_switch.sh GPU_TESTS_BIN COMM_BENCH_BIN PYTHON WORK_DIR
set -u
gpu_tests=$1 bench=$2 py=$3 work=$4
smoke="$(dirname "$0")/bench_smoke.py"
fail() { echo "gpu_required_switch: FAILED: $*"; exit 1; }
out="$(CUDA_VISIBLE_DEVICES= MOEBENCH_REQUIRE_GPU=1 "$gpu_tests" 2>&1)" && fail "the GPU tests passed without a GPU: $out"
grep -q "MOEBENCH_REQUIRE_GPU=1 and no usable GPU" <<<"$out" || fail "no reason given: $out"
out="$(CUDA_VISIBLE_DEVICES= MOEBENCH_REQUIRE_GPU= "$gpu_tests" 2>&1)" || fail "the GPU tests failed instead of skipping: $out"
grep -q "MOEBENCH_NO_GPU" <<<"$out" || fail "no skip marker: $out"
run_smoke() {
  CUDA_VISIBLE_DEVICES= MOEBENCH_REQUIRE_GPU=$1 "$py" "$smoke" gpu.bench.moebench_comm.fp32 "$work" -- \
    "$bench" --backend cuda --scale tiny --out "$work" >/dev/null 2>&1
}
run_smoke 1; rc=$?
[ "$rc" = 1 ] || fail "a GPU bench's smoke run without a GPU ended $rc with MOEBENCH_REQUIRE_GPU=1 (want 1)"
run_smoke ""; rc=$?
[ "$rc" = 77 ] || fail "a GPU bench's smoke run without a GPU ended $rc (want 77, skipped)"
echo "gpu_required_switch: a missing GPU fails where required and is skipped otherwise"
