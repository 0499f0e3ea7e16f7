#!/usr/bin/env bash
# bench-learn.sh: does vidtrain learn as well as the PyTorch script a user would write, in
# the same wall-clock budget? Per seed it writes the hard `--preset motion` set (8 camera
# motions over animated textures; 16 train / 6 test videos per class by default) and
# trains, one after the other on the same machine, each side given BUDGET seconds for
# the whole training job (start-up, decoding, validation included):
#   plain     vidtrain train DIR --out RUN --no-flip --seed S (no budget: the default length
#             that follows validation, as a new user runs it; its own wall time)
#   defaults  vidtrain train DIR --out RUN --no-flip --time-budget BUDGET --seed S
#             (the classes are directions: --no-flip; everything else vidtrain's defaults,
#             evaluated with best.safetensors as `vidtrain eval` picks it)
#   recipe    vidtrain with the twin's recipe: tiny, 8x64 clips two frames apart, batch 16,
#             SGD Nesterov lr 0.05 wd 1e-4, no label smoothing, OneCycle, every training
#             video, final weights
#   twin      tests/oracle/torch_twin.py train DIR --budget BUDGET --seed S (PyTorch + PyAV:
#             the same net and recipe; final weights)
# Every side is evaluated the same way on the test videos: 10 uniformly spaced centre
# clips per video, softmax averaged (video top-1). Clips/s is training clips over the
# training job's wall time. Prints one line per run and a table; asserts nothing.
#   SEEDS="1 2 3"  BUDGET=300  BENCH_DIR=scratch  VT_BIN=path/to/vidtrain
#   SYNTH_ARGS="--train 16 --test 6" (passed to synth)
#   SIDES="defaults recipe twin" (a subset runs only those; the table compares what ran;
#   "plain" is the fourth side, not run by default)
#   FAMILY=heldout: the sets come from bench/make-heldout.sh (ffmpeg-made camera motions
#   that vidtrain's defaults were never tuned on; 16 train / 6 test a class, no val/)
#   instead of `vidtrain synth --preset motion`
#   DEFAULTS_ARGS="...", RECIPE_ARGS="...", TWIN_ARGS="..." (appended to that side's
#   options, for experiments; e.g. RECIPE_ARGS="--stride 3" TWIN_ARGS="--stride 3")
# OpenBLAS: OPENBLAS_CORETYPE is unset for every side, so OpenBLAS picks its kernels for
# this CPU itself (a machine whose environment pins an older core — this one had
# OPENBLAS_CORETYPE=Haswell on an AVX-512 CPU — would slow vidtrain's convolutions, which
# are OpenBLAS sgemm, and not PyTorch's, which are oneDNN: checked, 111-114 clips/s for
# torch's step either way). Results record what was unset.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${VT_BIN:-$root/build/vidtrain}
work=${BENCH_DIR:-$root/build/bench-learn}
seeds=${SEEDS:-1 2 3}
budget=${BUDGET:-300}
sides=" ${SIDES:-defaults recipe twin} "
if [ -n "${OPENBLAS_CORETYPE:-}" ]; then
    echo "bench-learn: OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE in the environment: unset for every side"
    unset OPENBLAS_CORETYPE
fi
py=/usr/bin/python3
[ -x "$bin" ] || { echo "bench-learn: $bin not built (cmake --build build)" >&2; exit 1; }
mkdir -p "$work"
res="$work/results.tsv"
: > "$res"
echo "== bench-learn: budget ${budget} s per run, seeds ${seeds}, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"

# vidtrain run: name, data, seed, checkpoint (best|last), train options...
vt_run() {
    local name=$1 data=$2 seed=$3 ck=$4
    shift 4
    local run="$work/$name.s$seed"
    rm -rf "$run"
    /usr/bin/time -f "%e" -o "$run.time" "$bin" train "$data" --out "$run" --seed "$seed" "$@" \
        -q > "$run.log" 2>&1
    local wall clips epochs ckpt=()
    wall=$(cat "$run.time")
    # clips trained: the epoch lines' clip counts are not logged; epochs x training clips.
    # The epochs run, from metrics.jsonl's last epoch line: config.json keeps the default
    # length's cap, not where it ended.
    epochs=$("$py" -c 'import json,sys; print([json.loads(l) for l in open(sys.argv[1]) if "\"kind\":\"epoch\"" in l][-1]["epoch"])' "$run/metrics.jsonl")
    clips=$(( epochs * $(grep -o 'training: [0-9]* videos' "$run.log" | grep -o '[0-9]*') ))
    [ "$ck" = last ] && ckpt=(--checkpoint "$run/last.safetensors")
    "$bin" eval "$run" "$data" --split test --clips-per-video 10 "${ckpt[@]}" -q > "$run.eval" 2>&1
    local top1
    top1=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["video_top1"])' "$run/eval.json")
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$seed" "$epochs" "$wall" \
        "$(awk -v c="$clips" -v w="$wall" 'BEGIN{printf "%.1f", c/w}')" \
        "$(awk -v t="$top1" 'BEGIN{printf "%.1f", 100*t}')" | tee -a "$res"
}

