#!/usr/bin/env python3
"""gpt/step_breakdown.csv (moebench_gpt_step) against itself and its step.csv: per model one root,
gpt.step, with share 1 and the step's FLOPs (step.csv's flops column); every path's depth its
place in the tree; under each parent the children's minima summing to no more than its maximum
and their maxima to no less than its minimum (each run's rows add up to their parent); a parent's
FLOPs, bytes and floor the sums of its children's; the achieved rate the FLOPs over the time; every
phase's floor max(FLOPs / rate, bytes / bandwidth) at one GEMM rate and one bandwidth (the
profile's), its bound the larger term, and the time over the floor its time over it; work counted
for every innermost phase but those that do none (zero_grad, the syncs); the phases the issue's
evidence needs there (attention's core forward and backward, the LayerNorms, the optimizer).

  check_step_breakdown.py STEP_BREAKDOWN_CSV STEP_CSV    exit 0 when all holds, 1 with a line per breach
"""
import csv

import checklib
from checklib import number


def close(a, b, rel=1e-5, absolute=1e-6):
    return abs(a - b) <= rel * max(abs(a), abs(b)) + absolute


def main(breakdown_path, step_path):
    breaches = []
    rows = list(csv.DictReader(open(breakdown_path, newline="")))
    step = {r["model"]: r for r in csv.DictReader(open(step_path, newline=""))}
    if not rows:
        breaches.append(f"{breakdown_path}: no rows")
    rates = {"compute": [], "memory": []}  # the GEMM rate and bandwidth each phase's floor implies
    uncounted = {"step.zero_grad", "moe.sync.bwd", "moe.gate_sync.bwd", "ffn.allreduce", "(other)"}
    for model in sorted({r["model"] for r in rows}):
        mine = {r["phase"]: r for r in rows if r["model"] == model}
        roots = [p for p in mine if "/" not in p]
        if roots != ["gpt.step"]:
            breaches.append(f"{model}: roots {roots}, want ['gpt.step']")
            continue
        root = mine["gpt.step"]
        if number(root["share_of_step"]) != 1:
            breaches.append(f"{model}: gpt.step's share is {root['share_of_step']}")
        if model in step and not close(number(root["flops"]) or 0, float(step[model]["flops"])):
            breaches.append(f"{model}: gpt.step's flops {root['flops']} are not step.csv's {step[model]['flops']}")
        for phase in ("attention.core.fwd", "attention.core.bwd", "ln.fwd", "ln.bwd", "step.optimizer"):
            found = [r for p, r in mine.items() if p.endswith("/" + phase)]
            if not found:
                breaches.append(f"{model}: no {phase} row")
            elif not (number(found[0]["min_bytes"]) or 0) > 0:
                breaches.append(f"{model}: {phase}'s min_bytes is {found[0]['min_bytes']}")
        for path, r in mine.items():
            if int(r["depth"]) != path.count("/"):
                breaches.append(f"{model} {path}: depth {r['depth']}")
            children = [c for p, c in mine.items() if p.rsplit("/", 1)[0] == path and "/" in p]
            ms, flops, achieved = number(r["ms"]), number(r["flops"]), number(r["achieved_tflops"])
            nbytes, floor, over = number(r["min_bytes"]), number(r["floor_ms"]), number(r["time_over_floor"])
            if flops is not None and ms and not close(achieved or 0, flops / (ms * 1e-3) / 1e12, 1e-2):
                breaches.append(f"{model} {path}: achieved_tflops {r['achieved_tflops']} is not its flops over its ms")
            if floor is not None and ms and not close(over or 0, ms / floor, 1e-3):
                breaches.append(f"{model} {path}: time_over_floor {r['time_over_floor']} is not its ms over floor_ms")
            if not children:
                if flops is None and r["name"] not in uncounted:
                    breaches.append(f"{model} {path}: no work counted ({r['flops']})")
                if floor is not None and r["floor_bound"] in rates:
                    bound = r["floor_bound"]
                    rates[bound].append((flops if bound == "compute" else nbytes) / (floor * 1e-3))
                continue
            if not any(c["name"] == "(other)" for c in children):
                breaches.append(f"{model} {path}: no (other) row under it")
            lo = sum(float(c["ms_min"]) for c in children)
            hi = sum(float(c["ms_max"]) for c in children)
            if lo > float(r["ms_max"]) * (1 + 1e-5) + 1e-6 or hi < float(r["ms_min"]) * (1 - 1e-5) - 1e-6:
                breaches.append(f"{model} {path}: its children sum to {lo:g}..{hi:g} ms, it took "
                                f"{r['ms_min']}..{r['ms_max']}")
            for column, value in (("flops", flops), ("min_bytes", nbytes), ("floor_ms", floor)):
                parts = [number(c[column]) for c in children if number(c[column]) is not None]
                if value is not None and parts and not close(value, sum(parts), 1e-4):
                    breaches.append(f"{model} {path}: {column} {value:g}, its children's {sum(parts):g}")
        if model in step and number(step[model].get("floor_ms")) is not None and number(root["floor_ms"]) is None:
            breaches.append(f"{model}: step.csv has a floor, the breakdown's gpt.step none ({root['floor_ms']})")
    for bound, unit in (("compute", "FLOP/s"), ("memory", "B/s")):
        if rates[bound] and max(rates[bound]) > 1.001 * min(rates[bound]):
            breaches.append(f"the {bound}-bound floors imply {min(rates[bound]):g}..{max(rates[bound]):g} {unit}, not one")
    # Each phase's floor is the larger of its two terms at those rates.
    if rates["compute"] and rates["memory"]:
        gemm, bandwidth = rates["compute"][0], rates["memory"][0]
        for r in rows:
            floor, flops, nbytes = number(r["floor_ms"]), number(r["flops"]), number(r["min_bytes"])
            if r["floor_bound"] not in ("compute", "memory") or floor is None:
                continue
            want = 1e3 * max(flops / gemm, nbytes / bandwidth)
            if not close(floor, want, 1e-3):
                breaches.append(f"{r['model']} {r['phase']}: floor_ms {floor:g} ({r['floor_bound']}), "
                                f"max(FLOPs / rate, bytes / bandwidth) is {want:g}")
    return checklib.report("check_step_breakdown", breaches)


if __name__ == "__main__":
    checklib.run(main, __doc__, 2)
