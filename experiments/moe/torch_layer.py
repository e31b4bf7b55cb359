#!/usr/bin/env python3
"""moe.layer's reference: the same MoE layer as moebench's, written in plain PyTorch -- an fp32
gate, softmax, top-k, dropless, two expert GEMMs with a tanh GeLU between them, the outputs
weighted by their gate probability and summed -- forward and backward (dx and every weight's
gradient), timed the way moebench times its own (median of repetitions, with min and max). Two
variants:
  loop        a Python loop over the experts, each on its own rows (the common PyTorch layer);
  grouped_mm  the rows sorted by expert and both GEMMs as one torch._grouped_mm each (where
              this PyTorch has it; a row says why not where it does not).
The tokens follow the same --popularity as the bench's (moe/routing_workload.h): each token is
pushed toward an expert drawn from it by 8 standard deviations along that expert's gate column;
the routed load (busiest expert over the mean) is measured and written, so the two runs' routing
can be compared.

  torch_layer.py --scale tiny|local|paper --device cpu|cuda --out CSV [--tokens N] [--hidden H]
                 [--ffn F] [--experts E] [--top-k K] [--popularity P] [--dtype D]
                 [--repetitions R] [--threads T]

Exit 77 when PyTorch is not installed (the caller skips the comparison); 2 for a bad option."""
import argparse
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from torch_reference import import_torch, provenance, timed, writable_out, write_rows  # noqa: E402

SIZES = {  # the same as bench/moe_layer.cpp's: tokens per rank, hidden, ffn, experts (top-1)
    "tiny": (128, 64, 256, 8),
    "local": (4096, 768, 3072, 16),
    "paper": (8192, 1024, 4096, 64),
}
STEER = 8.0


def parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scale", choices=SIZES, default="local")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--out", required=True)
    for name in ("tokens", "hidden", "ffn", "experts", "top-k"):
        p.add_argument(f"--{name}", type=int)
    p.add_argument("--popularity", default="natural")
    p.add_argument("--dtype", choices=("fp32", "fp16", "bf16"), default="fp32")
    p.add_argument("--repetitions", type=int, default=5)
    p.add_argument("--threads", type=int, default=1, help="CPU threads (default 1, as one moebench rank)")
    args = p.parse_args()
    for name in ("tokens", "hidden", "ffn", "experts", "top_k", "repetitions", "threads"):
        v = getattr(args, name)
        if v is not None and not 1 <= v <= 1 << 30:  # the bench's words for the same option
            p.error(f"--{name.replace('_', '-')}: '{v}' is out of range; allowed: a whole number from 1 to {1 << 30}")
    if not re.fullmatch(r"natural|uniform|zipf:[0-9.eE+-]+|hot:[0-9.eE+-]+", args.popularity) or popularity_weights(
            args.popularity, 2) == "bad":
        p.error(f"--popularity: '{args.popularity}'; allowed: natural, uniform, zipf:S (S > 0), hot:F (0 < F < 1)")
    if args.dtype != "fp32" and args.device != "cuda":
        p.error(f"--dtype: '{args.dtype}' runs on --device cuda only; allowed with --device cpu: fp32")
    return args


def popularity_weights(text, experts):
    """Each expert's probability, as moe/routing_workload.cpp gives it; None for natural, "bad"."""
    if text == "natural":
        return None
    if text == "uniform":
        w = [1.0] * experts
    else:
        kind, _, value = text.partition(":")
        try:
            v = float(value)
        except ValueError:
            return "bad"
        if kind == "zipf" and v > 0:
            w = [1.0 / (i + 1) ** v for i in range(experts)]
        elif kind == "hot" and 0 < v < 1:
            w = [v] + [(1 - v) / (experts - 1)] * (experts - 1) if experts > 1 else [1.0]
        else:
            return "bad"
    s = sum(w)
    return [x / s for x in w]


