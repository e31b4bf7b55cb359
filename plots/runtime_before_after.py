#!/usr/bin/env python3
"""Summarises experiments/runtime/before_after.sh: the MoE layer's median total time and overhead
ratio before and after a change, per dispatcher, into a CSV (the runs' own provenance columns
carried over from the 'after' runs, the commits named)."""
import csv
import pathlib
import statistics
import sys


def main(work, rounds, before_commit, after_commit, out):
    work, rounds = pathlib.Path(work), int(rounds)
    rows = []
    # The dispatchers the runs measured (each run's moe/layer_<dispatcher>.csv).
    for d in sorted({p.name[len("layer_"):-len(".csv")] for p in work.glob("*/moe/layer_*.csv")}):
        runs = {}
        for which in ("before", "after"):
            got = []
            for r in range(1, rounds + 1):
                p = work / f"{which}{r}" / "moe" / f"layer_{d}.csv"
                if p.exists():
                    got.append(next(csv.DictReader(p.open())))
            runs[which] = got
        if not runs["before"] or not runs["after"]:
            continue

        def med(which, key):
            vals = [float(x[key]) for x in runs[which] if x[key] != "n/a"]
            return statistics.median(vals) if vals else float("nan")

        last = runs["after"][-1]
        row = {"dispatcher": d, "rounds": rounds, "before_commit": before_commit, "after_commit": after_commit,
               "before_total_ms": med("before", "total_ms"), "after_total_ms": med("after", "total_ms"),
               "before_overhead_ratio": med("before", "overhead_ratio"), "after_overhead_ratio": med("after", "overhead_ratio")}
        row["total_after_over_before"] = row["after_total_ms"] / row["before_total_ms"]
        row["overhead_after_over_before"] = row["after_overhead_ratio"] / row["before_overhead_ratio"]
        row["target_after_over_before"] = 1.03
        for k in ("backend", "device", "ranks", "link", "dtype", "scale", "date"):
            row[k] = last.get(k, "")
        rows.append(row)
        print(f"{d:16s} total {row['before_total_ms']:.1f} -> {row['after_total_ms']:.1f} ms "
              f"(x{row['total_after_over_before']:.3f}); overhead ratio {row['before_overhead_ratio']:.3f} -> "
              f"{row['after_overhead_ratio']:.3f} (x{row['overhead_after_over_before']:.3f}; target <= 1.03)")
    out = pathlib.Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    with tmp.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})
    tmp.replace(out)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
