#!/usr/bin/env python3
"""MPMoE's figures (003 Figs. 2, 3, 9-16) from results/mpmoe/*.csv, one PNG per CSV present,
the paper's values drawn beside ours where it states them."""
import collections
import pathlib
import sys

import matplotlib.pyplot as plt

from common import num, provenance_line, read_rows, save, paper_value


def cases(rows):
    return list(dict.fromkeys(f"{r['model']}({r['tokens']})" for r in rows))


def f2(rows, out):
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(rows)), 4.5))
    labels = [f"{r['model']}\nB={r['tokens']}" for r in rows]
    x = range(len(rows))
    bottom_m = [0.0] * len(rows)
    bottom_e = [0.0] * len(rows)
    for key, color in (("model_states", "tab:blue"), ("activations", "tab:orange"), ("buffers", "tab:green")):
        m = [num(r[f"{key}_share"]) for r in rows]
        e = [num(r[f"eq_{key}_share"]) for r in rows]
        ax.bar([i - 0.2 for i in x], m, 0.38, bottom=bottom_m, color=color, label=f"{key} (measured)")
        ax.bar([i + 0.2 for i in x], e, 0.38, bottom=bottom_e, color=color, alpha=0.45, hatch="//",
               label=f"{key} (Eq. 1-3)")
        bottom_m = [a + b for a, b in zip(bottom_m, m)]
        bottom_e = [a + b for a, b in zip(bottom_e, e)]
    ax.set_xticks(list(x), labels, fontsize=7)
    ax.set_ylabel("share of the peak memory (left: measured, right: Eq. 1-3)")
    ax.legend(fontsize=6, ncol=2, loc="lower right")
    ax.set_title("MPMoE (003) Fig. 2: memory of a training step (Adam) by kind\n" + provenance_line(rows[0]), fontsize=8)
    save(fig, out)


def f3(rows, out):
    fig, ax = plt.subplots(figsize=(8, 4))
    labels = [f"{r['model']}({r['tokens']})\n{r['y']} beside {r['x']}" for r in rows]
    colors = {"comm": "tab:blue", "comp": "tab:orange", "mem": "tab:green"}
    vals = [num(r["alpha"]) for r in rows]
    spread = [[v - num(r["alpha_min"]) for v, r in zip(vals, rows)], [num(r["alpha_max"]) - v for v, r in zip(vals, rows)]]
    ax.bar(range(len(rows)), vals, yerr=spread, capsize=2, color=[colors[r["y"]] for r in rows])
    alpha = paper_value("003.s23.alpha_threshold")
    ax.axhline(alpha, color="red", ls="--", lw=1, label=f"{alpha:g}: below it, overlapping loses (the paper's rule)")
    ax.set_xticks(range(len(rows)), labels, fontsize=6)
    ax.set_ylabel("alpha(y, x) = y alone / y beside x")
    ax.legend(fontsize=7)
    ax.set_title("MPMoE (003) Fig. 3: slowdown factors of the layer's own operations (the model's input)\n" + provenance_line(rows[0]),
                 fontsize=8)
    save(fig, out)


def f9(rows, out):
    ops = list(dict.fromkeys(r["op"] for r in rows))
    fig, axes = plt.subplots(1, len(ops), figsize=(3.6 * len(ops), 3.8), squeeze=False)
    for ax, op in zip(axes[0], ops):
        for case in cases(rows):
            sub = sorted((r for r in rows if r["op"] == op and f"{r['model']}({r['tokens']})" == case),
                         key=lambda r: num(r["volume"]))
            v = [num(r["volume"]) for r in sub]
            ax.plot(v, [num(r["measured_ms"]) for r in sub], "o", label=f"{case} measured")
            ax.plot(v, [num(r["fitted_ms"]) for r in sub], "-", label=f"{case} piecewise-linear fit")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(sub[0]["volume_unit"] if sub else "")
        ax.set_ylabel("ms")
        ax.set_title(op, fontsize=8)
        ax.legend(fontsize=5)
    fig.suptitle("MPMoE (003) Fig. 9: time over volume and its fit\n" + provenance_line(rows[0]), fontsize=8)
    save(fig, out)


