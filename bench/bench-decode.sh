#!/usr/bin/env bash
# bench-decode.sh: vidtrain's FFmpeg decode pipeline against its peers on the same work,
# with 1 and 2 threads. Prints figures and ratios (> 1 = vidtrain faster); asserts nothing.
#
# What "the same work" means here:
#   files    only the files vidtrain opens (`bench decode --list`), in the same order, for
#            every side; a file a peer cannot read still costs it the time it spent.
#   output   every frame (sequential) or the same wanted frames (clips) scaled by libswscale
#            SWS_BILINEAR to the same W x H (vidtrain's size, rounded to nearest, given to
#            the peer explicitly), packed RGB24. Rotated files: ffmpeg runs -noautorotate and
#            rotates the small RGB frame after scaling (transpose / hflip,vflip), as vidtrain
#            does, instead of rotating the full frame first. PyAV ignores rotation (lighter).
#   threads  N decoder threads on both sides, frame + slice threading: vidtrain
#            --threads N; ffmpeg -threads N placed before -i (the decoder's option) and
#            -filter_threads N (scale has no slice threading, so it changes nothing);
#            PyAV thread_count N, thread_type AUTO.
#   streams  video only: ffmpeg gets -an -sn -dn (vidtrain discards other streams), output
#            -f null with -fps_mode passthrough (no frame dropped or duplicated; the frame
#            counts are checked equal).
#   clips    the same clip starts per video: vidtrain writes them (--starts-out) with the
#            output sizes and PyAV reads them; each side opens a video once, indexes it by
#            demuxing and reads its K clips in the same (random) order, seeking each time.
#
# Sequential (decode + scale every frame), one process per file on both sides, files
# interleaved (vidtrain, ffmpeg, next file...) so that load on a shared machine hits both:
#   loop wall   vidtrain decode_seconds vs ffmpeg -benchmark rtime: the decode + scale loop
#               after the file is open (ffmpeg's rtime leaves out open + probe; vidtrain's
#               open also builds its index). THE GOAL FIGURE: >= 0.95x.
#   loop cpu    the same loop in CPU seconds of all threads (robust to other load).
#   process     wall clock of each whole process (startup, open, probe, index, decode).
# Clip sampling (open, index, K x seek/decode/pick/scale), goal >= 3x PyAV:
#   loop        one loop, N decoder threads per video, on both sides (same structure).
#   workers     N workers over different videos, 1 decoder thread each, on both sides
#               (vidtrain: threads, like the loader; PyAV: processes, like a DataLoader).
#   user's      vidtrain's loader setup (N workers) vs the PyAV loop with N decoder threads.
# Sets: a synthesized one (vidtrain synth, 320x240) and ../shared/data/robustness when
# present. VERBOSE=1 prints per-file sequential rows.
#   VT_BIN=path/to/vidtrain  BENCH_DIR=scratch  SHORT=128 CLIP=16 STRIDE=2 K=4 THREADS="1 2"
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${VT_BIN:-}
for b in "$root/build/vidtrain" "$root/build-decode/vidtrain"; do
    [ -z "$bin" ] && [ -x "$b" ] && bin=$b
done
[ -x "${bin:-}" ] || { echo "vidtrain not built (set VT_BIN)"; exit 2; }
work=${BENCH_DIR:-${TMPDIR:-/tmp}/vidtrain-bench-decode}
short=${SHORT:-128}; clip=${CLIP:-16}; stride=${STRIDE:-2}; k=${K:-4}
threads=${THREADS:-1 2}; verbose=${VERBOSE:-0}
py=/usr/bin/python3
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
field() { sed -n "s/^RESULT .* $1=\([0-9.]*\).*/\1/p" | tail -1; }

printf "vidtrain %s (%s), ffmpeg %s, PyAV %s; short side %d, clip %d stride %d, %d clips/video; load %s\n" \
    "$("$bin" --version | awk '{print $2}')" "$bin" "$(ffmpeg -version | awk 'NR==1{print $3}')" \
    "$($py -c 'import av; print(av.__version__)' 2>/dev/null || echo none)" \
    "$short" "$clip" "$stride" "$k" "$(cut -d' ' -f1-3 /proc/loadavg)"
