#!/usr/bin/env python3
"""The committed claim ledger and report are what the tool makes of the committed results:
  check_claims_report.py MOEBENCH_CLAIMS SOURCE_DIR
runs moebench_claims on SOURCE_DIR/results into a scratch folder and compares its claims.csv and
REPORT.md with the committed ones; exit 1 with the first differing lines when they differ."""
import difflib
import pathlib
import subprocess
import sys
import tempfile


def main(tool, source):
    results = pathlib.Path(source) / "results"
    with tempfile.TemporaryDirectory() as out:
        p = subprocess.run([tool, "--results", str(results), "--out", out], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        print(p.stdout, end="")
        if p.returncode != 0:
            print(f"check_claims_report: moebench_claims exited {p.returncode}")
            return 1
        failed = False
        for name in ("claims.csv", "REPORT.md"):
            committed = results / name
            if not committed.exists():
                print(f"check_claims_report: {committed} is not committed (run build/tools/moebench_claims)")
                failed = True
                continue
            made = (pathlib.Path(out) / name).read_text().splitlines()
            have = committed.read_text().splitlines()
            if made != have:
                diff = list(difflib.unified_diff(have, made, f"committed {name}", f"regenerated {name}", lineterm="", n=0))
                print(f"check_claims_report: {name} differs from what the committed results give "
                      f"(re-run build/tools/moebench_claims after changing results/ or experiments/reference/):")
                print("\n".join(diff[:30]))
                failed = True
        return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2]))
