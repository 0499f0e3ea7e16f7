#!/usr/bin/python3
"""torch_init.py OUT [MODEL...]: the outside truth for `vidtrain train --init` (tests/test_transfer.c).

For each torchvision video model (r3d_18, mc3_18, r2plus1d_18; s3d when asked) it writes
  OUT/<model>.pth            torch.save(state_dict) of a seeded model with 400 classes and
                             non-trivial BN running statistics (the zip format)
  OUT/<model>_wrapped.pth    the same nested as {'epoch': 3, 'state_dict': {'module.' + k: v}}
                             (DataParallel's prefix, a training script's dict)
  OUT/<model>.eval.bin       float32 logits (N, 400) of model.eval() on OUT/clip_<model>.bin
  OUT/<model>.frozen.bin     fine-tuning with every BN in eval mode (model.train(), each
                             BatchNorm3d .eval()), computed in float64: logits, then the
                             gradients of stem.0.weight, layer1.0.conv1.1.weight (a BN
                             gamma) and fc.weight for the loss sum(cross_entropy) / N;
                             index.json's torch32_nmse is float32 PyTorch's NMSE from them,
                             and sens_nmse the largest NMSE from them of 3 float64 runs (1 for s3d)
                             with every weight, statistic and input value moved by a
                             relative 2^-20 (about a float32 sum's rounding): how far a
                             correct float32 computation may land
  OUT/clip_<model>.bin       float32 input (N, 3, T, H, W), labels in the JSON
  OUT/index.json             shapes, labels, what each file holds (rewritten after each
                             model, which then prints 'done <model>' on stdout)
Run with Debian's python (/usr/bin/python3: torch, torchvision).
"""
import copy
import json
import os
import sys

import torch
import torch.nn.functional as F
import torchvision.models.video as tvv

# Every layer of the three ResNets still sees more than one position at 8x32x32 (layer4:
# 1x2x2); the smallest clip keeps test_transfer's cost down (48x48 cost 2.25x the MACs).
MODELS = {
    "r3d_18": ("r3d18", (2, 3, 8, 32, 32)),
    "mc3_18": ("mc3_18", (2, 3, 8, 32, 32)),
    "r2plus1d_18": ("r2plus1d18", (2, 3, 8, 32, 32)),
    "s3d": ("s3d", (1, 3, 13, 209, 209)),  # the smallest clip S3D takes
}


def seeded(name, seed):
    torch.manual_seed(seed)
    m = getattr(tvv, name)(num_classes=400)
    # BN running statistics as a trained model has them: not 0/1, so eval mode and frozen
    # BN really read them.
    g = torch.Generator().manual_seed(seed + 1)
    for mod in m.modules():
        if isinstance(mod, torch.nn.BatchNorm3d):
            c = mod.num_features
            mod.running_mean.copy_(torch.randn(c, generator=g) * 0.1)
            mod.running_var.copy_(torch.rand(c, generator=g) * 0.5 + 0.75)
            mod.weight.data.copy_(torch.rand(c, generator=g) * 0.5 + 0.75)
            mod.bias.data.copy_(torch.randn(c, generator=g) * 0.1)
            mod.num_batches_tracked.fill_(int(torch.randint(1, 1000, (1,), generator=g)))
    return m


def frozen_pass(md, x, labels, grads):
    """Fine-tuning with every BN frozen: md.train() with each BatchNorm3d in eval mode
    (s3d's Dropout too: vidtrain's net has none here), the loss sum(cross_entropy) / N;
    returns the logits and the gradients named in grads, in float64."""
    # Only the gradients asked for: the others' weight gradients (a tenth of the float64
    # passes' time) are never read, and the ones asked for come out bit for bit the same.
    for n, p in md.named_parameters():
        p.requires_grad_(n in grads)
    md.train()
    for mod in md.modules():
        if isinstance(mod, (torch.nn.BatchNorm3d, torch.nn.Dropout)):
            mod.eval()
    md.zero_grad()
    logits = md(x)
    (F.cross_entropy(logits, torch.tensor(labels), reduction="sum") / x.shape[0]).backward()
    params = dict(md.named_parameters())
    return logits.detach().double(), [params[n].grad.double().clone() for n in grads]


