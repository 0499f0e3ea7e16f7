#!/usr/bin/python3
"""bf16_gap.py: the step loop torch_vit_bf16_gap.py and torch_mvit_bf16_gap.py share: one
training step of a model in fp32 and once under torch.autocast('cpu', bfloat16), and the
NMSE figures they print of the bf16 step against the fp32 one.

A module of its own so that the two scripts import it without importing each other.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def layernorm_fp32():
    """Makes every nn.LayerNorm take its input cast to float, as CUDA autocast does (it
    lists layer_norm as fp32; PyTorch 1.13's CPU autocast would otherwise fail on a bf16
    input with float weights). Patches the class, for the whole process."""
    nn.LayerNorm.forward = lambda self, x: F.layer_norm(x.float(), self.normalized_shape,
                                                        self.weight, self.bias, self.eps)


def step_pair(m, x, lab):
    """One forward of m on x, cross-entropy against lab, backward: once in fp32, once
    under CPU bf16 autocast (gradients zeroed before each). Returns {"fp32": s, "bf16": s},
    s = (loss, logits as float32, {parameter name: gradient})."""
    res = {}
    for mode in ("fp32", "bf16"):
        m.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mode == "bf16"):
            z = m(x)
        loss = F.cross_entropy(z.float(), lab)
        loss.backward()
        res[mode] = (loss.item(), z.detach().float(),
                     {k: p.grad.clone() for k, p in m.named_parameters()})
    return res


def gap(res):
    """The figures of a step_pair result: (fp32 loss, bf16 loss, logits NMSE, NMSE of all
    gradients together, (worst tensor's NMSE, its name), median tensor NMSE, {name: NMSE}).
    A tensor whose fp32 gradient is exactly 0 has no NMSE and is left out of the last three."""
    (la, za, a), (lb, zb, b) = res["fp32"], res["bf16"]
    nm = {k: float(((b[k] - a[k])**2).sum() / max(float((a[k]**2).sum()), 1e-30))
          for k in a if float((a[k]**2).sum()) > 0}
    tot = float(sum(((b[k] - a[k])**2).sum() for k in a) / sum((a[k]**2).sum() for k in a))
    worst = max((v, k) for k, v in nm.items())
    logits = float(((zb - za)**2).sum() / (za**2).sum())
    return la, lb, logits, tot, worst, np.median(list(nm.values())), nm
