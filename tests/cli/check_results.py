#!/usr/bin/env python3
"""The committed results, checked as a reader would trust them:
 - every CSV names each column once and ends its rows with the provenance columns (backend,
   device, driver, cuda, nccl, ranks, nodes, hosts, processors, link, dtype, scale, commit, date);
   the few written by other tools say so below, with what they carry instead, and the GPU runs'
   CSVs under cuda/ from before the rows named their nodes end without nodes and hosts (and
   processors), those from before the rows said their processors without processors, as do the
   Python scripts' CSVs (PyTorch's, the two-node setting) from before they wrote it;
 - no CSV holds rows of two scales, backends or devices;
 - every CSV outside cuda/ names a commit a reader can check out: none ends in "-dirty" (a run of
   code not yet committed); commit the code, then run. The GPU leases under cuda/ are let be:
   the device's copy of the repository keeps the session's first commit, so their label says
   "-dirty" for a committed tree too (each lease's provenance.md says which tree it ran);
 - a figure given with its range (columns X, X_min, X_max) lies within it in every row;
 - every number in a column named for the paper ("paper_*", "*_paper_*") is one of the papers'
   values in experiments/reference/values.csv, as a value, a fraction of a percentage, or a
   ratio of two values of one paper (within 0.5%: the CSVs round to 3-6 digits);
 - every CSV results/claims.csv cites is there, and every claim's paper value in
   models/sensitivity.csv is the ledger's.

  check_results.py SOURCE_DIR     exit 0 when all holds, 1 with a line per breach
"""
import csv
import itertools
import pathlib
import re

import checklib

PROVENANCE = ["backend", "device", "driver", "cuda", "nccl", "ranks", "nodes", "hosts", "processors", "link", "dtype",
              "scale", "commit", "date"]
# The GPU runs' CSVs from before the rows named their nodes (one node, the lease's machine), and
# from before they said their processors (a GPU each).
PROVENANCE_BEFORE_NODES = [c for c in PROVENANCE if c not in ("nodes", "hosts", "processors")]
PROVENANCE_BEFORE_PROCESSORS = [c for c in PROVENANCE if c != "processors"]
# CSVs another tool writes: what they carry in place of the suite's provenance.
OTHER_PROVENANCE = {
    "claims.csv": "the ledger: each number names its CSVs and their provenance",
    "claims_stability.csv": "two ledgers compared (moebench_claims_stability): each row says what the two runs were",
    "runtime/before_after.csv": "two builds side by side: before_commit, after_commit, date",
    "targets/targets.csv": "the GPU targets' verdicts (scripts/gpu_targets.py): device, scale, backend, dtype, commit and source CSV per row",
}

LEGACY_TORCH = {"gpt/torch_step.csv", "moe/torch_layer.csv"}
LEGACY_TORCH_END = ["torch", "torch_device", "math", "date"]


def number(cell):
    cell = cell.strip().rstrip("%").strip()
    if not re.fullmatch(r"-?[0-9.]+(e[-+]?[0-9]+)?", cell):
        return None
    try:
        return float(cell)
    except ValueError:
        return None


def paper_numbers(source):
    by_paper = {}
    for r in csv.DictReader(open(source / "experiments/reference/values.csv", newline="")):
        by_paper.setdefault(r["paper"], []).append(float(r["value"]))
    allowed = set()
    for values in by_paper.values():
        for v in values:
            allowed.update({v, v / 100})
        for a, b in itertools.permutations(values, 2):
            if b:
                allowed.add(a / b)
    return sorted(allowed)


def close_to_any(x, allowed):
    return any(abs(x - v) <= 0.005 * max(abs(v), 1e-12) for v in allowed)


