#!/usr/bin/env bash
# Run ON A GPU BOX that has CUDA, CMake and a C++ compiler but no Debian packages and no
# network: unpacks the .deb files from scripts/fetch_gpu_deps.sh into a private prefix
# (never into /), builds moebench there (CUDA on, MPI off: world size 1), runs the unit and
# GPU tests, runs the GPU tests again under compute-sanitizer (memcheck, and racecheck on our
# own shared-memory kernels; any report fails), and runs the GPU benchmarks at the given scale.
# MOEBENCH_REQUIRE_GPU=1 throughout: a GPU test that finds no usable GPU fails here.
#   scripts/gpu_box.sh [build|test|sanitize|bench|targets|all] [--scale paper] [--dtype fp16] [--results DIR]
# targets: the GPU targets alone (scripts/gpu_targets.sh, bf16 unless --dtype says otherwise), a
# few minutes, where bench runs every experiment.
# Env: MOEBENCH_DEPS_PREFIX (default /tmp/moebench-deps), CMAKE_CUDA_ARCHITECTURES (default: by toolkit),
# MOEBENCH_CMAKE_ARGS (more configure arguments).
source "$(dirname "$0")/usage.sh" && moebench_help_if_asked "$@"
set -euo pipefail
cd "$(dirname "$0")/.."
step="${1:-all}"; [ $# -gt 0 ] && shift
scale=paper
dtype=fp16  # the documents train in fp16
dtype_given=""
results="$PWD/results/cuda"  # beside the CPU results, not over them
while [ $# -gt 0 ]; do
  case "$1" in
    --scale|--results|--dtype)
      [ $# -ge 2 ] && [ -n "$2" ] || { echo "gpu_box.sh: error: $1: needs a value" >&2; exit 2; }
      case "$1" in --scale) scale="$2" ;; --results) results="$2" ;; --dtype) dtype="$2"; dtype_given="$2" ;; esac
      shift 2 ;;
    *) echo "gpu_box.sh: error: unknown option '$1' (allowed: --scale, --dtype, --results)" >&2; exit 2 ;;
  esac
done
case "$step" in build|test|sanitize|bench|targets|all) ;; *) echo "gpu_box.sh: error: step '$step' is not build, test, sanitize, bench, targets or all" >&2; exit 2 ;; esac

# On a GPU box a missing device or a broken driver fails the GPU tests; it is not a skip.
export MOEBENCH_REQUIRE_GPU=1
prefix="${MOEBENCH_DEPS_PREFIX:-/tmp/moebench-deps}"
build="$PWD/build-gpu"
arch_dir="$prefix/usr/lib/x86_64-linux-gnu"
export LD_LIBRARY_PATH="$arch_dir/openblas-pthread:$arch_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

