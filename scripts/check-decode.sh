#!/usr/bin/env bash
# check-decode.sh DIR [CLIPS]: does vidtrain read your footage frame for frame as the ffmpeg
# command does? For every video under DIR (by extension), CLIPS (default 20) random clips of
# 4 frames at strides 1-4, at a short side of 64, are read through vidtrain's reader (seeks,
# decoding on, the frame index) and compared byte for byte with `ffmpeg -vf scale,format=rgb24`
# of the same frames; and the frames vidtrain counts with ffprobe's count. A container whose
# timestamps trap readers (docs/decode.md, "Damaged, tiny and odd files") shows here as
# clips that differ. Needs the build (scripts/test.sh builds it) and ffmpeg; writes
# nothing under DIR. Exit 1 when any video differs.
set -euo pipefail
dir=${1:?usage: check-decode.sh DIR [CLIPS]}
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${VT_BUILD:-$here/build}/test_decode
[ -x "$bin" ] || { echo "check-decode.sh: $bin is not built (bash scripts/test.sh, or VT_BUILD=DIR)" >&2; exit 2; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/check-decode.XXXXXX") # the ffmpeg references: this run's own
trap 'rm -rf "$tmp"' EXIT
export VT_TMP=$tmp
set +o pipefail
VT_DECODE_SWEEP=$(cd "$dir" && pwd) VT_SWEEP_CLIPS=${2:-20} "$bin" 2>&1 | grep -v '^  ok'
rc=${PIPESTATUS[0]}
exit "$rc"