def main(source):
    source = pathlib.Path(source).resolve()
    results = source / "results"
    allowed = paper_numbers(source)
    breaches = []
    files = sorted(results.rglob("*.csv"))
    for path in files:
        rel = path.relative_to(results).as_posix()
        with path.open(newline="") as f:
            rows = list(csv.reader(f))
        if not rows:
            breaches.append(f"{rel}: empty")
            continue
        header, body = rows[0], rows[1:]
        repeated = sorted({c for c in header if header.count(c) > 1})
        if repeated:
            breaches.append(f"{rel}: columns named twice: {', '.join(repeated)}")
        key = rel.split("/", 1)[1] if rel.startswith("cuda/") else rel
        key = re.sub(r"^lease_[^/]+/", "", key)  # a lease's folder keeps its files as they came
        case = re.fullmatch(r"targets/[^/]+/(.+)", key)  # a GPU target case's folder holds a results tree
        key = case.group(1) if case else key
        # PyTorch's CSVs from the GPU runs before they carried the suite's provenance: their rows
        # end with what PyTorch's scripts wrote then, and the run's provenance.md says the rest.
        legacy_torch = rel.startswith("cuda/") and key in LEGACY_TORCH and header[-4:] == LEGACY_TORCH_END
        before_nodes = rel.startswith("cuda/") and any(header[-len(p):] == p for p in (PROVENANCE_BEFORE_NODES,
                                                                                       PROVENANCE_BEFORE_PROCESSORS))
        if header[-len(PROVENANCE):] != PROVENANCE and key not in OTHER_PROVENANCE and not legacy_torch and not before_nodes:
            breaches.append(f"{rel}: its rows do not end with the provenance columns ({', '.join(PROVENANCE)})")
        for k in ("scale", "backend", "device"):
            if k in header:
                i = header.index(k)
                kinds = {r[i] for r in body if len(r) == len(header) and r[i]}  # empty: a row with no run
                if len(kinds) > 1:
                    breaches.append(f"{rel}: rows of {len(kinds)} {k}s ({', '.join(sorted(kinds))})")
        if "commit" in header and not rel.startswith("cuda/"):
            i = header.index("commit")
            dirty = sorted({r[i] for r in body if len(r) == len(header) and r[i].endswith("-dirty")})
            if dirty:
                breaches.append(f"{rel}: written by code that was not committed ({', '.join(dirty)}): "
                                "commit the code, then run the experiment again")
        for column in header:
            if column + "_min" in header and column + "_max" in header:
                at = [header.index(c) for c in (column + "_min", column, column + "_max")]
                for n, r in enumerate(body, start=2):
                    low, x, high = (number(r[i]) if i < len(r) else None for i in at)
                    if None not in (low, x, high) and not low <= x <= high:
                        breaches.append(f"{rel}:{n}: {column} = {x} lies outside its range [{low}, {high}]")
        for i, column in enumerate(header):
            if not (column.startswith("paper_") or "_paper_" in column or column == "paper"):
                continue
            if rel == "models/sensitivity.csv" and column == "paper":
                continue  # a claim's paper value, held against the ledger's below
            for n, r in enumerate(body, start=2):
                x = number(r[i]) if i < len(r) else None
                if x is not None and not close_to_any(x, allowed):
                    breaches.append(f"{rel}:{n}: {column} = {r[i]} is none of the papers' values "
                                    "(experiments/reference/values.csv)")
    ledger = results / "claims.csv"
    if ledger.exists():
        claim_paper = {r["claim"]: r["paper_value"] for r in csv.DictReader(ledger.open(newline=""))}
        sensitivity = results / "models/sensitivity.csv"
        for n, r in enumerate(csv.DictReader(sensitivity.open(newline="")) if sensitivity.exists() else [], start=2):
            want = number(claim_paper.get(r["claim"], "-"))
            if want is None or abs(float(r["paper"]) - want) > 0.005 * max(abs(want), 1e-12):
                breaches.append(f"models/sensitivity.csv:{n}: {r['claim']}: paper = {r['paper']}, the ledger's "
                                f"{claim_paper.get(r['claim'], 'has no such claim')}")
        for r in csv.DictReader(ledger.open(newline="")):
            for setting, prefix in (("local_csv", ""), ("gpu_csv", "cuda/"), ("model_csv", "")):
                for f in r.get(setting, "-").split():
                    if f != "-" and not (results / (prefix + f)).exists():
                        breaches.append(f"claims.csv: {r['claim']}: cites {prefix + f}, which is not there")
    else:
        breaches.append("claims.csv: not there (experiments/claims/report.sh writes it)")
    return checklib.report("check_results", breaches, f"{len(files)} CSVs")


if __name__ == "__main__":
    checklib.run(main, __doc__, 1)
