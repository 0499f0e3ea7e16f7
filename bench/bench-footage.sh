#!/usr/bin/env bash
# bench-footage.sh: what `vidtrain prep` buys on HD footage, in one run. Generates an HD
# set with the ffmpeg command — 1080p and 720p H.264 at 30 and 60 fps (plus HEVC when
# libx265 is there), a variable-frame-rate file and a rotated one, at phone bitrates
# (about 13 Mbit/s at 1080p30, 20 at 1080p60, 8 at 720p), from a moving picture that is
# not noise (a test pattern averaged with a zooming Mandelbrot set, light grain) — then
# prints side by side, for that set and for the hard synthetic preset (`vidtrain synth
# --preset motion`), before and after prep:
#   - the loader's clips/s per core (`vidtrain bench decode --mode clips --clip 16
#     --short-side 128`, stride 1 and 2, one worker with one decoder thread: clips per
#     CPU second),
#   - prep's speed (seconds of source video per CPU second),
#   - the cores needed to feed 1,400 clips/s.
# The goal it checks against (issue 25): after prep, clips/s per core >= 10x the
# source's and >= 117.
#
# It only measures and prints (docs/prep.md has a run's figures).
#
# usage: bench/bench-footage.sh [WORKDIR]
#   VIDTRAIN=path/to/vidtrain (default build/vidtrain); SECONDS_EACH=10 seconds per HD
#   file (10-60 is realistic: SECONDS_EACH=60 for the full size); PER_VIDEO=32 clips read
#   per video; JOBS=2 prep jobs. Generated files are kept in WORKDIR and reused.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
vt=${VIDTRAIN:-$root/build/vidtrain}
work=${1:-${TMPDIR:-/tmp}/vidtrain-bench-footage}
secs=${SECONDS_EACH:-10}
per=${PER_VIDEO:-32}
jobs=${JOBS:-2}
[ -x "$vt" ] || { echo "no vidtrain at $vt (set VIDTRAIN=)" >&2; exit 1; }
command -v ffmpeg >/dev/null || { echo "needs the ffmpeg command" >&2; exit 1; }
hd=$work/hd-$secs
mkdir -p "$hd/footage"

# One HD file: size, fps, video bitrate, encoder args..., name.
gen() {
    local size=$1 fps=$2 rate=$3 name=$4; shift 4
    local f=$hd/footage/$name
    [ -s "$f" ] && return 0
    local w=${size%x*} h=${size#*x}
    echo "generating $name ($size, $fps fps, $rate, $secs s)" >&2
    # superfast keeps CABAC and High profile (what phone encoders write) at a fraction
    # of the time; a keyframe every 2 s as phones do.
    ffmpeg -v error -y -f lavfi -i "mandelbrot=s=$((w / 4))x$((h / 4)):r=$fps,scale=${w}x${h}:flags=bicubic[m];testsrc2=s=${w}x${h}:r=$fps[t];[t][m]blend=all_mode=average,noise=alls=6:allf=t" \
        -t "$secs" "$@" -b:v "$rate" -maxrate "$rate" -bufsize "$rate" -g $((2 * fps)) \
        -pix_fmt yuv420p "$f.tmp.${f##*.}"
    mv "$f.tmp.${f##*.}" "$f"
}
x264=(-c:v libx264 -preset superfast)
gen 1920x1080 30 13M hd1080p30.mp4 "${x264[@]}"
gen 1920x1080 60 20M hd1080p60.mp4 "${x264[@]}"
gen 1280x720 30 8M hd720p30.mp4 "${x264[@]}"
gen 1280x720 60 10M hd720p60.mp4 "${x264[@]}"
if ffmpeg -hide_banner -encoders 2>/dev/null | grep -q libx265; then
    gen 1920x1080 30 10M hevc1080p30.mp4 -c:v libx265 -preset ultrafast -x265-params log-level=error -tag:v hvc1
fi
# VFR: a 1080p30 stream with every other frame dropped in its second half (15-30 fps),
# stream-copied from the 30 fps file's encoding settings.
if [ ! -s "$hd/footage/vfr1080p.mkv" ]; then
    echo "generating vfr1080p.mkv" >&2
    ffmpeg -v error -y -i "$hd/footage/hd1080p30.mp4" -vf "select='lt(t\,$((secs / 2)))+not(mod(n\,2))'" \
        -fps_mode vfr "${x264[@]}" -b:v 13M -maxrate 13M -bufsize 13M -g 60 "$hd/footage/vfr.tmp.mkv" 2>/dev/null ||
    ffmpeg -v error -y -i "$hd/footage/hd1080p30.mp4" -vf "select='lt(t\,$((secs / 2)))+not(mod(n\,2))'" \
        -vsync vfr "${x264[@]}" -b:v 13M -maxrate 13M -bufsize 13M -g 60 "$hd/footage/vfr.tmp.mkv"
    mv "$hd/footage/vfr.tmp.mkv" "$hd/footage/vfr1080p.mkv"
fi
# Rotated: a phone held upright — the 720p30 file's stream with a 90-degree display
# matrix (-display_rotation on FFmpeg >= 6; 5.1 maps the rotate tag of a stream copy).
if [ ! -s "$hd/footage/rot720p.mp4" ]; then
    if ffmpeg -hide_banner -h full 2>/dev/null | grep -q -- '-display_rotation'; then
        ffmpeg -v error -y -display_rotation:v:0 -90 -i "$hd/footage/hd720p30.mp4" -c copy "$hd/footage/rot.tmp.mp4"
    else
        ffmpeg -v error -y -i "$hd/footage/hd720p30.mp4" -c copy -metadata:s:v:0 rotate=270 "$hd/footage/rot.tmp.mp4"
    fi
    mv "$hd/footage/rot.tmp.mp4" "$hd/footage/rot720p.mp4"
fi
# The hard synthetic preset, small: 4 classes x 3 videos.
if [ ! -d "$work/motion/train" ]; then
    echo "generating the motion preset" >&2
    "$vt" synth "$work/motion" --preset motion --classes 4 --train 3 --test 0 --seed 1 >/dev/null 2>&1
fi

# Loader: clips per CPU second of one worker, one decoder thread.
loader() { # folder stride
    "$vt" bench decode "$1" --mode clips --clip 16 --stride "$2" --short-side 128 \
        --clips-per-video "$per" --workers 1 --threads 1 |
        awk '/^RESULT/ { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
                         printf "%.1f", v["clips"] / v["cpu_seconds"] }'
}
# Prep: seconds of source per CPU second. Sets prep_rate.
prep() { # src dst
    rm -rf "$2"
    local cpu
    cpu=$( { TIMEFORMAT='%U %S'; time "$vt" prep "$1" "$2" --jobs "$jobs" >"$2.log" 2>&1; } 2>&1 |
           awk '{print $1 + $2}')
    local src_s
    src_s=$(awk -F, 'NR > 1 && $7 == "ok" { s += $3 } END { print s + 0 }' "$2/prep-manifest.csv")
    prep_rate=$(awk -v s="$src_s" -v c="$cpu" 'BEGIN { printf "%.2f", (c > 0 ? s / c : 0) }')
}
cores() { awk -v r="$1" 'BEGIN { printf "%.1f", (r > 0 ? 1400 / r : 0) }'; }
size() { du -sm "$1" | cut -f1; }

