#!/usr/bin/env bash
# make_media.sh DIR [hostile]: the small test media that the decode and loader tests share, made
# with the ffmpeg command (the outside truth the tests compare against). Everything is
# 160x120 and at most 48 frames so the whole set takes a few seconds.
#
#   DIR/h264.mp4      H.264 (libx264, -g 12 with B-frames: clips start mid-GOP)
#   DIR/mpeg4.avi     MPEG-4 part 2 in AVI
#   DIR/mpeg2.mpg     MPEG-2 with B-frames in MPEG-PS (anchors without a pts)
#   DIR/h264.mpg      H.264 in MPEG-PS: two packets in three have no timestamp at all
#   DIR/mpeg4bf.avi   MPEG-4 part 2 with B-frames in AVI; DIR/h264.avi H.264 with B-frames in AVI
#   DIR/hevc.ts       HEVC (libx265, open GOPs) in MPEG-TS, only when that encoder exists
#   DIR/h264.m2ts, DIR/wmv2.wmv, DIR/raw.h264: AVCHD, Windows Media, a raw camera stream
#   DIR/cut.mkv       a stream copy cut mid-GOP: one packet without any timestamp
#   DIR/dups.ts       B-frames in MPEG-TS with pairs of frames sharing a timestamp
#   DIR/joined.ts     two transport streams joined with cat: the times start again at frame 24
#   DIR/overlap.mp4   a concat stream copy whose second segment repeats times of the first
#   DIR/negts.mkv     a stream copy cut with -ss into Matroska, -avoid_negative_ts disabled:
#                     its first GOP (the lead-in before the cut point) has no timestamps
#   DIR/opengop.mp4   x264 --open-gop, 30 frames: after a seek to keyframe 24 the decoder
#                     drops frames 28 and 29 (they also refer to the GOP before); opengop.ts
#                     the same in MPEG-TS (whose seek lands a keyframe late)
#   DIR/midgop.ts, DIR/midgop_m2.ts: H.264 and MPEG-2 transport streams cut mid-GOP (a
#                     capture begun mid-broadcast), 63 frames
#   DIR/mjpeg.mkv     MJPEG (full-range yuvj420p) in Matroska
#   DIR/vp9.webm      VP9 (libvpx-vp9), only when that encoder exists
#   DIR/ffv1.mkv      FFV1 (lossless) in Matroska
#   DIR/vfr.mp4       H.264 with frame durations alternating 30/60 ms (VFR)
#   DIR/rot90.mp4     display matrix: rotate 90 degrees clockwise to show upright
#   DIR/rot270.mp4    ... 270 degrees
#   DIR/hostile/*     files that must be refused with a clear reason or read gracefully;
#                     hostile/concealed.mp4: an H.264 P-frame whose slice data is damaged,
#                     which FFmpeg's error concealment repairs and hands out
#
# Files are only (re)made when missing, so several tests can call this on one DIR.
# With a second argument "hostile" only DIR/hostile is made.
# Needs: ffmpeg with libx264 (or falls back to mpeg4 in .mp4), head, dd, perl, openssl
# (or /dev/urandom).
set -euo pipefail
dir=${1:?usage: make_media.sh DIR [hostile]}
only=${2:-all}
FFMPEG=${FFMPEG:-ffmpeg}
mkdir -p "$dir/hostile"
ff() { "$FFMPEG" -nostdin -hide_banner -loglevel error -y "$@"; }
encoders=$("$FFMPEG" -hide_banner -encoders 2>/dev/null || true)
have_enc() { grep -q " $1 " <<< "$encoders"; }

src=(-f lavfi -i "testsrc2=size=160x120:rate=25:duration=1.92")   # 48 frames
if have_enc libx264; then
    h264=(-c:v libx264 -preset veryfast -pix_fmt yuv420p -g 12 -bf 2 -threads 1)
else
    h264=(-c:v mpeg4 -q:v 4 -g 12)
fi

