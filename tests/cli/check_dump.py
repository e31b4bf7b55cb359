#!/usr/bin/env python3
"""Recomputes MoE layers from a `moebench_moe_layer --dump DIR` folder with numpy alone, in float64:
routing (softmax top-k per prototype), capacity positions, combine weights, the aux loss, the
output, and every gradient of L = sum(y * dy) + aux: dx, the gate's, and each expert's dW1 and
dW2. Shares no code with the layer.

  check_dump.py DIR            every dispatcher folder under DIR (DIR/<dispatcher>/meta.json)
  check_dump.py DIR/<disp>     one dispatcher

Ranks form layers as meta.json says: `local` = one layer per rank; `expert_parallel` = one layer
over all ranks, each rank's tokens its own capacity group, experts split in rank order;
`ppmoe` = one layer per tensor-parallel group of `tp` consecutive ranks holding the same tokens.
Exits 1 with the first disagreement."""
import json
import math
import pathlib
import sys

try:
    import numpy as np
except ImportError:
    sys.exit(f"check_dump.py: error: needs numpy, which {sys.executable} lacks; run it with Debian's /usr/bin/python3 "
             "(scripts/setup.sh installs python3-numpy with matplotlib) or install numpy")

TOLERANCE = 2e-4  # float32 layer vs float64 recomputation, relative to the tensor's largest value


def gelu(a):
    return 0.5 * a * (1 + np.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a ** 3)))


def gelu_grad(a):
    u = math.sqrt(2 / math.pi) * (a + 0.044715 * a ** 3)
    t = np.tanh(u)
    return 0.5 * (1 + t) + 0.5 * a * (1 - t * t) * math.sqrt(2 / math.pi) * (1 + 3 * 0.044715 * a * a)


def close(name, got, want, where):
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        raise AssertionError(f"{where}: {name} has shape {got.shape}, expected {want.shape}")
    scale = max(np.abs(want).max(initial=0.0), 1e-30)
    err = np.abs(got - want).max(initial=0.0) / scale
    if not err < TOLERANCE:
        raise AssertionError(f"{where}: {name} differs from the recomputation: relative error {err:.3e}")
    return err


def load_rank(folder, rank):
    prefix = folder / f"rank{rank}_"
    names = ["x", "y", "dy", "dx", "gate_weight", "gate_grad", "w1", "w2", "w1_grad", "w2_grad", "probs",
             "route_expert", "route_position", "route_weight", "combine_weight", "aux_loss"]
    return {n: np.load(f"{prefix}{n}.npy") for n in names}


