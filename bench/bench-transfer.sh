#!/usr/bin/env bash
# bench-transfer.sh: is starting from pretrained weights worth it on a small set? The
# user's situation in small: a model pretrained on a large source task, then a target
# task of a few videos per class that it never saw, trained for the same length (the
# same wall-clock budget, or the same number of epochs) from those weights (--init,
# fine-tuning's defaults) and from scratch.
#   source  SOURCE=demo (default): `synth --preset demo`, 8 object motions (shapes moving,
#           turning, zooming over a still background) — another task than the target's;
#           SOURCE=motion: `synth --preset motion`, all 8 camera motions on other videos
#           (seed 11: other worlds, textures, objects) — the same domain, more data.
#           SRC_TRAIN videos per class; vidtrain train --time-budget SRC_BUDGET (or
#           --epochs SRC_EPOCHS) (defaults, --no-flip), its best.safetensors
#   target  per seed, TARGET=motion (default): `synth --preset motion --classes 6` (CAMERA
#           motions over animated procedural worlds: pan left/right/up/down, zoom in/out;
#           another generator, other classes, other textures), TGT_TRAIN training and
#           TGT_TEST test videos per class, drawn with seed 100+S (never the source's);
#           TARGET=heldout: bench/make-heldout.sh's family instead (8 camera motions made
#           by the ffmpeg command, rotations included, seed 100+S: no generator of
#           vidtrain's and no set its defaults were tuned on)
#   scratch vidtrain train TARGET --no-flip --time-budget TGT_BUDGET --seed S (or --epochs
#           TGT_EPOCHS: the same length whatever the machine's load)
#   init    the same plus --init SOURCE_RUN/best.safetensors (fc: 8 -> classes,
#           re-initialised; fine-tuning's defaults: lr /10, head x10, BN frozen; a
#           transformer: VideoMAE's fine-tuning recipe, docs/finetune.md)
#   + any FT_VARIANTS: "name:options" pairs run like init with those options after the
#           others (a later option wins: "ra2:--repeat-aug 2 --epochs 15"); pairs are
#           separated by ';' when FT_VARIANTS holds one, else by spaces (a word with no
#           ':' then continues the pair before it)
#   + any SCRATCH_VARIANTS: the same, run like scratch
# SIDES="scratch init ..." runs only the sides named (the source is pretrained only for
# init and FT_VARIANTS); KEEP=1 keeps a run that finished before (its RUN.row line), so
# an interrupted benchmark resumes and sides can run in parallel in one BENCH_DIR (each
# SIDES its own results.SIDES.tsv; a last run with KEEP=1 and no SIDES tabulates them all).
# Every run (source, scratch, init, variants) gets CLIP (--clip, e.g. 4x64; default: the
# model's), STRIDE (--stride) and TRAIN_ARGS when given; the source run also SRC_ARGS.
# Every side is evaluated on the target's test videos: 10 clips per video, video top-1.
# Prints one line per run (side, seed, epochs, wall s, video top-1 %) and a table of
# means, spreads and per-seed differences to scratch; asserts nothing.
#   SEEDS="1 2 3" SRC_BUDGET=240 TGT_BUDGET=60 SRC_TRAIN=40 TGT_TRAIN=6 TGT_TEST=6
#   SRC_EPOCHS= TGT_EPOCHS= (set: --epochs instead of the budget) MODEL=tiny CLIP= STRIDE=
#   TARGET=motion TRAIN_ARGS= SRC_ARGS= SIDES= KEEP=
#   BENCH_DIR=build/bench-transfer (the source run in it is reused once it finished:
#   give each model or clip its own) VT_BIN=build/vidtrain
#   FT_VARIANTS="nofreezebn:--no-freeze-bn; lr1x:--lr 0.05"
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${VT_BIN:-$root/build/vidtrain}
work=${BENCH_DIR:-$root/build/bench-transfer}
seeds=${SEEDS:-1 2 3}
src_budget=${SRC_BUDGET:-240}
tgt_budget=${TGT_BUDGET:-60}
src_train=${SRC_TRAIN:-40}
tgt_train=${TGT_TRAIN:-6}
tgt_test=${TGT_TEST:-6}
src_epochs=${SRC_EPOCHS:-}
tgt_epochs=${TGT_EPOCHS:-}
model=${MODEL:-tiny}
source=${SOURCE:-demo}
target=${TARGET:-motion}
variants=${FT_VARIANTS:-}
scratch_variants=${SCRATCH_VARIANTS:-}
case $target in motion | heldout) ;; *) echo "bench-transfer: TARGET=$target: motion or heldout" >&2; exit 1 ;; esac
# the options every run shares: clip, stride, TRAIN_ARGS
common=()
[ -n "${CLIP:-}" ] && common+=(--clip "$CLIP")
[ -n "${STRIDE:-}" ] && common+=(--stride "$STRIDE")
# shellcheck disable=SC2206
[ -n "${TRAIN_ARGS:-}" ] && common+=($TRAIN_ARGS)
# shellcheck disable=SC2206
src_args=(${SRC_ARGS:-})
src_len=(--time-budget "$src_budget")
[ -n "$src_epochs" ] && src_len=(--epochs "$src_epochs")
tgt_len=(--time-budget "$tgt_budget")
[ -n "$tgt_epochs" ] && tgt_len=(--epochs "$tgt_epochs")
# want SIDE: whether SIDES (empty: every side) names it
want() { [ -z "${SIDES:-}" ] || [[ " $SIDES " == *" $1 "* ]]; }
# split_variants LIST: one "name:options" a line, from ';'-separated pairs, or from
# space-separated words where a word without ':' continues the pair before it
split_variants() {
    if [[ $1 == *";"* ]]; then
        tr ';' '\n' <<< "$1" | sed 's/^ *//; s/ *$//' | grep -v '^$' || true
    else
        local w line=""
        for w in $1; do
            if [[ $w == *:* ]]; then
                [ -n "$line" ] && echo "$line"
                line=$w
            else
                line="$line $w"
            fi
        done
        [ -n "$line" ] && echo "$line"
        return 0
    fi
}
py=/usr/bin/python3
unset OPENBLAS_CORETYPE || true
[ -x "$bin" ] || { echo "bench-transfer: $bin not built (cmake --build build)" >&2; exit 1; }
mkdir -p "$work"
# A copy of the binary for the whole benchmark (an hour or more): a rebuild of build/
# meanwhile rewrote the file under a run and ended the benchmark (exec: permission denied)
# or ran half a binary; each side runs the vidtrain it started with. SIDES run in parallel
# in one BENCH_DIR each take their own copy.
cp "$bin" "$work/vidtrain.$$"
bin="$work/vidtrain.$$"
trap 'rm -f "$bin"' EXIT
res="$work/results${SIDES:+.${SIDES// /_}}.tsv"
: > "$res"
echo "== bench-transfer: $model ${common[*]}, source preset $source ${src_len[*]}, target $target ${tgt_len[*]} per run, seeds ${seeds}, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"

