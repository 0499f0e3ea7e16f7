#!/usr/bin/python3
"""torch_pool_nan.py: the outside truth for maxpool3d and ReLU with NaN inputs
(tests/test_pool_nan.c).

PyTorch's max_pool3d propagates a NaN anywhere in a window (aten: `val > maxval ||
isnan(val)`, the window's first tap taken first): a NaN is the window's maximum, ties keep
the first maximum, and of several NaNs the last one takes the gradient. For each geometry
this writes x (values from a few integers, so windows hold ties, with NaNs sprinkled and
some +-inf), dy (small integers, so every gradient is an exact float sum whatever the
order), F.max_pool3d's y and x.grad for the loss sum(y * dy).

VTT1 records as torch_ops.py's (vtt_write.py: u32 name_len, name, u32 count, count x
float32). Integers (geometry) are stored as floats.

Usage: /usr/bin/python3 tests/oracle/torch_pool_nan.py OUT.bin   (torch on the CPU)
This script must never depend on vidtrain: it is what vidtrain is checked against.
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vtt_write import save_vtt  # noqa: E402

torch.manual_seed(0)
torch.set_num_threads(1)
nan, inf = float("nan"), float("inf")
records = []


def put(name, t):
    t = torch.as_tensor(t, dtype=torch.float32).detach().clone().reshape(-1)
    records.append((name, t))


# [n, c, T, H, W, k0, k1, k2, s0, s1, s2, p0, p1, p2, ceil, NaN share in percent]
geos = [
    # one row by hand (x below): windows {pad, 0, 1}, {1, 2, 3}, {3, 4, 5}, {5, 6, pad}:
    # a NaN first, in the middle, last, two NaNs
    (1, 1, 1, 1, 7, 1, 1, 3, 1, 1, 2, 0, 0, 1, 0, 0),
    (2, 3, 4, 6, 10, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 6),      # c3d pool2: cpu's inside path
    (2, 8, 4, 4, 140, 1, 2, 2, 1, 2, 2, 0, 0, 0, 0, 2),     # c3d pool1, 70 outputs a row (*)
    (1, 2, 4, 5, 6, 3, 3, 3, 1, 1, 1, 0, 0, 0, 0, 4),       # inside, stride 1
    (2, 8, 9, 16, 15, 3, 3, 3, 2, 2, 2, 1, 1, 1, 0, 1),     # padding: cpu's clipped path (*)
    (1, 2, 3, 9, 9, 1, 3, 3, 1, 2, 2, 0, 1, 1, 0, 5),       # s3d features.1
    (1, 2, 6, 8, 9, 3, 3, 3, 2, 2, 2, 0, 0, 0, 1, 5),       # ceil_mode
    (1, 3, 5, 6, 7, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 8),       # padding and ceil_mode
]  # (*): more than cpu's 32768 values, so 2 threads split the planes
put("count", [len(geos)])
for i, g in enumerate(geos):
    n, c, T, H, W, k0, k1, k2, s0, s1, s2, p0, p1, p2, ceil, share = g
    if i == 0:
        x = torch.tensor([nan, 2, nan, 1, 0, nan, nan]).reshape(1, 1, 1, 1, 7)
    else:
        x = torch.randint(-2, 3, (n, c, T, H, W)).float()
        u = torch.rand(n, c, T, H, W)
        x[u < share / 100.0] = nan
        x[(u > 0.99) & (u < 0.995)] = inf
        x[u > 0.995] = -inf
    x.requires_grad_(True)
    kw = dict(kernel_size=(k0, k1, k2), stride=(s0, s1, s2), padding=(p0, p1, p2),
              ceil_mode=bool(ceil))
    y = F.max_pool3d(x, **kw)
    dy = torch.randint(1, 9, y.shape).float()
    (y * dy).sum().backward()
    put(f"p{i}.geo", g), put(f"p{i}.x", x), put(f"p{i}.dy", dy)
    put(f"p{i}.y", y), put(f"p{i}.dx", x.grad)

# ReLU: PyTorch's passes a NaN (and keeps -0, the same value as our +0); its backward passes
# the gradient of a NaN output (threshold_backward: out <= 0 ? 0 : grad)
x = torch.tensor([nan, -0.0, 0.0, 1.5, -2.0, inf, -inf, 3.0, nan, -1e-30, 1e-30, 7.0],
                 requires_grad=True)
y = torch.relu(x)
dy = torch.arange(1, 13).float()
(y * dy).sum().backward()
put("relu.x", x), put("relu.dy", dy), put("relu.y", y), put("relu.dx", x.grad)

save_vtt(sys.argv[1], records)
print(f"torch_pool_nan.py: {len(records)} records, torch {torch.__version__}")