# mk OUT ffmpeg-args...: write through a per-process temporary name and rename, so that
# two tests making the same DIR at once never see a half-written file.
mk() {
    local out=$1; shift
    [ -s "$out" ] && return 0
    local tmp="$out.$$.tmp.${out##*.}"
    ff "$@" "$tmp"
    mv -f "$tmp" "$out"
}

if [ "$only" != hostile ]; then
mk "$dir/h264.mp4" "${src[@]}" "${h264[@]}"
mk "$dir/mpeg4.avi" "${src[@]}" -c:v mpeg4 -q:v 4 -g 12
# MPEG-2 in MPEG-PS with B-frames: the muxer leaves some I/P packets without a pts (only a
# dts, which is not their presentation time), as DVD and broadcast rips have.
mk "$dir/mpeg2.mpg" "${src[@]}" -c:v mpeg2video -q:v 4 -g 12 -bf 2
# H.264 in MPEG-PS (some DVRs and camcorders): the muxer times only some PES packets, and
# the frames of the others have neither pts nor dts.
if have_enc libx264; then
    mk "$dir/h264.mpg" "${src[@]}" "${h264[@]}" -f mpeg
fi
# AVI with B-frames (DivX/XviD-era datasets): AVI has no pts; libavformat times the
# B-frames and leaves the reference frames untimed (MPEG-4), or times nothing (H.264).
mk "$dir/mpeg4bf.avi" "${src[@]}" -c:v mpeg4 -q:v 4 -g 12 -bf 2
mk "$dir/h264.avi" "${src[@]}" "${h264[@]}"
# A camcorder's AVCHD stream (.m2ts: MPEG-TS with 4-byte timecodes), Windows Media, and an
# IP camera's raw H.264 (no container, no timestamps: frames are counted).
mk "$dir/h264.m2ts" "${src[@]}" "${h264[@]}" -f mpegts -mpegts_m2ts_mode 1
mk "$dir/wmv2.wmv" "${src[@]}" -c:v wmv2 -g 12
if have_enc libx264; then
    mk "$dir/raw.h264" "${src[@]}" "${h264[@]}" -f h264
fi
# A stream copy cut mid-GOP into Matroska (ffmpeg -ss 2.3 -c copy of an open-GOP H.264):
# the cut leaves a packet with no timestamp, a leading picture the decoder drops.
if have_enc libx264 && [ ! -s "$dir/cut.mkv" ]; then
    ff -f lavfi -i "testsrc2=size=160x120:rate=25:duration=4" -c:v libx264 -pix_fmt yuv420p \
        -threads 1 -x264-params open-gop=1:keyint=50 "$dir/cut.$$.src.mkv"
    mk "$dir/cut.mkv" -ss 2.3 -i "$dir/cut.$$.src.mkv" -c copy
    rm -f "$dir/cut.$$.src.mkv"
fi
# The same cut, -avoid_negative_ts disabled: Matroska holds no time below 0, so the lead-in
# from the keyframe before the cut point (frames the decoder hands out, and the ffmpeg
# command numbers first) has no timestamps at all, and the demuxer's seek cannot reach it.
if have_enc libx264 && [ ! -s "$dir/negts.mkv" ]; then
    ff -f lavfi -i "testsrc2=size=160x120:rate=25:duration=3" "${h264[@]}" "$dir/negts.$$.src.mp4"
    mk "$dir/negts.mkv" -ss 1.1 -i "$dir/negts.$$.src.mp4" -c copy -avoid_negative_ts disabled
    rm -f "$dir/negts.$$.src.mp4"
fi
# Shared timestamps with B-frames in MPEG-TS: VFR times (40 ms steps + 0/15/30 ms) rounded by
# the encoder's 1/25 time base, so pairs of frames share a pts (a reference frame and the
# keyframe after it among them), and the demuxer seeks by dts.
mk "$dir/dups.ts" "${src[@]}" -vf "settb=1/1000,setpts=(N*40+15*mod(N\,3))/(1000*TB)" \
    -fps_mode passthrough "${h264[@]}"
