#!/usr/bin/env python3
"""models_projection.py RESULTS/models: projection.png from the modelled tables -- 000 Table 2's speed
ratios, Tables 1 and 3's forward shares, 001 Table 1's ratios to top-1, each modelled beside the paper's."""
import pathlib

import matplotlib.pyplot as plt

from common import nonempty_rows, num, run_main, save


def bars(ax, labels, modelled, paper, title, ylabel):
    x = range(len(labels))
    ax.bar([i - 0.2 for i in x], modelled, 0.4, label="modelled")
    ax.bar([i + 0.2 for i in x], paper, 0.4, color="tab:gray", label="paper")
    ax.set_xticks(list(x), labels, rotation=60, ha="right", fontsize=6)
    ax.set_title(title, fontsize=8)
    ax.set_ylabel(ylabel, fontsize=7)
    ax.legend(fontsize=6)


def main(folder):
    folder = pathlib.Path(folder)
    t2 = nonempty_rows(folder / "ppmoe_t2.csv")
    t1 = nonempty_rows(folder / "ppmoe_t1.csv")
    t3 = nonempty_rows(folder / "ppmoe_t3.csv")
    m6t = nonempty_rows(folder / "m6t_t1.csv")
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    bars(axes[0][0], [f"{r['model']} DP{r['dp']} TP{r['tp']} PP{r['pp']}" + ("" if r["fits_memory"] == "yes" else " (OOM)")
                      for r in t2],
         [num(r["modelled_speed_ratio"]) for r in t2], [num(r["paper_speed_ratio"]) for r in t2],
         "000 Table 2: throughput over the slowest Dense row", "speed ratio")
    cols = [r for r in t1 if r["column"] != "total_fwd"] + [r for r in t3 if r["column"] != "total_fwd"]
    bars(axes[0][1], [("T1 " if r in t1 else "T3 ") + r["column"] for r in cols], [num(r["modelled_pct"]) for r in cols],
         [num(r["paper_pct"]) for r in cols], "000 Tables 1 (DPMoE) and 3 (PPMoE): share of the forward", "% of forward")
    for ax, gate in zip(axes[1], ("paper", "ours")):
        rows = [r for r in m6t if r["gate"].startswith(gate)]
        bars(ax, [f"{r['layers']}L {r['routing']}" for r in rows], [num(r["modelled_ratio_vs_top1"]) for r in rows],
             [num(r["paper_ratio_vs_top1"]) for r in rows],
             f"001 Table 1, {'M6-T' if gate == 'paper' else 'our fused'} gate: ms/step over top-1", "ratio")
    r0 = t2[0]
    fig.suptitle(f"Modelled, not measured ({r0['link']}; {m6t[0]['link']}; commit {r0['commit']})\n"
                 f"{r0['calibration']}", fontsize=8)
    save(fig, folder / "projection.png")
    return 0


if __name__ == "__main__":
    run_main(main, "RESULTS/models")
