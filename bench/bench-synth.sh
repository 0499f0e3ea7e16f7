#!/usr/bin/env bash
# bench-synth.sh: how long `vidtrain synth --preset motion` takes to write its default set
# (8 classes x 22 videos), in wall-clock and CPU seconds, with the machine's load beside it
# (on a shared machine the wall clock says more about the neighbours than about synth).
# Prints the file count, total bytes and videos per format; asserts nothing.
#   VT_BIN=path/to/vidtrain  BENCH_DIR=scratch  THREADS=N (default: synth's own, one per core)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${VT_BIN:-$root/build/vidtrain}
work=${BENCH_DIR:-$root/build/bench-synth}
[ -x "$bin" ] || { echo "bench-synth: $bin not built (cmake --build build)" >&2; exit 1; }
rm -rf "$work"
mkdir -p "$work"
echo "== vidtrain synth --preset motion (defaults), $(nproc) cores, load before: $(cut -d' ' -f1-3 /proc/loadavg)"
args=(synth "$work/set" --preset motion)
[ -n "${THREADS:-}" ] && args+=(--threads "$THREADS")
/usr/bin/time -f "%e %U %S" -o "$work/time" "$bin" "${args[@]}" > "$work/log" 2>&1
read -r wall user sys < "$work/time"
grep '^wrote' "$work/log"
echo "wall ${wall} s, cpu ${user} s user + ${sys} s system; load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "files: $(find "$work/set" -type f | wc -l), bytes: $(du -sb "$work/set" | cut -f1)"