def main():
    args = parse()
    torch = import_torch(args.device, args.threads)
    if isinstance(torch, int):
        return torch
    F = torch.nn.functional
    out = writable_out(args.out)
    if out is None:
        return 2
    tokens, hidden, ffn, experts = SIZES[args.scale]
    tokens, hidden, experts = args.tokens or tokens, args.hidden or hidden, args.experts or experts
    ffn = args.ffn or (4 * hidden if args.hidden else ffn)
    top_k = args.top_k or 1
    if top_k > experts:
        print(f"{sys.argv[0]}: error: --top-k: {top_k} is more than the {experts} experts", file=sys.stderr)
        return 2
    dev = args.device
    dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    gen = torch.Generator().manual_seed(1234)
    gate = (torch.randn(hidden, experts, generator=gen) * 0.02).to(dev)
    w1 = (torch.randn(experts, hidden, ffn, generator=gen) * 0.02).to(dev, dtype)
    w2 = (torch.randn(experts, ffn, hidden, generator=gen) * 0.02).to(dev, dtype)
    x = torch.randn(tokens, hidden, generator=gen)
    weights = popularity_weights(args.popularity, experts)
    if weights is not None:  # push each token toward an expert drawn from the popularity
        pick = torch.multinomial(torch.tensor(weights), tokens, replacement=True, generator=gen)
        unit = gate.cpu() / gate.cpu().norm(dim=0, keepdim=True)
        x += STEER * unit.t()[pick]
    x = x.to(dev, dtype)
    dy = (torch.randn(tokens, hidden, generator=gen) * 1e-3).to(dev, dtype)
    # The loop holds one weight per expert (an nn.ModuleList's layout: slicing one stacked
    # parameter would give every expert's backward a gradient of all experts' size); the
    # grouped GEMM takes them stacked.
    w1s = [w1[e].clone() for e in range(experts)]
    w2s = [w2[e].clone() for e in range(experts)]
    for t in [gate, w1, w2, x] + w1s + w2s:
        t.requires_grad_(True)

    def route():
        probs = (x.float() @ gate).softmax(dim=-1)
        weight, index = probs.topk(top_k, dim=-1)  # [T, k]
        return weight, index

    def loop_layer():
        weight, index = route()
        y = torch.zeros_like(x)
        for e in range(experts):
            tok, slot = (index == e).nonzero(as_tuple=True)
            if tok.numel():
                h = F.gelu(x[tok] @ w1s[e], approximate="tanh")
                y = y.index_add(0, tok, (h @ w2s[e]) * weight[tok, slot, None].to(dtype))
        return y, index

    def grouped_layer():
        weight, index = route()
        flat = index.reshape(-1)
        order = flat.argsort(stable=True)
        counts = torch.bincount(flat, minlength=experts)
        offs = counts.cumsum(0).to(torch.int32)
        tok = order // top_k
        rows = x[tok]
        h = F.gelu(torch._grouped_mm(rows, w1, offs=offs), approximate="tanh")
        out = torch._grouped_mm(h, w2, offs=offs) * weight.reshape(-1)[order, None].to(dtype)
        return torch.zeros_like(x).index_add(0, tok, out), index

    variants = [("loop", loop_layer, [gate, x] + w1s + w2s)]
    why = None if hasattr(torch, "_grouped_mm") else f"torch._grouped_mm is not in PyTorch {torch.__version__}"
    variants.append(("grouped_mm", grouped_layer, [gate, x, w1, w2]))
    math_kind = f"{args.dtype}, " + ("TF32 matmuls" if dev == "cuda" and dtype == torch.float32 else
                                    f"{args.threads} CPU thread(s)" if dev == "cpu" else "tensor cores")
    if dev == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    rows = []
    for name, layer, params in variants:
        skip = why if name == "grouped_mm" else None
        row = {"variant": name, "tokens": tokens, "hidden": hidden, "ffn": ffn, "experts": experts, "top_k": top_k,
               "popularity": args.popularity, "busiest_over_mean_load": "n/a", "ms": "n/a", "ms_min": "n/a",
               "ms_max": "n/a", "repetitions": 0, "status": "ok", "torch": torch.__version__,
               "torch_device": torch.cuda.get_device_name() if dev == "cuda" else "cpu", "math": math_kind,
               **provenance(torch, dev, args.dtype, args.scale)}

        def step():
            for p in params:
                p.grad = None
            y, index = layer()
            y.backward(dy)
            if dev == "cuda":
                torch.cuda.synchronize()
            return index

        if skip is None:
            try:
                index = step()  # warm-up
            except RuntimeError as e:  # e.g. a grouped GEMM this device or dtype does not have
                skip = f"{name} failed here: {str(e).splitlines()[0]}"
        if skip is not None:
            row["status"] = f"skipped: {skip}"
            rows.append(row)
            print(f"torch_layer {name:10s} skipped: {skip}")
            continue
        counts = torch.bincount(index.reshape(-1), minlength=experts).double()
        row["busiest_over_mean_load"] = f"{(counts.max() / counts.mean()).item():.6g}"
        median, fastest, slowest = timed(step, args.repetitions)
        row.update({"ms": f"{median:.6g}", "ms_min": f"{fastest:.6g}", "ms_max": f"{slowest:.6g}",
                    "repetitions": args.repetitions})
        rows.append(row)
        print(f"torch_layer {name:10s} {median:9.3f} ms forward + backward ({dev}, torch {torch.__version__})")
    write_rows(out, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
