#!/usr/bin/env python3
"""Recomputes an MoE layer's output from its .npy dump with numpy alone: softmax top-k routing,
capacity positions and the GeLU experts must give the dumped routing and output."""
import math
import sys

import numpy as np

prefix = sys.argv[1]
load = lambda name: np.load(prefix + name + ".npy")
x, y, g = load("x").astype(np.float64), load("y"), load("gate_weight").astype(np.float64)
w1, w2 = load("w1").astype(np.float64), load("w2").astype(np.float64)
expert, position, weight = load("route_expert"), load("route_position"), load("route_weight")

logits = x @ g
p = np.exp(logits - logits.max(axis=1, keepdims=True))
p /= p.sum(axis=1, keepdims=True)
k = expert.shape[1]
top = np.argsort(-p, axis=1, kind="stable")[:, :k]
assert (top == expert).all(), "routing differs"
assert np.allclose(np.take_along_axis(p, top, axis=1), weight, rtol=1e-4), "combine weights differ"


def gelu(a):
    return 0.5 * a * (1 + np.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a ** 3)))


want = np.zeros_like(x)
for t in range(x.shape[0]):
    for s in range(k):
        if position[t, s] >= 0:  # dropped assignments add nothing
            e = expert[t, s]
            want[t] += weight[t, s] * (gelu(x[t] @ w1[e]) @ w2[e])
err = np.abs(want - y).max() / (1 + np.abs(want).max())
assert err < 1e-4, f"output differs: {err}"
print(f"dump check ok: {x.shape[0]} tokens, top-{k}, {int((position < 0).sum())} dropped, max error {err:.2e}")
