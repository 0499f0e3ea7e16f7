#!/usr/bin/env python3
"""torch_golden.py: PyTorch truth for vidtrain's tests, written as safetensors files
(json + numpy: an independent writer, so the C reader is tested too).

  torch_golden.py net OUTDIR    tiny, r3d18, c3d .safetensors (test_golden)
  torch_golden.py optim OUTDIR  optim.safetensors (test_optim)
  torch_golden.py bf16 OUTDIR   tiny_bf16.safetensors (test_bf16)

net: each file holds the initial state dict under its PyTorch names, the input "x",
targets "label.<h>" (I64) / "target.<h>" (F32), and after one train-mode forward
(batch-statistics BN) + loss + backward with grad_scale 1/N: "logits.<h>",
"loss_clip" (N), "head_loss" (H), "grad.<param>" for every parameter, "after.<buffer>"
for every BN buffer, then "eval_logits.0" from an eval-mode forward. tiny has two heads
(softmax with label smoothing 0.1; BCE with weight 0.5) and dropout 0.5 whose mask is
vidtrain's counter-based one, replayed here (models/net.c, backend.h); r3d18 is
torchvision's r3d_18 with 3 classes on 2 clips of 2x24x24; c3d is the port's C3D (conv
bias, padded pool5, both dropouts) on 2 clips of 16x16x16.

bf16: tiny as in net mode, with the forward and loss under torch.autocast('cpu',
dtype=torch.bfloat16) — PyTorch's bf16 mixed precision, the truth for vidtrain's BF16
(models/backend.h) — then one SGD step (lr 0.1, momentum 0.9, weight decay 1e-3):
"sgd.<param>" holds the parameters after it. Tensors are stored as float32 (bf16 values
widen exactly). What torch 1.13's CPU autocast does, checked by running it: conv3d and
linear cast input, weight and bias to bf16 and return bf16 (oneDNN accumulates in fp32);
batch_norm is on neither autocast list, so it runs on the bf16 conv output with fp32
weight/bias/running stats (stats in fp32, bf16 output); relu and add stay bf16;
max_pool3d, avg_pool3d, adaptive_avg_pool3d, cross_entropy and
binary_cross_entropy_with_logits are on the fp32 list (bf16 inputs widened, fp32 out).
Gradients follow the casts back: every activation gradient is bf16, conv/linear weight
and bias gradients are rounded to bf16 before they reach the fp32 .grad, BN's dgamma and
dbeta are fp32. One exception, replaced here: on a CPU without AVX512-BF16 (this build
machine, CI) torch 1.13's bf16 GEMMs may ACCUMULATE IN BF16. Measured: conv3d (through
slow_conv3d) is bit-exact with out = bf16(out + bf16(w * x)) summed in (cin, kt, kh, kw)
order, errors up to hundreds of bf16 ulps; linear's forward accumulates in fp32 but its
weight gradient does not. oneDNN (AVX512-BF16), cuDNN and cuBLAS accumulate in fp32 and
vidtrain follows them, so each Conv3d and Linear here computes, with autocast's casts
around it, in float32 on the bf16-rounded input, weight and bias and rounds its output to
bf16 once (fp32_accumulating); autograd then rounds their input and weight gradients to
bf16 at those casts, as autocast does.

optim: for each case (SGD momentum+dampening+wd with step schedule, SGD Nesterov with
cosine, RMSprop with/without momentum, AdamW with clipping) the initial params, the
gradient of every step, torch's LR of every step (torch.optim.lr_scheduler), the clip
norm returned by clip_grad_norm_, and the params and optimizer state after every step.
"""
import os
import sys

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:  # the C tests turn 77 into a ctest skip
    print(f"SKIP: {e}", file=sys.stderr)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_zoo  # noqa: E402
from st_write import save_st  # noqa: E402

M64 = (1 << 64) - 1


