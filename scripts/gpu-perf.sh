#!/usr/bin/env bash
# gpu-perf.sh: the prepared performance run of issue 45 on one GPU — every command under
# `timeout`, at most VT_PERF_BUDGET seconds in all (default 470: under 8 minutes, so a
# 15-minute device window leaves room for a start and a rerun), most important first:
#   1. the GPU op tests (test_cuda_ops_gpu, test_nccl_gpu, test_cuda_train_gpu,
#      test_fuse_gpu, test_grad_gate_gpu, test_cuda_vec_gpu, in parallel);
#   2. `vidtrain bench step` R3D-18 16x112 batch 32: bf16, tf32, fp32 from page-locked
#      memory, the A/B of the fused batch-norm tails (VT_FUSE=0 in bf16, issue 45 step 3),
#      the A/B of the vectorised kernels (VT_CUDA_VEC=0 in bf16, issue 45 item 2; it took
#      the slot of tf32's fused A/B, measured before), and bf16 once as the base
#      (--pageable, VT_FUSE=0, VT_CUDA_VEC=0: the figure before issue 45);
#   3. `vidtrain bench conv`: each R3D-18 conv shape, NCDHW vs NDHWC, bf16 and tf32;
#   4. a VT_CUDA_PROF=1 profile of a few bf16 steps (the per-op table, and the host
#      waits per step);
#   5. PyTorch's three modes (bench/bench_torch_gpu.py: eager, channels_last_3d,
#      torch.compile + channels_last) in bf16 and tf32;
#   6. if time is left: test_bf16_gpu (the fused BN kernel in bf16 at network level),
#      PyTorch fp32 eager;
# and writes summary.txt (one line per figure, vidtrain's with its ratio to PyTorch's
# best mode) and every log to $OUT (the device tool's folder; else /tmp/vidtrain-gpu-perf).
# A section whose time cap no longer fits the budget is skipped and says so.
#
#   bash scripts/gpu-perf.sh              on the GPU machine, from the repository root,
#                                         with scripts/build-static.sh's binaries in carry/
#                                         (or VT_BINDIR=build-cuda)
#   bash scripts/gpu-perf.sh --dry-run    prints each command with its cap; runs nothing
#   VT_PERF_BUDGET=S  PYTHON=python3  VT_PERF_STEPS=8
# Binaries and libraries are found as scripts/gpu-check.sh finds them (scripts/gpu-libs.sh;
# PyTorch runs without vidtrain's LD_LIBRARY_PATH, see docs/cuda.md). docs/benchmarks.md
# says how to read the figures. It must never install anything or change the machine
# beyond its own temp files and $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
dry=0
[ "${1:-}" = "--dry-run" ] && dry=1
budget=${VT_PERF_BUDGET:-470}
steps=${VT_PERF_STEPS:-8}
py=${PYTHON:-python3}
out=${OUT:-/tmp/vidtrain-gpu-perf}
logs=$out/perf-logs
mkdir -p "$logs"
start=$(date +%s)
declare -a summary
# summary.txt line by line as the figures come (rewritten whole at the end): a run cut
# short by the device tool's limit still brings back what it found
: >"$out/summary.txt"
note() { summary+=("$*"); echo "$*"; printf '%s\n' "$*" >>"$out/summary.txt"; }
left() { echo $((budget - ($(date +%s) - start))); }

bindir=${VT_BINDIR:-}
if [ "$dry" = 1 ]; then
  bindir=${bindir:-carry}
else
  . scripts/gpu-libs.sh
  [ -z "$bindir" ] && vt_gpu_unpack carry
  if [ -z "$bindir" ]; then
    for d in carry build-cuda build; do [ -x "$d/vidtrain" ] && { bindir=$d; break; }; done
  fi
  [ -n "$bindir" ] || { echo "✗ no vidtrain binary in carry/ or build-cuda/ (set VT_BINDIR)"; exit 1; }
  # vt_gpu_libs exports LD_LIBRARY_PATH for vidtrain; PyTorch must not see it (its own
  # cuDNN is newer than the system's: docs/cuda.md "First run")
  ldp_before=${LD_LIBRARY_PATH:-}
  vt_gpu_libs "$bindir" "$py" >"$logs/libs.txt" 2>&1 || note "✗ libraries not found: $VT_GPU_LIBS_MISSING"
