#!/usr/bin/env bash
# Run ON A GPU BOX that has CUDA, CMake and a C++ compiler but no Debian packages and no
# network: unpacks the .deb files from scripts/fetch_gpu_deps.sh into a private prefix
# (never into /), builds moebench there (CUDA on, MPI off: world size 1), runs the unit and
# GPU tests, runs the GPU tests again under compute-sanitizer (memcheck, and racecheck on our
# own shared-memory kernels; any report fails), and runs the GPU benchmarks at the given scale.
# MOEBENCH_REQUIRE_GPU=1 throughout: a GPU test that finds no usable GPU fails here.
#   scripts/gpu_box.sh [build|test|sanitize|bench|targets|all|lease|multirank|ledger] [--scale paper] [--dtype fp16]
#                      [--results DIR] [--budget SECONDS] [--cases NAME[,NAME...]] [--tests FILTER]
#                      [--backend cuda|cpu] [--targets T[,T...]]
# build --targets: those targets alone (and what they need). A build with MPI
# (MOEBENCH_CMAKE_ARGS=-DMOEBENCH_MPI=ON, a cluster's) refuses a MOEBENCH_DEPS_PREFIX under /tmp,
# /var/tmp or /dev/shm, which each node has of its own, unless it lies in the checkout.
# multirank: the multi-rank path at 2 and 4 ranks sharing the GPU (scripts/gpu_multirank.sh), with
# Debian's Open MPI carried in .deps; into $OUT (else RESULTS/multirank). --backend cpu: its dry run.
# ledger: the claims one GPU can judge, at the paper scale (scripts/gpu_ledger.sh), into RESULTS
# (default results/cuda), in --budget seconds (default 360 here); $OUT gets ledger.log and
# ledger.tar.gz of RESULTS. --backend cpu: its dry run at the tiny scale.
# targets: the GPU targets alone (scripts/gpu_targets.sh, bf16 unless --dtype says otherwise), a
# few minutes, where bench runs every experiment.
# lease: what one device lease holds, in one call of --budget seconds (default 540): the build of
# what the checks need, for this GPU's architecture alone; the GPU tests, then all of them again
# under memcheck with the pool poisoned (two minutes at most); the targets, the most telling first,
# none started within 90 s of the end (the rest listed as out of time), after the GPT step's and
# the MoE layer's kernel logs once at the tiny scale (the targets run without them if that fails);
# then, in the time left, ncu's per-kernel summary of one MoE layer iteration (a minute at most).
# A follow-up lease call re-measures a few cases: --cases (targets, lease) names them
# (scripts/gpu_targets.sh), --tests (lease) is the gtest filter of the GPU tests and their memcheck
# (one that selects none of them is refused before the build: scripts/gpu_test_names.py);
# with --cases the lease runs no ncu.
# Its files go to $OUT (else RESULTS/lease),
# seven of them, as a device lease returns eight at most: lease.log, gpu_tests.log, sanitize.log,
# kernel_log.log, targets.csv, ncu_moe_layer.txt and results.tar.gz (the targets' folders, the
# GPU's profile under models/, and lease/: cudnn_device.json -- this GPU's properties as cuDNN
# serializes them, to replace tests/cudnn/h100_device.json on an H100 -- kernel_log_tiny.csv and
# kernel_log_layer_tiny.csv).
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
budget=540
budget_given=""
cases=() tests="*" mr_backend=cuda build_targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --scale|--results|--dtype|--budget|--cases|--tests|--backend|--targets)
      [ $# -ge 2 ] && [ -n "$2" ] || { echo "gpu_box.sh: error: $1: needs a value" >&2; exit 2; }
      case "$1" in
        --scale) scale="$2" ;; --results) results="$2" ;; --dtype) dtype="$2"; dtype_given="$2" ;;
        --budget) budget="$2"; budget_given="$2" ;;
        --cases) cases=(--cases "$2") ;; --tests) tests="$2" ;; --backend) mr_backend="$2" ;;
        --targets) IFS=, read -r -a build_targets <<< "$2" ;;
      esac
      shift 2 ;;
    *) echo "gpu_box.sh: error: unknown option '$1' (allowed: --scale, --dtype, --results, --budget, --cases, --tests, --backend, --targets)" >&2
       exit 2 ;;
  esac
