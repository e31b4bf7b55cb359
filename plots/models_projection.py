#!/usr/bin/env python3
"""models_projection.py RESULTS/models: projection.png from the modelled tables -- 000 Table 2's speed
ratios, Tables 1 and 3's forward shares, 001 Table 1's ratios to top-1, each modelled beside the paper's."""
import pathlib

import matplotlib.pyplot as plt

from common import nonempty_rows, num, run_main, save, paper_value


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
         "PPMoE (000) Table 2: throughput over the slowest Dense row", "speed ratio")
    cols = [r for r in t1 if r["column"] != "total_fwd"] + [r for r in t3 if r["column"] != "total_fwd"]
    bars(axes[0][1], [("T1 " if r in t1 else "T3 ") + r["column"] for r in cols], [num(r["modelled_pct"]) for r in cols],
         [num(r["paper_pct"]) for r in cols], "PPMoE (000) Tables 1 (DPMoE) and 3 (PPMoE): share of the forward", "% of forward")
    for ax, gate in zip(axes[1], ("paper", "ours")):
        rows = [r for r in m6t if r["gate"].startswith(gate)]
        bars(ax, [f"{r['layers']}L {r['routing']}" for r in rows], [num(r["modelled_ratio_vs_top1"]) for r in rows],
             [num(r["paper_ratio_vs_top1"]) for r in rows],
             f"M6-T (001) Table 1, {'M6-T' if gate == 'paper' else 'our fused'} gate: ms/step over top-1", "ratio")
    r0 = t2[0]
    fig.suptitle(f"Modelled, not measured ({r0['link']}; {m6t[0]['link']}; commit {r0['commit']})\n"
                 f"{r0['calibration']}", fontsize=8)
    save(fig, folder / "projection.png")
    f10, f14, f17 = (folder / f"mpmoe_{f}.csv" for f in ("f10", "f14", "f17"))
    if f10.exists() and f14.exists() and f17.exists():
        a, b, c = nonempty_rows(f10), nonempty_rows(f14), nonempty_rows(f17)
        valor = folder / "mpmoe_f10_valor.csv"
        if valor.exists():
            a = a + nonempty_rows(valor)
        fig, axes = plt.subplots(1, 3, figsize=(13, 4))
        labels = [f"{r['cluster']} {r['model']}({r['tokens_per_gpu']})" for r in a]
        x = range(len(a))
        axes[0].bar([i - 0.2 for i in x], [num(r["mpmoe_over_fastmoe"]) for r in a], 0.4, label="over FastMoE")
        axes[0].bar([i + 0.2 for i in x], [num(r["mpmoe_over_fastermoe"]) for r in a], 0.4, label="over FasterMoE")
        over_fast, over_faster = paper_value("003.f10.pm_over_fastmoe"), paper_value("003.f10.pm_over_fastermoe")
        axes[0].axhline(over_fast, color="tab:blue", ls="--", lw=0.8, label=f"paper mean over FastMoE ({over_fast:g})")
        axes[0].axhline(over_faster, color="tab:orange", ls="--", lw=0.8, label=f"paper mean over FasterMoE ({over_faster:g})")
        axes[0].set_xticks(list(x), labels, rotation=70, ha="right", fontsize=5)
        axes[0].set_title("MPMoE (003) Fig. 10: MPMoE-pm speedup (modelled)", fontsize=8)
        axes[0].legend(fontsize=6)
        axes[1].plot([num(r["tokens_per_gpu"]) for r in b], [num(r["best_n"]) for r in b], "o-", label="modelled best n")
        axes[1].plot([num(r["tokens_per_gpu"]) for r in b], [num(r["paper_best_n"]) for r in b], "s--", color="tab:gray",
                     label="paper")
        axes[1].set_xscale("log", base=2)
        axes[1].set_title("MPMoE (003) Fig. 14: best n vs B, GPT-XL on Adira", fontsize=8)
        axes[1].legend(fontsize=6)
        axes[2].bar([r["modelled_nodes"] for r in c], [num(r["throughput_over_one_node"]) for r in c], label="modelled")
        axes[2].plot([r["modelled_nodes"] for r in c], [num(r["modelled_nodes"]) for r in c], "k--", lw=0.8, label="ideal")
        eight = paper_value("003.f17.mpmoe_8nodes")
        axes[2].scatter(["8"], [eight], color="tab:gray", zorder=3, label=f"paper ({eight:g}x)")
        axes[2].set_title("MPMoE (003) Fig. 17: throughput over one node, Adira", fontsize=8)
        axes[2].legend(fontsize=6)
        fig.suptitle(f"Modelled, not measured ({a[0]['link']}; commit {a[0]['commit']})", fontsize=8)
        save(fig, folder / "mpmoe_projection.png")
    local = folder / "local_vs_model.csv"
    if local.exists():
        rows = nonempty_rows(local)
        fig, ax = plt.subplots(figsize=(6, 5))
        for exp in dict.fromkeys(r["experiment"] for r in rows):
            mine = [r for r in rows if r["experiment"] == exp]
            ax.scatter([num(r["measured_ms"]) for r in mine], [num(r["modelled_ms"]) for r in mine], s=12, label=exp)
        lo = min(min(num(r["measured_ms"]), num(r["modelled_ms"])) for r in rows)
        hi = max(max(num(r["measured_ms"]), num(r["modelled_ms"])) for r in rows)
        ax.plot([lo, hi], [lo, hi], color="gray", lw=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("measured on this machine (ms)")
        ax.set_ylabel("modelled from this machine's profile (ms)")
        errors = [num(r["abs_error"]) for r in rows]
        ax.set_title(f"the model against this machine's runs: mean error {100 * sum(errors) / len(errors):.0f}%, "
                     f"worst {100 * max(errors):.0f}%\n{rows[0]['calibration']} ({rows[0]['commit']})", fontsize=7)
        ax.legend(fontsize=7)
        save(fig, folder / "local_vs_model.png")
    return 0


if __name__ == "__main__":
    run_main(main, "RESULTS/models")