def f10(rows, out):
    fig, ax = plt.subplots(figsize=(max(6, 2.2 * len(rows)), 4.2))
    ways = [("fastmoe", "FastMoE-style", "tab:gray"), ("fastermoe", "FasterMoE-style (g=1)", "tab:blue"),
            ("pb", "MPMoE-pb", "tab:orange"), ("pm", "MPMoE-pm", "tab:green")]
    for k, (key, label, color) in enumerate(ways):
        speed = [num(r["fastmoe_ms"]) / num(r[f"{key}_ms"]) for r in rows]
        ax.bar([i + 0.2 * (k - 1.5) for i in range(len(rows))], speed, 0.2, color=color, label=label)
    for i, r in enumerate(rows):
        ax.annotate(f"pb n={r['pb_n']} {r['pb_strategy']}\npm n={r['pm_n']} {r['pm_strategy']}", (i, 0.05), ha="center",
                    fontsize=6)
    pb_fast, pb_faster = paper_value("003.f10.pb_over_fastmoe"), paper_value("003.f10.pb_over_fastermoe")
    ax.axhline(pb_fast, color="tab:orange", ls=":", lw=1, label=f"paper: MPMoE-pb over FastMoE, mean {pb_fast:g}x")
    ax.axhline(pb_fast / pb_faster, color="tab:blue", ls=":", lw=1,
               label=f"paper: FasterMoE over FastMoE ({pb_fast:g} / {pb_faster:g})")
    ax.set_xticks(range(len(rows)), [r["label"] for r in rows])
    ax.set_ylabel("speedup over the FastMoE-style layer")
    ax.legend(fontsize=6)
    ax.set_title("MPMoE (003) Fig. 10: layer time (forward + backward) as speedup\n" + provenance_line(rows[0]), fontsize=8)
    save(fig, out)


def f11(rows, out):
    fig, ax = plt.subplots(figsize=(max(7, 0.45 * len(rows)), 4.2))
    labels = [f"{r['model']}({r['tokens']})\n{r['layer']} n={r['n']} {r['strategy']}" for r in rows]
    vals = [num(r["normalised_to_pmoe"]) for r in rows]
    colors = ["tab:gray" if r["layer"].startswith("Fast") else "tab:blue" if r["layer"] == "PMoE" else "tab:orange"
              for r in rows]
    ax.bar(range(len(rows)), vals, color=colors)
    for n in ("2", "4", "8"):
        red = paper_value(f"003.f11.n{n}.reduction") / 100
        ax.axhline(1 - red, color="black", ls=":", lw=0.6)
        ax.text(len(rows) - 0.5, 1 - red, f" paper n={n}: -{int(red * 100)}%", fontsize=6, va="bottom", ha="right")
    ax.set_xticks(range(len(rows)), labels, fontsize=5, rotation=90)
    ax.set_ylabel("peak memory / PMoE's at the same n (FastMoE, FasterMoE: / PMoE n=4)")
    ax.set_title("MPMoE (003) Fig. 11: peak memory normalised to PMoE\n" + provenance_line(rows[0]), fontsize=8)
    save(fig, out)


def f12(rows, out):
    fig, ax = plt.subplots(figsize=(max(6, 0.5 * len(rows)), 4))
    labels = [f"{r['model']}({r['tokens']})\nn={r['n']} {r['strategy']}" for r in rows]
    ax.bar(range(len(rows)), [num(r["achieved_over_theoretical_worst_rank"]) for r in rows], color="tab:orange")
    target, paper = num(rows[0]["target"]), paper_value("003.f12.achieved_over_theoretical") / 100
    ax.axhline(target, color="red", ls="--", lw=1, label=f"our target {target:g}")
    ax.axhline(paper, color="black", ls=":", lw=1, label=f"paper about {paper:g}")
    ax.set_ylim(0.8, 1.05)
    ax.set_xticks(range(len(rows)), labels, fontsize=5, rotation=90)
    ax.set_ylabel("saved activations / Eq. 5 (worst rank)")
    ax.legend(fontsize=7)
    ax.set_title("MPMoE (003) Fig. 12: achieved against theoretical memory saving\n" + provenance_line(rows[0]), fontsize=8)
    save(fig, out)


def f13(rows, out):
    fig, ax = plt.subplots(figsize=(max(6, 0.8 * len(rows)), 4))
    labels = [f"{r['model']}({r['tokens']})\n{r['layer']} {r['granularity']}" for r in rows]
    colors = ["tab:blue" if r["layer"].startswith("Faster") else "tab:orange" for r in rows]
    ms = [num(r["dispatch_recovery_ms"]) for r in rows]
    spread = [[m - num(r["dispatch_recovery_ms_min"]) for m, r in zip(ms, rows)],
              [num(r["dispatch_recovery_ms_max"]) - m for m, r in zip(ms, rows)]]
    ax.bar(range(len(rows)), ms, yerr=spread, capsize=2, color=colors)
    ax.set_xticks(range(len(rows)), labels, fontsize=6, rotation=60)
    ax.set_ylabel("dispatch + recovery all-to-all, forward, ms (not overlapped;\nmedian of paired rounds, bars: fastest-slowest)")
    ax.set_title("MPMoE (003) Fig. 13: communication of the FasterMoE-style split against MPMoE's\n" + provenance_line(rows[0]),
                 fontsize=8)
    save(fig, out)


