#!/usr/bin/env python3
"""gpt_step.py RESULTS/gpt: step.png from step.csv -- tokens/s of our training step and of the same
model in plain PyTorch on the same device, dense and MoE."""
import pathlib

import matplotlib.pyplot as plt

from common import nonempty_rows, num, provenance_line, run_main, save


def main(folder):
    rows = nonempty_rows(pathlib.Path(folder) / "step.csv")
    fig, ax = plt.subplots(figsize=(5.5, 4))
    x = range(len(rows))
    ax.bar([i - 0.2 for i in x], [num(r["tokens_per_s"]) for r in rows], 0.4, label="moebench")
    ax.bar([i + 0.2 for i in x], [num(r["torch_tokens_per_s"]) for r in rows], 0.4, color="tab:gray",
           label=f"PyTorch {rows[0]['torch']} ({rows[0]['torch_math']})")
    for i, r in enumerate(rows):
        ax.annotate(f"x{r['speed_vs_torch']}" if r["speed_vs_torch"][0].isdigit() else "no reference",
                    (i - 0.2, num(r["tokens_per_s"])), ha="center", va="bottom", fontsize=7)
    ax.set_xticks(list(x), [f"{r['model']} ({r['layers']}L h{r['hidden']}" + (f", {r['experts']} experts)" if r["experts"] != "0" else ")")
                            for r in rows], fontsize=7)
    ax.set_ylabel("tokens/s (one device)")
    ax.legend(fontsize=7)
    ax.set_title("gpt.step: one training step, ours and plain PyTorch\n" + provenance_line(rows[0]), fontsize=7)
    save(fig, pathlib.Path(folder) / "step.png")
    return 0


if __name__ == "__main__":
    run_main(main, "RESULTS/gpt")
