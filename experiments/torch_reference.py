"""What the PyTorch references (experiments/gpt/torch_step.py, experiments/moe/torch_layer.py)
share: PyTorch imported or exit 77 (the caller then runs ours alone and says so), the device and
the output folder checked before any work, a step timed as moebench times its own (median of
repetitions, with min and max), a time limit on a first step, and the CSV written whole or not at
all."""
import csv
import os
import pathlib
import signal
import statistics
import sys
import time

NO_TORCH = 77


def import_torch(device, threads):
    """torch with `threads` CPU threads, or an exit code: 77 without PyTorch, 2 for a cuda device
    PyTorch cannot see. One BLAS thread per moebench rank by default: PyTorch's BLAS would
    otherwise take every core."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(threads)
    try:
        import torch
    except ImportError:
        print(f"{sys.argv[0]}: PyTorch is not installed: no reference (install python3-torch)", file=sys.stderr)
        return NO_TORCH
    if device == "cuda" and not torch.cuda.is_available():
        print(f"{sys.argv[0]}: error: --device cuda: PyTorch sees no usable GPU", file=sys.stderr)
        return 2
    torch.set_num_threads(threads)
    return torch


def writable_out(path):
    """The --out path when its folder can be written, else None (said on stderr)."""
    out = pathlib.Path(path)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        probe = out.parent / f".probe.{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        print(f"{sys.argv[0]}: error: --out: {out.parent} is not writable ({e.strerror})", file=sys.stderr)
        return None
    return out


def within(seconds, fn):
    """fn(), or TimeoutError once it has run `seconds` (None: no limit). SIGALRM: the main thread only."""
    if not seconds:
        return fn()

    def expire(signum, frame):
        raise TimeoutError(f"took over {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return fn()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def timed(step, repetitions):
    """step() run `repetitions` times: (median, min, max) in ms."""
    times = []
    for _ in range(repetitions):
        start = time.perf_counter()
        step()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times), min(times), max(times)


def write_rows(out, rows):
    tmp = out.with_suffix(out.suffix + f".tmp.{os.getpid()}")
    with tmp.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    tmp.replace(out)
    print(f"wrote {out}")
