#!/usr/bin/env bash
# bench-prep-codecs.sh: which codec and keyframe interval should `vidtrain prep` write?
# Makes a few HD source clips (1080p H.264, 30 fps, ~13 Mbit/s, a keyframe every 60
# frames: what phones and cameras give), preps them at short side 128 with each
# candidate — H.264 (libx264) at GOP 8, 16, 32 and all-intra, MPEG-4 part 2 at GOP 16,
# MJPEG (all-intra), and H.264 GOP 8 at other qualities (CRFS, default "23 12"; the rest
# use prep's default CRF 18) — and prints, per candidate, vidtrain's own loader speed on the
# result (`vidtrain bench decode --mode clips --clip 16 --stride 1 --short-side 128`, one
# worker, one decoder thread: clips per CPU second = clips/s per core), the size per
# minute of video and prep's own speed. The source row is the same loader on the HD files.
#
# It only measures and prints; the default lives in pipeline/data/prep.h (docs/prep.md
# has the table this printed).
#
# usage: bench/bench-prep-codecs.sh [WORKDIR]
#   VIDTRAIN=path/to/vidtrain (default build/vidtrain), CLIPS=3 source clips,
#   SECONDS_EACH=5, PER_VIDEO=64 clips read per video, JOBS=2, CRFS="23 12"
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
vt=${VIDTRAIN:-$root/build/vidtrain}
work=${1:-${TMPDIR:-/tmp}/vidtrain-bench-prep-codecs}
clips=${CLIPS:-3}
secs=${SECONDS_EACH:-5}
per=${PER_VIDEO:-64}
jobs=${JOBS:-2}
[ -x "$vt" ] || { echo "no vidtrain at $vt (set VIDTRAIN=)" >&2; exit 1; }
command -v ffmpeg >/dev/null || { echo "needs the ffmpeg command" >&2; exit 1; }
mkdir -p "$work/src/clips"

# HD sources: a moving test pattern averaged with a slowly zooming Mandelbrot set (made
# small and scaled up, which is fast), plus light temporal grain like a phone sensor's.
for i in $(seq 1 "$clips"); do
    f=$work/src/clips/hd$i.mp4
    [ -s "$f" ] && continue
    ffmpeg -v error -y -f lavfi -i "mandelbrot=s=480x270:r=30:start_scale=$((2 + i)),scale=1920x1080:flags=bicubic[m];testsrc2=s=1920x1080:r=30[t];[t][m]blend=all_mode=average,noise=alls=6:allf=t" \
        -t "$secs" -c:v libx264 -preset veryfast -b:v 13M -maxrate 16M -bufsize 26M -g 60 \
        -pix_fmt yuv420p "$f.tmp.mp4"
    mv "$f.tmp.mp4" "$f"
done

# clips/s per core of the loader on a folder: clips / CPU seconds of one worker.
loader() {
    "$vt" bench decode "$1" --mode clips --clip 16 --stride 1 --short-side 128 \
        --clips-per-video "$per" --workers 1 --threads 1 |
        awk '/^RESULT/ { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
                         printf "%.1f", v["clips"] / v["cpu_seconds"] }'
}
bytes_per_min() { # folder, seconds of video in it
    local b; b=$(find "$1" -type f \( -name '*.mp4' -o -name '*.mkv' -o -name '*.avi' \) -printf '%s\n' | awk '{s += $1} END {print s}')
    awk -v b="$b" -v s="$2" 'BEGIN { printf "%.2f", b / s * 60 / 1048576 }'
}
total=$((clips * secs))

printf '%-22s %10s %12s %14s\n' "codec" "clips/s/core" "MiB/min" "prep s/s/core"
printf '%-22s %10s %12s %14s\n' "source 1080p h264 g60" "$(loader "$work/src")" "$(bytes_per_min "$work/src" $total)" "-"
run() { # name, prep options...
    local name=$1; shift
    local out=$work/out-$name cpu
    rm -rf "$out"
    # bash's time keyword: user + system seconds of prep and its threads.
    cpu=$( { TIMEFORMAT='%U %S'; time "$vt" prep "$work/src" "$out" --jobs "$jobs" "$@" \
             >/dev/null 2>"$work/prep-$name.log"; } 2>&1 | awk '{print $1 + $2}')
    printf '%-22s %10s %12s %14s\n' "$name" "$(loader "$out")" "$(bytes_per_min "$out" $total)" \
        "$(awk -v s=$total -v c="$cpu" 'BEGIN { printf "%.2f", (c > 0 ? s / c : 0) }')"
}
for g in 8 16 32 1; do
    n=h264-g$g; [ "$g" = 1 ] && n=h264-intra
    run "$n" --codec h264 --gop "$g"
done
for q in ${CRFS-23 12}; do
    run "h264-g8-crf$q" --codec h264 --gop 8 --crf "$q"
done
run mpeg4-g16 --codec mpeg4 --gop 16
run mjpeg-intra --codec mjpeg
echo "clips/s/core: vidtrain bench decode --clip 16 --stride 1 --short-side 128, 1 worker, 1 thread,"
echo "$per clips per video, clips / CPU seconds. MiB/min: output size per minute of video."
echo "prep s/s/core: seconds of source video per CPU second of vidtrain prep ($jobs jobs)."
