#!/usr/bin/env python3
"""m6t_t1.py RESULTS/m6t: t1.png from t1.csv -- each routing's ms/step as a multiple of top-1's at the
same depth, ours beside M6-T Table 1's."""
import pathlib

import matplotlib.pyplot as plt

from common import nonempty_rows, num, provenance_line, run_main, save


def main(folder):
    rows = nonempty_rows(pathlib.Path(folder) / "t1.csv")
    depths = sorted({int(r["layers"]) for r in rows})
    fig, axes = plt.subplots(1, len(depths), figsize=(5.5 * len(depths), 4), squeeze=False)
    for ax, depth in zip(axes[0], depths):
        mine = [r for r in rows if int(r["layers"]) == depth]
        x = range(len(mine))
        ax.bar([i - 0.2 for i in x], [num(r["ratio_vs_top1"]) for r in mine], 0.4, label="ours")
        ax.bar([i + 0.2 for i in x], [num(r["paper_ratio_vs_top1"]) for r in mine], 0.4, color="tab:gray", label="M6-T")
        for i, r in enumerate(mine):
            ax.annotate(f"{num(r['ms_per_step']):.0f} ms", (i - 0.2, num(r["ratio_vs_top1"])), ha="center", va="bottom",
                        fontsize=7)
        ax.set_xticks(list(x), [r["routing"] for r in mine])
        ax.set_ylabel("ms/step over top-1's")
        ax.set_title(f"{depth} layers", fontsize=9)
        ax.legend(fontsize=7)
    fig.suptitle("m6t.t1 (M6-T Table 1): training speed by routing\n" + provenance_line(rows[0]), fontsize=8)
    save(fig, pathlib.Path(folder) / "t1.png")
    return 0


if __name__ == "__main__":
    run_main(main, "RESULTS/m6t")
