#!/usr/bin/env python3
"""check_profile_spread.py PROFILE.csv: every value moebench_profile measured carries its spread
(low <= value <= high, from the fastest and slowest repetitions), every value it did not measure
carries none. Exit 1 with the offending row."""
import csv
import sys


def main(path):
    measured = 0
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            low, high, value, field = row["low"], row["high"], row["value"], row["field"]
            source = row["source"]
            from_run = source.startswith("measured by moebench_profile") or (
                field in ("inter_bw", "inter_latency", "pcie_bw") and not source.startswith("not measured"))
            if field == "name" or not from_run:
                if low or high:
                    print(f"{path}: {field} was not measured but has a spread {low}..{high}")
                    return 1
                continue
            if not low or not high:
                print(f"{path}: measured {field} has no spread")
                return 1
            lo, v, hi = float(low), float(value), float(high)
            if not (lo <= v * (1 + 1e-4) and v <= hi * (1 + 1e-4)):
                print(f"{path}: {field} {row['at']}: value {v} outside its spread {lo}..{hi}")
                return 1
            measured += 1
    if measured < 8:
        print(f"{path}: only {measured} measured rows")
        return 1
    print(f"{path}: {measured} measured values, each within its spread")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