fi
vt=$bindir/vidtrain

# run NAME CAP CMD...: CMD under `timeout min(CAP, what the budget has left)`, its output
# in $logs/NAME.log, its exit status in $logs/NAME.rc; skipped (rc "skipped") when less
# than a third of CAP is left. --dry-run prints the line instead.
run() {
  local name=$1 cap=$2; shift 2
  local l; l=$(left)
  if [ "$dry" = 1 ]; then
    echo "[dry-run] timeout $cap $*  > $logs/$name.log"
    echo 0 >"$logs/$name.rc"
    return 0
  fi
  if [ "$l" -lt $((cap / 3)) ]; then
    echo "skipped" >"$logs/$name.rc"
    note "· $name skipped: ${l}s of the budget left, it needs up to ${cap}s"
    return 1
  fi
  [ "$l" -lt "$cap" ] && cap=$l
  echo "-- $(date +%T) $name (cap ${cap}s): $*"
  timeout "$cap" "$@" >"$logs/$name.log" 2>&1
  local rc=$?
  echo "$rc" >"$logs/$name.rc"
  return "$rc"
}
rate() { sed -n 's/^clips\/s: *\([0-9.]*\).*/\1/p' "$logs/$1.log" 2>/dev/null | tail -1; }

echo "== 0. the machine"
if [ "$dry" = 0 ]; then
  timeout 30 nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader 2>/dev/null | tee "$logs/gpu.txt"
  timeout 30 "$vt" devices >"$logs/devices.log" 2>&1 || note "✗ vidtrain devices failed: $(tail -2 "$logs/devices.log" | tr '\n' ' ')"
  gpu=$(head -1 "$logs/gpu.txt" | cut -d, -f2 | sed 's/^ *//')
  note "· GPU: ${gpu:-?}; $(grep -m1 -iE 'cudnn' "$logs/devices.log" | sed 's/^ *//')"
fi

echo "== 1. GPU op tests (in parallel)"
export VT_TMP=${VT_TMP:-/tmp/vidtrain-gpu-perf-tmp} VT_SRC=$PWD VT_BIN=$vt VT_PYTHON=$py
mkdir -p "$VT_TMP"
for t in test_cuda_ops_gpu test_nccl_gpu test_cuda_train_gpu test_fuse_gpu test_grad_gate_gpu test_cuda_vec_gpu; do
  if [ "$dry" = 1 ] || [ -x "$bindir/$t" ]; then
    ( mkdir -p "$VT_TMP/$t"; VT_TMP=$VT_TMP/$t run "$t" 75 "$bindir/$t" ) &
  fi
done
wait
if [ "$dry" = 0 ]; then
  for t in test_cuda_ops_gpu test_nccl_gpu test_cuda_train_gpu test_fuse_gpu test_grad_gate_gpu test_cuda_vec_gpu; do
    [ -f "$logs/$t.rc" ] || { note "✗ $t: not in $bindir"; continue; }
    rc=$(cat "$logs/$t.rc")
    case $rc in
      0) note "✓ $t passed" ;;
      77) note "✗ $t SKIPPED on a GPU machine: $(head -1 "$logs/$t.log")" ;;
      124) note "✗ $t TIMED OUT" ;;
      *) note "✗ $t rc=$rc: $(grep -m3 -E 'FAIL|fatal|rror' "$logs/$t.log" | tr '\n' ' ')" ;;
    esac
  done
fi