# Times that go back: two transport streams joined with `cat` (HLS downloads, split
# recordings: each part starts its clock again), 24 frames each, different pictures; and
# segments joined by `ffmpeg -f concat -c copy` with an inpoint off a keyframe (the second
# segment's lead-in from its keyframe repeats times of the first). Frames are counted.
if [ ! -s "$dir/joined.ts" ]; then
    ff -f lavfi -i "testsrc2=size=160x120:rate=25:duration=0.96" "${h264[@]}" -f mpegts \
        "$dir/joined.$$.a.ts"
    ff -f lavfi -i "testsrc=size=160x120:rate=25:duration=0.96" "${h264[@]}" -f mpegts \
        "$dir/joined.$$.b.ts"
    cat "$dir/joined.$$.a.ts" "$dir/joined.$$.b.ts" > "$dir/joined.$$.tmp.ts"
    rm -f "$dir/joined.$$.a.ts" "$dir/joined.$$.b.ts"
    mv -f "$dir/joined.$$.tmp.ts" "$dir/joined.ts"
fi
if [ ! -s "$dir/overlap.mp4" ]; then
    ff "${src[@]}" "${h264[@]}" "$dir/overlap.$$.src.mp4"
    printf "file '%s'\noutpoint 1.2\nfile '%s'\ninpoint 0.7\n" "overlap.$$.src.mp4" \
        "overlap.$$.src.mp4" > "$dir/overlap.$$.txt"
    mk "$dir/overlap.mp4" -f concat -safe 0 -i "$dir/overlap.$$.txt" -c copy
    rm -f "$dir/overlap.$$.src.mp4" "$dir/overlap.$$.txt"
fi
# A transport stream captured mid-broadcast: cut 40 TS packets in, its first video packets
# belong to a GOP whose keyframe and parameter sets lie before the cut, and the decoder hands
# out nothing before the next keyframe (nor, in MPEG-2, the B-pictures that lean on the
# lost GOP). 3 s, so that 63 frames are left.
cut_ts() {
    local out=$1; shift
    [ -s "$out" ] && return 0
    ff -f lavfi -i "testsrc2=size=160x120:rate=25:duration=3" "$@" -f mpegts "$out.$$.src.ts"
    dd if="$out.$$.src.ts" of="$out.$$.tmp.ts" bs=188 skip=40 2>/dev/null
    rm -f "$out.$$.src.ts"
    mv -f "$out.$$.tmp.ts" "$out"
}
if have_enc libx264; then
    cut_ts "$dir/midgop.ts" "${h264[@]}"
fi
cut_ts "$dir/midgop_m2.ts" -c:v mpeg2video -q:v 4 -g 12 -bf 2
# x264's open GOPs with several references: the pictures after the last keyframe also refer
# to pictures before it, which a decoder started there lacks (it drops frames 28 and 29).
if have_enc libx264; then
    mk "$dir/opengop.mp4" -f lavfi -i "testsrc2=size=160x120:rate=25:duration=1.2" \
        -c:v libx264 -pix_fmt yuv420p -threads 1 \
        -x264-params open-gop=1:keyint=24:min-keyint=24:bframes=3:scenecut=0
    mk "$dir/opengop.ts" -i "$dir/opengop.mp4" -c copy
fi
# HEVC in MPEG-TS (x265's open GOPs): the demuxer seeks by dts, landing mid-GOP.
if have_enc libx265; then
    mk "$dir/hevc.ts" "${src[@]}" -c:v libx265 -g 12 -bf 2 -pix_fmt yuv420p -x265-params log-level=error
fi
mk "$dir/mjpeg.mkv" "${src[@]}" -c:v mjpeg -q:v 3 -pix_fmt yuvj420p
mk "$dir/ffv1.mkv" "${src[@]}" -c:v ffv1 -pix_fmt yuv420p
if have_enc libvpx-vp9; then
    mk "$dir/vp9.webm" "${src[@]}" -c:v libvpx-vp9 -b:v 0 -crf 32 -g 12 -deadline realtime -cpu-used 8 -threads 1
