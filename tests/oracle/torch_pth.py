#!/usr/bin/env python3
"""torch_pth.py: PyTorch checkpoints for tests/test_pth.c, written by torch itself.

  torch_pth.py OUT_DIR [--no-big]

Writes into OUT_DIR:
  * good files, with torch.save: seeded random state_dicts of torchvision's r3d_18,
    mc3_18 and r2plus1d_18 (zip; r3d_18 also legacy) and of a small net (zip, legacy,
    pickle protocol 4, and re-packed with deflate); one nested under 'state_dict' with
    'module.' names beside an epoch, an optimizer state and other plain values;
    non-contiguous views (a transpose, a strided slice with an offset, a stride-0
    broadcast); tensors sharing one storage; float16/bfloat16/float64 and integer/bool
    dtypes; a 0-d and an empty tensor.
    Each NAME.pth has a reference NAME.ref.bin (every tensor's .float() as raw
    little-endian float32, back to back) and NAME.ref.json (name, shape, was_int and
    offset in floats per tensor, the container key), so the C test compares every value
    exactly: torch's conversions to float32 are IEEE round-to-nearest, as the reader's are.
  * hostile files (os.system and builtins.eval payloads that would touch a marker file,
    a REDUCE of a storage type, INST, unknown opcodes, deep nesting, a memo index out of
    sequence, a truncated zip, a zip without data.pkl, a storage shorter than its tensor,
    a declared size of 2^60, big-endian byteorder, TorchScript, ...), each with the
    substrings its refusal must contain.
  * manifest.json: {"good": [{file, ref}], "hostile": [{file, expect}], "marker": path}.
The payloads are proven live: the os.system pickle is loaded once here with Python's own
pickle, on a different marker, which must appear.
Exit 0, or 77 when torch/torchvision cannot be imported (the test skips).
"""
import io
import json
import os
import pickle
import struct
import sys
import zipfile

try:
    import torch
    import torchvision
except ImportError as e:  # the C test turns 77 into a ctest skip
    print(f"SKIP: {e}", file=sys.stderr)
    sys.exit(77)

out = sys.argv[1]
big = "--no-big" not in sys.argv
os.makedirs(out, exist_ok=True)
manifest = {"good": [], "hostile": [], "marker": os.path.join(out, "PWNED")}
P = lambda name: os.path.join(out, name)


def randomize(sd, seed):
    """Random values in every tensor (BN buffers included), seeded."""
    g = torch.Generator().manual_seed(seed)
    res = {}
    for k, v in sd.items():
        if v.dtype == torch.int64:
            res[k] = torch.randint(0, 1 << 40, v.shape, generator=g, dtype=torch.int64)
        elif k.endswith("running_var"):
            res[k] = torch.rand(v.shape, generator=g) + 0.5
        else:
            res[k] = torch.randn(v.shape, generator=g)
    return res


def write_ref(name, sd, container=""):
    index, blob, at = [], io.BytesIO(), 0
    for k, v in sd.items():
        f = v.detach().float().contiguous()
        blob.write(f.numpy().astype("<f4").tobytes())
        index.append({"name": k, "shape": list(v.shape), "offset": at,
                      "was_int": int(not (v.is_floating_point()))})
        at += f.numel()
    with open(P(name + ".ref.bin"), "wb") as fh:
        fh.write(blob.getvalue())
    with open(P(name + ".ref.json"), "w") as fh:
        json.dump({"container": container, "tensors": index}, fh)


def good(file, obj, sd, ref, container="", **kw):
    torch.save(obj, P(file), **kw)
    if not os.path.exists(P(ref + ".ref.json")):
        write_ref(ref, sd, container)
    manifest["good"].append({"file": file, "ref": ref})


# ---- good files ----
class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv3d(3, 4, (1, 3, 3), bias=False)
        self.bn = torch.nn.BatchNorm3d(4)
        self.fc = torch.nn.Linear(4, 5)


small = randomize(Small().state_dict(), 1)
good("small.pth", small, small, "small")
good("small_legacy.pth", small, small, "small", _use_new_zipfile_serialization=False)
good("small_proto4.pth", small, small, "small", pickle_protocol=4)
good("small_legacy_proto4.pth", small, small, "small", pickle_protocol=4,
     _use_new_zipfile_serialization=False)

net = Small()
opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
net.fc(torch.randn(2, 4)).sum().backward()
opt.step()
wrapped = {"module." + k: v for k, v in small.items()}
nested = {"epoch": 3, "arch": "small", "best_acc": 0.625, "notes": None, "flags": [True, False],
          "state_dict": wrapped, "optimizer": opt.state_dict(), "big": 1 << 40, "neg": -7}
good("nested.pth", nested, wrapped, "nested", container="state_dict")
good("nested_legacy.pth", nested, wrapped, "nested", container="state_dict",
     _use_new_zipfile_serialization=False)

torch.manual_seed(2)
base = torch.randn(3, 5)
base2 = torch.randn(4, 6)
views = {"t": base.t(), "slice": base2[1:, ::2], "bcast": torch.randn(3, 1).expand(3, 4),
         "perm": torch.randn(2, 3, 4).permute(2, 0, 1)}
