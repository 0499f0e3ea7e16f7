#!/usr/bin/env bash
# bench-length.sh: the default training length (app/train/train_length.c: warm-up, constant lr
# while validation improves, cosine decay once it has not for --patience validations)
# against the fixed rule it replaced (`--patience 0`: enough to see 8000 clips, at least
# 30 epochs, cosine over them), on sets of several sizes and on held-out families.
# Each set, both sides, same binary, one after the other:
#   fixed    vidtrain train DIR --out RUN --no-flip --patience 0 --seed S $ARGS
#   default  vidtrain train DIR --out RUN --no-flip --seed S $ARGS
# evaluated with best.safetensors as `vidtrain eval` picks it, 10 centre clips per test
# video. Prints one line per run (set, side, epochs, steps, wall s, test video top-1, final
# training accuracy) and asserts nothing. Wall times are only as steady as the machine.
#   SETS="m128 m64 m256 h128 d8" (default: all; see synth_set below)
#   SEED=1  BENCH_DIR=scratch  VT_BIN=path/to/vidtrain
#   ARGS="--clip 4x32 --stride 6" (appended to both sides: a smaller clip for a busy CPU)
#   SIDES="fixed default" (one side only: run the sides of a set as parallel jobs)
#   REUSE=1: a run whose RUN.time says it finished is evaluated again, not retrained (to
#   pick up runs a killed job left going)
#   RESUME=1: as REUSE, and a run stopped part way (`kill -TERM` the vidtrain process: it
#   checkpoints and exits 143) continues with `vidtrain train --resume RUN` (the run it
#   would have been: test_resume, test_length); its wall time adds the parts (RUN.parts)
# The sets: tuned on = m128 (motion preset, seed 11, 16/0/6 videos per class: 113
# training + 15 validation videos, the size of the issue's set); other sizes m64 (8 per
# class) and m256 (32 per class, seed 12); held out, never looked at while tuning: h128
# (motion, seed 31) and d8 (the demo preset's 8 object motions, 12/0/6 per class, seed 41).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${VT_BIN:-$root/build/vidtrain}
work=${BENCH_DIR:-$root/build/bench-length}
sets=${SETS:-m128 m64 m256 h128 d8}
seed=${SEED:-1}
sides=${SIDES:-fixed default}
py=/usr/bin/python3
[ -x "$bin" ] || { echo "bench-length: $bin not built" >&2; exit 1; }
mkdir -p "$work"

synth_set() {
    case $1 in
    m128) echo "--preset motion --seed 11" ;;
    m64) echo "--preset motion --seed 11 --train 8" ;;
    m256) echo "--preset motion --seed 12 --train 32" ;;
    h128) echo "--preset motion --seed 31" ;;
    d8) echo "--preset demo --classes 8 --train 12 --val 0 --test 6 --seed 41" ;;
    *) echo "bench-length: unknown set $1" >&2; exit 2 ;;
    esac
}

# A run finished when /usr/bin/time wrote its seconds alone: a crash or an error adds a line.
finished() {
    [ -f "$1" ] && [ "$(wc -l < "$1")" -eq 1 ] && grep -qxE '[0-9]+(\.[0-9]+)?' "$1"
}

for s in $sets; do
    data="$work/$s"
    if [ ! -f "$data/.done" ]; then
        # another job making the same set: wait for it rather than unmake it
        while [ -f "$data.making" ]; do sleep 10; done
    fi
    if [ ! -f "$data/.done" ]; then
        touch "$data.making"
        rm -rf "$data"
        # shellcheck disable=SC2046
        "$bin" synth "$data" $(synth_set "$s") > "$work/$s.synth.log" 2>&1 ||
            { rm -f "$data.making"; echo "bench-length: synth $s failed: $work/$s.synth.log" >&2; exit 1; }
        touch "$data/.done"
        rm -f "$data.making"
    fi
    for side in $sides; do
        run="$work/$s.$side"
        extra=()
        [ "$side" = fixed ] && extra=(--patience 0)
        if [ -n "${REUSE:-}${RESUME:-}" ] && finished "$run.time"; then
            : # finished before: evaluated again
        elif [ -n "${RESUME:-}" ] && [ -f "$run/last.safetensors" ] && [ -s "$run.time" ]; then
            tail -n 1 "$run.time" >> "$run.parts" # the seconds the stopped part ran
            /usr/bin/time -f "%e" -o "$run.time" "$bin" train --resume "$run" -q >> "$run.log" 2>&1
        else
            rm -rf "$run" "$run.time" "$run.parts"
            # shellcheck disable=SC2086
            /usr/bin/time -f "%e" -o "$run.time" "$bin" train "$data" --out "$run" --no-flip \
                --seed "$seed" -q "${extra[@]}" ${ARGS:-} > "$run.log" 2>&1
        fi
        "$bin" eval "$run" "$data" --split test --clips-per-video 10 -q > "$run.eval" 2>&1
        : >> "$run.parts"
        wall=$(awk '{ t += $1 } END { print t }' "$run.time" "$run.parts")
        "$py" - "$run" "$s" "$side" "$wall" <<'PY'
import json, sys
run, s, side, wall = sys.argv[1:]
top1 = json.load(open(run + "/eval.json"))["video_top1"]
ep = [json.loads(l) for l in open(run + "/metrics.jsonl") if '"kind":"epoch"' in l]
print(f"{s}\t{side}\tepochs {ep[-1]['epoch']}\tsteps {ep[-1]['step']}\twall {float(wall):.0f} s"
      f"\ttest top-1 {100 * top1:.1f}%\ttrain acc {100 * ep[-1]['train_acc']:.1f}%", flush=True)
PY
    done
done
