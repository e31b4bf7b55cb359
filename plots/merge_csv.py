#!/usr/bin/env python3
"""merge_csv.py OUT IN [IN ...]: the rows of every IN (same header) in one CSV, written whole
(a temporary file, then renamed). OUT may be one of the INs; INs that do not exist are skipped.
Rows of two scales, backends or devices are refused: a CSV holds one run's kind of rows."""
import csv
import os
import pathlib
import sys


def main(out, inputs):
    header, rows = None, []
    for path in inputs:
        path = pathlib.Path(path)
        if not path.exists():
            continue
        with path.open(newline="") as f:
            reader = csv.reader(f)
            h = next(reader, None)
            if h is None:
                continue
            if header is not None and h != header:
                print(f"{sys.argv[0]}: error: {path} has other columns than {inputs[0]}", file=sys.stderr)
                return 1
            header = h
            rows.extend(reader)
    for key in ("scale", "backend", "device"):
        if header is not None and key in header:
            kinds = {r[header.index(key)] for r in rows if len(r) == len(header)}
            if len(kinds) > 1:
                print(f"{sys.argv[0]}: error: {', '.join(inputs)} hold rows of {len(kinds)} {key}s ({', '.join(sorted(kinds))}); "
                      f"a CSV holds one", file=sys.stderr)
                return 1
    if header is None:
        print(f"{sys.argv[0]}: error: none of {', '.join(inputs)} exists", file=sys.stderr)
        return 1
    out = pathlib.Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + f".tmp.{os.getpid()}")
    with tmp.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        seen = set()
        for r in rows:  # a row merged twice (OUT among the INs) is kept once
            if tuple(r) not in seen:
                seen.add(tuple(r))
                w.writerow(r)
    tmp.replace(out)
    print(f"wrote {out} ({len(seen)} rows)")
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 3:
        print(f"usage: {sys.argv[0]} OUT IN [IN ...]", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2:]))
