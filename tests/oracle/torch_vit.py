#!/usr/bin/python3
"""torch_vit.py: the PyTorch truth for vidtrain's VideoMAE transformers (test_zoo_vit.c).

A plain-torch VideoMAE ViT written from the structure of VideoMAE's modeling_finetune.py
VisionTransformer (use_mean_pooling, no layer scale, no drop path, qkv_bias as separate
q_bias / v_bias with a zero k bias), with the VideoMAE / VideoMAEv2 state-dict names:
  patch_embed.proj (Conv3d, kernel = stride = (2, 16, 16)); a fixed sin-cos table
  (get_sinusoid_encoding_table, not in the state dict); blocks.N.{norm1, attn.qkv (no
  bias), attn.q_bias, attn.v_bias, attn.proj, norm2, mlp.fc1, mlp.fc2}; fc_norm; head.
  LayerNorm eps 1e-6, GELU erf, MLP ratio 4.

  torch_vit.py golden OUT.safetensors   vit_test (dim 48, 2 heads, depth 2, 5 classes) on
      2 clips of 4x32x48, seeded NON-trivial weights (random LayerNorm affine and biases):
      the state dict, "x", "label.0", "eval_logits.0", "x_other" and
      "eval_logits_other.0" (2 clips of 8x64x32 through the same weights), then one train-mode forward,
      cross_entropy (mean) and backward: "logits.0" and "grad.<param>" for every
      parameter; then the same with drop path 0.5 (VideoMAE's per-block linspace) and
      vidtrain's per-clip draw replayed for clip seeds 72, 73: "dp.scales",
      "dp.logits.0", "dp.grad.<param>". Also "hf.<name>" for every tensor under the Hugging Face names
      (VideoMAEForVideoClassification: q/k/v split, k's zero bias absent) so the name
      map is checked against the same numbers; beside it OUT_hf.safetensors (those
      names alone) and OUT.pth (torch.save of the state dict, the blocks under
      "encoder." as a VideoMAE pre-training checkpoint names them).
  torch_vit.py list DIM DEPTH HEADS CLASSES T H W   names and shapes of the state dict.
This script must never depend on vidtrain: it is what vidtrain is checked against.
"""
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


# dim, depth, heads (models/zoo_vit.c; vit_test is its test model)
VIT_SPECS = {"vit_test": (48, 2, 2), "videomae_vit_s": (384, 12, 6),
             "videomae_vit_b": (768, 12, 12)}


