#!/usr/bin/python3
"""compare_states.py A.safetensors B.safetensors [--worst]: how far two vidtrain states are.

Per tensor: max |a - b| / max |a| (A is the reference); then the largest over parameters
(optimizer state included) and over running statistics, and over the parameters taken as
one arena (test_towers' measure). --worst prints one line: the largest ratio and its tensor.
An independent reader (json + numpy), not vidtrain's.
"""
import json
import struct
import sys

import numpy as np

DT = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "F16": np.float16}


def load(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in head.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        out[k] = np.frombuffer(data[a:b], dtype=DT[v["dtype"]]).astype(np.float64)
    return out


def ratio(a, b):
    return float(np.abs(a - b).max() / max(np.abs(a).max(), 1e-30))


def main():
    one, two = load(sys.argv[1]), load(sys.argv[2])
    if "--worst" in sys.argv[3:]:
        r, k = max((ratio(one[k], two[k]), k) for k in one)
        print(f"{r:.2e} {k}")
        return 0
    worst = {"param": (0.0, ""), "stat": (0.0, "")}
    for k in one:
        r = ratio(one[k], two[k])
        kind = "stat" if ("running" in k or "num_batches" in k) else "param"
        print(f"  {k:40s} {kind:5s} max|d|/max|a| {r:.2e}")
        worst[kind] = max(worst[kind], (r, k))
    for kind in ("param", "stat"):
        r, k = worst[kind]
        print(f"largest over {kind}s: {r:.2e} ({k})")
    ks = [k for k in one if not ("running" in k or "num_batches" in k or k.startswith("optim."))]
    a = np.concatenate([one[k] for k in ks])
    b = np.concatenate([two[k] for k in ks])
    print(f"parameters as one arena: max|d|/max|a| {np.abs(a - b).max() / np.abs(a).max():.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