def hash64(x):  # base/common.h vt_hash64 (splitmix64 finaliser)
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def dropout_mask(seed, n, f, p, k=0):
    """vidtrain's mask: clip j draws with hash64(hash64(seed + j) + k) (models/net.c), element
    i keeps if (hash64(s ^ i*golden) >> 40) / 2^24 >= p (backend.h), scaled by 1/(1-p)."""
    m = np.zeros((n, f), np.float32)
    scale = np.float32(1.0) / (np.float32(1.0) - np.float32(p))
    for j in range(n):
        s = hash64((hash64((seed + j) & M64) + k) & M64)
        for i in range(f):
            u = (hash64(s ^ ((i * 0x9E3779B97F4A7C15) & M64)) >> 40) / 16777216.0
            m[j, i] = scale if u >= p else 0.0
    return torch.from_numpy(m)


def fp32_accumulating(*modules):
    """Conv3d and Linear layers compute as cuDNN/cuBLAS do in bf16: bf16 operands, float32
    accumulation, one rounding of the output (see the module docstring)."""
    def bf(t):
        return t.to(torch.bfloat16).float() if t is not None else None

    def conv_forward(self, x):
        with torch.autocast("cpu", enabled=False):
            return F.conv3d(bf(x), bf(self.weight), bf(self.bias), self.stride,
                            self.padding).to(torch.bfloat16)

    def linear_forward(self, x):
        with torch.autocast("cpu", enabled=False):
            return F.linear(bf(x), bf(self.weight), bf(self.bias)).to(torch.bfloat16)
    for mod in modules:
        for m in mod.modules():
            if isinstance(m, nn.Conv3d):
                m.forward = conv_forward.__get__(m)
            elif isinstance(m, nn.Linear):
                m.forward = linear_forward.__get__(m)


def randomise_bn(model, g):
    # Non-trivial gamma/beta/running stats so every BN path is exercised.
    for m in model.modules():
        if isinstance(m, nn.BatchNorm3d):
            with torch.no_grad():
                m.weight.uniform_(0.5, 1.5, generator=g)
                m.bias.uniform_(-0.2, 0.2, generator=g)
                m.running_mean.uniform_(-0.1, 0.1, generator=g)
                m.running_var.uniform_(0.5, 1.5, generator=g)


def golden_net(out, name, model, heads, x, targets, dropout, seed, feats_fn=None, bf16=False):
    """heads: list of (module name, nn.Linear, kind, weight, smoothing); feats_fn(x): the
    features the heads see, dropout included (default: tiny/torchvision trunks). bf16: the
    forward and the losses under CPU autocast(bfloat16), then one SGD step."""
    n = x.shape[0]
    ac = torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16)
    ac.__enter__()
    sd0 = {}
    for k, v in model.state_dict().items():
        sd0[k] = v.clone()
    for hname, lin, _, _, _ in heads[1:]:
        sd0[hname + ".weight"] = lin.weight.detach().clone()
        sd0[hname + ".bias"] = lin.bias.detach().clone()
    model.train()
    if feats_fn is not None:
        feats = feats_fn(x)
    else:
        feats = model.features(x) if hasattr(model, "features") else None
        if feats is None:  # torchvision: everything but fc
            m = model
            feats = m.avgpool(m.layer4(m.layer3(m.layer2(m.layer1(m.stem(x)))))).flatten(1)
        if dropout > 0:
            feats = feats * dropout_mask(seed, n, feats.shape[1], dropout)
    logits, losses = [], []
    for hi, (hname, lin, kind, w, smooth) in enumerate(heads):
        z = lin(feats)
        logits.append(z)
        if kind == "softmax":
            l = F.cross_entropy(z, targets[hi], reduction="none", label_smoothing=smooth)
        else:
            l = F.binary_cross_entropy_with_logits(z, targets[hi], reduction="none").sum(1)
        losses.append(l)
    loss_clip = sum(w * l for (_, _, _, w, _), l in zip(heads, losses))
    ac.__exit__(None, None, None)
    (loss_clip.sum() / n).backward()
    t = {}
    for k, v in sd0.items():
        t[k] = v.numpy()
    t["x"] = x.numpy()
    for hi, (hname, lin, kind, w, smooth) in enumerate(heads):
        if kind == "softmax":
            t[f"label.{hi}"] = targets[hi].numpy().astype(np.int64)
        else:
            t[f"target.{hi}"] = targets[hi].numpy()
        t[f"logits.{hi}"] = logits[hi].detach().float().numpy()
    t["loss_clip"] = loss_clip.detach().numpy()
    t["head_loss"] = torch.stack([l.sum() for l in losses]).detach().numpy()
    named = dict(model.named_parameters())
    for hname, lin, _, _, _ in heads[1:]:
        named[hname + ".weight"] = lin.weight
        named[hname + ".bias"] = lin.bias
    for k, p in named.items():
        t["grad." + k] = p.grad.numpy()
    for k, v in model.state_dict().items():
        if "running" in k or "num_batches" in k:
            t["after." + k] = v.numpy()
    model.eval()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        t["eval_logits.0"] = model(x).float().numpy()
    if bf16:
        opt = torch.optim.SGD(list(named.values()), lr=0.1, momentum=0.9, weight_decay=1e-3)
        opt.step()
        for k, p in named.items():
            t["sgd." + k] = p.detach().numpy().copy()
    save_st(os.path.join(out, name + ".safetensors"), t,
            {"model": name, "n": n, "dropout": dropout, "seed": seed})


