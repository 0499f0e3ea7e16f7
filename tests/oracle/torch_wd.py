#!/usr/bin/python3
"""torch_wd.py: the outside truth for weight-decay exemptions (tests/test_wd_exempt.c).

Builds the plain-torch VideoMAE ViT of torch_vit.py (the VideoMAE state-dict names) and
splits its parameters the way timm's optim_factory.param_groups_weight_decay and
VideoMAE's get_parameter_groups do:
    if not param.requires_grad: continue
    if param.ndim <= 1 or name.endswith(".bias") or name in no_weight_decay_list:
        no_decay
    else:
        decay
with no_weight_decay_list = {"pos_embed", "cls_token"} (VisionTransformer.no_weight_decay).

Usage: /usr/bin/python3 tests/oracle/torch_wd.py DIM DEPTH HEADS CLASSES
prints one line per parameter in state-dict order: "NAME NDIM decay|no_decay".
This script must never depend on vidtrain: it is what vidtrain is checked against.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_vit import VisionTransformer  # noqa: E402


def main():
    if len(sys.argv) != 5:
        raise SystemExit(__doc__)
    dim, depth, heads, classes = (int(a) for a in sys.argv[1:5])
    for fn in ("kaiming_uniform_", "uniform_", "normal_", "zeros_", "ones_", "trunc_normal_"):
        setattr(torch.nn.init, fn, lambda tensor, *a, **k: tensor)  # names only: no init
    m = VisionTransformer(dim, depth, heads, classes)
    skip = {"pos_embed", "cls_token"}
    for name, p in m.named_parameters():
        if not p.requires_grad:
            continue
        nd = p.ndim <= 1 or name.endswith(".bias") or name in skip
        print(name, p.ndim, "no_decay" if nd else "decay")


if __name__ == "__main__":
    main()
