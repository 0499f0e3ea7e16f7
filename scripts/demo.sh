#!/usr/bin/env bash
# demo.sh: the main job (README's main command, run by scripts/setup.sh after building).
# Synthesizes the demo dataset (real encoded videos; 4 classes that differ only by the
# direction of motion: one frame cannot tell them apart), trains the `tiny` 3D-CNN on it
# (on the CPU when there is no GPU), evaluates on the held-out test clips and prints the
# video top-1 accuracy and the wall time. Target: >= 90% video top-1 in under 10 minutes
# on a 2-core machine. Exits 1 if the accuracy target is missed.
#
# Flags and why: none but these, the rest is vidtrain's defaults (on the CPU: 8x64 clips
# three frames apart, batch 8, SGD Nesterov with warm-up and cosine, lr for the batch)
#   --no-flip               flipping would turn move_left into move_right (the default
#                           is flip ON, right for most datasets, wrong for this one)
#   --time-budget 90        the epochs that fit 90 s of training on this machine
#                           (measured 2026-11-24: 73 epochs, 100% on the test videos,
#                           87 s for the whole demo on 2 cores)
# Environment: VT_BIN (default build/vidtrain), VT_DEMO_DIR (default demo),
# VT_DEMO_RUN (default runs/demo), VT_DEMO_BUDGET (default 90, seconds).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${VT_BIN:-build/vidtrain}
data=${VT_DEMO_DIR:-demo}
run=${VT_DEMO_RUN:-runs/demo}
budget=${VT_DEMO_BUDGET:-90}
start=$(date +%s)

rm -rf "$data" "$run"
"$bin" synth "$data"
"$bin" scan "$data" || true
"$bin" train "$data" --out "$run" --no-flip --time-budget "$budget" --seed 1
"$bin" eval "$run" "$data" --split test --clips-per-video 5 --workers 2

secs=$(( $(date +%s) - start ))
# eval.json's first "video_top1" is head 0's (the top-level copy).
acc=$(awk -F'[:,]' '/"video_top1"/ { gsub(/[ \t]/, "", $2); print $2; exit }' "$run/eval.json")
pct=$(awk -v a="$acc" 'BEGIN { printf "%.1f", 100 * a }')
echo "== demo: test video top-1 ${pct}% in ${secs} s wall time (target: >= 90% in < 600 s)"
echo "== report: $run/report.html"
if awk -v a="$acc" 'BEGIN { exit !(a < 0.90) }'; then
  echo "== demo: accuracy below the 90% target" >&2
  exit 1
fi
if [ "$secs" -ge 600 ]; then
  echo "== demo: over 10 minutes (is the machine busy with other work?)" >&2
fi
