#!/usr/bin/env python3
"""A bench's smoke run as CTest runs it, judged by what it wrote, not by a printed line:

  bench_smoke.py CASE OUT_DIR -- COMMAND [ARGS...]

The CSVs tests/cli/bench_outputs.tsv lists for CASE (its name, or its name without the last
".part": a GPU case without its dtype) are removed from OUT_DIR, COMMAND runs (it writes them
there), and the run passes only if it exits 0 and every listed CSV is there again with
 - every column of the committed results/<same path> (the product users read; the list may
   name another committed file), no other;
 - the listed row count (N exactly, >=N, or ? for a file checked only where it was written);
 - no NaN in any field (the pool's poison mode turns a buffer read after its turn into NaN);
 - every <column>_reps cell as many repetitions as the row's `repetitions`, their median <column>,
   and a breakdown's parts adding up to its total in every repetition;
 - each exchange's `<range>_fastest_rank_ms` at most its slowest rank's `<range>_ms`, in every
   repetition (equal with one rank);
 - a `processors` cell that says what this machine gave the ranks (a core each, or fewer);
 - a pipeline's `grads_vs_one_micro_batch` at fp32 rounding (the micro-batches' gradients summed
   are one micro-batch's);
 - as many fields in every row as in the header.
A GPU case (its name starts with "gpu.") whose bench says "--backend cuda: no usable GPU" exits
77 (CTest's skip) -- unless MOEBENCH_REQUIRE_GPU=1, where a missing or broken GPU is a failure.
"""
import csv
import os
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SKIP = 77
NO_GPU = "--backend cuda: no usable GPU"


def expectations(case):
    """[(csv path, rows spec, committed path of its columns)] for the case, from bench_outputs.tsv."""
    table = {}
    for line in (HERE / "bench_outputs.tsv").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        name, path, rows = fields[:3]
        columns = fields[3].strip() if len(fields) > 3 and fields[3].strip() else path
        table.setdefault(name, []).append((path, rows.strip(), columns))
    return table.get(case) or table.get(case.rsplit(".", 1)[0], [])


def rows_ok(spec, n):
    if spec == "?":
        return n >= 1
    if spec.startswith(">="):
        return n >= int(spec[2:])
    return n == int(spec)


def check_csv(out_dir, rel, spec, columns):
    """Problems with one written CSV (empty: none)."""
    path = out_dir / rel
    if not path.exists():
        return [] if spec == "?" else [f"{rel}: not written"]
    committed = ROOT / "results" / columns
    if not committed.exists():
        return [f"{rel}: no committed results/{columns} to take its columns from"]
    with open(committed, newline="") as f:
        want = next(csv.reader(f))
    with open(path, newline="") as f:
        table = list(csv.reader(f))
    if not table:
        return [f"{rel}: empty"]
    header, body = table[0], table[1:]
    problems = []
    missing = [c for c in want if c not in header]
    extra = [c for c in header if c not in want]
    if missing:
        problems.append(f"{rel}: columns missing (results/{columns} has them): {', '.join(missing)}")
    if extra:
        problems.append(f"{rel}: columns results/{columns} does not have (re-run its experiment): {', '.join(extra)}")
    if not rows_ok(spec, len(body)):
        problems.append(f"{rel}: {len(body)} rows, expected {spec}")
    for i, row in enumerate(body, start=2):
        if len(row) != len(header):
            problems.append(f"{rel}:{i}: {len(row)} fields, the header has {len(header)}")
        nans = [header[j] if j < len(header) else str(j) for j, v in enumerate(row) if v.strip().lower().lstrip("+-") == "nan"]
        if nans:
            problems.append(f"{rel}:{i}: NaN in {', '.join(nans)}")
        if len(row) == len(header):
            problems += check_repetitions(rel, i, dict(zip(header, row)))
            problems += check_processors(rel, i, dict(zip(header, row)))
            problems += check_micro_batch_grads(rel, i, dict(zip(header, row)))
            problems += check_fastest_rank(rel, i, dict(zip(header, row)))
    return problems


def repetitions(cell):
    return [float(x) for x in cell.split(";")] if cell not in ("", "-", "n/a") else []