src="$work/source-$source"
if [ ! -f "$src/.done" ]; then
    rm -rf "$src" "$work/source-run-$source"
    "$bin" synth "$src" --preset "$source" --classes 8 --train "$src_train" --val 0 --test 4 \
        --seed 11 > "$work/source.synth.log"
    touch "$src/.done"
fi
# the source run is needed by init and the FT_VARIANTS only
need_src=0
want init && need_src=1
while IFS= read -r v; do want "${v%%:*}" && need_src=1; done < <(split_variants "$variants")
if [ $need_src = 1 ] && [ ! -f "$work/source-run-$source.done" ]; then
    rm -rf "$work/source-run-$source"
    echo "-- pretraining on the source task (${src_len[*]})"
    /usr/bin/time -f "%e" -o "$work/source-run-$source.time" "$bin" train "$src" \
        --out "$work/source-run-$source" --model "$model" --no-flip "${src_len[@]}" \
        "${common[@]}" "${src_args[@]}" --seed 1 -q < /dev/null > "$work/source-run-$source.log" 2>&1
    "$bin" eval "$work/source-run-$source" "$src" --split test -q < /dev/null \
        > "$work/source-run-$source.eval" 2>&1 || true
    touch "$work/source-run-$source.done"
fi
[ $need_src = 1 ] && src_top1=$("$py" -c 'import json,sys; print("%.1f" % (100*json.load(open(sys.argv[1]))["video_top1"]))' \
    "$work/source-run-$source/eval.json" 2>/dev/null || echo "?")
[ $need_src = 1 ] && echo "source model: $work/source-run-$source/best.safetensors (source test video top-1 $src_top1%," \
    "$(cat "$work/source-run-$source.time" 2>/dev/null || echo "?") s)"

