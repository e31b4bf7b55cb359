#!/usr/bin/env bash
# The multi-rank path on one GPU box (scripts/gpu_box.sh multirank runs this): Debian's Open MPI
# from .deps (scripts/fetch_gpu_deps.sh), unpacked into the prefix and relocated there with
# OPAL_PREFIX, a build with MPI and CUDA, then at 2 and 4 ranks sharing the GPU(s):
#   - scripts/cluster_check.sh --backend cuda: the launcher's barrier, NCCL's collectives element
#     by element, the dispatchers against numpy, a stopped rank ending the job within
#     --comm-timeout, a 1F1B and a ZB-H1 step of the pipeline bench with 32 MiB messages (5 MiB on
#     the CPU, where NCCL's order makes them wait as NCCL would), MPMoE's pipelined layer, and the
#     multi-rank test suites written for either backend (MOEBENCH_TEST_BACKEND=cuda, over NCCL);
#   - an MoE layer run at 2 ranks whose rank 1 is stopped (SIGSTOP): it ends within --comm-timeout;
# gpu_box.sh builds for the leased GPU's architecture alone.
# NCCL refuses two ranks on one GPU that share a host hash: each rank gets its own
# (MOEBENCH_NCCL_HOSTID_PER_RANK=1 sets NCCL_HOSTID from the rank), and the ranks talk over NCCL's
# socket transport on the loopback (NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 NCCL_MNNVL_ENABLE=0):
# this checks the program's multi-rank logic, not NCCL's fast transports, and times nothing.
# --backend cpu runs the same on CPU ranks (a dry run where there is no GPU).
#   scripts/gpu_multirank.sh PREFIX OUT [cuda|cpu]
# Writes OUT/multirank.log (one line per check, "multirank: [T s] ... ok|FAILED", T the seconds
# since the start) and a log per run;
# exit 0 when every check passed.
source "$(dirname "$0")/usage.sh" && moebench_help_if_asked "$@"
set -uo pipefail
cd "$(dirname "$0")/.."
prefix="${1:?PREFIX}" out="${2:?OUT}" backend="${3:-cuda}"
case "$backend" in cuda|cpu) ;; *) echo "gpu_multirank.sh: error: backend '$backend'; allowed: cuda, cpu" >&2; exit 2 ;; esac
mkdir -p "$out" || exit 1
log="$out/multirank.log"
: > "$log"
# Each line says when it was reached (seconds since the start): the time each step takes on the
# device, for the next call's plan.
say() { echo "multirank: [${SECONDS} s] $*" | tee -a "$log"; }
failed=0

# Open MPI from the prefix (gpu_box.sh unpacks .deps/mpi-debs into PREFIX/mpi): its wrappers,
# launcher, daemons and components all found there.
mpi="$prefix/mpi/usr"
arch="$mpi/lib/x86_64-linux-gnu"
if [ ! -x "$mpi/bin/mpirun.openmpi" ]; then
  say "FAILED: no Open MPI in $prefix/mpi (run scripts/fetch_gpu_deps.sh, which fetches it into .deps/mpi-debs, and carry .deps)"
  exit 1
fi
# Its settings file too (Debian's: no UCX, no openib; without it Open MPI picks UCX, whose progress
# left a large send and a barrier on another communicator waiting on each other), and PMIx's
# components: seen missing when /usr's copies were hidden (scripts/without_system_mpi.sh).
export OPAL_PREFIX="$mpi" OPAL_LIBDIR="$arch/openmpi/lib" OPAL_DATADIR="$mpi/share" OPAL_INCLUDEDIR="$arch/openmpi/include"
export OPAL_SYSCONFDIR="$prefix/mpi/etc/openmpi"
export PMIX_PREFIX="$arch/pmix2" PMIX_LIBDIR="$arch/pmix2/lib" PMIX_PKGLIBDIR="$arch/pmix2/lib/pmix"
export LD_LIBRARY_PATH="$arch/openmpi/lib:$arch:$arch/pmix2/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mkdir -p "$prefix/mpi-bin"
ln -sf "$mpi/bin/mpirun.openmpi" "$prefix/mpi-bin/mpirun"
export PATH="$prefix/mpi-bin:$mpi/bin:$PATH"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export MPIRUN_FLAGS="--oversubscribe" OPENBLAS_NUM_THREADS=1
# NCCL_NET=Socket: a network plugin in the GPU image (NCCL_NET_PLUGIN's libnccl-net.so) cannot take over.
export MOEBENCH_NCCL_HOSTID_PER_RANK=1 NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 NCCL_MNNVL_ENABLE=0 NCCL_NET=Socket
say "Open MPI $(mpirun --version 2>&1 | head -1 | grep -o '[0-9][0-9.]*$') from $mpi; backend $backend; $(date -u +%Y-%m-%dT%H:%M:%SZ)"

