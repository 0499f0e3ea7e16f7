#!/usr/bin/env bash
# gpu-check.sh: what to run on a GPU machine to verify the CUDA side of vidtrain, with a
# summary at the end. Uses the binaries that scripts/build-static.sh put in carry/ (or
# VT_BINDIR, e.g. build-cuda/ when the project was built on that machine).
#
#   bash scripts/gpu-check.sh            all steps
#   VT_GPU_CHECK_BENCH=0 ...             skip the benchmark
#   VT_GPU_CHECK_SANITIZE=1 ...          also run test_cuda_ops_gpu, test_vit_gpu's and
#                                        test_mvit_gpu's ops
#                                        under compute-sanitizer (memcheck, racecheck,
#                                        synccheck)
#   VT_GPU_SANITIZE_TOOLS="memcheck"     which of them (default all three)
#   VT_GPU_CHECK_E2E=0 / _MORE=0 / _NVDEC=0   skip sections 3b / 3d / 3c (3c runs first:
#                                        NVDEC decode and prep, cpu vs nvdec)
#   VT_GPU_TEST_TIMEOUT=S, VT_GPU_BENCH_TIMEOUT=S, VT_GPU_LOGS=DIR, VT_GPU_LOGS_TAR=FILE.tgz
#   VT_GPU_CHECK_BUDGET=S                every command's `timeout` is capped by what is left
#                                        of S seconds from the start (default 470: under 8
#                                        minutes, so a 15-minute device window keeps room
#                                        for the machine's start and a rerun); a command
#                                        met with under 10 s left is not run (rc 124, named
#                                        in skipped.txt and the summary). 0: no budget.
# Logs and summary.txt go to VT_GPU_LOGS, else $OUT/gpu-check when OUT is set (the device
# tool's folder, which comes back), else $VT_TMP/logs; summary.txt is written line by line
# as the checks end, so a run cut short still brings back what it found.
# The runs so far (H200 and H100, 2026-11-26) and what each section found: docs/cuda.md.
#
# 1. finds the CUDA libraries the binaries need (scripts/gpu-libs.sh: a CUDA 13 install
#    first, PyTorch's nvidia-* wheels last) and puts their folders on LD_LIBRARY_PATH;
# 2. nvidia-smi, `vidtrain devices` (which refuses a cuDNN or NCCL built for another
#    CUDA major than the runtime, naming both);
# 3. the GPU tests (test_cuda_ops_gpu and test_fuse_gpu twice: VT_CUDA_VEC=1 and 0, the
#    vectorised kernels and the scalar ones): a SKIP (77) counts as a FAILURE here, because this machine has a GPU
#    (it means the binary could not use it: driver too old for CUDA 13, missing libs);
#    run in parallel, test_decode_hw with them when carry/media/loader_media (made by
#    tests/make_media.sh) or an ffmpeg command is there;
# 3b. end to end on cuda:0 (with exact sums on request: VT_EXACT_SUMS=1, one epoch 1 vs
#     2 towers and their cost in bench step): the demo trained and evaluated, one vs two GPU towers over an
#    epoch and over one step, a GPU + CPU tower pair, the fused BN tails against VT_FUSE=0
#    (r3d18, 3 steps, fp32 and bf16: bit for bit), bf16;
# 3c. NVDEC: bench decode cpu vs nvdec (also with --reopen, the loader's pattern) and prep
#     cpu vs nvdec on carry/media/hd or
#     carry/media/feed/src (1080p H.264, made here), train --decode nvdec beside cuDNN,
#     predict --timeline --decode nvdec (the streaming reader) against --decode cpu;
# 3d. micro-batches (r3d18 in a 3G budget, fp32 and bf16) against one pass, c3d, precise
#    BN with VT_CHECK_REPLICAS and --resume on two towers, each conv's cuDNN choice,
#    videomae_vit_s for 3 steps on cuda:0 and on cuda:0 + cpu and bench step at 16x224
#    with the per-op profile, the same in bf16 (5 x 120 s at most), the same for
#    mvit_test at 8x32 and bench step of mvit_v2_s at 16x224 (2 x 120 s + 180 s at most),
#    and mvit_test's 3 steps in bf16 (60 s at most);
# 4. bench/bench-gpu.sh (vidtrain vs PyTorch, R3D-18).
# It must never install anything or change the machine beyond its own temp files.
set -uo pipefail
cd "$(dirname "$0")/.."
bindir=${VT_BINDIR:-}
. scripts/gpu-libs.sh
[ -z "$bindir" ] && vt_gpu_unpack carry
if [ -z "$bindir" ]; then
  for d in carry build-cuda build; do [ -x "$d/vidtrain" ] && { bindir=$d; break; }; done
