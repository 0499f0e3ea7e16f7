#!/usr/bin/python3
"""st_write.py: save_st, a safetensors writer of numpy arrays (F32, I64) for the oracles
that write their truth as vidtrain checkpoints (torch_golden.py, torch_zoo.py s3d-golden).

A module of its own so that the oracles import it without importing each other.
"""
import json
import struct

import numpy as np


def save_st(path, tensors, meta):
    """Writes tensors ({name: numpy array}) and meta ({key: value}, as strings in
    __metadata__) to path in the safetensors layout vidtrain reads."""
    header = {"__metadata__": {k: str(v) for k, v in meta.items()}}
    off, blobs = 0, []
    for k, v in tensors.items():
        v = np.ascontiguousarray(v)
        dt = {np.dtype(np.float32): "F32", np.dtype(np.int64): "I64"}[v.dtype]
        header[k] = {"dtype": dt, "shape": list(v.shape), "data_offsets": [off, off + v.nbytes]}
        off += v.nbytes
        blobs.append(v.tobytes())
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
