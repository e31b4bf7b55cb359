#!/usr/bin/env bash
# Run HERE (a Debian machine with apt): downloads the .deb files a GPU box needs to build
# moebench without Debian packages or network, into .deps/debs (git-ignored). Carry .deps to
# the GPU box and run scripts/gpu_box.sh there. Debian's Open MPI and what its components load
# come too, apart in .deps/mpi-debs, for scripts/gpu_box.sh multirank (relocated with OPAL_PREFIX);
# the other steps build without MPI, or with the MPI a cluster's module gives.
source "$(dirname "$0")/usage.sh" && moebench_help_if_asked "$@"
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(libbenchmark-dev libbenchmark1debian libgtest-dev libcli11-dev libfccp-dev
          libopenblas-dev libopenblas-pthread-dev libopenblas0-pthread libgfortran5 libquadmath0)
mpi_packages=(openmpi-bin openmpi-common libopenmpi3 libopenmpi-dev libpmix2 libpmix-dev libevent-core-2.1-7
          libevent-pthreads-2.1-7 libevent-2.1-7 libevent-extra-2.1-7 libevent-openssl-2.1-7 libevent-dev
          libhwloc15 libhwloc-dev libfabric1 libibverbs1 ibverbs-providers libmunge2 libnl-3-200
          libnl-route-3-200 libnuma1 libpsm-infinipath1 libpsm2-2 librdmacm1 libucx0 libatomic1)
download() {  # FOLDER PACKAGE...
  local folder="$1"; shift
  mkdir -p "$folder"
  (cd "$folder" && rm -f ./*.deb &&
   if ! apt-get download "$@" >/dev/null 2>"$OLDPWD/.deps/download.log"; then
     apt-get update -qq >/dev/null 2>&1 || true
     apt-get download "$@" >/dev/null 2>"$OLDPWD/.deps/download.log" || { cat "$OLDPWD/.deps/download.log" >&2; exit 1; }
   fi) || exit 1
  echo "fetched $# packages into $folder ($(du -sh "$folder" | cut -f1))"
}
mkdir -p .deps
download .deps/debs "${packages[@]}"
download .deps/mpi-debs "${mpi_packages[@]}"
