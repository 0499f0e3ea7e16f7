# gpu-libs.sh: sourced by gpu-check.sh and bench-feed-gpu.sh on a GPU machine. Finds the
# CUDA libraries the carried binaries need (libcudnn.so.9, libcublas(Lt).so.13,
# libnccl.so.2, libcudart.so.13, and libnvrtc.so.13, which cuDNN 9 loads to compile its
# runtime-fused kernels) — in a CUDA 13 install first, then the system folders, then the
# Python nvidia-* packages last: PyTorch's wheels may hold cuDNN and NCCL built for
# CUDA 12 under the same file names, which must not pair with CUDA 13's cudart and
# cuBLAS — and puts their folders, and BINDIR (carry/ holds libcjson.so.1: Debian has no
# static cJSON), on LD_LIBRARY_PATH.
#
#   vt_gpu_libs BINDIR PYTHON     prints what it found; returns 1 when a binary in
#                                 BINDIR still has a library "not found"
#   vt_gpu_unpack BINDIR          unpacks BINDIR/vidtrain-gpu.tar.xz when BINDIR has no
#                                 vidtrain yet (build-static.sh packs the binaries when
#                                 they would not fit the 64 MiB that travels)
vt_gpu_unpack() {
  if [ ! -x "$1/vidtrain" ] && [ -f "$1/vidtrain-gpu.tar.xz" ]; then
    tar -C "$1" -xJf "$1/vidtrain-gpu.tar.xz" && echo "unpacked $1/vidtrain-gpu.tar.xz"
  fi
}
vt_gpu_libs() {
  local bindir=$1 py=$2 dirs=() d sp lib f ldp="" missing
  # find walks its folders in the order given: CUDA 13 first, Python wheels last.
  for d in /usr/local/cuda-13*/lib64 /usr/local/cuda-13*/targets/x86_64-linux/lib \
           /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu; do
    [ -d "$d" ] && dirs+=("$d")
  done
  while IFS= read -r sp; do [ -d "$sp/nvidia" ] && dirs+=("$sp/nvidia"); done < <("$py" -c \
    'import site; print("\n".join(site.getsitepackages()))' 2>/dev/null)
  [ ${#dirs[@]} -gt 0 ] || dirs=(/nonexistent) # find would search . otherwise
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
  ldp=$(cd "$bindir" && pwd)${ldp:+:$ldp}
  export LD_LIBRARY_PATH=$ldp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  missing=$(for f in "$bindir"/vidtrain "$bindir"/test_*_gpu; do [ -x "$f" ] && ldd "$f" | grep "not found"; done | sort -u)
  VT_GPU_LIBS_MISSING=$(echo $missing)
  [ -z "$missing" ]
}
