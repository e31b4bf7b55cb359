#!/usr/bin/env python3
"""ppmoe_t2.py RESULTS/ppmoe: t2.png from t2.csv -- throughput per rank of each layout (ours) beside
the paper's per GPU, and the MoE rows' speed ratio to the slowest dense row, ours and the paper's."""
import pathlib

import matplotlib.pyplot as plt

from common import nonempty_rows, num, provenance_line, run_main, save


def main(folder):
    rows = nonempty_rows(pathlib.Path(folder) / "t2.csv")
    labels = [f"{r['model']}\nDP{r['dp']} TP{r['tp']} PP{r['pp']}{' Z' if r['zero'] == 'yes' else ''}" for r in rows]
    fig, (tput, ratio) = plt.subplots(1, 2, figsize=(13, 4.2))
    x = range(len(rows))
    tput.bar([i - 0.2 for i in x], [num(r["tokens_per_s_per_rank"]) for r in rows], 0.4, label="ours (tokens/s/rank)")
    twin = tput.twinx()
    twin.bar([i + 0.2 for i in x], [num(r["paper_tokens_per_s_per_gpu"]) for r in rows], 0.4, color="tab:gray",
             label="paper (tokens/s/GPU, right axis)")
    tput.set_xticks(list(x), labels, fontsize=7)
    tput.set_ylabel("tokens / s / rank (ours)")
    twin.set_ylabel("tokens / s / GPU (paper, 32 V100)")
    tput.legend(loc="upper left", fontsize=7)
    twin.legend(loc="upper right", fontsize=7)
    moe = [r for r in rows if r["speed_ratio_vs_slowest_dense"] != "-"]
    xm = range(len(moe))
    ratio.bar([i - 0.2 for i in xm], [num(r["speed_ratio_vs_slowest_dense"].rstrip("%")) for r in moe], 0.4, label="ours")
    ratio.bar([i + 0.2 for i in xm], [num(r["paper_speed_ratio"].rstrip("%")) for r in moe], 0.4, color="tab:gray",
              label="paper")
    ratio.set_xticks(list(xm), [f"{r['model']}\nDP{r['dp']} TP{r['tp']} PP{r['pp']}" for r in moe], fontsize=7)
    ratio.set_ylabel("% of the slowest dense row's throughput")
    ratio.legend(fontsize=7)
    fig.suptitle("ppmoe.t2 (PPMoE (000) Table 2): throughput by layout\n" + provenance_line(rows[0]), fontsize=8)
    save(fig, pathlib.Path(folder) / "t2.png")
    return 0


if __name__ == "__main__":
    run_main(main, "RESULTS/ppmoe")
