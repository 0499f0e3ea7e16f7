#!/usr/bin/env bash
# make-heldout.sh: a held-out family of small motion datasets made by the ffmpeg command,
# not by vidtrain's own generator (`vidtrain synth`'s presets), for judging defaults on
# data they were never tuned on (issue 40). 8 classes of camera motion over a still
# texture: pan_left, pan_right, pan_up, pan_down, zoom_in, zoom_out, rotate_cw,
# rotate_ccw. Each video draws its texture (lavfi's mandelbrot at a random point,
# gradients, life, testsrc, testsrc2 or cellauto, one frame 5-64 frames in, each with its own seed), its speed, its start
# and its noise from the seed, so no two videos share a frame; the class is only the
# motion. 40 frames at 20 fps, 80x80, H.264 (crf 23) in MP4.
#   bash bench/make-heldout.sh DIR [SEED] [TRAIN] [TEST]
# makes DIR/train/CLASS/NNN.mp4 (TRAIN a class, default 16) and DIR/test/CLASS/NNN.mp4
# (TEST a class, default 6) and no val/ folder, as a user's small set often is; SEED
# (default 1) draws everything, so a seed is one set, the same on every machine with
# this ffmpeg (5.1 here). Every draw happens in this shell (bash reseeds RANDOM from the
# clock in a subshell: a draw inside $(...) made each run another set) and every lavfi
# parameter that defaults to a random value is given one.
set -euo pipefail
dir=${1:?usage: make-heldout.sh DIR [SEED] [TRAIN] [TEST]}
seed=${2:-1}
ntrain=${3:-16}
ntest=${4:-6}
command -v ffmpeg >/dev/null || { echo "make-heldout: the ffmpeg command is needed" >&2; exit 1; }
[ -e "$dir" ] && { echo "make-heldout: $dir exists: give a new folder" >&2; exit 1; }
classes="pan_left pan_right pan_up pan_down zoom_in zoom_out rotate_cw rotate_ccw"
RANDOM=$seed

# tex=: a still texture, 256x256, from one of six lavfi sources with its own parameters
texture() {
    local s=$((RANDOM % 100000)) col
    case $((RANDOM % 6)) in
    0) tex="mandelbrot=s=256x256:start_x=-0.$((600 + RANDOM % 300)):start_y=0.$((RANDOM % 300)):start_scale=0.$((1 + RANDOM % 8))" ;;
    1)
        # its colours drawn here too: lavfi's default "random" colour ignores seed=
        local nc=$((2 + RANDOM % 6)) j
        tex="gradients=s=256x256:seed=$s:n=$nc"
        for ((j = 0; j < nc; j++)); do
            printf -v col %06x $((RANDOM * RANDOM % 16777216))
            tex+=":c$j=0x$col"
        done
        ;;
    2)
        printf -v col %06x $((RANDOM * RANDOM % 16777216))
        tex="life=s=256x256:seed=$s:ratio=0.$((2 + RANDOM % 5)):mold=$((RANDOM % 20)):life_color=#$col"
        ;;
    3) tex="testsrc=s=256x256:decimals=$((RANDOM % 3))" ;;
    4) tex="testsrc2=s=256x256" ;;
    5) tex="cellauto=s=256x256:seed=$s:rule=$((RANDOM % 2 ? 30 : 110)):full=1" ;;
    esac
}

# mot=: the camera's motion for class $1, a filter from the looped still to 96x96
motion() {
    local v=$((15 + RANDOM % 16)) x0=$((70 + RANDOM % 20)) y0=$((70 + RANDOM % 20))
    local z=$((8 + RANDOM % 8)) a=$((4 + RANDOM % 5))
    case $1 in
    pan_left) mot="crop=96:96:x='$x0+$v*t':y=$y0" ;;
    pan_right) mot="crop=96:96:x='$x0-$v*t':y=$y0" ;;
    pan_up) mot="crop=96:96:x=$x0:y='$y0+$v*t'" ;;
    pan_down) mot="crop=96:96:x=$x0:y='$y0-$v*t'" ;;
    zoom_in) mot="zoompan=z='1+0.00$z*on':d=1:x='iw/2-(iw/zoom/2)':y='ih/2-(ih/zoom/2)':s=96x96:fps=20" ;;
    zoom_out) mot="zoompan=z='1.$((40 + z))-0.00$z*on':d=1:x='iw/2-(iw/zoom/2)':y='ih/2-(ih/zoom/2)':s=96x96:fps=20" ;;
    rotate_cw) mot="rotate=a='0.$a*t':ow=96:oh=96" ;;
    rotate_ccw) mot="rotate=a='-0.$a*t':ow=96:oh=96" ;;
    esac
}

tmp="$dir.making"
rm -rf "$tmp"
n=0
total=$((8 * (ntrain + ntest)))
for split in train test; do
    count=$ntrain
    [ $split = test ] && count=$ntest
    for c in $classes; do
        mkdir -p "$tmp/$split/$c"
        for i in $(seq -f %03g 1 "$count"); do
            # the texture reads as if panned: "pan_left" moves the view right, the
            # content left; the noise keeps frames of one still from repeating bit for bit
            k=$((5 + RANDOM % 60))
            texture
            motion "$c"
            f="$tex,trim=start_frame=$k:end_frame=$((k + 1)),loop=loop=-1:size=1,"
            f+="setpts=N/20/TB,noise=alls=$((2 + RANDOM % 5)):allf=t,$mot,scale=80:80,format=yuv420p"
            ffmpeg -hide_banner -loglevel error -nostdin -f lavfi -i "$f" -frames:v 40 -r 20 \
                -c:v libx264 -crf 23 -preset veryfast "$tmp/$split/$c/$i.mp4"
            n=$((n + 1))
            printf '\rmake-heldout: %d/%d videos' "$n" "$total" >&2
        done
    done
done
printf '\n' >&2
mv "$tmp" "$dir"
echo "make-heldout: $dir: 8 classes, $ntrain training and $ntest test videos a class (seed $seed)"
