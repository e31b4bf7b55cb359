#!/usr/bin/env python3
"""Draws bus bandwidth against message size for every results/comm/<collective>.csv into busbw.png."""
import pathlib
import sys

import matplotlib.pyplot as plt

from common import num, provenance_line, read_rows, save


def main(folder):
    root = pathlib.Path(folder)
    files = sorted(root.glob("*.csv"))
    if not files:
        print(f"plots/comm.py: error: no CSV files in {root}", file=sys.stderr)
        return 1
    fig, ax = plt.subplots(figsize=(7, 4.5))
    rows = []
    for path in files:
        rows = read_rows(path)
        if rows:
            sizes = [num(r["size_bytes"]) for r in rows]
            line, = ax.plot(sizes, [num(r["busbw_GBps"]) for r in rows], marker="o", markersize=3,
                            label=rows[0]["collective"])
            ax.fill_between(sizes, [num(r["busbw_GBps_min"]) for r in rows], [num(r["busbw_GBps_max"]) for r in rows],
                            color=line.get_color(), alpha=0.15, linewidth=0)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("bus bandwidth (GB/s), median; band: min-max")
    ax.set_title(f"moebench comm (nccl-tests busbw), median of {rows[0]['repetitions']} repetitions\n"
                 + provenance_line(rows[0]), fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    save(fig, root / "busbw.png")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "results/comm"))