assert not views["t"].is_contiguous() and views["slice"].storage_offset() == 6
good("views.pth", views, views, "views")
good("views_legacy.pth", views, views, "views", _use_new_zipfile_serialization=False)

a = torch.randn(10)
shared = {"a": a, "b": a[2:7], "c": a.view(2, 5), "d": a[::3]}
good("shared.pth", shared, shared, "shared")
good("shared_legacy.pth", shared, shared, "shared", _use_new_zipfile_serialization=False)

x = torch.randn(6, 7) * 3
x[0, 0], x[0, 1], x[0, 2] = 1e-6, 7e4, -3e-8  # subnormal / large in half
dtypes = {"f16": x.half(), "bf16": x.bfloat16(), "f64": x.double() * 1e30,
          "f64_small": x.double() / 3, "i64": torch.randint(-(1 << 62), 1 << 62, (5,)),
          "i32": torch.randint(-(1 << 31), (1 << 31) - 1, (5,), dtype=torch.int32),
          "i16": torch.randint(-32768, 32767, (5,), dtype=torch.int16),
          "i8": torch.randint(-128, 127, (5,), dtype=torch.int8),
          "u8": torch.randint(0, 255, (5,), dtype=torch.uint8), "bool": x[0] > 0,
          "scalar": torch.tensor(42, dtype=torch.int64), "scalar_f": torch.tensor(0.5),
          "empty": torch.zeros(0, 3), "f16_t": x.half().t()}
good("dtypes.pth", dtypes, dtypes, "dtypes")
good("dtypes_legacy.pth", dtypes, dtypes, "dtypes", _use_new_zipfile_serialization=False)

if big:
    from torchvision.models import video as tvv
    for i, (name, fn) in enumerate([("r3d_18", tvv.r3d_18), ("mc3_18", tvv.mc3_18),
                                    ("r2plus1d_18", tvv.r2plus1d_18)]):
        sd = randomize(fn().state_dict(), 10 + i)
        good(name + ".pth", sd, sd, name)
        if name == "r3d_18":
            good(name + "_legacy.pth", sd, sd, name, _use_new_zipfile_serialization=False)


# the small archive re-packed with deflate (torch stores; other tools may not)
with zipfile.ZipFile(P("small.pth")) as zin, \
        zipfile.ZipFile(P("small_deflate.pth"), "w", zipfile.ZIP_DEFLATED) as zout:
    for info in zin.infolist():
        zout.writestr(info.filename, zin.read(info.filename))
manifest["good"].append({"file": "small_deflate.pth", "ref": "small"})


# ---- hostile files ----
def hostile(file, data, *expect):
    with open(P(file), "wb") as fh:
        fh.write(data)
    manifest["hostile"].append({"file": file, "expect": list(expect)})


def zip_of(pkl, entries=None, prefix="archive"):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr(prefix + "/data.pkl", pkl)
        z.writestr(prefix + "/version", "3\n")
        for k, v in (entries or {}).items():
            z.writestr(prefix + "/" + k, v)
    return buf.getvalue()


def binunicode(s):
    b = s.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def legacy_of(pkl):
    """magic, protocol version, sys_info, then pkl as the object, then no storages."""
    return (pickle.dumps(0x1950A86A20F9469CFC6C, protocol=2) + pickle.dumps(1001, protocol=2) +
            pickle.dumps({"protocol_version": 1001, "little_endian": True,
                          "type_sizes": {"short": 2, "int": 4, "long": 4}}, protocol=2) +
            pkl + pickle.dumps([], protocol=2))


marker = manifest["marker"]
proof = P("PROOF")
evil = lambda m: b"\x80\x02cos\nsystem\nq\x00" + binunicode("touch " + m) + b"\x85q\x01R."
if os.path.exists(proof):
    os.remove(proof)
pickle.loads(evil(proof))  # what CPython's unpickler does with it: runs it
assert os.path.exists(proof), "the os.system payload does not work: the test would prove nothing"

hostile("os_system.pth", zip_of(evil(marker)), "data.pkl offset 2:", "os.system", "not allowed")
hostile("os_system_legacy.pth", legacy_of(evil(marker)), "pickle offset", "os.system")
hostile("builtins_eval.pth",
        zip_of(b"\x80\x02cbuiltins\neval\n(" + binunicode("open('%s','w')" % marker) + b"tR."),
        "offset 2:", "builtins.eval")
hostile("stack_global.pth",
        zip_of(b"\x80\x04\x8c\x08builtins\x94\x8c\x04exec\x94\x93\x94" +
               binunicode("open('%s','w')" % marker) + b"\x85R."),
        "offset", "builtins.exec")
hostile("subprocess.pth", zip_of(b"\x80\x02csubprocess\nPopen\n(" + binunicode("touch") + b"tR."),
        "subprocess.Popen")
