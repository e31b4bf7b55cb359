#!/usr/bin/env python3
"""Runs one case of tests/cli/bad_input_corpus.tsv as a user would and checks it fails well:
exit code 2, exactly one line with "error:" and the expected text in it, within 5 s, no crash,
and no file written under its temporary folder (the --out / MOEBENCH_RESULTS it was given).

  bad_input.py CORPUS NAME BUILD_DIR SOURCE_DIR MPIEXEC

Exit 0: the case behaved; 1: it did not (the reason is printed); 77: skipped (a case about a
missing GPU, on a machine that has one)."""
import os
import pathlib
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

LIMIT_S = 5.0


def find_case(corpus, name):
    for line in pathlib.Path(corpus).read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) != 4:
            raise SystemExit(f"bad_input.py: malformed corpus line: {line!r}")
        if fields[0] == name:
            return int(fields[1]), fields[2], fields[3]
    raise SystemExit(f"bad_input.py: no case named {name} in {corpus}")


def has_gpu():
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    out = subprocess.run([smi, "-L"], capture_output=True, text=True)
    return out.returncode == 0 and "GPU" in out.stdout


def files_under(folder):
    return [p for p in pathlib.Path(folder).rglob("*") if p.is_file()]


def main(corpus, name, build, source, mpiexec):
    ranks, expected, command = find_case(corpus, name)
    if "without_gpu" in name and has_gpu():
        print(f"{name}: skipped, this machine has a GPU")
        return 77
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="moebench_bad_input_"))
    try:
        words = [w.replace("TMP", str(tmp)).replace("SOURCE/", str(source) + "/") for w in shlex.split(command)]
        env = dict(os.environ)
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   OMPI_MCA_rmaps_base_oversubscribe="1", OPENBLAS_NUM_THREADS="1",
                   MOEBENCH_BUILD=build, MOEBENCH_RESULTS=str(tmp / "results"))
        while words and "=" in words[0] and not words[0].startswith("-"):
            key, value = words.pop(0).split("=", 1)
            env[key] = value
        program, args = words[0], words[1:]
        if program.startswith("experiments/"):
            argv = [str(pathlib.Path(source) / program)] + args
        else:
            folder = "bench" if (pathlib.Path(build) / "bench" / program).exists() else "tools"
            argv = [str(pathlib.Path(build) / folder / program)] + args
            if not any(a == "--out" or a.startswith("--out=") for a in args):
                argv += ["--out", str(tmp / "results")]
        if ranks > 0:
            argv = [mpiexec, "-np", str(ranks)] + argv
        start = time.monotonic()
        try:
            run = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)
        except subprocess.TimeoutExpired:
            print(f"{name}: FAILED: still running after 30 s (a hang)\n  {shlex.join(argv)}")
            return 1
        seconds = time.monotonic() - start
        output = run.stdout + run.stderr
        errors = [line for line in output.splitlines() if "error:" in line]
        problems = []
        if run.returncode != 2:
            problems.append(f"exit code {run.returncode}, expected 2")
        if len(errors) != 1:
            problems.append(f"{len(errors)} lines with 'error:', expected exactly 1")
        elif expected not in errors[0]:
            problems.append(f"the error line does not contain {expected!r}")
        if any(s in output for s in ("Segmentation fault", "core dumped", "Aborted", "terminate called", "signal")):
            problems.append("the output shows a crash")
        if seconds > LIMIT_S:
            problems.append(f"took {seconds:.1f} s, more than {LIMIT_S:.0f} s")
        written = files_under(tmp)
        if written:
            problems.append("wrote " + ", ".join(str(p) for p in written[:5]))
        print(f"{name}: {shlex.join(argv)}\n  exit {run.returncode} in {seconds:.2f} s; error line: "
              f"{errors[0] if len(errors) == 1 else errors}")
        if problems:
            print(f"{name}: FAILED: " + "; ".join(problems) + "\n--- output ---\n" + output)
            return 1
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) != 6:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(*sys.argv[1:]))