# run NAME SEED DATA options...
run() {
    local name=$1 seed=$2 data=$3
    shift 3
    local out="$work/$name.s$seed"
    want "$name" || return 0
    if [ "${KEEP:-0}" = 1 ] && [ -f "$out.row" ]; then
        tee -a "$res" < "$out.row"
        return 0
    fi
    rm -rf "$out" "$out.row"
    /usr/bin/time -f "%e" -o "$out.time" "$bin" train "$data" --out "$out" --model "$model" \
        --no-flip "${tgt_len[@]}" "${common[@]}" --seed "$seed" "$@" -q < /dev/null > "$out.log" 2>&1
    "$bin" eval "$out" "$data" --split test --clips-per-video 10 -q < /dev/null > "$out.eval" 2>&1
    local top1 epochs
    top1=$("$py" -c 'import json,sys; print("%.1f" % (100*json.load(open(sys.argv[1]))["video_top1"]))' "$out/eval.json")
    # the epochs run, from metrics.jsonl's last epoch line (config.json keeps the planned cap)
    epochs=$("$py" -c 'import json,sys; print([json.loads(l) for l in open(sys.argv[1]) if "\"kind\":\"epoch\"" in l][-1]["epoch"])' "$out/metrics.jsonl")
    printf "%s\t%s\t%s\t%s\t%s\n" "$name" "$seed" "$epochs" "$(cat "$out.time")" "$top1" > "$out.row"
    tee -a "$res" < "$out.row"
}

for s in $seeds; do
    tgt="$work/target.s$s"
    if [ ! -f "$tgt/.done" ]; then
        rm -rf "$tgt" "$tgt.making"
        if [ "$target" = heldout ]; then
            bash "$root/bench/make-heldout.sh" "$tgt" $((100 + s)) "$tgt_train" "$tgt_test" \
                > "$work/target.s$s.make.log" 2>&1
        else
            "$bin" synth "$tgt" --preset motion --classes 6 --train "$tgt_train" --val 0 \
                --test "$tgt_test" --seed $((100 + s)) > "$work/target.s$s.synth.log"
        fi
        touch "$tgt/.done"
    fi
    run scratch "$s" "$tgt"
    while IFS= read -r v; do
        # shellcheck disable=SC2086
        run "${v%%:*}" "$s" "$tgt" ${v#*:}
    done < <(split_variants "$scratch_variants")
    run init "$s" "$tgt" --init "$work/source-run-$source/best.safetensors"
    while IFS= read -r v; do
        # shellcheck disable=SC2086
        run "${v%%:*}" "$s" "$tgt" --init "$work/source-run-$source/best.safetensors" ${v#*:}
    done < <(split_variants "$variants")
done

# the table: per side the seeds' top-1, their mean and sample standard deviation, the
# mean of the per-seed differences to scratch (same seed, same target set) and their
# range, for the FT_VARIANTS the same against init, the mean epochs and wall time
"$py" - "$res" "$(split_variants "$variants" | sed 's/:.*//' | tr '\n' ' ')" <<'EOF'
import statistics as st
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
by = {}
for name, seed, epochs, wall, top1 in rows:
    by.setdefault(name, []).append((int(seed), float(top1), float(wall), int(epochs)))
base = {s: t for s, t, _, _ in by.get("scratch", [])}
init = {s: t for s, t, _, _ in by.get("init", [])}
ft = set(sys.argv[2].split())


def diff(v, ref):  # mean and range of the per-seed differences to ref's same seed
    d = [x[1] - ref[x[0]] for x in v if x[0] in ref]
    if not d:
        return "", ""
    return "%+.1f" % st.mean(d), "%+.1f..%+.1f" % (min(d), max(d)) if len(d) > 1 else ""


print("\n%-12s %-30s %6s %5s %10s %13s %8s %13s %6s %7s" % ("side", "top-1 % per seed", "mean",
      "sd", "vs scratch", "range", "vs init", "range", "epochs", "wall s"))
for name, v in by.items():
    t = [x[1] for x in v]
    sd = "%.1f" % st.stdev(t) if len(t) > 1 else ""
    vs, rng = diff(v, base) if name != "scratch" else ("", "")
    vi, rngi = diff(v, init) if name in ft else ("", "")
    print("%-12s %-30s %6.1f %5s %10s %13s %8s %13s %6.1f %7.0f" % (
        name, ", ".join("%.1f" % x for x in t), st.mean(t), sd, vs, rng, vi, rngi,
        st.mean(x[3] for x in v), st.mean(x[2] for x in v)))
EOF