fi
# VFR: 1 ms timebase, durations 30, 60, 30, 60 ... ms.
mk "$dir/vfr.mp4" "${src[@]}" -vf "settb=1/1000,setpts=(N*45-15*mod(N\,2))/(1000*TB)" \
    -fps_mode passthrough -enc_time_base:v 1/1000 -video_track_timescale 1000 "${h264[@]}"
# Rotation: a display matrix written on a stream copy. The names say what vidtrain's
# vt_video_info.rotation reports: degrees CLOCKWISE to show the video upright, i.e.
# minus ffprobe's counter-clockwise "rotation" (rot90.mp4 probes as rotation=-90).
# FFmpeg >= 6 has -display_rotation (counter-clockwise); 5.1 maps the 'rotate' tag of a
# stream copy to the same matrix (tag 270 -> rotation -90).
if "$FFMPEG" -hide_banner -h full 2>/dev/null | grep -q -- '-display_rotation'; then
    rot_args() { echo "-display_rotation:v:0 $((-$1))"; }
    rot_out() { echo ""; }
else
    rot_args() { echo ""; }
    rot_out() { echo "-metadata:s:v:0 rotate=$(( (360 - $1) % 360 ))"; }
fi
for r in 90 270; do
    if [ ! -s "$dir/rot$r.mp4" ]; then
        mk "$dir/rot$r.src.mp4" "${src[@]}" -frames:v 24 "${h264[@]}"
        # shellcheck disable=SC2046
        ff $(rot_args $r) -i "$dir/rot$r.src.mp4" -c copy $(rot_out $r) "$dir/rot$r.$$.tmp.mp4"
        mv -f "$dir/rot$r.$$.tmp.mp4" "$dir/rot$r.mp4"
        rm -f "$dir/rot$r.src.mp4"
    fi
done
fi

h=$dir/hostile
[ -e "$h/empty.mp4" ] || : > "$h/empty.mp4"
if [ ! -s "$h/truncated.mp4" ]; then
    # A non-faststart MP4 keeps moov at the end: cut in the middle, moov is gone.
    ff "${src[@]}" "${h264[@]}" "$h/full.$$.tmp.mp4"
    size=$(stat -c %s "$h/full.$$.tmp.mp4")
    head -c $((size / 2)) "$h/full.$$.tmp.mp4" > "$h/truncated.$$.tmp"
    mv -f "$h/truncated.$$.tmp" "$h/truncated.mp4"
    rm -f "$h/full.$$.tmp.mp4"
fi
if [ ! -s "$h/random.mp4" ]; then
    # Deterministic "random" bytes: AES-CTR of zeros with a fixed key.
    head -c 20000 /dev/zero | openssl enc -aes-128-ctr -K 000102030405060708090a0b0c0d0e0f \
        -iv 0 -nosalt 2>/dev/null > "$h/random.mp4" || head -c 20000 /dev/urandom > "$h/random.mp4"
fi
[ -s "$h/text.avi" ] || printf 'This is not a video.\nJust some text in a file named .avi\n' > "$h/text.avi"
# An ffconcat script under a video's name, naming a real video beside it: FFmpeg's concat
# demuxer would read that other file's frames as this one's.
[ -s "$h/concat.mp4" ] || printf 'ffconcat version 1.0\nfile short5.mp4\n' > "$h/concat.mp4"
# A URL as a file name's content is not followed either: an HLS playlist named .mp4.
[ -s "$h/playlist.mp4" ] || printf '#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\nshort5.mp4\n#EXT-X-ENDLIST\n' > "$h/playlist.mp4"
mk "$h/audio_only.m4a" -f lavfi -i "sine=frequency=440:duration=1" -c:a aac
mk "$h/one_frame.mp4" "${src[@]}" -frames:v 1 "${h264[@]}"
mk "$h/short5.mp4" "${src[@]}" -frames:v 5 "${h264[@]}"
if [ ! -s "$h/huge.y4m" ]; then
    # A header claiming 40000x40000 followed by a few bytes of "frame".
    { printf 'YUV4MPEG2 W40000 H40000 F25:1 Ip A1:1 C420jpeg\nFRAME\n'; head -c 4096 /dev/zero; } > "$h/huge.y4m"