echo "== 2. vidtrain bench step, R3D-18 16x112 batch 32 on cuda:0"
step=(bench step --model r3d18 --clip 16x112 --batch 32 --devices cuda:0 --steps "$steps" --warmup 2)
for p in bf16 tf32 fp32; do
  run "vt-$p" 90 "$vt" "${step[@]}" --precision "$p"
done
# A/B of the fused batch-norm tails (BN + ReLU, BN + skip + ReLU, forward and backward):
# the same steps with VT_FUSE=0; the figures above are VT_FUSE=1 (the default)
run vt-bf16-nofuse 90 env VT_FUSE=0 "$vt" "${step[@]}" --precision bf16
# A/B of the vectorised kernels: the scalar ones (VT_CUDA_VEC=0); above, the default 1
run vt-bf16-novec 90 env VT_CUDA_VEC=0 "$vt" "${step[@]}" --precision bf16
# the base: bf16 as bench step measured before issue 45 (pageable batch, BN tails unfused,
# scalar kernels)
run vt-bf16-base 90 env VT_FUSE=0 VT_CUDA_VEC=0 "$vt" "${step[@]}" --precision bf16 --pageable

echo "== 3. vidtrain bench conv (NCDHW vs NDHWC per R3D-18 shape; bf16, tf32)"
run conv 150 "$vt" bench conv --clip 16x112 --batch 32 --precision bf16,tf32 --reps 3

echo "== 4. VT_CUDA_PROF=1: the per-op table of 4 bf16 steps"
run prof-bf16 75 env VT_CUDA_PROF=1 "$vt" bench step --model r3d18 --clip 16x112 --batch 32 \
  --devices cuda:0 --steps 4 --warmup 2 --precision bf16

echo "== 5. PyTorch: eager, channels_last_3d, torch.compile + channels_last"
# PyTorch without vidtrain's library path (its own cuDNN); each mode capped inside
tpy=(env LD_LIBRARY_PATH="${ldp_before:-}" "$py" bench/bench_torch_gpu.py --batch 32 --clip 16x112x112
     --classes 10 --steps "$steps" --warmup 3 --device cuda:0)
run torch-bf16 240 "${tpy[@]}" --precision bf16 --mode-timeout 120
run torch-tf32 200 "${tpy[@]}" --precision tf32 --mode-timeout 100
echo "== 6. if time is left: test_bf16_gpu (r3d18 bf16 on cuda vs cpu-ref: the fused kernel in bf16), PyTorch fp32 eager"
if [ "$dry" = 1 ] || [ -x "$bindir/test_bf16_gpu" ]; then
  mkdir -p "$VT_TMP/test_bf16_gpu"
  VT_TMP=$VT_TMP/test_bf16_gpu run test_bf16_gpu 120 "$bindir/test_bf16_gpu"
  if [ "$dry" = 0 ]; then
    case $(cat "$logs/test_bf16_gpu.rc") in
      0) note "✓ test_bf16_gpu passed" ;;
      skipped) ;;
      *) note "✗ test_bf16_gpu rc=$(cat "$logs/test_bf16_gpu.rc"): $(grep -m3 -E 'FAIL|fatal|rror' "$logs/test_bf16_gpu.log" | tr '\n' ' ')" ;;
    esac
  fi
fi
run torch-fp32 60 "${tpy[@]}" --precision fp32 --modes eager --mode-timeout 55

