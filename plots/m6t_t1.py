#!/usr/bin/env python3
"""m6t_t1.py RESULTS/m6t: t1.png from t1.csv -- each routing's ms/step as a multiple of top-1's at the
same depth, with the paper's gate and with ours, beside M6-T Table 1's."""
import pathlib

import matplotlib.pyplot as plt

from common import nonempty_rows, num, provenance_line, run_main, save


def main(folder):
    rows = nonempty_rows(pathlib.Path(folder) / "t1.csv")
    depths = sorted({int(r["layers"]) for r in rows})
    fig, axes = plt.subplots(1, len(depths), figsize=(5.5 * len(depths), 4), squeeze=False)
    for ax, depth in zip(axes[0], depths):
        mine = [r for r in rows if int(r["layers"]) == depth]
        routings = list(dict.fromkeys(r["routing"] for r in mine))
        gates = list(dict.fromkeys(r["gate"] for r in mine))
        width = 0.8 / (len(gates) + 1)
        x = range(len(routings))
        for g, gate in enumerate(gates):
            by_routing = {r["routing"]: r for r in mine if r["gate"] == gate}
            offset = (g - len(gates) / 2) * width
            label = "M6-T's gate (looped arg-max)" if gate.startswith("paper") else "our fused gate"
            ratios = [num(by_routing[n]["ratio_vs_top1"]) if n in by_routing else 0 for n in routings]
            ax.bar([i + offset for i in x], ratios, width, label=label)
            for i, n in enumerate(routings):
                if n in by_routing:
                    ax.annotate(f"{num(by_routing[n]['ms_per_step']):.0f}", (i + offset, ratios[i]), ha="center",
                                va="bottom", fontsize=6)
        paper = {r["routing"]: num(r["paper_ratio_vs_top1"]) for r in mine}
        ax.bar([i + (len(gates) / 2) * width for i in x], [paper[n] for n in routings], width, color="tab:gray",
               label="M6-T Table 1")
        ax.set_xticks(list(x), routings)
        ax.set_ylabel("ms/step over top-1's (labels: ms/step)")
        ax.set_title(f"{depth} layers", fontsize=9)
        ax.legend(fontsize=7)
    fig.suptitle("m6t.t1 (M6-T (001) Table 1): training speed by routing\n" + provenance_line(rows[0]), fontsize=8)
    save(fig, pathlib.Path(folder) / "t1.png")
    return 0


if __name__ == "__main__":
    run_main(main, "RESULTS/m6t")
