#!/usr/bin/env python3
"""Runs the launch commands of docs/cluster.md (each line of its sh blocks that starts with
sbatch, srun, scripts/cluster_check.sh or experiments/) on the test Slurm (SLURM_CONF), at the
tiny scale on CPU ranks, each as typed but with its scale, backend and GPU options changed:
  --scale paper -> --scale tiny, --backend cuda -> --backend cpu, --gpus-per-node N dropped.
sbatch waits for its job (tests/slurm/sbatch_wait.sh) and writes its output to a file. A command
passes when it exits 0 (a job: with exit code 0).

One node (the `slurm` label): the lines that run on one node (sbatch -N 1, cluster_check.sh and
the experiments under mpirun), each in a scratch copy of the project (its folders linked, build/
the build under test), with --ranks N -> --ranks 4 and --ntasks-per-node N -> --ntasks-per-node 4 -O
(4 CPU ranks, the most a layout of the tiny scale needs).
  docs_commands.py SOURCE_DIR BUILD_DIR --only K --count N   (the K-th command of N, from 0; N
                                                             guards the count CTest was set up with)
Several nodes (the `nodes` label, on the login node of tests/slurm/cluster.sh --nodes 2): the lines
that take several nodes (sbatch -N 2 and more, srun), all in order in one scratch project under
WORK (the cluster's shared home, which every node sees), with sbatch -N N -> -N 2 (the test
cluster's nodes), --ntasks-per-node N -> 2 (a CPU each, as a GPU each) and srun -n N -> srun -n 4
(2 nodes of 2); each sbatch submitted from another folder by its script's path. The self-check's
ranks run on both nodes; every CSV the lines wrote lands in the project's results-tiny/, says it
ran on both nodes and, where it has a processors column, that more ranks than this machine's cores
shared them; then the docs' report command, as typed, judges them into results-tiny/REPORT.md.
  docs_commands.py SOURCE_DIR BUILD_DIR --nodes 2 --work WORK
Prints one line per command and exits 1 if any failed, 77 where there is no test cluster."""
import csv
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

LAUNCHERS = ("sbatch ", "srun ", "scripts/cluster_check.sh", "experiments/")
TINY = [
    (r"--scale paper\b", "--scale tiny"),
    (r"--backend cuda\b", "--backend cpu"),
    (r" --gpus-per-node \d+", ""),
]
ONE_NODE = [
    (r"--ranks \d+", "--ranks 4"),
    (r"--ntasks-per-node \d+", "--ntasks-per-node 4 -O"),
]
TEST_NODES = 2
SEVERAL_NODES = [
    (r"^sbatch -N \d+", f"sbatch -N {TEST_NODES}"),
    (r"--ntasks-per-node \d+", "--ntasks-per-node 2"),
    (r"^srun -n \d+", f"srun -n {2 * TEST_NODES}"),
]
# What the page types to judge a results folder: run after the launches, not as one.
REPORT = re.compile(r"^experiments/claims/report\.sh --results (\S+)$")


def several_nodes(cmd):
    """A line that takes several nodes: sbatch -N 2 and more, or srun (its tasks span the nodes)."""
    m = re.match(r"sbatch -N (\d+)", cmd)
    return cmd.startswith("srun ") or (m is not None and int(m.group(1)) >= 2)


def commands(page, reports=False):
    """The page's launch lines, or with `reports` its lines that judge a results folder."""
    out, block = [], False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            block = line.strip() == "```sh"
            continue
        text = line.split(" #")[0].strip()
        if block and text.startswith(LAUNCHERS) and (not REPORT.match(text)) == (not reports):
            out.append(text)
    return out


def tiny(cmd, nodes):
    for pattern, replacement in TINY + (SEVERAL_NODES if nodes else ONE_NODE):
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


def run(typed, cmd, project, work, env, i, elsewhere=False):
    """Runs one command in the project, or with `elsewhere` a job submitted from another folder by
    its script's path; (passed, the line that says so)."""
    wait = project / "tests" / "slurm" / "sbatch_wait.sh"
    cwd = project
    if cmd.startswith("sbatch "):
        cmd = f"bash {wait} -o {work}/job{i}.out" + cmd[len("sbatch"):]
        if elsewhere:
            cwd = pathlib.Path(work) / "elsewhere"
            cwd.mkdir(exist_ok=True)
            cmd = re.sub(r" (scripts|experiments)/", f" {project}/\\1/", cmd, count=1)
    t0 = time.monotonic()
    p = subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=600)
    took = time.monotonic() - t0
    job = pathlib.Path(f"{work}/job{i}.out")
    said = (job.read_text() if job.exists() else "") + p.stdout
    # The self-check across the nodes: its ranks on every one of them.
    spread = f"ranks on {TEST_NODES} node(s)"
    if p.returncode == 0 and elsewhere and "cluster_check.sh" in cmd and spread not in said:
        return False, (f"docs commands: FAILED {took:5.0f} s  {typed}\n  its ranks did not run on {TEST_NODES} nodes: "
                       + "\n  ".join(line for line in said.splitlines() if "placement" in line))
    if p.returncode == 0:
        return True, f"docs commands: ok     {took:5.0f} s  {typed}"
    # Enough of the job's output to show a rank's own error or a crash's backtrace above the launcher's lines.
    return False, (f"docs commands: FAILED {took:5.0f} s  {typed}\n  ran: {cmd}\n  exit {p.returncode}: "
                   + "\n  ".join(said.strip().splitlines()[-40:]))


