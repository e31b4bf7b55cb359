#!/usr/bin/env python3
"""Stacked forward/backward breakdown of one MoE layer per dispatcher, and its overhead ratio over
its own expert GEMMs against the 1.15 target, from results/moe/layer_*.csv."""
import math
import pathlib
import sys

import matplotlib.pyplot as plt

from common import num, provenance_line, read_rows, save

RANGES = ["moe.gating", "moe.dispatch", "moe.expert", "moe.combine", "moe.combine.bwd", "moe.expert.bwd",
          "moe.dispatch.bwd", "moe.gating.bwd", "moe.sync.bwd", "moe.gate_sync.bwd"]


def main(folder):
    folder = pathlib.Path(folder)
    rows = [read_rows(p)[0] for p in sorted(folder.glob("layer_*.csv"))]
    if not rows:
        print(f"plots/moe_layer.py: error: no layer_*.csv in {folder}", file=sys.stderr)
        return 1
    fig, (ax, rx) = plt.subplots(1, 2, figsize=(12, 4.5), gridspec_kw={"width_ratios": [3, 2]})
    names = [r["dispatcher"] for r in rows]
    bottom = [0.0] * len(rows)
    for rng in RANGES:
        vals = [num(r[rng + "_ms"]) for r in rows]
        ax.bar(names, vals, bottom=bottom, label=rng)
        bottom = [b + v for b, v in zip(bottom, vals)]
    totals = [num(r["total_ms"]) for r in rows]
    ax.errorbar(names, totals, yerr=[[t - num(r["total_ms_min"]) for t, r in zip(totals, rows)],
                                     [num(r["total_ms_max"]) - t for t, r in zip(totals, rows)]],
                fmt="none", ecolor="black", capsize=4, label="total: min-max")
    ax.set_ylabel("ms per forward + backward (slowest rank), medians")
    r = rows[0]
    ax.set_title(f"MoE layer h={r['hidden']} f={r['ffn']} E={r['experts']} top-{r['top_k']}, "
                 f"{r['tokens_per_rank']} tokens/rank, median of {r['repetitions']} repetitions\n" + provenance_line(r),
                 fontsize=8)
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_ylim(0, max(max(bottom), max(num(x["total_ms_max"]) for x in rows)) * 1.12)

    target = num(rows[0]["target_ratio"])
    for i, r in enumerate(rows):
        ratio = num(r["overhead_ratio"])
        if math.isnan(ratio):  # below the timer's resolution: no result to draw
            rx.text(i, 1.0, "n/a\n(" + r["overhead_status"].replace("unresolved: ", "") + ")", ha="center", va="bottom",
                    fontsize=6, wrap=True)
            continue
        rx.bar(i, ratio, color="tab:blue")
        rx.errorbar(i, ratio, yerr=[[ratio - num(r["overhead_ratio_min"])], [num(r["overhead_ratio_max"]) - ratio]],
                    fmt="none", ecolor="black", capsize=4)
        rx.text(i, num(r["overhead_ratio_max"]), f"{ratio:.2f}", ha="center", va="bottom", fontsize=8)
    rx.axhline(target, color="red", ls="--", lw=1, label=f"target <= {target:.2f}")
    rx.axhline(1.0, color="gray", lw=0.8)
    rx.set_xticks(range(len(rows)), names)
    rx.set_ylabel("layer time / its expert GEMMs alone")
    rx.set_ylim(0.9, max([target] + [num(r["overhead_ratio_max"]) for r in rows if not math.isnan(num(r["overhead_ratio_max"]))]) * 1.15)
    rx.set_title("overhead ratio: median, min-max over repetitions", fontsize=8)
    rx.legend(fontsize=7)
    save(fig, folder / "layer_breakdown.png")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "results/moe"))
