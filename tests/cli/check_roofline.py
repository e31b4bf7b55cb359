#!/usr/bin/env python3
"""The roofline columns of bench CSVs run with a profile of this machine: every row has its
FLOPs and least bytes, a positive floor set by compute or memory, the achieved TFLOP/s and the
time over the floor agreeing with the row's own measured time, and names the profile it used.

  check_roofline.py TIME_COLUMN CSV [CSV ...]    exit 0 when all holds, 1 with a line per breach
"""
import csv
import sys


def main(time_column, paths):
    breaches = []
    for path in paths:
        rows = list(csv.DictReader(open(path, newline="")))
        if not rows:
            breaches.append(f"{path}: no rows")
        for n, r in enumerate(rows, start=2):
            try:
                flops, floor, over = float(r["flops"]), float(r["floor_ms"]), float(r["time_over_floor"])
                achieved, ms, least = float(r["achieved_tflops"]), float(r[time_column]), float(r["min_bytes"])
            except (KeyError, ValueError) as e:
                breaches.append(f"{path}:{n}: a roofline column is missing or no number ({e})")
                continue
            if not (flops > 0 and least > 0 and floor > 0):
                breaches.append(f"{path}:{n}: flops {flops}, min_bytes {least}, floor_ms {floor}: all must be > 0")
            if r["floor_bound"] not in ("compute", "memory"):
                breaches.append(f"{path}:{n}: floor_bound '{r['floor_bound']}'")
            if abs(over - ms / floor) > 0.01 * over:
                breaches.append(f"{path}:{n}: time_over_floor {over} is not {time_column} {ms} over floor_ms {floor}")
            if abs(achieved - flops / (ms * 1e-3) / 1e12) > 0.01 * achieved:
                breaches.append(f"{path}:{n}: achieved_tflops {achieved} is not flops over {time_column}")
            if "profile_this_machine.csv" not in r["roofline_profile"]:
                breaches.append(f"{path}:{n}: roofline_profile '{r['roofline_profile']}' names no profile of this machine")
    for b in breaches:
        print(f"check_roofline: {b}")
    return 1 if breaches else 0


if __name__ == "__main__":
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2:]))
