#!/usr/bin/env python3
"""scripts/gpu_test_names.py against the built moebench_gpu_tests: the same names as the binary
lists, and under each filter below the same ones the binary's own filter selects (a lease checks
its --tests with the script before it builds the binary).

  check_gpu_test_names.py GPU_TESTS_BINARY    exit 0 when all holds, 1 with a line per breach
"""
import os
import pathlib
import subprocess
import sys

import checklib

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "gpu_test_names.py"
# The last three select nothing: a suite's name alone, a prefix, a pattern that leaves all out.
FILTERS = ["*", "GpuPadRows.*:GpuKernelLog.*", "Gpu?oE*", "*Matches*-GpuMoELayer.*:*Cpu*", "-GpuGemm*",
           "GpuMoELayer.Paper*", "GpuNoSuchSuite.*:GpuKernelLog.AHostWaitBetweenRangesIsTheDeviceIdleUntilTheNextRange",
           "GpuPadRows", "GpuPadRows.Padded", "Gpu*-*"]


def listed(binary, gtest_filter):
    # Listed on the CPU's device: with no GPU the binary would only print that it skips.
    out = subprocess.run([binary, "--gtest_list_tests", f"--gtest_filter={gtest_filter}"], capture_output=True,
                         text=True, check=True, env={**os.environ, "MOEBENCH_GPU_TESTS_ON_CPU": "1"}).stdout
    names, suite = [], ""
    for line in out.splitlines():
        if line and not line.startswith(" "):
            suite = line.strip()
        elif line.startswith("  "):
            names.append(suite + line.split("#")[0].strip())
    return sorted(names)


def main(binary):
    breaches = []
    for f in FILTERS:
        want = listed(binary, f)
        p = subprocess.run([sys.executable, str(SCRIPT), "--filter", f], capture_output=True, text=True)
        got = sorted(p.stdout.split())
        if got != want:
            breaches.append(f"'{f}': the script selects {len(got)} names, the binary {len(want)}; "
                            f"only the script's: {sorted(set(got) - set(want))[:5]}, only the binary's: "
                            f"{sorted(set(want) - set(got))[:5]}")
        if not want and (p.returncode != 2 or f"error: --tests: '{f}' selects none of the" not in p.stderr):
            breaches.append(f"'{f}' selects nothing: exit {p.returncode}, '{p.stderr.strip()}'")
        if want and p.returncode != 0:
            breaches.append(f"'{f}': exit {p.returncode}")
    return checklib.report("check_gpu_test_names", breaches)


if __name__ == "__main__":
    checklib.run(main, __doc__, 1)
