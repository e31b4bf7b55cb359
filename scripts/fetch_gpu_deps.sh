#!/usr/bin/env bash
# Run HERE (a Debian machine with apt): downloads the .deb files a GPU box needs to build
# moebench without Debian packages or network, into .deps/debs (git-ignored). Carry .deps to
# the GPU box and run scripts/gpu_box.sh there. MPI is left out: the GPU-box build is a
# single-process (world size 1) build; multi-rank logic is tested on CPU ranks here.
source "$(dirname "$0")/usage.sh" && moebench_help_if_asked "$@"
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(libbenchmark-dev libbenchmark1debian libgtest-dev libcli11-dev libfccp-dev
          libopenblas-dev libopenblas-pthread-dev libopenblas0-pthread libgfortran5 libquadmath0)
mkdir -p .deps/debs
cd .deps/debs
if ! apt-get download "${packages[@]}" >/dev/null 2>../download.log; then
  apt-get update -qq >/dev/null 2>&1 || true
  apt-get download "${packages[@]}" >/dev/null 2>../download.log || { cat ../download.log >&2; exit 1; }
fi
ls -1 *.deb | sed 's/^/  /'
echo "fetched ${#packages[@]} packages into .deps/debs ($(du -sh . | cut -f1))"
