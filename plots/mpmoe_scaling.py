#!/usr/bin/env python3
"""MPMoE Fig. 17: throughput over node count from the runs of experiments/mpmoe/f17.sh
(RESULTS/mpmoe_scaling/N<nodes>/mpmoe/f10.csv), normalised to one node, with the share of ideal
scaling; writes OUT/f17_scaling.csv (each row ending with the provenance of its node count's run:
its nodes, hosts and link among them) and OUT/f17_scaling.png."""
import csv
import os
import pathlib
import re
import sys

import matplotlib.pyplot as plt

from common import num, provenance_line, read_rows, save

PROVENANCE = ("backend", "device", "driver", "cuda", "nccl", "ranks", "nodes", "hosts", "processors", "link", "dtype",
              "scale", "commit", "date")
WAYS = (("fastmoe", "FastMoE-style"), ("fastermoe", "FasterMoE-style"), ("pb", "MPMoE-pb"), ("pm", "MPMoE-pm"))


def main(scaling, out):
    scaling, out = pathlib.Path(scaling), pathlib.Path(out)
    runs = {}
    for d in scaling.glob("N*"):
        m = re.fullmatch(r"N(\d+)", d.name)
        if m and (d / "mpmoe" / "f10.csv").exists():
            runs[int(m.group(1))] = read_rows(d / "mpmoe" / "f10.csv")
    if 1 not in runs:
        print(f"{sys.argv[0]}: error: no one-node run in {scaling} (N1/mpmoe/f10.csv)", file=sys.stderr)
        return 1
    # Tokens per second over every rank, averaged over the layers and batches measured.
    def throughput(rows, key):
        vals = [num(r["tokens"]) * num(r["ranks"]) / (num(r[f"{key}_ms"]) / 1e3) for r in rows]
        return sum(vals) / len(vals)

    table = []
    for n in sorted(runs):
        for key, label in WAYS:
            speed = throughput(runs[n], key) / throughput(runs[1], key)
            first = runs[n][0]
            table.append({"layer": label, "throughput_over_one_node": f"{speed:.4g}",
                          "ideal": n, "share_of_ideal": f"{speed / n:.4g}",
                          "paper": "MPMoE 5.76x (72%), FasterMoE 5.4x at 8 nodes" if n == 8 else "",
                          **{k: first.get(k, "-") for k in PROVENANCE}})
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / f"f17_scaling.csv.tmp.{os.getpid()}"
    with tmp.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(table[0]))
        w.writeheader()
        w.writerows(table)
    tmp.replace(out / "f17_scaling.csv")
    fig, ax = plt.subplots(figsize=(6.5, 4))
    nodes = sorted(runs)
    for k, (key, label) in enumerate(WAYS):
        vals = [num(r["throughput_over_one_node"]) for r in table if r["layer"] == label]
        ax.bar([i + 0.2 * (k - 1.5) for i in range(len(nodes))], vals, 0.2, label=label)
    ax.plot(range(len(nodes)), nodes, "k--", lw=0.8, label="ideal")
    ax.set_xticks(range(len(nodes)), [str(n) for n in nodes])
    ax.set_xlabel("nodes")
    ax.set_ylabel("throughput / one node's")
    ax.legend(fontsize=7)
    ax.set_title("MPMoE (003) Fig. 17: multi-node scaling\n" + provenance_line(runs[max(nodes)][0]), fontsize=8)
    save(fig, out / "f17_scaling.png")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(f"usage: {sys.argv[0]} RESULTS/mpmoe_scaling RESULTS/mpmoe", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2]))
