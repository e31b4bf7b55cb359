#!/usr/bin/env python3
"""Layer and gate-kernel time relative to top-1, with M6-T Table 1's ms/step ratios overlaid (results/m6t/gating.csv)."""
import math
import pathlib
import sys

import matplotlib.pyplot as plt

from common import num, provenance_line, read_rows, save


def main(folder):
    folder = pathlib.Path(folder)
    rows = read_rows(folder / "gating.csv")
    sizes = sorted({r["size"] for r in rows})
    fig, axes = plt.subplots(1, len(sizes), figsize=(6 * len(sizes), 4.5), squeeze=False)
    for ax, size in zip(axes[0], sizes):
        sub = [r for r in rows if r["size"] == size]
        names = [r["routing"] for r in sub]
        x = range(len(sub))
        ax.bar([i - 0.27 for i in x], [num(r["layer_vs_top1"]) for r in sub], width=0.27, label="layer fwd+bwd (measured)")
        ax.bar(list(x), [num(r["gate_kernel_vs_top1"]) for r in sub], width=0.27, label="gate kernel (measured)")
        paper = [num(r["paper_3layer_vs_top1"]) for r in sub]
        ax.bar([i + 0.27 for i in x], paper, width=0.27, label="M6-T Table 1, 3-layer ms/step")
        for i, v in zip(x, paper):
            if math.isnan(v):  # the paper has no column for this routing
                ax.text(i + 0.27, 0.02, "n/a", ha="center", va="bottom", fontsize=7, rotation=90, color="gray")
        ax.set_xticks(list(x), names)
        ax.set_ylabel("time relative to top-1 (medians; n/a: not in the paper)")
        r = sub[0]
        ax.set_title(f"{size}: h={r['hidden']} f={r['ffn']} E={r['experts']} T={r['tokens']}\n" + provenance_line(r),
                     fontsize=8)
        ax.legend(fontsize=7)
    save(fig, folder / "gating.png")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "results/m6t"))
