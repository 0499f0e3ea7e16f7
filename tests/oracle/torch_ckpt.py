#!/usr/bin/env python3
"""torch_ckpt.py: does a vidtrain checkpoint load into torchvision and compute the same?

  torch_ckpt.py CKPT INPUT.f32 LOGITS.f32 N T H W

Parses the safetensors file with json + numpy (an independent reader: Debian has no
python3-safetensors), checks the metadata, drops vidtrain's optimizer tensors (optim.*),
loads the rest into torchvision's r3d_18 with load_state_dict(strict=True), runs the
raw float32 input (N, 3, T, H, W) in eval mode and compares with vidtrain's logits.
Exit 0 when they agree (NMSE < 1e-8: float32 with different summation orders), 1 if not.
"""
import json
import struct
import sys

try:
    import numpy as np
    import torch
    import torchvision
except ImportError as e:  # the C tests turn 77 into a ctest skip
    print(f"SKIP: {e}", file=sys.stderr)
    sys.exit(77)

DT = {"F32": np.float32, "I64": np.int64}


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    meta = header.pop("__metadata__", {})
    out = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        arr = np.frombuffer(data[b:end], dtype=DT[e["dtype"]]).reshape(e["shape"])
        out[name] = torch.from_numpy(arr.copy())
    return meta, out


def main():
    if len(sys.argv) != 8:
        raise SystemExit(__doc__)
    ckpt, xin, lin = sys.argv[1:4]
    n, t, h, w = map(int, sys.argv[4:8])
    meta, tensors = read_safetensors(ckpt)
    assert meta["model"] == "r3d18", meta
    assert meta["clip"] == f"{t}x{h}x{w}", meta["clip"]
    heads = json.loads(meta["heads"])
    classes = json.loads(meta["classes"])
    assert len(classes) == heads[0]["classes"], (classes, heads)
    sd = {k: v for k, v in tensors.items() if not k.startswith("optim.")}
    assert sd["stem.1.num_batches_tracked"].dtype == torch.int64
    model = torchvision.models.video.r3d_18(num_classes=heads[0]["classes"])
    model.load_state_dict(sd, strict=True)
    model.eval()
    x = torch.from_numpy(np.fromfile(xin, dtype=np.float32).reshape(n, 3, t, h, w))
    ref = np.fromfile(lin, dtype=np.float32).reshape(n, -1)
    with torch.no_grad():
        z = model(x).numpy()
    nmse = float(((z - ref) ** 2).sum() / max((ref ** 2).sum(), 1e-30))
    print(f"torchvision r3d_18 strict load OK, {len(sd)} tensors; logits NMSE vs vidtrain "
          f"{nmse:.3g}; optimizer tensors dropped: {sorted(k for k in tensors if k.startswith('optim.'))}")
    sys.exit(0 if nmse < 1e-8 else 1)


if __name__ == "__main__":
    main()
