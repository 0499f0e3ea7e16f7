#!/usr/bin/env python3
"""torch_x3d.py: X3D in plain PyTorch, written from pytorchvideo's published architecture
(pytorchvideo/models/x3d.py create_x3d and its stem, bottleneck, res block, res stage and
head; models/head.py ResNetBasicHead; models/resnet.py ResBlock, BottleneckBlock,
ResStage; models/stem.py ResNetBasicStem; layers/convolutions.py Conv2plus1d;
layers/swish.py; fvcore's SqueezeExcitation; models/weight_init.py; hub/x3d.py for the
four members) — pytorchvideo itself does not import here. The modules carry
pytorchvideo's attribute names in its registration order, so state_dict() gives exactly
the names, shapes and order of its checkpoints (blocks.0.conv.conv_t, ...,
blocks.1.res_blocks.0.branch2.norm_b.1.block.0.weight, ..., blocks.5.proj.bias).
vidtrain's models/zoo_x3d.c follows it; torch_zoo.py's build() returns these models.

  /usr/bin/python3 tests/oracle/torch_x3d.py golden OUTDIR
writes the truth for tests/test_zoo_x3d.c (st_write.save_st), x3d_xs.safetensors:
x3d_xs with 5 classes at 4x64x64 (dropout off), seeded weights (pytorchvideo's init, then
SE biases and BN state made non-trivial), "x" (2 clips), "label.0", "eval_logits.0"; one
train-mode forward + cross-entropy (mean over the batch) + backward: "logits.0",
"grad.<param>" for every parameter and "after.<buffer>" for every BN buffer. The training
gradients are computed in float64 too: "grad.<name>" holds the float64 one (rounded to
float32) and "torch32_nmse.<name>" PyTorch float32's NMSE from it, the yardstick.
x3d_l.safetensors: x3d_l with 3 classes, seeded weights and BN state, "x" (2 clips of
4x64x64) and "eval_logits.0" only. Eval logits are float64's too, with
"torch32_nmse.eval_logits.0" PyTorch float32's NMSE from them (eval_truth).
"""
import copy
import math
import os
import sys

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:  # the C tests turn 77 into a ctest skip
    print(f"SKIP: {e}", file=sys.stderr)
    sys.exit(77)

# hub/x3d.py: (clip frames, crop side, depth factor) of each member.
MEMBERS = {"x3d_xs": (4, 160, 2.2), "x3d_s": (13, 160, 2.2), "x3d_m": (16, 224, 2.2),
           "x3d_l": (16, 312, 5.0)}