fi
if [ ! -s "$h/huge_dims.avi" ]; then
    # A real AVI whose BITMAPINFOHEADER is patched to 40000x40000: the demuxer accepts it,
    # so vidtrain's own size limit has to refuse it before anything is allocated.
    ff -f lavfi -i "testsrc2=size=160x120:rate=25:duration=0.08" -c:v mpeg4 "$h/huge_dims.$$.tmp.avi"
    perl -0777 -pe 's/(strf.{4}\x28\x00\x00\x00)\xA0\x00\x00\x00\x78\x00\x00\x00/$1\x40\x9C\x00\x00\x40\x9C\x00\x00/s' \
        "$h/huge_dims.$$.tmp.avi" > "$h/huge_dims.$$.tmp2.avi"
    mv -f "$h/huge_dims.$$.tmp2.avi" "$h/huge_dims.avi"
    rm -f "$h/huge_dims.$$.tmp.avi"
fi
if [ ! -s "$h/corrupt_mid.avi" ]; then
    ff "${src[@]}" -c:v mpeg4 -q:v 4 -g 12 "$h/corrupt_mid.$$.tmp.avi"
    size=$(stat -c %s "$h/corrupt_mid.$$.tmp.avi")
    # Overwrite 3 KB in the middle with 0xff: the index survives, the frames do not.
    head -c 3000 /dev/zero | tr '\0' '\377' | dd of="$h/corrupt_mid.$$.tmp.avi" bs=1 seek=$((size / 2)) conv=notrunc status=none
    mv "$h/corrupt_mid.$$.tmp.avi" "$h/corrupt_mid.avi"
fi
if [ ! -s "$h/corrupt_mid.mp4" ]; then
    ff "${src[@]}" "${h264[@]}" -movflags +faststart "$h/corrupt_mid.$$.tmp.mp4"
    size=$(stat -c %s "$h/corrupt_mid.$$.tmp.mp4")
    head -c 2000 /dev/zero | tr '\0' '\252' | dd of="$h/corrupt_mid.$$.tmp.mp4" bs=1 seek=$((size / 2)) conv=notrunc status=none
    mv "$h/corrupt_mid.$$.tmp.mp4" "$h/corrupt_mid.mp4"
fi
if [ ! -s "$h/concealed.mp4" ]; then
    # Damaged bytes inside one P-frame's slice data (not its header, not the container):
    # the packet decodes, the macroblocks after the damage are guessed by FFmpeg's error
    # concealment, and the frame comes out ("error while decoding MB", "concealing ...
    # errors in P frame"). The P-frame: the packet after the second keyframe in decode
    # order (the P the GOP's B-frames refer to); its second half zeroed (random bytes
    # often decode as other valid-looking data, which no decoder can notice; zeros end
    # the slice's data early, which the decoder always does).
    ff "${src[@]}" "${h264[@]}" -movflags +faststart "$h/concealed.$$.tmp.mp4"
    span=$("${FFPROBE:-ffprobe}" -v error -select_streams v:0 -show_entries packet=pos,size,flags \
        -of compact=p=0 "$h/concealed.$$.tmp.mp4" | tr '|' ' ' |
        awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] } }
             f["flags"] ~ /K/ { k++; next }
             k == 2 && f["size"] > 200 { h = int(f["size"] / 2); print f["pos"] + h, f["size"] - h; exit }')
    [ -n "$span" ] || { echo "make_media.sh: no P-frame to damage in concealed.mp4" >&2; exit 1; }
    read -r at n <<< "$span"
    head -c "$n" /dev/zero | dd of="$h/concealed.$$.tmp.mp4" bs=1 seek="$at" conv=notrunc status=none
    mv "$h/concealed.$$.tmp.mp4" "$h/concealed.mp4"
fi
exit 0
