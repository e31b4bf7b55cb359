#!/usr/bin/env python3
"""gpt.step's reference: the same GPT model as moebench's transformer, written in plain PyTorch --
token and position embeddings, pre-norm blocks of causal multi-head attention and a tanh-GeLU
MLP without biases, a final LayerNorm, the output layer tied to the token embedding, next-token
cross-entropy; the MoE model swaps every other MLP for a top-1, dropless mixture of experts with
an fp32 gate and the load-balancing loss -- and one AdamW step, timed the way moebench times its
own (median of repetitions, with min and max). Variants, each a row (one this PyTorch lacks is a
row saying so):
  eager     attention as explicit scores, mask and softmax (moebench's own math);
  sdpa      attention through scaled_dot_product_attention (causal), the fused AdamW where the
            device has it (CUDA), bf16/fp16 autocast with --dtype;
  compiled  the sdpa model through torch.compile; MOEBENCH_TORCH_COMPILE_LIMIT (seconds) bounds
            its first step, compilation included (scripts/gpu_box.sh lease sets it): one that
            takes longer is a row saying so.
The CSV names each variant's attention and optimizer, and on CUDA its peak of allocated memory
over the timed steps (torch.cuda.max_memory_allocated; PyTorch keeps no such count on the CPU);
the bench compares with the fastest.

  torch_step.py --scale tiny|local|paper --device cpu|cuda --out CSV [--sequences N]
                [--repetitions R] [--threads T]

Exit 77 when PyTorch is not installed (the caller skips the comparison); 2 for a bad option."""
import argparse
import math
import os
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from torch_reference import import_torch, provenance, timed, within, writable_out, write_rows  # noqa: E402

SIZES = {  # the same as bench/gpt_step.cpp's: vocab, seq, hidden, heads, ffn, layers, experts, sequences
    "tiny": (64, 16, 32, 4, 128, 2, 4, 2),
    "local": (512, 128, 256, 4, 1024, 4, 8, 4),
    "paper": (50304, 2048, 1024, 16, 4096, 24, 8, 2),  # 8 experts: 64 would not fit one device
}


def parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scale", choices=SIZES, default="local")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--out", required=True)
    p.add_argument("--sequences", type=int)
    p.add_argument("--repetitions", type=int, default=5)
    p.add_argument("--threads", type=int, default=1, help="CPU threads (default 1, as one moebench rank)")
    p.add_argument("--dtype", choices=("fp32", "fp16", "bf16"), default="fp32",
                   help="fp16/bf16: autocast matmuls and activations (fp32 weights, as PyTorch's AMP); cuda only")
    args = p.parse_args()
    for name in ("sequences", "repetitions", "threads"):
        v = getattr(args, name)
        if v is not None and v < 1:
            p.error(f"--{name}: must be >= 1, got {v}")
    if args.dtype != "fp32" and args.device != "cuda":
        p.error(f"--dtype: '{args.dtype}' runs on --device cuda only (PyTorch's AMP); allowed with --device cpu: fp32")
    limit = os.environ.get("MOEBENCH_TORCH_COMPILE_LIMIT", "")
    try:
        args.compile_limit = float(limit) if limit else None
    except ValueError:
        args.compile_limit = math.nan
    if args.compile_limit is not None and not 0 < args.compile_limit < math.inf:
        p.error(f"MOEBENCH_TORCH_COMPILE_LIMIT: '{limit}' is not a positive number of seconds")
    return args


def build(torch, vocab, seq, hidden, heads, ffn, layers, experts, device, sdpa=False):
    nn, F = torch.nn, torch.nn.functional

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(hidden, 3 * hidden, bias=False)
            self.out = nn.Linear(hidden, hidden, bias=False)

        def forward(self, x):
            b, s, h = x.shape
            d = h // heads
            q, k, v = self.qkv(x).split(h, dim=2)
            q, k, v = (t.view(b, s, heads, d).transpose(1, 2) for t in (q, k, v))
            if sdpa:
                return self.out(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, h))
            scores = q @ k.transpose(2, 3) / math.sqrt(d)
            mask = torch.ones(s, s, dtype=torch.bool, device=x.device).triu(1)
            p = scores.masked_fill(mask, float("-inf")).softmax(dim=-1)
            return self.out((p @ v).transpose(1, 2).reshape(b, s, h))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.w1 = nn.Linear(hidden, ffn, bias=False)
            self.w2 = nn.Linear(ffn, hidden, bias=False)

        def forward(self, x):
            return self.w2(F.gelu(self.w1(x), approximate="tanh"))

    class MoE(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate = nn.Linear(hidden, experts, bias=False)
            self.experts = nn.ModuleList(MLP() for _ in range(experts))
            self.aux = None

        def forward(self, x):
            shape = x.shape
            x = x.reshape(-1, hidden)
            probs = self.gate(x.float()).softmax(dim=-1)
            weight, index = probs.max(dim=-1)
            y = torch.zeros_like(x)
            for e, expert in enumerate(self.experts):
                rows = (index == e).nonzero(as_tuple=True)[0]
                if rows.numel():
                    y.index_add_(0, rows, expert(x[rows]) * weight[rows, None].to(x.dtype))
            density = F.one_hot(index, experts).float().mean(dim=0)
            self.aux = 0.01 * experts * (density * probs.mean(dim=0)).sum()
            return y.view(shape)

    class Block(nn.Module):
        def __init__(self, moe):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
            self.attn = Attention()
            self.mlp = MoE() if moe else MLP()

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tokens = nn.Embedding(vocab, hidden)
            self.positions = nn.Embedding(seq, hidden)
            self.blocks = nn.ModuleList(Block(experts > 0 and i % 2 == 1) for i in range(layers))
            self.lnf = nn.LayerNorm(hidden)
            for p in self.parameters():
                if p.dim() > 1:
                    nn.init.normal_(p, std=0.02)

        def forward(self, tokens, targets):
            x = self.tokens(tokens) + self.positions.weight[None, : tokens.shape[1]]
            for block in self.blocks:
                x = block(x)
            logits = self.lnf(x) @ self.tokens.weight.t()
            loss = F.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1))
            for block in self.blocks:
                if isinstance(block.mlp, MoE):
                    loss = loss + block.mlp.aux
            return loss

    return GPT().to(device)