def round_width(width, multiplier, min_width=8, divisor=8):
    width *= multiplier
    out = max(min_width, int(width + divisor / 2) // divisor * divisor)
    if out < 0.9 * width:
        out += divisor
    return int(out)


def round_repeats(repeats, multiplier):
    return int(math.ceil(multiplier * repeats))


class Swish(nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(x)


class SqueezeExcitation(nn.Module):  # fvcore.nn.squeeze_excitation, is_3d=True
    def __init__(self, c, reduced):
        super().__init__()
        self.block = nn.Sequential(nn.Conv3d(c, reduced, 1, bias=True), nn.ReLU(),
                                   nn.Conv3d(reduced, c, 1, bias=True), nn.Sigmoid())

    def forward(self, x):
        return x * self.block(x.mean(dim=[2, 3, 4], keepdim=True))


class Conv2plus1d(nn.Module):
    def __init__(self, conv_t, conv_xy):
        super().__init__()
        self.conv_t, self.conv_xy = conv_t, conv_xy

    def forward(self, x):
        return self.conv_xy(self.conv_t(x))


class Stem(nn.Module):  # ResNetBasicStem without pool
    def __init__(self, cin, cout):
        super().__init__()
        # pytorchvideo passes the SPATIAL conv as conv_t and the temporal one as conv_xy
        self.conv = Conv2plus1d(
            nn.Conv3d(cin, cout, (1, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1), bias=False),
            nn.Conv3d(cout, cout, (5, 1, 1), stride=1, padding=(2, 0, 0), bias=False,
                      groups=cout))
        self.norm = nn.BatchNorm3d(cout)
        self.activation = nn.ReLU()

    def forward(self, x):
        return self.activation(self.norm(self.conv(x)))


class Bottleneck(nn.Module):  # create_x3d_bottleneck_block
    def __init__(self, din, inner, dout, stride, se):
        super().__init__()
        self.conv_a = nn.Conv3d(din, inner, 1, bias=False)
        self.norm_a = nn.BatchNorm3d(inner)
        self.act_a = nn.ReLU()
        self.conv_b = nn.Conv3d(inner, inner, 3, stride=(1, stride, stride), padding=1,
                                bias=False, groups=inner)
        self.norm_b = nn.Sequential(
            nn.BatchNorm3d(inner),
            SqueezeExcitation(inner, round_width(inner, 0.0625)) if se else nn.Identity())
        self.act_b = Swish()
        self.conv_c = nn.Conv3d(inner, dout, 1, bias=False)
        self.norm_c = nn.BatchNorm3d(dout)
        self.norm_c.block_final_bn = True  # resnet.py BottleneckBlock: init weight 0

    def forward(self, x):
        x = self.act_a(self.norm_a(self.conv_a(x)))
        x = self.act_b(self.norm_b(self.conv_b(x)))
        return self.norm_c(self.conv_c(x))


class ResBlock(nn.Module):
    def __init__(self, din, inner, dout, stride, se):
        super().__init__()
        if din != dout or stride > 1:
            self.branch1_conv = nn.Conv3d(din, dout, 1, stride=(1, stride, stride), bias=False)
        else:
            self.branch1_conv = None
        self.branch1_norm = nn.BatchNorm3d(dout) if din != dout else None
        self.branch2 = Bottleneck(din, inner, dout, stride, se)
        self.activation = nn.ReLU()

    def forward(self, x):
        skip = x
        if self.branch1_conv is not None:
            skip = self.branch1_conv(x)
            if self.branch1_norm is not None:
                skip = self.branch1_norm(skip)
        return self.activation(skip + self.branch2(x))


class ResStage(nn.Module):
    def __init__(self, blocks):
        super().__init__()
        self.res_blocks = nn.ModuleList(blocks)

    def forward(self, x):
        for b in self.res_blocks:
            x = b(x)
        return x


class ProjectedPool(nn.Module):
    def __init__(self, din, inner, dout, kernel):
        super().__init__()
        self.pre_conv = nn.Conv3d(din, inner, 1, bias=False)
        self.pre_norm = nn.BatchNorm3d(inner)
        self.pre_act = nn.ReLU()
        self.pool = nn.AvgPool3d(kernel, stride=1)
        self.post_conv = nn.Conv3d(inner, dout, 1, bias=False)
        self.post_act = nn.ReLU()

    def forward(self, x):
        x = self.pool(self.pre_act(self.pre_norm(self.pre_conv(x))))
        return self.post_act(self.post_conv(x))


class Head(nn.Module):  # ResNetBasicHead: pool, dropout, proj, output_pool
    def __init__(self, din, inner, dout, classes, kernel, dropout):
        super().__init__()
        self.pool = ProjectedPool(din, inner, dout, kernel)
        self.dropout = nn.Dropout(dropout) if dropout > 0 else None
        self.proj = nn.Linear(dout, classes)
        self.output_pool = nn.AdaptiveAvgPool3d(1)

    def forward(self, x):
        x = self.pool(x)
        if self.dropout is not None:
            x = self.dropout(x)
        x = self.proj(x.permute((0, 2, 3, 4, 1))).permute((0, 4, 1, 2, 3))
        return self.output_pool(x).view(x.shape[0], -1)


class X3D(nn.Module):  # pytorchvideo's Net(blocks=...)
    def __init__(self, classes, t, h, w, depth_factor, dropout=0.5):
        super().__init__()
        width, stem_in = 2.0, 12
        stem_out = round_width(stem_in, width)
        blocks = [Stem(3, stem_out)]
        dims = [stem_in]
        for _ in range(3):
            dims.append(round_width(dims[-1], 2.0))
        din = stem_out
        for idx, depth in enumerate((1, 2, 5, 3)):
            dout = round_width(dims[idx], width)
            inner = int(2.25 * dout)
            n = round_repeats(depth, depth_factor)
            blocks.append(ResStage([ResBlock(din if i == 0 else dout, inner, dout,
                                             2 if i == 0 else 1, (i + 1) % 2 == 1)
                                    for i in range(n)]))
            din = dout
        # create_x3d: AvgPool3d((T // 1, ceil(crop / 32), ceil(crop / 32)), stride 1)
        kernel = (t, int(math.ceil(h / 32)), int(math.ceil(w / 32)))
        blocks.append(Head(din, inner, 2048, classes, kernel, dropout))
        self.blocks = nn.ModuleList(blocks)
        init_resnet_weights(self)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


def init_resnet_weights(model, fc_init_std=0.01):
    """pytorchvideo's _init_resnet_weights (models/weight_init.py), which its Net runs in
    its constructor: c2_msra_fill (kaiming_normal_ fan_out, relu; bias 0) on every conv,
    BN weight 1 (0 where the module is flagged block_final_bn: every bottleneck's norm_c)
    and bias 0, linear N(0, 0.01) and bias 0."""
    for m in model.modules():
        if isinstance(m, nn.Conv3d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            if m.bias is not None:
                nn.init.constant_(m.bias, 0)
        elif isinstance(m, nn.BatchNorm3d):
            m.weight.data.fill_(0.0 if getattr(m, "block_final_bn", False) else 1.0)
            m.bias.data.zero_()
        if isinstance(m, nn.Linear):
            m.weight.data.normal_(mean=0.0, std=fc_init_std)
            m.bias.data.zero_()


def build(model, classes, t, h, w, dropout=0.5):
    return X3D(classes, t, h, w, MEMBERS[model][2], dropout)


EVAL_YARD = "torch32_nmse.eval_logits.0"


def eval_truth(m, m64, x, t):
    """Eval logits in float64 (rounded to float32) as "eval_logits.0", and PyTorch
    float32's NMSE from them: X3D's eval output with random weights and BN statistics of
    two clips is itself ill-conditioned (x3d_l's float32 logits are NMSE ~1e-7 from
    float64), so the truth is float64 and float32 PyTorch the yardstick."""
    import numpy as np
    m.eval()
    m64.eval()
    with torch.no_grad():
        a, b = m(x).double(), m64(x.double())
    t["eval_logits.0"] = b.float().numpy()
    t[EVAL_YARD] = np.array([float(((a - b) ** 2).sum() / (b ** 2).sum())], np.float32)


def golden(out):
    import numpy as np
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bn_state import bn_from_data
    from st_write import save_st
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    name, classes, clip = "x3d_xs", 5, (4, 64, 64)
    torch.manual_seed(5)
    g = torch.Generator().manual_seed(6)
    m = build(name, classes, *clip, dropout=0.0)
    with torch.no_grad():  # SE biases away from pytorchvideo's 0, so they are tested
        for k, v in m.named_parameters():
            if k.endswith("bias") and ".block." in k:
                v.uniform_(-0.3, 0.3, generator=g)
    x = torch.randn((2, 3) + clip, generator=g)
    label = torch.tensor([1, classes - 2])
    bn_from_data(m, x, g)
    t = {k: v.detach().clone().numpy() for k, v in m.state_dict().items()}
    t["x"] = x.numpy()
    t["label.0"] = label.numpy().astype(np.float32)
    m64 = copy.deepcopy(m).double()
    eval_truth(m, m64, x, t)
    m.train()
    logits = m(x)
    F.cross_entropy(logits, label).backward()
    t["logits.0"] = logits.detach().numpy()
    m64.train()
    F.cross_entropy(m64(x.double()), label).backward()
    p64 = dict(m64.named_parameters())
    for k, p in m.named_parameters():
        a, b = p.grad.double(), p64[k].grad
        t["grad." + k] = b.float().numpy()
        t["torch32_nmse." + k] = np.array(
            [float(((a - b) ** 2).sum() / max((b ** 2).sum(), 1e-300))], np.float32)
    for k, v in m.state_dict().items():
        if "running" in k:
            t["after." + k] = v.numpy()
    save_st(os.path.join(out, name + ".safetensors"), t, {"model": name})
    worst = max(float(t[k][0]) for k in t if k.startswith("torch32_nmse."))
    print(f"{name}: {sum(p.numel() for p in m.parameters())} params, clip {clip}, "
          f"PyTorch float32 gradients' worst NMSE from float64 {worst:.2g}")
    # x3d_l (25 blocks in its third stage): eval logits only, 2 clips of 2x32x32
    m = build("x3d_l", 3, 4, 64, 64)
    x = torch.randn((2, 3, 4, 64, 64), generator=g)
    bn_from_data(m, x, g)
    t = {k: v.detach().clone().numpy() for k, v in m.state_dict().items()}
    t["x"] = x.numpy()
    eval_truth(m, copy.deepcopy(m).double(), x, t)
    print(f"x3d_l: eval, PyTorch float32's NMSE from float64 {t[EVAL_YARD][0]:.2g}")
    save_st(os.path.join(out, "x3d_l.safetensors"), t, {"model": "x3d_l"})


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "golden":
        golden(sys.argv[2])
    else:
        raise SystemExit(__doc__)
