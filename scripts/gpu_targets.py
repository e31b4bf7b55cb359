#!/usr/bin/env python3
"""gpu_targets.py TARGETS_DIR: the verdict on each GPU target (docs/gpu.md) from the runs
scripts/gpu_targets.sh left in TARGETS_DIR/<case>/, printed one line each and written to
TARGETS_DIR/targets.csv, with every expert-GEMM route's and attention's figures beside them.

The limits are for one H100 at the paper scale in bf16: a run at another scale, backend or type
gets its figures and the verdict "not comparable", one on another GPU its verdict naming that GPU;
a figure a run could not measure (n/a in its CSV) gets "not measured" with the reason; a case that
failed (cases.tsv) gets a row naming its log, and a target none of whose cases ended well "not
run". Each row says where its time went (the largest parts: a layer's moe.* ranges, a step's
phases from its step_breakdown.csv; the slowest kernels where a kernel log ran; for a target
that is one range's time, the gate's forward, how much of it that range's kernels ran), printed
under a missed target. COMPARISONS set two cases of the run side by side (the gate's kernels apart
over its one pass), reported with both cases' evidence. Exit 0 when the table is written, 2 for a
bad folder."""
import csv
import pathlib
import sys

# (target, case prefix, model row of step.csv or None, column, "<=" or ">=", limit, unit)
TARGETS = [
    ("MoE layer top-1: forward + backward", "moe-top1-", None, "total_ms", "<=", 2.2, "ms"),
    ("MoE layer top-1: time over its roofline floor", "moe-top1-", None, "time_over_floor", "<=", 1.4, ""),
    ("MoE layer top-1: gate forward", "moe-top1-", None, "moe.gating_ms", "<=", 0.05, "ms"),
    ("MoE layer top-1: PyTorch's time over ours", "moe-top1-", None, "speed_vs_torch", ">=", 1.2, ""),
    ("MoE layer 8 experts top-2: forward + backward", "moe-8x-top2-", None, "total_ms", "<=", 1.8, "ms"),
    ("MoE layer 8 experts top-2: over its own expert GEMMs", "moe-8x-top2-", None, "overhead_ratio", "<=", 1.15, ""),
    ("GPT step, dense: time", "gpt-", "dense", "ms_per_step", "<=", 25.0, "ms"),
    ("GPT step, dense: PyTorch's time over ours", "gpt-", "dense", "speed_vs_torch", ">=", 1.0, ""),
    ("GPT step, dense: peak memory over PyTorch's", "gpt-", "dense", "memory_vs_torch", "<=", 1.10, ""),
    ("GPT step, MoE: time (reported)", "gpt-", "moe", "ms_per_step", None, None, "ms"),
    ("GPT step, MoE: PyTorch's time over ours (reported)", "gpt-", "moe", "speed_vs_torch", None, None, ""),
    ("GPT step, MoE: peak memory over PyTorch's (reported)", "gpt-", "moe", "memory_vs_torch", None, None, ""),
]
COMPARABLE = {"scale": "paper", "backend": "cuda", "dtype": "bf16"}
# Two cases of the same run side by side, reported, not judged: (what, case over case, the column).
# The gate's kernels apart over its one pass: what the one pass buys, measured in one run.
COMPARISONS = [
    ("MoE layer top-1: gate forward, kernels apart over one pass (reported)", "moe-top1-padded-gate-separate",
     "moe-top1-padded", "moe.gating_ms"),
]


def number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def rows_of(folder):
    """Every case's measured rows: (case, row) for the layer's local row and the step's rows."""
    out = []
    for case in sorted(p for p in folder.iterdir() if p.is_dir()):
        for csv_path in (case / "moe" / "layer_local.csv", case / "gpt" / "step.csv"):
            if csv_path.is_file():
                with csv_path.open(newline="") as f:
                    out += [(case.name, row, csv_path) for row in csv.DictReader(f)]
    return out


