#!/usr/bin/env python3
"""gpt/step_breakdown.csv (moebench_gpt_step) against itself and its step.csv: per model one root,
gpt.step, with share 1 and the step's FLOPs (step.csv's flops column); every path's depth its
place in the tree; under each parent the children's minima summing to no more than its maximum
and their maxima to no less than its minimum (each run's rows add up to their parent); a parent's
FLOPs the sum of its children's; the achieved rate the FLOPs over the time; the time over the
compute floor taking every phase's floor at one GEMM rate (the profile's); the optimizer's bytes
counted; the phases the
issue's evidence needs there (attention's core forward and backward, the optimizer).

  check_step_breakdown.py STEP_BREAKDOWN_CSV STEP_CSV    exit 0 when all holds, 1 with a line per breach
"""
import csv
import sys


def number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def close(a, b, rel=1e-5, absolute=1e-6):
    return abs(a - b) <= rel * max(abs(a), abs(b)) + absolute


def main(breakdown_path, step_path):
    breaches = []
    rows = list(csv.DictReader(open(breakdown_path, newline="")))
    step = {r["model"]: r for r in csv.DictReader(open(step_path, newline=""))}
    if not rows:
        breaches.append(f"{breakdown_path}: no rows")
    rates = []  # the GEMM rate each time_over_compute_floor implies, in TFLOP/s
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
        for phase in ("attention.core.fwd", "attention.core.bwd", "step.optimizer"):
            if not any(p.endswith("/" + phase) for p in mine):
                breaches.append(f"{model}: no {phase} row")
        optimizer = mine.get("gpt.step/step.optimizer", {})
        if not (number(optimizer.get("min_bytes")) or 0) > 0:
            breaches.append(f"{model}: the optimizer's min_bytes is {optimizer.get('min_bytes')}, not AdamW's traffic")
        for path, r in mine.items():
            if int(r["depth"]) != path.count("/"):
                breaches.append(f"{model} {path}: depth {r['depth']}")
            children = [c for p, c in mine.items() if p.rsplit("/", 1)[0] == path and "/" in p]
            ms, flops, achieved = number(r["ms"]), number(r["flops"]), number(r["achieved_tflops"])
            if flops is not None and ms and not close(achieved or 0, flops / (ms * 1e-3) / 1e12, 1e-2):
                breaches.append(f"{model} {path}: achieved_tflops {r['achieved_tflops']} is not its flops over its ms")
            over = number(r.get("time_over_compute_floor"))
            if over is not None and flops:
                rates.append(over * flops / (ms * 1e-3) / 1e12)
            if not children:
                continue
            if not any(c["name"] == "(other)" for c in children):
                breaches.append(f"{model} {path}: no (other) row under it")
            lo = sum(float(c["ms_min"]) for c in children)
            hi = sum(float(c["ms_max"]) for c in children)
            if lo > float(r["ms_max"]) * (1 + 1e-5) + 1e-6 or hi < float(r["ms_min"]) * (1 - 1e-5) - 1e-6:
                breaches.append(f"{model} {path}: its children sum to {lo:g}..{hi:g} ms, it took "
                                f"{r['ms_min']}..{r['ms_max']}")
            child_flops = [number(c["flops"]) for c in children if number(c["flops"]) is not None]
            if flops is not None and child_flops and not close(flops, sum(child_flops)):
                breaches.append(f"{model} {path}: flops {flops:g}, its children's {sum(child_flops):g}")
    if rates and max(rates) > 1.01 * min(rates):
        breaches.append(f"time_over_compute_floor implies GEMM rates {min(rates):g}..{max(rates):g} TFLOP/s, not one")
    for b in breaches:
        print(f"check_step_breakdown: {b}")
    return 1 if breaches else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2]))
