#!/usr/bin/env bash
# setup.sh: README command 1. Installs every Debian package vidtrain needs, builds it,
# and runs the main job: synthesize the demo dataset, train `tiny` on it (on the CPU
# where there is no GPU) and evaluate on held-out clips.
#   bash scripts/setup.sh            install + build + demo
#   bash scripts/setup.sh --no-demo  install + build only (what CI uses)
set -euo pipefail
cd "$(dirname "$0")/.."

demo=1
[ "${1:-}" = "--no-demo" ] && demo=0

# Runtime + build: FFmpeg libraries and the ffmpeg command (tests compare against it),
# OpenBLAS, cJSON, libzip (PyTorch .pth checkpoints), libunistring (class names in
# Unicode NFC), Open MPI (training across processes/machines under mpirun; test_mpi),
# libavdevice (cameras for predict --timeline), CMake/Ninja. Tests: PyTorch/torchvision
# (layer and zoo goldens), PyAV (decode benchmark peer), Chromium (report rendering
# test), clang with libFuzzer and its OpenMP (libomp-dev) for the fuzz targets
# (scripts/fuzz.sh, the smoke run in scripts/test.sh), python3-onnx (the ONNX checker
# for exported models; ONNX Runtime comes from npm, below).
pkgs=(build-essential cmake ninja-build pkg-config git clang libomp-dev
      ffmpeg libavformat-dev libavcodec-dev libswscale-dev libavutil-dev libavdevice-dev
      libopenblas-dev libcjson-dev libzip-dev libunistring-dev libcurl4-openssl-dev libopenmpi-dev
      openmpi-bin
      python3 python3-numpy python3-torch python3-torchvision python3-av python3-onnx
      chromium)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# ONNX export tests (tests/test_onnx.c): python3-onnx above checks the models, ONNX
# Runtime runs them — npm's onnxruntime-node in tools/onnxrt/ (git-ignored), used by
# tests/oracle/onnx_run.js. --ignore-scripts: its install script only fetches GPU providers;
# the CPU runtime ships inside the package. Node and npm from Debian unless a node with
# its own npm (nodesource's, which conflicts with Debian's npm) is there already.
if ! command -v npm >/dev/null; then
  echo "== installing: nodejs npm"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends nodejs npm
fi
if [ ! -f tools/onnxrt/node_modules/onnxruntime-node/package.json ]; then
  echo "== installing onnxruntime-node (tools/onnxrt/)"
  mkdir -p tools/onnxrt
  [ -f tools/onnxrt/package.json ] || echo '{"name": "vidtrain-onnxrt", "private": true}' > tools/onnxrt/package.json
  (cd tools/onnxrt && npm install --ignore-scripts --no-audit --no-fund --loglevel=error onnxruntime-node@1.30.0)
fi

echo "== building (build/)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release ${VT_CMAKE_ARGS:-} | grep -E '✓|✗|vidtrain ' || true
cmake --build build

[ "$demo" = 1 ] || exit 0
exec bash scripts/demo.sh