def sinusoid_table(n_position, d_hid):
    # VideoMAE's get_sinusoid_encoding_table, in float64 then float32 as theirs
    pos = np.arange(n_position)[:, None]
    j = np.arange(d_hid)[None, :]
    tab = pos / np.power(10000, 2 * (j // 2) / d_hid)
    tab[:, 0::2] = np.sin(tab[:, 0::2])
    tab[:, 1::2] = np.cos(tab[:, 1::2])
    return torch.tensor(tab, dtype=torch.float32)[None]


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.scale = (dim // heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=False)
        self.q_bias = nn.Parameter(torch.zeros(dim))
        self.v_bias = nn.Parameter(torch.zeros(dim))
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        bias = torch.cat((self.q_bias, torch.zeros_like(self.v_bias), self.v_bias))
        qkv = F.linear(x, self.qkv.weight, bias)
        qkv = qkv.reshape(B, N, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0] * self.scale, qkv[1], qkv[2]
        attn = (q @ k.transpose(-2, -1)).softmax(dim=-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(B, N, C))


class Mlp(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = Mlp(dim)

        self.scale = None  # drop path: per-clip scales of the two branches, (2, B)

    def forward(self, x):
        s = self.scale
        a = self.attn(self.norm1(x))
        x = x + (a if s is None else a * s[0][:, None, None])
        m = self.mlp(self.norm2(x))
        return x + (m if s is None else m * s[1][:, None, None])


class PatchEmbed(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Conv3d(3, dim, kernel_size=(2, 16, 16), stride=(2, 16, 16))

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class VisionTransformer(nn.Module):
    def __init__(self, dim, depth, heads, classes):
        super().__init__()
        self.patch_embed = PatchEmbed(dim)
        self.blocks = nn.ModuleList([Block(dim, heads) for _ in range(depth)])
        self.fc_norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        x = self.patch_embed(x)
        x = x + sinusoid_table(x.shape[1], x.shape[2]).type_as(x)
        for b in self.blocks:
            x = b(x)
        return self.head(self.fc_norm(x.mean(1)))


def hf_names(sd, dim):
    """The same tensors under VideoMAEForVideoClassification's names."""
    out = {}
    for k, v in sd.items():
        if k.startswith("patch_embed.proj."):
            out["videomae.embeddings.patch_embeddings.projection." + k.split(".")[-1]] = v
        elif k.startswith("blocks."):
            _, n, rest = k.split(".", 2)
            p = f"videomae.encoder.layer.{n}."
            if rest == "attn.qkv.weight":
                for j, nm in enumerate(("query", "key", "value")):
                    out[p + f"attention.attention.{nm}.weight"] = v[j * dim:(j + 1) * dim]
            else:
                m = {"norm1": "layernorm_before", "norm2": "layernorm_after",
                     "attn.q_bias": "attention.attention.q_bias",
                     "attn.v_bias": "attention.attention.v_bias",
                     "attn.proj": "attention.output.dense", "mlp.fc1": "intermediate.dense",
                     "mlp.fc2": "output.dense"}
                stem, _, leaf = rest.rpartition(".")
                key = m[rest] if rest in m else m[stem] + "." + leaf
                out[p + key] = v
        elif k.startswith("head."):
            out["classifier." + k.split(".")[-1]] = v
        else:
            out[k] = v  # fc_norm.*
    return out


def drop_path_scales(seed, n, depth, rate):
    """vidtrain's drop path draw (models/net_graph.h vt_drop_path_scale) for clips
    seed + j: VideoMAE's linspace of rates, block b's two branches indexed in order
    among the blocks with p > 0."""
    from torch_golden import hash64
    out, index = [], 0
    for b in range(depth):
        p = rate * b / (depth - 1)
        if p <= 0:
            out.append(None)
            continue
        s = torch.zeros(2, n)
        for k in range(2):
            for j in range(n):
                h = hash64((hash64(seed + j) + 0x5D0000 + index) & ((1 << 64) - 1))
                u = (h >> 40) / 16777216.0
                s[k, j] = 1.0 / (1.0 - p) if u >= p else 0.0
            index += 1
        out.append(s)
    return out


def golden_weights(m, g):
    """The golden's weights, drawn from generator g: non-trivial, every bias and LayerNorm
    affine away from 0/1 (torch_vit_bf16_gap.py draws its models' so too)."""
    with torch.no_grad():
        for k, p in m.named_parameters():
            if k.endswith("bias") or "q_bias" in k or "v_bias" in k:
                p.uniform_(-0.2, 0.2, generator=g)
            elif "norm" in k and k.endswith("weight"):
                p.uniform_(0.7, 1.3, generator=g)
            else:
                p.normal_(0.0, 0.1, generator=g)


def golden(path):
    import torch_golden
    torch.set_num_threads(1)
    torch.manual_seed(11)
    (dim, depth, heads), classes, clip = VIT_SPECS["vit_test"], 5, (4, 32, 48)
    m = VisionTransformer(dim, depth, heads, classes)
    g = torch.Generator().manual_seed(12)
    golden_weights(m, g)
    x = torch.randn((2, 3) + clip, generator=g)
    label = torch.tensor([1, classes - 2])
    t = {k: v.detach().clone().numpy() for k, v in m.state_dict().items()}
    for k, v in hf_names(m.state_dict(), dim).items():
        t["hf." + k] = v.detach().clone().numpy()
    t["x"] = x.numpy()
    t["label.0"] = label.numpy().astype(np.float32)
    m.eval()
    with torch.no_grad():
        t["eval_logits.0"] = m(x).numpy()
        # the same weights at another clip size (8 frames of 64x32: L = 4*4*2 = 32 tokens,
        # the sin-cos table VideoMAE builds for that L)
        x2 = torch.randn((2, 3, 8, 64, 32), generator=g)
        t["x_other"] = x2.numpy()
        t["eval_logits_other.0"] = m(x2).numpy()
    m.train()
    logits = m(x)
    F.cross_entropy(logits, label).backward()
    t["logits.0"] = logits.detach().numpy()
    for k, p in m.named_parameters():
        t["grad." + k] = p.grad.detach().clone().numpy()  # zero_grad reuses .grad
    # drop path 0.5 (block 1: p 0.5), clip seeds 72+j: scales [0 2 | 2 0], both kinds
    scales = drop_path_scales(72, 2, depth, 0.5)
    for b, s in zip(m.blocks, scales):
        b.scale = s
    t["dp.scales"] = torch.cat([s.reshape(-1) for s in scales if s is not None]).numpy()
    m.zero_grad()
    logits = m(x)
    F.cross_entropy(logits, label).backward()
    t["dp.logits.0"] = logits.detach().numpy()
    for k, p in m.named_parameters():
        t["dp.grad." + k] = p.grad.numpy()
    torch_golden.save_st(path, t, {"model": "vit_test"})
    # the same weights as a Hugging Face file and as a VideoMAE(v2) repository .pth
    base = os.path.splitext(path)[0]
    torch_golden.save_st(base + "_hf.safetensors",
                         {k[3:]: v for k, v in t.items() if k.startswith("hf.")}, {})
    sd = {k: torch.from_numpy(v) for k, v in t.items() if "." in k and not
          k.startswith(("hf.", "grad.", "label.", "eval_logits", "logits.", "dp."))}
    torch.save({k if k.startswith(("head.", "fc_norm.")) else "encoder." + k: v
                for k, v in sd.items()}, base + ".pth")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "golden":
        return golden(sys.argv[2])
    if len(sys.argv) == 9 and sys.argv[1] == "list":
        dim, depth, heads, classes = (int(a) for a in sys.argv[2:6])
        # names and shapes only: skip the random initialisation (ViT-B's 86M values)
        for fn in ("kaiming_uniform_", "uniform_", "normal_", "zeros_", "ones_"):
            setattr(torch.nn.init, fn, lambda tensor, *a, **k: tensor)
        m = VisionTransformer(dim, depth, heads, classes)
        for k, v in m.state_dict().items():
            print(k, ",".join(str(d) for d in v.shape))
        print("params", sum(p.numel() for p in m.parameters()))
        return
    raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