def option(name):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else None


def main():
    src, build = pathlib.Path(sys.argv[1]).resolve(), pathlib.Path(sys.argv[2]).resolve()
    only, count, nodes, work_root = option("--only"), option("--count"), option("--nodes"), option("--work")
    conf = os.environ.get("SLURM_CONF", "")
    if not conf or not os.path.isfile(conf):
        print("docs commands: skipped: no test cluster (tests/slurm/cluster.sh start skipped or failed)")
        return 77
    page = src / "docs" / "cluster.md"
    cmds = commands(page)
    if not cmds:
        print("docs commands: no launch command found in docs/cluster.md")
        return 1
    if count is not None and int(count) != len(cmds):
        print(f"docs commands: docs/cluster.md has {len(cmds)} launch commands, CTest was set up for {count}: "
              "configure again (cmake --preset default)")
        return 1
    if nodes is not None:
        picked = [(i, c) for i, c in enumerate(cmds) if several_nodes(c)]
    else:
        picked = [(i, c) for i, c in enumerate(cmds) if only is None or i == int(only)]
        if any(several_nodes(c) for _, c in picked):
            print(f"docs commands: command {only} takes several nodes: the `nodes` label runs it")
            return 1
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", MPIRUN_FLAGS="--oversubscribe")
    env.pop("MOEBENCH_BUILD", None)
    env.pop("MOEBENCH_RESULTS", None)
    if work_root:
        pathlib.Path(work_root).mkdir(parents=True, exist_ok=True)
    work = tempfile.mkdtemp(prefix="docs.", dir=work_root)
    failed = 0
    try:
        project = scratch_project(src, build, work)
        for i, typed in picked:
            ok, line = run(typed, tiny(typed, nodes is not None), project, work, env, i, elsewhere=nodes is not None)
            failed += not ok
            print(line, flush=True)
        if nodes is not None:
            failed += not judge_report(page, project, work, env)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"docs commands: {len(picked) - failed} of {len(picked)} ran as typed, at the tiny scale"
          + (f", on {nodes} nodes" if nodes else ""))
    return 1 if failed else 0


def judge_report(page, project, work, env):
    """The page's report command, its folder changed to the tiny scale's: a REPORT.md from the runs."""
    typed = commands(page, reports=True)
    if not typed:
        print("docs commands: FAILED docs/cluster.md types no `experiments/claims/report.sh --results DIR` line")
        return False
    results = project / "results-tiny"
    wrong = []
    for f in sorted(results.rglob("*.csv")):
        for r in csv.DictReader(f.open(newline="")):
            # f17's one-node step, and its rows of each step
            one_node_step = "mpmoe_scaling/N1/" in f.as_posix() or (f.name == "f17_scaling.csv" and r.get("ideal") == "1")
            if "nodes" in r and r.get("backend") != "model" and r["nodes"] != ("1" if one_node_step else str(TEST_NODES)):
                wrong.append(f"{f.relative_to(results)}: nodes {r['nodes']} ({r.get('hosts')})")
                break
            # The nodes share this machine's cores: more ranks than cores is no core each.
            if r.get("processors") and int(r["ranks"]) > (os.cpu_count() or 1) and "shared by the" not in r["processors"]:
                wrong.append(f"{f.relative_to(results)}: processors '{r['processors']}' for {r['ranks']} ranks "
                             f"on {os.cpu_count()} cores")
                break
    if not any(results.rglob("*.csv")) or wrong:
        print("docs commands: FAILED the runs' CSVs are not in results-tiny/, not from "
              f"{TEST_NODES} nodes, or claim a core per rank: {'; '.join(wrong[:5]) or 'none there'}")
        return False
    cmd = typed[0].replace("results-cuda-paper", "results-tiny")
    ok, line = run(typed[0], cmd, project, work, env, "report")
    print(line, flush=True)
    report = project / "results-tiny" / "REPORT.md"
    if ok and not report.is_file():
        print(f"docs commands: FAILED {cmd} wrote no {report.relative_to(project)}")
        return False
    return ok


if __name__ == "__main__":
    sys.exit(main())
