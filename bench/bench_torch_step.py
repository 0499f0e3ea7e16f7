#!/usr/bin/env python3
"""bench_torch_step.py: PyTorch CPU's training-step throughput, the peer figure for
bench/bench-cpu-step.sh. Same model definitions as vidtrain's zoo (tests/oracle/torch_zoo.py;
pytorchvideo's family from tests/oracle/torch_pyvideo.py, its head's dropout off as
vidtrain's default; VideoMAE's ViTs from tests/oracle/torch_vit.py, attention as PyTorch
1.13 spells it: softmax(q k^T) v, no fused kernel), SGD momentum 0.9, softmax cross-entropy, train-mode BN, synthetic input.

  bench_torch_step.py MODEL TxHxW BATCH THREADS STEPS WARMUP [CLASSES]
prints "clips/s: X".
"""
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "oracle"))
import torch_pyvideo  # noqa: E402
import torch_zoo  # noqa: E402


def main():
    if len(sys.argv) not in (7, 8):
        raise SystemExit(__doc__)
    model, clip = sys.argv[1], sys.argv[2]
    batch, threads, steps, warmup = map(int, sys.argv[3:7])
    classes = int(sys.argv[7]) if len(sys.argv) == 8 else 10
    t, h, w = map(int, clip.split("x"))
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    if model in torch_pyvideo.MODELS:
        m = torch_pyvideo.MODELS[model][0](classes)
        for mod in m.modules():  # vidtrain's --dropout default is 0
            if isinstance(mod, torch.nn.Dropout):
                mod.p = 0.0
    elif model == "mvit_v2_s":  # torchvision's own, sized for the clip (its head's dropout off)
        import torch_mvit
        m = torch_mvit.v2_s(t, h, classes)
        m.head[0].p = 0.0
    elif model in ("videomae_vit_s", "videomae_vit_b"):  # tests/oracle/torch_vit.py's VideoMAE
        import torch_vit
        dim, heads = (384, 6) if model == "videomae_vit_s" else (768, 12)
        m = torch_vit.VisionTransformer(dim, 12, heads, classes)
    else:
        m = torch_zoo.build(model, classes, t, h, w)
    m.train()
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(batch, 3, t, h, w)
    y = torch.randint(0, classes, (batch,))

    def step():
        opt.zero_grad(set_to_none=False)
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()

    for _ in range(warmup):
        step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    dt = time.perf_counter() - t0
    print(f"torch {torch.__version__} {model} clip {clip} batch {batch} threads {threads}: "
          f"{dt / steps * 1000:.1f} ms/step")
    print(f"clips/s: {batch * steps / dt:.2f}")


if __name__ == "__main__":
    main()
