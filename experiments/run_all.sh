#!/usr/bin/env bash
# Runs every experiment (at SCALE, default local) and draws its plots.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
for exp in comm/run comm/emulated runtime/slowdown moe/run ppmoe/serial m6t/gating m6t/cv mpmoe/run pipe/bubble ppmoe/t2 ppmoe/breakdown m6t/t1 gpt/step models/profile models/project; do
  echo "== experiment $exp"
  "$here/$exp.sh" "$@"
done
