#!/usr/bin/env python3
"""The GPT step's graph column as a run asked for it: the dense row says how it stepped
(captured with its graph's node count, or eager); the MoE row too where its experts keep their
counts on the device (expert_gemm segmented), and otherwise is eager, saying why when a capture
was asked for.

  check_step_graph.py CSV captured|eager    exit 0 when all holds, 1 with a line per breach
"""
import csv
import sys


def main(path, asked):
    rows = {r["model"]: r for r in csv.DictReader(open(path, newline=""))}
    breaches = []
    dense, moe = rows.get("dense"), rows.get("moe")
    if not dense or not moe:
        return [f"{path}: a dense and an MoE row, got {sorted(rows)}"]
    if dense["step_graph"] != asked:
        breaches.append(f"{path}: dense step_graph '{dense['step_graph']}', asked for {asked}")
    for name, row in (("dense", dense), ("MoE", moe)):
        nodes = row["graph_nodes"]
        if row is moe and moe["expert_gemm"] != "segmented":
            want = ("eager (the MoE gates read their expert counts on the host; --expert-gemm segmented keeps them "
                    "on the device)") if asked == "captured" else "eager"
            if moe["step_graph"] != want or nodes != "n/a":
                breaches.append(f"{path}: MoE step_graph '{moe['step_graph']}' graph_nodes '{nodes}', want '{want}' n/a")
            continue
        if row["step_graph"] != asked:
            breaches.append(f"{path}: {name} step_graph '{row['step_graph']}', asked for {asked}")
        if asked == "captured" and not (nodes.isdigit() and int(nodes) > 0):
            breaches.append(f"{path}: {name} graph_nodes '{nodes}', not a count of nodes")
        if asked == "eager" and nodes != "n/a":
            breaches.append(f"{path}: an eager {name} step with graph_nodes '{nodes}'")
    return breaches


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[2] not in ("captured", "eager"):
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        sys.exit(2)
    found = main(sys.argv[1], sys.argv[2])
    for b in found:
        print(b)
    sys.exit(1 if found else 0)
