#!/usr/bin/env bash
# bench-feed-gpu.sh: can vidtrain's loader keep a GPU busy when the data is HD footage,
# and after `prep`? (issue 25) Two steps on two machines:
#
#   bash bench/bench-feed-gpu.sh --make   here (needs the ffmpeg command with libx264,
#                                           build/vidtrain): writes carry/media/feed/
#   bash bench/bench-feed-gpu.sh          on the GPU machine, with the binaries that
#                                           scripts/build-static.sh put in carry/
#
# carry/media/feed holds (about 30 MiB):
#   src/{a,b}/*.mp4   two 8 s 1080p30 H.264 files, 13 Mbit/s, a keyframe every 2 s
#                     (VT_FEED_SECONDS=S: S s each; scripts/build-static.sh makes 5)
#                     (bench-footage.sh's phone-like picture; b is a mirrored a)
#   prep/             the same after `vidtrain prep` with its defaults (S = 128, H.264)
#   hevc/a/*.mp4      one 4 s 1080p30 HEVC file at 10 Mbit/s (when ffmpeg has libx265)
#   declined/*.mp4    a 4 s 640x360 H.264 High 4:4:4 file, which NVDEC is expected to
#                     decline before Blackwell (gpu-check.sh 3c: the fallback's windows)
# On the GPU machine each set is seen through 16 links per file (32 videos), so that
# every core has a video of its own: a worker takes whole videos, clip positions come
# from (seed, file index), and the page cache holds the bytes once.
#
# It prints, side by side:
#   1. the loader alone (`bench decode`, 16-frame clips at stride 1, short side 128, one
#      decoder thread per worker, every core): clips/s from the source on the CPU and on
#      NVDEC, and from the prep copy, against the 1,400 clips/s issue 10 wants for an H100;
#   2. the GPU's own speed (`bench step`, r3d18 16x112 batch 32, synthetic clips, fp32
#      and bf16), then training r3d18 on cuda:0 from each set (--frame-cache 0: the
#      loader decodes every clip, as on a set that does not fit in RAM): clips/s over
#      the steps after the third, the share of each step spent waiting for data, and
#      the GPU's mean utilisation (nvidia-smi, every 200 ms);
#   3. HEVC on NVDEC: bench decode cpu vs nvdec, and prep --decode cpu vs nvdec (the
#      copies must be the same bytes: HEVC fixes every output sample).
# It only measures and prints; docs/prep.md has a run's figures. Logs: VT_FEED_LOGS
# (default /tmp/vidtrain-feed/logs), packed into VT_FEED_LOGS_TAR when set;
# VT_FEED_DECODE=0 / VT_FEED_HEVC=0 skip sections 1 / 3.
set -uo pipefail
cd "$(dirname "$0")/.."
media=carry/media/feed

if [ "${1:-}" = --make ]; then
  set -e
  vt=${VIDTRAIN:-build/vidtrain}
  [ -x "$vt" ] || { echo "no vidtrain at $vt (set VIDTRAIN=)" >&2; exit 1; }
  command -v ffmpeg >/dev/null || { echo "needs the ffmpeg command" >&2; exit 1; }
  rm -rf "$media"; mkdir -p "$media/src/a" "$media/src/b"
  pic="mandelbrot=s=480x270:r=30,scale=1920x1080:flags=bicubic[m];testsrc2=s=1920x1080:r=30[t];[t][m]blend=all_mode=average,noise=alls=6:allf=t"
  x264=(-c:v libx264 -preset superfast -b:v 13M -maxrate 13M -bufsize 13M -g 60 -pix_fmt yuv420p)
  secs=${VT_FEED_SECONDS:-8} # scripts/build-static.sh makes 5 s ones: the carry's size
  ffmpeg -v error -y -f lavfi -i "$pic" -t "$secs" "${x264[@]}" "$media/src/a/hd1080p30.mp4"
  ffmpeg -v error -y -f lavfi -i "$pic,hflip" -t "$secs" "${x264[@]}" "$media/src/b/hd1080p30.mp4"
  # (grep -q would stop reading early, and pipefail would call ffmpeg's SIGPIPE a failure)
  if ffmpeg -hide_banner -encoders 2>/dev/null | grep libx265 >/dev/null; then
    mkdir -p "$media/hevc/a"
    ffmpeg -v error -y -f lavfi -i "$pic" -t 4 -c:v libx265 -preset ultrafast \
      -x265-params log-level=error -b:v 10M -g 60 -pix_fmt yuv420p -tag:v hvc1 "$media/hevc/a/hevc1080p30.mp4"
  fi
  mkdir -p "$media/declined"
  ffmpeg -v error -y -f lavfi -i "$pic,scale=640x360" -t 4 -c:v libx264 -preset superfast \
    -b:v 2M -g 60 -pix_fmt yuv444p "$media/declined/h264_444.mp4"
  "$vt" prep "$media/src" "$media/prep" --jobs 2 >/dev/null
  du -sh "$media"
  exit 0
