#!/usr/bin/env bash
# Runs every experiment (at SCALE, default local) and draws its plots.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
for exp in comm; do
  echo "== experiment $exp"
  "$here/$exp/run.sh" "$@"
done