unpack() {
  if [ ! -d .deps/debs ] || ! ls .deps/debs/*.deb >/dev/null 2>&1; then
    echo "gpu_box.sh: error: no .deps/debs/*.deb; run scripts/fetch_gpu_deps.sh on a Debian machine and carry .deps" >&2
    exit 1
  fi
  mkdir -p "$prefix"
  for deb in .deps/debs/*.deb; do
    if command -v dpkg-deb >/dev/null 2>&1; then
      dpkg-deb -x "$deb" "$prefix"
    else  # a .deb is an ar archive holding data.tar.*
      local tmp; tmp="$(mktemp -d)"
      (cd "$tmp" && ar x "$OLDPWD/$deb" && tar -xf data.tar.* -C "$prefix")
      rm -rf "$tmp"
    fi
  done
}

# NCCL: the toolkit's, or NCCL_HOME, or the one a Python wheel (nvidia-nccl) installed.
find_nccl() {
  [ -n "${NCCL_HOME:-}" ] && return
  ls /usr/local/cuda/lib64/libnccl.so* >/dev/null 2>&1 && return
  local dir
  dir="$(python3 -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null || true)"
  if [ -n "$dir" ] && [ -f "$dir/include/nccl.h" ]; then
    export NCCL_HOME="$dir"
    export LD_LIBRARY_PATH="$dir/lib:$LD_LIBRARY_PATH"
    echo "gpu_box.sh: NCCL from $dir"
  fi
}

do_build() {
  unpack
  find_nccl
  local cuda_arch=()
  [ -n "${CMAKE_CUDA_ARCHITECTURES:-}" ] && cuda_arch=(-DCMAKE_CUDA_ARCHITECTURES="$CMAKE_CUDA_ARCHITECTURES")
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DMOEBENCH_CUDA=ON -DMOEBENCH_MPI=OFF \
        -DCMAKE_PREFIX_PATH="$prefix/usr" "${cuda_arch[@]}" ${MOEBENCH_CMAKE_ARGS:-} >/dev/null
  cmake --build "$build" -j "$(nproc)"
}

do_test() {
  find_nccl
  (cd "$build" && ctest -L 'unit|gpu' --output-on-failure -j 4)
}

# compute-sanitizer on the GPU tests and on two bench runs; --error-exitcode makes any report fail.
# API errors are not reported: NCCL probes at init for kernels its build lacks and carries on
# (cudaErrorNoKernelImageForDevice, seen on an H100), and our own code checks every CUDA call.
do_sanitize() {
  find_nccl
  local cs
  cs="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
  [ -x "$cs" ] || { echo "gpu_box.sh: error: compute-sanitizer not found" >&2; exit 1; }
  echo "== compute-sanitizer memcheck: GPU tests (pool poisoned)"
  MOEBENCH_POOL_POISON=1 "$cs" --tool memcheck --report-api-errors no --error-exitcode 1 "$build/tests/moebench_gpu_tests"
  echo "== compute-sanitizer memcheck: moe layer bench (fp16, tiny)"
  "$cs" --tool memcheck --report-api-errors no --error-exitcode 1 "$build/bench/moebench_moe_layer" --backend cuda \
    --scale tiny --dtype fp16 --repetitions 1 --out "$(mktemp -d)"
  echo "== compute-sanitizer memcheck: MPMoE pipelined layer bench (fp16, tiny, pool poisoned)"
  MOEBENCH_POOL_POISON=1 "$cs" --tool memcheck --report-api-errors no --error-exitcode 1 "$build/bench/moebench_mpmoe" \
    --backend cuda --scale tiny --dtype fp16 --repetitions 1 --fresh-search --out "$(mktemp -d)"
  echo "== compute-sanitizer racecheck: our shared-memory kernels"
  "$cs" --tool racecheck --report-api-errors no --error-exitcode 1 "$build/tests/moebench_gpu_tests" \
    --gtest_filter='GpuGating.*:GpuCapacity.*:GpuPermute.*:GpuAuxAndAxpy.*:GpuGelu.*:GpuLayerNorm.*:GpuCausalSoftmax.*:GpuCrossEntropy.*:GpuAttentionPanels.*:GpuSwapDims.*:GpuPadRows.*'
}

do_bench() {
  find_nccl
  MOEBENCH_BUILD="$build" MOEBENCH_RESULTS="$results" MOEBENCH_LAUNCHER=none \
    experiments/run_all.sh --scale "$scale" --backend cuda --ranks 1 --dtype "$dtype"
}

do_targets() {
  find_nccl
  MOEBENCH_BUILD="$build" MOEBENCH_LAUNCHER=none scripts/gpu_targets.sh --scale "$scale" --backend cuda \
    --dtype "${dtype_given:-bf16}" --results "$results"
}

case "$step" in
  build) do_build ;;
  targets) do_targets ;;
  test) do_test ;;
  bench) do_bench ;;
  sanitize) do_sanitize ;;
  all) do_build; do_test; do_sanitize; do_targets; do_bench ;;
esac
