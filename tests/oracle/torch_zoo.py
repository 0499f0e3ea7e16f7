#!/usr/bin/env python3
"""torch_zoo.py: the PyTorch twins of vidtrain's zoo, and a state-dict lister.

Tiny (with bn=False: the test and teaching model tiny_nobn), C3D and S3DBlock (the test
model s3d_block: torchvision's own SepInceptionBlock3D, small) are defined here
(vidtrain's models/zoo.c follows them); the video resnets and S3D are torchvision's own,
X3D pytorchvideo's as torch_x3d.py writes it.
Other scripts import build() from here.

  /usr/bin/python3 tests/oracle/torch_zoo.py MODEL:CLASSES:T:H:W ...
prints, per model, "model SPEC", one line per state_dict entry "name dtype d0,d1,..."
(shape [] prints an empty field), then "params N".

  /usr/bin/python3 tests/oracle/torch_zoo.py s3d-golden OUTDIR
writes the truth for tests/test_zoo_s3d.c as safetensors files (st_write.save_st):
  s3d_block.safetensors  S3DBlock (5 classes) with seeded weights and BN state, "x" (2
    clips of 4x8x8), "label.0"; after one train-mode forward + cross-entropy (mean over
    the batch) + backward: "logits.0", "grad.<param>" for every parameter,
    "after.<buffer>" for every BN buffer; then "eval_logits.0" (eval mode).
  s3d.safetensors  torchvision's s3d (400 classes) with seeded weights, BN running
    statistics from a pass over the clips (then perturbed: an eval forward that
    normalises is a test of every layer, one that does not shrinks to the bias), "x" (2
    clips of 13x209x209, the smallest S3D takes), "eval_logits.0"; then with the
    classifier's dropout off (vidtrain's sits elsewhere: models/zoo.c), one train-mode
    forward + loss + backward: "logits.0", "after.<name>" of three BN buffers (momentum
    0.001), and for the tensors in S3D_GRADS "grad.<name>" computed in FLOAT64 (rounded
    to float32) and "torch32_nmse.<name>", the NMSE of PyTorch's float32 gradient from
    it.
  s3d_eval.safetensors  the part of s3d.safetensors known before the training passes
    (state, "x", "label.0", "eval_logits.0"), written first: a line "eval written s3d"
    says it is there, and test_zoo_s3d runs its cpu-ref eval while the rest is computed.
Each model's line ("NAME: N params, clip ...") follows its file.
"""
import copy
import os
import sys
from functools import partial

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import torchvision
    from torchvision.models.video.s3d import SepInceptionBlock3D
    from torchvision.ops.misc import Conv3dNormActivation
except ImportError as e:  # the C tests turn 77 into a ctest skip
    print(f"SKIP: {e}", file=sys.stderr)
    sys.exit(77)


def torchvision_init(model):
    """torchvision's video-resnet initialisation (conv biases, where there are any, 0)."""
    for m in model.modules():
        if isinstance(m, nn.Conv3d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            if m.bias is not None:
                nn.init.constant_(m.bias, 0)
        elif isinstance(m, nn.BatchNorm3d):
            nn.init.constant_(m.weight, 1)
            nn.init.constant_(m.bias, 0)
        elif isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0, 0.01)
            nn.init.constant_(m.bias, 0)


class Tiny(nn.Module):
    """vidtrain's tiny: 4 conv3d-BN-ReLU blocks (16/32/64/128), ~293k parameters, trains on
    a laptop CPU at 8x64x64.

    bn=False is vidtrain's tiny_nobn, a test and teaching model: no batch norm (bn1..bn4
    are identities, without state), a bias on each conv instead, so that a clip's gradient
    depends on that clip alone; dropout (tiny_nobn's, as vidtrain's cfg.dropout) acts on
    the features before fc."""

    def __init__(self, num_classes, dropout=0.0, bn=True):
        super().__init__()

        def norm(c):
            return nn.BatchNorm3d(c) if bn else nn.Identity()
        self.conv1 = nn.Conv3d(3, 16, 3, padding=1, bias=not bn)
        self.bn1 = norm(16)
        self.pool1 = nn.MaxPool3d((1, 2, 2), (1, 2, 2))
        self.conv2 = nn.Conv3d(16, 32, 3, padding=1, bias=not bn)
        self.bn2 = norm(32)
        self.pool2 = nn.MaxPool3d(2, 2)
        self.conv3 = nn.Conv3d(32, 64, 3, padding=1, bias=not bn)
        self.bn3 = norm(64)
        self.pool3 = nn.MaxPool3d(2, 2)
        self.conv4 = nn.Conv3d(64, 128, 3, padding=1, bias=not bn)
        self.bn4 = norm(128)
        self.avgpool = nn.AdaptiveAvgPool3d(1)
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(128, num_classes)
        torchvision_init(self)

    def features(self, x):
        x = self.pool1(F.relu(self.bn1(self.conv1(x))))
        x = self.pool2(F.relu(self.bn2(self.conv2(x))))
        x = self.pool3(F.relu(self.bn3(self.conv3(x))))
        x = F.relu(self.bn4(self.conv4(x)))
        return self.avgpool(x).flatten(1)

    def forward(self, x):
        return self.fc(self.dropout(self.features(x)))


