#!/usr/bin/env python3
"""check_results.py's rules, each shown a planted breach in a scratch tree (and the same tree
without it): a commit ending in "-dirty" outside cuda/ (let be under cuda/), a figure outside its
own range, rows of two scales, a CSV without its provenance columns, and a GPU run's CSV from
before the rows named their nodes (let be under cuda/ only).

  check_results_rules.py SOURCE_DIR     exit 0 when every rule names its breach and only it
"""
import contextlib
import io
import pathlib
import shutil
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import check_results  # noqa: E402

PROVENANCE = ",".join(check_results.PROVENANCE)
BEFORE_NODES = ",".join(check_results.PROVENANCE_BEFORE_NODES)


def row(commit="abc1234", scale="local"):
    return f"cpu,AMD EPYC,-,-,-,4,1,host,2 cores shared by the 4 ranks,emulated,fp32,{scale},{commit},2026-01-01T00:00:00Z"


def row_before_nodes(commit="abc1234"):
    return f"cuda,H200,580,13.0,2.28.9,1,measured,fp32,local,{commit},2026-01-01T00:00:00Z"


def run(source, files):
    """check_results over a tree holding `files` ({path under results/: text}); (exit, output)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        (root / "experiments/reference").mkdir(parents=True)
        shutil.copy(source / "experiments/reference/values.csv", root / "experiments/reference/values.csv")
        results = root / "results"
        results.mkdir()
        (results / "claims.csv").write_text("claim,paper_value,local_csv,gpu_csv,model_csv\n")
        for rel, text in files.items():
            (results / rel).parent.mkdir(parents=True, exist_ok=True)
            (results / rel).write_text(text)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = check_results.main(root)
        return code, out.getvalue()


def main(source):
    source = pathlib.Path(source).resolve()
    header = f"x,x_min,x_max,{PROVENANCE}\n"
    cases = [
        # (what, files, exit wanted, text the output must hold)
        ("a clean tree", {"a/t.csv": header + f"2,1,3,{row()}\n"}, 0, "every rule holds"),
        ("a dirty commit", {"a/t.csv": header + f"2,1,3,{row('abc1234-dirty')}\n"}, 1,
         "a/t.csv: written by code that was not committed (abc1234-dirty)"),
        ("a dirty commit from a GPU lease", {"cuda/a/t.csv": header + f"2,1,3,{row('abc1234-dirty')}\n"}, 0,
         "every rule holds"),
        ("a figure above its range", {"a/t.csv": header + f"4,1,3,{row()}\n"}, 1,
         "a/t.csv:2: x = 4.0 lies outside its range [1.0, 3.0]"),
        ("a figure below its range", {"a/t.csv": header + f"0.5,1,3,{row()}\n"}, 1, "lies outside its range"),
        ("rows of two scales", {"a/t.csv": header + f"2,1,3,{row()}\n2,1,3,{row(scale='paper')}\n"}, 1,
         "rows of 2 scales (local, paper)"),
        ("no provenance", {"a/t.csv": "x,x_min,x_max\n2,1,3\n"}, 1, "do not end with the provenance columns"),
        ("a GPU run's provenance from before nodes", {"cuda/a/t.csv": f"x,x_min,x_max,{BEFORE_NODES}\n2,1,3,{row_before_nodes()}\n"},
         0, "every rule holds"),
        ("the provenance from before nodes outside cuda/", {"a/t.csv": f"x,x_min,x_max,{BEFORE_NODES}\n2,1,3,{row_before_nodes()}\n"},
         1, "do not end with the provenance columns"),
    ]
    failures = 0
    for what, files, want, text in cases:
        code, out = run(source, files)
        if code != want or text not in out:
            failures += 1
            print(f"check_results_rules: {what}: exit {code} (wanted {want}), output without '{text}':\n{out}")
    print(f"check_results_rules: {len(cases) - failures} of {len(cases)} cases as wanted")
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
