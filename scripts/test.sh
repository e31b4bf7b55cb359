#!/usr/bin/env bash
# The test command: set-up, build, then every test (unit, MPI at 1/2/4 ranks; GPU tests are
# reported as skipped where there is no GPU).
source "$(dirname "$0")/usage.sh" && moebench_help_if_asked "$@"
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
ctest --preset default -j 2 "$@"
