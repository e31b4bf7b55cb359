#!/usr/bin/env python3
"""check_gpu_targets.py TARGETS_DIR: scripts/gpu_targets.sh ran every case and judged every target.
A CPU run is never judged against the H100 limits (met or missed): its verdicts say why not.
PyTorch's reference was measured once for the cases that share its work: their copies are equal.
Every judged figure says where its time went. cases.tsv gives every case its exit status and the
seconds it took; a CUDA-only case on the CPU is listed as such."""
import csv
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "scripts"))
from gpu_targets import TARGETS  # noqa: E402

CASES = ([f"moe-top1-{r}" for r in ("grouped", "padded", "streams", "serial", "segmented")] +
         [f"moe-8x-top2-{r}" for r in ("grouped", "padded", "streams", "serial", "segmented")] +
         [f"moe-top1-{r}-{p}" for p in ("zipf", "hot") for r in ("grouped", "padded")] +
         ["gpt-blocked", "gpt-materialized", "gpt-blocked-eager", "gpt-moe-segmented"])
CUDA_ONLY = ["moe-top1-padded-gate-separate"]


def main():
    folder = pathlib.Path(sys.argv[1])
    rows = list(csv.DictReader((folder / "targets.csv").open(newline="")))
    problems = []
    judged = {r["target"]: r for r in rows if not r["target"].startswith("case: ")}
    for t in TARGETS:
        r = judged.get(t[0])
        if r is None:
            problems.append(f"target '{t[0]}' has no row")
        elif r["verdict"].startswith(("met", "missed", "not run")):  # "met on <GPU> (...)" too
            problems.append(f"target '{t[0]}': verdict '{r['verdict']}' on a {r['backend']} {r['scale']} run")
    # Each judged figure says where its time went: a layer's moe.* ranges, a step's phases.
    for r in judged.values():
        where = r.get("where_the_time_goes", "")
        part = "moe." if r["target"].startswith("MoE layer") else "model."
        if r["case"] != "none" and (" ms (" not in where or part not in where):
            problems.append(f"target '{r['target']}': where the time goes is '{where}', naming no {part}* part")
    # A CUDA-only case on the CPU is listed, and said to be CUDA's; on CUDA it runs like the rest.
    cpu = {r["backend"] for r in judged.values() if r.get("backend")} == {"cpu"}
    skipped = {r["case"]: r["verdict"] for r in rows if r["target"] == "case: not run"}
    for c in CUDA_ONLY:
        if cpu and not skipped.pop(c, "").startswith("not run: cuda only"):
            problems.append(f"case {c}: not listed as cuda only on a cpu run")
    problems += [f"case {c} {v}" for c, v in skipped.items()]
    problems += [f"case {r['case']} {r['verdict']}" for r in rows if r["target"] == "case: failed"]
    cases = {r["case"] for r in rows if r["target"].startswith("case: ") and r["target"] not in ("case: failed", "case: not run")}
    problems += [f"case {c} left no row" for c in CASES if c not in cases]
    for c, want in (("gpt-blocked", "blocked"), ("gpt-materialized", "materialized")):
        got = {r["how"].removesuffix(", graph").removesuffix(", grouped experts") for r in rows if r["case"] == c}
        if got != {want}:
            problems.append(f"case {c} ran attention {sorted(got)}, not {want}")
    got = {r["how"].removesuffix(", grouped experts") for r in rows if r["case"] == "gpt-blocked-eager"}
    if got != {"blocked"}:
        problems.append(f"case gpt-blocked-eager ran {sorted(got)}, not blocked attention without a graph")
    moe_step = {r["how"] for r in rows if r["case"] == "gpt-moe-segmented" and "experts" in r["how"]}
    if moe_step != {"blocked, segmented experts"}:  # the CPU run is eager by default
        problems.append(f"case gpt-moe-segmented ran its MoE step as {sorted(moe_step)}, not with segmented experts")
    for c in ("grouped", "padded", "streams", "serial", "segmented"):
        got = {r["how"] for r in rows if r["case"] == f"moe-top1-{c}"}
        if got != {c}:
            problems.append(f"case moe-top1-{c} ran expert GEMMs {sorted(got)}, not {c}")
    for shared in (["gpt-blocked", "gpt-materialized", "gpt-blocked-eager"],
                   [f"moe-top1-{r}" for r in ("grouped", "padded", "streams", "serial")]):
        torch_csv = "gpt/torch_step.csv" if shared[0].startswith("gpt") else "moe/torch_layer.csv"
        copies = {(folder / c / torch_csv).read_bytes() if (folder / c / torch_csv).is_file() else b"" for c in shared}
        if copies == {b""}:
            continue  # no PyTorch here: no reference anywhere
        if len(copies) != 1:
            problems.append(f"cases {', '.join(shared)}: {torch_csv} measured more than once, or missing in some")
    with (folder / "cases.tsv").open(newline="") as f:
        listed = list(csv.DictReader(f, delimiter="\t"))
    problems += [f"cases.tsv: case {c['case']}: exit '{c['exit']}', seconds '{c.get('seconds')}', not 0 and a whole number"
                 for c in listed if (c["exit"] != "0" or not (c.get("seconds") or "").isdigit())
                 and not (cpu and c["case"] in CUDA_ONLY and c["log"] == "cuda only")]
    problems += [f"cases.tsv lists no case {c}" for c in CUDA_ONLY if c not in {row["case"] for row in listed}]
    problems += [f"cases.tsv lists no case {c}" for c in CASES if c not in {row["case"] for row in listed}]
    for p in problems:
        print(f"check_gpu_targets: {p}")
    print(f"check_gpu_targets: {len(rows)} rows, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
