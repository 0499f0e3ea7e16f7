#!/usr/bin/python3
"""pil_randaug.py: the outside truth for RandAugment's ops (tests/test_randaug.c): PIL's
own ImageOps / ImageEnhance / Image.transform / Image.rotate, called as timm's
auto_augment.py calls them (fillcolor (128, 128, 128), resample BILINEAR: the fixed
choice vidtrain makes where timm draws bilinear or bicubic), and timm's level functions
(magnitude -> op argument) written again here from timm's auto_augment.py. It must never
depend on vidtrain.

Records (the VTT1 format, vtt_write.py; bytes stored as floats, exact):
  frame{k}          a uint8 RGB frame (h, w, 3) and shape{k} = [h, w]
  op{i}.{name}      [frame k, argument] of case i; out{i} = PIL's result (h, w, 3)
  level{inc}.{name} [magnitude, argument] pairs: timm's level function of the op at each
                    magnitude of MAGS with the sign taken positive (inc 1: the
                    _RAND_INCREASING_TRANSFORMS variant)
Usage: /usr/bin/python3 tests/oracle/pil_randaug.py OUT.bin
"""
import os
import sys

import numpy as np
from PIL import Image, ImageEnhance, ImageOps

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vtt_write import save_vtt  # noqa: E402

FILL = (128, 128, 128)
records = []


def put(name, a):
    records.append((name, np.asarray(a, dtype=np.float32).reshape(-1)))


rng = np.random.default_rng(0)
frames = []
# 0: gradients with noise over the full range, odd non-square size
h, w = 29, 37
y, x = np.mgrid[0:h, 0:w]
f0 = np.stack([x * 255 / (w - 1), y * 255 / (h - 1), (x + y) * 255 / (w + h - 2)], -1)
f0 = np.clip(f0 + rng.normal(0, 20, f0.shape), 0, 255).astype(np.uint8)
frames.append(f0)
# 1: low range (60..180) with a bright square: AutoContrast and Equalize have work to do
f1 = rng.integers(60, 181, (24, 24, 3)).astype(np.uint8)
f1[5:11, 7:15] = (170, 175, 180)
frames.append(f1)
# 2: Equalize whose table passes 255 (300 pixels, step 1): Image.point clips it
f2 = np.zeros((10, 30, 3), np.uint8)
flat = np.arange(300) % 255
f2[..., 0] = flat.reshape(10, 30)
f2[..., 1] = ((flat * 7) % 200).reshape(10, 30)
f2[..., 2] = 90
f2[9, 29] = (255, 255, 255)
frames.append(f2)
# 3: a band with one value and a band with two (the "leave it" branches)
f3 = np.zeros((8, 8, 3), np.uint8)
f3[...] = (50, 100, 200)
f3[0, 0, 0] = 51
frames.append(f3)
for k, f in enumerate(frames):
    put(f"frame{k}", f)
    put(f"shape{k}", f.shape[:2])


def affine(img, m):
    return img.transform(img.size, Image.AFFINE, m, resample=Image.BILINEAR, fillcolor=FILL)


def solarize_add(img, add, thresh=128):  # timm's: ImageOps has no such op
    lut = [min(255, i + add) if i < thresh else i for i in range(256)]
    return img.point(lut * 3)


OPS = {
    "autocontrast": lambda im, a: ImageOps.autocontrast(im),
    "equalize": lambda im, a: ImageOps.equalize(im),
    "invert": lambda im, a: ImageOps.invert(im),
    "rotate": lambda im, a: im.rotate(a, resample=Image.BILINEAR, fillcolor=FILL),
    "posterize": lambda im, a: im if a >= 8 else ImageOps.posterize(im, int(a)),
    "solarize": lambda im, a: ImageOps.solarize(im, int(a)),
    "solarize_add": lambda im, a: solarize_add(im, int(a)),
    "color": lambda im, a: ImageEnhance.Color(im).enhance(a),
    "contrast": lambda im, a: ImageEnhance.Contrast(im).enhance(a),
    "brightness": lambda im, a: ImageEnhance.Brightness(im).enhance(a),
    "sharpness": lambda im, a: ImageEnhance.Sharpness(im).enhance(a),
    "shear_x": lambda im, a: affine(im, (1, a, 0, 0, 1, 0)),
    "shear_y": lambda im, a: affine(im, (1, 0, 0, a, 1, 0)),
    "translate_x": lambda im, a: affine(im, (1, 0, a * im.size[0], 0, 1, 0)),
    "translate_y": lambda im, a: affine(im, (1, 0, 0, 0, 1, a * im.size[1])),
}
ARGS = {
    "autocontrast": [0], "equalize": [0], "invert": [0],
    # geometric arguments are dyadic, so the float32 the test reads is PIL's double
    "rotate": [7.25, -7.25, 21.0, -30.0, 30.0, 0.0, 13.796875],
    "posterize": [0, 1, 2, 3, 4, 8], "solarize": [0, 77, 128, 200, 256],
    "solarize_add": [0, 40, 77, 110],
    "color": [0.1, 0.37, 1.0, 1.63, 1.9], "contrast": [0.1, 0.37, 1.0, 1.63, 1.9],
    "brightness": [0.1, 0.37, 1.0, 1.63, 1.9], "sharpness": [0.1, 0.37, 1.0, 1.63, 1.9],
    "shear_x": [0.125, -0.125, 0.296875, -0.296875, 0.171875],
    "shear_y": [0.125, -0.125, 0.296875, -0.296875, 0.171875],
    "translate_x": [0.125, -0.125, 0.4375, -0.4375, 0.234375],
    "translate_y": [0.125, -0.125, 0.4375, -0.4375, 0.234375],
}
i = 0
for name, args in ARGS.items():
    for a in args:
        for k, f in enumerate(frames):
            out = OPS[name](Image.fromarray(f, "RGB"), a)
            put(f"op{i}.{name}", [k, a])
            put(f"out{i}", np.asarray(out))
            i += 1

# timm's level functions (auto_augment.py, _LEVEL_DENOM 10), sign positive
MAGS = [0.0, 0.5, 3.25, 5.0, 7.0, 9.875, 10.0, 13.0]  # dyadic: exact in float32


def level(name, inc, m):
    l = m / 10.0
    if name == "rotate":
        return l * 30.0
    if name == "posterize":
        return 4 - int(l * 4) if inc else int(l * 4)
    if name == "solarize":
        return 256 - int(l * 256) if inc else int(l * 256)
    if name == "solarize_add":
        return int(l * 110)
    if name in ("color", "contrast", "brightness", "sharpness"):
        return max(0.1, 1.0 + l * 0.9) if inc else l * 1.8 + 0.1
    if name in ("shear_x", "shear_y"):
        return l * 0.3
    if name in ("translate_x", "translate_y"):
        return l * 0.45
    return 0.0


for inc in (0, 1):
    for name in OPS:
        put(f"level{inc}.{name}", [v for m in MAGS for v in (m, level(name, inc, m))])

save_vtt(sys.argv[1], records)
import PIL  # noqa: E402

print(f"pil_randaug.py: {len(records)} records, {i} op cases, Pillow {PIL.__version__}")
