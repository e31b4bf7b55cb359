#!/usr/bin/env bash
# m6t.cv (M6-T Fig. 1, Eq. 2): expert-load c_v per layer while a stack of MoE layers trains on
# a Zipf mixture of Gaussian clusters, with and without the aux loss, and the dropped share at
# capacity factors 1.25 and 2.0. Writes results/m6t/cv.csv and results/m6t/cv.png, and the
# sweep of settings that explains the result: results/m6t/cv_sweep.csv and cv_sweep.png.
set -euo pipefail
source "$(dirname "$0")/../lib.sh"
# --sweep: also the settings that explain the result (cv_sweep.csv, cv_sweep.png).
moebench_experiment --single-rank m6t moebench_m6t_cv m6t_cv.py --sweep "$@"
