#!/usr/bin/env python3
"""gpt_step.py RESULTS/gpt: step.png from step.csv -- tokens/s of our training step and of the same
model in plain PyTorch on the same device, dense and MoE -- and, where step_breakdown.csv is there,
step_breakdown.png: each model's eager step split into its innermost phases, grouped by kind."""
import pathlib

import matplotlib.pyplot as plt

from common import nonempty_rows, num, provenance_line, run_main, save

# Innermost phases by kind, in the order stacked: (label, the phase names it takes).
KINDS = [("attention core", ("attention.core.fwd", "attention.core.bwd")),
         ("attention projections", ("attention.qkv.fwd", "attention.out.fwd", "attention.qkv.bwd", "attention.out.bwd",
                                    "attention.wgrad")),
         ("MLP", ("ffn.fwd", "ffn.bwd", "ffn.wgrad", "ffn.allreduce")),
         ("MoE layer", None),  # every moe.* phase
         ("output layer and loss", ("head.fwd", "head.bwd", "head.wgrad")),
         ("LayerNorms and embedding", ("ln.fwd", "ln.bwd", "embed.fwd", "embed.bwd")),
         ("optimizer", ("step.optimizer", "step.zero_grad"))]


def kind_of(name):
    for label, names in KINDS:
        if (names is None and name.startswith("moe.")) or (names and name in names):
            return label
    return "unattributed and other"


def breakdown_figure(folder):
    path = folder / "step_breakdown.csv"
    if not path.is_file():
        return
    rows = nonempty_rows(path)
    models = list(dict.fromkeys(r["model"] for r in rows))
    parents = {r["phase"].rsplit("/", 1)[0] for r in rows if "/" in r["phase"]}
    labels = [k for k, _ in KINDS] + ["unattributed and other"]
    fig, ax = plt.subplots(figsize=(8, 1.6 + 0.7 * len(models)))
    for i, model in enumerate(models):
        ms = dict.fromkeys(labels, 0.0)
        for r in rows:
            if r["model"] == model and r["phase"] not in parents:
                ms[kind_of(r["name"])] += num(r["ms"])
        left = 0.0
        for j, label in enumerate(labels):
            ax.barh(i, ms[label], 0.6, left=left, color=f"C{j}", label=label if i == 0 else None)
            left += ms[label]
    ax.set_yticks(range(len(models)), models)
    ax.set_xlabel("ms per eager step (medians of each phase)")
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.set_title("gpt.step: where an eager step's time goes\n" + provenance_line(rows[0]), fontsize=7)
    save(fig, folder / "step_breakdown.png")


def main(folder):
    folder = pathlib.Path(folder)
    rows = nonempty_rows(folder / "step.csv")
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
    save(fig, folder / "step.png")
    breakdown_figure(folder)
    return 0


if __name__ == "__main__":
    run_main(main, "RESULTS/gpt")
