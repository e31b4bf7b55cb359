#!/usr/bin/env python3
"""Runs every launch command of docs/cluster.md (each line of its sh blocks that starts with
sbatch, srun, scripts/cluster_check.sh or experiments/) on the test Slurm (SLURM_CONF), at the
tiny scale on CPU ranks: the same command with these changes and no others --
  --scale paper -> --scale tiny, --backend cuda -> --backend cpu, --ranks N -> --ranks 4,
  sbatch -N N -> -N 1, --ntasks-per-node N -> --ntasks-per-node 4 -O, --gpus-per-node N dropped,
  srun -n N -> srun -n 4 -O (4 CPU ranks, the most a layout of the tiny scale needs); sbatch waits
  for its job (tests/slurm/sbatch_wait.sh) and writes its output to a file. Each runs in a scratch
  copy of the project (its folders linked, build/ the build under test), so that what a command
  writes under the project, or under the folder it runs in, lands there and not in the checkout. sbatch waits for its job (--wait) and writes its output to a file;
  the results go to a scratch folder (MOEBENCH_RESULTS), not into the checkout.
A command passes when it exits 0 (a job: with exit code 0). Prints one line per command and
exits 1 if any failed, 77 where there is no test cluster.
  docs_commands.py SOURCE_DIR BUILD_DIR [--only K --count N]   (the K-th command of N, from 0;
                                                               N guards the count CTest was set up with)"""
import os
import pathlib
import re
import shlex
import subprocess
import sys
import tempfile
import time

LAUNCHERS = ("sbatch ", "srun ", "scripts/cluster_check.sh", "experiments/")
TINY = [
    (r"--scale paper\b", "--scale tiny"),
    (r"--backend cuda\b", "--backend cpu"),
    (r"--ranks \d+", "--ranks 4"),
    (r"^sbatch -N \d+", "sbatch -N 1"),
    (r"--ntasks-per-node \d+", "--ntasks-per-node 4 -O"),
    (r" --gpus-per-node \d+", ""),
    (r"^srun -n \d+", "srun -n 4 -O"),
]


def commands(page):
    out, block = [], False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            block = line.strip() == "```sh"
            continue
        text = line.split(" #")[0].strip()
        if block and text.startswith(LAUNCHERS):
            out.append(text)
    return out


def tiny(cmd):
    for pattern, replacement in TINY:
        cmd = re.sub(pattern, replacement, cmd)
    return cmd


def scratch_project(src, build, work):
    """A folder that stands for the project: its entries linked, build/ the build under test."""
    project = pathlib.Path(work) / "project"
    project.mkdir()
    for entry in src.iterdir():
        if entry.name in (".git", "results") or entry.name.startswith(("build", "results-")):
            continue
        (project / entry.name).symlink_to(entry)
    (project / "build").symlink_to(build)
    return project


def main():
    src, build = pathlib.Path(sys.argv[1]).resolve(), pathlib.Path(sys.argv[2]).resolve()
    only = count = None
    if "--only" in sys.argv:
        only, count = int(sys.argv[sys.argv.index("--only") + 1]), int(sys.argv[sys.argv.index("--count") + 1])
    conf = os.environ.get("SLURM_CONF", "")
    if not conf or not os.path.isfile(conf):
        print("docs commands: skipped: no test cluster (tests/slurm/cluster.sh start skipped or failed)")
        return 77
    cmds = commands(src / "docs" / "cluster.md")
    if not cmds:
        print("docs commands: no launch command found in docs/cluster.md")
        return 1
    if count is not None and count != len(cmds):
        print(f"docs commands: docs/cluster.md has {len(cmds)} launch commands, CTest was set up for {count}: "
              "configure again (cmake --preset default)")
        return 1
    picked = [(i, c) for i, c in enumerate(cmds) if only is None or i == only]
    failed = 0
    wait = src / "tests" / "slurm" / "sbatch_wait.sh"
    with tempfile.TemporaryDirectory() as work:
        project = scratch_project(src, build, work)
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", MPIRUN_FLAGS="--oversubscribe")
        env.pop("MOEBENCH_BUILD", None)
        env.pop("MOEBENCH_RESULTS", None)
        for i, typed in picked:
            cmd = tiny(typed)
            if cmd.startswith("sbatch "):
                cmd = f"bash {wait} -o {work}/job{i}.out" + cmd[len("sbatch"):]
            t0 = time.monotonic()
            p = subprocess.run(["bash", "-c", cmd], cwd=project, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=600)
            took = time.monotonic() - t0
            job = pathlib.Path(f"{work}/job{i}.out")
            said = (job.read_text() if job.exists() else "") + p.stdout
            if p.returncode == 0:
                print(f"docs commands: ok     {took:5.0f} s  {typed}")
            else:
                failed += 1
                print(f"docs commands: FAILED {took:5.0f} s  {typed}\n  ran: {cmd}\n  exit {p.returncode}: "
                      + "\n  ".join(said.strip().splitlines()[-8:]))
    print(f"docs commands: {len(picked) - failed} of {len(picked)} ran as typed, at the tiny scale")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
