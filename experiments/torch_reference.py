"""What the PyTorch references (experiments/gpt/torch_step.py, experiments/moe/torch_layer.py)
share: PyTorch imported or exit 77 (the caller then runs ours alone and says so), the device and
the output folder checked before any work, a step timed as moebench times its own (median of
repetitions, with min and max), a time limit on a first step, the suite's provenance columns at the
end of every row, and the CSV written whole or not at all."""
import csv
import datetime
import os
import pathlib
import signal
import socket
import statistics
import subprocess
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


def cpu_model():
    """The CPU's model name, as the suite's own rows give it (/proc/cpuinfo)."""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "cpu"


def source_commit():
    """The suite's commit as its benches stamp it: MOEBENCH_COMMIT, else git's short hash, with
    -dirty when tracked sources outside results/ differ from it; "unknown" outside a checkout."""
    if os.environ.get("MOEBENCH_COMMIT"):
        return os.environ["MOEBENCH_COMMIT"]
    root = pathlib.Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
        changes = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no", "--", ".",
                                  ":(exclude)results"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + "-dirty" if changes else head


def provenance(torch, device, dtype, scale):
    """The suite's provenance columns (backend .. date), in its order, for a row PyTorch measured
    on one device of this process."""
    cuda = device == "cuda"
    nccl = "-"
    if cuda and hasattr(torch.cuda, "nccl"):
        try:
            v = torch.cuda.nccl.version()
            nccl = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
        except (RuntimeError, AttributeError):
            pass  # a PyTorch built without NCCL: "-", as the suite's own rows without it
    driver = "-"
    if cuda:
        try:
            driver = pathlib.Path("/proc/driver/nvidia/version").read_text().split("Kernel Module")[1].split()[0]
        except (OSError, IndexError):
            driver = "unknown"
    return {"backend": device, "device": torch.cuda.get_device_name() if cuda else cpu_model(), "driver": driver,
            "cuda": (torch.version.cuda or "-") if cuda else "-", "nccl": nccl, "ranks": 1,
            "nodes": 1, "hosts": socket.gethostname(), "processors": "one per rank", "link": "none: one device", "dtype": dtype, "scale": scale, "commit": source_commit(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}


def write_rows(out, rows):
    tmp = out.with_suffix(out.suffix + f".tmp.{os.getpid()}")
    with tmp.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    tmp.replace(out)
    print(f"wrote {out}")
