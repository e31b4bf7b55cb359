#!/usr/bin/env python3
"""gpt/step_kernels.csv (moebench_gpt_step --kernels) against the same run's step_breakdown.csv:
per model kernel rows, none outside the step's ranges (every op of a step is enqueued inside
gpt.step); every phase a path of the breakdown; the ops logged under a phase and the phases
inside it taking, run for run, no more than the phase took (within what noise between two runs
allows), and so the ops and the device's idle rows together against the whole step; every
innermost phase that does work holding an op; and the ops a CPU step runs where they belong (the
LayerNorms' in ln.*, AdamW's in step.optimizer, the loss in head.fwd): the kernel log puts each op
under the range that launched it. The host's API call rows (CUDA: "(host) FUNCTION") are
neither ops nor idle: each has calls and a time of its own, under a phase or outside them all (a
phase's own API calls before it opens).

  check_step_kernels.py STEP_KERNELS_CSV STEP_BREAKDOWN_CSV    exit 0 when all holds, 1 with a line per breach
"""
import csv

import checklib
from checklib import is_host, is_idle, number

# On the CPU backend: an op each of these phases runs (the kernels' own names).
EXPECTED = {"ln.fwd": "layernorm_forward", "ln.bwd": "layernorm_backward", "step.optimizer": "adam_step",
            "head.fwd": "cross_entropy", "embed.fwd": "embedding_forward"}
# Innermost phases that enqueue no op of their own.
NO_OPS = {"(other)", "moe.sync.bwd"}


def main(kernels_path, breakdown_path):
    breaches = []
    kernels = list(csv.DictReader(open(kernels_path, newline="")))
    phases = list(csv.DictReader(open(breakdown_path, newline="")))
    if not kernels:
        breaches.append(f"{kernels_path}: no rows")
    for model in sorted({r["model"] for r in phases}):
        mine = [k for k in kernels if k["model"] == model]
        tree = {r["phase"]: r for r in phases if r["model"] == model}
        if not mine:
            breaches.append(f"{model}: no kernel rows")
            continue
        if any(number(k["ms"]) is None for k in mine):
            breaches.append(f"{model}: a row without a time: {next(k for k in mine if number(k['ms']) is None)}")
            continue
        for k in mine:
            if k["phase"] not in tree and not (is_host(k["kernel"]) and k["phase"] == "(outside ranges)"):
                breaches.append(f"{model}: {k['kernel']} under '{k['phase']}', no phase of the breakdown")
            if not (number(k["calls_per_step"]) or 0) > 0:
                breaches.append(f"{model} {k['phase']} {k['kernel']}: calls_per_step {k['calls_per_step']}")
        parents = {p.rsplit("/", 1)[0] for p in tree if "/" in p}
        roots = [r for p, r in tree.items() if "/" not in p]
        # A gap is the device's time between ops, so with them no more than a step's; the logged
        # steps launch slower than the measured ones (CUPTI's callback on every API call), so
        # their idle is longer. Idle counted twice still exceeds this.
        mine = [k for k in mine if not is_host(k["kernel"])]
        spanned = sum(float(k["ms_min"]) for k in mine)
        if len(roots) == 1 and spanned > float(roots[0]["ms_max"]) * 2 + 0.05:
            breaches.append(f"{model}: its ops and idle rows took at least {spanned:g} ms, "
                            f"the step at most {roots[0]['ms_max']}")
        mine = [k for k in mine if not is_idle(k["kernel"])]
        for path, r in tree.items():
            inside = [k for k in mine if k["phase"] == path or k["phase"].startswith(path + "/")]
            least = sum(float(k["ms_min"]) for k in inside)
            # The log's steps and the measured ones are different runs: on a shared CPU a short
            # phase's ops were once 1.4x its slowest measured time. Ops counted twice, or summed
            # over the steps instead of per step, still exceed this.
            if least > float(r["ms_max"]) * 1.5 + 0.05:
                breaches.append(f"{model} {path}: its ops took at least {least:g} ms, the phase at most {r['ms_max']}")
            if path not in parents and r["name"] not in NO_OPS and not inside:
                breaches.append(f"{model} {path}: no op logged under it")
            want = EXPECTED.get(r["name"])
            if want and mine[0].get("backend") == "cpu" and not any(k["kernel"] == want for k in inside):
                breaches.append(f"{model} {path}: no {want} among its ops {sorted({k['kernel'] for k in inside})}")
    return checklib.report("check_step_kernels", breaches)


if __name__ == "__main__":
    checklib.run(main, __doc__, 2)