for s in $seeds; do
    data="$work/${FAMILY:-motion}.s$s"
    if [ ! -f "$data/.done" ]; then
        rm -rf "$data" "$data.making"
        if [ "${FAMILY:-motion}" = heldout ]; then
            bash "$root/bench/make-heldout.sh" "$data" "$s" > "$work/make.s$s.log" 2>&1
        else
            "$bin" synth "$data" --preset motion --seed "$s" ${SYNTH_ARGS:-} > "$work/synth.s$s.log" 2>&1
        fi
        touch "$data/.done"
    fi
    case $sides in *" plain "*)
        # shellcheck disable=SC2086
        vt_run plain "$data" "$s" best --no-flip ${PLAIN_ARGS:-} ;;
    esac
    case $sides in *" defaults "*)
        # shellcheck disable=SC2086
        vt_run defaults "$data" "$s" best --no-flip --time-budget "$budget" ${DEFAULTS_ARGS:-} ;;
    esac
    case $sides in *" recipe "*)
        # shellcheck disable=SC2086
        vt_run recipe "$data" "$s" last --model tiny --clip 8x64 --stride 2 --batch 16 --optim sgd \
            --nesterov --lr 0.05 --wd 1e-4 --label-smoothing 0 --sched onecycle --val-split 0 \
            --eval-every 100000 --no-flip --time-budget "$budget" ${RECIPE_ARGS:-} ;;
    esac
    case $sides in *" twin "*) ;; *) continue ;; esac
    # shellcheck disable=SC2086
    /usr/bin/time -f "%e" -o "$work/twin.s$s.time" "$py" "$root/tests/oracle/torch_twin.py" train \
        "$data" --budget "$budget" --seed "$s" ${TWIN_ARGS:-} > "$work/twin.s$s.log" 2>&1
    line=$(grep '^RESULT ' "$work/twin.s$s.log" | cut -d' ' -f2-)
    "$py" -c 'import json,sys; r=json.loads(sys.argv[1]); print("twin\t%s\t%d\t%.1f\t%.1f\t%.1f" % (sys.argv[2], r["epochs"], r["job_s"], r["clips"]/r["job_s"], 100*r["test_video_top1"]))' \
        "$line" "$s" | tee -a "$res"
done

echo
echo "== summary (video top-1 on the test videos; clips/s over the training job)"
"$py" - "$res" <<'EOF'
import sys, statistics as st
rows = [l.rstrip('\n').split('\t') for l in open(sys.argv[1]) if l.strip()]
by = {}
for name, seed, epochs, wall, cps, top1 in rows:
    by.setdefault(name, []).append((int(seed), int(epochs), float(wall), float(cps), float(top1)))
print(f"{'side':10} {'seeds':>6} {'epochs':>8} {'wall s':>8} {'clips/s':>8} {'top-1 %':>8}  per seed")
for name in ('plain', 'defaults', 'recipe', 'twin'):
    r = by.get(name, [])
    if not r:
        continue
    print(f"{name:10} {len(r):6d} {st.mean(x[1] for x in r):8.1f} {st.mean(x[2] for x in r):8.1f} "
          f"{st.mean(x[3] for x in r):8.1f} {st.mean(x[4] for x in r):8.1f}  "
          + ' '.join(f'{x[4]:.1f}' for x in sorted(r)))
tw = {x[0]: x for x in by.get('twin', [])}
for name in ('plain', 'defaults', 'recipe'):
    pairs = [(x, tw[x[0]]) for x in by.get(name, []) if x[0] in tw]
    if pairs:
        d = st.mean(a[4] - b[4] for a, b in pairs)
        sp = st.mean(a[3] / b[3] for a, b in pairs)
        print(f"{name} - twin: {d:+.1f} points top-1 (goal >= +10), clips/s x{sp:.2f} (goal >= 2)")
df = {x[0]: x for x in by.get('defaults', [])}
pairs = [(x, df[x[0]]) for x in by.get('plain', []) if x[0] in df]
if pairs:
    d = st.mean(a[4] - b[4] for a, b in pairs)
    w = st.mean(a[2] / b[2] for a, b in pairs)
    print(f"plain - defaults (--time-budget): {d:+.1f} points top-1 (goal >= 0), wall x{w:.2f} "
          f"(goal <= 2)")
EOF
