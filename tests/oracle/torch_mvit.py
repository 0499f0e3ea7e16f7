#!/usr/bin/python3
"""torch_mvit.py: torchvision's MViT as the truth for vidtrain's mvit_v2_s (test_zoo_mvit.c).

The model is torchvision's own (torchvision.models.video.mvit.MViT, 0.14), built with
mvit_v2_s's settings (residual_pool, rel_pos_embed, proj_after_attn, no class token in
the residual, LayerNorm eps 1e-6) and a block table:
  torch_mvit.py golden DIR
      DIR/mvit_test.safetensors (and DIR/mvit_v1_test.safetensors: the same for
      mvit_v1_b's settings — absolute positions, no relative tables nor residual pooling,
      q pooled only where strided, projection after norm2 — and zoo_mvit.c's test_v1
      table): mvit_test's 4 blocks (16 -> 64 channels, heads 1, 2, 2, 4;
      kv strides 4, 2, 2, 1; q strides 1, 2, 1, 2 — vidtrain's zoo_mvit.c table), 5
      classes, 2 clips of 8x32x32, seeded NON-trivial weights (random LayerNorm affine,
      biases, class token, relative tables, linear weights of std 0.1): the state dict,
      "x", "label.0"; "eval_logits.0" in float64 (rounded to float32) and
      "torch32_nmse.eval_logits.0", float32 PyTorch's NMSE from it; one train-mode
      forward, cross_entropy (mean), backward: "logits.0" (float32) and, for every
      parameter, "grad.<name>" in float64 and "torch32_nmse.<name>" float32's distance
      (pool_k's LayerNorm bias, 0 in exact arithmetic: "torch32_ss.<name>", float32's sum
      of squares). DIR/mvit_test.pth: torch.save of the state dict (--init's input).
      DIR/mvit_test_6x48x40.safetensors: the same for mvit_test (built for 8x32x32) run
      at 2 clips of 6x48x40 (run_at: the relative tables interpolated at run time, as
      _add_rel_pos does; up along H and W, down along T, H != W).
      DIR/mvit_v1_test_6x48x40.safetensors: mvit_v1_test's 8x32x32 weights in a model
      built for 6x48x40, its position tables resampled (v1_resampled): those tables
      ("pos_encoding.spatial_pos", "temporal_pos"), "x", the eval logits (float64) and
      float32's NMSE.
      DIR/mvit_v2_s.safetensors: mvit_v2_s's 16 blocks as torchvision builds them (for
      16x224) at 2 clips of 8x64x48 (run_at; torchvision's initialisation, LayerNorm
      affine and biases made random): the state dict, "x", eval logits in float64 and
      float32's NMSE from them.
  torch_mvit.py list MODEL T H   mvit_v2_s's or mvit_v1_b's state-dict names and shapes,
      and its parameters.
This script must never depend on vidtrain: it is what vidtrain is checked against.
"""
import copy
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F
import torchvision.models.video.mvit as tvm
from torchvision.models.video.mvit import MViT, MSBlockConfig

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

TEST_BLOCKS = [  # heads, in, out, q stride, kv stride: zoo_mvit.c's test_b
    (1, 16, 16, 1, 4), (2, 16, 32, 2, 2), (2, 32, 32, 1, 2), (4, 32, 64, 2, 1)]
TEST_V1_BLOCKS = [  # zoo_mvit.c's test_v1: q stride 0 = no pool_q (kernel_q [])
    (1, 16, 32, 0, 4), (2, 32, 32, 2, 2), (2, 32, 64, 0, 2), (4, 64, 64, 2, 1)]


def build_test(classes, t, hw, v2=True):
    """mvit_v2_s's (v2) or mvit_v1_b's settings with the test block table."""
    cfg = [MSBlockConfig(num_heads=h, input_channels=i, output_channels=o,
                         kernel_q=[3, 3, 3] if sq else [], kernel_kv=[3, 3, 3],
                         stride_q=[1, sq, sq] if sq else [], stride_kv=[1, skv, skv])
           for h, i, o, sq, skv in (TEST_BLOCKS if v2 else TEST_V1_BLOCKS)]
    return MViT(spatial_size=hw if isinstance(hw, tuple) else (hw, hw), temporal_size=t,
                block_setting=cfg, residual_pool=v2,
                residual_with_cls_embed=False, rel_pos_embed=v2, proj_after_attn=v2,
                dropout=0.0, num_classes=classes)


