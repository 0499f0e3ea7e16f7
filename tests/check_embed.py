#!/usr/bin/env python3
"""check_embed.py: the outside reader of tests/test_embed.c. Reads what `vidtrain embed`
wrote with numpy alone (the .npy by numpy.load, the safetensors header and data by hand),
the classifier from the run's checkpoint the same way, applies softmax(W e + b) and
compares with `vidtrain predict`: its per-clip probabilities (--dump-input) and its
per-video means (--json). Prints one line per figure, "name value", for the C test to
judge; exits non-zero only when a file cannot be read.

usage: check_embed.py classifier CKPT PRED_JSON DUMP_JSON PERCLIP.safetensors VIDEO.npy
                          K1.npy PRED1_JSON
       (DUMP_JSON "-": no per-clip probabilities; with one clip a video, K1 against PRED1
       is the per-clip statement)
       check_embed.py rows A ROW_A B ROW_B   (A, B: .npy or .safetensors files)
       check_embed.py logits CKPT PERCLIP.safetensors LOGITS.bin
The second form prints the largest difference between row ROW_A of A and row ROW_B of B
relative to the largest value of the latter, and both files' row counts. The third the
NMSE of raw float32 logits (ONNX Runtime's on the same clips, tests/test_zoo_cmds.c)
against W e + b of the per-clip rows, in float64.
VIDEO.npy and K1.npy may be .safetensors files too (with K = 1 the per-clip file is both).
"""
import json
import struct
import sys

import numpy as np


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    meta = head.pop("__metadata__", {})
    out = {}
    for name, t in head.items():
        a, b = t["data_offsets"]
        dt = {"F32": "<f4", "I64": "<i8"}[t["dtype"]]
        out[name] = np.frombuffer(data[a:b], dtype=dt).reshape(t["shape"])
    return out, meta


def softmax(z):
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def nmse(a, b):
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    return float(((a - b) ** 2).sum() / (b ** 2).sum())


def predict_probs(path, classes):
    """(videos, classes) from predict --json (--top = classes: every class listed)."""
    rows = []
    for e in json.load(open(path)):
        p = dict((t["label"], t["prob"]) for t in e["heads"][0]["top"])
        rows.append([p[c] for c in classes])
    return np.array(rows)


def load_any(path):
    if path.endswith(".npy"):
        return np.load(path)
    return read_safetensors(path)[0]["embeddings"]


def rows(a, ra, b, rb):
    A = load_any(a).astype(np.float64)
    B = load_any(b).astype(np.float64)
    x, y = A[int(ra)], B[int(rb)]
    print("rows", A.shape[0], B.shape[0])
    print("row_maxrel", float(np.abs(x - y).max() / np.abs(y).max()))


def classifier_of(tensors, meta):
    """W (classes, D) and b in float64, by the names the embeddings' metadata gives (a 5-D
    conv weight, S3D's, flattened)."""
    W = tensors[meta["classifier_weight"]].astype(np.float64)
    b = tensors[meta["classifier_bias"]].astype(np.float64)
    return W.reshape(W.shape[0], -1), b


def logits(ckpt, perclip, raw):
    tensors, _ = read_safetensors(ckpt)
    emb, meta = read_safetensors(perclip)
    W, b = classifier_of(tensors, meta)
    L = emb["embeddings"].astype(np.float64) @ W.T + b
    got = np.fromfile(raw, dtype="<f4").astype(np.float64)
    print("logits_size", got.size, L.size)
    if got.size == L.size:
        print("logits_nmse", nmse(got.reshape(L.shape), L))
        print("logits_maxabs", float(np.abs(L).max()))


def classifier(ckpt, pred, dump, perclip, video, k1, pred1):
    tensors, cmeta = read_safetensors(ckpt)
    emb, meta = read_safetensors(perclip)
    W, b = classifier_of(tensors, meta)
    E = emb["embeddings"].astype(np.float64)            # (videos x K, D)
    P = softmax(E @ W.T + b)                              # per clip
    if dump != "-":
        clips = np.concatenate([np.array(v["heads"][0]["probs"]) for v in json.load(open(dump))])
        print("perclip_rows", E.shape[0], clips.shape[0])
        print("perclip_nmse", nmse(P, clips))
    nv = len(json.load(open(pred)))
    K = E.shape[0] // nv
    # the class names in class-id order (the rows of W): the checkpoint's own list
    names = json.loads(cmeta["classes"])
    mean_p = P.reshape(nv, K, -1).mean(axis=1)
    print("video_nmse", nmse(mean_p, predict_probs(pred, names)))
    V = load_any(video).astype(np.float64)
    Vm = E.reshape(nv, K, -1).mean(axis=1)
    print("video_rows", V.shape[0], nv)
    print("video_mean_maxrel", float(np.abs(V - Vm).max() / np.abs(Vm).max()))
    V1 = load_any(k1).astype(np.float64)
    print("k1_nmse", nmse(softmax(V1 @ W.T + b), predict_probs(pred1, names)))
    print("dim", E.shape[1], W.shape[1])
    # for the docs: the classifier on the MEAN features (= the mean of the logits) is not
    # predict's mean of probabilities; how far apart they are here
    print("info_mean_feature_vs_predict_nmse", nmse(softmax(V @ W.T + b),
                                                    predict_probs(pred, names)))


def main():
    if sys.argv[1] == "rows":
        rows(*sys.argv[2:6])
    elif sys.argv[1] == "logits":
        logits(*sys.argv[2:5])
    else:
        classifier(*sys.argv[2:9])


if __name__ == "__main__":
    main()
