#!/usr/bin/env bash
# bench-decode.sh: vidtrain's FFmpeg decode pipeline against its peers on the same files,
# with 1 and 2 decoder threads.
#   sequential decode + scale to RGB24 of every frame:
#       vidtrain bench decode --mode sequential   vs   ffmpeg -threads N -i F
#       -vf scale=...:flags=bilinear,format=rgb24 -f null -   (whole set timed, one process
#       per file, the way the ffmpeg command is used)                 goal >= 0.95x ffmpeg
#   random clip sampling (open, index, K x seek/decode/pick/scale):
#       vidtrain bench decode --mode clips   vs   scripts/bench_pyav.py (PyAV)   goal >= 3x
# Sets: a synthesized one (vidtrain synth, 320x240) and ../shared/data/robustness when
# present. Prints figures and ratios; asserts nothing.
#   VT_BIN=path/to/vidtrain  BENCH_DIR=scratch  SHORT=128 CLIP=16 STRIDE=2 K=4
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${VT_BIN:-}
for b in "$root/build/vidtrain" "$root/build-decode/vidtrain"; do
    [ -z "$bin" ] && [ -x "$b" ] && bin=$b
done
[ -x "${bin:-}" ] || { echo "vidtrain not built (set VT_BIN)"; exit 2; }
work=${BENCH_DIR:-${TMPDIR:-/tmp}/vidtrain-bench-decode}
short=${SHORT:-128}; clip=${CLIP:-16}; stride=${STRIDE:-2}; k=${K:-4}
mkdir -p "$work"

synth=$work/synth
if [ ! -d "$synth/train" ]; then
    "$bin" synth "$synth" --classes 4 --train 6 --val 0 --test 0 --frames 48 --size 320x240 \
        --seed 3 >/dev/null 2>&1
fi
sets=("$synth")
robust=$root/../shared/data/robustness
[ -d "$robust" ] && sets+=("$robust")

now() { date +%s.%N; }
files_of() { find "$1" -type f ! -name '*.tsv' ! -name '*.txt' ! -name '*.md' | sort; }
result() { sed -n 's/^RESULT .*seconds=\([0-9.]*\).*/\1/p' | tail -1; }
clips_of() { sed -n 's/^RESULT .*clips=\([0-9]*\).*/\1/p' | tail -1; }
frames_of() { sed -n 's/^RESULT .*frames=\([0-9]*\).*/\1/p' | tail -1; }

printf "vidtrain %s, ffmpeg %s, PyAV %s; short side %d, clip %d stride %d, %d clips/video\n" \
    "$("$bin" --version | awk '{print $2}')" "$(ffmpeg -version | awk 'NR==1{print $3}')" \
    "$(/usr/bin/python3 -c 'import av; print(av.__version__)' 2>/dev/null || echo none)" \
    "$short" "$clip" "$stride" "$k"
for set in "${sets[@]}"; do
    mapfile -t files < <(files_of "$set")
    echo
    echo "== $(basename "$set"): ${#files[@]} files"
    for n in 1 2; do
        out=$("$bin" bench decode "$set" --mode sequential --threads "$n" --short-side "$short")
        vt_s=$(result <<< "$out"); vt_f=$(frames_of <<< "$out")
        scale="scale='if(lte(iw,ih),$short,-2)':'if(lte(iw,ih),-2,$short)':flags=bilinear,format=rgb24"
        t0=$(now)
        for f in "${files[@]}"; do
            ffmpeg -nostdin -v quiet -threads "$n" -filter_threads "$n" -i "$f" -vf "$scale" \
                -f null - 2>/dev/null || true
        done
        ff_s=$(echo "$(now) - $t0" | bc -l)
        awk -v n="$n" -v f="$vt_f" -v a="$vt_s" -v b="$ff_s" 'BEGIN {
            printf "  sequential threads %d: vidtrain %d frames %.3f s (%.0f frames/s) | ffmpeg %.3f s (%.0f frames/s) | vidtrain/ffmpeg speed %.2fx (goal >= 0.95)\n",
                   n, f, a, f / a, b, f / b, b / a }'
        out=$("$bin" bench decode "$set" --mode clips --threads "$n" --short-side "$short" \
              --clip "$clip" --stride "$stride" --clips-per-video "$k")
        vt_s=$(result <<< "$out"); vt_c=$(clips_of <<< "$out")
        py=$(/usr/bin/python3 "$root/scripts/bench_pyav.py" "$set" --threads "$n" \
             --short-side "$short" --clip "$clip" --stride "$stride" --clips-per-video "$k" 2>/dev/null || true)
        py_s=$(result <<< "$py"); py_c=$(clips_of <<< "$py")
        awk -v n="$n" -v c="$vt_c" -v a="$vt_s" -v pc="${py_c:-0}" -v b="${py_s:-0}" 'BEGIN {
            r1 = c / a; r2 = (b > 0) ? pc / b : 0
            printf "  clips      threads %d: vidtrain %d clips %.3f s (%.1f clips/s) | PyAV %d clips %.3f s (%.1f clips/s) | vidtrain/PyAV %.2fx (goal >= 3)\n",
                   n, c, a, r1, pc, b, r2, (r2 > 0) ? r1 / r2 : 0 }'
    done
done
