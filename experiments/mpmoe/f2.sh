#!/usr/bin/env bash
# mpmoe.f2 (003 Fig. 2): memory breakdown (model states with Adam / activations / buffers) over B,
# measured beside Eq. 1-3, the activations, temporaries and communication buffers explained tensor
# by tensor.
# Writes results/mpmoe/f2.csv and f2.png (with pm.csv where the performance model runs).
#   experiments/mpmoe/f2.sh [--scale local] [--backend cpu|cuda] [--ranks N] [bench options]
set -euo pipefail
# sbatch runs a copy of this script from its spool folder: run the original, beside the project.
[ -f "$(dirname "$0")/common.sh" ] || exec "$(scontrol show job "${SLURM_JOB_ID:?}" | sed -n 's/^ *Command=\([^ ]*\).*/\1/p')" "$@"
source "$(dirname "$0")/common.sh"
mpmoe_figure f2 "$@"
