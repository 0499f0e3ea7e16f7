#!/usr/bin/env python3
"""bench_torch_gpu.py: the PyTorch peer of `vidtrain bench step` on one GPU.

Times training steps of torchvision's r3d_18 (SGD momentum 0.9, softmax cross-entropy,
the same defaults as vidtrain's bench: 10 classes) on synthetic clips that are already
on the GPU, with torch.backends.cudnn.benchmark on, and prints one line "clips/s: X"
that bench/bench-gpu.sh parses. --precision fp32 (default), tf32 (PyTorch's allow_tf32
switches for convolutions and matrix products; --tf32 says the same) or bf16
(torch.autocast('cuda', dtype=torch.bfloat16) around forward and loss, float32 weights,
TF32 off: vidtrain's --precision bf16).

It must never download weights (random initialisation is all a speed test needs).
"""
import argparse
import time

import torch
import torchvision


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--clip", default="16x112x112", help="TxHxW")
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--tf32", action="store_true", help="the same as --precision tf32")
    ap.add_argument("--precision", choices=("fp32", "tf32", "bf16"), default="fp32")
    ap.add_argument("--device", default="cuda:0")
    a = ap.parse_args()
    t, h, w = (int(v) for v in a.clip.lower().split("x"))
    prec = "tf32" if a.tf32 else a.precision

    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = prec == "tf32"
    torch.backends.cudnn.allow_tf32 = prec == "tf32"
    dev = torch.device(a.device)
    torch.manual_seed(0)
    model = torchvision.models.video.r3d_18(weights=None, num_classes=a.classes).to(dev)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.randn(a.batch, 3, t, h, w, device=dev)
    y = torch.randint(0, a.classes, (a.batch,), device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=prec == "bf16"):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize(dev)
    t0 = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    torch.cuda.synchronize(dev)
    el = time.perf_counter() - t0
    print(f"torch {torch.__version__} torchvision {torchvision.__version__} "
          f"cudnn {torch.backends.cudnn.version()} on {torch.cuda.get_device_name(dev)}, "
          f"{prec.upper()}, loss {loss.item():.4f}")
    print(f"step: {el / a.steps * 1000:.1f} ms, peak memory {torch.cuda.max_memory_allocated(dev) / 2**30:.2f} GiB")
    print(f"clips/s: {a.steps * a.batch / el:.2f}")


if __name__ == "__main__":
    main()
