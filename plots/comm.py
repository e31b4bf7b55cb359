#!/usr/bin/env python3
"""Draws bus bandwidth against message size for every results/comm/<collective>.csv into busbw.png."""
import csv
import pathlib
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(folder: str) -> int:
    root = pathlib.Path(folder)
    files = sorted(p for p in root.glob("*.csv"))
    if not files:
        print(f"plots/comm.py: error: no CSV files in {root}", file=sys.stderr)
        return 1
    fig, ax = plt.subplots(figsize=(7, 4.5))
    provenance = None
    for path in files:
        with path.open(newline="") as f:
            rows = list(csv.DictReader(f))
        if not rows:
            continue
        sizes = [float(r["size_bytes"]) for r in rows]
        busbw = [float(r["busbw_GBps"]) for r in rows]
        ax.plot(sizes, busbw, marker="o", markersize=3, label=rows[0]["collective"])
        provenance = rows[0]
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    if provenance:
        ax.set_title(f"moebench comm: {provenance['backend']} backend, {provenance['ranks']} ranks, "
                     f"{provenance['dtype']}\n{provenance['device']} ({provenance['scale']} scale, {provenance['commit']})",
                     fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    out = root / "busbw.png"
    fig.savefig(out, dpi=120)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "results/comm"))
