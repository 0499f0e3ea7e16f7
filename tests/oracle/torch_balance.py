#!/usr/bin/python3
"""torch_balance.py: the outside truth for the class-weighted softmax cross-entropy
(tests/test_balance.c): torch.nn.functional.cross_entropy(weight=w, label_smoothing=eps),
per clip (reduction='none') and the mean (PyTorch divides by the batch's sum of
w[label]) with its gradient with respect to the logits.

VTT1 records as torch_ops.py's (vtt_write.py: u32 name_len, name, u32 count, count x
float32).
Inputs are drawn in float32 and the reference is computed in float64 from exactly those
values, so the only difference left on vidtrain's side is its own rounding.

Usage: /usr/bin/python3 tests/oracle/torch_balance.py OUT.bin
This script must never depend on vidtrain: it is what vidtrain is checked against.
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vtt_write import save_vtt  # noqa: E402

torch.manual_seed(28)
records = []


def put(name, t):
    t = torch.as_tensor(t, dtype=torch.float32).detach().clone().reshape(-1)
    records.append((name, t))


# (clips, classes, label smoothing, weights: "random" | "zero" | "inverse")
cases = [(9, 5, 0.0, "random"), (9, 5, 0.1, "zero"), (12, 4, 0.2, "inverse"), (3, 7, 0.0, "random")]
for i, (n, k, eps, kind) in enumerate(cases):
    z = (torch.randn(n, k) * 3).float()
    y = torch.randint(0, k, (n,))
    y[0] = 1  # class 1 always present (the "zero" case weighs it 0)
    w = (torch.rand(k) * 2.8 + 0.2).float()
    if kind == "zero":
        w[1] = 0.0
    if kind == "inverse":  # balance.h's rule: N / (C * n_c), classes without clips 1
        cnt = torch.bincount(y, minlength=k).double()
        present = (cnt > 0).sum()
        w = torch.where(cnt > 0, n / (present * cnt.clamp(min=1)), torch.ones(k, dtype=torch.float64)).float()
    zd = z.double().requires_grad_(True)
    wd = w.double()
    loss = F.cross_entropy(zd, y, weight=wd, label_smoothing=eps, reduction="none")
    mean = F.cross_entropy(zd, y, weight=wd, label_smoothing=eps)
    mean.backward()
    p = f"bal{i}."
    put(p + "z", z)
    put(p + "y", y)
    put(p + "w", w)
    put(p + "shape", [n, k, eps])
    put(p + "loss", loss)
    put(p + "mean", [mean.item()])
    put(p + "wsum", [wd[y].sum().item()])
    put(p + "grad", zd.grad)

save_vtt(sys.argv[1], records)
