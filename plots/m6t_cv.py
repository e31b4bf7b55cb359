#!/usr/bin/env python3
"""c_v of expert load per layer over training steps, with and without aux loss (M6-T Fig. 1), from
results/m6t/cv.csv into cv.png; and, when results/m6t/cv_sweep.csv exists, the settings that explain
the result into cv_sweep.png."""
import pathlib
import sys

import matplotlib.pyplot as plt

from common import num, provenance_line, read_rows, save


def plot_trajectories(folder, rows):
    gammas = sorted({r["capacity_factor"] for r in rows}, key=float)
    paper = num(rows[0]["paper_cv_with_aux_plateau"])
    fig, axes = plt.subplots(len(gammas), 2, figsize=(10, 3.2 * len(gammas) + 0.8), squeeze=False, sharey=True)
    for gi, g in enumerate(gammas):
        for ai, aux in enumerate(["1", "0"]):
            ax = axes[gi][ai]
            sub = [r for r in rows if r["capacity_factor"] == g and r["aux_loss_on"] == aux]
            for layer in sorted({int(r["layer"]) for r in sub}):
                pts = [r for r in sub if int(r["layer"]) == layer]
                ax.plot([int(r["step"]) for r in pts], [num(r["cv"]) for r in pts], lw=0.9, label=f"layer {layer}")
            if aux == "1":
                ax.axhline(paper, color="black", ls="--", lw=1, label=f"M6-T Fig. 1 with aux: ~{paper:g} (read off the figure)")
            last = max(int(r["step"]) for r in sub)
            dropped = [num(r["dropped_fraction"]) for r in sub if int(r["step"]) == last]
            ax.set_title(f"capacity factor {g}, aux loss {'on' if aux == '1' else 'off'}; "
                         f"dropped at the end {sum(dropped) / len(dropped):.2f}", fontsize=8)
            ax.set_xlabel("step")
            ax.set_ylabel("c_v of tokens computed per expert")
            ax.legend(fontsize=6)
    r = rows[0]
    fig.suptitle(f"M6-T Fig. 1 analogue: load balance while training a {r['layers']}-layer MoE stack "
                 f"(h={r['hidden']}, E={r['experts']}, top-1) with {r['optimizer']} lr {r['lr']}, aux coef {r['aux_coef']}\n"
                 f"data: {r['data']}\n" + provenance_line(r), fontsize=7)
    save(fig, folder / "cv.png")


def plot_sweep(folder, rows):
    names = list(dict.fromkeys(r["setting"] for r in rows))
    fig, ax = plt.subplots(figsize=(11, 4.8))
    width = 0.38
    for k, (aux, color) in enumerate([("1", "tab:blue"), ("0", "tab:orange")]):
        sub = {r["setting"]: r for r in rows if r["aux_loss_on"] == aux}
        xs = [i + (k - 0.5) * width for i in range(len(names))]
        last = [num(sub[n]["cv_last_fifth"]) for n in names]
        low = [num(sub[n]["cv_min"]) for n in names]
        ax.bar(xs, last, width=width, color=color, label=f"aux {'on' if aux == '1' else 'off'}: c_v over the last 20% of steps")
        ax.scatter(xs, low, color="black", marker="_", s=120, zorder=3, label="its lowest point" if k == 0 else None)
    plateau = num(read_rows(folder / "cv.csv")[0]["paper_cv_with_aux_plateau"])
    ax.axhline(plateau, color="black", ls="--", lw=1, label=f"M6-T Fig. 1 with aux: ~{plateau:g} (read off the figure)")
    ax.set_xticks(range(len(names)), [n.replace("_", "\n", 1) for n in names], fontsize=7)
    ax.set_ylabel("c_v (mean over layers)")
    r = rows[0]
    ax.set_title(f"What makes c_v climb with the aux loss: one change at a time from the default "
                 f"(capacity {r['capacity_factor']}, {r['steps']} steps). A bar well above its tick rose back after its low point.\n"
                 + provenance_line(r), fontsize=8)
    ax.legend(fontsize=7)
    save(fig, folder / "cv_sweep.png")


def main(folder):
    folder = pathlib.Path(folder)
    plot_trajectories(folder, read_rows(folder / "cv.csv"))
    if (folder / "cv_sweep.csv").exists():
        plot_sweep(folder, read_rows(folder / "cv_sweep.csv"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "results/m6t"))