class C3D(nn.Module):
    """The common PyTorch C3D port (conv1 .. conv5b, fc6, fc7, fc8)."""

    def __init__(self, num_classes, t=16, h=112, w=112, dropout=0.5):
        super().__init__()
        self.conv1 = nn.Conv3d(3, 64, 3, padding=1)
        self.pool1 = nn.MaxPool3d((1, 2, 2), (1, 2, 2))
        self.conv2 = nn.Conv3d(64, 128, 3, padding=1)
        self.pool2 = nn.MaxPool3d(2, 2)
        self.conv3a = nn.Conv3d(128, 256, 3, padding=1)
        self.conv3b = nn.Conv3d(256, 256, 3, padding=1)
        self.pool3 = nn.MaxPool3d(2, 2)
        self.conv4a = nn.Conv3d(256, 512, 3, padding=1)
        self.conv4b = nn.Conv3d(512, 512, 3, padding=1)
        self.pool4 = nn.MaxPool3d(2, 2)
        self.conv5a = nn.Conv3d(512, 512, 3, padding=1)
        self.conv5b = nn.Conv3d(512, 512, 3, padding=1)
        self.pool5 = nn.MaxPool3d(2, 2, padding=(0, 1, 1))
        with torch.no_grad():
            n = self._trunk(torch.zeros(1, 3, t, h, w)).numel()
        self.fc6 = nn.Linear(n, 4096)
        self.fc7 = nn.Linear(4096, 4096)
        self.fc8 = nn.Linear(4096, num_classes)
        self.dropout = nn.Dropout(dropout)
        for m in self.modules():
            if isinstance(m, nn.Conv3d):
                nn.init.kaiming_normal_(m.weight)

    def _trunk(self, x):
        x = self.pool1(F.relu(self.conv1(x)))
        x = self.pool2(F.relu(self.conv2(x)))
        x = self.pool3(F.relu(self.conv3b(F.relu(self.conv3a(x)))))
        x = self.pool4(F.relu(self.conv4b(F.relu(self.conv4a(x)))))
        x = self.pool5(F.relu(self.conv5b(F.relu(self.conv5a(x)))))
        return x

    def forward(self, x):
        x = self._trunk(x).flatten(1)
        x = self.dropout(F.relu(self.fc6(x)))
        x = self.dropout(F.relu(self.fc7(x)))
        return self.fc8(x)


class S3DBlock(nn.Module):
    """vidtrain's test model s3d_block: S3D's own pieces, a few channels wide — a 1x1x1
    Conv3dNormActivation stem, two SepInceptionBlock3D (the concat of four branches), S3D's
    BN (eps, momentum 0.001), an avgpool window, the global mean and fc."""

    def __init__(self, num_classes):
        super().__init__()
        norm = partial(nn.BatchNorm3d, eps=0.001, momentum=0.001)
        self.stem = Conv3dNormActivation(3, 6, kernel_size=1, stride=1, norm_layer=norm)
        self.block1 = SepInceptionBlock3D(6, 2, 3, 4, 2, 3, 2, norm)
        self.block2 = SepInceptionBlock3D(11, 3, 2, 3, 2, 2, 3, norm)
        self.avgpool = nn.AvgPool3d((2, 3, 3), stride=1)
        self.fc = nn.Linear(11, num_classes)

    def forward(self, x):
        x = self.avgpool(self.block2(self.block1(self.stem(x))))
        return self.fc(x.mean(dim=(2, 3, 4)))


def build(model, classes, t=16, h=112, w=112, dropout=0.0):
    """dropout: vidtrain's --dropout where the model has one (tiny, c3d, x3d; default 0 as
    vidtrain's, not the ports' 0.5, which draw masks of their own in train mode)."""
    if model == "tiny":
        return Tiny(classes, dropout)
    if model == "tiny_nobn":
        return Tiny(classes, dropout, bn=False)
    if model == "c3d":
        return C3D(classes, t, h, w, dropout)
    tv = torchvision.models.video
    if model == "r3d18":
        return tv.r3d_18(num_classes=classes)
    if model == "mc3_18":
        return tv.mc3_18(num_classes=classes)
    if model == "r2plus1d18":
        return tv.r2plus1d_18(num_classes=classes)
    if model == "s3d":
        return tv.s3d(num_classes=classes)
    if model == "s3d_block":
        return S3DBlock(classes)
    if model.startswith("x3d_"):  # pytorchvideo's X3D, in plain torch (torch_x3d.py)
        import torch_x3d
        return torch_x3d.build(model, classes, t, h, w, dropout=dropout)
    if model in VIT_SPECS:  # VideoMAE's ViT, in plain torch (torch_vit.py)
        import torch_vit
        dim, depth, heads = VIT_SPECS[model]
        return torch_vit.VisionTransformer(dim, depth, heads, classes)
    raise SystemExit(f"unknown model {model}")


