#!/usr/bin/env bash
# build-static.sh: builds a vidtrain that needs no FFmpeg (nor OpenBLAS, cJSON, libgomp,
# libstdc++) on the machine it runs on, plus the GPU tests, and copies them into carry/
# (git-ignored, <= 64 MiB) so they can travel to a GPU machine that has the NVIDIA
# libraries (driver, cuBLAS 13, cuDNN 9, NCCL 2) but no build tools for FFmpeg.
#
#   bash scripts/build-static.sh          (first run ~4 min: FFmpeg from Debian's source)
#
# Steps: static FFmpeg into .deps/ffmpeg (skipped when present), cmake -DVT_STATIC=ON
# -DVT_CUDA=ON into build-static/, build vidtrain and the *_gpu tests, copy them to
# carry/ (with carry/media, made once when missing), and check with ldd that only libc, libm, libpthread, libdl, librt, the dynamic
# loader, libgcc_s and the CUDA libraries remain. It must never install anything
# system-wide except nasm (ffmpeg-static.sh does that through apt when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
prefix=$root/.deps/ffmpeg
# SASS for the A100 (sm_80), RTX 30 (sm_86), RTX 40 / L40S (sm_89) and H100 (sm_90), and
# sm_90 PTX that the driver compiles for newer cards: the binary runs on any card a
# workstation holds from Ampere on. `vidtrain devices` prints the list it was built with.
archs=${VT_CUDA_ARCHS:-"80-real;86-real;89-real;90"}

if [ -f "$prefix/lib/pkgconfig/libavformat.pc" ]; then
  echo "✓ static FFmpeg already in $prefix"
else
  tool=${VT_FFMPEG_STATIC_SH:-$root/../shared/tools/ffmpeg-static.sh}
  [ -f "$tool" ] || { echo "✗ $tool not found (set VT_FFMPEG_STATIC_SH)"; exit 1; }
  # NVDEC (--decode nvdec) needs FFmpeg's CUDA hwaccels, which the shared tool leaves
  # out; with nv-codec-headers (Debian: libffmpeg-nvenc-dev, headers only: FFmpeg loads
  # libcuda and libnvcuvid at run time) a copy of the tool adds them to its configure line.
  if [ "${VT_STATIC_NVDEC:-1}" = 1 ] && { pkg-config --exists ffnvcodec ||
       apt-get install -y -q libffmpeg-nvenc-dev >/dev/null 2>&1; }; then
    nv=$(mktemp)
    sed 's|--enable-decoder=|--enable-ffnvcodec --enable-cuda --enable-nvdec --enable-hwaccel=h264_nvdec,hevc_nvdec,mpeg4_nvdec,vp9_nvdec,vp8_nvdec,mjpeg_nvdec,mpeg2_nvdec,mpeg1_nvdec --enable-decoder=|' \
      "$tool" >"$nv"
    echo "== static FFmpeg with NVDEC hwaccels -> $prefix"
    bash "$nv" "$prefix"; rm -f "$nv"
  else
    echo "== static FFmpeg -> $prefix (no NVDEC: nv-codec-headers missing)"
    bash "$tool" "$prefix"
  fi
fi

export PKG_CONFIG_PATH=$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
echo "== configure build-static/ (VT_STATIC=ON, VT_CUDA=ON, CUDA architectures $archs)"
cmake -S . -B build-static -G Ninja -DCMAKE_BUILD_TYPE=Release -DVT_WERROR=ON \
  -DVT_STATIC=ON -DVT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$archs" | grep -E '✓|✗|vidtrain ' || true
targets=(vidtrain)
for t in tests/test_*_gpu.c; do targets+=("$(basename "$t" .c)"); done
targets+=(test_decode_hw) # NVDEC against the CPU decode; gpu-check.sh runs it with carried media
echo "== build ${targets[*]}"
cmake --build build-static --target "${targets[@]}"

