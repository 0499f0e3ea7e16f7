#!/usr/bin/python3
"""vtt_write.py: save_vtt, the writer of the VTT1 record files the op oracles write
(torch_ops.py, torch_attn.py, torch_balance.py, torch_mix.py, torch_pool_nan.py,
pil_randaug.py) and tests/goldenutil.h reads (vt_test_recs_load).

The layout: the 4-byte magic b"VTT1", then per record
    u32 name_len, name (ascii), u32 count, count x float32 (little-endian).
Integers (labels, geometry, bytes) are stored as floats (exact below 2^24).

A module of its own so that the oracles import it without importing each other.
"""
import struct

import numpy as np


def save_vtt(path, records):
    """Writes records ([(name, values)], values a torch tensor or anything numpy takes) to
    path as a VTT1 file, in the order given; each record's values flattened and rounded to
    float32."""
    with open(path, "wb") as f:
        f.write(b"VTT1")
        for name, t in records:
            a = np.asarray(t.numpy() if hasattr(t, "numpy") else t).astype("<f4").reshape(-1)
            nb = name.encode("ascii")
            f.write(struct.pack("<I", len(nb)) + nb + struct.pack("<I", a.size))
            f.write(a.tobytes())