fi

. scripts/gpu-libs.sh
bindir=${VT_BINDIR:-carry}
vt=$bindir/vidtrain
vt_gpu_unpack "$bindir"
[ -x "$vt" ] || { echo "✗ no $vt (scripts/build-static.sh makes it)"; exit 1; }
[ -d "$media/src" ] && [ -d "$media/prep" ] || { echo "✗ no $media (run --make where ffmpeg is)"; exit 1; }
py=${PYTHON:-python3}
vt_gpu_libs "$bindir" "$py" >/dev/null || { echo "✗ libraries not found: $VT_GPU_LIBS_MISSING"; exit 1; }
work=${VT_FEED_TMP:-/tmp/vidtrain-feed}
logs=${VT_FEED_LOGS:-$work/logs}
rm -rf "$work/sets"; mkdir -p "$work/sets" "$logs"
cores=$(nproc)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | tee "$logs/gpu.txt"
echo "$cores cores"

# 16 links per file, class folders kept (src32/a/v00.mp4 -> src/a/hd1080p30.mp4)
for set in src prep hevc; do
  [ -d "$media/$set" ] || continue
  for f in "$media/$set"/*/*.mp4; do
    [ -e "$f" ] || continue # an empty folder: the pattern itself
    cls=$(basename "$(dirname "$f")"); mkdir -p "$work/sets/$set/$cls"
    for i in $(seq -w 0 15); do ln -s "$PWD/$f" "$work/sets/$set/$cls/v$i.mp4"; done
  done
done

# bench decode's "clips/s" figure and its CPU seconds a clip
decode() { # NAME SET WORKERS PER_VIDEO DECODE
  timeout 120 "$vt" bench decode "$work/sets/$2" --mode clips --clip 16 --stride 1 \
    --short-side 128 --threads 1 --workers "$3" --clips-per-video "$4" --decode "$5" \
    >"$logs/decode-$1.log" 2>&1
  local rc=$?
  printf '  %-34s %s\n' "$1 ($3 workers, --decode $5)" \
    "$(grep -E 'clips/s|warning' "$logs/decode-$1.log" | tr '\n' ' ') [exit $rc]"
}
if [ "${VT_FEED_DECODE:-1}" = 1 ]; then
echo "== 1. the loader alone: 16x128 clips, stride 1, $cores workers"
{
  decode src-cpu src "$cores" 8 cpu
  decode src-nvdec src "$cores" 8 nvdec
  decode prep-1 prep 1 32 cpu
  decode prep-all prep "$cores" 512 cpu
} | tee "$logs/decode.txt"
fi

# steady clips/s (steps after the third), mean data wait, mean GPU utilisation
steady() { # RUN SMI LOG
  [ -s "$1/metrics.jsonl" ] || { echo "no metrics: $(tail -2 "$3" | tr '\n' ' ')"; return; }
  "$py" - "$1/metrics.jsonl" "$2" <<'PY'
import json, sys
steps = [j for j in map(json.loads, open(sys.argv[1])) if j.get("kind") == "step"][3:]
util = [float(l.split(",")[0]) for l in open(sys.argv[2]) if l.strip() and l.split(",")[0].strip().isdigit()]
if not steps:
    print("no steps"); sys.exit(0)
# each step's seconds per clip (its batch is the same for every step, so it cancels)
per = [(1 / s["clips_per_s"], s["data_wait"]) for s in steps if s["clips_per_s"] > 0]
secs = sum(t for t, _ in per)
wait = sum(t * w for t, w in per)
print(f"{len(per) / secs:7.1f} clips/s over {len(per)} steps, data wait {100 * wait / secs:4.1f}%,"
      f" GPU utilisation {sum(util) / max(len(util), 1):5.1f}% (mean of {len(util)} samples)")
PY
}
train() { # NAME SET DECODE PRECISION
  local run=$work/run-$1 smi
  rm -rf "$run"
  nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 200 >"$logs/smi-$1.csv" 2>&1 &
  smi=$!
  timeout 150 "$vt" train "$work/sets/$2" --out "$run" --model r3d18 --devices cuda:0 \
    --batch 32 --epochs 1 --clips-per-video 20 --val-split 0 --frame-cache 0 --log-every 1 \
    --workers "$((cores - 1))" --decode "$3" --precision "$4" --seed 1 >"$logs/train-$1.log" 2>&1
  local rc=$?
  kill "$smi" 2>/dev/null; wait "$smi" 2>/dev/null
  printf '  %-34s %s [exit %d]\n' "$1 (--decode $3, $4)" "$(steady "$run" "$logs/smi-$1.csv" "$logs/train-$1.log" 2>&1)" "$rc"
}
echo "== 2. r3d18 16x112, batch 32, on cuda:0: the GPU alone, then trained from each set ($((cores - 1)) workers)"
{
  for p in fp32 bf16; do
    timeout 120 "$vt" bench step --model r3d18 --clip 16x112x112 --batch 32 --classes 2 \
      --devices cuda:0 --precision "$p" --steps 10 >"$logs/step-$p.log" 2>&1
    printf '  %-34s %s\n' "bench step ($p)" "$(grep -m1 '^clips/s' "$logs/step-$p.log" || tail -1 "$logs/step-$p.log")"
  done
  train prep-fp32 prep cpu fp32
  train prep-bf16 prep cpu bf16
  train src-cpu-fp32 src cpu fp32
  train src-nvdec-fp32 src nvdec fp32
} | tee "$logs/train.txt"

if [ -d "$work/sets/hevc" ] && [ "${VT_FEED_HEVC:-1}" = 1 ]; then
  echo "== 3. HEVC 1080p30 on NVDEC"
  {
    decode hevc-cpu hevc 1 2 cpu
    decode hevc-nvdec hevc 1 2 nvdec
    for d in cpu nvdec; do
      rm -rf "$work/hevc-prep-$d"
      timeout 120 "$vt" prep "$media/hevc" "$work/hevc-prep-$d" --jobs 1 --decode "$d" \
        >"$logs/hevc-prep-$d.log" 2>&1
      echo "  prep --decode $d: exit $? $(grep -ciE 'warning|nvdec' "$logs/hevc-prep-$d.log") warning/nvdec lines"
    done
    a=$(find "$work/hevc-prep-cpu" -name '*.mp4' | head -1)
    b=${a/hevc-prep-cpu/hevc-prep-nvdec}
    if [ -n "$a" ] && cmp -s "$a" "$b"; then echo "  ✓ the two copies are the same bytes"
    else echo "  ✗ the copies differ or are missing ($a, $b)"; fi
  } | tee "$logs/hevc.txt"
fi
[ -n "${VT_FEED_LOGS_TAR:-}" ] && tar -czf "$VT_FEED_LOGS_TAR" -C "$logs" .
exit 0
