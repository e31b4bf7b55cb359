#!/usr/bin/env python3
"""The PyTorch references' time limit on a first step (experiments/torch_reference.py within):
a step that overruns raises TimeoutError near its limit, one within it returns its value, no
limit waits; torch_step.py refuses a MOEBENCH_TORCH_COMPILE_LIMIT that is not a positive
number of seconds (exit 2, the variable named) before any work.

  check_torch_limit.py SOURCE_DIR    exit 0 when all holds, 1 with a line per breach"""
import os
import pathlib
import subprocess
import sys
import tempfile
import time


def main(src):
    sys.path.insert(0, str(src / "experiments"))
    from torch_reference import within
    breaches = []
    start = time.perf_counter()
    try:
        within(0.3, lambda: time.sleep(5))
        breaches.append("a 5 s step under a 0.3 s limit ran to its end")
    except TimeoutError:
        if time.perf_counter() - start > 2:
            breaches.append(f"the limit of 0.3 s stopped the step after {time.perf_counter() - start:.1f} s")
    if within(2, lambda: 7) != 7 or within(None, lambda: 8) != 8:
        breaches.append("a step within its limit (or with none) lost its value")
    with tempfile.TemporaryDirectory() as d:
        for bad in ("abc", "0", "-5", "inf"):
            env = dict(os.environ, MOEBENCH_TORCH_COMPILE_LIMIT=bad)
            p = subprocess.run([sys.executable, str(src / "experiments/gpt/torch_step.py"), "--scale", "tiny",
                                "--out", f"{d}/out.csv"], env=env, capture_output=True, text=True)
            if p.returncode != 2 or "MOEBENCH_TORCH_COMPILE_LIMIT" not in p.stderr:
                breaches.append(f"MOEBENCH_TORCH_COMPILE_LIMIT={bad}: exit {p.returncode}, {p.stderr.strip()[-120:]}")
        if pathlib.Path(f"{d}/out.csv").exists():
            breaches.append("a refused limit still wrote the CSV")
    return breaches


if __name__ == "__main__":
    found = main(pathlib.Path(sys.argv[1]))
    for b in found:
        print(b)
    sys.exit(1 if found else 0)