hostile("inst.pth", zip_of(b"\x80\x02(ios\nsystem\n" + binunicode("touch " + marker) + b"."),
        "offset 3", "INST")
hostile("reduce_storage.pth", zip_of(b"\x80\x02ctorch\nFloatStorage\n)R."), "offset 23:",
        "torch.FloatStorage is not callable")
hostile("reduce_str.pth", zip_of(b"\x80\x02" + binunicode("os") + b")R."), "offset 10:",
        "REDUCE calls a str")
hostile("unknown_op.pth", zip_of(b"\x80\x02}\xff."), "offset 3", "unknown opcode 0xff")
hostile("deep_lists.pth", zip_of(b"\x80\x02" + b"]" * 100000 + b"a" * 100000 + b"."),
        "offset 65538", "stack deeper")
hostile("deep_marks.pth", zip_of(b"\x80\x02" + b"(" * 5000 + b"."), "offset 1026", "MARK")
hostile("memo.pth", zip_of(b"\x80\x02}r\x00\x00\x00\x01."), "offset 3", "memo index")
hostile("proto1.pth", zip_of(b"\x80\x01}."), "offset 0", "protocol 1")
hostile("not_dict.pth", zip_of(b"\x80\x02]."), "list")
hostile("empty_pickle.pth", zip_of(b""), "without STOP")


def tensor_pkl(numel=b"K\x04", size=b"K\x04\x85", stride=b"K\x01\x85", key=b"0"):
    """A one-tensor state_dict pickle as torch.save writes it (protocol 2)."""
    return (b"\x80\x02}q\x00X\x01\x00\x00\x00wq\x01ctorch._utils\n_rebuild_tensor_v2\nq\x02"
            b"((X\x07\x00\x00\x00storageq\x03ctorch\nFloatStorage\nq\x04X" +
            struct.pack("<I", len(key)) + key + b"q\x05X\x03\x00\x00\x00cpuq\x06" + numel +
            b"tq\x07QK\x00" + size + stride + b"\x89ccollections\nOrderedDict\n)Rq\x08tq\tRq\ns.")


four = struct.pack("<4f", 1, 2, 3, 4)
good_pkl = tensor_pkl()
assert torch.load(io.BytesIO(zip_of(good_pkl, {"data/0": four})))["w"].tolist() == [1, 2, 3, 4]
hostile("short_storage.pth", zip_of(good_pkl, {"data/0": four[:12]}), "offset", "storage '0'",
        "holds 12")
hostile("huge_numel.pth", zip_of(tensor_pkl(numel=b"\x8a\x08" + struct.pack("<q", 1 << 60)),
                                  {"data/0": four}), "storage '0'", "1152921504606846976")
hostile("huge_size.pth", zip_of(tensor_pkl(size=b"\x8a\x08" + struct.pack("<q", 1 << 60) + b"\x85"),
                                {"data/0": four}), "tensor 'w'", "reaches element")
hostile("overflow_size.pth",
        zip_of(tensor_pkl(size=b"\x8a\x06" + struct.pack("<q", 1 << 40)[:6] + b"\x8a\x06" +
                          struct.pack("<q", 1 << 40)[:6] + b"\x86", stride=b"K\x01K\x01\x86"),
               {"data/0": four}), "2^62")
hostile("stride_out.pth", zip_of(tensor_pkl(stride=b"K\x02\x85"), {"data/0": four}),
        "reaches element 6")
hostile("bcast_bomb.pth",  # 2^14 x 2^14 stride-0 view of one float
        zip_of(tensor_pkl(size=b"M\x00\x40M\x00\x40\x86", stride=b"K\x00K\x00\x86"),
               {"data/0": four}), "tensor 'w'", "repeat more than")
hostile("missing_storage.pth", zip_of(good_pkl), "no entry archive/data/0")
hostile("bad_key.pth", zip_of(tensor_pkl(key=b"../../etc/passwd"), {"data/0": four}), "key")
hostile("big_endian.pth", zip_of(good_pkl, {"data/0": four, "byteorder": "big"}), "byteorder 'big'")
small_zip = open(P("small.pth"), "rb").read()
hostile("truncated.pth", small_zip[:len(small_zip) // 2], "zip")
nopkl = io.BytesIO()
with zipfile.ZipFile(nopkl, "w") as z:
    z.writestr("archive/version", "3\n")
    z.writestr("archive/data/0", four)
hostile("no_data_pkl.pth", nopkl.getvalue(), "without data.pkl")
small_leg = open(P("small_legacy.pth"), "rb").read()
hostile("truncated_legacy.pth", small_leg[:len(small_leg) - 20], "storage")
hostile("text.pth", b"hello, this is not a checkpoint\n", "not a PyTorch checkpoint")
ts = io.BytesIO()
torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), ts)
hostile("torchscript.pth", ts.getvalue(), "TorchScript")

with open(P("manifest.json"), "w") as fh:
    json.dump(manifest, fh, indent=1)
print(f"torch_pth.py: {len(manifest['good'])} good and {len(manifest['hostile'])} hostile files "
      f"in {out}")