def where_time_goes(row, path, parts=3):
    """The largest parts of a row's time, with their shares: a layer row's moe.* range columns
    (of its total_ms), a step row's innermost phases with their times over their floors
    (step_breakdown.csv beside its step.csv, the eager steps of its model) and, where the layer's
    or the steps' work was logged kernel by kernel (kernels_<dispatcher>.csv, step_kernels.csv),
    its two slowest kernels; the rows its experts computed per routed row where padding made them
    more; first, for a step, the host's one-off work it counted inside its measured steps."""
    if "total_ms" in row:
        total = number(row.get("total_ms"))
        found = [(k[:-3], number(v)) for k, v in row.items() if k.startswith("moe.") and k.endswith("_ms")]
        found = [(k, v, v / total if total else 0, None) for k, v in found if v is not None]
    else:
        breakdown = path.parent / "step_breakdown.csv"
        if not breakdown.is_file():
            return "n/a (no step_breakdown.csv)"
        with breakdown.open(newline="") as f:
            phases = [r for r in csv.DictReader(f) if r.get("model") == row.get("model")]
        parents = {r["phase"].rsplit("/", 1)[0] for r in phases if "/" in r["phase"]}
        found = [(r["phase"].split("/", 1)[-1], number(r["ms"]), number(r["share_of_step"]) or 0,
                  number(r.get("time_over_floor"))) for r in phases if r["phase"] not in parents]
        found = [x for x in found if x[1] is not None]
    found.sort(key=lambda x: -x[1])
    where = "; ".join(f"{k} {v:.3g} ms ({100 * share:.0f}%" + (f", {over:.3g}x its floor)" if over else ")")
                      for k, v, share, over in found[:parts]) or "n/a"
    layer = "total_ms" in row
    kernels = path.parent / (f"kernels_{row.get('dispatcher')}.csv" if layer else "step_kernels.csv")
    if kernels.is_file():
        with kernels.open(newline="") as f:
            logged = [r for r in csv.DictReader(f) if (layer or r.get("model") == row.get("model"))
                      and number(r.get("ms")) is not None]
        logged.sort(key=lambda r: -number(r["ms"]))
        ops = [r for r in logged if not is_idle(r["kernel"]) and not is_host(r["kernel"])]
        gaps = [r for r in logged if is_idle(r["kernel"])]
        if ops:
            where += "; slowest kernels: " + ", ".join(
                f"{r['kernel']} in {r['phase'].rsplit('/', 1)[-1]} {number(r['ms']):.3g} ms" for r in ops[:2])
        if gaps:
            where += (f"; device idle {sum(number(r['ms']) for r in gaps):.3g} ms, the most "
                      f"{gaps[0]['kernel']} in {gaps[0]['phase'].rsplit('/', 1)[-1]} {number(gaps[0]['ms']):.3g} ms")
    floor = number(row.get("expert_gemms_over_floor"))
    where += f"; the expert GEMMs alone at {floor:.3g}x their floor" if floor is not None else ""
    padding = number(row.get("computed_rows_over_routed"))
    where += f"; the experts computed {padding:.3g} rows per routed row" if padding is not None and padding > 1 else ""
    return where if layer else host_work_in_measured(row) + where


def host_work_in_measured(row):
    """What a step row counted the host doing inside its measured steps that a long run does once
    (bench/gpt_step.cpp): cuBLASLt plans made, algorithms timed (each waits on the device), pool
    blocks taken from the system. Empty where it counted none."""
    counted = [(number(row.get(column)), what) for column, what in
               (("new_gemm_plans_in_measured_steps", "new cuBLASLt plans"),
                ("gemm_timings_in_measured_steps", "algorithm timings"),
                ("new_pool_blocks_in_measured_steps", "new pool blocks"))]
    parts = [f"{n:g} {what}" for n, what in counted if n]
    return "host work inside the measured steps: " + ", ".join(parts) + "; " if parts else ""


def is_idle(kernel):
    """A kernel table's row of the device's idle time, not of an op (harness/kernel_table.h)."""
    return kernel.startswith("(device idle")


def is_host(kernel):
    """A kernel table's row of the host's API calls, not of an op (harness/kernel_table.h)."""
    return kernel.startswith("(host) ")


