#!/usr/bin/env bash
# check-nvdec.sh: the GPU run of `--decode nvdec` (docs/decode.md), for a machine with an
# NVIDIA GPU. Needs the vidtrain binary and tests/test_decode_hw built on (or for) it,
# and the ffmpeg command to make the footage.
#
#   1. test_decode_hw: every test medium under nvdec against the CPU decode — H.264 must
#      come out byte-identical, MPEG-4 and MJPEG within a mean of 2 levels — and exactly
#      one fallback warning (FFV1 has no NVDEC decoder);
#   2. `vidtrain bench decode` on 1080p H.264 footage (13 Mbit/s, a keyframe every 60
#      frames, like a phone's), 16x128 clips at stride 1, --decode cpu vs nvdec, 1 and 4
#      workers: clips/s and CPU seconds per clip (the figure issue 25 asks about);
#   3. nvidia-smi's decoder utilisation and memory while 2 runs, for docs/decode.md.
#
# usage: scripts/check-nvdec.sh [BUILD_DIR] (default build-cuda; VT_TMP for scratch)
# It only measures and prints.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bdir=${1:-$root/build-cuda}
tmp=${VT_TMP:-${TMPDIR:-/tmp}/vidtrain-nvdec}
mkdir -p "$tmp"
vt=$bdir/vidtrain
[ -x "$vt" ] || { echo "no vidtrain in $bdir" >&2; exit 1; }

echo "== 1. test_decode_hw"
VT_BIN=$vt VT_SRC=$root VT_TMP=$tmp "$bdir/test_decode_hw"
echo "test_decode_hw exit $?"

echo "== 2. HD clips, cpu vs nvdec"
hd=$tmp/hd
mkdir -p "$hd"
for i in 1 2 3 4; do
  f=$hd/phone$i.mp4
  [ -s "$f" ] || ffmpeg -nostdin -hide_banner -loglevel error -y -f lavfi \
    -i "testsrc2=size=1920x1080:rate=30:duration=20,noise=alls=6:allf=t" \
    -c:v libx264 -preset veryfast -b:v 13M -maxrate 13M -bufsize 26M -g 60 -pix_fmt yuv420p "$f"
done
nvidia-smi --query-gpu=utilization.decoder,memory.used --format=csv -l 1 > "$tmp/smi.csv" 2>&1 &
smi=$!
for w in 1 4; do
  for d in cpu nvdec; do
    echo "-- --decode $d, $w worker(s)"
    "$vt" bench decode "$hd" --mode clips --clip 16 --stride 1 --short-side 128 \
      --clips-per-video 32 --workers "$w" --decode "$d" 2>&1 | grep -E "warning|clips:|RESULT"
  done
done
kill "$smi" 2>/dev/null
echo "== 3. nvidia-smi (decoder %, memory) during the runs"
sort -u "$tmp/smi.csv" | tail -n 8
