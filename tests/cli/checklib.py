"""What the check scripts share: one line per breach, prefixed with the script's name, and exit 1
when there is one; run with the wrong number of arguments, the script's usage and exit 2."""
import sys


def number(text):
    """A cell's value, or None where it holds none ("n/a (...)", empty)."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def is_idle(kernel):
    """A kernel table's row of the device's idle time ("(device idle)", "(device idle until P)"),
    not of an op."""
    return kernel.startswith("(device idle")


def report(tool, breaches):
    for b in breaches:
        print(f"{tool}: {b}")
    return 1 if breaches else 0


def run(main, usage, arguments):
    if len(sys.argv) != arguments + 1:
        print(usage, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(*sys.argv[1:]))
