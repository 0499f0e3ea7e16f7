#!/usr/bin/env bash
# bench-cpu-step.sh: training-step throughput (forward + backward + SGD update) of tiny and
# r3d18 on a small clip, vidtrain's cpu backend vs PyTorch CPU (scripts/bench_torch_step.py),
# same threads, same batch, same synthetic input shape. Prints clips/s and the ratio.
#   bash scripts/bench-cpu-step.sh                 (THREADS=2 STEPS=5 WARMUP=2)
#   BUILD=build-net THREADS=1 bash scripts/bench-cpu-step.sh
# vidtrain's side is `vidtrain bench step` when that subcommand works; otherwise a small
# driver (below, compiled into $BUILD) that runs the same loop on models/ directly.
# Speed is a figure to read, never a test assertion.
# Fairness (checked): both peers get the same thread count (vidtrain --threads, torch
# set_num_threads, OMP_NUM_THREADS for both), batch, clip, classes, SGD momentum 0.9 with
# the update and zero_grad inside the timed step, and the same warm-up. Both use libgomp:
# on a shared machine whose other jobs take a core, busy-waiting threads distort both
# figures (run it 2-3 times; OMP_WAIT_POLICY=passive in the environment reaches both).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
THREADS=${THREADS:-2}
STEPS=${STEPS:-5}
WARMUP=${WARMUP:-2}
PY=${VT_PYTHON:-/usr/bin/python3}
CASES=${CASES:-"tiny:8x64x64:8 r3d18:8x56x56:4"}

if [ ! -f "$BUILD/libvtcore.a" ]; then
  cmake -S . -B "$BUILD" -G Ninja -DVT_CUDA=OFF >/dev/null
  cmake --build "$BUILD" --target vtcore
fi

driver="$BUILD/bench_step_driver"
build_driver() {
  cat > "$BUILD/bench_step_driver.c" <<'EOF'
/* bench_step_driver.c: throwaway timing loop for scripts/bench-cpu-step.sh (generated). */
#include <stdio.h>
#include <stdlib.h>
#include "models/common.h"
#include "models/net.h"
#include "models/optim.h"
int main(int argc, char **argv) {
    if (argc != 7) { fprintf(stderr, "model TxHxW batch threads steps warmup\n"); return 2; }
    int t, h, w, b = atoi(argv[3]), th = atoi(argv[4]), steps = atoi(argv[5]), warm = atoi(argv[6]);
    if (sscanf(argv[2], "%dx%dx%d", &t, &h, &w) != 3) return 2;
    vt_backend *be = vt_backend_init("cpu", 0, th, 0);
    vt_net_cfg cfg; vt_net_cfg_default(&cfg, argv[1], 10, t, h, w);
    char err[256];
    vt_net *net = vt_net_init(&cfg, be, b, err, sizeof err);
    if (!net) { fprintf(stderr, "%s\n", err); return 1; }
    vt_net_init_weights(net, 1);
    vt_optim_cfg oc; vt_optim_cfg_default(&oc, VT_OPT_SGD);
    vt_optim *opt = vt_optim_init(&oc, be, vt_net_num_params(net));
    int64_t xf = (int64_t)b * 3 * t * h * w;
    float *x = vt_backend_alloc_x(be, (size_t)xf * 4, "x");
    vt_rng r; vt_rng_seed(&r, 3);
    float *hx = vt_malloc((size_t)xf * 4);
    for (int64_t i = 0; i < xf; i++) hx[i] = (float)vt_rng_normal(&r);
    be->i->to_device(be, x, hx, (size_t)xf * 4);
    int32_t lab[256]; for (int j = 0; j < b; j++) lab[j] = j % 10;
    int32_t *dl = vt_backend_alloc_x(be, (size_t)b * 4, "labels");
    be->i->to_device(be, dl, lab, (size_t)b * 4);
    vt_targets tg = {.label = {dl}};
    double t0 = 0;
    for (int s = 0; s < warm + steps; s++) {
        if (s == warm) { vt_backend_sync(be); t0 = vt_now(); }
        vt_net_zero_grad(net);
        vt_net_forward(net, x, b, 1);
        vt_net_loss(net, NULL, NULL, &tg, 1.0f / (float)b);
        vt_net_backward(net);
        vt_optim_step(opt, vt_net_params(net), vt_net_grads(net), 0.01f);
    }
    vt_backend_sync(be);
    double dt = vt_now() - t0;
    printf("vidtrain (models/ driver) %s clip %s batch %d threads %d: %.1f ms/step\n", argv[1],
           argv[2], b, th, dt / steps * 1000);
    printf("clips/s: %.2f\n", b * steps / dt);
    free(hx);
    return 0;
}
EOF
  # shellcheck disable=SC2046
  cc -O2 -std=c11 -D_GNU_SOURCE -fopenmp -I. -o "$driver" "$BUILD/bench_step_driver.c" \
    "$BUILD/libvtcore.a" $(pkg-config --libs libavformat libavcodec libswscale libavutil libcjson) \
    -L/usr/lib/x86_64-linux-gnu/openblas-pthread -lopenblas -lm -lpthread
}

vt_step() { # model clip batch -> "clips/s: X" lines
  local out=""
  if [ -x "$BUILD/vidtrain" ]; then
    out=$("$BUILD/vidtrain" bench step --model "$1" --clip "$2" --batch "$3" --devices cpu:1 \
          --threads "$THREADS" --steps "$STEPS" --warmup "$WARMUP" 2>&1 || true)
  fi
  if ! grep -q '^clips/s:' <<<"$out"; then
    [ -x "$driver" ] || build_driver
    out=$(OMP_NUM_THREADS=$THREADS "$driver" "$1" "$2" "$3" "$THREADS" "$STEPS" "$WARMUP")
  fi
  echo "$out"
}

echo "== training step, CPU, $THREADS thread(s), $STEPS timed steps after $WARMUP warm-up ($(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg))"
for c in $CASES; do
  IFS=: read -r model clip batch <<<"$c"
  v=$(vt_step "$model" "$clip" "$batch")
  t=$(OMP_NUM_THREADS=$THREADS "$PY" -W ignore scripts/bench_torch_step.py "$model" "$clip" "$batch" "$THREADS" "$STEPS" "$WARMUP")
  echo "$v" | grep -v '^clips/s:' | sed 's/^/  /'
  echo "$t" | grep -v '^clips/s:' | sed 's/^/  /'
  vc=$(echo "$v" | awk '/^clips\/s:/ {print $2}')
  tc=$(echo "$t" | awk '/^clips\/s:/ {print $2}')
  printf "%-6s clip %-9s batch %-3s vidtrain %8.2f clips/s   pytorch %8.2f clips/s   ratio %.2fx\n" \
    "$model" "$clip" "$batch" "$vc" "$tc" "$(awk -v a="$vc" -v b="$tc" 'BEGIN {print a / b}')"
done