build="$PWD/build-multirank"
cuda=OFF
[ "$backend" = cuda ] && cuda=ON
if ! cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DMOEBENCH_CUDA="$cuda" -DMOEBENCH_MPI=ON \
      -DMPI_CXX_COMPILER="$mpi/bin/mpicxx.openmpi" -DMPIEXEC_EXECUTABLE="$mpi/bin/mpirun.openmpi" \
      -DCMAKE_PREFIX_PATH="$prefix/usr;$mpi" ${MOEBENCH_CMAKE_ARGS:-} > "$out/build.log" 2>&1 ||
   ! cmake --build "$build" -j "$(nproc)" --target moebench_comm moebench_moe_layer moebench_pipe_bubble moebench_mpmoe \
      moebench_launch_barrier moebench_mpi_tests moebench_mpi_pipeline_tests >> "$out/build.log" 2>&1; then
  say "FAILED: the build with MPI (see build.log: $(grep -m1 -i 'error' "$out/build.log"))"
  exit 1
fi
say "build with MPI: ok"

for ranks in 2 4; do
  if scripts/cluster_check.sh --ranks "$ranks" --backend "$backend" --build "$build" --work "$out/check$ranks" \
       > "$out/cluster_check_$ranks.log" 2>&1; then
    say "cluster_check at $ranks ranks: ok"
  else
    failed=1
    say "cluster_check at $ranks ranks: FAILED: $(grep -m3 FAILED "$out/cluster_check_$ranks.log" | tr '\n' ';')"
  fi
  sed 's/^/  /' "$out/cluster_check_$ranks.log" >> "$log"
done

# A rank of an MoE layer run stopped from outside (SIGSTOP) mid-run: the other must end the job
# within --comm-timeout (10 s), with the watchdog's message, whichever wait it is in.
stopped_rank_check() {
  local log="$out/moe_layer_stopped.log" start=$SECONDS pid="" p
  mpirun -np 2 "$build/bench/moebench_moe_layer" --backend "$backend" --scale tiny --dispatchers expert_parallel \
    --repetitions 1000 --iters 100 --comm-timeout 10 --out "$out/stopped" > "$log" 2>&1 &
  local job=$!
  sleep 8  # past start-up, inside the timed repetitions
  for p in $(pgrep -f "$build/bench/moebench_moe_layer"); do
    tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1' && pid="$p"
  done
  [ -n "$pid" ] && kill -STOP "$pid"
  ( sleep 90; kill -KILL "$job" 2>/dev/null ) &
  local guard=$!
  wait "$job"
  local status=$? took=$((SECONDS - start))
  kill "$guard" 2>/dev/null
  [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
  if [ -z "$pid" ]; then
    failed=1; say "a stopped rank of the MoE layer: FAILED: no rank 1 found to stop (see moe_layer_stopped.log)"
  elif [ "$status" != 0 ] && grep -q "did not complete within 10 s" "$log" && [ "$took" -lt 60 ]; then
    say "a stopped rank of the MoE layer: ok (the job ended $((took - 8)) s after the stop: $(grep -m1 -o 'error: .* did not complete within 10 s' "$log"))"
  else
    failed=1; say "a stopped rank of the MoE layer: FAILED: exit $status after $took s; $(grep -m1 error "$log")"
  fi
}
stopped_rank_check

if [ "$failed" = 0 ]; then say "every check passed"; else say "a check FAILED"; fi
exit "$failed"
