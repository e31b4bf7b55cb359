#!/usr/bin/env python3
"""The GPT step's graph column as a run asked for it: the dense row says how it stepped
(captured with its graph's node count, or eager) and the MoE row is eager, saying why when a
capture was asked for.

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
    nodes = dense["graph_nodes"]
    if asked == "captured" and not (nodes.isdigit() and int(nodes) > 0):
        breaches.append(f"{path}: dense graph_nodes '{nodes}', not a count of nodes")
    if asked == "eager" and nodes != "n/a":
        breaches.append(f"{path}: an eager dense step with graph_nodes '{nodes}'")
    want_moe = "eager (the MoE gates read their expert counts on the host)" if asked == "captured" else "eager"
    if moe["step_graph"] != want_moe or moe["graph_nodes"] != "n/a":
        breaches.append(f"{path}: MoE step_graph '{moe['step_graph']}' graph_nodes '{moe['graph_nodes']}', want '{want_moe}' n/a")
    return breaches


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[2] not in ("captured", "eager"):
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        sys.exit(2)
    found = main(sys.argv[1], sys.argv[2])
    for b in found:
        print(b)
    sys.exit(1 if found else 0)
