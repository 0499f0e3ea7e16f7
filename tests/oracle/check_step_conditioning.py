#!/usr/bin/python3
"""check_step_conditioning.py DUMP_DIR: how far float32 itself is from exact, step by step.

DUMP_DIR is written by `vidtrain train ... --dump DUMP_DIR` (states before and after every
step, the decoded batches). For every step, from vidtrain's state before it, the gradient
is computed by PyTorch (vidtrain's twin, tests/oracle/torch_zoo.py) in float64 — the reference —
and in float32; vidtrain's own gradient is read back from its momentum buffers
(m_k = mu m_{k-1} + g_k + wd w, SGD with dampening 0, the default). Printed per step: the
worst tensor's max |g - g64| / max |g64| for PyTorch float32 and for vidtrain, per max-pool
how many windows hold two different values closer than float32 can resolve (in float64),
and how many windows pick a different argmax in float32 than in float64 (PyTorch).

What it shows (issue 26): on clips with flat regions (the demo's solid shapes), a max-pool
window often holds values that are equal in exact arithmetic; float32 rounding breaks the
tie one way or the other and the whole gradient of that window goes to another voxel.
Such a step's float32 gradient is 1e-4..1e-3 away from float64 in PyTorch as in vidtrain,
and any change of summation order (one tower or two, cpu or cpu-ref) may flip it. Over an
epoch these flips, not the towers, set how close two float32 runs can end.

Needs Debian's python3-torch (exit 77: skip). SGD only (the default optimizer).
"""
import json
import os
import sys

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:
    print(f"SKIP: {e}", file=sys.stderr)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_twin import read_safetensors  # noqa: E402
from torch_zoo import build  # noqa: E402


def gradients(info, st, x, y, dtype):
    """(name, gradient + wd * w) per parameter in parameters() order, and each max-pool's
    argmax indices."""
    m = build(info['model'], int(info['classes']), int(info['clip_t']), int(info['crop']),
              int(info['crop'])).to(dtype)
    m.load_state_dict({k: v.to(dtype) if v.dtype.is_floating_point else v
                       for k, v in st.items() if not k.startswith('optim.')})
    m.train()
    pools, close = [], []
    for mod in m.modules():
        if isinstance(mod, nn.MaxPool3d):
            mod.register_forward_hook(lambda mo, i, o: pools.append(F.max_pool3d(
                i[0], mo.kernel_size, mo.stride, mo.padding, return_indices=True)[1]))
            mod.register_forward_hook(lambda mo, i, o: close.append(near_ties(mo, i[0])))
    loss = F.cross_entropy(m(x.to(dtype)), y, label_smoothing=info['smoothing'])
    m.zero_grad()
    loss.backward()
    wd = info['wd']
    grads = [(n, p.grad.double() + wd * p.detach().double()) for n, p in m.named_parameters()]
    return grads, pools, close


def near_ties(mo, t):
    """Windows (kernel = stride, no padding: tiny's pools) whose largest value is positive
    (a gradient flows through the ReLU before) and whose two largest values differ, but by
    less than float32's resolution of the layer's largest value (2^-23 max|x|): float32
    cannot tell which is larger, so any rounding picks one."""
    k = mo.kernel_size
    kt, kh, kw = (k, k, k) if isinstance(k, int) else k
    n, c, tt, h, w = t.shape
    win = t.reshape(n, c, tt // kt, kt, h // kh, kh, w // kw, kw)
    win = win.permute(0, 1, 2, 4, 6, 3, 5, 7).reshape(-1, kt * kh * kw)
    top = win.topk(2, dim=1).values
    gap = (top[:, 0] - top[:, 1]) / t.abs().max()
    return int(((top[:, 0] > 0) & (gap > 0) & (gap < 2.0 ** -23)).sum())


def main():
    d = sys.argv[1]
    info = json.load(open(os.path.join(d, 'dump.json')))
    if info['optim'] != 'sgd' or info['dampening'] != 0 or info['clip_norm'] > 0:
        print('check_step_conditioning: SGD without dampening or clipping only', file=sys.stderr)
        return 2
    steps = [json.loads(line) for line in open(os.path.join(d, 'train.jsonl'))]
    mu = info['momentum']
    worst = 0.0
    for s in steps:
        k = s['step']
        st0 = read_safetensors(os.path.join(d, f'state_{k - 1:06d}.safetensors'))[1]
        st1 = read_safetensors(os.path.join(d, f'state_{k:06d}.safetensors'))[1]
        x = torch.from_numpy(np.fromfile(os.path.join(d, s['file']), dtype=np.float32)
                             .reshape(s['shape']))
        y = torch.tensor(s['labels'])
        g64, p64, close = gradients(info, st0, x, y, torch.float64)
        g32, p32, _ = gradients(info, st0, x, y, torch.float32)
        m1 = st1['optim.sgd.momentum_buffer'].double()
        m0 = st0['optim.sgd.momentum_buffer'].double() if k > 1 else torch.zeros_like(m1)
        at, wt, wv = 0, (0.0, ''), (0.0, '')
        for (name, a), (_, b) in zip(g64, g32):
            n = a.numel()
            gv = (m1[at:at + n] - mu * m0[at:at + n]).view_as(a)
            at += n
            scale = max(float(a.abs().max()), 1e-30)
            rt, rv = float((b - a).abs().max()) / scale, float((gv - a).abs().max()) / scale
            wt = max(wt, (rt, name))
            wv = max(wv, (rv, name))
        flips = [int((a != b).sum()) for a, b in zip(p64, p32)]
        worst = max(worst, wt[0])
        print(f'  step {k:4d}  PyTorch f32 {wt[0]:.1e} ({wt[1]:12s})  vidtrain {wv[0]:.1e} '
              f'({wv[1]:12s})  max-pool windows below float32 resolution {close}, '
              f'argmax f32 != f64 {flips}', flush=True)
    print(f'largest PyTorch float32 gradient error over the steps: {worst:.1e}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