def route(x, gate, meta):
    """probs, expert, weight per token: softmax inside each prototype, top-k there (ties: lower index)."""
    E, Z, k = meta["experts"], meta["prototypes"], meta["top_k"]
    F = E // Z
    logits = x @ gate
    probs = np.empty_like(logits)
    experts, weights = [], []
    for z in range(Z):
        block = logits[:, z * F:(z + 1) * F]
        p = np.exp(block - block.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        probs[:, z * F:(z + 1) * F] = p
        top = np.argsort(-p, axis=1, kind="stable")[:, :k]
        experts.append(top + z * F)
        weights.append(np.take_along_axis(p, top, axis=1))
    return probs, np.concatenate(experts, axis=1), np.concatenate(weights, axis=1)


def positions(expert, groups, meta):
    """Per group, each expert takes assignments in priority order (choice j, then token) up to C."""
    T, S = expert.shape
    E, Z, k = meta["experts"], meta["prototypes"], meta["top_k"]
    gamma = meta["capacity_factor"]
    per_group = T // groups
    cap = -1 if gamma is None else math.ceil(S * per_group / E * gamma - 1e-9)
    pos = np.full((T, S), -1, dtype=np.int64)
    for g in range(groups):
        count = np.zeros(E, dtype=np.int64)
        for j in range(k):
            for t in range(g * per_group, (g + 1) * per_group):
                for z in range(Z):
                    s = z * k + j
                    e = expert[t, s]
                    pos[t, s] = count[e] if cap < 0 or count[e] < cap else -1
                    count[e] += 1
    return pos


def check_layer(where, ranks, meta, data):
    """`ranks`: the dumped ranks forming one layer, in expert order; data[r] their tensors."""
    d = meta["dispatcher"]
    E, Z, k = meta["experts"], meta["prototypes"], meta["top_k"]
    F = E // Z
    replicated = d == "ppmoe"  # every rank of the layer holds the same tokens
    token_ranks = ranks[:1] if replicated else ranks
    x = np.concatenate([data[r]["x"] for r in token_ranks]).astype(np.float64)
    dy = np.concatenate([data[r]["dy"] for r in token_ranks]).astype(np.float64)
    gate = data[ranks[0]]["gate_weight"].astype(np.float64)
    w1 = np.concatenate([data[r]["w1"] for r in ranks]).astype(np.float64)
    w2 = np.concatenate([data[r]["w2"] for r in ranks]).astype(np.float64)
    if w1.shape[0] != E:
        raise AssertionError(f"{where}: the ranks hold {w1.shape[0]} experts, meta.json says {E}")
    groups = len(token_ranks) * meta["capacity_groups_per_rank"]
    T = x.shape[0]
    per_group = T // groups

    probs, expert, weight = route(x, gate, meta)
    got_expert = np.concatenate([data[r]["route_expert"] for r in token_ranks])
    if not (got_expert == expert).all():
        raise AssertionError(f"{where}: routing differs in {(got_expert != expert).sum()} slots")
    pos = positions(expert, groups, meta)
    got_pos = np.concatenate([data[r]["route_position"] for r in token_ranks])
    if not (got_pos == pos).all():
        raise AssertionError(f"{where}: capacity positions differ in {(got_pos != pos).sum()} slots")
    combine = np.where(pos >= 0, weight, 0.0)

    # Forward and backward of the experts, slot by slot.
    y = np.zeros_like(x)
    dx = np.zeros_like(x)
    dweight = np.zeros_like(weight)
    dw1 = np.zeros_like(w1)
    dw2 = np.zeros_like(w2)
    for t, s in zip(*np.nonzero(pos >= 0)):
        e = expert[t, s]
        h = x[t] @ w1[e]
        a = gelu(h)
        out = a @ w2[e]
        y[t] += combine[t, s] * out
        dweight[t, s] = dy[t] @ out
        dout = combine[t, s] * dy[t]
        dw2[e] += np.outer(a, dout)
        dh = (dout @ w2[e].T) * gelu_grad(h)
        dw1[e] += np.outer(x[t], dh)
        dx[t] += dh @ w1[e].T

    # The aux loss: per group coef * F/Z * sum_e density * proxy (density from each prototype's
    # first choice), the layer's loss is the mean over its groups; its gradient reaches probs only.
    dprobs = np.zeros_like(probs)
    for t in range(T):
        for s in range(expert.shape[1]):
            dprobs[t, expert[t, s]] += dweight[t, s]
    aux_per_group = np.zeros(groups)
    if meta["aux_loss"]:
        coef = meta["aux_coef"] * F / Z
        for g in range(groups):
            rows = slice(g * per_group, (g + 1) * per_group)
            density = np.zeros(E)
            for z in range(Z):
                np.add.at(density, expert[rows, z * k], 1.0)
            density /= per_group
            proxy = probs[rows].mean(axis=0)
            aux_per_group[g] = coef * (density * proxy).sum()
            dprobs[rows] += coef * density / per_group / groups
    dlogits = np.zeros_like(probs)
    for z in range(Z):
        b = slice(z * F, (z + 1) * F)
        dlogits[:, b] = probs[:, b] * (dprobs[:, b] - (probs[:, b] * dprobs[:, b]).sum(axis=1, keepdims=True))
    dgate = x.T @ dlogits
    dx += dlogits @ gate.T

    worst = 0.0
    for i, r in enumerate(token_ranks):
        rows = slice(i * (T // len(token_ranks)), (i + 1) * (T // len(token_ranks)))
        got = data[r]
        worst = max(worst, close("probs", got["probs"], probs[rows], f"{where} rank {r}"))
        worst = max(worst, close("combine weights", got["combine_weight"], combine[rows], f"{where} rank {r}"))
        worst = max(worst, close("output y", got["y"], y[rows], f"{where} rank {r}"))
        if replicated:
            want_aux = aux_per_group.mean()
        else:  # each rank's value is over its own tokens
            want_aux = aux_per_group[i * meta["capacity_groups_per_rank"]:(i + 1) * meta["capacity_groups_per_rank"]].mean()
        worst = max(worst, close("aux loss", got["aux_loss"], want_aux, f"{where} rank {r}"))
    for i, r in enumerate(ranks):
        got = data[r]
        rows = slice(0, T) if replicated else slice(i * (T // len(ranks)), (i + 1) * (T // len(ranks)))
        worst = max(worst, close("input gradient dx", got["dx"], dx[rows], f"{where} rank {r}"))
        worst = max(worst, close("gate weight gradient", got["gate_grad"], dgate, f"{where} rank {r}"))
        L = got["w1"].shape[0]
        first = i * L
        worst = max(worst, close("expert dW1", got["w1_grad"], dw1[first:first + L], f"{where} rank {r}"))
        worst = max(worst, close("expert dW2", got["w2_grad"], dw2[first:first + L], f"{where} rank {r}"))
    dropped = int((pos < 0).sum())
    return f"{where}: {T} tokens, {len(ranks)} rank(s), top-{k} x {Z} prototype(s), {dropped} dropped, " \
           f"aux {aux_per_group.mean():.5f}: routing, output, aux loss, dx, dWg, dW1, dW2 agree (max error {worst:.1e})"


def check_dispatcher(folder):
    meta_path = folder / "meta.json"
    if not meta_path.exists():
        raise AssertionError(f"{folder}: no meta.json (not a moebench_moe_layer --dump folder)")
    meta = json.loads(meta_path.read_text())
    if meta["dtype"] != "fp32":
        raise AssertionError(f"{folder}: dtype {meta['dtype']}; the recomputation compares fp32 dumps only")
    world = meta["ranks"]
    data = {r: load_rank(folder, r) for r in range(world)}
    d = meta["dispatcher"]
    if d == "local":
        layers = [[r] for r in range(world)]
    elif d == "expert_parallel":
        layers = [list(range(world))]
    else:
        tp = meta["tp"]
        layers = [list(range(g * tp, (g + 1) * tp)) for g in range(world // tp)]
    return [check_layer(f"{d} layer {n}", ranks, meta, data) for n, ranks in enumerate(layers)]


def main(argv):
    if len(argv) != 2:
        print(__doc__.split("\n\n")[0], file=sys.stderr)
        print("usage: check_dump.py DIR", file=sys.stderr)
        return 2
    root = pathlib.Path(argv[1])
    if not root.is_dir():
        print(f"check_dump.py: error: {root} is not a folder", file=sys.stderr)
        return 2
    folders = [root] if (root / "meta.json").exists() else sorted(p.parent for p in root.glob("*/meta.json"))
    if not folders:
        print(f"check_dump.py: error: no meta.json in {root} or its sub-folders", file=sys.stderr)
        return 2
    try:
        for folder in folders:
            for line in check_dispatcher(folder):
                print("dump check ok:", line)
    except AssertionError as e:
        print(f"dump check FAILED: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
