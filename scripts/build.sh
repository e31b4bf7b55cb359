#!/usr/bin/env bash
# Configures and builds with the default preset (CUDA backend too when the toolkit is found).
#   scripts/build.sh [TARGET...]   (default: everything, the tests too; moebench_experiments:
#                                   the programs the main job runs)
source "$(dirname "$0")/usage.sh" && moebench_help_if_asked "$@"
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset default >/dev/null
cmake --build --preset default -j "$(nproc)" ${1:+--target "$@"}