def check_repetitions(rel, line, row):
    """<c>_reps: as many as the row's repetitions, their median <c>; and a breakdown's parts add up
    to its total in every repetition (others_ms = total_fwd_ms - moe_fwd_ms on one rank)."""
    problems = []
    for column, cell in row.items():
        if not column.endswith("_reps") or cell in ("", "-", "n/a"):
            continue
        reps = repetitions(cell)
        base = column[: -len("_reps")]
        if "repetitions" in row and len(reps) != int(row["repetitions"]):
            problems.append(f"{rel}:{line}: {column} holds {len(reps)} repetitions, the row {row['repetitions']}")
        s = sorted(reps)
        median = s[len(s) // 2] if len(s) % 2 else 0.5 * (s[len(s) // 2 - 1] + s[len(s) // 2])
        if base in row and abs(median - float(row[base])) > 1e-4 * max(1.0, abs(median)):
            problems.append(f"{rel}:{line}: {base} is {row[base]}, the median of {column} {median:.6g}")
    if row.get("others_ms_reps") and row.get("moe_fwd_ms_reps") and row.get("total_fwd_ms_reps"):
        for k, (moe, others, total) in enumerate(zip(repetitions(row["moe_fwd_ms_reps"]), repetitions(row["others_ms_reps"]),
                                                     repetitions(row["total_fwd_ms_reps"]))):
            if abs(moe + others - total) > 1e-4 * total:
                problems.append(f"{rel}:{line}: repetition {k + 1}: moe_fwd {moe:.6g} + others {others:.6g} != total {total:.6g} "
                                "(the parts are not of one rank)")
    return problems


def check_micro_batch_grads(rel, line, row):
    """grads_vs_one_micro_batch: at most 1e-4 of the largest gradient (fp32 sums in another order)."""
    cell = row.get("grads_vs_one_micro_batch")
    if cell in (None, "-") or float(cell) <= 1e-4:
        return []
    return [f"{rel}:{line}: {row.get('schedule')} M={row.get('micro_batches')}: the weight gradients differ from one "
            f"micro-batch's by {cell} of the largest (at most 1e-4: the micro-batches' must sum to the mini-batch's)"]


def check_fastest_rank(rel, line, row):
    """<range>_fastest_rank_ms_reps: the least over the ranks, so in every repetition at most the
    slowest rank's <range>_ms_reps, and the same where one rank ran."""
    problems = []
    for column, cell in row.items():
        if not column.endswith("_fastest_rank_ms_reps") or cell in ("", "-", "n/a"):
            continue
        slowest = row.get(column.replace("_fastest_rank_ms_reps", "_ms_reps"), "")
        for k, (least, most) in enumerate(zip(repetitions(cell), repetitions(slowest))):
            tol = 1e-5 * max(1.0, most)  # both printed to 6 significant digits
            if least > most + tol or (row.get("ranks") == "1" and abs(least - most) > tol):
                problems.append(f"{rel}:{line}: repetition {k + 1}: {column[:-5]} {least:.6g} against the slowest rank's "
                                f"{most:.6g} (the least over {row.get('ranks')} ranks)")
    return problems


def check_processors(rel, line, row):
    """processors: "one per rank" only where the ranks fit this machine's cores, and "N cores shared by
    the R ranks" with R the row's ranks and N fewer than R, no more than the cores, where they do not."""
    cell = row.get("processors")
    if cell is None or row.get("backend") != "cpu":
        return []
    ranks, cores = int(row["ranks"]), os.cpu_count() or 1
    if cell == "one per rank":
        return [] if ranks <= cores else [f"{rel}:{line}: processors '{cell}', but {ranks} ranks ran on {cores} cores"]
    words = cell.split()
    if (len(words) == 7 and words[1:5] == ["cores", "shared", "by", "the"] and words[6] == "ranks" and words[0].isdigit()
            and words[5] == str(ranks) and int(words[0]) < ranks and int(words[0]) <= cores):
        return []
    return [f"{rel}:{line}: processors '{cell}' is not 'one per rank' nor 'N cores shared by the {ranks} ranks' "
            f"with N below {ranks} and at most this machine's {cores} cores"]


def main(argv):
    if len(argv) < 4 or argv[2] != "--":
        print(__doc__, file=sys.stderr)
        return 2
    case, out_dir, command = argv[0], pathlib.Path(argv[1]), argv[3:]
    expected = expectations(case)
    if not expected:
        print(f"bench_smoke: error: no outputs listed for case '{case}' in {HERE / 'bench_outputs.tsv'}", file=sys.stderr)
        return 2
    out_dir.mkdir(parents=True, exist_ok=True)
    for rel, _, _ in expected:  # what is checked below was written by this run
        (out_dir / rel).unlink(missing_ok=True)
    p = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sys.stdout.write(p.stdout[-6000:])
    if case.startswith("gpu.") and NO_GPU in p.stdout:
        if os.environ.get("MOEBENCH_REQUIRE_GPU") == "1":
            print(f"bench_smoke: {case}: FAILED: MOEBENCH_REQUIRE_GPU=1 and the bench found no usable GPU")
            return 1
        print(f"bench_smoke: {case}: skipped, no usable GPU")
        return SKIP
    if p.returncode != 0:
        print(f"bench_smoke: {case}: FAILED: exit code {p.returncode}")
        return 1
    problems = []
    for rel, spec, columns in expected:
        problems += check_csv(out_dir, rel, spec, columns)
    if not any((out_dir / rel).exists() for rel, _, _ in expected):
        problems.append("no CSV written")
    for line in problems:
        print(f"bench_smoke: {case}: {line}")
    if problems:
        print(f"bench_smoke: {case}: FAILED")
        return 1
    print(f"bench_smoke: {case}: exit 0, {len(expected)} CSVs as expected")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
