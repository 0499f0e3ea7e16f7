#!/usr/bin/env bash
# bench-gpu.sh: R3D-18 training throughput on one GPU, vidtrain vs PyTorch, in one run.
# 16x112x112 clips, batch 32, SGD, synthetic data; FP32, TF32 and BF16 (both sides:
# vidtrain --precision, PyTorch allow_tf32 / autocast(bfloat16)). Prints
# clips/s for each and the ratio vidtrain / PyTorch. Speed is never asserted: this prints
# figures (the README quotes them).
#
#   bash bench/bench-gpu.sh                 VT_BIN, PYTHON, BENCH_STEPS, BENCH_GPU override
#
# PyTorch's figure is its best of eager, channels_last_3d and torch.compile + channels_last
# (bench/bench_torch_gpu.py; BENCH_TORCH_MODES=eager for the eager figure of earlier runs).
# Differences to keep in mind when reading the ratio: PyTorch's input is already on the
# GPU; vidtrain's bench copies each batch from page-locked host memory like its training
# loop does.
# PyTorch uses cudnn.benchmark; vidtrain times cuDNN's algorithms once per shape too
# (VT_CUDA_CONV_ALGO=find, its default).
set -uo pipefail
cd "$(dirname "$0")/.."
bin=${VT_BIN:-}
if [ -z "$bin" ]; then
  for c in carry/vidtrain build-cuda/vidtrain build/vidtrain build-static/vidtrain; do
    [ -x "$c" ] && { bin=$c; break; }
  done
fi
[ -n "$bin" ] || { echo "✗ no vidtrain binary (set VT_BIN)"; exit 1; }
py=${PYTHON:-python3}
steps=${BENCH_STEPS:-10}
gpu=${BENCH_GPU:-0}
args=(bench step --model r3d18 --clip 16x112x112 --batch 32 --devices "cuda:$gpu" --steps "$steps" --warmup 3)

parse() { sed -n 's/^clips\/s: *\([0-9.]*\).*/\1/p' | tail -1; }

run_vt() { # $1 = FP32|TF32|BF16
  local extra=(--precision "${1,,}")
  echo "-- vidtrain $1: $bin ${args[*]} ${extra[*]}" >&2
  "$bin" "${args[@]}" "${extra[@]}" 2>&1 | tee /dev/stderr | parse
}
run_torch() {
  echo "-- PyTorch $1" >&2
  env -u LD_LIBRARY_PATH "$py" bench/bench_torch_gpu.py --batch 32 --clip 16x112x112 --classes 10 --steps "$steps" \
    --warmup 3 --device "cuda:$gpu" --precision "${1,,}" \
    --modes "${BENCH_TORCH_MODES:-eager,channels_last,compile}" 2>&1 | tee /dev/stderr | parse
}

declare -A r
for m in FP32 TF32 BF16; do
  r[vt_$m]=$(run_vt $m)
  r[pt_$m]=$(run_torch $m)
done
echo
echo "R3D-18 16x112x112, batch 32, training step, cuda:$gpu ($(nvidia-smi --query-gpu=name --format=csv,noheader -i "$gpu" 2>/dev/null || echo '?'))"
printf "%-6s %16s %16s %10s\n" math "vidtrain clips/s" "PyTorch clips/s" ratio
for m in FP32 TF32 BF16; do
  v=${r[vt_$m]:-}; p=${r[pt_$m]:-}
  ratio="?"
  [ -n "$v" ] && [ -n "$p" ] && ratio=$(awk -v a="$v" -v b="$p" 'BEGIN{printf "%.2f", a/b}')
  printf "%-6s %16s %16s %10s\n" "$m" "${v:-failed}" "${p:-failed}" "$ratio"
done