def main():
    out = sys.argv[1]
    names = sys.argv[2:] or ["r3d_18", "mc3_18", "r2plus1d_18"]
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(2)
    index = {}
    for k, name in enumerate(names):
        vt_name, shape = MODELS[name]
        m = seeded(name, 100 + k)
        sd = m.state_dict()
        torch.save(sd, f"{out}/{name}.pth")
        wrapped = {"epoch": 3, "state_dict": {"module." + key: v for key, v in sd.items()},
                   "best_acc": 0.5, "arch": name}
        if k == 0:  # one wrapped file is enough (they are large)
            torch.save(wrapped, f"{out}/{name}_wrapped.pth")
        g = torch.Generator().manual_seed(7 + k)
        x = torch.randn(*shape, generator=g)
        labels = [int(v) for v in torch.randint(0, 400, (shape[0],), generator=g)]
        x.numpy().astype("<f4").tofile(f"{out}/clip_{name}.bin")
        m.eval()
        with torch.no_grad():
            m(x).numpy().astype("<f4").tofile(f"{out}/{name}.eval.bin")
        # frozen BN: train mode, BN layers in eval mode (fine-tuning's --freeze-bn), in
        # float32 and float64: the float64 gradients are the truth, and float32 PyTorch's
        # own distance from them is one sample of how far float32 lands (mc3_18's and
        # r2plus1d_18's stems: NMSE ~1e-5 on one CPU, ~1e-12 on another; sens below)
        first = "features.0.0.0.weight" if name == "s3d" else "stem.0.weight"
        head = "classifier.1.weight" if name == "s3d" else "fc.weight"
        bn = "features.0.0.1.weight" if name == "s3d" else "layer1.0.conv1.1.weight"
        grads = [first, bn, head]
        got = {dt: frozen_pass(m.to(dt), x.to(dt), labels, grads) for dt in (torch.float64, torch.float32)}
        ref_logits, ref_grads = got[torch.float64]
        nmse = lambda gs: [float(((a - b) ** 2).sum() / (b ** 2).sum()) for a, b in zip(gs, ref_grads)]
        t32 = nmse(got[torch.float32][1])
        # The gradient's conditioning, measured rather than left to the luck of one float32
        # run: a ReLU input within rounding of 0 flips which way the gradient goes, so a
        # correct float32 result may be ~1e-6 off (mc3_18's, r2plus1d_18's stems) or ~1e-13
        # (r3d_18), and which one float32 PyTorch lands on depends on its CPU kernels.
        # Three perturbed runs, but one for s3d: its float32 PyTorch distance (~1e-2 in the
        # stem, 10x of it is the bound) is 100x what a 2^-20 perturbation moves (~1e-4),
        # so more runs could not raise the bound, and each costs ~20 s of CPU (13x209x209).
        # Fewer runs can only lower sens: the bound is never looser.
        sens = [0.0] * len(grads)
        gp = torch.Generator().manual_seed(11 + k)
        for _ in range(1 if name == "s3d" else 3):
            mp = copy.deepcopy(m).double()
            with torch.no_grad():
                for t in list(mp.parameters()) + [b for b in mp.buffers() if b.is_floating_point()]:
                    t.mul_(1 + 2.0 ** -20 * torch.randn(t.shape, generator=gp, dtype=torch.float64))
            xp = x.double() * (1 + 2.0 ** -20 * torch.randn(x.shape, generator=gp, dtype=torch.float64))
            sens = [max(a, b) for a, b in zip(sens, nmse(frozen_pass(mp, xp, labels, grads)[1]))]
        with open(f"{out}/{name}.frozen.bin", "wb") as f:
            f.write(ref_logits.numpy().astype("<f4").tobytes())
            for gr in ref_grads:
                f.write(gr.numpy().astype("<f4").tobytes())
        index[name] = {"vidtrain": vt_name, "head": head, "shape": list(shape), "labels": labels,
                       "classes": 400, "grads": grads,
                       "grad_numel": [dict(m.named_parameters())[n].numel() for n in grads], "torch32_nmse": t32,
                       "sens_nmse": sens}
        # index.json so far, whole (renamed into place), then a line: test_transfer checks
        # this model while the next one is computed.
        with open(f"{out}/index.json.tmp", "w") as f:
            json.dump(index, f, indent=1)
        os.replace(f"{out}/index.json.tmp", f"{out}/index.json")
        print(f"done {name}", flush=True)


if __name__ == "__main__":
    main()
