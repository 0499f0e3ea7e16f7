#!/usr/bin/env bash
# bench-cpu-step.sh: training-step throughput (forward + backward + SGD update) of tiny,
# r3d18, x3d_xs, x3d_s and slow_r50 on small clips, vidtrain's cpu backend vs PyTorch CPU
# (bench/bench_torch_step.py; X3D as tests/oracle/torch_x3d.py writes pytorchvideo's,
# slow_r50 as tests/oracle/torch_pyvideo.py does; mvit_v2_s is torchvision's own,
# videomae_vit_s tests/oracle/torch_vit.py's),
# same threads, same batch, same synthetic input shape. Prints clips/s and the ratio.
#   bash bench/bench-cpu-step.sh                 (THREADS=2 STEPS=5 WARMUP=2)
#   BUILD=build-net THREADS=1 bash bench/bench-cpu-step.sh
# vidtrain's side is `vidtrain bench step --devices cpu:1` (one tower, the fast cpu backend).
# Speed is a figure to read, never a test assertion.
# Fairness (checked): both peers get the same thread count (vidtrain --threads, torch
# set_num_threads, OMP_NUM_THREADS for both), batch, clip, classes, SGD momentum 0.9 with
# the update and zero_grad inside the timed step, and the same warm-up. Both use libgomp:
# on a shared machine whose other jobs take a core, busy-waiting threads distort both
# figures (run it 2-3 times; OMP_WAIT_POLICY=passive in the environment reaches both).
# OpenBLAS: OPENBLAS_CORETYPE is unset, so OpenBLAS picks its kernels for this CPU itself
# (an environment that pins an older core — this machine's had OPENBLAS_CORETYPE=Haswell
# on an AVX-512 Zen 5 — slows vidtrain's sgemm-based convolutions by about a quarter, and
# not PyTorch's oneDNN ones). The device line of vidtrain's output names the kernels.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${OPENBLAS_CORETYPE:-}" ]; then
  echo "bench-cpu-step: OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE in the environment: unset for both peers"
  unset OPENBLAS_CORETYPE
fi
BUILD=${BUILD:-build}
THREADS=${THREADS:-2}
STEPS=${STEPS:-5}
WARMUP=${WARMUP:-2}
PY=${VT_PYTHON:-/usr/bin/python3}
# X3D at its own frame counts (XS 4, S 13) on 112 crops: depthwise convs, SE and SiLU
CASES=${CASES:-"tiny:8x64x64:8 r3d18:8x56x56:4 x3d_xs:4x112x112:8 x3d_s:13x112x112:4 slow_r50:8x64x64:2 mvit_v2_s:8x64x64:2 videomae_vit_s:8x64x64:2"}

# Build (or bring up to date) the vidtrain in $BUILD: a stale binary would time old code.
[ -f "$BUILD/build.ninja" ] || cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" --target vidtrain >/dev/null

vt_step() { # model clip batch -> vidtrain bench step's output, incl. "clips/s: X"
  "$BUILD/vidtrain" bench step --model "$1" --clip "$2" --batch "$3" --devices cpu:1 \
    --threads "$THREADS" --steps "$STEPS" --warmup "$WARMUP" 2>&1
}

echo "== training step, CPU, $THREADS thread(s), $STEPS timed steps after $WARMUP warm-up ($(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg))"
for c in $CASES; do
  IFS=: read -r model clip batch <<<"$c"
  v=$(vt_step "$model" "$clip" "$batch")
  t=$(OMP_NUM_THREADS=$THREADS "$PY" -W ignore bench/bench_torch_step.py "$model" "$clip" "$batch" "$THREADS" "$STEPS" "$WARMUP")
  echo "$v" | grep -v '^clips/s:' | sed 's/^/  /'
  echo "$t" | grep -v '^clips/s:' | sed 's/^/  /'
  vc=$(echo "$v" | awk '/^clips\/s:/ {print $2}')
  tc=$(echo "$t" | awk '/^clips\/s:/ {print $2}')
  printf "%-6s clip %-9s batch %-3s vidtrain %8.2f clips/s   pytorch %8.2f clips/s   ratio %.2fx\n" \
    "$model" "$clip" "$batch" "$vc" "$tc" "$(awk -v a="$vc" -v b="$tc" 'BEGIN {print a / b}')"
done