def main():
    args = parse()
    torch = import_torch(args.device, args.threads)
    if isinstance(torch, int):
        return torch
    out = writable_out(args.out)
    if out is None:
        return 2
    vocab, seq, hidden, heads, ffn, layers, experts, sequences = SIZES[args.scale]
    sequences = args.sequences or sequences
    if args.device == "cuda":  # as moebench's default: tensor cores (TF32) for fp32 GEMMs
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    math_kind = "fp32, TF32 matmuls" if args.device == "cuda" else f"fp32, {args.threads} CPU thread(s)"
    autocast = None
    if args.dtype != "fp32":
        autocast = torch.float16 if args.dtype == "fp16" else torch.bfloat16
        math_kind = f"{args.dtype} autocast, fp32 weights"
    gen = torch.Generator().manual_seed(7)
    tokens = torch.randint(vocab, (sequences, seq), generator=gen).to(args.device)
    targets = torch.randint(vocab, (sequences, seq), generator=gen).to(args.device)
    has_sdpa = hasattr(torch.nn.functional, "scaled_dot_product_attention")
    has_compile = hasattr(torch, "compile")
    fused_adamw = args.device == "cuda" and "fused" in torch.optim.AdamW.__init__.__code__.co_varnames
    if args.device == "cuda" and has_sdpa:
        enabled = [n for n, on in (("flash", torch.backends.cuda.flash_sdp_enabled()),
                                    ("mem-efficient", torch.backends.cuda.mem_efficient_sdp_enabled()),
                                    ("math", torch.backends.cuda.math_sdp_enabled())) if on]
        sdpa_name = f"sdpa, causal (PyTorch picks among: {', '.join(enabled)})"
    else:
        sdpa_name = "sdpa, causal (CPU kernels)"
    variants = [("eager", False, False, None, "explicit scores, mask, softmax"),
                ("sdpa", True, False, None if has_sdpa else f"scaled_dot_product_attention is not in PyTorch {torch.__version__}",
                 sdpa_name),
                ("compiled", True, True,
                 None if has_sdpa and has_compile else f"torch.compile is not in PyTorch {torch.__version__}",
                 sdpa_name + " under torch.compile")]
    rows = []
    for name, n_experts in (("dense", 0), ("moe", experts)):
        for variant, sdpa, compiled, skip, attention in variants:
            row = {"model": name, "variant": variant, "layers": layers, "hidden": hidden, "heads": heads, "ffn": ffn,
                   "seq": seq, "vocab": vocab, "experts": n_experts, "sequences": sequences,
                   "ms_per_step": "n/a", "ms_per_step_min": "n/a", "ms_per_step_max": "n/a", "repetitions": 0,
                   "peak_mib": "n/a: PyTorch counts allocated memory on CUDA only",
                   "status": "ok", "attention": attention,
                   "optimizer": "AdamW, fused" if sdpa and fused_adamw else "AdamW (PyTorch's default implementation)",
                   "torch": torch.__version__,
                   "torch_device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
                   "math": math_kind,
                   **provenance(torch, args.device, args.dtype, args.scale)}
            if skip:
                row["status"] = f"skipped: {skip}"
                rows.append(row)
                print(f"torch_step {name:5s} {variant:8s} skipped: {skip}")
                continue
            torch.manual_seed(1)
            model = build(torch, vocab, seq, hidden, heads, ffn, layers, n_experts, args.device, sdpa)
            extra = {"fused": True} if sdpa and fused_adamw else {}
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, **extra)
            run = torch.compile(model) if compiled else model
            scaler = torch.cuda.amp.GradScaler() if autocast == torch.float16 else None

            def step():
                opt.zero_grad(set_to_none=True)
                if autocast is None:
                    run(tokens, targets).backward()
                    opt.step()
                else:
                    with torch.autocast(device_type="cuda", dtype=autocast):
                        loss = run(tokens, targets)
                    if scaler:  # fp16 needs loss scaling in PyTorch's AMP
                        scaler.scale(loss).backward()
                        scaler.step(opt)
                        scaler.update()
                    else:
                        loss.backward()
                        opt.step()
                if args.device == "cuda":
                    torch.cuda.synchronize()

            try:
                within(args.compile_limit if compiled else None, step)  # warm-up (and compilation)
            except Exception as e:  # a compiler or kernel this machine lacks, or the limit: said, not hidden
                row["status"] = f"skipped: {variant} failed here: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
                rows.append(row)
                print(f"torch_step {name:5s} {variant:8s} {row['status']}")
                del model, opt, run
                continue
            if args.device == "cuda":
                torch.cuda.reset_peak_memory_stats()
            median, fastest, slowest = timed(step, args.repetitions)
            if args.device == "cuda":
                row["peak_mib"] = f"{torch.cuda.max_memory_allocated() / 2**20:.6g}"
            row.update({"ms_per_step": f"{median:.6g}", "ms_per_step_min": f"{fastest:.6g}",
                        "ms_per_step_max": f"{slowest:.6g}", "repetitions": args.repetitions})
            rows.append(row)
            print(f"torch_step {name:5s} {variant:8s} {median:9.2f} ms/step ({args.device}, torch {torch.__version__})")
            del model, opt, run
    write_rows(out, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