# dim, depth, heads (models/zoo_vit.c; vit_test is its test model)
VIT_SPECS = {"vit_test": (48, 2, 2), "videomae_vit_s": (384, 12, 6),
             "videomae_vit_b": (768, 12, 12)}


# The S3D tensors whose gradients s3d-golden writes: the first conv (every layer's
# gradient flows through it), a BN of the stem, each kind of branch of one block (a
# pointwise conv, a separable conv's temporal half, the max-pool branch's conv, a BN's
# gamma and beta), the last block's, and the classifier.
S3D_GRADS = [
    "features.0.0.0.weight", "features.0.1.1.weight", "features.0.1.1.bias",
    "features.9.branch0.0.weight", "features.9.branch1.1.1.0.weight",
    "features.9.branch2.1.0.1.weight", "features.9.branch2.1.0.1.bias",
    "features.9.branch3.1.0.weight", "features.15.branch1.1.0.0.weight",
    "features.15.branch3.1.1.weight", "classifier.1.weight", "classifier.1.bias",
]
S3D_STATS = ["features.0.0.1.running_mean", "features.0.0.1.running_var",
             "features.15.branch2.1.1.1.running_var"]


def s3d_golden(out):
    import numpy as np
    from bn_state import bn_from_data
    from st_write import save_st
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    for name, classes, clip, grads in (("s3d_block", 5, (4, 8, 8), None),
                                       ("s3d", 400, (13, 209, 209), S3D_GRADS)):
        torch.manual_seed(5)  # PyTorch's default init, drawn from this seed
        g = torch.Generator().manual_seed(6)
        m = build(name, classes)
        x = torch.randn((2, 3) + clip, generator=g)
        label = torch.tensor([1, classes - 2])
        bn_from_data(m, x, g)
        t = {k: v.detach().clone().numpy() for k, v in m.state_dict().items()}
        t["x"] = x.numpy()
        t["label.0"] = label.numpy().astype(np.float32)
        m.eval()
        with torch.no_grad():
            t["eval_logits.0"] = m(x).numpy()
        if name == "s3d":
            save_st(os.path.join(out, "s3d_eval.safetensors"), t, {"model": name})
            print("eval written s3d", flush=True)
            m.classifier[0].p = 0.0
        if grads:  # only the gradients written: the others' weight gradients are never
            for k, p in m.named_parameters():  # read (a third of the float64 pass), and
                p.requires_grad_(k in grads)  # these come out bit for bit the same
        m64 = copy.deepcopy(m).double() if grads else None
        m.train()
        logits = m(x)
        F.cross_entropy(logits, label).backward()
        t["logits.0"] = logits.detach().numpy()
        params = dict(m.named_parameters())
        for k in grads or params:
            t["grad." + k] = params[k].grad.numpy()
        if m64 is not None:
            # S3D's float32 training gradients are ill-conditioned (PyTorch's own differ
            # from its float64 ones by NMSE ~6e-4; test_zoo_s3d.c): the truth for them is
            # float64, with PyTorch's float32 distance from it as the yardstick.
            m64.train()
            F.cross_entropy(m64(x.double()), label).backward()
            p64 = dict(m64.named_parameters())
            for k in grads:
                a, b = params[k].grad.double(), p64[k].grad
                t["grad." + k] = b.float().numpy()
                t["torch32_nmse." + k] = np.array(
                    [float(((a - b) ** 2).sum() / (b ** 2).sum())], np.float32)
        for k, v in m.state_dict().items():
            if (grads is None and "running" in k) or k in S3D_STATS:
                t["after." + k] = v.numpy()
        save_st(os.path.join(out, name + ".safetensors"), t, {"model": name})
        print(f"{name}: {sum(p.numel() for p in m.parameters())} params, clip {clip}", flush=True)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "s3d-golden":
        return s3d_golden(sys.argv[2])
    specs = sys.argv[1:]
    if not specs or any(len(sp.split(":")) != 5 for sp in specs):
        raise SystemExit(__doc__)
    # Listing needs shapes, not values: skip the (slow, for c3d's 78M) random init.
    for fn in ("kaiming_normal_", "kaiming_uniform_", "normal_", "uniform_", "constant_"):
        setattr(torch.nn.init, fn, lambda tensor, *a, **k: tensor)
    for sp in specs:
        model, classes, t, h, w = sp.split(":")
        m = build(model, int(classes), int(t), int(h), int(w))
        print("model", sp)
        for k, v in m.state_dict().items():
            dt = "I64" if v.dtype == torch.int64 else "F32"
            print(k, dt, ",".join(str(d) for d in v.shape))
        print("params", sum(p.numel() for p in m.parameters()))
        del m


if __name__ == "__main__":
    main()
