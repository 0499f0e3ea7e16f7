#!/usr/bin/env bash
# bench-split.sh: what the splitter buys on uneven devices, measured on the CPU. Two CPU
# towers of one thread each; tower 1 carries the EMULATED 2x slowdown (a test/benchmark
# knob: it idles as long as it computed after every micro-batch), so the two towers are
# as uneven as a 2:1 pair of GPUs. Same model, clip and batch for every policy:
#   equal   12:12 -> the step waits for the slow tower
#   speed   measured during warm-up, planned once (about 16:8)
#   auto    starts from memory shares, re-plans while it measures
# Ideal gain of speed/auto over equal: 1.5x (step time B/r vs B/(1.5 r)); goal >= 1.4x.
# Prints clips/s per policy and the ratios. Speed is reported, never asserted.
#   bash bench/bench-split.sh                 (uses build/vidtrain, or $VT_BIN)
#   MODEL=tiny CLIP=8x32x32 BATCH=24 STEPS=6 WARMUP=4 bash bench/bench-split.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${VT_BIN:-build/vidtrain}
MODEL=${MODEL:-tiny}
CLIP=${CLIP:-8x32x32}
BATCH=${BATCH:-24}
STEPS=${STEPS:-6}
WARMUP=${WARMUP:-4}
if [ ! -x "$BIN" ]; then
    echo "bench-split: $BIN not found (build first: cmake -S . -B build -G Ninja && cmake --build build)" >&2
    exit 1
fi

echo "== bench-split: $MODEL $CLIP, batch $BATCH, 2 CPU towers x 1 thread, tower 1 emulated 2x slower"
echo "   ($(nproc) cores here; load average $(cut -d' ' -f1-3 /proc/loadavg))"
declare -A CPS
for policy in equal speed auto; do
    out=$("$BIN" bench step --model "$MODEL" --clip "$CLIP" --batch "$BATCH" --devices cpu:2 \
        --threads 1 --tower-split "$policy" --emulate-slowdown 1:2 --steps "$STEPS" --warmup "$WARMUP" 2>&1)
    cps=$(echo "$out" | awk '/^clips\/s:/ {print $2}')
    slices=$(echo "$out" | awk '/^  cpu[0-9]+ +slice/ {printf "%s%s", sep, $3; sep=":"}')
    if [ -z "$cps" ]; then
        echo "$out" >&2
        echo "bench-split: no clips/s from the $policy run" >&2
        exit 1
    fi
    CPS[$policy]=$cps
    printf "  %-6s split %-7s clips/s %8s\n" "$policy" "$slices" "$cps"
done
awk -v e="${CPS[equal]}" -v s="${CPS[speed]}" -v a="${CPS[auto]}" 'BEGIN {
    printf "  speed / equal: %.2fx   auto / equal: %.2fx   (ideal 1.50x, goal >= 1.40x)\n", s / e, a / e }'
