#!/usr/bin/env python3
"""The GPU tests' names (Suite.Name), read from tests/gpu/*.cpp, so that a lease can check its
--tests filter before it builds anything: a filter that selects no test would run none and pass.
With --filter, the names a gtest filter selects: patterns of '*' (any text) and '?' (one
character) joined by ':', then optionally '-' and the patterns left out. CTest script.gpu_test_names
holds this list to what the built moebench_gpu_tests lists.

  gpu_test_names.py [--filter FILTER]    the names, one a line; exit 2 when FILTER selects none
"""
import pathlib
import re
import sys

TESTS = pathlib.Path(__file__).resolve().parents[1] / "tests" / "gpu"
DECLARED = re.compile(r"^\s*TEST\(\s*(\w+)\s*,\s*(\w+)\s*\)", re.MULTILINE)


def names():
    found = []
    for source in sorted(TESTS.glob("*.cpp")):
        found += [f"{suite}.{name}" for suite, name in DECLARED.findall(source.read_text())]
    return found


def pattern(text):
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in text) + r"\Z")


def selected(all_names, gtest_filter):
    positive, _, negative = gtest_filter.partition("-")
    take = [pattern(p) for p in (positive or "*").split(":") if p]
    leave = [pattern(p) for p in negative.split(":") if p]
    return [n for n in all_names if any(p.match(n) for p in take) and not any(p.match(n) for p in leave)]


def main(argv):
    if argv and not (len(argv) == 2 and argv[0] == "--filter"):
        print(__doc__, file=sys.stderr)
        return 2
    all_names = names()
    if not all_names:
        print(f"gpu_test_names.py: error: no TEST(Suite, Name) in {TESTS}", file=sys.stderr)
        return 2
    chosen = selected(all_names, argv[1]) if argv else all_names
    if not chosen:
        print(f"gpu_test_names.py: error: --tests: '{argv[1]}' selects none of the {len(all_names)} GPU tests (a gtest "
              "filter: Suite.Name patterns with * and ?, joined by ':', then '-' and those left out; "
              "e.g. 'GpuPadRows.*:GpuMoELayer.*')", file=sys.stderr)
        return 2
    print("\n".join(chosen))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