prep "$hd" "$work/hd-prep"; hd_prep=$prep_rate
prep "$work/motion" "$work/motion-prep"; motion_prep=$prep_rate
hs1=$(loader "$hd" 1); hs2=$(loader "$hd" 2)
hp1=$(loader "$work/hd-prep" 1); hp2=$(loader "$work/hd-prep" 2)
ms1=$(loader "$work/motion" 1); ms2=$(loader "$work/motion" 2)
mp1=$(loader "$work/motion-prep" 1); mp2=$(loader "$work/motion-prep" 2)

echo
echo "HD set: $(ls "$hd/footage" | tr '\n' ' ')($secs s each)"
printf '%-22s %12s %12s %14s %16s %8s\n' "set" "clips/s/core" "stride 2" "prep s/s/core" "cores for 1400/s" "MiB"
printf '%-22s %12s %12s %14s %16s %8s\n' "HD source" "$hs1" "$hs2" "-" "$(cores "$hs1")" "$(size "$hd")"
printf '%-22s %12s %12s %14s %16s %8s\n' "HD after prep" "$hp1" "$hp2" "$hd_prep" "$(cores "$hp1")" "$(size "$work/hd-prep")"
printf '%-22s %12s %12s %14s %16s %8s\n' "motion source" "$ms1" "$ms2" "-" "$(cores "$ms1")" "$(size "$work/motion")"
printf '%-22s %12s %12s %14s %16s %8s\n' "motion after prep" "$mp1" "$mp2" "$motion_prep" "$(cores "$mp1")" "$(size "$work/motion-prep")"
echo
awk -v s="$hs1" -v p="$hp1" 'BEGIN {
    printf "HD after prep / before: %.1fx (goal >= 10x), %.1f clips/s per core (goal >= 117): %s\n",
           p / s, p, (p >= 10 * s && p >= 117) ? "met" : "NOT met" }'
echo "clips/s/core: vidtrain bench decode --clip 16 --short-side 128, 1 worker, 1 decoder thread,"
echo "$per clips per video, clips / CPU seconds. prep s/s/core: seconds of source video per CPU"
echo "second of vidtrain prep ($jobs jobs; the HD source decode is most of it)."
