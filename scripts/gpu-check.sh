#!/usr/bin/env bash
# gpu-check.sh: what to run on a GPU machine to verify the CUDA side of vidtrain, with a
# summary at the end. Uses the binaries that scripts/build-static.sh put in carry/ (or
# VT_BINDIR, e.g. build-cuda/ when the project was built on that machine).
#
#   bash scripts/gpu-check.sh            all steps
#   VT_GPU_CHECK_BENCH=0 ...             skip the benchmark
#   VT_GPU_CHECK_SANITIZE=1 ...          also run test_cuda_ops_gpu under compute-sanitizer
#
# 1. finds the CUDA libraries the binaries need (libcudnn.so.9, libcublas(Lt).so.13,
#    libnccl.so.2, libcudart.so.13, and libnvrtc.so.13, which cuDNN 9 loads to compile
#    its runtime-fused kernels) — in a CUDA 13 install first, then the system folders,
#    then the Python nvidia-* packages last: PyTorch's wheels may hold cuDNN and NCCL
#    built for CUDA 12 under the same file names, which must not pair with CUDA 13's
#    cudart and cuBLAS — and puts their folders on LD_LIBRARY_PATH;
# 2. nvidia-smi, `vidtrain devices` (which refuses a cuDNN or NCCL built for another
#    CUDA major than the runtime, naming both);
# 3. the GPU tests: a SKIP (77) counts as a FAILURE here, because this machine has a GPU
#    (it means the binary could not use it: driver too old for CUDA 13, missing libs);
# 4. scripts/bench-gpu.sh (vidtrain vs PyTorch, R3D-18).
# It must never install anything or change the machine beyond its own temp files.
set -uo pipefail
cd "$(dirname "$0")/.."
bindir=${VT_BINDIR:-}
# build-static.sh packs the binaries when they would not fit the 64 MiB that travels.
if [ -z "$bindir" ] && [ -f carry/vidtrain-gpu.tar.xz ] && [ ! -x carry/vidtrain ]; then
  tar -C carry -xJf carry/vidtrain-gpu.tar.xz && echo "unpacked carry/vidtrain-gpu.tar.xz"
fi
if [ -z "$bindir" ]; then
  for d in carry build-cuda build; do [ -x "$d/vidtrain" ] && { bindir=$d; break; }; done
fi
[ -n "$bindir" ] || { echo "✗ no vidtrain binary in carry/ or build-cuda/ (set VT_BINDIR)"; exit 1; }
py=${PYTHON:-python3}
declare -a summary
note() { summary+=("$1"); echo "$1"; }

echo "== 1. CUDA libraries"
dirs=()
# find walks its folders in the order given: CUDA 13 first, Python wheels last.
for d in /usr/local/cuda-13*/lib64 /usr/local/cuda-13*/targets/x86_64-linux/lib \
         /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu; do
  [ -d "$d" ] && dirs+=("$d")
done
while IFS= read -r sp; do [ -d "$sp/nvidia" ] && dirs+=("$sp/nvidia"); done < <("$py" -c \
  'import site; print("\n".join(site.getsitepackages()))' 2>/dev/null)
ldp=""
for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnvrtc.so.13 libcudnn.so.9 libnccl.so.2; do
  f=$(find "${dirs[@]}" -name "$lib" 2>/dev/null | head -1)
  if [ -n "$f" ]; then
    d=$(dirname "$f")
    case ":$ldp:" in *":$d:"*) ;; *) ldp=${ldp:+$ldp:}$d ;; esac
    echo "  $lib: $f"
    case $f in */cu12/*|*cu12*/*) echo "  ⚠ $lib looks built for CUDA 12 ($f)";; esac
  else
    echo "  $lib: not found under ${dirs[*]}"
  fi
done
# carry/ holds libcjson.so.1 (Debian has no static cJSON)
ldp=$(cd "$bindir" && pwd)${ldp:+:$ldp}
export LD_LIBRARY_PATH=$ldp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
missing=$(for f in "$bindir"/vidtrain "$bindir"/test_*_gpu; do [ -x "$f" ] && ldd "$f" | grep "not found"; done | sort -u)
if [ -n "$missing" ]; then note "✗ libraries not found: $(echo $missing | tr '\n' ' ')"; else note "✓ every library resolves"; fi

echo "== 2. devices"
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader 2>&1 || true
"$bindir/vidtrain" devices 2>&1 && note "✓ vidtrain devices" || note "✗ vidtrain devices failed"

echo "== 3. GPU tests"
export VT_TMP=${VT_TMP:-/tmp/vidtrain-gpu-check} VT_SRC=$PWD VT_BIN=$bindir/vidtrain VT_PYTHON=$py
mkdir -p "$VT_TMP"
logs=${VT_TMP}/logs; mkdir -p "$logs"
for t in "$bindir"/test_*_gpu; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  start=$(date +%s)
  "$t" >"$logs/$name.log" 2>&1
  rc=$?
  secs=$(( $(date +%s) - start ))
  tail -3 "$logs/$name.log" | sed 's/^/    /'
  case $rc in
    0) note "✓ $name passed (${secs}s)" ;;
    77) note "✗ $name SKIPPED on a GPU machine: $(head -1 "$logs/$name.log")" ;;
    *) note "✗ $name FAILED rc=$rc (${secs}s): $(grep -m3 -E 'FAIL|fatal' "$logs/$name.log" | tr '\n' ' ')" ;;
  esac
done
if [ "${VT_GPU_CHECK_SANITIZE:-0}" = 1 ] && command -v compute-sanitizer >/dev/null; then
  compute-sanitizer --tool memcheck --error-exitcode 9 "$bindir/test_cuda_ops_gpu" >"$logs/sanitize.log" 2>&1 \
    && note "✓ compute-sanitizer memcheck clean on test_cuda_ops_gpu" \
    || note "✗ compute-sanitizer memcheck: see $logs/sanitize.log"
fi

if [ "${VT_GPU_CHECK_BENCH:-1}" = 1 ]; then
  echo "== 4. benchmark"
  VT_BIN=$bindir/vidtrain PYTHON=$py bash scripts/bench-gpu.sh 2>"$logs/bench.err" | tee "$logs/bench.out"
  tail -4 "$logs/bench.out" | grep -q failed && note "✗ benchmark: a run failed (see $logs/bench.err)" \
    || note "✓ benchmark ran (figures above)"
fi

echo
echo "== summary ($bindir, logs in $logs)"
printf '%s\n' "${summary[@]}"
printf '%s\n' "${summary[@]}" | grep -q '^✗' && exit 1
exit 0
