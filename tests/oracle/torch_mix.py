#!/usr/bin/python3
"""torch_mix.py: the outside truth for mixup, CutMix and the soft-target loss
(tests/test_mix.c). Written from timm's timm/data/mixup.py (Mixup, mode "batch";
rand_bbox, cutmix_bbox_and_lam with correct_lam, mixup_target) and PyTorch's
F.cross_entropy with probability targets; it must never depend on vidtrain.

Records (the VTT1 format, vtt_write.py):
  xent{i}.*  logits (n, k) and soft targets (n, k); loss = F.cross_entropy(logits, t,
             reduction='none') and dlogits = d(gs * sum(loss))/dlogits, in float64.
             Case 2's targets do not sum to 1 (the p * sum(t) term); case 3 is timm's
             mixup_target with smoothing against F.cross_entropy's own label_smoothing
             on the same mixed one-hot targets (they must agree: smoothing then mixing is
             mixing then smoothing).
  mix{i}.*   a batch x (n, 3, t, h, w) with labels, a draw (kind, Beta's lam, cy, cx), and
             what timm makes of it: the mixed x, the (corrected) lam, the box and the
             mixed targets with label smoothing eps.
Usage: /usr/bin/python3 tests/oracle/torch_mix.py OUT.bin
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vtt_write import save_vtt  # noqa: E402

torch.manual_seed(0)
torch.set_num_threads(1)
records = []


def put(name, t):
    t = torch.as_tensor(t).detach().clone().to(torch.float32).reshape(-1)
    records.append((name, t))


def one_hot(y, k, on, off):
    return torch.full((y.shape[0], k), off, dtype=torch.float64).scatter_(1, y.view(-1, 1), on)


def mixup_target(y, k, lam, smoothing):  # timm
    off = smoothing / k
    on = 1.0 - smoothing + off
    y1 = one_hot(y, k, on, off)
    y2 = one_hot(y.flip(0), k, on, off)
    return y1 * lam + y2 * (1.0 - lam)


def rand_bbox(h, w, lam, cy, cx):  # timm's rand_bbox, margin 0, the centre given
    ratio = np.sqrt(1 - lam)
    cut_h, cut_w = int(h * ratio), int(w * ratio)
    yl = np.clip(cy - cut_h // 2, 0, h)
    yh = np.clip(cy + cut_h // 2, 0, h)
    xl = np.clip(cx - cut_w // 2, 0, w)
    xh = np.clip(cx + cut_w // 2, 0, w)
    return yl, yh, xl, xh


# ---- the soft-target loss ----
cases = [(5, 7, 0.25, "mix"), (3, 4, 1.0, "unnormalised"), (6, 5, 0.125, "smooth")]
put("xent.count", [len(cases)])
for i, (n, k, gs, kind) in enumerate(cases):
    z = (torch.randn(n, k) * 3).to(torch.float32).to(torch.float64).requires_grad_(True)
    y = torch.randint(0, k, (n,))
    if kind == "mix":
        t = mixup_target(y, k, 0.7, 0.0)
    elif kind == "unnormalised":
        t = torch.rand(n, k, dtype=torch.float64) * 0.6
    else:
        t = mixup_target(y, k, 0.35, 0.1)
        # the same loss through PyTorch's own smoothing of the unsmoothed mixed target
        alt = F.cross_entropy(z.detach(), mixup_target(y, k, 0.35, 0.0), reduction="none",
                              label_smoothing=0.1)
        put(f"xent{i}.alt", alt)
    t = t.to(torch.float32).to(torch.float64)  # what vidtrain holds
    loss = F.cross_entropy(z, t, reduction="none")
    (gs * loss.sum()).backward()
    put(f"xent{i}.geo", [n, k, gs])
    for name, v in [("z", z), ("t", t), ("loss", loss), ("dz", z.grad)]:
        put(f"xent{i}.{name}", v)

# ---- mixing a batch ----
# (n, t, h, w, kind 1 mixup / 2 cutmix, Beta's lam, cy, cx, classes, eps)
mixes = [(4, 3, 6, 5, 1, 0.62, 0, 0, 3, 0.1), (5, 2, 8, 8, 2, 0.55, 3, 6, 4, 0.0),
         (3, 2, 7, 9, 2, 0.2, 0, 8, 3, 0.1), (2, 1, 4, 4, 1, 0.3, 0, 0, 2, 0.0)]
put("mix.count", [len(mixes)])
for i, (n, t, h, w, kind, lam, cy, cx, k, eps) in enumerate(mixes):
    x = torch.randn(n, 3, t, h, w).to(torch.float32)
    y = torch.randint(0, k, (n,))
    put(f"mix{i}.geo", [n, t, h, w, kind, lam, cy, cx, k, eps])
    put(f"mix{i}.x", x)
    put(f"mix{i}.y", y)
    xm = x.clone()
    box = [0, 0, 0, 0]
    if kind == 1:  # timm: x.mul_(lam).add_(x.flip(0).mul_(1 - lam)), in float32
        xm = xm.mul(lam).add(x.flip(0).mul(1.0 - lam))
    else:
        yl, yh, xl, xh = rand_bbox(h, w, lam, cy, cx)
        lam = 1.0 - (yh - yl) * (xh - xl) / float(h * w)  # correct_lam
        xm[..., yl:yh, xl:xh] = x.flip(0)[..., yl:yh, xl:xh]  # every frame alike
        box = [yl, yh, xl, xh]
    put(f"mix{i}.xm", xm)
    put(f"mix{i}.lam", [lam])
    put(f"mix{i}.box", box)
    put(f"mix{i}.target", mixup_target(y, k, lam, eps))

save_vtt(sys.argv[1], records)
