#!/usr/bin/env python3
"""Writes RESULTS/nodes/setting.csv for experiments/nodes/run.sh: how the two-node setting's link
rate was set (the rule, its inputs), the rates of its runs (the rate, half and twice it), its nodes,
and its status ("measured", or "not measured here: <why>", which the ledger's claims then say),
ending with the suite's provenance columns.

  setting.py OUT STATUS RULE GEMM_FLOPS RATE_GBPS SCALE HOSTS DEVICE"""
import csv
import datetime
import os
import pathlib
import subprocess
import sys

FLOP_PER_BYTE = 1e4  # a V100's 125 TFLOP/s of fp16 over 100 Gb/s InfiniBand's 12.5 GB/s


def commit(root):
    """The source commit as the benches give it: "-dirty" where tracked sources outside results/ differ."""
    if os.environ.get("MOEBENCH_COMMIT"):
        return os.environ["MOEBENCH_COMMIT"]
    try:
        head = subprocess.check_output(["git", "-C", root, "rev-parse", "--short", "HEAD"], text=True,
                                       stderr=subprocess.DEVNULL).strip()
        changes = subprocess.check_output(["git", "-C", root, "status", "--porcelain", "--untracked-files=no", "--", ".",
                                           ":(exclude)results"], text=True, stderr=subprocess.DEVNULL).strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + "-dirty" if changes else head


def main(out, status, rule, gemm, rate, scale, hosts, device):
    out = pathlib.Path(out)
    rate_v = float(rate) if rate else None
    measured = status == "measured"
    row = {
        "status": status,
        "rate_rule": rule,
        "gemm_flops_per_rank": f"{float(gemm):.4g}" if gemm else "-",
        "flop_per_byte": f"{FLOP_PER_BYTE:g}",
        "rate_GBps": f"{rate_v:.3g}" if rate_v else "-",
        "half_rate_GBps": f"{rate_v / 2:.3g}" if rate_v else "-",
        "twice_rate_GBps": f"{rate_v * 2:.3g}" if rate_v else "-",
        "backend": "cpu", "device": device or "-", "driver": "-", "cuda": "-", "nccl": "-", "ranks": "-",
        "nodes": "2" if measured else "-", "hosts": hosts.strip() if measured and hosts.strip() else "-", "processors": "-",
        "link": (f"measured: shared memory within a node; TCP shaped to {rate_v:.3g} GB/s between nodes"
                 if measured and rate_v else "-"),
        "dtype": "-", "scale": scale,
        "commit": commit(str(pathlib.Path(__file__).resolve().parents[2])),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + f".tmp.{os.getpid()}")
    with tmp.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(row))
        w.writeheader()
        w.writerow(row)
    tmp.replace(out)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 9:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(*sys.argv[1:]))