def net_mode(out, bf16=False):
    g = torch.Generator().manual_seed(1)
    torch.manual_seed(1)
    # tiny: 3 clips of 4x16x16, heads: softmax 5 classes (smoothing 0.1), BCE 4 (weight 0.5).
    tiny = torch_zoo.Tiny(5)
    randomise_bn(tiny, g)

    with torch.no_grad():
        tiny.fc.weight.normal_(0, 0.3, generator=g)  # larger than 0.01: a sensitive test
    h1 = nn.Linear(tiny.fc.in_features, 4)
    with torch.no_grad():
        h1.weight.normal_(0, 0.3, generator=g)
        h1.bias.uniform_(-0.1, 0.1, generator=g)
    if bf16:
        fp32_accumulating(tiny, h1)
    x = torch.randn(3, 3, 4, 16, 16, generator=g)
    label = torch.tensor([1, 4, 0])
    target = (torch.rand(3, 4, generator=g) > 0.5).float()
    golden_net(out, "tiny_bf16" if bf16 else "tiny", tiny, [("fc", tiny.fc, "softmax", 1.0, 0.1),
                                                            ("heads.1", h1, "bce", 0.5, 0.0)],
               x, [label, target], 0.5, 1234, bf16=bf16)
    if bf16:
        return
    # r3d18: torchvision's, 3 classes, 2 clips of 2x24x24 (layer4 sees 1x2x2 per clip, so
    # its BN normalises over 8 values: small but not degenerate).
    r3d = torch_zoo.build("r3d18", 3)
    randomise_bn(r3d, g)
    with torch.no_grad():
        r3d.fc.weight.normal_(0, 0.1, generator=g)
    x = torch.randn(2, 3, 2, 24, 24, generator=g)
    golden_net(out, "r3d18", r3d, [("fc", r3d.fc, "softmax", 1.0, 0.0)], x,
               [torch.tensor([2, 0])], 0.0, 0)