fi
[ -n "$bindir" ] || { echo "✗ no vidtrain binary in carry/ or build-cuda/ (set VT_BINDIR)"; exit 1; }
py=${PYTHON:-python3}
export VT_TMP=${VT_TMP:-/tmp/vidtrain-gpu-check}
mkdir -p "$VT_TMP"
logs=${VT_GPU_LOGS:-${OUT:+$OUT/gpu-check}}; logs=${logs:-$VT_TMP/logs}; mkdir -p "$logs"
: >"$logs/summary.txt"
: >"$logs/skipped.txt"
declare -a summary
note() { summary+=("$*"); echo "$*"; printf '%s\n' "$*" >>"$logs/summary.txt"; }
# The budget: `timeout` below is this function (sub-shells inherit it; env and
# compute-sanitizer lines put it first), so no command outlives the budget.
budget=${VT_GPU_CHECK_BUDGET:-470}
deadline=$(( $(date +%s) + budget ))
timeout() {
  local cap=$1 left; shift
  if [ "$budget" -gt 0 ]; then
    left=$(( deadline - $(date +%s) ))
    if [ "$left" -lt 10 ]; then
      echo "gpu-check.sh: not run, ${left}s of the ${budget}s budget left: $*" >&2
      echo "$*" >>"$logs/skipped.txt"
      return 124
    fi
    [ "$left" -lt "$cap" ] && cap=$left
  fi
  command timeout "$cap" "$@"
}

echo "== 1. CUDA libraries"
if vt_gpu_libs "$bindir" "$py"; then note "✓ every library resolves"
else note "✗ libraries not found: $VT_GPU_LIBS_MISSING"; fi

echo "== 2. devices"
timeout 30 nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader 2>&1 || true
timeout 60 "$bindir/vidtrain" devices 2>&1 && note "✓ vidtrain devices" || note "✗ vidtrain devices failed"

echo "== 3. GPU tests (in parallel, ${VT_GPU_TEST_TIMEOUT:-300} s each at most)"
export VT_SRC=$PWD VT_BIN=$bindir/vidtrain VT_PYTHON=$py
# Each test has its own scratch folder; test_decode_hw runs where its media exist (made
# here by tests/make_media.sh into carry/media/loader_media: this machine may have no ffmpeg).
tests=("$bindir"/test_*_gpu)
if [ -x "$bindir/test_decode_hw" ] && { [ -d carry/media/loader_media ] || command -v ffmpeg >/dev/null; }; then
  tests+=("$bindir/test_decode_hw")
fi
# "name binary VT_CUDA_VEC": every test with the vectorised kernels (the default), and the
# ops against cpu-ref and the fused tails once more on the scalar ones (docs/cuda.md)
runs=()
for t in "${tests[@]}"; do [ -x "$t" ] && runs+=("$(basename "$t") $t 1"); done
for n in test_cuda_ops_gpu test_fuse_gpu; do
  [ -x "$bindir/$n" ] && runs+=("$n-vec0 $bindir/$n 0")
done
for r in "${runs[@]}"; do
  read -r name t vec <<<"$r"
  ( tmp=$VT_TMP/$name; mkdir -p "$tmp"
    [ -d carry/media/loader_media ] && cp -r carry/media/loader_media "$tmp/"
    start=$(date +%s)
    VT_CUDA_VEC=$vec VT_TMP=$tmp timeout "${VT_GPU_TEST_TIMEOUT:-300}" "$t" >"$logs/$name.log" 2>&1
    echo "$? $(( $(date +%s) - start ))" >"$logs/$name.rc" ) &
done
wait
for r in "${runs[@]}"; do
  read -r name t vec <<<"$r"
  read -r rc secs <"$logs/$name.rc"
  tail -3 "$logs/$name.log" | sed 's/^/    /'
  case $rc in
    0) note "✓ $name passed (${secs}s)" ;;
    77) note "✗ $name SKIPPED on a GPU machine: $(head -1 "$logs/$name.log")" ;;
    124) note "✗ $name TIMED OUT (${secs}s): $(tail -1 "$logs/$name.log")" ;;
    *) note "✗ $name FAILED rc=$rc (${secs}s): $(grep -m3 -E 'FAIL|fatal|rror' "$logs/$name.log" | tr '\n' ' ')" ;;
  esac
done
# the cuDNN SDPA probe's answers (it reports, it does not judge): which bf16 ViT shapes
# cuDNN's fused attention would take
[ -f "$logs/test_cudnn_sdpa_gpu.log" ] && note "· cuDNN SDPA probe: $(grep -cE 'SUPPORTED' \
  "$logs/test_cudnn_sdpa_gpu.log") supported, $(grep -cE 'not supported' "$logs/test_cudnn_sdpa_gpu.log") not ($logs/test_cudnn_sdpa_gpu.log)"

