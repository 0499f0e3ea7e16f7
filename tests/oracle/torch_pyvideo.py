#!/usr/bin/python3
"""torch_pyvideo.py OUT [MODEL...]: pytorchvideo's ResNet family in plain torch, the
outside truth for vidtrain's slow_r50, slowfast_r50, i3d_r50, r2plus1d_r50 and csn_r101
(tests/test_pyvideo.c).

pytorchvideo does not install here (and no longer imports with a current torchvision), so
the models are written again from its published code (pytorchvideo/models/resnet.py,
slowfast.py, r2plus1d.py, csn.py, stem.py, head.py, net.py, weight_init.py,
layers/convolutions.py, hub/resnet.py, hub/slowfast.py, hub/r2plus1d.py, hub/csn.py) with
the same module classes' attribute names and registration order, so that state_dict()
gives pytorchvideo's names in pytorchvideo's order: blocks.0.conv ...,
blocks.1.res_blocks.0.branch1_conv, .branch2.conv_a/norm_a/conv_b/norm_b/conv_c/norm_c
(r2plus1d_r50: .branch2.conv_b.conv_t/norm/conv_xy), blocks.5.proj;
blocks.0.multipathway_blocks.0.conv, blocks.0.multipathway_fusion.conv_fast_to_slow,
blocks.6.proj. Every model is initialised as pytorchvideo's Net constructor does
(torch_x3d.init_resnet_weights: norm_c's weight 0), then seeded() makes the BN state
non-trivial. r2plus1d_r50's head ends in a Softmax in pytorchvideo (create_r2plus1d's
head_activation default); here, as in vidtrain, the logits are its input. The SlowFast model takes ONE clip of the fast pathway's frames and makes
the slow pathway's input as pytorchvideo's PackPathway transform does:
torch.index_select(frames, time, torch.linspace(0, T - 1, T // alpha).long()).
The head pools with pytorchvideo's windows clipped to the features, as vidtrain does
(models/zoo_pv.c): at the default clip they are pytorchvideo's exactly.

For each model it writes
  OUT/<model>.pyth        a PySlowFast-style checkpoint: {'epoch', 'model_state' (the
                          seeded state_dict, non-trivial BN statistics), 'optimizer_state'
                          (SGD with momentum over proj after one step), 'cfg' (a YAML string),
                          'extra' (an object of a class of this script: the reader must skip
                          it, never build it)}
  OUT/<model>.names.json  [name, shape] of every state_dict entry, in order
  OUT/<model>.eval.bin    float32 logits of model.eval() on OUT/clip_<model>.bin
  OUT/<model>.frozen.bin  logits and gradients (float64) of a training pass with every BN in
                          eval mode (fine-tuning's frozen BN) on the clip's first sample, loss
                          cross_entropy; index.json holds torch32_nmse and sens_nmse as
                          torch_init.py does (slow_r50 and slowfast_r50; i3d_r50 has the
                          names, the checkpoint and the eval logits: the same blocks)
  OUT/index.json
Also OUT/pack_pathway.json: torch.linspace(0, T-1, T//a).long() for T = 1..128, a = 2, 4, 8
(vidtrain's vt_pack_pathway_frame must give the same frames).
Run with Debian's python (/usr/bin/python3: torch).
"""
import copy
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:  # the C test turns 77 into a ctest skip
    print(f"SKIP: {e}", file=sys.stderr)
    sys.exit(77)

from torch_x3d import init_resnet_weights  # noqa: E402 (pytorchvideo's weight_init.py)