# ---- summary.txt: one line per figure, vidtrain's with its ratio to PyTorch's best
if [ "$dry" = 0 ]; then
  for p in bf16 tf32 fp32; do
    # the best mode from the per-mode lines (also when the run was cut before "best:")
    read -r best pt < <(awk '/^mode [a-z_]+: clips\/s / { v = $4 + 0; if (v > b) { b = v; m = $2 } }
      END { sub(":", "", m); if (b > 0) print m, b }' "$logs/torch-$p.log" 2>/dev/null)
    for m in eager channels_last compile; do
      l=$(grep -m1 "^mode $m:" "$logs/torch-$p.log" 2>/dev/null)
      [ -n "$l" ] && note "· PyTorch $p $l"
    done
    for v in "vt-$p" "vt-$p-base"; do
      [ -f "$logs/$v.rc" ] || continue
      r=$(rate "$v")
      mem=$(grep -m1 -o 'input batch: [a-z-]* memory' "$logs/$v.log" 2>/dev/null | sed 's/input batch: //')
      [ "$v" = "vt-$p-base" ] && mem="$mem, VT_FUSE=0 VT_CUDA_VEC=0: the base before issue 45"
      if [ -z "$r" ]; then
        note "✗ vidtrain bench step $p ($v): no figure, rc $(cat "$logs/$v.rc"): $(grep -m2 -iE 'rror|fatal' "$logs/$v.log" | tr '\n' ' ')"
      elif [ -n "$pt" ]; then
        note "· vidtrain bench step $p ($mem): $r clips/s = $(awk -v a="$r" -v b="$pt" 'BEGIN{printf "%.2f", a/b}')x PyTorch's best $p ($best, $pt clips/s)"
      else
        note "· vidtrain bench step $p ($mem): $r clips/s (no PyTorch $p figure)"
      fi
    done
  done
  for ab in "nofuse VT_FUSE fused unfused" "novec VT_CUDA_VEC vectorised scalar"; do
    read -r suf var on off <<<"$ab"
    a=$(rate "vt-bf16"); b=$(rate "vt-bf16-$suf")
    if [ -n "$a" ] && [ -n "$b" ]; then
      note "· $var A/B bf16: $on $a clips/s, $off $b clips/s = $(awk -v a="$a" -v b="$b" 'BEGIN{printf "%.3f", a/b}')x"
    elif [ -f "$logs/vt-bf16-$suf.rc" ]; then
      note "✗ $var A/B bf16: no figure (rc $(cat "$logs/vt-bf16.rc" 2>/dev/null) / $(cat "$logs/vt-bf16-$suf.rc"))"
    fi
  done
  grep '^conv total' "$logs/conv.log" 2>/dev/null | while IFS= read -r l; do echo "· bench conv: $l"; done >"$logs/conv-summary.txt"
  while IFS= read -r l; do note "$l"; done <"$logs/conv-summary.txt"
  [ -s "$logs/conv-summary.txt" ] || note "✗ bench conv: no totals (rc $(cat "$logs/conv.rc" 2>/dev/null)): $(grep -m2 -iE 'rror|fatal' "$logs/conv.log" 2>/dev/null | tr '\n' ' ')"
  grep -A12 '^VT_CUDA_PROF' "$logs/prof-bf16.log" >"$logs/prof-top.txt" 2>/dev/null
  [ -s "$logs/prof-top.txt" ] && note "· VT_CUDA_PROF bf16 (4 steps): $(sed -n '1p' "$logs/prof-top.txt" | sed 's/.*), //'); top: $(sed -n '3,5p' "$logs/prof-top.txt" | awk '{printf "%s %s; ", $1, $NF}')" \
    || note "✗ VT_CUDA_PROF: no table (rc $(cat "$logs/prof-bf16.rc" 2>/dev/null))"
  hw=$(grep -m1 'host waits through the op table' "$logs/prof-bf16.log" 2>/dev/null | sed 's/^ *//')
  [ -n "$hw" ] && note "· VT_CUDA_PROF bf16 $hw (read from the code: 7 a one-pass step before issue 45, 2 now: docs/cuda.md, Host waits)"
  note "· gpu-perf.sh took $(( $(date +%s) - start ))s of a ${budget}s budget"
fi
printf '%s\n' "${summary[@]}" >"$out/summary.txt"
echo
echo "== summary ($out/summary.txt, logs in $logs)"
printf '%s\n' "${summary[@]}"
printf '%s\n' "${summary[@]}" | grep -q '^✗' && exit 1
exit 0