# HD files: carry/media/hd when someone put them there, else the two 1080p30 files that
# `bash bench/bench-feed-gpu.sh --make` writes
hd=carry/media/hd; [ -d "$hd" ] || hd=carry/media/feed/src
if [ -d "$hd" ] && [ "${VT_GPU_CHECK_NVDEC:-1}" = 1 ]; then
  echo "== 3c. NVDEC: 1080p H.264 (13 Mbit/s, a keyframe every 60 frames), 16x128 clips, stride 1"
  # nvidia-smi samples the decoder's load and the GPU's memory, and each process's own
  # memory (the CUDA context and the decoders), while the runs go on
  nvidia-smi --query-gpu=timestamp,utilization.decoder,utilization.gpu,memory.used \
    --format=csv,noheader -lms 250 >"$logs/nvdec-smi.csv" 2>&1 &
  smi=$!
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader -lms 200 \
    >"$logs/nvdec-apps.csv" 2>&1 &
  apps=$!
  trap 'kill "$smi" "$apps" 2>/dev/null' EXIT
  TIMEFORMAT="cpu-seconds %U+%S wall %R"
  { for wk in 1 4; do
    for d in cpu nvdec; do
      echo "-- $(date +%T)" >"$logs/nvdec-$d-$wk.log"
      { time timeout 45 "$bindir/vidtrain" bench decode "$hd" \
        --mode clips --clip 16 --stride 1 --short-side 128 --clips-per-video 16 --workers "$wk" \
        --decode "$d" >>"$logs/nvdec-$d-$wk.log" 2>&1; } 2>>"$logs/nvdec-$d-$wk.log"
      echo "  --decode $d, $wk worker(s): $(grep -E 'warning|clips/s|clips:|cpu-seconds' \
        "$logs/nvdec-$d-$wk.log" | tr '\n' ' ')"
    done
  done
    # the loader's pattern: every clip opens its video again (issue 45 item 6: what an NVDEC
    # session costs per open; the CPU's open cache keeps the index and first frame). nvdec
    # twice: with the decoder pool (the default: a closed video's NVDEC decoder taken by
    # the next open) and without it; then 16 workers, with no session cap and with 7
    # sessions (an H100's/H200's decoder engines; the rest decode on the CPU)
    for run in "cpu 4 0 gpu" "nvdec 4 0 gpu" "nvdec 4 0 off" "cpu 16 0 gpu" "nvdec 16 0 gpu" \
               "nvdec 16 7 gpu"; do
      set -- $run
      tag="$1-$2w-cap$3-pool$4"
      echo "-- $(date +%T)" >"$logs/nvdec-reopen-$tag.log"
      { time VT_NVDEC_SESSIONS=$3 timeout 30 "$bindir/vidtrain" bench decode "$hd" --mode clips \
        --clip 16 --stride 1 --short-side 128 --clips-per-video 4 --workers "$2" --reopen \
        --decode "$1" --decoder-pool "$4" >>"$logs/nvdec-reopen-$tag.log" 2>&1; } \
        2>>"$logs/nvdec-reopen-$tag.log"
      echo "  --decode $1, $2 workers, --reopen, sessions cap $3, pool $4: $(grep -E \
        'warning|clips/s|clips:|cpu-seconds|kept|decoder pool' "$logs/nvdec-reopen-$tag.log" | tr '\n' ' ')"
    done
  } | tee "$logs/nvdec.txt"
  # prep (issue 25): the HD files re-encoded at S = 128, sources decoded on the CPU or on
  # NVDEC; H.264 decodes to the same pixels either way, so the copies should be identical
  prep_rc=0
  for d in cpu nvdec; do
    rm -rf "$VT_TMP/prep-$d"
    echo "-- $(date +%T)" >"$logs/prep-$d.log"
    { time timeout 120 "$bindir/vidtrain" prep "$hd" "$VT_TMP/prep-$d" --jobs 2 \
      --decode "$d" >>"$logs/prep-$d.log" 2>&1; } 2>>"$logs/prep-$d.log"
    echo "exit $?" >>"$logs/prep-$d.log"
    echo "  prep --decode $d --jobs 2: $(tail -5 "$logs/prep-$d.log" | tr '\n' ' ')"
  done | tee -a "$logs/nvdec.txt"
  for d in cpu nvdec; do grep -q '^exit 0$' "$logs/prep-$d.log" || prep_rc=1; done
  kill "$smi" "$apps" 2>/dev/null
  wait "$smi" "$apps" 2>/dev/null
  trap - EXIT
  same=0; n=0
  while IFS= read -r f; do
    n=$((n + 1)); cmp -s "$f" "$VT_TMP/prep-nvdec/${f#"$VT_TMP"/prep-cpu/}" && same=$((same + 1))
  done < <(find "$VT_TMP/prep-cpu" -type f -name '*.mp4' 2>/dev/null)
  if [ "$prep_rc" = 0 ] && [ "$n" -gt 0 ] && [ "$same" = "$n" ]; then
    note "✓ prep copies identical, --decode cpu vs nvdec: $same of $n (figures: $logs/nvdec.txt)"
  else
    note "✗ prep --decode cpu vs nvdec: exit status $prep_rc, $same of $n copies identical" \
      "(see $logs/prep-*.log)"
  fi
  # Training with NVDEC beside cuDNN on the same GPU: with the decoders in the towers'
  # (primary) context, libnvcuvid's context syncs broke cuDNN's graph captures, and r3d18
  # with one loader worker died in 3 runs of 3 (video_hw.c). Twice, 3 steps each.
  ok=0; cls=$hd; [ -d carry/media/feed/src ] && cls=carry/media/feed/src # class folders
  for r in 1 2; do
    timeout 150 "$bindir/vidtrain" train "$cls" --out "$VT_TMP/nvdec-train-$r" --model r3d18 \
      --devices cuda:0 --batch 32 --epochs 1 --clips-per-video 48 --max-steps 3 --val-split 0 \
      --frame-cache 0 --workers 1 --decode nvdec --seed "$r" >"$logs/nvdec-train-$r.log" 2>&1
    echo "exit $?" >>"$logs/nvdec-train-$r.log" # 124: the timeout
    grep -q 'max steps' "$logs/nvdec-train-$r.log" && ok=$((ok + 1))
  done
  if [ "$ok" = 2 ]; then note "✓ train --decode nvdec on cuda:0 (r3d18, 3 steps): 2 runs of 2"
  else note "✗ train --decode nvdec on cuda:0: $ok runs of 2 passed: $(grep -h -E 'fatal|rror|^exit' \
    "$logs"/nvdec-train-*.log | head -4 | tr '\n' ' ')"; fi
  # predict --timeline through the streaming reader (stream.c) with NVDEC beside the model
  # on the GPU: the windows must be those of --decode cpu (H.264 decodes bit-exactly; the
  # model's GPU sums may differ in the last bits between runs: 1e-4 on a probability).
  # Two timelines' JSON lines, --top 1000 (every class in every window, so the comparison
  # never meets a swap): as many windows, every probability within 1e-4.
  tl_cmp() {
    "$py" - "$1" "$2" <<'PY'
import json, sys
a, b = ([json.loads(l) for l in open(p)] for p in sys.argv[1:3])
def probs(w): return {t["label"]: t["prob"] for h in w["heads"] for t in h["top"]}
assert a and len(a) == len(b), (len(a), len(b))
d = max(abs(probs(x)[k] - probs(y).get(k, -1)) for x, y in zip(a, b) for k in probs(x))
print("timeline windows", len(a), "max |prob diff|", d)
assert d <= 1e-4
PY
  }
  tlv=$(find "$cls" -type f -name '*.mp4' | sort | head -1); tl_ok=0
  # (3 steps stop mid-epoch: the run has last.safetensors only, which predict takes)
  if [ -f "$VT_TMP/nvdec-train-1/last.safetensors" ] && [ -n "$tlv" ]; then
    for d in cpu nvdec; do
      timeout 120 "$bindir/vidtrain" predict "$VT_TMP/nvdec-train-1" "$tlv" --timeline --json \
        --top 1000 --devices cuda:0 --decode "$d" >"$logs/timeline-$d.jsonl" 2>"$logs/timeline-$d.err"
      echo "exit $?" >>"$logs/timeline-$d.err"
    done
    tl_cmp "$logs/timeline-cpu.jsonl" "$logs/timeline-nvdec.jsonl" >"$logs/timeline-cmp.txt" \
      2>&1 && tl_ok=1
  fi
  if [ "$tl_ok" = 1 ] && grep -q 'decoded on the GPU (NVDEC)' "$logs/timeline-nvdec.err"; then
    note "✓ predict --timeline --decode nvdec on cuda:0: decoded on the GPU, windows = cpu's"
  else note "✗ predict --timeline --decode nvdec: $(grep -h -E 'rror|warning|^exit|^timeline' \
    "$logs"/timeline-*.err "$logs/timeline-cmp.txt" 2>/dev/null | head -5 | tr '\n' ' ')"; fi
  # A stream NVDEC declines (H.264 4:4:4 before Blackwell): a file is opened again on the
  # CPU with its threads (stream.c), one warning, the windows those of --decode cpu
  # within the GPU sums' 1e-4 (both decode on the CPU; the model runs on cuda:0), also
  # when this GPU takes the stream after all.
  dec=carry/media/feed/declined/h264_444.mp4
  if [ ! -f "$dec" ]; then
    note "· H.264 4:4:4 (declined by NVDEC) not checked: no $dec (bash bench/bench-feed-gpu.sh --make)"
  elif [ -f "$VT_TMP/nvdec-train-1/last.safetensors" ]; then
    for d in cpu nvdec; do
      timeout 60 "$bindir/vidtrain" predict "$VT_TMP/nvdec-train-1" "$dec" --timeline --json \
        --top 1000 --devices cuda:0 --decode-threads 4 --decode "$d" >"$logs/declined-$d.jsonl" \
        2>"$logs/declined-$d.err"
      echo "exit $?" >>"$logs/declined-$d.err"
    done
    dcl_same=differ
    grep -q '^exit 0$' "$logs/declined-cpu.err" && grep -q '^exit 0$' "$logs/declined-nvdec.err" &&
      tl_cmp "$logs/declined-cpu.jsonl" "$logs/declined-nvdec.jsonl" >"$logs/declined-cmp.txt" 2>&1 &&
      dcl_same=same
    dcl_warn=$(grep -c 'warning: --decode nvdec: .*NVDEC declined the stream' "$logs/declined-nvdec.err")
    if grep -q 'decoded on the GPU' "$logs/declined-nvdec.err"; then
      note "· H.264 4:4:4: this GPU decoded it (not declined); windows $dcl_same as cpu's (1e-4)"
    elif [ "$dcl_same" = same ] && [ "$dcl_warn" = 1 ]; then
      note "✓ a stream NVDEC declines (H.264 4:4:4): one warning, decoded on the CPU, windows = cpu's"
    else note "✗ H.264 4:4:4 under --decode nvdec: windows $dcl_same, $dcl_warn 'declined' warnings;" \
      "$(grep -h -E 'warning|rror|^exit' "$logs/declined-nvdec.err" | head -3 | tr '\n' ' ')"; fi
  fi
  # MiB columns: "+ 0" reads the number in front of " MiB" (awk compares strings otherwise)
  note "· GPU memory during the NVDEC runs, max: GPU $(awk -F', ' '{v = $4 + 0; if (v > m) m = v}
    END {print m + 0}' "$logs/nvdec-smi.csv") MiB; one process $(awk -F', ' '{v = $2 + 0;
    if (v > m) m = v} END {print m + 0}' "$logs/nvdec-apps.csv") MiB"
