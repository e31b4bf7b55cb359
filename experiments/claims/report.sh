#!/usr/bin/env bash
# claims: the claim ledger and the report -- every claim of the four papers
# (experiments/reference/claims.csv) judged from the results folder: this machine's runs, the
# GPU runs under cuda/ and the models' projections under models/. Writes results/claims.csv,
# results/REPORT.md and results/claims_<paper>.png. Measures nothing, so it runs in one process
# and --scale, --backend and --ranks change nothing; run it on a cluster's results folder with
# --results DIR.
#   experiments/claims/report.sh
set -euo pipefail
# sbatch runs a copy of this script from its spool folder: run the original, beside the project.
[ -f "$(dirname "$0")/../lib.sh" ] || exec "$(scontrol show job "${SLURM_JOB_ID:?}" | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')" "$@"
source "$(dirname "$0")/../lib.sh"
moebench_parse_args --single-rank "$@"
bin="$MOEBENCH_BUILD/tools/moebench_claims"
[ -x "$bin" ] || moebench_die "$bin is not built; run scripts/build.sh"
py="$(moebench_python)" || exit 2
"$bin" --results "$MOEBENCH_RESULTS" ${EXTRA[@]+"${EXTRA[@]}"}
"$py" "$MOEBENCH_ROOT/plots/claims.py" "$MOEBENCH_RESULTS"
