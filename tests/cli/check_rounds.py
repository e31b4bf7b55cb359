#!/usr/bin/env python3
"""A bench's cases repeat interleaved, round by round (harness/bench.h): the registrations Google
Benchmark lists are the cases in order, once per round -- never one case's repetitions together.

  check_rounds.py REPETITIONS -- COMMAND [ARGS...]   (COMMAND gets --benchmark_list_tests=true)"""
import subprocess
import sys


def main(argv):
    if len(argv) < 3 or argv[1] != "--":
        print(__doc__, file=sys.stderr)
        return 2
    reps, command = int(argv[0]), argv[2:] + ["--benchmark_list_tests=true"]
    p = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    names = [line.strip() for line in p.stdout.splitlines() if "/manual_time" in line]
    if p.returncode != 0 or not names:
        print(p.stdout[-3000:])
        print(f"check_rounds: the bench listed nothing (exit {p.returncode})")
        return 1
    cases = list(dict.fromkeys(names))
    want = cases * reps
    if names != want:
        print("\n".join(names))
        print(f"check_rounds: the {len(names)} registrations are not the {len(cases)} cases once per round, {reps} rounds")
        return 1
    if len(cases) < 2:
        print("check_rounds: one case cannot show the rounds")
        return 1
    print(f"check_rounds: {len(cases)} cases x {reps} rounds, round by round")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
