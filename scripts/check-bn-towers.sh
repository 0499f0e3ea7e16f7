#!/usr/bin/env bash
# check-bn-towers.sh: DESIGN.md invariant 1 over a whole epoch of the default recipe
# (issue 26's outside check). The same training, batch for batch, on one CPU tower and on
# two CPU towers split 3:1 under sync-BN:
#   vidtrain train DEMO --model tiny --epochs 1 --batch 8 --seed 5 --workers 1 --sync-bn
#       --devices cpu:1                                  (one device)
#       --devices cpu:2 --tower-split manual:3,1         (two towers, 6:2 clips a step)
# then prints, per tensor of RUN/last.safetensors, max |a - b| / max |a|, the largest over
# parameters (optimizer state included) and over running statistics, and the same over
# the parameters taken as one arena (test_towers' measure). The defaults include the colour jitter
# (contrast down to 0.4) that makes batch-norm channels' means large against their
# spread, where a float sum x^2 - mean^2 cancels. Issue 26 asks <= 1e-5 for parameters.
# Figures only (slow for a ctest: two epochs of tiny on the CPU, a few minutes).
#   bash scripts/check-bn-towers.sh             (uses build/vidtrain, or $VT_BIN)
#   EXTRA="--contrast 1 --brightness 0" bash scripts/check-bn-towers.sh   (jitter off)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${VT_BIN:-build/vidtrain}
PY=${VT_PYTHON:-/usr/bin/python3}
WORK=${WORK:-$(mktemp -d /tmp/vt-bn-towers.XXXXXX)}
EXTRA=${EXTRA:-}
if [ ! -x "$BIN" ]; then
    echo "check-bn-towers: $BIN not found (build first, or set VT_BIN)" >&2
    exit 1
fi
mkdir -p "$WORK"
if [ ! -d "$WORK/demo/train" ]; then
    "$BIN" synth "$WORK/demo" >"$WORK/synth.log" 2>&1
fi
common=(--model tiny --epochs 1 --batch 8 --seed 5 --workers 1 --sync-bn -q)
# shellcheck disable=SC2086 # EXTRA is a list of options
"$BIN" train "$WORK/demo" --out "$WORK/one" "${common[@]}" --devices cpu:1 $EXTRA \
    >"$WORK/one.log" 2>&1
# shellcheck disable=SC2086
"$BIN" train "$WORK/demo" --out "$WORK/two" "${common[@]}" --devices cpu:2 \
    --tower-split manual:3,1 $EXTRA >"$WORK/two.log" 2>&1
echo "== check-bn-towers: $BIN, 1 tower vs 2 towers 3:1, sync-BN, 1 epoch ${EXTRA:+($EXTRA)}"
"$PY" - "$WORK/one/last.safetensors" "$WORK/two/last.safetensors" <<'EOF'
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


one, two = load(sys.argv[1]), load(sys.argv[2])
worst = {"param": (0.0, ""), "stat": (0.0, "")}
for k in one:
    a, b = one[k], two[k]
    scale = max(np.abs(a).max(), 1e-30)
    r = float(np.abs(a - b).max() / scale)
    kind = "stat" if ("running" in k or "num_batches" in k) else "param"
    print(f"  {k:40s} {kind:5s} max|d|/max|a| {r:.2e}")
    if r >= worst[kind][0]:
        worst[kind] = (r, k)
for kind in ("param", "stat"):
    r, k = worst[kind]
    print(f"largest over {kind}s: {r:.2e} ({k})")
# test_towers' measure: the parameter arena's max |a - b| over its max |a|
ks = [k for k in one if not ("running" in k or "num_batches" in k or k.startswith("optim."))]
a = np.concatenate([one[k] for k in ks])
b = np.concatenate([two[k] for k in ks])
print(f"parameters as one arena: max|d|/max|a| {np.abs(a - b).max() / np.abs(a).max():.2e}")
EOF
echo "(runs in $WORK)"
