#!/usr/bin/env python3
"""Every suite that tests/mpi/mpi_test_main.cpp lists for either backend (kEitherBackend) exists in
one of the multi-rank test binaries: a misspelt name would leave a suite off the cuda run unsaid.

usage: check_either_backend_suites.py BINARY..."""
import pathlib
import re
import subprocess
import sys

main = pathlib.Path(__file__).resolve().parents[1] / "mpi" / "mpi_test_main.cpp"
text = main.read_text()
decl = re.search(r'kEitherBackend\s*=\s*((?:\s*"[^"]*")+)\s*;', text)
if not decl:
    sys.exit(f"{main}: no kEitherBackend list")
listed = "".join(re.findall(r'"([^"]*)"', decl.group(1))).split(":")
suites = set()
for binary in sys.argv[1:]:
    # --gtest_list_tests runs no test and needs no MPI launch: suite names end with '.' in column 0
    out = subprocess.run([binary, "--gtest_list_tests"], capture_output=True, text=True, check=True).stdout
    suites |= {line[:-1] for line in out.splitlines() if line and not line.startswith(" ") and line.endswith(".")}
missing = [name for name in listed if not name.endswith(".*") or name[:-2] not in suites]
if missing:
    sys.exit("kEitherBackend names suites no multi-rank binary holds (or not as Suite.*): " + ", ".join(missing))
print(f"{len(listed)} suites for either backend, all found: {', '.join(listed)}")
