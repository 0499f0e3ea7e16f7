#!/usr/bin/env bash
# bench-prep-accuracy.sh: does training on a `vidtrain prep` copy reach the accuracy of
# training on the original videos (issue 25)? Per synth seed it writes the hard
# `--preset motion` set (8 camera motions; 16 train / 25 test videos per class: 200 test
# videos, one = 0.5 points), preps it at each short side S (`vidtrain prep DIR COPY
# --short-side S`, every other option the default), and trains each copy with the defaults
# for a fixed number of epochs (`--no-flip --epochs E --seed K`: the classes are
# directions), the same seeds on every copy. Each run is evaluated on the test videos of
# its own copy (what a user who prepped the whole dataset sees) and on the original test
# videos (what `predict` on new, unprepped footage sees): 10 centre clips per video,
# softmax averaged, best.safetensors as `vidtrain eval` picks it. Prints one line per run
# and a table of means with the difference to the original; asserts nothing.
#   SYNTH_SEEDS="7 13"  (7: the draw the defaults were tuned on; 13: held out, never
#                        looked at while tuning)
#   SEEDS="1 2 3"  EPOCHS=300  SIDES="128"  (copies to prep: S, or ScQ for --crf Q, e.g.
#                  "128 128c18 128c0"; "original" is always run)
#   JOBS=2  (runs at once; each gets THREADS threads, default nproc / JOBS)
#   BENCH_DIR=scratch  VT_BIN=path/to/vidtrain  TRAIN_ARGS="..." (appended to every run)
# A run whose eval files exist is not run again (delete BENCH_DIR/runs to redo them).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${VT_BIN:-$root/build/vidtrain}
work=${BENCH_DIR:-$root/build/bench-prep-accuracy}
synth_seeds=${SYNTH_SEEDS:-7 13}
seeds=${SEEDS:-1 2 3}
epochs=${EPOCHS:-300}
sides=${SIDES:-128}
jobs=${JOBS:-2}
threads=${THREADS:-$(( $(nproc) / jobs > 0 ? $(nproc) / jobs : 1 ))}
py=/usr/bin/python3
[ -x "$bin" ] || { echo "bench-prep-accuracy: $bin not built (cmake --build build)" >&2; exit 1; }
mkdir -p "$work/runs"
echo "== bench-prep-accuracy: synth seeds $synth_seeds, training seeds $seeds, $epochs epochs," \
     "copies: original + prep S=$sides; $jobs runs at once x $threads threads, load" \
     "$(cut -d' ' -f1-3 /proc/loadavg)"

# Data: the original and its prepped copies.
for ss in $synth_seeds; do
    orig="$work/motion.s$ss"
    if [ ! -f "$orig/.done" ]; then
        rm -rf "$orig"
        "$bin" synth "$orig" --preset motion --seed "$ss" --test 25 > "$work/synth.s$ss.log" 2>&1
        touch "$orig/.done"
    fi
    for s in $sides; do
        copy="$orig.p$s"
        [ -f "$copy/.done" ] && continue
        args=(--short-side "${s%%c*}")
        [ "$s" != "${s%%c*}" ] && args+=(--crf "${s#*c}")
        /usr/bin/time -f "%e" -o "$copy.time" "$bin" prep "$orig" "$copy" "${args[@]}" \
            --jobs "$(nproc)" > "$copy.log" 2>&1
        touch "$copy/.done"
        echo "prep s$ss ${args[*]}: $(du -shL "$orig" | cut -f1) -> $(du -sh "$copy" | cut -f1)," \
             "$(cat "$copy.time") s, $(grep -c 'not upscaled' "$copy.log" || true) files kept at their size"
    done
done

# One run: copy-name synth-seed seed. Trains, then evaluates on its own and the original test set.
one_run() {
    local name=$1 ss=$2 seed=$3
    local orig="$work/motion.s$ss" data
    data=$orig
    [ "$name" != original ] && data="$orig.p${name#p}"
    local run="$work/runs/$name.s$ss.k$seed"
    [ -f "$run.own.json" ] && [ -f "$run.orig.json" ] && return 0
    rm -rf "$run"
    # shellcheck disable=SC2086
    /usr/bin/time -f "%e" -o "$run.time" "$bin" train "$data" --out "$run" --no-flip \
        --epochs "$epochs" --seed "$seed" --threads "$threads" ${TRAIN_ARGS:-} -q > "$run.log" 2>&1
    "$bin" eval "$run" "$data" --split test --clips-per-video 10 --threads "$threads" -q \
        > "$run.eval" 2>&1
    cp "$run/eval.json" "$run.own.json"
    "$bin" eval "$run" "$orig" --split test --clips-per-video 10 --threads "$threads" -q \
        > "$run.eval-orig" 2>&1
    cp "$run/eval.json" "$run.orig.json"
    "$py" -c 'import json,sys
a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2]))
print("%-9s synth %-3s seed %-3s %6.1f s  own test %5.1f%%  original test %5.1f%%" % (sys.argv[3],
      sys.argv[4], sys.argv[5], float(open(sys.argv[6]).read()), 100*a["video_top1"], 100*b["video_top1"]))' \
        "$run.own.json" "$run.orig.json" "$name" "$ss" "$seed" "$run.time"
}
export -f one_run
export work bin epochs threads py TRAIN_ARGS

list=()
for ss in $synth_seeds; do
    for seed in $seeds; do
        for name in original $(for s in $sides; do echo "p$s"; done); do
            list+=("$name $ss $seed")
        done
    done
done
printf '%s\n' "${list[@]}" | xargs -P "$jobs" -L 1 bash -c 'one_run "$0" "$1" "$2"'

echo
echo "== summary: video top-1 on the test videos (200 per draw), mean over training seeds"
"$py" - "$work/runs" "$synth_seeds" "$seeds" "original $(for s in $sides; do echo "p$s"; done)" <<'EOF'
import json, sys, statistics as st
d, sss, seeds, names = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), sys.argv[4].split()
def acc(name, ss, k, which):
    try:
        return 100 * json.load(open(f"{d}/{name}.s{ss}.k{k}.{which}.json"))["video_top1"]
    except OSError:
        return None
for ss in sss:
    role = "tuned on" if ss == "7" else "held out"
    print(f"synth seed {ss} ({role}):")
    print(f"  {'copy':9} {'own test':>9} {'orig test':>10}  {'own - original':>15}  per seed (own)")
    base = {k: acc("original", ss, k, "own") for k in seeds}
    for n in names:
        own = {k: acc(n, ss, k, "own") for k in seeds}
        org = {k: acc(n, ss, k, "orig") for k in seeds}
        ks = [k for k in seeds if own[k] is not None]
        if not ks:
            continue
        diff = [own[k] - base[k] for k in ks if base[k] is not None]
        print(f"  {n:9} {st.mean(own[k] for k in ks):8.1f}% {st.mean(org[k] for k in ks):9.1f}%"
              f"  {(st.mean(diff) if diff else float('nan')):+14.1f}   "
              + " ".join(f"{own[k]:.1f}" for k in ks))
EOF
