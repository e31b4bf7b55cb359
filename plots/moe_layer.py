#!/usr/bin/env python3
"""Stacked forward/backward breakdown of one MoE layer per dispatcher, from results/moe/layer_*.csv."""
import pathlib
import sys

import matplotlib.pyplot as plt

from common import num, provenance_line, read_rows, save

RANGES = ["moe.gating", "moe.dispatch", "moe.expert", "moe.combine", "moe.combine.bwd", "moe.expert.bwd",
          "moe.dispatch.bwd", "moe.gating.bwd", "moe.sync.bwd"]


def main(folder):
    folder = pathlib.Path(folder)
    rows = [read_rows(p)[0] for p in sorted(folder.glob("layer_*.csv"))]
    if not rows:
        print(f"plots/moe_layer.py: error: no layer_*.csv in {folder}", file=sys.stderr)
        return 1
    fig, ax = plt.subplots(figsize=(9.5, 4.5))
    names = [r["dispatcher"] for r in rows]
    bottom = [0.0] * len(rows)
    for rng in RANGES:
        vals = [num(r[rng + "_ms"]) for r in rows]
        ax.bar(names, vals, bottom=bottom, label=rng)
        bottom = [b + v for b, v in zip(bottom, vals)]
    for i, r in enumerate(rows):
        ax.text(i, bottom[i], f"x{num(r['overhead_ratio']):.2f} of GEMMs", ha="center", va="bottom", fontsize=8)
    ax.set_ylabel("ms per forward + backward (slowest rank)")
    r = rows[0]
    ax.set_title(f"MoE layer h={r['hidden']} f={r['ffn']} E={r['experts']} top-{r['top_k']}, "
                 f"{r['tokens_per_rank']} tokens/rank\n" + provenance_line(r), fontsize=8)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_ylim(0, max(bottom) * 1.12)
    save(fig, folder / "layer_breakdown.png")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "results/moe"))
