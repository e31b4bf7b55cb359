#!/usr/bin/env python3
"""ppmoe_breakdown.py RESULTS/ppmoe: t1_t3.png from t1.csv (DPMoE) and t3.csv (PPMoE) -- each part's
share of the forward step, ours beside the paper's."""
import pathlib
import sys

import matplotlib.pyplot as plt

from common import num, provenance_line, read_rows, run_main, save


def parts(row):
    return [c[: -len("_percent")] for c in row if c.endswith("_percent") and not c.endswith("_paper_percent")]


def main(folder):
    folder = pathlib.Path(folder)
    tables = [(name, read_rows(folder / f"{name}.csv")) for name in ("t1", "t3") if (folder / f"{name}.csv").exists()]
    tables = [(n, rows) for n, rows in tables if rows]
    if not tables:
        print(f"{sys.argv[0]}: error: no t1.csv or t3.csv in {folder} (run experiments/ppmoe/breakdown.sh)", file=sys.stderr)
        return 1
    fig, axes = plt.subplots(1, len(tables), figsize=(6.5 * len(tables), 4.2), squeeze=False)
    for ax, (name, rows) in zip(axes[0], tables):
        row = rows[0]
        names = [p for p in parts(row) if p != "total_fwd"]
        x = range(len(names))
        ax.bar([i - 0.2 for i in x], [num(row[f"{p}_percent"]) for p in names], 0.4, label="ours")
        ax.bar([i + 0.2 for i in x], [num(row[f"{p}_paper_percent"]) for p in names], 0.4, color="tab:gray", label="paper")
        ax.set_xticks(list(x), [p.replace("_", "\n") for p in names], fontsize=7)
        ax.set_ylabel("% of the forward step")
        title = "PPMoE (000) Table 1: DPMoE" if name == "t1" else "PPMoE (000) Table 3: PPMoE"
        ax.set_title(f"{title} ({row['layout']}; forward {num(row['total_fwd_ms']):.1f} ms)", fontsize=9)
        ax.legend(fontsize=7)
    fig.suptitle("ppmoe.t1 / t3: parts of a forward step\n" + provenance_line(tables[0][1][0]), fontsize=8)
    save(fig, folder / "t1_t3.png")
    return 0


if __name__ == "__main__":
    run_main(main, "RESULTS/ppmoe")
