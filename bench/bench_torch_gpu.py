#!/usr/bin/env python3
"""bench_torch_gpu.py: the PyTorch peer of `vidtrain bench step` on one GPU, at its best.

Times training steps of torchvision's r3d_18 (SGD momentum 0.9, softmax cross-entropy,
the same defaults as vidtrain's bench: 10 classes) on synthetic clips that are already
on the GPU, with torch.backends.cudnn.benchmark on, in three modes (issue 45: vidtrain
claims "faster than PyTorch" only against the BEST of them):
  eager           the model as written (NCDHW);
  channels_last   model and input in torch.channels_last_3d (NDHWC);
  compile         torch.compile(model) in channels_last_3d.
--precision fp32 (default), tf32 (allow_tf32 for convolutions and matrix products;
--tf32 says the same) or bf16 (torch.autocast(bfloat16) around forward and loss, float32
weights, TF32 off: vidtrain's --precision bf16).

Each mode runs in a child process of its own under a time cap (--mode-timeout, compile
included), so a mode that fails, crashes or takes too long is reported as
"unavailable (...)" and the others still count. Prints one line per mode,
"mode M: clips/s X" or "mode M: unavailable (why)", then "best: M" and, last, one line
"clips/s: X" (the best mode's) that bench/bench-gpu.sh and scripts/gpu-perf.sh parse.

--dry-run: a tiny case on the CPU (clip 4x32x32, batch 2, one step each, cap 120 s) so
that this script's Python is checked where there is no GPU (test_bench_gpu_cmds runs it
with --modes eager,channels_last; torch.compile on a CPU may be missing or slow: it is
then reported unavailable, never a crash).
It must never download weights (random initialisation is all a speed test needs).
"""
import argparse
import os
import subprocess
import sys
import time

MODES = ("eager", "channels_last", "compile")


def one_mode(a, mode, prec):
    """Runs one mode in this process and prints its lines (the child's job)."""
    import torch
    import torchvision

    t, h, w = (int(v) for v in a.clip.lower().split("x"))
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = prec == "tf32"
    torch.backends.cudnn.allow_tf32 = prec == "tf32"
    torch.manual_seed(0)
    fmt = torch.channels_last_3d if mode in ("channels_last", "compile") else torch.contiguous_format
    model = torchvision.models.video.r3d_18(weights=None, num_classes=a.classes).to(dev)
    model = model.to(memory_format=fmt)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    run = torch.compile(model) if mode == "compile" else model
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.randn(a.batch, 3, t, h, w, device=dev).contiguous(memory_format=fmt)
    y = torch.randint(0, a.classes, (a.batch,), device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=prec == "bf16"):
            loss = loss_fn(run(x), y)
        loss.backward()
        opt.step()
        return loss

    def sync():
        if cuda:
            torch.cuda.synchronize(dev)

    t0 = time.perf_counter()
    for _ in range(a.warmup):
        step()
    sync()
    warm = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    sync()
    el = time.perf_counter() - t0
    name = torch.cuda.get_device_name(dev) if cuda else "cpu"
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    print(f"torch {torch.__version__} torchvision {torchvision.__version__} cudnn {cudnn} on "
          f"{name}, {prec.upper()}, mode {mode}, loss {loss.item():.4f}, warm-up {warm:.1f} s")
    peak = f", peak memory {torch.cuda.max_memory_allocated(dev) / 2**30:.2f} GiB" if cuda else ""
    print(f"step: {el / a.steps * 1000:.1f} ms{peak}")
    print(f"clips/s: {a.steps * a.batch / el:.2f}", flush=True)


def parse_rate(text):
    for line in reversed(text.splitlines()):
        if line.startswith("clips/s:"):
            try:
                return float(line.split()[1])
            except (IndexError, ValueError):
                return None
    return None


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
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated: " + ", ".join(MODES))
    ap.add_argument("--mode-timeout", type=float, default=240.0,
                    help="seconds one mode may take, compile and warm-up included (default 240)")
    ap.add_argument("--dry-run", action="store_true",
                    help="a tiny case on the CPU: checks this script without a GPU")
    ap.add_argument("--one-mode", help=argparse.SUPPRESS)  # the child's entry
    a = ap.parse_args()
    prec = "tf32" if a.tf32 else a.precision
    if a.dry_run:
        a.device, a.clip, a.batch, a.steps, a.warmup = "cpu", "4x32x32", 2, 1, 1
        a.mode_timeout = min(a.mode_timeout, 120.0)
    if a.one_mode:
        one_mode(a, a.one_mode, prec)
        return 0
    modes = [m for m in a.modes.split(",") if m]
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        ap.error(f"--modes: unknown {bad} (choose from {', '.join(MODES)})")
    child = [sys.executable, os.path.abspath(__file__), "--batch", str(a.batch), "--clip", a.clip,
             "--classes", str(a.classes), "--steps", str(a.steps), "--warmup", str(a.warmup),
             "--precision", prec, "--device", a.device]
    print(f"PyTorch r3d_18 {a.clip} batch {a.batch} {prec.upper()} on {a.device}: modes "
          f"{', '.join(modes)}, {a.mode_timeout:.0f} s each at most", flush=True)
    best, best_rate = None, 0.0
    for m in modes:
        t0 = time.perf_counter()
        try:
            r = subprocess.run(child + ["--one-mode", m], capture_output=True, text=True,
                               timeout=a.mode_timeout)
            out, rc = r.stdout + r.stderr, r.returncode
        except subprocess.TimeoutExpired as e:
            out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            rc = "timeout"
        secs = time.perf_counter() - t0
        for line in out.splitlines():
            if line.startswith(("torch ", "step:")):
                print(f"  [{m}] {line}")
        rate = parse_rate(out) if rc == 0 else None
        if rate is None:
            if rc == "timeout":
                why = f"timed out after {a.mode_timeout:.0f} s"
            else:
                tail = [l for l in out.strip().splitlines() if l.strip()][-1:] or ["no output"]
                why = f"exit {rc}: {tail[0][:200]}"
            print(f"mode {m}: unavailable ({why})", flush=True)
            continue
        print(f"mode {m}: clips/s {rate:.2f} ({secs:.0f} s with start-up)", flush=True)
        if rate > best_rate:
            best, best_rate = m, rate
    if best is None:
        print("best: none (every mode unavailable)")
        return 1
    print(f"best: {best}")
    print(f"clips/s: {best_rate:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