# ---- pytorchvideo's modules (the attribute names and order are the state_dict's) ----
class Stem(nn.Module):  # ResNetBasicStem
    def __init__(self, cin, cout, kt, pool=True):
        super().__init__()
        self.conv = nn.Conv3d(cin, cout, (kt, 7, 7), (1, 2, 2), (kt // 2, 3, 3), bias=False)
        self.norm = nn.BatchNorm3d(cout)
        self.activation = nn.ReLU()
        self.pool = nn.MaxPool3d((1, 3, 3), (1, 2, 2), (0, 1, 1)) if pool else None

    def forward(self, x):
        x = self.activation(self.norm(self.conv(x)))
        return self.pool(x) if self.pool is not None else x


class Conv2plus1d(nn.Module):  # layers/convolutions.py create_conv_2plus1d, inner = out
    def __init__(self, c, st, s):
        super().__init__()
        self.conv_t = nn.Conv3d(c, c, (3, 1, 1), (st, 1, 1), (1, 0, 0), bias=False)
        self.norm = nn.BatchNorm3d(c)
        self.activation = nn.ReLU()
        self.conv_xy = nn.Conv3d(c, c, (1, 3, 3), (1, s, s), (0, 1, 1), bias=False)

    def forward(self, x):
        return self.conv_xy(self.activation(self.norm(self.conv_t(x))))


def conv_b(inner, st, s, kind):
    """resnet.py's (1,3,3), r2plus1d.py's Conv2plus1d, csn.py's depthwise (3,3,3)."""
    if kind == "2plus1d":
        return Conv2plus1d(inner, st, s)
    if kind == "dw":
        return nn.Conv3d(inner, inner, 3, (st, s, s), 1, bias=False, groups=inner)
    return nn.Conv3d(inner, inner, (1, 3, 3), (1, s, s), (0, 1, 1), bias=False)


class Bottleneck(nn.Module):  # BottleneckBlock
    def __init__(self, cin, inner, cout, ta, s, st=1, kind="spatial"):
        super().__init__()
        self.conv_a = nn.Conv3d(cin, inner, (ta, 1, 1), 1, (ta // 2, 0, 0), bias=False)
        self.norm_a = nn.BatchNorm3d(inner)
        self.act_a = nn.ReLU()
        self.conv_b = conv_b(inner, st, s, kind)
        self.norm_b = nn.BatchNorm3d(inner)
        self.act_b = nn.ReLU()
        self.conv_c = nn.Conv3d(inner, cout, 1, bias=False)
        self.norm_c = nn.BatchNorm3d(cout)
        self.norm_c.block_final_bn = True

    def forward(self, x):
        x = self.act_a(self.norm_a(self.conv_a(x)))
        x = self.act_b(self.norm_b(self.conv_b(x)))
        return self.norm_c(self.conv_c(x))


class ResBlock(nn.Module):
    def __init__(self, cin, inner, cout, ta, s, st=1, kind="spatial"):
        super().__init__()
        if cin != cout or s != 1 or st != 1:
            self.branch1_conv = nn.Conv3d(cin, cout, 1, (st, s, s), bias=False)
            self.branch1_norm = nn.BatchNorm3d(cout)
        else:
            self.branch1_conv = self.branch1_norm = None
        self.branch2 = Bottleneck(cin, inner, cout, ta, s, st, kind)
        self.activation = nn.ReLU()

    def forward(self, x):
        short = x if self.branch1_conv is None else self.branch1_norm(self.branch1_conv(x))
        return self.activation(short + self.branch2(x))


class ResStage(nn.Module):
    def __init__(self, depth, cin, inner, cout, tas, s, st=1, kind="spatial"):
        super().__init__()
        self.res_blocks = nn.ModuleList(
            ResBlock(cin if i == 0 else cout, inner, cout, tas[i % len(tas)], s if i == 0 else 1,
                     st if i == 0 else 1, kind)
            for i in range(depth))

    def forward(self, x):
        for b in self.res_blocks:
            x = b(x)
        return x


def clipped_pool(x, k):
    """AvgPool3d(k, stride 1) with the window clipped to the features (zoo_pv.c)."""
    return F.avg_pool3d(x, [min(a, b) for a, b in zip(k, x.shape[2:])], stride=1)


class Head(nn.Module):  # ResNetBasicHead: pool, dropout, proj, output_pool
    def __init__(self, cin, classes, k):
        super().__init__()
        self.k = k
        self.dropout = nn.Dropout(0.5)
        self.proj = nn.Linear(cin, classes)

    def forward(self, x):
        if self.k is not None:
            x = clipped_pool(x, self.k)
        x = self.proj(self.dropout(x).permute(0, 2, 3, 4, 1)).permute(0, 4, 1, 2, 3)
        return x.mean((2, 3, 4))


DEPTH = (3, 4, 6, 3)


class Net(nn.Module):
    def __init__(self, blocks):
        super().__init__()
        self.blocks = nn.ModuleList(blocks)
        init_resnet_weights(self)  # net.py: Net's constructor runs init_net_weights

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


def resnet(classes, i3d):
    """hub.slow_r50 (i3d False) or hub.i3d_r50."""
    tas = ([[3], [3, 1], [3, 1], [1, 3]] if i3d else [[1], [1], [3], [3]])
    blocks = [Stem(3, 64, 5 if i3d else 1)]
    cin = 64
    for s in range(4):
        blocks.append(ResStage(DEPTH[s], cin, 64 << s, 256 << s, tas[s], 1 if s == 0 else 2))
        cin = 256 << s
        if s == 0 and i3d:
            blocks.append(nn.MaxPool3d((2, 1, 1), (2, 1, 1)))
    blocks.append(Head(2048, classes, (4, 7, 7) if i3d else (8, 7, 7)))
    return Net(blocks)


def r2plus1d_csn(classes, csn):
    """hub.r2plus1d_r50 (create_r2plus1d, dropout 0.5) or hub.csn_r101 (create_csn, depth
    101, stem max pool, head pool (4,7,7), dropout 0)."""
    depth = (3, 4, 23, 3) if csn else DEPTH
    sp, tp = ((1, 2, 2, 2), (1, 2, 2, 2)) if csn else ((2, 2, 2, 2), (1, 1, 2, 2))
    blocks = [Stem(3, 64, 3 if csn else 1, pool=csn)]
    cin = 64
    for s in range(4):
        blocks.append(ResStage(depth[s], cin, 64 << s, 256 << s, [1], sp[s], tp[s],
                               "dw" if csn else "2plus1d"))
        cin = 256 << s
    blocks.append(Head(2048, classes, (4, 7, 7)))
    return Net(blocks)


class FuseFastToSlow(nn.Module):
    def __init__(self, cfast):
        super().__init__()
        self.conv_fast_to_slow = nn.Conv3d(cfast, 2 * cfast, (7, 1, 1), (4, 1, 1), (3, 0, 0),
                                           bias=False)
        self.norm = nn.BatchNorm3d(2 * cfast)
        self.activation = nn.ReLU()

    def forward(self, x):
        fuse = self.activation(self.norm(self.conv_fast_to_slow(x[1])))
        return [torch.cat([x[0], fuse], 1), x[1]]


class MultiPathWayWithFuse(nn.Module):
    def __init__(self, blocks, fusion):
        super().__init__()
        self.multipathway_blocks = nn.ModuleList(blocks)
        self.multipathway_fusion = fusion

    def forward(self, x):
        x = [b(v) for b, v in zip(self.multipathway_blocks, x)]
        return self.multipathway_fusion(x) if self.multipathway_fusion is not None else x


class PoolConcatPathway(nn.Module):
    def __init__(self, ks):
        super().__init__()
        self.ks = ks

    def forward(self, x):
        return torch.cat([clipped_pool(v, k) for v, k in zip(x, self.ks)], 1)


def pack_pathway(frames, alpha=4):
    """pytorchvideo's PackPathway on a batch (N, C, T, H, W): [slow, fast]."""
    idx = torch.linspace(0, frames.shape[2] - 1, frames.shape[2] // alpha).long()
    return [torch.index_select(frames, 2, idx), frames]


class SlowFast(nn.Module):
    """hub.slowfast_r50 fed as vidtrain feeds it: one clip, PackPathway inside."""

    def __init__(self, classes):
        super().__init__()
        blocks = [MultiPathWayWithFuse([Stem(3, 64, 1), Stem(3, 8, 5)], FuseFastToSlow(8))]
        for s in range(4):
            sin, fin = 256 << s >> 1 if s else 64, 32 << s >> 1 if s else 8
            blocks.append(MultiPathWayWithFuse(
                [ResStage(DEPTH[s], sin + 2 * fin, 64 << s, 256 << s, [1] if s < 2 else [3],
                          1 if s == 0 else 2),
                 ResStage(DEPTH[s], fin, 8 << s, 32 << s, [3], 1 if s == 0 else 2)],
                FuseFastToSlow(32 << s) if s < 3 else None))
        blocks.append(PoolConcatPathway([(8, 7, 7), (32, 7, 7)]))
        blocks.append(Head(2048 + 256, classes, None))
        self.blocks = nn.ModuleList(blocks)
        init_resnet_weights(self)

    def forward(self, x):
        x = pack_pathway(x)
        for b in self.blocks:
            x = b(x)
        return x


MODELS = {  # name: (builder, input shape N, C, T, H, W: small clips, the test is < 60 s)
    "slow_r50": (lambda k: resnet(k, False), (2, 3, 4, 32, 32)),
    "i3d_r50": (lambda k: resnet(k, True), (2, 3, 4, 32, 32)),
    "slowfast_r50": (SlowFast, (2, 3, 8, 32, 32)),
    "r2plus1d_r50": (lambda k: r2plus1d_csn(k, False), (2, 3, 4, 32, 32)),
    "csn_r101": (lambda k: r2plus1d_csn(k, True), (2, 3, 4, 32, 32)),
}


def seeded(name, seed, classes=400):
    torch.manual_seed(seed)
    m = MODELS[name][0](classes)
    g = torch.Generator().manual_seed(seed + 1)
    for mod in m.modules():  # as a trained model has them: every BN really read
        if isinstance(mod, nn.BatchNorm3d):
            c = mod.num_features
            mod.running_mean.copy_(torch.randn(c, generator=g) * 0.1)
            mod.running_var.copy_(torch.rand(c, generator=g) * 0.5 + 0.75)
            mod.weight.data.copy_(torch.rand(c, generator=g) * 0.5 + 0.75)
            mod.bias.data.copy_(torch.randn(c, generator=g) * 0.1)
            mod.num_batches_tracked.fill_(int(torch.randint(1, 1000, (1,), generator=g)))
    return m


def frozen_pass(md, x, labels, grads):
    """Every BN (and the dropout) in eval mode, the loss sum(cross_entropy) / N; only the
    gradients asked for are computed (the others would only cost time)."""
    for n, p in md.named_parameters():
        p.requires_grad_(n in grads)
    md.train()
    for mod in md.modules():
        if isinstance(mod, (nn.BatchNorm3d, nn.Dropout)):
            mod.eval()
    md.zero_grad()
    logits = md(x)
    (F.cross_entropy(logits, torch.tensor(labels), reduction="sum") / x.shape[0]).backward()
    params = dict(md.named_parameters())
    return logits.detach().double(), [params[n].grad.double().clone() for n in grads]


class Extra:
    """An object of a class the reader cannot know: a .pyth may hold such entries."""

    def __init__(self):
        self.note = "skip me"


GRADS = {
    "slow_r50": ["blocks.0.conv.weight", "blocks.1.res_blocks.0.branch2.norm_b.weight",
                 "blocks.5.proj.weight"],
    "i3d_r50": ["blocks.0.conv.weight", "blocks.3.res_blocks.1.branch2.conv_a.weight",
                "blocks.6.proj.weight"],
    "slowfast_r50": ["blocks.0.multipathway_blocks.0.conv.weight",
                     "blocks.0.multipathway_blocks.1.conv.weight",
                     "blocks.2.multipathway_fusion.conv_fast_to_slow.weight",
                     "blocks.6.proj.weight"],
    # the (2+1)D conv_b's two halves and its inner BN, a stage that strides in time
    "r2plus1d_r50": ["blocks.0.conv.weight", "blocks.1.res_blocks.0.branch2.conv_b.conv_t.weight",
                     "blocks.1.res_blocks.0.branch2.conv_b.norm.weight",
                     "blocks.3.res_blocks.0.branch2.conv_b.conv_xy.weight",
                     "blocks.3.res_blocks.0.branch1_conv.weight", "blocks.5.proj.weight"],
    # the depthwise conv_b in a block that strides in time and space, one deep in stage 3
    "csn_r101": ["blocks.0.conv.weight", "blocks.2.res_blocks.0.branch2.conv_b.weight",
                 "blocks.3.res_blocks.22.branch2.conv_b.weight",
                 "blocks.3.res_blocks.22.branch2.norm_c.weight", "blocks.5.proj.weight"],
}


def main():
    out = sys.argv[1]
    names = sys.argv[2:] or list(MODELS)
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(2)
    pp = {f"{t},{a}": torch.linspace(0, t - 1, t // a).long().tolist()
          for t in range(1, 129) for a in (2, 4, 8) if t // a >= 1}
    with open(f"{out}/pack_pathway.json", "w") as f:
        json.dump(pp, f)
    index = {}
    for k, name in enumerate(names):
        shape = MODELS[name][1]
        m = seeded(name, 200 + k)
        sd = m.state_dict()
        with open(f"{out}/{name}.names.json", "w") as f:
            json.dump([[n, list(v.shape)] for n, v in sd.items()], f)
        proj = [p for n, p in m.named_parameters() if ".proj." in n]
        opt = torch.optim.SGD(proj, lr=0.1, momentum=0.9)
        sum(p.sum() for p in proj).backward()
        opt.step()
        m.zero_grad()
        torch.save({"epoch": 196, "model_state": sd, "optimizer_state": opt.state_dict(),
                    "cfg": "MODEL:\n  ARCH: %s\n  NUM_CLASSES: 400\n" % name, "extra": Extra()},
                   f"{out}/{name}.pyth")
        g = torch.Generator().manual_seed(7 + k)
        x = torch.randn(*shape, generator=g)
        labels = [int(v) for v in torch.randint(0, 400, (shape[0],), generator=g)]
        x.numpy().astype("<f4").tofile(f"{out}/clip_{name}.bin")
        m.eval()
        with torch.no_grad():
            m(x).numpy().astype("<f4").tofile(f"{out}/{name}.eval.bin")
        index[name] = {"shape": list(shape), "labels": labels, "classes": 400}
        if name == "i3d_r50":  # the same blocks as slow_r50: names and eval suffice
            continue
        grads = GRADS[name]
        x, labels = x[:1], labels[:1]  # one clip: frozen BN makes clips independent
        got = {dt: frozen_pass(m.to(dt), x.to(dt), labels, grads)
               for dt in (torch.float64, torch.float32)}
        ref_logits, ref_grads = got[torch.float64]
        nmse = lambda gs: [float(((a - b) ** 2).sum() / (b ** 2).sum()) for a, b in zip(gs, ref_grads)]
        t32 = nmse(got[torch.float32][1])
        sens = [0.0] * len(grads)  # the gradients' conditioning, as torch_init.py measures it
        gp = torch.Generator().manual_seed(11 + k)
        for _ in range(3):
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
        index[name].update({"grads": grads, "torch32_nmse": t32, "sens_nmse": sens,
                            "grad_numel": [dict(m.named_parameters())[n].numel() for n in grads]})
    with open(f"{out}/index.json", "w") as f:
        json.dump(index, f, indent=1)


if __name__ == "__main__":
    main()
