#!/usr/bin/python3
"""torch_ops.py: the outside truth for the cpu-ref backend (tests/test_ops_torch.c).

Writes inputs, outputs and gradients of torch.nn.functional ops and torch.optim steps to
one small binary file of VTT1 records (vtt_write.py: u32 name_len, name, u32 count, count x
float32). Integers (labels, geometry) are stored as floats (exact below 2^24). For every op
the scalar loss is L = sum(out * dy) with a stored random dy, so the stored gradients are
what the op's backward must return for dout = dy.

Usage: /usr/bin/python3 tests/oracle/torch_ops.py OUT.bin     (torch on the CPU; ~1 s after import)
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
records = []


def put(name, t):
    # clone: later in-place updates (batch_norm's running stats) must not change a record
    t = torch.as_tensor(t, dtype=torch.float32).detach().clone().reshape(-1)
    records.append((name, t))


def rand(*shape, lo=-1.0, hi=1.0):
    return (torch.rand(*shape) * (hi - lo) + lo).requires_grad_(True)


# ---- conv3d: [n, cin, cout, T, H, W, k0, k1, k2, s0, s1, s2, p0, p1, p2, bias] ----
conv_geos = [
    (2, 3, 4, 5, 9, 9, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1),
    (1, 4, 6, 4, 11, 13, 3, 3, 3, 2, 2, 2, 1, 1, 1, 1),
    (2, 3, 5, 6, 10, 10, 1, 3, 3, 1, 2, 2, 0, 1, 1, 0),
    (2, 5, 3, 7, 5, 6, 3, 1, 1, 1, 1, 1, 1, 0, 0, 1),
    (1, 3, 4, 8, 16, 16, 3, 7, 7, 1, 2, 2, 1, 3, 3, 0),
    (2, 6, 8, 5, 7, 7, 1, 1, 1, 2, 2, 2, 0, 0, 0, 1),
    # groups (a 17th field; 1 above): X3D's depthwise 3x3x3 stride (1,2,2) and its stem's
    # 5x1x1, a grouped conv with a channel multiplier
    (2, 6, 6, 4, 9, 9, 3, 3, 3, 1, 2, 2, 1, 1, 1, 0, 6),
    (2, 4, 4, 5, 5, 5, 5, 1, 1, 1, 1, 1, 2, 0, 0, 1, 4),
    (1, 4, 6, 3, 6, 6, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 2),
]
put("conv.count", [len(conv_geos)])
for i, g in enumerate(conv_geos):
    g = tuple(g) + (1,) * (17 - len(g))
    n, cin, cout, T, H, W, k0, k1, k2, s0, s1, s2, p0, p1, p2, bias, groups = g
    x = rand(n, cin, T, H, W)
    w = rand(cout, cin // groups, k0, k1, k2)
    b = rand(cout) if bias else None
    y = F.conv3d(x, w, b, stride=(s0, s1, s2), padding=(p0, p1, p2), groups=groups)
    dy = torch.rand_like(y) * 2 - 1
    (y * dy).sum().backward()
    put(f"conv{i}.geo", g)
    put(f"conv{i}.x", x), put(f"conv{i}.w", w), put(f"conv{i}.dy", dy), put(f"conv{i}.y", y)
    put(f"conv{i}.dx", x.grad), put(f"conv{i}.dw", w.grad)
    if bias:
        put(f"conv{i}.b", b), put(f"conv{i}.db", b.grad)

# ---- X3D's SiLU (pytorchvideo's Swish, x * sigmoid(x)), sigmoid, and the channel scale
# of squeeze-excitation (x * s broadcast over T, H, W) ----
x = rand(4000, lo=-8.0, hi=8.0)
y = F.silu(x)
dy = torch.rand_like(y) * 2 - 1
(y * dy).sum().backward()
put("silu.x", x), put("silu.dy", dy), put("silu.y", y), put("silu.dx", x.grad)
x = rand(4000, lo=-8.0, hi=8.0)
y = torch.sigmoid(x)
dy = torch.rand_like(y) * 2 - 1
(y * dy).sum().backward()
put("sigmoid.x", x), put("sigmoid.dy", dy), put("sigmoid.y", y), put("sigmoid.dx", x.grad)
x, sc = rand(2, 5, 3, 4, 4), rand(2, 5, lo=0.0, hi=1.0)
y = x * sc[:, :, None, None, None]
dy = torch.rand_like(y) * 2 - 1
(y * dy).sum().backward()
put("chscale.geo", [2, 5, 48])
put("chscale.x", x), put("chscale.s", sc), put("chscale.dy", dy), put("chscale.y", y)
put("chscale.dx", x.grad), put("chscale.ds", sc.grad)

# ---- batch_norm, training (biased var to normalise, unbiased into running_var) then eval ----
bn_geos = [(3, 4, 5, 7, 7), (2, 3, 1, 1, 2)]
put("bn.count", [len(bn_geos)])
for i, (n, c, T, H, W) in enumerate(bn_geos):
    x = rand(n, c, T, H, W, lo=-1.0, hi=3.0)
    gamma, beta = rand(c, lo=0.5, hi=1.5), rand(c)
    rm, rv = torch.rand(c) - 0.5, torch.rand(c) + 0.5
    put(f"bn{i}.geo", [n, c, T * H * W])
    put(f"bn{i}.x", x), put(f"bn{i}.gamma", gamma), put(f"bn{i}.beta", beta)
    put(f"bn{i}.rm0", rm), put(f"bn{i}.rv0", rv)
    y = F.batch_norm(x, rm, rv, gamma, beta, training=True, momentum=0.1, eps=1e-5)
    dy = torch.rand_like(y) * 2 - 1
    (y * dy).sum().backward()
    put(f"bn{i}.dy", dy), put(f"bn{i}.y", y), put(f"bn{i}.rm", rm), put(f"bn{i}.rv", rv)
    put(f"bn{i}.dx", x.grad), put(f"bn{i}.dgamma", gamma.grad), put(f"bn{i}.dbeta", beta.grad)
    with torch.no_grad():
        ye = F.batch_norm(x, rm, rv, gamma, beta, training=False, eps=1e-5)
    put(f"bn{i}.y_eval", ye)

# ---- batch_norm of channels whose mean is 1e3 x their spread (low-contrast clips): the
# truth in float64 from the float32 inputs, since float32 BN (PyTorch's included) loses
# digits to the offset; a float sum x^2 - mean^2 loses the variance to ~6e-2 here ----
n, c, T, H, W = 4, 3, 4, 6, 6
std = torch.rand(c) * 1.5 + 0.5
sign = torch.where(torch.arange(c) % 2 == 0, 1.0, -1.0)
mu = 1e3 * std * sign
x = (mu.view(1, c, 1, 1, 1) + std.view(1, c, 1, 1, 1) * torch.randn(n, c, T, H, W)).float()
gamma, beta = rand(c, lo=0.5, hi=1.5).detach(), rand(c).detach()
rm, rv = torch.rand(c) - 0.5, torch.rand(c) + 0.5
put("bnoff.geo", [n, c, T * H * W])
put("bnoff.x", x), put("bnoff.gamma", gamma), put("bnoff.beta", beta)
put("bnoff.rm0", rm), put("bnoff.rv0", rv)
rm64, rv64 = rm.double(), rv.double()
y = F.batch_norm(x.double(), rm64, rv64, gamma.double(), beta.double(), training=True,
                 momentum=0.1, eps=1e-5)
put("bnoff.y", y), put("bnoff.rm", rm64), put("bnoff.rv", rv64)

# ---- pooling: [n, c, T, H, W, k0, k1, k2, s0, s1, s2, p0, p1, p2, ceil, ties] ----
pool_geos = [
    (2, 3, 5, 9, 9, 1, 3, 3, 1, 2, 2, 0, 1, 1, 0, 0),
    (1, 2, 5, 7, 7, 2, 2, 2, 2, 2, 2, 0, 0, 0, 1, 0),
    (2, 2, 3, 5, 5, 2, 2, 2, 2, 2, 2, 0, 1, 1, 0, 0),
    (1, 3, 5, 6, 7, 3, 3, 3, 2, 2, 2, 1, 1, 1, 1, 0),
    (2, 2, 4, 6, 6, 2, 3, 3, 1, 2, 2, 0, 1, 1, 0, 1),
]
put("pool.count", [len(pool_geos)])
for i, g in enumerate(pool_geos):
    n, c, T, H, W, k0, k1, k2, s0, s1, s2, p0, p1, p2, ceil, ties = g
    if ties:  # few distinct values: the gradient must go to the FIRST maximum
        x = torch.randint(0, 3, (n, c, T, H, W)).float().requires_grad_(True)
    else:
        x = rand(n, c, T, H, W)
    kw = dict(kernel_size=(k0, k1, k2), stride=(s0, s1, s2), padding=(p0, p1, p2),
              ceil_mode=bool(ceil))
    put(f"pool{i}.geo", g), put(f"pool{i}.x", x)
    y = F.max_pool3d(x, **kw)
    dy = torch.rand_like(y) * 2 - 1
    (y * dy).sum().backward()
    put(f"pool{i}.dy", dy), put(f"pool{i}.max_y", y), put(f"pool{i}.max_dx", x.grad)
    x.grad = None
    y = F.avg_pool3d(x, count_include_pad=True, **kw)
    (y * dy).sum().backward()
    put(f"pool{i}.avg_y", y), put(f"pool{i}.avg_dx", x.grad)

# ---- adaptive_avg_pool3d(1) ----
x = rand(3, 5, 4, 7, 7)
y = F.adaptive_avg_pool3d(x, 1).reshape(3, 5)
dy = torch.rand_like(y) * 2 - 1
(y * dy).sum().backward()
put("gap.x", x), put("gap.dy", dy), put("gap.y", y), put("gap.dx", x.grad)

# ---- linear ----
x, w, b = rand(4, 64), rand(10, 64), rand(10)
y = F.linear(x, w, b)
dy = torch.rand_like(y) * 2 - 1
(y * dy).sum().backward()
put("lin.x", x), put("lin.w", w), put("lin.b", b), put("lin.dy", dy), put("lin.y", y)
put("lin.dx", x.grad), put("lin.dw", w.grad), put("lin.db", b.grad)

# ---- cross_entropy with label smoothing (per clip), gradient of the sum ----
for i, eps in enumerate([0.0, 0.1]):
    z = rand(6, 11, lo=-4.0, hi=4.0)
    lab = torch.randint(0, 11, (6,))
    loss = F.cross_entropy(z, lab, reduction="none", label_smoothing=eps)
    loss.sum().backward()
    put(f"xent{i}.eps", [eps]), put(f"xent{i}.z", z), put(f"xent{i}.label", lab)
    put(f"xent{i}.loss", loss), put(f"xent{i}.dz", z.grad)
    put(f"xent{i}.prob", torch.softmax(z.detach(), dim=1))

# ---- BCE with logits, summed over K per clip ----
z = rand(5, 7, lo=-5.0, hi=5.0)
t = (torch.rand(5, 7) < 0.4).float()
loss = F.binary_cross_entropy_with_logits(z, t, reduction="none").sum(1)
loss.sum().backward()
put("bce.z", z), put("bce.t", t), put("bce.loss", loss), put("bce.dz", z.grad)
put("bce.prob", torch.sigmoid(z.detach()))

# ---- optimizers: 3 steps on 1000 parameters with stored gradients ----
NP = 1000
p0 = torch.rand(NP) * 2 - 1
grads = [torch.rand(NP) * 2 - 1 for _ in range(3)]
put("opt.p0", p0)
for s, g in enumerate(grads):
    put(f"opt.g{s}", g)
SGD, RMSprop, AdamW = torch.optim.SGD, torch.optim.RMSprop, torch.optim.AdamW
optims = {
    "sgd_nesterov": lambda p: SGD([p], lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
    "sgd_damp": lambda p: SGD([p], lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01),
    "rmsprop_mom": lambda p: RMSprop([p], lr=0.01, alpha=0.99, eps=1e-8, weight_decay=1e-3,
                                     momentum=0.9),
    "rmsprop": lambda p: RMSprop([p], lr=0.01, alpha=0.99, eps=1e-8),
    "adamw": lambda p: AdamW([p], lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.05),
}
for name, make in optims.items():
    p = p0.clone().requires_grad_(True)
    opt = make(p)
    for g in grads:
        p.grad = g.clone()
        opt.step()
    put(f"opt.{name}.p", p)
    st = opt.state[p]
    for key in ("momentum_buffer", "square_avg", "exp_avg", "exp_avg_sq"):
        if key in st and st[key] is not None:
            put(f"opt.{name}.{key}", st[key])

save_vtt(sys.argv[1], records)
print(f"torch_ops.py: {len(records)} records, torch {torch.__version__}")
