#!/usr/bin/env python3
"""torch_zoo.py: the PyTorch twins of vidtrain's zoo, and a state-dict lister.

Tiny (with bn=False: the test and teaching model tiny_nobn) and C3D are defined here
(vidtrain's models/zoo.c follows them); the video resnets are torchvision's own. Other
scripts import build() from here.

  /usr/bin/python3 scripts/torch_zoo.py MODEL:CLASSES:T:H:W ...
prints, per model, "model SPEC", one line per state_dict entry "name dtype d0,d1,..."
(shape [] prints an empty field), then "params N".
"""
import sys

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import torchvision
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


def build(model, classes, t=16, h=112, w=112):
    if model == "tiny":
        return Tiny(classes)
    if model == "tiny_nobn":
        return Tiny(classes, bn=False)
    if model == "c3d":
        return C3D(classes, t, h, w)
    tv = torchvision.models.video
    if model == "r3d18":
        return tv.r3d_18(num_classes=classes)
    if model == "mc3_18":
        return tv.mc3_18(num_classes=classes)
    if model == "r2plus1d18":
        return tv.r2plus1d_18(num_classes=classes)
    raise SystemExit(f"unknown model {model}")


def main():
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