def f14(rows, out):
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for case in cases(rows):
        sub = [r for r in rows if f"{r['model']}({r['tokens']})" == case]
        n = [int(r["n"]) for r in sub]
        ms = [num(r["ms"]) for r in sub]
        spread = [[m - num(r["ms_min"]) for m, r in zip(ms, sub)], [num(r["ms_max"]) - m for m, r in zip(ms, sub)]]
        line = ax.errorbar(n, ms, yerr=spread, fmt="o-", capsize=2, label=case).lines[0]
        pick = int(sub[0]["algorithm1_pick"])
        if pick in n:
            ax.axvline(pick, color=line.get_color(), ls="--", lw=0.8)
    ax.set_xlabel("n (parts)")
    ax.set_ylabel("PMoE layer time, ms (median; bars: min-max)")
    ax.legend(fontsize=7, title="dashed: Algorithm 1's pick", title_fontsize=7)
    ax.set_title("MPMoE (003) Fig. 14: time over the granularity n\n" + provenance_line(rows[0]), fontsize=8)
    save(fig, out)


def f15(rows, out):
    fig, ax = plt.subplots(figsize=(max(6, 0.7 * len(rows)), 4))
    labels = [f"({r['ranks']}, {r['tokens']})\n{r['strategy']} n={r['n']}"
              + ("\npb" if r["pb_pick"] == "yes" else "") + ("\npm" if r["pm_pick"] == "yes" else "") for r in rows]
    ax.bar(range(len(rows)), [100 * num(r["overhead_vs_pmoe"]) for r in rows], color="tab:purple")
    ax.axhline(0, color="black", lw=0.6)
    ax.set_xticks(range(len(rows)), labels, fontsize=6)
    ax.set_ylabel("time over PMoE at the same n, %")
    ax.set_title("MPMoE (003) Fig. 15: overhead of the restore strategies, (ranks, B)\n" + provenance_line(rows[0]), fontsize=8)
    save(fig, out)


def f16(rows, out):
    rows = [r for r in rows if r["comm_ms"] != "n/a"]
    if not rows:
        return
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(rows)), 4.2))
    labels = [f"{r['model']}({r['tokens']})\n{r['way']}".replace(" MPMoE n=", "\nn=") for r in rows]
    x = range(len(rows))
    ax.bar([i - 0.2 for i in x], [num(r["comm_ms"]) for r in rows], 0.2, label="comm (S, R in flight)")
    ax.bar(list(x), [num(r["comp_ms"]) for r in rows], 0.2, label="comp (C)")
    ax.bar([i + 0.2 for i in x], [num(r["total_ms"]) for r in rows], 0.2, label="layer total")
    for i, r in enumerate(rows):
        if r["ideal_over_pipelined"] != "n/a":
            ax.annotate(f"{num(r['ideal_over_pipelined']):.2f} of ideal\n[{num(r['ideal_over_pipelined_min']):.2f}, "
                        f"{num(r['ideal_over_pipelined_max']):.2f}]", (i, num(r["total_ms"])), ha="center",
                        va="bottom", fontsize=7)
    ax.set_xticks(list(x), labels, fontsize=6)
    ax.set_ylabel("ms per forward + backward")
    ax.legend(fontsize=7)
    targets = [num(r["target"]) for r in rows if r["target"] != "n/a"]
    ax.set_title("MPMoE (003) Fig. 16: breakdown; pipelined against max(comm, comp) of seq(n) "
                 f"(paper {paper_value('003.f16.of_ideal') / 100:g}, our target {targets[0] if targets else float('nan'):g})\n"
                 + provenance_line(rows[0]), fontsize=8)
    save(fig, out)


def main(folder):
    folder = pathlib.Path(folder)
    drawn = 0
    for name, draw in (("f2", f2), ("f3", f3), ("f9", f9), ("f10", f10), ("f11", f11), ("f12", f12), ("f13", f13),
                       ("f14", f14), ("f15", f15), ("f16", f16)):
        path = folder / f"{name}.csv"
        if path.exists():
            rows = read_rows(path)
            if rows:
                draw(rows, folder / f"{name}.png")
                drawn += 1
    if not drawn:
        print(f"{sys.argv[0]}: error: no MPMoE CSV in {folder} (run experiments/mpmoe first)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(f"usage: {sys.argv[0]} RESULTS/mpmoe", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
