#!/usr/bin/env bash
# Runs a command as on a GPU image that has no Open MPI of its own, to show that what
# scripts/gpu_box.sh carries in .deps (Debian's Open MPI and PMIx, unpacked into its prefix)
# stands alone: in a mount namespace of its own, every file of this machine's Open MPI and PMIx
# packages is covered by an empty file (a library there no longer loads, a program there no longer
# runs), then the command runs. Nothing outside the namespace changes.
#   scripts/without_system_mpi.sh CMD [ARGS...]
# e.g. scripts/without_system_mpi.sh scripts/gpu_box.sh multirank --backend cpu
# Exit: the command's; 2 for no command; 77 where this is not root or the kernel refuses a mount
# namespace.
source "$(dirname "$0")/usage.sh" && moebench_help_if_asked "$@"
set -uo pipefail
[ $# -ge 1 ] || { echo "without_system_mpi.sh: error: no command; usage: $0 CMD [ARGS...]" >&2; exit 2; }
if [ "${MOEBENCH_SYSTEM_MPI_HIDDEN:-}" != 1 ]; then
  [ "$(id -u)" = 0 ] || { echo "without_system_mpi.sh: skipped: a mount namespace needs root"; exit 77; }
  why="$(unshare --mount --propagation private true 2>&1)" ||
    { echo "without_system_mpi.sh: skipped: the kernel refuses a mount namespace: $why"; exit 77; }
  exec unshare --mount --propagation private env MOEBENCH_SYSTEM_MPI_HIDDEN=1 bash "$0" "$@"
fi
packages=()
while read -r p; do packages+=("$p"); done < <(dpkg-query -W -f '${Package} ${Status}\n' 2>/dev/null |
  awk '$NF == "installed" && $1 ~ /^(libopenmpi|openmpi-|libpmix|mpi-default-)/ { print $1 }')
empty="$(mktemp)"
hidden=0
if [ ${#packages[@]} -gt 0 ]; then
  while read -r f; do
    if [ -f "$f" ] && [ ! -L "$f" ]; then
      mount --bind "$empty" "$f" || { echo "without_system_mpi.sh: error: cannot cover $f" >&2; exit 1; }
      hidden=$((hidden + 1))
    fi
  done < <(dpkg -L "${packages[@]}" 2>/dev/null | sort -u)
fi
echo "without_system_mpi.sh: ${hidden} files of ${packages[*]:-no Open MPI or PMIx package} covered; running $*"
exec "$@"
