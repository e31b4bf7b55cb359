#!/usr/bin/env python3
"""Serial and grouped expert GEMMs relative to one dense GEMM of equal FLOPs, against N (results/ppmoe/serial.csv)."""
import pathlib
import sys

import matplotlib.pyplot as plt

from common import num, provenance_line, read_rows, save


def main(folder):
    folder = pathlib.Path(folder)
    rows = read_rows(folder / "serial.csv")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for width in sorted({r["width"] for r in rows}):
        sub = [r for r in rows if r["width"] == width]
        n = [int(r["experts"]) for r in sub]
        ax.plot(n, [num(r["serial_over_dense"]) for r in sub], marker="o", label=f"{width}: serial / dense")
        ax.plot(n, [num(r["grouped_over_dense"]) for r in sub], marker="s", label=f"{width}: grouped / dense")
    impl = rows[0]["grouped_implementation"]
    if impl.startswith("serial loop"):
        ax.text(0.03, 0.5, f"{rows[0]['backend']} backend: \"grouped\" is the serial loop\n(OpenBLAS has no grouped GEMM),"
                " so the two curves are the same calls", transform=ax.transAxes, va="center", ha="left", fontsize=8,
                bbox=dict(facecolor="lightyellow", edgecolor="gray"))
    ax.axhline(1.0, color="gray", lw=0.8)
    ax.axhline(1 / 0.9, color="red", lw=0.8, ls="--", label="grouped target (>= 0.9 x dense speed)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("experts N (T/N tokens each)")
    ax.set_ylabel("time relative to one dense GEMM")
    ax.set_title(f"PPMoE Sec. 3.3.2: N small GEMMs vs one big GEMM (ratios of medians of {rows[0]['repetitions']} "
                 "repetitions)\n" + provenance_line(rows[0]), fontsize=8)
    ax.legend(fontsize=7)
    save(fig, folder / "serial.png")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "results/ppmoe"))
