#!/usr/bin/env bash
# Installs the Debian packages moebench builds with, if any is missing. Quiet and fast when
# everything is there; a clear message and exit 1 when it cannot install (not root, no apt).
# The CUDA toolkit (nvcc, cuBLAS, NCCL, NVTX3) is not a Debian package: it is used when
# found under /usr/local/cuda (or CUDAToolkit_ROOT), and the CPU backend builds without it.
source "$(dirname "$0")/usage.sh" && moebench_help_if_asked "$@"
set -euo pipefail

packages=(cmake g++ make pkgconf libbenchmark-dev libgtest-dev libcli11-dev libfccp-dev
          libopenmpi-dev openmpi-bin libopenblas-dev python3-matplotlib python3-torch
          slurmd slurmctld slurm-client munge)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "moebench setup: installing ${missing[*]}"
if ! command -v apt-get >/dev/null 2>&1; then
  echo "moebench setup: error: apt-get not found; install these packages by hand: ${missing[*]}" >&2
  echo "  (on a GPU box without Debian packages, use scripts/gpu_box.sh instead)" >&2
  exit 1
fi
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo=(sudo -n)
  else
    echo "moebench setup: error: not root and no password-less sudo; run as root or install: ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
if ! "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/tmp/moebench-apt.log 2>&1; then
  "${sudo[@]}" apt-get update -qq >>/tmp/moebench-apt.log 2>&1 || true
  if ! "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >>/tmp/moebench-apt.log 2>&1; then
    echo "moebench setup: error: apt-get install failed (log: /tmp/moebench-apt.log):" >&2
    tail -5 /tmp/moebench-apt.log >&2
    exit 1
  fi
fi
echo "moebench setup: done"
