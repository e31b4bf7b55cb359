#!/usr/bin/env python3
"""moe/kernels_<dispatcher>.csv (moebench_moe_layer --kernels) against the same run's
layer_<dispatcher>.csv: kernel rows for the dispatcher, every one under a range of the layer (the
layer enqueues no op outside its moe.* ranges), each with its calls; every range of the forward
and the backward that does work holding an op, and every range holding one timed above zero in
the layer's measured iterations; on the CPU, the expert GEMMs under moe.expert and
moe.expert.bwd and the gate's GEMM under moe.gating: the kernel log puts each op under the range
that launched it. The device's idle rows sit under the layer's ranges too, and with the ops take no
more than twice an iteration (the logged ones launch slower): a gap is time between ops. The
host's API call rows (CUDA: "(host) FUNCTION") are neither ops nor idle: each has calls and a time
of its own, under a range of the layer or outside them all (a range's own API calls before it
opens). The gate's routing under moe.gating is what the row's gate_kernels names: the CPU's one
route_tokens op, CUDA's one-pass kernel and none of those it replaced, or those and not it.

  check_layer_kernels.py KERNELS_CSV LAYER_CSV    exit 0 when all holds, 1 with a line per breach
"""
import csv

import checklib
from checklib import is_host, is_idle, number

WORKING = ["moe.gating", "moe.dispatch", "moe.expert", "moe.combine",
           "moe.combine.bwd", "moe.expert.bwd", "moe.dispatch.bwd", "moe.gating.bwd"]
# The fused gate's routing ops by the row's gate_kernels: (a part of a name that must be among
# moe.gating's ops, parts of names that must not be). The paper gate's (arg_max_rounds) are its own.
SEPARATE = ["softmax_topk", "tile_histogram", "tile_offsets", "tile_positions"]
ROUTING = {"cpu_op": ("route_tokens", ["softmax", "assign_positions", "aux_loss_stats"]),
           "one_pass": ("route_tokens_kernel", SEPARATE + ["aux_loss_stats"]),
           "separate": ("softmax_topk", ["route_tokens_kernel"])}
# On the CPU backend: a kernel each of these ranges runs (a part of its name, whatever the route).
EXPECTED = {"moe.expert": "gemm", "moe.expert.bwd": "gemm", "moe.gating": "gemm"}


def main(kernels_path, layer_path):
    breaches = []
    kernels = list(csv.DictReader(open(kernels_path, newline="")))
    layer = list(csv.DictReader(open(layer_path, newline="")))
    if len(layer) != 1:
        return checklib.report("check_layer_kernels", [f"{layer_path}: {len(layer)} rows, not one"])
    row = layer[0]
    ranges = {k[:-3]: number(v) for k, v in row.items() if k.startswith("moe.") and k.endswith("_ms")}
    mine = [k for k in kernels if k["dispatcher"] == row["dispatcher"]]
    if not mine or len(mine) != len(kernels):
        breaches.append(f"{kernels_path}: {len(mine)} of {len(kernels)} rows are dispatcher {row['dispatcher']}'s")
    for k in mine:
        if number(k["ms"]) is None:
            breaches.append(f"{k['phase']} {k['kernel']}: no time ({k['ms']})")
            continue
        host = is_host(k["kernel"])
        if k["phase"] not in ranges:
            if not (host and k["phase"] == "(outside ranges)"):
                breaches.append(f"{k['kernel']} under '{k['phase']}', no range of the layer ({', '.join(sorted(ranges))})")
        elif not host and not (ranges[k["phase"]] or 0) > 0:
            breaches.append(f"{k['phase']}: {k['kernel']} logged under it, but the layer timed it at {ranges[k['phase']]} ms")
        if not (number(k["calls_per_iteration"]) or 0) > 0:
            breaches.append(f"{k['phase']} {k['kernel']}: calls_per_iteration {k['calls_per_iteration']}")
    # The logged iterations launch slower than the measured ones (CUPTI's callback on every API
    # call), so their idle is longer; idle counted twice still exceeds this.
    spanned = sum(number(k["ms_min"]) or 0 for k in mine if not is_host(k["kernel"]))
    if spanned > (number(row.get("total_ms_max")) or 0) * 2 + 0.05:
        breaches.append(f"its ops and idle rows took at least {spanned:g} ms, an iteration at most {row.get('total_ms_max')}")
    for name in WORKING:
        inside = {k["kernel"] for k in mine if k["phase"] == name and not is_idle(k["kernel"]) and not is_host(k["kernel"])}
        if not inside:
            breaches.append(f"{name}: no op logged under it")
        want = EXPECTED.get(name)
        if want and row.get("backend") == "cpu" and inside and not any(want in k for k in inside):
            breaches.append(f"{name}: no {want} among its ops {sorted(inside)}")
    gating = {k["kernel"] for k in mine if k["phase"] == "moe.gating" and not is_idle(k["kernel"])
              and not is_host(k["kernel"])}
    how = row.get("gate_kernels")
    if how is None:
        breaches.append(f"{layer_path}: no gate_kernels column")
    elif how in ROUTING:
        want, not_wanted = ROUTING[how]
        if not any(want in k for k in gating):
            breaches.append(f"moe.gating: gate_kernels {how}, and no {want} among its ops {sorted(gating)}")
        stray = sorted(k for k in gating for part in not_wanted if part in k)
        if stray:
            breaches.append(f"moe.gating: gate_kernels {how}, and it ran {stray}")
    elif how != "arg_max_rounds":
        breaches.append(f"{layer_path}: gate_kernels '{how}' is none of {sorted(ROUTING)} or arg_max_rounds")
    return checklib.report("check_layer_kernels", breaches)


if __name__ == "__main__":
    checklib.run(main, __doc__, 2)
