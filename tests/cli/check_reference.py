#!/usr/bin/env python3
"""The papers' numbers are typed once, in experiments/reference/values.csv: no paper result, claim
or derived value stands as a literal in the code (bench/, tools/, models/, moe/, pipeline/,
harness/, runtime/, kernels/, plots/, experiments/*.sh), which reads them through
models/paper_values.h or plots/common.py's paper_value().

A value is looked for when it is specific enough to tell apart from an ordinary number: 3
significant digits or more (7617, 66.2, 1.66, 2.694), neither a power of two (8192) nor 100; a
percentage is looked for as a fraction too (81.4% as 0.814). Sizes and settings (kind 'spec') may
stand in models/paper_specs.cpp.

  check_reference.py SOURCE_DIR     exit 0 when no literal is found, 1 with a line per literal
"""
import csv
import pathlib
import re
import subprocess

import checklib

CODE = re.compile(r"^(bench|tools|models|moe|pipeline|harness|runtime|kernels|plots)/.*\.(cpp|h|cu|py)$|^experiments/.*\.sh$")


def significant(text):
    digits = re.sub(r"[^0-9]", "", text.split("e")[0]).lstrip("0")
    return len(digits)


def variants(value, unit):
    """The literals a paper value may be typed as."""
    try:
        x = float(value)
    except ValueError:
        return set()
    if "e" in value.lower() or significant(value) < 3 or x == 100 or (x == int(x) and x > 0 and int(x) & (int(x) - 1) == 0):
        return set()
    out = {value}
    if "." in value and value.rstrip("0") != value and significant(value.rstrip("0")) >= 3:
        out.add(value.rstrip("0"))
    if unit == "%" and x < 100:
        out.add(f"{x / 100:.6f}".rstrip("0"))
    return out


def main(source):
    source = pathlib.Path(source)
    rows = list(csv.DictReader(open(source / "experiments/reference/values.csv")))
    wanted = {}
    for r in rows:
        if r["kind"] == "spec":
            continue
        for v in variants(r["value"], r["unit"]):
            wanted.setdefault(v, []).append(r["id"])
    pattern = re.compile(r"(?<![\w.])(" + "|".join(re.escape(v) for v in sorted(wanted, key=len, reverse=True)) + r")(?![\w.])")
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=source, stdout=subprocess.PIPE, text=True).stdout.split()
    found = 0
    for f in files:
        if not CODE.match(f) or not (source / f).is_file():
            continue
        for i, line in enumerate(open(source / f, errors="replace"), start=1):
            code = line.split("//")[0] if f.endswith((".cpp", ".h", ".cu")) else line.split("#")[0]
            for m in pattern.finditer(code):
                print(f"check_reference: {f}:{i}: {m.group(1)} is the paper's {', '.join(wanted[m.group(1)])}; "
                      f"read it from experiments/reference/values.csv")
                found += 1
    if found:
        print(f"check_reference: {found} paper values typed in the code")
        return 1
    print(f"check_reference: {len(wanted)} paper values, none typed in the code")
    return 0


if __name__ == "__main__":
    checklib.run(main, __doc__, 1)