def range_kernels(row, path, name, parts=4):
    """For a target that is one range's time (the gate's forward): how much of it the range's
    logged kernels ran, and the largest of them; how long the device sat idle between them and
    after them until the next range's first op (launches, the host's read of the counts); and,
    where the log timed the host's API calls (CUDA), how long the host spent in them and in which.
    Empty where the layer's kernels were not logged."""
    span = number(row.get(name + "_ms"))
    kernels = path.parent / f"kernels_{row.get('dispatcher')}.csv"
    if not span or not kernels.is_file():
        return ""
    with kernels.open(newline="") as f:
        logged = [r for r in csv.DictReader(f) if r.get("phase") == name and number(r.get("ms")) is not None]
    mine = sorted((r for r in logged if not is_idle(r["kernel"]) and not is_host(r["kernel"])),
                  key=lambda r: -number(r["ms"]))
    if not mine:
        return ""
    busy = sum(number(r["ms"]) for r in mine)
    largest = ", ".join(f"{r['kernel']} {1000 * number(r['ms']):.3g} us" for r in mine[:parts])
    gaps = [r for r in logged if is_idle(r["kernel"])]
    idle = "; ".join(f"{r['kernel']} {1000 * number(r['ms']):.3g} us" for r in gaps) or "no idle logged"
    host = sorted((r for r in logged if is_host(r["kernel"])), key=lambda r: -number(r["ms"]))
    in_api = ""
    if host:
        calls = sum(number(r["calls_per_iteration"]) or 0 for r in host)
        most = ", ".join(f"{r['kernel'][len('(host) '):]} x{number(r['calls_per_iteration']) or 0:g} "
                         f"{1000 * number(r['ms']):.3g} us" for r in host[:parts])
        in_api = (f"the host in {calls:g} API calls {1000 * sum(number(r['ms']) for r in host):.3g} us "
                  f"(logged, with CUPTI's cost): {most}; ")
    return (f"{name}: its {len(mine)} logged kernels and copies ran {1000 * busy:.3g} us of its {1000 * span:.3g} us "
            f"({100 * busy / span:.0f}%); the device idle after them: {idle}; largest: {largest}; " + in_api)


def compare(rows, folder):
    """COMPARISONS' rows: the ratio of one case's figure over another's, both cases' kernels named,
    and each case's range evidence where its kernels were logged."""
    layers = {c: (r, p) for c, r, p in rows if "total_ms" in r}
    out = []
    for what, top, bottom, column in COMPARISONS:
        a, b = layers.get(top), layers.get(bottom)
        x = number(a[0].get(column)) if a else None
        y = number(b[0].get(column)) if b else None
        if x is None or not y:
            out.append({"target": what, "case": "none", "measured": "n/a", "limit": "",
                        "verdict": f"not measured: it needs both cases' {column} ({top}, {bottom})"})
            continue
        name = column[:-3]
        where = "; ".join(f"{case} {value:.3g} ms: " + (range_kernels(row, path, name) or "no kernel log; ")
                          for case, value, (row, path) in ((top, x, a), (bottom, y, b)))
        row = b[0]
        out.append({"target": what, "case": f"{top} / {bottom}",
                    "how": f"gate kernels {a[0].get('gate_kernels', '?')} over {b[0].get('gate_kernels', '?')}",
                    "measured": f"{x / y:.4g}", "unit": "", "limit": "", "verdict": "reported",
                    "where_the_time_goes": where.rstrip("; "), "device": row.get("device", ""),
                    "scale": row.get("scale", ""), "backend": row.get("backend", ""), "dtype": row.get("dtype", ""),
                    "commit": row.get("commit", ""), "source": ", ".join(str(p.relative_to(folder)) for _, p in (a, b))})
    return out


def how_it_ran(row):
    """A layer row's expert route (and its gate's kernels where they ran apart); a step row's
    attention, its experts' route (MoE), and "graph" where the step was replayed from one."""
    if not row.get("attention"):
        how = row.get("expert_gemm") or ""
        return how + ", gate kernels apart" if row.get("gate_kernels") == "separate" else how
    how = row["attention"]
    if row.get("expert_gemm") not in (None, "", "n/a"):
        how += f", {row['expert_gemm']} experts"
    return how + ", graph" if row.get("step_graph") == "captured" else how


