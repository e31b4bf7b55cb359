#!/usr/bin/env python3
"""pipe_bubble.py RESULTS/pipe: bubble.png from bubble.csv -- per stage count, the stages' mean
bubble against M for each schedule (measured, the simulator's on mean op times, the table replayed
with every op's measured time, (P-1)/(M+P-1)); throughput and
peak activation memory (largest stage) against M, with and without recomputation."""
import collections
import pathlib

import matplotlib.pyplot as plt

from common import nonempty_rows, num, provenance_line, run_main, save

CYCLE = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown"]


def main(folder):
    rows = nonempty_rows(pathlib.Path(folder) / "bubble.csv")
    # A colour per schedule, in the order the bench wrote them (its table's order).
    COLORS = {}
    for r in rows:
        COLORS.setdefault(r["schedule"], CYCLE[len(COLORS) % len(CYCLE)])
    # (P, schedule, recompute) -> M -> the stages' rows
    groups = collections.defaultdict(lambda: collections.defaultdict(list))
    for r in rows:
        groups[(int(r["stages"]), r["schedule"], r["recompute"])][int(r["micro_batches"])].append(r)
    stage_counts = sorted({k[0] for k in groups})
    fig, axes = plt.subplots(1, len(stage_counts) + 2, figsize=(5 * (len(stage_counts) + 2), 4.2))
    for ax, P in zip(axes, stage_counts):
        for (p, sched, re), by_m in sorted(groups.items()):
            if p != P or re != "no":
                continue
            ms = sorted(by_m)
            mean = lambda col: [sum(num(r[col]) for r in by_m[m]) / len(by_m[m]) for m in ms]
            c = COLORS.get(sched, "black")
            ax.plot(ms, mean("measured_bubble"), "o-", color=c, label=f"{sched} measured")
            ax.plot(ms, mean("simulated_bubble"), "x--", color=c, label=f"{sched} simulated (mean op times)")
            if all("replayed_bubble" in r for m in ms for r in by_m[m]):
                ax.plot(ms, mean("replayed_bubble"), "+:", color=c, label=f"{sched} replayed (each op's time)")
        ms = sorted({m for (p, _, _), by_m in groups.items() if p == P for m in by_m})
        ax.plot(ms, [(P - 1) / (m + P - 1) for m in ms], "k:", label="(P-1)/(M+P-1)")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("micro-batches M")
        ax.set_ylabel("bubble (idle share of the step, mean over stages)")
        ax.set_title(f"P = {P} stages", fontsize=9)
        ax.legend(fontsize=6)
    tput, mem = axes[-2], axes[-1]
    for (p, sched, re), by_m in sorted(groups.items()):
        if p != stage_counts[0]:
            continue
        ms = sorted(by_m)
        style = "o-" if re == "no" else "s--"
        label = f"{sched}{' + recompute' if re == 'yes' else ''}"
        c = COLORS.get(sched, "black")
        tps = [num(by_m[m][0]["tokens_per_s"]) for m in ms]
        spread = [[t - num(by_m[m][0]["tokens_per_s_min"]) for t, m in zip(tps, ms)],
                  [num(by_m[m][0]["tokens_per_s_max"]) - t for t, m in zip(tps, ms)]]
        tput.errorbar(ms, tps, yerr=spread, fmt=style, capsize=2, color=c, label=label)
        mem.plot(ms, [max(num(r["peak_activation_bytes"]) for r in by_m[m]) / 2**20 for m in ms], style, color=c,
                 label=label)
    for ax, ylabel in ((tput, "rows per second (fixed mini-batch)"), (mem, "peak activations, largest stage (MiB)")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("micro-batches M")
        ax.set_ylabel(ylabel)
        ax.set_title(f"P = {stage_counts[0]} stages", fontsize=9)
        ax.legend(fontsize=6)
    fig.suptitle("pipe.bubble (Pipelines (002) Sec. 8.3; PPMoE (000) Fig. 2): GPipe, 1F1B, ZB-H1 -- measured per stage vs the simulator\n"
                 + provenance_line(rows[0]), fontsize=8)
    save(fig, pathlib.Path(folder) / "bubble.png")
    return 0


if __name__ == "__main__":
    run_main(main, "RESULTS/pipe")
