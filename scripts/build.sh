#!/usr/bin/env bash
# Configures and builds with the default preset (CUDA backend too when the toolkit is found).
source "$(dirname "$0")/usage.sh" && moebench_help_if_asked "$@"
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset default >/dev/null
cmake --build --preset default -j "$(nproc)"