# carry/media (the media gpu-check.sh and bench-feed-gpu.sh read, made with ffmpeg here)
# stays; everything else is this script's and is made again.
mkdir -p carry && find carry -mindepth 1 -maxdepth 1 ! -name media -exec rm -rf {} +
for t in "${targets[@]}"; do cp "build-static/$t" carry/; done
strip "${targets[@]/#/carry/}"
# Debian ships cJSON only as a shared library: it travels beside the binaries (34 KB) and
# gpu-check.sh puts carry/ on LD_LIBRARY_PATH.
cjson=$(ldd carry/vidtrain | awk '/libcjson/ {print $3}')
[ -n "$cjson" ] && cp -L "$cjson" carry/
# libzip (PyTorch .pth files for --init): Debian ships no libzip.a, so the shared one
# travels with its own dependencies (bzip2, zlib, OpenSSL's libcrypto: about 5 MiB).
for lib in libzip libbz2 libz.so libcrypto; do
  f=$(ldd carry/vidtrain | awk -v l="$lib" 'index($1, l) == 1 {print $3}')
  [ -n "$f" ] && cp -L "$f" carry/
done

# carry/media, made here once when missing (the GPU machine may have no ffmpeg command):
# tests/make_media.sh's small files for test_decode_hw, and bench-feed-gpu.sh's HD set
# (5 s files, about 25 MiB) for gpu-check.sh's NVDEC section 3c and bench-feed-gpu.sh.
# Without them the first GPU run skips both. VT_CARRY_MEDIA=0 leaves carry/media as it is.
if [ "${VT_CARRY_MEDIA:-1}" = 1 ]; then
  if command -v ffmpeg >/dev/null; then
    [ -f carry/media/loader_media/h264.mp4 ] || bash tests/make_media.sh carry/media/loader_media
    [ -d carry/media/feed/prep ] ||
      VT_FEED_SECONDS=5 VIDTRAIN=build-static/vidtrain bash bench/bench-feed-gpu.sh --make
  else
    echo "✗ no ffmpeg command: carry/media not made (gpu-check.sh will skip NVDEC)"
  fi
fi

echo "== shared libraries the binaries still need (their own NEEDED entries; the NVIDIA"
echo "   libraries bring libstdc++ and libgcc_s with them, which every GPU machine has)"
allowed='^(linux-vdso|/lib64/ld-linux|ld-linux|libc\.|libm\.|libpthread|libdl|librt|libgcc_s|libcudart|libcublas|libcublasLt|libcudnn|libnccl|libcjson|libzip|libbz2|libz\.|libcrypto)'
bad=0
for f in "${targets[@]/#/carry/}"; do
  libs=$(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  extra=$(echo "$libs" | grep -Ev "$allowed" || true)
  echo "  $(basename "$f"): $(echo $libs | tr '\n' ' ')"
  if [ -n "$extra" ]; then
    echo "  ✗ $(basename "$f") also needs: $extra"
    bad=1
  fi
done
size=$(du -sb carry | cut -f1)
echo "carry/: $(du -sh carry | cut -f1) in $(ls carry | wc -l) files"
if [ "$size" -gt $((60 * 1024 * 1024)) ]; then
  # Every binary holds its own static OpenBLAS and FFmpeg; they compress ~15x. The
  # travelling tree is limited to 64 MiB, so they travel packed; gpu-check.sh unpacks.
  # (carry/media stays as it is: it is read in place)
  (cd carry && find . -mindepth 1 -maxdepth 1 ! -name media ! -name vidtrain-gpu.tar.xz -printf '%P\n' |
    tar -cJf vidtrain-gpu.tar.xz --remove-files -T -)
  echo "carry/: packed into carry/vidtrain-gpu.tar.xz ($(du -sh carry/vidtrain-gpu.tar.xz | cut -f1))"
  size=$(du -sb carry | cut -f1)
fi
# What travels is the working tree (tracked files and untracked ones git does not ignore)
# and carry/ together: 64 MiB in all.
tree=$( { git ls-files -z; git ls-files -z --others --exclude-standard; } | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
echo "travels: carry/ $((size / 1048576)) MiB + working tree $((${tree:-0} / 1048576)) MiB"
[ $((size + ${tree:-0})) -le $((64 * 1024 * 1024)) ] ||
  { echo "✗ carry/ and the working tree are over 64 MiB (VT_CARRY_MEDIA=0, or rm -rf carry/media/feed/hevc)"; bad=1; }
[ $bad = 0 ] && echo "✓ carry/ is ready: on the GPU machine run  bash scripts/gpu-check.sh"
exit $bad
