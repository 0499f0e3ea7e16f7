#!/usr/bin/env bash
# demo.sh: the main job. Synthesizes the demo dataset (real encoded videos, classes
# that differ only by motion), scans it, trains and evaluates. Expects build/vidtrain.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/vidtrain
start=$(date +%s)
rm -rf demo
$bin synth demo
$bin scan demo
echo "== demo finished in $(( $(date +%s) - start )) s"