for set in "${sets[@]}"; do
    list=$work/list.tsv
    "$bin" bench decode "$set" --list --short-side "$short" > "$list"
    echo
    echo "== $(basename "$set"): $(wc -l < "$list") files that vidtrain opens"
    for n in $threads; do
        # ---- sequential, file by file, interleaved ----
        vt_loop=0 vt_cpu=0 vt_proc=0 ff_loop=0 ff_cpu=0 ff_proc=0 vt_frames=0 ff_frames=0 mism=0
        [ "$verbose" = 1 ] && echo "  sequential threads $n, per file (vidtrain/ffmpeg):"
        while IFS=$'\t' read -r f w h rot nf; do
            t0=$(now)
            out=$("$bin" bench decode "$f" --mode sequential --threads "$n" --short-side "$short")
            t1=$(now)
            case $rot in
                90) post=",transpose=clock" ;;
                180) post=",hflip,vflip" ;;
                270) post=",transpose=cclock" ;;
                *) post="" ;;
            esac
            ffo=$(ffmpeg -nostdin -hide_banner -benchmark -threads "$n" -filter_threads "$n" \
                  -noautorotate -i "$f" -an -sn -dn \
                  -vf "scale=$w:$h:flags=bilinear,format=rgb24$post" -fps_mode passthrough \
                  -f null - 2>&1 | tr '\r' '\n' || true)
            t2=$(now)
            a_loop=$(field decode_seconds <<< "$out"); a_cpu=$(field decode_cpu_seconds <<< "$out")
            a_fr=$(field frames <<< "$out")
            b_loop=$(sed -n 's/^bench: .*rtime=\([0-9.]*\)s.*/\1/p' <<< "$ffo" | tail -1)
            b_cpu=$(sed -n 's/^bench: utime=\([0-9.]*\)s stime=\([0-9.]*\)s.*/\1 \2/p' <<< "$ffo" |
                    awk '{print $1 + $2}' | tail -1)
            b_fr=$(sed -n 's/^frame= *\([0-9]*\).*/\1/p' <<< "$ffo" | tail -1)
            read -r vt_loop vt_cpu vt_proc ff_loop ff_cpu ff_proc vt_frames ff_frames mism < <(
                awk -v s="$vt_loop $vt_cpu $vt_proc $ff_loop $ff_cpu $ff_proc $vt_frames $ff_frames $mism" \
                    -v a="${a_loop:-0} ${a_cpu:-0} $t0 $t1 ${a_fr:-0}" \
                    -v b="${b_loop:-0} ${b_cpu:-0} $t2 ${b_fr:-0}" 'BEGIN {
                    split(s, S, " "); split(a, A, " "); split(b, B, " ")
                    printf "%f %f %f %f %f %f %d %d %d\n", S[1] + A[1], S[2] + A[2],
                        S[3] + A[4] - A[3], S[4] + B[1], S[5] + B[2], S[6] + B[3] - A[4],
                        S[7] + A[5], S[8] + B[4], S[9] + (A[5] != B[4]) }')
            if [ "$verbose" = 1 ]; then
                awk -v f="$(basename "$f")" -v a="${a_loop:-0}" -v b="${b_loop:-0}" -v ac="${a_cpu:-0}" \
                    -v bc="${b_cpu:-0}" -v af="${a_fr:-0}" -v bf="${b_fr:-0}" 'BEGIN {
                    printf "    %-44s %4d/%4d frames  loop %.3f/%.3f s (%.2fx)  cpu %.3f/%.3f s (%.2fx)\n",
                        f, af, bf, a, b, (a > 0) ? b / a : 0, ac, bc, (ac > 0) ? bc / ac : 0 }'
            fi
        done < "$list"
        awk -v n="$n" -v a="$vt_loop" -v ac="$vt_cpu" -v ap="$vt_proc" -v b="$ff_loop" \
            -v bc="$ff_cpu" -v bp="$ff_proc" -v f="$vt_frames" -v g="$ff_frames" -v m="$mism" 'BEGIN {
            printf "  sequential threads %d: %d frames (ffmpeg %d; %d files differ)\n", n, f, g, m
            printf "    loop wall  vidtrain %.3f s (%.0f frames/s) | ffmpeg %.3f s (%.0f frames/s) | %.2fx (goal >= 0.95)\n",
                   a, f / a, b, g / b, b / a
            printf "    loop cpu   vidtrain %.3f s | ffmpeg %.3f s | %.2fx\n", ac, bc, bc / ac
            printf "    process    vidtrain %.3f s | ffmpeg %.3f s | %.2fx (startup + open included)\n",
                   ap, bp, bp / ap }'

        # ---- clip sampling ----
        starts=$work/starts.tsv
        clipopts=(--short-side "$short" --clip "$clip" --stride "$stride" --clips-per-video "$k")
        vt1=$("$bin" bench decode "$set" --mode clips --threads "$n" --workers 1 "${clipopts[@]}" \
              --starts-out "$starts")
        py1=$($py "$root/bench/bench_pyav.py" --starts "$starts" --threads "$n" --workers 1 \
              "${clipopts[@]}" 2>/dev/null || true)
        clips_row() { # label vt_out py_out
            awk -v l="$1" -v c="$(field clips <<< "$2")" -v a="$(field seconds <<< "$2")" \
                -v ac="$(field cpu_seconds <<< "$2")" -v pc="$(field clips <<< "$3")" \
                -v b="$(field seconds <<< "$3")" -v bc="$(field cpu_seconds <<< "$3")" 'BEGIN {
                r1 = c / a; r2 = (b > 0) ? pc / b : 0
                printf "    %-10s vidtrain %d clips %.3f s (%.1f clips/s, cpu %.0f ms/clip) | PyAV %d clips %.3f s (%.1f clips/s, cpu %.0f ms/clip) | %.2fx (goal >= 3), cpu %.2fx\n",
                       l, c, a, r1, 1000 * ac / c, pc, b, r2, (pc > 0) ? 1000 * bc / pc : 0,
                       (r2 > 0) ? r1 / r2 : 0, (pc > 0 && bc > 0) ? (bc / pc) / (ac / c) : 0 }'
        }
        echo "  clips      threads $n:"
        clips_row "loop" "$vt1" "$py1"
        if [ "$n" -gt 1 ]; then
            vtw=$("$bin" bench decode "$set" --mode clips --threads 1 --workers "$n" "${clipopts[@]}")
            pyw=$($py "$root/bench/bench_pyav.py" --starts "$starts" --threads 1 --workers "$n" \
                  "${clipopts[@]}" 2>/dev/null || true)
            clips_row "workers" "$vtw" "$pyw"
            clips_row "user's" "$vtw" "$py1"
        fi
    done
done
