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
# OpenBLAS, cJSON, Open MPI (training across processes/machines under mpirun; test_mpi),
# CMake/Ninja. Tests: PyTorch/torchvision (layer and zoo goldens), PyAV (decode
# benchmark peer), Chromium (report rendering test), clang with libFuzzer and its OpenMP
# (libomp-dev) for the fuzz targets (scripts/fuzz.sh, the smoke run in scripts/test.sh).
pkgs=(build-essential cmake ninja-build pkg-config git clang libomp-dev
      ffmpeg libavformat-dev libavcodec-dev libswscale-dev libavutil-dev
      libopenblas-dev libcjson-dev libopenmpi-dev openmpi-bin
      python3 python3-numpy python3-torch python3-torchvision python3-av
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

echo "== building (build/)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release ${VT_CMAKE_ARGS:-} | grep -E '✓|✗|vidtrain ' || true
cmake --build build

[ "$demo" = 1 ] || exit 0
exec bash scripts/demo.sh