fi

# bench step's figure ("clips/s: X"; its plan table's header also says clips/s), or why not
figure() {
  grep -m1 '^clips/s:' "$1" ||
    echo "no figure (timed out or failed): $(grep -m1 -iE 'error|fatal|abort|not run,' "$1")"
}

if [ "${VT_GPU_CHECK_E2E:-1}" = 1 ]; then
  echo "== 3b. end to end on cuda:0: the demo set, train, eval; 1 tower vs 2 towers 3:1"
  vt=$bindir/vidtrain; w=$VT_TMP/e2e; rm -rf "$w"; mkdir -p "$w"
  if timeout 60 "$vt" synth "$w/demo" >"$logs/e2e-synth.log" 2>&1; then
    s=$(date +%s)
    timeout 120 "$vt" train "$w/demo" --out "$w/run" --devices cuda:0 --no-flip --epochs 20 --seed 1 \
      >"$logs/e2e-train.log" 2>&1 && timeout 60 "$vt" eval "$w/run" "$w/demo" --split test \
      --clips-per-video 5 >"$logs/e2e-eval.log" 2>&1
    rc=$?; secs=$(( $(date +%s) - s ))
    grep -E "device|tower|epoch +(1|20)[ /]|clips/s" "$logs/e2e-train.log" | head -12 | sed 's/^/    /'
    grep -E "top-1|top1" "$logs/e2e-eval.log" | head -4 | sed 's/^/    /'
    [ $rc = 0 ] && note "✓ demo trained and evaluated on cuda:0 in ${secs}s: $(grep -m1 -E 'video top-1' "$logs/e2e-eval.log")" \
      || note "✗ demo on cuda:0 rc=$rc: $(grep -m2 -iE 'error|fatal|abort' "$logs"/e2e-*.log | tr '\n' ' ')"
    # one epoch of the defaults (sync-BN, colour jitter), one tower vs two towers 3:1 on
    # the same GPU: the states after it, as check-bn-towers.sh measures on the CPU
    common=(--model tiny --epochs 1 --batch 8 --seed 5 --workers 1 --sync-bn)
    timeout 60 "$vt" train "$w/demo" --out "$w/one" "${common[@]}" --devices cuda:0 >"$logs/e2e-one.log" 2>&1 &&
    timeout 60 "$vt" train "$w/demo" --out "$w/two" "${common[@]}" --devices cuda:0,cuda:0 \
      --tower-split manual:3,1 >"$logs/e2e-two.log" 2>&1 &&
    "$py" tests/oracle/compare_states.py "$w/one/last.safetensors" "$w/two/last.safetensors" >"$logs/e2e-towers.txt" 2>&1
    rc=$?
    tail -4 "$logs/e2e-towers.txt" | sed 's/^/    /'
    [ $rc = 0 ] && note "✓ 1 vs 2 towers on cuda:0, one epoch: $(tail -1 "$logs/e2e-towers.txt")" \
      || note "✗ towers on cuda:0 rc=$rc: $(grep -m2 -iE 'error|fatal|abort' "$logs"/e2e-one.log "$logs"/e2e-two.log | tr '\n' ' ')"
    # the same, one step only (the per-step invariant; an epoch also carries float32's
    # max-pool near-ties, docs/distributed.md), and a CPU tower beside the GPU one
    for side in one two mixed; do
      case $side in
        one) dv=(--devices cuda:0) ;;
        two) dv=(--devices cuda:0,cuda:0 --tower-split manual:3,1) ;;
        mixed) dv=(--devices cuda:0,cpu --tower-split manual:3,1) ;;
      esac
      timeout 60 "$vt" train "$w/demo" --out "$w/s1-$side" "${common[@]}" "${dv[@]}" --max-steps 1 \
        >"$logs/e2e-s1-$side.log" 2>&1 || echo "  step run $side failed: $(tail -2 "$logs/e2e-s1-$side.log")"
    done
    for side in two mixed; do
      "$py" tests/oracle/compare_states.py "$w/s1-one/last.safetensors" "$w/s1-$side/last.safetensors" \
        >"$logs/e2e-s1-$side.txt" 2>&1 && note "· one step, cuda:0 vs $side: $(tail -1 "$logs/e2e-s1-$side.txt")" \
        || note "✗ one step $side: $(tail -2 "$logs/e2e-s1-$side.txt" | tr '\n' ' ')"
    done
    # exact sums on GPU towers (VT_EXACT_SUMS=1, not the default yet): the same epoch, one
    # vs two towers, which should then be 0 apart (the same GPU, the heuristic's algorithms);
    # and what they cost: r3d18 16x112 steps with and without them
    xs=(timeout 120 env VT_EXACT_SUMS=1 VT_CUDA_CONV_ALGO=heuristic "$vt" train "$w/demo")
    "${xs[@]}" --out "$w/x-one" "${common[@]}" --devices cuda:0 >"$logs/e2e-x-one.log" 2>&1 &&
    "${xs[@]}" --out "$w/x-two" "${common[@]}" --devices cuda:0,cuda:0 --tower-split manual:3,1 \
      >"$logs/e2e-x-two.log" 2>&1 &&
    "$py" tests/oracle/compare_states.py "$w/x-one/last.safetensors" "$w/x-two/last.safetensors" >"$logs/e2e-x.txt" 2>&1 \
      && note "· exact sums (VT_EXACT_SUMS=1), 1 vs 2 towers on cuda:0, one epoch: $(tail -1 "$logs/e2e-x.txt") ($(grep -m1 -o 'sums over clips [a-z]*' "$logs/e2e-x-two.log"))" \
      || note "✗ exact sums on GPU towers: $(grep -m2 -iE 'error|fatal|abort' "$logs"/e2e-x-*.log | tr '\n' ' ')"
    for xe in 0 1; do
      VT_EXACT_SUMS=$xe timeout 120 "$vt" bench step --model r3d18 --clip 16x112 --batch 32 \
        --devices cuda:0 >"$logs/bench-x$xe.log" 2>&1
      note "· bench step r3d18 16x112 b32, VT_EXACT_SUMS=$xe: $(figure "$logs/bench-x$xe.log")"
    done
    # the fused batch-norm tails (issue 45 step 3; VT_FUSE=0 turns them off) must change no
    # bit: r3d18, 3 steps on cuda:0 with and without them, fp32 and bf16, the same cuDNN
    # algorithms on both sides (heuristic, deterministic): every tensor 0 apart
    for prec in fp32 bf16; do
      for f in 0 1; do
        VT_FUSE=$f VT_CUDA_CONV_ALGO=heuristic VT_CUDA_DETERMINISTIC=1 timeout 120 "$vt" train \
          "$w/demo" --out "$w/fuse-$prec-$f" --model r3d18 --batch 8 --epochs 1 --max-steps 3 \
          --seed 6 --workers 2 --devices cuda:0 --precision "$prec" >"$logs/fuse-$prec-$f.log" 2>&1
      done
      worst=$("$py" tests/oracle/compare_states.py "$w/fuse-$prec-0/last.safetensors" \
        "$w/fuse-$prec-1/last.safetensors" --worst 2>"$logs/fuse-$prec.err")
      case $worst in
        0.00e+00*) note "✓ fused BN tails = unfused on cuda:0, r3d18 $prec 3 steps: every tensor bit for bit" ;;
        "") note "✗ fused vs unfused $prec: no comparison: $(grep -m2 -iE 'error|fatal|abort' "$logs"/fuse-$prec-*.log "$logs/fuse-$prec.err" | tr '\n' ' ')" ;;
        *) note "✗ fused BN tails differ from unfused on cuda:0, r3d18 $prec: worst $worst" ;;
      esac
    done
    # bf16 end to end: a few epochs of the demo, then eval
    timeout 90 "$vt" train "$w/demo" --out "$w/bf16" --devices cuda:0 --precision bf16 --no-flip \
      --epochs 8 --seed 1 >"$logs/e2e-bf16.log" 2>&1 && timeout 60 "$vt" eval "$w/bf16" "$w/demo" \
      --split test >"$logs/e2e-bf16-eval.log" 2>&1 \
      && note "✓ bf16 demo, 8 epochs: $(grep -m1 -E 'video top-1' "$logs/e2e-bf16-eval.log")" \
      || note "✗ bf16 demo: $(grep -m2 -iE 'error|fatal|abort' "$logs"/e2e-bf16*.log | tr '\n' ' ')"
  else
    note "✗ vidtrain synth failed: $(tail -2 "$logs/e2e-synth.log" | tr '\n' ' ')"
  fi
