#!/usr/bin/env python3
"""c_v of expert load per layer over training steps, with and without aux loss (M6-T Fig. 1), from results/m6t/cv.csv."""
import pathlib
import sys

import matplotlib.pyplot as plt

from common import num, provenance_line, read_rows, save


def main(folder):
    folder = pathlib.Path(folder)
    rows = read_rows(folder / "cv.csv")
    gammas = sorted({r["capacity_factor"] for r in rows}, key=float)
    fig, axes = plt.subplots(len(gammas), 2, figsize=(10, 3.2 * len(gammas)), squeeze=False, sharey=True)
    for gi, g in enumerate(gammas):
        for ai, aux in enumerate(["1", "0"]):
            ax = axes[gi][ai]
            sub = [r for r in rows if r["capacity_factor"] == g and r["aux_loss_on"] == aux]
            for layer in sorted({int(r["layer"]) for r in sub}):
                pts = [r for r in sub if int(r["layer"]) == layer]
                ax.plot([int(r["step"]) for r in pts], [num(r["cv"]) for r in pts], label=f"layer {layer}")
            last = max(int(r["step"]) for r in sub)
            dropped = [num(r["dropped_fraction"]) for r in sub if int(r["step"]) == last]
            ax.set_title(f"capacity factor {g}, aux loss {'on' if aux == '1' else 'off'}; "
                         f"dropped at the end {sum(dropped) / len(dropped):.2f}", fontsize=8)
            ax.set_xlabel("step")
            ax.set_ylabel("c_v of tokens per expert")
            ax.legend(fontsize=7)
    fig.suptitle("M6-T Fig. 1 analogue: load balance while training\n" + provenance_line(rows[0]), fontsize=8)
    save(fig, folder / "cv.png")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "results/m6t"))