def main():
    if len(sys.argv) != 2 or not pathlib.Path(sys.argv[1]).is_dir():
        print("gpu_targets.py: error: give the targets folder scripts/gpu_targets.sh wrote", file=sys.stderr)
        return 2
    folder = pathlib.Path(sys.argv[1])
    rows = rows_of(folder)
    if not rows and not (folder / "cases.tsv").is_file():
        print(f"gpu_targets.py: error: {folder} holds no moe/layer_local.csv, gpt/step.csv or cases.tsv", file=sys.stderr)
        return 2
    table = []
    for target, prefix, model, column, op, limit, unit in TARGETS:
        # The case the target judges: among natural-popularity runs (and the step's model), the
        # fastest one -- the route or attention a user would keep.
        candidates = [(c, r, p) for c, r, p in rows if c.startswith(prefix) and (model is None or r.get("model") == model)
                      and r.get("popularity", "natural") == "natural"]
        time_column = "ms_per_step" if model else "total_ms"
        candidates.sort(key=lambda x: number(x[1].get(time_column)) or float("inf"))
        if not candidates:
            table.append({"target": target, "case": "none", "measured": "n/a", "limit": "",
                          "verdict": "not run (no case of it ended well)"})
            continue
        case, row, path = candidates[0]
        value = row.get(column, "")
        v = number(value)
        how = how_it_ran(row)
        comparable = all(row.get(k) == want for k, want in COMPARABLE.items())
        if limit is None:
            verdict = "reported"
        elif v is None:
            verdict = f"not measured: {value or 'no ' + column + ' column'}"
        elif not comparable:
            verdict = "not comparable (the limit is for one H100 at the paper scale in bf16)"
        else:
            verdict = "met" if (v <= limit if op == "<=" else v >= limit) else "missed"
            if "H100" not in row.get("device", ""):  # an H200, say: judged, but not on the limit's own GPU
                verdict += f" on {row.get('device') or 'an unnamed GPU'} (the limit is one H100's)"
        where = where_time_goes(row, path)
        if column.startswith("moe.") and column.endswith("_ms"):  # one range's time: what ran inside it
            where = range_kernels(row, path, column[:-3]) + where
        table.append({"target": target, "case": case, "how": how, "measured": value, "unit": unit,
                      "limit": f"{op} {limit:g}" if limit is not None else "", "verdict": verdict,
                      "where_the_time_goes": where,
                      "device": row.get("device", ""), "scale": row.get("scale", ""), "backend": row.get("backend", ""),
                      "dtype": row.get("dtype", ""), "commit": row.get("commit", ""), "source": str(path.relative_to(folder))})
    table += compare(rows, folder)
    # Every case beside the targets: what each route and attention measured.
    for case, row, path in rows:
        time_column = "ms_per_step" if "ms_per_step" in row else "total_ms"
        table.append({"target": "case: " + (f"{row.get('model')} step" if "model" in row else
                                            f"layer {row.get('experts')} experts top-{row.get('top_k')}, "
                                            f"{row.get('popularity')} popularity"),
                      "case": case, "how": how_it_ran(row),
                      "measured": row.get(time_column, ""), "unit": "ms", "limit": "", "verdict": "reported",
                      "where_the_time_goes": where_time_goes(row, path),
                      "device": row.get("device", ""), "scale": row.get("scale", ""), "backend": row.get("backend", ""),
                      "dtype": row.get("dtype", ""), "commit": row.get("commit", ""),
                      "source": str(path.relative_to(folder))})
    # Cases that did not end well: their rows are missing above; say which and where they told why.
    cases = folder / "cases.tsv"
    if cases.is_file():
        with cases.open(newline="") as f:
            for c in csv.DictReader(f, delimiter="\t"):
                if c["exit"] == "-":
                    why = {"not selected": "not selected (--cases)",
                           "cuda only": "cuda only (a choice among CUDA's kernels; this run's backend has none)"}.get(
                               c["log"], "out of time (not started before the run's deadline)")
                    table.append({"target": "case: not run", "case": c["case"], "measured": "n/a", "limit": "",
                                  "verdict": "not run: " + why})
                elif c["exit"] != "0":
                    table.append({"target": "case: failed", "case": c["case"], "measured": "n/a", "limit": "",
                                  "verdict": f"failed (exit {c['exit']}): see {c['log']}", "source": c["log"]})
    columns = ["target", "case", "how", "measured", "unit", "limit", "verdict", "where_the_time_goes", "device", "scale",
               "backend", "dtype", "commit", "source"]
    out = folder / "targets.csv"
    tmp = out.with_suffix(".csv.tmp")
    with tmp.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns, restval="")
        w.writeheader()
        w.writerows(table)
    tmp.replace(out)
    for r in table:
        if r["target"] in ("case: failed", "case: not run"):
            print(f"case {r['case']}: {r['verdict']}")
            continue
        if r["target"].startswith("case: "):
            continue
        shown = r["measured"] if number(r["measured"]) is not None else "n/a"
        print(f"{r['target']:55s} {shown:>12s} {r.get('unit', ''):2s} {r['limit']:>8s}  {r['verdict']}"
              f"  [{r['case']}{', ' + r['how'] if r.get('how') else ''}]")
        if r["verdict"].startswith("missed"):
            print(f"{'':57s}where the time goes: {r.get('where_the_time_goes', 'n/a')}")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
