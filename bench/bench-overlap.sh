#!/usr/bin/env bash
# bench-overlap.sh: how much of the gradient reduction is exposed (towers waiting after
# their last backward) with one reduction after backward vs buckets reduced during it,
# on CPU towers with the host reducer (pipeline/parallel/towers/tower.h "Gradient buckets"). Prints
# `vidtrain bench step`'s figures for each; nothing is asserted.
#
#   bash bench/bench-overlap.sh            VT_BIN, BENCH_STEPS override
#
# r3d18 (33M parameters, 133 MB of gradients) on two CPU towers of one thread each, so
# the reduction is large next to a small step; tiny for contrast. On a 2-core machine
# the helper threads that reduce share the cores with the towers' compute: what overlap
# buys here is the host reducer's waiting and copying, not spare cores.
# VT_EXACT_SUMS=0: CPU towers sum exactly by default, in one reduction after backward,
# and so have no buckets (bench step now refuses --bucket-mb there; before, every run of
# this script measured that one reduction whatever --bucket-mb said).
set -uo pipefail
cd "$(dirname "$0")/.."
bin=${VT_BIN:-build/vidtrain}
[ -x "$bin" ] || { echo "✗ no vidtrain binary at $bin (set VT_BIN)"; exit 1; }
steps=${BENCH_STEPS:-4}
run() { # model clip batch bucket_mb
  echo "-- $1 $2 batch $3, --bucket-mb $4"
  VT_EXACT_SUMS=0 nice -n 10 "$bin" bench step --model "$1" --clip "$2" --batch "$3" --devices cpu:2 --threads 1 \
    --tower-split equal --steps "$steps" --warmup 1 --bucket-mb "$4" 2>&1 |
    grep -E '^(gradient reduction|step time|clips/s|  cpu.* slice )'
}
for m in "r3d18 4x32x32 4" "tiny 8x32x32 16"; do
  set -- $m
  run "$1" "$2" "$3" 0
  run "$1" "$2" "$3" 25
  run "$1" "$2" "$3" 4
done
