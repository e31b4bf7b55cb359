"""What the check scripts share: one line per breach, prefixed with the script's name, and exit 1
when there is one; run with the wrong number of arguments, the script's usage and exit 2."""
import pathlib
import sys

# A kernel table's idle rows and host rows are told apart where the GPU targets read them.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "scripts"))
from gpu_targets import is_host, is_idle  # noqa: E402,F401  (re-exported to the check scripts)


def number(text):
    """A cell's value, or None where it holds none ("n/a (...)", empty)."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def report(tool, breaches, read=None):
    """`read` (e.g. "185 CSVs"): what was checked, for a last line that counts the breaches in it or
    says that every rule holds."""
    for b in breaches:
        print(f"{tool}: {b}")
    if read is not None:
        print(f"{tool}: {len(breaches)} breaches in {read}" if breaches else f"{tool}: {read}, every rule holds")
    return 1 if breaches else 0


def run(main, usage, arguments):
    if len(sys.argv) != arguments + 1:
        print(usage, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(*sys.argv[1:]))
