#!/usr/bin/env python3
"""claims.py RESULTS: one figure per paper from RESULTS/claims.csv (the claim ledger), claims_<paper>.png:
ours over the paper's value, claim by claim, from the setting that gave the verdict (a GPU run, this
machine, or the model; a stale GPU number is drawn only where no other is, and labelled so), coloured
by verdict; claims without a number of ours are left out. The papers are experiments/reference/papers.csv's."""
import pathlib
import sys

import matplotlib.pyplot as plt

from common import read_rows, save

COLOURS = {"reproduced": "tab:green", "partly": "tab:olive", "unsettled": "tab:cyan", "contradicted": "tab:orange",
           "not reproduced": "tab:red", "noise": "tab:gray", "not on the relevant hardware": "tab:purple", "modelled only": "tab:blue"}
# The papers, one figure each: experiments/reference/papers.csv, beside this checkout's plots/.
PAPERS = pathlib.Path(__file__).resolve().parent.parent / "experiments" / "reference" / "papers.csv"


# A setting's verdicts that say its number did not judge the claim, and how the bar is labelled then.
UNUSED = {"stale": "stale, not used", "not comparable": "not comparable", "not on the relevant hardware": "off its hardware"}


def ratio(row):
    """The number of the setting that gave the verdict (a GPU run, this machine, the model); where
    none did, the first number there is, labelled with why it did not judge (a stale GPU run, say).
    An ordering (above:X, below:X) is judged against X, not the paper's value: its bar is ours over
    X, so that 1 is the line its verdict is drawn against there too."""
    judge = row.get("judge", "")
    threshold = float(judge.split(":")[1]) if judge.startswith(("above:", "below:")) else None
    shown = []
    for setting in ("gpu", "local", "model"):
        if threshold:
            value = row.get(f"{setting}_value", "-")
            value = str(float(value) / threshold) if value not in ("-", "", "n/a") else value
        else:
            value = row.get(f"{setting}_over_paper", "-")
        if value not in ("-", "", "n/a"):
            shown.append((float(value), setting, row.get(f"{setting}_verdict", "-")))
    over = f", over {judge}" if threshold else ""
    for value, setting, verdict in shown:
        if verdict not in UNUSED:
            return value, setting + over
    if shown:
        value, setting, verdict = shown[0]
        return value, f"{setting} ({UNUSED[verdict]}){over}"
    return None, None


def main(results):
    rows = read_rows(pathlib.Path(results) / "claims.csv")
    names = {p["key"]: f"{p['name']} ({p['key']})" for p in read_rows(PAPERS)}
    for paper, name in names.items():
        points = []
        for r in rows:
            x, setting = ratio(r)
            if r["paper"] == paper and x is not None and x > 0:
                points.append((r["claim"], x, setting, r["verdict"]))
        fig, ax = plt.subplots(figsize=(7.5, 0.28 * max(len(points), 4) + 1.2))
        for i, (claim, x, setting, verdict) in enumerate(points):
            ax.barh(i, x, color=COLOURS.get(verdict, "white"), edgecolor="black", linewidth=0.4)
            ax.text(x * 1.05, i, setting, va="center", fontsize=6)
        ax.axvline(1, color="black", lw=0.8)
        ax.set_xscale("log")
        ax.set_yticks(range(len(points)), [p[0] for p in points], fontsize=6)
        ax.invert_yaxis()
        ax.set_xlabel("ours / the paper's value, or / the threshold of an ordering (log scale)", fontsize=7)
        handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in COLOURS.values()]
        ax.legend(handles, COLOURS.keys(), fontsize=6, loc="lower right")
        ax.set_title(f"{name}: claims with a number of ours ({len(points)}), over the paper's value (an ordering: its threshold)",
                     fontsize=8)
        save(fig, pathlib.Path(results) / f"claims_{paper}.png", dpi=110)
        plt.close(fig)


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if len(sys.argv) == 2 else 2)
    main(sys.argv[1])