fi

if [ "${VT_GPU_CHECK_MORE:-1}" = 1 ] && [ -d "${w:-}/demo" ]; then
  echo "== 3d. more CUDA paths (issue 27): micro-batches, c3d, precise BN + resume + replicas"
  vt=$bindir/vidtrain
  # r3d18 batch 16 in a 3G budget: several passes a step (fp32 ~7 clips, bf16 ~14); its
  # first step against the same step without a budget. VT_LOG=2 lists each convolution's
  # algorithm, math type and workspace (the debug lines of models/cuda/cuda_conv.c).
  for prec in fp32 bf16; do
    mb=(--model r3d18 --batch 16 --epochs 1 --max-steps 1 --seed 3 --workers 4 --precision "$prec")
    VT_LOG=2 timeout 120 "$vt" train "$w/demo" --out "$w/mb-$prec-free" "${mb[@]}" --devices cuda:0 \
      >"$logs/mb-$prec-free.log" 2>&1
    timeout 120 "$vt" train "$w/demo" --out "$w/mb-$prec-tight" "${mb[@]}" --devices cuda:0 \
      --gpu-mem 0:3G >"$logs/mb-$prec-tight.log" 2>&1
    grep -E "micro-batches|^ *cuda0 " "$logs/mb-$prec-tight.log" | head -3 | sed 's/^/    /'
    "$py" tests/oracle/compare_states.py "$w/mb-$prec-free/last.safetensors" "$w/mb-$prec-tight/last.safetensors" \
      >"$logs/mb-$prec.txt" 2>&1 && note "· r3d18 $prec one step, micro-batches in 3G vs one pass: $(tail -1 "$logs/mb-$prec.txt")" \
      || note "✗ r3d18 $prec micro-batches: $(grep -m2 -iE 'error|fatal|abort' "$logs"/mb-$prec-*.log | tr '\n' ' ')"
  done
  grep -E "conv .* algo" "$logs/mb-fp32-free.log" "$logs/mb-bf16-free.log" >"$logs/conv-algos.txt" 2>/dev/null
  note "· cuDNN choices logged: $(wc -l <"$logs/conv-algos.txt") lines in $logs/conv-algos.txt"
  timeout 120 "$vt" train "$w/demo" --out "$w/c3d" --model c3d --batch 8 --epochs 1 --max-steps 2 \
    --devices cuda:0 >"$logs/c3d.log" 2>&1 && note "✓ c3d trains on cuda:0 (2 steps)" \
    || note "✗ c3d on cuda:0: $(grep -m2 -iE 'error|fatal|abort' "$logs/c3d.log" | tr '\n' ' ')"
  # the transformer ops on CUDA (issue 44; test_vit_gpu checks each against cpu-ref): ViT-S
  # at 8x112 (196 tokens), 3 steps through train, fp32, then a GPU + CPU tower pair
  for vd in cuda:0 cuda:0,cpu; do
    timeout 120 "$vt" train "$w/demo" --out "$w/vit-${vd//[:,]/_}" --model videomae_vit_s \
      --clip 8x112 --batch 4 --epochs 1 --max-steps 3 --devices "$vd" --seed 4 \
      >"$logs/vit-${vd//[:,]/_}.log" 2>&1 && note "✓ videomae_vit_s trains on $vd (3 steps)" \
      || note "✗ videomae_vit_s on $vd: $(grep -m2 -iE 'error|fatal|abort' "$logs/vit-${vd//[:,]/_}.log" | tr '\n' ' ')"
  done
  # MViT's ops on CUDA (issue 44; test_mvit_gpu checks each against cpu-ref): mvit_test (4
  # blocks with every piece of mvit_v2_s) at 8x32, 3 steps through train, alone and with a
  # CPU tower; then mvit_v2_s's speed at its real clip (stage 1: 25089 queries, 393 keys)
  for vd in cuda:0 cuda:0,cpu; do
    timeout 120 "$vt" train "$w/demo" --out "$w/mvit-${vd//[:,]/_}" --model mvit_test \
      --clip 8x32 --batch 4 --epochs 1 --max-steps 3 --devices "$vd" --seed 4 \
      >"$logs/mvit-${vd//[:,]/_}.log" 2>&1 && note "✓ mvit_test trains on $vd (3 steps)" \
      || note "✗ mvit_test on $vd: $(grep -m2 -iE 'error|fatal|abort' "$logs/mvit-${vd//[:,]/_}.log" | tr '\n' ' ')"
  done
  VT_CUDA_PROF=1 timeout 180 "$vt" bench step --model mvit_v2_s --clip 16x224 --batch 4 \
    --devices cuda:0 >"$logs/bench-mvit.log" 2>&1
  note "· bench step mvit_v2_s 16x224 b4: $(figure "$logs/bench-mvit.log")" \
    "(per-op GPU time: $logs/bench-mvit.log)"
  # its speed at the real clip (16x224: 1568 tokens, attention in blocks of 1280 queries)
  # and where the GPU time goes (the per-op table, VT_CUDA_PROF=1)
  VT_CUDA_PROF=1 timeout 120 "$vt" bench step --model videomae_vit_s --clip 16x224 --batch 8 \
    --devices cuda:0 >"$logs/bench-vit.log" 2>&1
  note "· bench step videomae_vit_s 16x224 b8: $(figure "$logs/bench-vit.log")" \
    "(per-op GPU time: $logs/bench-vit.log)"
  # bf16 for the transformer ops (test_vit_gpu checks each op and vit_test's step against
  # FP32): ViT-S at 8x112, 3 steps through train, then bench step at 16x224 beside the
  # fp32 figure above (the per-op table: where bf16's attention time goes)
  timeout 120 "$vt" train "$w/demo" --out "$w/vit-bf16" --model videomae_vit_s --clip 8x112 \
    --batch 4 --epochs 1 --max-steps 3 --devices cuda:0 --precision bf16 --seed 4 \
    >"$logs/vit-bf16.log" 2>&1 && note "✓ videomae_vit_s trains on cuda:0 in bf16 (3 steps)" \
    || note "✗ videomae_vit_s bf16: $(grep -m2 -iE 'error|fatal|abort' "$logs/vit-bf16.log" | tr '\n' ' ')"
  VT_CUDA_PROF=1 timeout 120 "$vt" bench step --model videomae_vit_s --clip 16x224 --batch 8 \
    --devices cuda:0 --precision bf16 >"$logs/bench-vit-bf16.log" 2>&1
  note "· bench step videomae_vit_s 16x224 b8 bf16: $(figure "$logs/bench-vit-bf16.log")" \
    "(per-op GPU time: $logs/bench-vit-bf16.log)"
  # and MViT's bf16 (test_mvit_gpu checks each op and mvit_test's step against FP32):
  # mvit_test at 8x32, 3 steps through train (a few seconds)
  timeout 60 "$vt" train "$w/demo" --out "$w/mvit-bf16" --model mvit_test --clip 8x32 \
    --batch 4 --epochs 1 --max-steps 3 --devices cuda:0 --precision bf16 --seed 4 \
    >"$logs/mvit-bf16.log" 2>&1 && note "✓ mvit_test trains on cuda:0 in bf16 (3 steps)" \
    || note "✗ mvit_test bf16: $(grep -m2 -iE 'error|fatal|abort' "$logs/mvit-bf16.log" | tr '\n' ' ')"
  # precise BN, the replica check and --resume on two towers of one GPU
  pb=(--devices cuda:0,cuda:0 --tower-split manual:3,1 --sync-bn --precise-bn 4 --no-flip --seed 2)
  VT_CHECK_REPLICAS=1 timeout 120 "$vt" train "$w/demo" --out "$w/pb" "${pb[@]}" --epochs 4 --max-steps 20 \
    >"$logs/pb.log" 2>&1 && VT_CHECK_REPLICAS=1 timeout 120 "$vt" train --resume "$w/pb" \
    >>"$logs/pb.log" 2>&1 && timeout 60 "$vt" eval "$w/pb" "$w/demo" --split test >"$logs/pb-eval.log" 2>&1 \
    && note "✓ precise BN + replica check + resume on 2 GPU towers: $(grep -m1 -E 'video top-1' "$logs/pb-eval.log")" \
    || note "✗ precise BN / resume on GPU towers: $(grep -m2 -iE 'error|fatal|abort|differ' "$logs"/pb*.log | tr '\n' ' ')"
fi

if [ "${VT_GPU_CHECK_SANITIZE:-0}" = 1 ] && command -v compute-sanitizer >/dev/null; then
  for tool in ${VT_GPU_SANITIZE_TOOLS:-memcheck racecheck synccheck}; do
    timeout 600 compute-sanitizer --tool "$tool" --error-exitcode 9 "$bindir/test_cuda_ops_gpu" \
      >"$logs/sanitize-$tool.log" 2>&1 \
      && note "✓ compute-sanitizer $tool clean on test_cuda_ops_gpu" \
      || note "✗ compute-sanitizer $tool: see $logs/sanitize-$tool.log"
    # the transformer kernels too (their op checks only: the model steps would be slow)
    timeout 300 env VT_TEST_VIT_OPS_ONLY=1 compute-sanitizer --tool "$tool" --error-exitcode 9 \
      "$bindir/test_vit_gpu" >"$logs/sanitize-vit-$tool.log" 2>&1 \
      && note "✓ compute-sanitizer $tool clean on test_vit_gpu's ops" \
      || note "✗ compute-sanitizer $tool on test_vit_gpu: see $logs/sanitize-vit-$tool.log"
    timeout 300 env VT_TEST_MVIT_OPS_ONLY=1 compute-sanitizer --tool "$tool" --error-exitcode 9 \
      "$bindir/test_mvit_gpu" >"$logs/sanitize-mvit-$tool.log" 2>&1 \
      && note "✓ compute-sanitizer $tool clean on test_mvit_gpu's ops" \
      || note "✗ compute-sanitizer $tool on test_mvit_gpu: see $logs/sanitize-mvit-$tool.log"
  done
fi

if [ "${VT_GPU_CHECK_BENCH:-1}" = 1 ]; then
  echo "== 4. benchmark"
  VT_BIN=$bindir/vidtrain PYTHON=$py timeout "${VT_GPU_BENCH_TIMEOUT:-300}" bash bench/bench-gpu.sh 2>"$logs/bench.err" | tee "$logs/bench.out"
  brc=${PIPESTATUS[0]}
  if [ "$brc" = 124 ]; then note "✗ benchmark: timed out or not run (the budget; see $logs/bench.err)"
  elif tail -4 "$logs/bench.out" | grep -q failed; then note "✗ benchmark: a run failed (see $logs/bench.err)"
  else note "✓ benchmark ran (figures above)"; fi
fi

[ -s "$logs/skipped.txt" ] && note "✗ $(wc -l <"$logs/skipped.txt") commands not run: the ${budget}s budget" \
  "(VT_GPU_CHECK_BUDGET) was spent ($logs/skipped.txt)"
note "· gpu-check.sh took $(( $(date +%s) - deadline + budget ))s"
# one file for the logs when only a few files travel back (the device tool's $OUT)
printf '%s\n' "${summary[@]}" >"$logs/summary.txt"
if [ -n "${VT_GPU_LOGS_TAR:-}" ]; then
  tar -czf "$VT_GPU_LOGS_TAR" -C "$logs" . || note "✗ could not pack the logs into $VT_GPU_LOGS_TAR"
fi

echo
echo "== summary ($bindir, logs in $logs)"
printf '%s\n' "${summary[@]}"
printf '%s\n' "${summary[@]}" | grep -q '^✗' && exit 1
exit 0