def c3d_mode(out):
    # c3d: the port's C3D, 4 classes, 2 clips of 16x16x16 (the smallest clip pool5 takes),
    # both dropouts (p 0.5) replayed with vidtrain's masks (k = 0 after fc6, 1 after fc7).
    g = torch.Generator().manual_seed(3)
    torch.manual_seed(3)
    c3d = torch_zoo.C3D(4, 16, 16, 16)
    x = torch.randn(2, 3, 16, 16, 16, generator=g)
    seed, p = 99, 0.5

    def feats(x):
        h = c3d._trunk(x).flatten(1)
        h = F.relu(c3d.fc6(h)) * dropout_mask(seed, 2, 4096, p, 0)
        return F.relu(c3d.fc7(h)) * dropout_mask(seed, 2, 4096, p, 1)
    golden_net(out, "c3d", c3d, [("fc8", c3d.fc8, "softmax", 1.0, 0.0)], x,
               [torch.tensor([3, 1])], p, seed, feats)


def optim_mode(out):
    g = torch.Generator().manual_seed(2)
    n, steps = 1000, 6
    cases = [
        # name, optimizer factory, scheduler factory, clip_norm
        ("sgd", lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, dampening=0.1,
                                          weight_decay=1e-3),
         lambda o: torch.optim.lr_scheduler.SequentialLR(o, [
             torch.optim.lr_scheduler.LinearLR(o, 1 / 2, 1.0, total_iters=1),
             torch.optim.lr_scheduler.StepLR(o, step_size=2, gamma=0.5)], milestones=[2]), 0.0),
        ("nesterov", lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True,
                                               weight_decay=5e-4),
         lambda o: torch.optim.lr_scheduler.SequentialLR(o, [
             torch.optim.lr_scheduler.LinearLR(o, 1 / 3, 1.0, total_iters=2),
             torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=4, eta_min=0.001)],
             milestones=[3]), 3.0),
        ("rmsprop", lambda p: torch.optim.RMSprop(p, lr=0.01, alpha=0.99, eps=1e-8,
                                                  momentum=0.9, weight_decay=1e-4),
         lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda s: 1.0), 0.0),
        ("rmsprop0", lambda p: torch.optim.RMSprop(p, lr=0.01, alpha=0.9, eps=1e-8),
         lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda s: 1.0), 0.0),
        ("adamw", lambda p: torch.optim.AdamW(p, lr=0.01, betas=(0.9, 0.999), eps=1e-8,
                                              weight_decay=0.01),
         lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=6, eta_min=0.0), 0.5),
    ]
    t = {}
    for name, mk_opt, mk_sched, clip in cases:
        p = torch.nn.Parameter(torch.randn(n, generator=g))
        t[f"{name}.p0"] = p.detach().numpy().copy()
        opt = mk_opt([p])
        sched = mk_sched(opt)
        for s in range(steps):
            gr = torch.randn(n, generator=g) * (1.0 + s)
            t[f"{name}.g{s}"] = gr.numpy().copy()
            t[f"{name}.lr{s}"] = np.array([opt.param_groups[0]["lr"]], np.float32)
            p.grad = gr.clone()
            if clip > 0:
                norm = torch.nn.utils.clip_grad_norm_([p], clip)
            else:
                norm = p.grad.norm()
            t[f"{name}.norm{s}"] = np.array([float(norm)], np.float32)
            opt.step()
            sched.step()
            t[f"{name}.p{s + 1}"] = p.detach().numpy().copy()
        st = opt.state[p]
        for k in ("momentum_buffer", "square_avg", "exp_avg", "exp_avg_sq"):
            if k in st and st[k] is not None:
                t[f"{name}.state.{k}"] = st[k].numpy().copy()
    save_st(os.path.join(out, "optim.safetensors"), t, {"steps": steps, "n": n})


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("net", "optim", "bf16"):
        raise SystemExit(__doc__)
    os.makedirs(sys.argv[2], exist_ok=True)
    torch.set_num_threads(1)
    if sys.argv[1] == "net":
        net_mode(sys.argv[2])
        c3d_mode(sys.argv[2])
    elif sys.argv[1] == "bf16":
        net_mode(sys.argv[2], bf16=True)
    else:
        optim_mode(sys.argv[2])


if __name__ == "__main__":
    main()
