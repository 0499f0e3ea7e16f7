#!/usr/bin/env bash
# robustness.sh [DATA_DIR]: runs vidtrain's decode pipeline (open + index, a clip from the
# middle, a clip from the start, a full sequential decode: `vidtrain bench decode --probe`)
# over every file listed in DATA_DIR/manifest.tsv (default ../shared/data/robustness) and
# prints per file: ok/error, frames indexed and decoded vs the manifest, rotation vs the
# manifest, decode trouble, and the reason when refused.
#
# The manifest's rotation column is ffprobe's (counter-clockwise, display matrix); vidtrain
# reports the clockwise turn that shows the video upright, so they match when
# ours == (-theirs) mod 360.
#   VT_BIN=path/to/vidtrain   (default: build/vidtrain, then build-decode/vidtrain)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
data=${1:-$root/../shared/data/robustness}
manifest=$data/manifest.tsv
[ -f "$manifest" ] || { echo "no manifest at $manifest"; exit 2; }
bin=${VT_BIN:-}
for b in "$root/build/vidtrain" "$root/build-decode/vidtrain"; do
    [ -z "$bin" ] && [ -x "$b" ] && bin=$b
done
[ -x "${bin:-}" ] || { echo "vidtrain not built (set VT_BIN)"; exit 2; }
base=$(dirname "$data")   # manifest paths start with robustness/

files=()
while IFS=$'\t' read -r file _; do
    [ "$file" = file ] && continue
    files+=("$base/$file")
done < "$manifest"

probe=$(mktemp)
trap 'rm -f "$probe"' EXIT
"$bin" bench decode --probe --short-side 128 --clip 16 --stride 2 "${files[@]}" > "$probe"

awk -F'\t' -v base="$base/" '
    FNR == NR { if (FNR > 1) { mf[$1] = $5; mr[$1] = $11; note[$1] = $15 } next }
    {
        f = $2; sub("^" base, "", f)
        st = $1; frames = "-"; dec = "-"; rot = "-"; errs = ""; reason = "-"
        if (NF <= 3) { reason = $3 }
        else {
            for (i = 3; i <= NF; i++) {
                if ($i ~ /^frames=/) frames = substr($i, 8)
                if ($i ~ /^decoded=/) dec = substr($i, 9)
                if ($i ~ /^rot=/) rot = substr($i, 5)
                if ($i ~ /^decode_errors=/ && $i != "decode_errors=0") errs = errs " " $i
                if ($i ~ /^missing=/ && $i != "missing=0") errs = errs " " $i
            }
            reason = $NF
        }
        want = (360 - (mr[f] + 0)) % 360
        rotok = (rot == "-") ? "" : (rot + 0 == want ? "" : " ROTATION-MISMATCH")
        printf "%-5s %-55s frames %s/%s (manifest %s)  rot %s (manifest %s)%s%s  %s\n",
               st, f, frames, dec, mf[f], rot, mr[f], rotok, errs, reason
        n++; if (st == "ok") ok++
    }
    END { printf "\n%d of %d files ok\n", ok, n }
' "$manifest" "$probe"