def v2_s(t, hw, classes=400, name="mvit_v2_s"):
    """torchvision's mvit_v2_s (or name's: mvit_v1_b; its block table and settings) built
    for clips of t x hw."""
    orig = tvm._mvit

    def sized(**kw):
        kw.update(spatial_size=(hw, hw), temporal_size=t)
        return orig(**kw)
    tvm._mvit = sized
    try:
        return getattr(tvm, name)(num_classes=classes)
    finally:
        tvm._mvit = orig


def nmse(a, b):
    return float(((a.double() - b.double()) ** 2).sum() / max(float((b.double() ** 2).sum()),
                                                               1e-300))


def eval_truth(m, x, t):
    m64 = copy.deepcopy(m).double()
    m.eval()
    m64.eval()
    with torch.no_grad():
        a, b = m(x), m64(x.double())
    t["eval_logits.0"] = b.float().numpy()
    t["torch32_nmse.eval_logits.0"] = np.array([nmse(a, b)], np.float32)
    return m64


def run_at(m, clip):
    """m (built for another clip) runs clips of clip = (T, H, W): MViT.forward takes the
    token grid from pos_encoding's sizes, and _add_rel_pos interpolates the relative tables
    to what the pooled grids need (what torchvision does with its 16x224 weights at another
    clip size; the tables keep their shapes)."""
    m.pos_encoding.temporal_size = (clip[0] + 2 - 3) // 2 + 1  # conv_proj's output grid
    m.pos_encoding.spatial_size = ((clip[1] + 6 - 7) // 4 + 1, (clip[2] + 6 - 7) // 4 + 1)
    return m


def golden_weights(m, g):
    """The goldens' weights of a test model, drawn from generator g: non-trivial, every
    affine, bias and table away from its init (torch_mvit_bf16_gap.py draws its models' so
    too)."""
    with torch.no_grad():
        for k, p in m.named_parameters():
            if "norm" in k and k.endswith("weight"):
                p.uniform_(0.7, 1.3, generator=g)
            elif k.endswith("bias"):
                p.uniform_(-0.2, 0.2, generator=g)
            elif "pool" in k or k.startswith("conv_proj"):
                pass  # convs keep PyTorch's default init
            else:  # linears, class token, position and relative tables
                p.normal_(0.0, 0.1, generator=g)


def test_golden(out, name, v2, g, save_st, clip=(8, 32, 32), fname=None):
    classes = 5
    m = build_test(classes, 8, 32, v2)  # built for 8x32x32 (zoo_mvit.c's mvit_test)
    if clip != (8, 32, 32):
        run_at(m, clip)
    golden_weights(m, g)
    x = torch.randn((2, 3) + clip, generator=g)
    label = torch.tensor([1, classes - 2])
    t = {k: v.detach().clone().numpy() for k, v in m.state_dict().items()}
    t["x"] = x.numpy()
    t["label.0"] = label.numpy().astype(np.float32)
    m64 = eval_truth(m, x, t)
    m.train()
    m64.train()
    logits = m(x)
    F.cross_entropy(logits, label).backward()
    t["logits.0"] = logits.detach().numpy()
    F.cross_entropy(m64(x.double()), label).backward()
    p64 = dict(m64.named_parameters())
    worst = 0.0
    for k, p in m.named_parameters():
        t["grad." + k] = p64[k].grad.float().numpy()
        d = nmse(p.grad, p64[k].grad)
        if "pool_k.norm_act.0.bias" in k:
            # zero in exact arithmetic (a bias shared by every key moves a query's logits
            # by one constant, which softmax removes): float64's is ~1e-17, so its yardstick
            # is float32 PyTorch's own sum of squares, not a relative distance
            t["torch32_ss." + k] = np.array([float((p.grad.double() ** 2).sum())], np.float32)
            continue
        t["torch32_nmse." + k] = np.array([d], np.float32)
        worst = max(worst, d)
    save_st(os.path.join(out, (fname or name) + ".safetensors"), t, {"model": name})
    if fname:
        return print(f"{fname}: {name} built for 8x32x32 at {clip}: float32 PyTorch's NMSE "
                     f"from float64: eval {t['torch32_nmse.eval_logits.0'][0]:.2g}, gradients "
                     f"worst {worst:.2g}")
    torch.save(m.state_dict(), os.path.join(out, name + ".pth"))  # what --init reads
    print(f"{name}: {sum(p.numel() for p in m.parameters())} params, clip {clip}, float32 "
          f"PyTorch's NMSE from float64: eval {t['torch32_nmse.eval_logits.0'][0]:.2g}, "
          f"gradients worst {worst:.2g}")


def v1_resampled(out, g, save_st):
    """mvit_v1_test's 8x32x32 state dict (mvit_v1_test.pth) in a model built for 6x48x40:
    its absolute position tables resampled as vidtrain documents (F.interpolate: linear
    over the frames, bilinear over the square spatial grid), the rest as saved."""
    sd = torch.load(os.path.join(out, "mvit_v1_test.pth"))
    clip = (6, 48, 40)
    grid = (clip[0] // 2, clip[1] // 4, clip[2] // 4)
    m = build_test(5, clip[0], clip[1:], False)
    sp = sd["pos_encoding.spatial_pos"].double()  # (8 * 8, C)
    side = int(round(sp.shape[0] ** 0.5))
    sp = sp.reshape(1, side, side, -1).permute(0, 3, 1, 2)
    sp = F.interpolate(sp, size=grid[1:], mode="bilinear", align_corners=False)
    sd["pos_encoding.spatial_pos"] = sp.permute(0, 2, 3, 1).reshape(grid[1] * grid[2], -1)
    tp = sd["pos_encoding.temporal_pos"].double().t().unsqueeze(0)
    sd["pos_encoding.temporal_pos"] = F.interpolate(tp, size=grid[0], mode="linear",
                                                    align_corners=False)[0].t()
    t = {k: sd[k].float().numpy() for k in ("pos_encoding.spatial_pos",
                                            "pos_encoding.temporal_pos")}
    m.load_state_dict({k: v.float() for k, v in sd.items()})  # float32, as vidtrain holds
    x = torch.randn((2, 3) + clip, generator=g)
    t["x"] = x.numpy()
    eval_truth(m, x, t)
    save_st(os.path.join(out, "mvit_v1_test_6x48x40.safetensors"), t, {"model": "mvit_v1_test"})
    print(f"mvit_v1_test_6x48x40: 8x32x32 weights, positions resampled: float32 PyTorch's "
          f"NMSE from float64: eval {t['torch32_nmse.eval_logits.0'][0]:.2g}")


def golden(out):
    from st_write import save_st
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    torch.manual_seed(21)
    g = torch.Generator().manual_seed(22)
    for name, v2 in (("mvit_test", True), ("mvit_v1_test", False)):
        test_golden(out, name, v2, g, save_st)
    # at another clip (fewer frames, larger, not square): the tables interpolated
    test_golden(out, "mvit_test", True, g, save_st, (6, 48, 40), "mvit_test_6x48x40")
    v1_resampled(out, g, save_st)
    # mvit_v2_s itself (built for 16x224, its tables interpolated) at 8x64x48: eval logits
    m = run_at(tvm.mvit_v2_s(num_classes=7), (8, 64, 48))
    with torch.no_grad():
        for k, p in m.named_parameters():
            if "norm" in k and k.endswith("weight"):
                p.uniform_(0.7, 1.3, generator=g)
            elif k.endswith("bias"):
                p.uniform_(-0.2, 0.2, generator=g)
    x = torch.randn((2, 3, 8, 64, 48), generator=g)
    t = {k: v.detach().clone().numpy() for k, v in m.state_dict().items()}
    t["x"] = x.numpy()
    eval_truth(m, x, t)
    save_st(os.path.join(out, "mvit_v2_s.safetensors"), t, {"model": "mvit_v2_s"})
    print(f"mvit_v2_s: 8x64x48 eval, float32 PyTorch's NMSE from float64 "
          f"{t['torch32_nmse.eval_logits.0'][0]:.2g}")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "golden":
        return golden(sys.argv[2])
    if len(sys.argv) == 5 and sys.argv[1] == "list":
        name, tt, hw = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
        for fn in ("trunc_normal_", "constant_", "kaiming_uniform_", "uniform_", "normal_"):
            setattr(torch.nn.init, fn, lambda tensor, *a, **k: tensor)
        m = v2_s(tt, hw, name=name)
        for k, v in m.state_dict().items():
            print(k, ",".join(str(d) for d in v.shape))
        print("params", sum(p.numel() for p in m.parameters()))
        return
    raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
