#!/usr/bin/env bash
# models.project: the performance models' projections of the papers' tables (modelled, not
# measured): 000 Tables 1-3 on the 000 cluster's profile, 001 Table 1 on the 001 machine's, each
# row beside the paper's value with their ratio, and the orderings of 000 Table 2. Writes
# results/models/*.csv and projection.png. No launcher: the models run in one process; --scale,
# --backend and --ranks (the main job passes them to every script) do not change a projection.
#   experiments/models/project.sh [--ppmoe-profile NAME|CSV] [--m6t-profile NAME|CSV]
set -euo pipefail
# sbatch runs a copy of this script from its spool folder: run the original, beside the project.
[ -f "$(dirname "$0")/../lib.sh" ] || exec "$(scontrol show job "${SLURM_JOB_ID:?}" | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')" "$@"
source "$(dirname "$0")/../lib.sh"
moebench_parse_args --single-rank "$@"
bin="$MOEBENCH_BUILD/tools/moebench_project"
[ -x "$bin" ] || moebench_die "$bin is not built; run scripts/build.sh"
py="$(moebench_python)" || exit 2
"$bin" --out "$MOEBENCH_RESULTS" ${EXTRA[@]+"${EXTRA[@]}"}
"$py" "$MOEBENCH_ROOT/plots/models_projection.py" "$MOEBENCH_RESULTS/models"
