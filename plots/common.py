"""Shared by the plot scripts: reading a results CSV and titling a figure with its provenance."""
import csv
import pathlib
import sys

import matplotlib

matplotlib.use("Agg")


def read_rows(path):
    path = pathlib.Path(path)
    if not path.exists():
        print(f"{sys.argv[0]}: error: {path} does not exist (run the experiment first)", file=sys.stderr)
        sys.exit(1)
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def nonempty_rows(path):
    """read_rows, and an error (exit 1) when the CSV holds no row."""
    rows = read_rows(path)
    if not rows:
        print(f"{sys.argv[0]}: error: {path} has no rows", file=sys.stderr)
        sys.exit(1)
    return rows


def provenance_line(row):
    link = row.get("link", "")
    link = f", link {link}" if link and row.get("ranks") not in ("1", None) else ""
    return (f"{row['backend']} backend, {row['ranks']} ranks{link}, {row['dtype']}, {row['scale']} scale\n"
            f"{row['device']} ({row['commit']})")


def num(value):
    """A CSV number; "n/a" (a value the paper does not give, or a ratio below the timer's resolution) is NaN."""
    return float(value) if value not in ("", None, "n/a") else float("nan")


def save(fig, path, dpi=120):
    """Written whole or not at all, as the CSVs are: a temporary file beside it, then renamed."""
    import os
    path = pathlib.Path(path)
    fig.tight_layout()
    tmp = path.with_name(f"{path.stem}.tmp.{os.getpid()}{path.suffix}")
    fig.savefig(tmp, dpi=dpi)
    tmp.replace(path)
    print(f"wrote {path}")


def run_main(main, folder_hint):
    """The scripts' entry: one argument, the results folder; main's return value is the exit code."""
    if len(sys.argv) != 2:
        print(f"usage: {sys.argv[0]} {folder_hint}", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))


_PAPER_VALUES = None


def paper_value(value_id):
    """A number of the papers, from experiments/reference/values.csv (MOEBENCH_REFERENCE overrides
    the folder): the one place the papers' numbers are typed."""
    global _PAPER_VALUES
    if _PAPER_VALUES is None:
        import os
        folder = os.environ.get("MOEBENCH_REFERENCE") or pathlib.Path(__file__).resolve().parent.parent / "experiments" / "reference"
        with open(pathlib.Path(folder) / "values.csv", newline="") as f:
            _PAPER_VALUES = {r["id"]: float(r["value"]) for r in csv.DictReader(f)}
    if value_id not in _PAPER_VALUES:
        print(f"{sys.argv[0]}: error: no paper value '{value_id}' in experiments/reference/values.csv", file=sys.stderr)
        sys.exit(1)
    return _PAPER_VALUES[value_id]
