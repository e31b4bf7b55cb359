#!/usr/bin/env python3
"""The mutation check: plants small bugs in a scratch copy of the tree, one at a time, and says
which the tests kill. Each bug (tests/mutation/mutations.py) turns a mechanism into its
neighbour while the outputs stay right -- ZB-H1 into 1F1B, S2 into S1, an emulated link that
ignores bytes, a late watchdog, ... -- so only a test that guards the mechanism can kill it.

For each bug: copy the file, replace its exact snippets (each must occur once), build only the
targets it names, run the CTest cases it names, put the file back. A bug is killed when one of
those tests fails; one that does not build is reported as such (a mutant must compile to say
anything). Too slow for CI (a build of the copy, then a rebuild and a test run per bug: about
15-30 minutes on 2 cores); run it before resolving a change to the tests or the
mechanisms, and quote its table.

  scripts/mutation_check.py                      every bug
  scripts/mutation_check.py --only zb_h1_is_1f1b  some (comma-separated ids)
  scripts/mutation_check.py --list               the bugs, not run
  scripts/mutation_check.py --check-snippets     every bug's snippets still in the code (no build;
                                                 a CTest case, so moved code fails CI, not the next run)
  --scratch DIR   where the copy and its build live (default /tmp/moebench-mutants; kept, so a
                  second run rebuilds incrementally)
Exit status: 0 when every bug run was killed, 1 otherwise, 2 for bad options.
"""
import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "mutation"))
from mutations import MUTATIONS  # noqa: E402


def sh(cmd, cwd, log=None, timeout=None):
    """Runs cmd (a list); returns (exit code, output)."""
    try:
        p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
        out, rc = p.stdout, p.returncode
    except subprocess.TimeoutExpired as e:
        out, rc = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""), 124
    if log:
        log.write(out)
    return rc, out


def copy_tree(scratch_src):
    """The working tree as git sees it (tracked and untracked, not ignored) into scratch_src."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                           stdout=subprocess.PIPE).stdout.decode().split("\0")
    for f in filter(None, files):
        src, dst = ROOT / f, scratch_src / f
        if not src.is_file():
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        if not dst.exists() or dst.read_bytes() != src.read_bytes():
            shutil.copy(src, dst)  # a fresh mtime: make must see the copy as newer than its old objects


def moved_snippets(tree, chosen):
    """A line per mutant whose file in `tree` does not hold one of its snippets exactly once."""
    out = []
    for m in chosen:
        text = (tree / m["file"]).read_text()
        for i, (old, _) in enumerate(m["edits"]):
            if text.count(old) != 1:
                out.append(f"{m['id']}: its snippet {i + 1} occurs {text.count(old)} times in {m['file']} (must be once): "
                           "the code moved, update tests/mutation/mutations.py")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="", help="comma-separated mutation ids")
    ap.add_argument("--list", action="store_true", help="list the mutations and exit")
    ap.add_argument("--check-snippets", action="store_true",
                    help="check that every mutant's snippets occur once in the working tree, and exit (no build)")
    ap.add_argument("--scratch", default="/tmp/moebench-mutants")
    args = ap.parse_args()
    ids = [m["id"] for m in MUTATIONS]
    chosen = MUTATIONS
    if args.only:
        wanted = args.only.split(",")
        unknown = [w for w in wanted if w not in ids]
        if unknown:
            print(f"mutation_check: error: --only: unknown {', '.join(unknown)}; allowed: {', '.join(ids)}", file=sys.stderr)
            return 2
        chosen = [m for m in MUTATIONS if m["id"] in wanted]
    if args.list:
        for m in chosen:
            print(f"{m['id']:32} {m['mechanism']}")
        return 0
    if args.check_snippets:
        moved = moved_snippets(ROOT, chosen)
        for line in moved:
            print(f"mutation_check: error: {line}", file=sys.stderr)
        print(f"mutation_check: {len(chosen) - len(moved)} of {len(chosen)} mutants' snippets in place")
        return 1 if moved else 0

    scratch = pathlib.Path(args.scratch)
    src, build = scratch / "src", scratch / "build"
    src.mkdir(parents=True, exist_ok=True)
    log = open(scratch / "mutation_check.log", "w")
    copy_tree(src)
    # Every mutant's file must hold its snippet exactly once, before anything is built.
    for line in moved_snippets(src, chosen):
        print(f"mutation_check: error: {line}", file=sys.stderr)
        return 2
    print(f"mutation_check: configuring and building the unmutated copy in {build}", flush=True)
    rc, out = sh(["cmake", "-S", str(src), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release"], src, log)
    if rc == 0:  # everything once (a test's fixtures may run other binaries), then each bug's targets
        rc, out = sh(["cmake", "--build", str(build), "-j", str(os.cpu_count() or 2)], src, log)
    if rc != 0:
        print(out[-3000:])
        print("mutation_check: error: the unmutated copy does not build", file=sys.stderr)
        return 1
    # The unmutated tests must pass, or a failure would prove nothing.
    for tests in sorted({m["tests"] for m in chosen}):
        rc, out = sh(["ctest", "--test-dir", str(build), "-R", tests, "--timeout", "300"], src, log)
        if rc != 0 or "No tests were found" in out:
            print(out[-3000:])
            print(f"mutation_check: error: the tests {tests} fail or are missing without any bug", file=sys.stderr)
            return 1

    print(f"{'mutation':32} {'result':9} {'s':>5}  failing tests")
    survived = 0
    for m in chosen:
        path = src / m["file"]
        original = path.read_text()
        t0 = time.time()
        try:
            mutant = original
            for old, new in m["edits"]:
                mutant = mutant.replace(old, new)
            path.write_text(mutant)
            rc, out = sh(["cmake", "--build", str(build), "-j", str(os.cpu_count() or 2), "--target", *m["targets"]], src, log)
            if rc != 0:
                result, failing = "NO BUILD", "the mutant does not compile: fix its snippet"
                survived += 1
            else:
                rc, out = sh(["ctest", "--test-dir", str(build), "-R", m["tests"], "--timeout", "300",
                              "--output-on-failure"], src, log, timeout=1800)
                failed = []
                if "The following tests FAILED:" in out:
                    for line in out.split("The following tests FAILED:", 1)[1].splitlines():
                        if " - " in line:
                            failed.append(line.strip().split(" - ", 1)[1].rsplit(" (", 1)[0])
                if rc != 0:
                    result, failing = "killed", ", ".join(failed) or "(see the log)"
                else:
                    result, failing = "SURVIVED", m["mechanism"]
                    survived += 1
        finally:
            path.write_text(original)
            os.utime(path)
            # Its targets rebuilt from the original now, not left to a later build's timestamps: a
            # mutant object that outlived its run (a clock set back) would fail the next run's baseline.
            sh(["cmake", "--build", str(build), "-j", str(os.cpu_count() or 2), "--target", *m["targets"]], src, log)
        print(f"{m['id']:32} {result:9} {time.time() - t0:5.0f}  {failing}", flush=True)
    print(f"mutation_check: {len(chosen) - survived} of {len(chosen)} killed; log: {scratch / 'mutation_check.log'}")
    return 0 if survived == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
