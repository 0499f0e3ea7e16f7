#!/usr/bin/python3
"""torch_attn.py: the outside truth for the transformer ops (tests/test_ops_attn.c).

VTT1 records as torch_ops.py's (vtt_write.py: u32 name_len, name, u32 count, count x
float32). For every op the scalar loss is L = sum(out * dy) with a stored random dy,
so the stored gradients are what the op's backward must return for dout = dy.
  layernorm  F.layer_norm over the last dim (eps 1e-6, VideoMAE's), float64 then rounded
  gelu       F.gelu (erf form, approximate='none'), float64
  attention  a naive softmax(q k^T / sqrt(D)) v per head in float64 on qkv laid out
             (N, L, 3, H, D) as timm/VideoMAE's qkv linear gives it; also the row
             log-sum-exp the forward saves
  tokens     x.flatten(2).transpose(1, 2) (the patch embedding's tokens), mean over
             tokens, + a position table broadcast over clips
Everything is computed in float64 from float32 inputs and rounded once, so the reference
carries no float32 rounding of its own.

Usage: /usr/bin/python3 tests/oracle/torch_attn.py OUT.bin
This script must never depend on vidtrain: it is what vidtrain is checked against.
"""
import math
import os
import sys

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


def rand(*shape, lo=-1.0, hi=1.0):
    # float32 values (what vidtrain stores), held in float64 for the computation
    x = (torch.rand(*shape) * (hi - lo) + lo).to(torch.float32).to(torch.float64)
    return x.requires_grad_(True)


# ---- layernorm: [rows, c] ----
ln_geos = [(10, 24), (3, 384)]
put("ln.count", [len(ln_geos)])
for i, (rows, c) in enumerate(ln_geos):
    x = rand(rows, c, lo=-2.0, hi=3.0)
    g, b = rand(c, lo=0.5, hi=1.5), rand(c)
    y = F.layer_norm(x, (c,), g, b, eps=1e-6)
    dy = rand(rows, c).detach()
    (y * dy).sum().backward()
    put(f"ln{i}.geo", [rows, c])
    for k, v in [("x", x), ("g", g), ("b", b), ("y", y), ("dy", dy), ("dx", x.grad),
                 ("dg", g.grad), ("db", b.grad)]:
        put(f"ln{i}.{k}", v)

# ---- gelu ----
x = rand(300, lo=-5.0, hi=5.0)
y = F.gelu(x)
dy = rand(300).detach()
(y * dy).sum().backward()
for k, v in [("x", x), ("y", y), ("dy", dy), ("dx", x.grad)]:
    put(f"gelu.{k}", v)

# ---- attention: [n, L, H, D] ----
att_geos = [(2, 7, 2, 4), (1, 70, 3, 8)]  # 70 > 64: the fast backend's query blocks split
put("att.count", [len(att_geos)])
for i, (n, L, H, D) in enumerate(att_geos):
    qkv = rand(n, L, 3, H, D, lo=-2.0, hi=2.0)
    q, k, v = (qkv[:, :, j].transpose(1, 2) for j in range(3))  # (n, H, L, D)
    s = q @ k.transpose(-2, -1) / math.sqrt(D)
    lse = torch.logsumexp(s, dim=-1)  # (n, H, L)
    o = (torch.softmax(s, dim=-1) @ v).transpose(1, 2)  # (n, L, H, D)
    dy = rand(n, L, H, D).detach()
    (o * dy).sum().backward()
    put(f"att{i}.geo", [n, L, H, D])
    for k_, v_ in [("qkv", qkv), ("out", o), ("lse", lse), ("dy", dy), ("dqkv", qkv.grad)]:
        put(f"att{i}.{k_}", v_)

# ---- tokens: (n, C, T, H, W) -> (n, L, C), mean, + pos ----
n, C, T, H, W = 2, 5, 2, 3, 4
x = rand(n, C, T, H, W)
tok = x.flatten(2).transpose(1, 2)
pos = rand(T * H * W, C)
y = tok + pos
m = y.mean(dim=1)
dy = rand(n, C).detach()
(m * dy).sum().backward()
put("tok.geo", [n, C, T * H * W])
for k, v in [("x", x), ("tok", tok), ("pos", pos), ("mean", m), ("dy", dy), ("dx", x.grad),
             ("dpos", pos.grad)]:
    put(f"tok.{k}", v)

save_vtt(sys.argv[1], records)
