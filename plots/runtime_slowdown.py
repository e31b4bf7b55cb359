#!/usr/bin/env python3
"""Slowdown factors alpha(y, x) (MPMoE Fig. 3) per link, with the 0.5 line above which overlapping
pays, and the comm-GEMM overlap ratio, from results/runtime/slowdown.csv and overlap.csv."""
import pathlib
import sys

import matplotlib.pyplot as plt

from common import num, provenance_line, read_rows, save


def main(folder):
    folder = pathlib.Path(folder)
    rows = read_rows(folder / "slowdown.csv")
    overlap = {r["link_used"]: r for r in read_rows(folder / "overlap.csv")}
    links = list(dict.fromkeys(r["link_used"] for r in rows))
    fig, axes = plt.subplots(1, len(links), figsize=(6.5 * len(links), 4.6), squeeze=False, sharey=True)
    for ax, link in zip(axes[0], links):
        sub = [r for r in rows if r["link_used"] == link]
        labels = [f"{r['y']}\nbeside {r['x']}" for r in sub]
        vals = [num(r["alpha"]) for r in sub]
        low = [v - num(r["alpha_min"]) for v, r in zip(vals, sub)]
        high = [num(r["alpha_max"]) - v for v, r in zip(vals, sub)]
        colors = {"comm": "tab:blue", "comp": "tab:orange", "mem": "tab:green"}
        ax.bar(range(len(sub)), vals, color=[colors[r["y"]] for r in sub])
        ax.errorbar(range(len(sub)), vals, yerr=[low, high], fmt="none", ecolor="black", capsize=3)
        ax.axhline(0.5, color="red", ls="--", lw=1, label="0.5: below it, overlapping loses")
        ax.axhline(1.0, color="gray", lw=0.8)
        ax.set_xticks(range(len(sub)), labels, fontsize=7)
        o = overlap.get(link)
        extra = f"\ncomm + GEMM together / apart = {num(o['ratio']):.2f} (0.5 perfect, target <= 0.6)" if o else ""
        ax.set_title(f"link: {link}{extra}", fontsize=8)
        ax.set_ylabel("alpha(y, x) = time of y alone / beside x (median, min-max)")
        ax.legend(fontsize=7, loc="lower right")
    fig.suptitle("MPMoE Fig. 3 analogue: how much this machine lets operations overlap\n" + provenance_line(rows[0]),
                 fontsize=8)
    save(fig, folder / "slowdown.png")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "results/runtime"))
