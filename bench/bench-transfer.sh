#!/usr/bin/env bash
# bench-transfer.sh: is starting from pretrained weights worth it on a small set? The
# user's situation in small: a model pretrained on a large source task, then a target
# task of a few videos per class that it never saw, trained in the same wall-clock
# budget from those weights (--init, fine-tuning's defaults) and from scratch.
#   source  SOURCE=demo (default): `synth --preset demo`, 8 object motions (shapes moving,
#           turning, zooming over a still background) — another task than the target's;
#           SOURCE=motion: `synth --preset motion`, all 8 camera motions on other videos
#           (seed 11: other worlds, textures, objects) — the same domain, more data.
#           SRC_TRAIN videos per class; vidtrain train --time-budget SRC_BUDGET
#           (defaults, --no-flip), its best.safetensors
#   target  per seed: `synth --preset motion --classes 6` (CAMERA motions over animated
#           procedural worlds: pan left/right/up/down, zoom in/out; another generator,
#           other classes, other textures), TGT_TRAIN training and 6 test videos per
#           class, drawn with seed 100+S (never the source's)
#   scratch vidtrain train TARGET --no-flip --time-budget TGT_BUDGET --seed S
#   init    the same plus --init SOURCE_RUN/best.safetensors (fc: 8 -> 6 classes,
#           re-initialised; fine-tuning's defaults: lr /10, head x10, BN frozen)
#   + any FT_VARIANTS: "name:options" pairs run like init with those options too
# Both evaluated on the target's test videos: 10 clips per video, video top-1. Prints one
# line per run and a table of means; asserts nothing.
#   SEEDS="1 2 3" SRC_BUDGET=240 TGT_BUDGET=60 SRC_TRAIN=40 TGT_TRAIN=6 MODEL=tiny
#   BENCH_DIR=build/bench-transfer VT_BIN=build/vidtrain
#   FT_VARIANTS="nofreezebn:--no-freeze-bn lr1x:--lr 0.05"
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${VT_BIN:-$root/build/vidtrain}
work=${BENCH_DIR:-$root/build/bench-transfer}
seeds=${SEEDS:-1 2 3}
src_budget=${SRC_BUDGET:-240}
tgt_budget=${TGT_BUDGET:-60}
src_train=${SRC_TRAIN:-40}
tgt_train=${TGT_TRAIN:-6}
model=${MODEL:-tiny}
source=${SOURCE:-demo}
variants=${FT_VARIANTS:-}
py=/usr/bin/python3
unset OPENBLAS_CORETYPE || true
[ -x "$bin" ] || { echo "bench-transfer: $bin not built (cmake --build build)" >&2; exit 1; }
mkdir -p "$work"
res="$work/results.tsv"
: > "$res"
echo "== bench-transfer: $model, source preset $source ${src_budget} s, target ${tgt_budget} s per run, seeds ${seeds}, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"

src="$work/source-$source"
if [ ! -f "$src/.done" ]; then
    rm -rf "$src" "$work/source-run-$source"
    "$bin" synth "$src" --preset "$source" --classes 8 --train "$src_train" --val 0 --test 4 \
        --seed 11 > "$work/source.synth.log"
    touch "$src/.done"
fi
if [ ! -f "$work/source-run-$source/best.safetensors" ]; then
    echo "-- pretraining on the source task (${src_budget} s)"
    "$bin" train "$src" --out "$work/source-run-$source" --model "$model" --no-flip \
        --time-budget "$src_budget" --seed 1 -q > "$work/source-run-$source.log" 2>&1
    "$bin" eval "$work/source-run-$source" "$src" --split test -q > "$work/source-run-$source.eval" 2>&1 || true
fi
src_top1=$("$py" -c 'import json,sys; print("%.1f" % (100*json.load(open(sys.argv[1]))["video_top1"]))' \
    "$work/source-run-$source/eval.json" 2>/dev/null || echo "?")
echo "source model: $work/source-run-$source/best.safetensors (source test video top-1 $src_top1%)"

# run NAME SEED DATA options...
run() {
    local name=$1 seed=$2 data=$3
    shift 3
    local out="$work/$name.s$seed"
    rm -rf "$out"
    /usr/bin/time -f "%e" -o "$out.time" "$bin" train "$data" --out "$out" --model "$model" \
        --no-flip --time-budget "$tgt_budget" --seed "$seed" "$@" -q > "$out.log" 2>&1
    "$bin" eval "$out" "$data" --split test --clips-per-video 10 -q > "$out.eval" 2>&1
    local top1 epochs
    top1=$("$py" -c 'import json,sys; print("%.1f" % (100*json.load(open(sys.argv[1]))["video_top1"]))' "$out/eval.json")
    epochs=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["epochs"])' "$out/config.json")
    printf "%s\t%s\t%s\t%s\t%s\n" "$name" "$seed" "$epochs" "$(cat "$out.time")" "$top1" | tee -a "$res"
}

for s in $seeds; do
    tgt="$work/target.s$s"
    if [ ! -f "$tgt/.done" ]; then
        rm -rf "$tgt"
        "$bin" synth "$tgt" --preset motion --classes 6 --train "$tgt_train" --val 0 --test 6 \
            --seed $((100 + s)) > "$work/target.s$s.synth.log"
        touch "$tgt/.done"
    fi
    run scratch "$s" "$tgt"
    run init "$s" "$tgt" --init "$work/source-run-$source/best.safetensors"
    for v in $variants; do
        vname=${v%%:*}
        vopts=${v#*:}
        # shellcheck disable=SC2086
        run "$vname" "$s" "$tgt" --init "$work/source-run-$source/best.safetensors" $vopts
    done
done

"$py" - "$res" <<'EOF'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
by = {}
for name, seed, epochs, wall, top1 in rows:
    by.setdefault(name, []).append((int(seed), float(top1), float(wall)))
base = {s: t for s, t, _ in by.get("scratch", [])}
print("\n%-14s %-24s %8s %10s %8s" % ("side", "video top-1 % per seed", "mean", "vs scratch", "wall s"))
for name, v in by.items():
    mean = sum(t for _, t, _ in v) / len(v)
    d = [t - base[s] for s, t, _ in v if s in base]
    print("%-14s %-24s %8.1f %10s %8.0f" % (name, ", ".join("%.1f" % t for _, t, _ in v), mean,
          "%+.1f" % (sum(d) / len(d)) if d and name != "scratch" else "", sum(w for _, _, w in v) / len(v)))
EOF