done
case "$step" in build|test|sanitize|bench|targets|all|lease|multirank|ledger) ;; *) echo "gpu_box.sh: error: step '$step' is not build, test, sanitize, bench, targets, all, lease, multirank or ledger" >&2; exit 2 ;; esac
case "$mr_backend" in cuda|cpu) ;; *) echo "gpu_box.sh: error: --backend: '$mr_backend'; allowed: cuda, cpu (multirank's dry run)" >&2; exit 2 ;; esac
if [ ${#cases[@]} -gt 0 ]; then  # a misspelt case must not cost a lease its build and tests first
  known=" $(scripts/gpu_targets.sh --list | tr '\n' ' ')"
  IFS=, read -r -a wanted <<< "${cases[1]}"
  for c in "${wanted[@]}"; do
    [[ "$known" == *" $c "* ]] || { echo "gpu_box.sh: error: --cases: '$c' is not a case; allowed:$known" >&2; exit 2; }
  done
fi
# A filter selecting no GPU test would run none and pass; the names come from the test sources.
if [ "$tests" != "*" ]; then python3 scripts/gpu_test_names.py --filter "$tests" > /dev/null || exit 2; fi
if ! [[ "$budget" =~ ^[0-9]+$ ]] || [ "$budget" -lt 180 ] || [ "$budget" -gt 3600 ]; then
  echo "gpu_box.sh: error: --budget: '$budget' is not a whole number of seconds in [180, 3600]" >&2
  exit 2
fi

ledger_budget="${budget_given:-360}"

# On a GPU box a missing device or a broken driver fails the GPU tests; it is not a skip.
export MOEBENCH_REQUIRE_GPU=1
prefix="${MOEBENCH_DEPS_PREFIX:-/tmp/moebench-deps}"
# A build with MPI is a cluster's: its benches run on every node of a job and load the libraries
# from the prefix, which must then be where every node sees it, not in one node's own /tmp. The
# checkout is (the nodes run its scripts), wherever it lies.
if [ "$step" = build ] && [[ " ${MOEBENCH_CMAKE_ARGS:-} " == *" -DMOEBENCH_MPI=ON "* ]]; then
  case "$prefix/" in
    "$PWD"/*) ;;
    /tmp/*|/var/tmp/*|/dev/shm/*)
      echo "gpu_box.sh: error: MOEBENCH_DEPS_PREFIX: '$prefix' is node-local, and a build with MPI runs its benches on" \
           "every node of a job, where these libraries would not be found; allowed: a folder every node sees, such as" \
           "MOEBENCH_DEPS_PREFIX=\$PWD/.deps/prefix in the checkout" >&2
      exit 2 ;;
  esac
fi
build="$PWD/build-gpu"
arch_dir="$prefix/usr/lib/x86_64-linux-gnu"
export LD_LIBRARY_PATH="$arch_dir/openblas-pthread:$arch_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

unpack() {
  if [ ! -d .deps/debs ] || ! ls .deps/debs/*.deb >/dev/null 2>&1; then
    echo "gpu_box.sh: error: no .deps/debs/*.deb; run scripts/fetch_gpu_deps.sh on a Debian machine and carry .deps" >&2
    exit 1
  fi
  # Open MPI apart (multirank's): in the build's prefix it would shadow a cluster module's MPI.
  local deb into
  for deb in .deps/debs/*.deb .deps/mpi-debs/*.deb; do
    [ -f "$deb" ] || continue
    into="$prefix"
    [[ "$deb" == .deps/mpi-debs/* ]] && into="$prefix/mpi"
    mkdir -p "$into"
    if command -v dpkg-deb >/dev/null 2>&1; then
      dpkg-deb -x "$deb" "$into"
    else  # a .deb is an ar archive holding data.tar.*
      local tmp; tmp="$(mktemp -d)"
      (cd "$tmp" && ar x "$OLDPWD/$deb" && tar -xf data.tar.* -C "$into")
      rm -rf "$tmp"
    fi
  done
}

# A library the toolkit may lack: the toolkit's, or the folder $VAR names, or the Python wheel
# (nvidia-NAME) PyTorch carries. NCCL for the collectives; cuDNN for the fused attention, without
# which the build still succeeds and --attention cudnn says why not.
find_wheel_library() {  # NAME HEADER VAR
  local name="$1" header="$2" var="$3" dir
  [ -n "${!var:-}" ] && return
  ls /usr/local/cuda/lib64/lib"$name".so* >/dev/null 2>&1 && return
  dir="$(python3 -c "import nvidia.$name; print(list(nvidia.$name.__path__)[0])" 2>/dev/null || true)"
  if [ -n "$dir" ] && [ -f "$dir/include/$header" ]; then
    export "$var=$dir"
    export LD_LIBRARY_PATH="$dir/lib:$LD_LIBRARY_PATH"
    echo "gpu_box.sh: $name from $dir"
  fi
}
find_nccl() { find_wheel_library nccl nccl.h NCCL_HOME; }
find_cudnn() { find_wheel_library cudnn cudnn_graph.h CUDNN_HOME; }

# do_build [TARGET...]: every target, or those named (and what they need).
do_build() {
  unpack
  find_nccl
  find_cudnn
  local cuda_arch=() only=()
  [ -n "${CMAKE_CUDA_ARCHITECTURES:-}" ] && cuda_arch=(-DCMAKE_CUDA_ARCHITECTURES="$CMAKE_CUDA_ARCHITECTURES")
  [ $# -gt 0 ] && only=(--target "$@")
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DMOEBENCH_CUDA=ON -DMOEBENCH_MPI=OFF \
        -DCMAKE_PREFIX_PATH="$prefix/usr" "${cuda_arch[@]}" ${MOEBENCH_CMAKE_ARGS:-} >/dev/null
  cmake --build "$build" -j "$(nproc)" "${only[@]}"
}

do_test() {
  find_nccl
  find_cudnn
  (cd "$build" && ctest -L 'unit|gpu' --output-on-failure -j 4)
}

# compute-sanitizer on the GPU tests and on two bench runs; --error-exitcode makes any report fail.
# API errors are not reported: NCCL probes at init for kernels its build lacks and carries on
# (cudaErrorNoKernelImageForDevice, seen on an H100), and our own code checks every CUDA call.
do_sanitize() {
  find_nccl
  find_cudnn
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
    --gtest_filter='GpuGating.*:GpuCapacity.*:GpuRouting.*:GpuPermute.*:GpuAuxAndAxpy.*:GpuGelu.*:GpuLayerNorm.*:GpuCausalSoftmax.*:GpuCrossEntropy.*:GpuAttentionPanels.*:GpuSwapDims.*:GpuPadRows.*:GpuSegmentGemm.*:GpuSegmentOffsets.*:GpuBf16Split.*'
}

do_bench() {
  find_nccl
  find_cudnn
  MOEBENCH_BUILD="$build" MOEBENCH_RESULTS="$results" MOEBENCH_LAUNCHER=none \
    experiments/run_all.sh --scale "$scale" --backend cuda --ranks 1 --dtype "$dtype"
}

do_targets() {
  do_build moebench_moe_layer moebench_gpt_step moebench_profile
  MOEBENCH_BUILD="$build" MOEBENCH_LAUNCHER=none scripts/gpu_targets.sh --scale "$scale" --backend cuda \
    --dtype "${dtype_given:-bf16}" --results "$results" ${cases[@]+"${cases[@]}"}
}

# This GPU's architecture alone (Hopper: sm_90a), unless CMAKE_CUDA_ARCHITECTURES says otherwise.
lease_architecture() {
  [ -n "${CMAKE_CUDA_ARCHITECTURES:-}" ] && return
  local cap
  cap="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .' || true)"
  case "$cap" in
    90) export CMAKE_CUDA_ARCHITECTURES=90a-real ;;
    [0-9][0-9]|[0-9][0-9][0-9]) export CMAKE_CUDA_ARCHITECTURES="$cap-real" ;;
  esac
}

# Kernel by kernel, what one measured iteration of the headline MoE layer (top-1, padded: the
# route whose figures the targets judge first) runs:
# ncu's speed-of-light summary per kernel (duration, compute and memory throughput against the
# GPU's peaks) over the iteration --profile brackets (its first 80 kernels, so that the summary
# comes out in time), into OUT/ncu_moe_layer.txt. After the targets, in what they leave (half a
# minute at least, a minute at most): evidence for a missed target, not a check, so a failure is
# logged, not the lease's.
lease_ncu() {  # OUT SECONDS_LEFT
  local out="$1" limit="$2" ncu
  ncu="$(command -v ncu || echo /usr/local/cuda/bin/ncu)"
  if [ ! -x "$ncu" ] || [ "$limit" -lt 30 ]; then
    echo "== lease: no ncu summary (${limit} s left; ncu: $ncu)" | tee "$out/ncu_moe_layer.txt"
    return 0
  fi
  [ "$limit" -gt 60 ] && limit=60
  echo "== lease: ncu on one iteration of the MoE layer (top-1, padded), ${limit} s at most"
  timeout "$limit" "$ncu" --clock-control none --profile-from-start off --launch-count 80 --section SpeedOfLight \
    --print-summary per-kernel \
    "$build/bench/moebench_moe_layer" --backend cuda --scale "$scale" --dtype "${dtype_given:-bf16}" --dispatchers local \
    --expert-gemm padded --warmup 1 --iters 1 --repetitions 1 --profile --out "$(mktemp -d)" \
    > "$out/ncu_moe_layer.txt" 2>&1 || echo "== lease: ncu ended with exit $? (its output: ncu_moe_layer.txt)"
  tail -n 3 "$out/ncu_moe_layer.txt"
}

do_lease() {
  local out="${OUT:-$results/lease}" t0=$SECONDS status=0 extra
  mkdir -p "$out"
  extra="$(mktemp -d)/lease"  # packed into results.tar.gz: $OUT returns eight files at most
  mkdir -p "$extra"
  # Seconds left in the budget, less a margin, and at least 1 (timeout 0 would mean no limit).
  left() { local s=$((budget - (SECONDS - t0) - ${1:-0})); echo $((s > 0 ? s : 1)); }
  {
    echo "== lease: budget ${budget} s, results in $results, files in $out"
    lease_architecture
    echo "== lease: build for ${CMAKE_CUDA_ARCHITECTURES:-the toolkit default architectures}"
    do_build moebench_gpu_tests moebench_moe_layer moebench_gpt_step moebench_profile || status=1
    echo "== lease: GPU tests at $((SECONDS - t0)) s"
    MOEBENCH_CUDNN_DEVICE_JSON_OUT="$extra/cudnn_device.json" \
      timeout "$(( $(left) / 4 + 1 ))" "$build/tests/moebench_gpu_tests" --gtest_filter="$tests" > "$out/gpu_tests.log" 2>&1 || status=1
    tail -n 3 "$out/gpu_tests.log"
    # Every GPU test under memcheck with the pool poisoned, before the targets time the kernels
    # (about a minute on an H200; a use of memory after its stream freed it shows as 0xFF bytes).
    local cs
    cs="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
    echo "== lease: memcheck on the GPU tests ($tests) at $((SECONDS - t0)) s" | tee "$out/sanitize.log"
    MOEBENCH_POOL_POISON=1 timeout 120 "$cs" --tool memcheck --report-api-errors no --error-exitcode 1 --print-limit 20 \
      "$build/tests/moebench_gpu_tests" --gtest_filter="$tests" >> "$out/sanitize.log" 2>&1 ||
      { [ $? = 124 ] && echo "== lease: memcheck stopped at its 120 s: not a verdict" >> "$out/sanitize.log"; status=1; }
    tail -n 2 "$out/sanitize.log"
    # The kernel log (CUPTI, runtime/kernel_log.h) once at the tiny scale, the GPT step's and the
    # layer's, before the targets use it: should a run fail, they run without it (MOEBENCH_KERNEL_LOG=off).
    echo "== lease: the GPT step's and the MoE layer's kernel logs at the tiny scale at $((SECONDS - t0)) s"
    local canary
    canary="$(mktemp -d)"
    if timeout 90 "$build/bench/moebench_gpt_step" --backend cuda --scale tiny --dtype bf16 --kernels --out "$canary" \
         > "$out/kernel_log.log" 2>&1 &&
       timeout 60 "$build/bench/moebench_moe_layer" --backend cuda --scale tiny --dtype bf16 --dispatchers local \
         --kernels --out "$canary" >> "$out/kernel_log.log" 2>&1; then
      cp "$canary/gpt/step_kernels.csv" "$extra/kernel_log_tiny.csv" 2>/dev/null || true
      cp "$canary/moe/kernels_local.csv" "$extra/kernel_log_layer_tiny.csv" 2>/dev/null || true
      # Their rows against the step's breakdown and the layer's ranges, logged: what the CPU's
      # tests check, read on a GPU.
      python3 tests/cli/check_step_kernels.py "$canary/gpt/step_kernels.csv" "$canary/gpt/step_breakdown.csv" \
        >> "$out/kernel_log.log" 2>&1 && echo "check_step_kernels: all holds" >> "$out/kernel_log.log" || true
      python3 tests/cli/check_layer_kernels.py "$canary/moe/kernels_local.csv" "$canary/moe/layer_local.csv" \
        >> "$out/kernel_log.log" 2>&1 && echo "check_layer_kernels: all holds" >> "$out/kernel_log.log" || true
    else
      export MOEBENCH_KERNEL_LOG=off
      status=1
      echo "== lease: a kernel log's run failed (kernel_log.log): the targets run without it"
    fi
    tail -n 2 "$out/kernel_log.log"
    echo "== lease: targets at $((SECONDS - t0)) s"
    # torch.compile of a 24-layer model (and its MoE) could take the lease: a minute each at most.
    MOEBENCH_TORCH_COMPILE_LIMIT="${MOEBENCH_TORCH_COMPILE_LIMIT:-60}" MOEBENCH_BUILD="$build" MOEBENCH_LAUNCHER=none \
      timeout "$(left 45)" scripts/gpu_targets.sh --scale "$scale" --backend cuda --dtype "${dtype_given:-bf16}" \
      --results "$results" --deadline "$(( $(date +%s) + $(left 90) ))" ${cases[@]+"${cases[@]}"} || status=1
    python3 scripts/gpu_targets.py "$results/targets" > /dev/null || true  # the verdicts also of a run cut short
    [ ${#cases[@]} -gt 0 ] || lease_ncu "$out" "$(left 20)"
    echo "== lease: done at $((SECONDS - t0)) s (exit $status)"
  } 2>&1 | tee "$out/lease.log"
  [ -f "$results/targets/targets.csv" ] && cp "$results/targets/targets.csv" "$out/targets.csv"
  local packed=()
  for d in targets models; do [ -d "$results/$d" ] && packed+=("$d"); done
  tar -czf "$out/results.tar.gz" -C "$results" ${packed[@]+"${packed[@]}"} -C "$(dirname "$extra")" lease
  grep -q "(exit 0)$" "$out/lease.log"
}

case "$step" in
  lease) do_lease ;;
  build) do_build ${build_targets[@]+"${build_targets[@]}"} ;;
  targets) do_targets ;;
  test) do_test ;;
  bench) do_bench ;;
  sanitize) do_sanitize ;;
  all) do_build; do_test; do_sanitize; do_targets; do_bench ;;
  ledger)
    # The ledger's GPU evidence (scripts/gpu_ledger.sh), in --budget seconds (360 unless given);
    # --backend cpu: its dry run at the tiny scale with this machine's build/.
    if [ "$mr_backend" = cpu ]; then
      exec scripts/gpu_ledger.sh "$PWD/build" "${OUT:-$PWD/results-ledger-dry}" "$ledger_budget" cpu
    fi
    do_build moebench_mpmoe moebench_m6t_gating moebench_m6t_t1 moebench_ppmoe_serial moebench_moe_layer
    find_nccl
    find_cudnn
    scripts/gpu_ledger.sh "$build" "$results" "$ledger_budget" cuda
    status=$?
    [ -n "${OUT:-}" ] && tar -czf "$OUT/ledger.tar.gz" -C "$results" . && cp "$results/ledger.log" "$OUT/"
    exit "$status" ;;
  multirank)
    unpack
    [ "$mr_backend" = cuda ] && { find_nccl; find_cudnn; lease_architecture; }
    exec scripts/gpu_multirank.sh "$prefix" "${OUT:-$results/multirank}" "$mr_backend" ;;
esac
