#!/usr/bin/env bash
# bench-mpi.sh: where a training step's time goes when the towers span processes
# (mpirun) instead of threads of one process. On one machine the processes share its
# cores and memory, so clips/s of -np 1 vs -np 2 says nothing about scaling; what this
# prints instead is each step split into
#   compute            the slowest tower's forward + backward
#   waiting            the reducer waiting for the other towers / processes to arrive
#   exposed reduction  summing once all arrived (vidtrain does not overlap it with compute)
# and the bytes reduced per step (the gradient arena + batch-norm running statistics)
# and the bytes each process sends to the others. Configurations, same model and batch:
#   1 process, 2 towers (host reducer: threads)
#   mpirun -np 2, 1 tower each (MPI reducer: fixed-order sums over processes)
# for `tiny` and for `r3d18` (33.4 M parameters: 133.5 MB of gradients per step; a small
# clip keeps its CPU compute short). Speed is reported, never asserted.
#   bash bench/bench-mpi.sh               (uses build/vidtrain, or $VT_BIN; mpirun on PATH)
#   STEPS=4 WARMUP=1 bash bench/bench-mpi.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${VT_BIN:-build/vidtrain}
STEPS=${STEPS:-4}
WARMUP=${WARMUP:-1}
MPIRUN=${MPIRUN:-mpirun}
if [ ! -x "$BIN" ]; then
    echo "bench-mpi: $BIN not found (build first: cmake -S . -B build -G Ninja && cmake --build build)" >&2
    exit 1
fi
if ! command -v "$MPIRUN" > /dev/null; then
    echo "bench-mpi: $MPIRUN not found (apt-get install openmpi-bin libopenmpi-dev, then rebuild)" >&2
    exit 1
fi
# Root in a container (CI) must say so to Open MPI; 2 ranks may share fewer cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPI=("$MPIRUN" --oversubscribe --bind-to none)

echo "== bench-mpi: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); $("$MPIRUN" --version | head -1)"
run() { # label, command...
    local label=$1
    shift
    local out
    if ! out=$("$@" 2>&1); then
        echo "$out" >&2
        echo "bench-mpi: '$label' failed" >&2
        exit 1
    fi
    if ! echo "$out" | grep -q '^per step:'; then
        echo "$out" >&2
        echo "bench-mpi: '$label' printed no per-step figures" >&2
        exit 1
    fi
    echo "$out" | awk -v label="$label" '
        /^per step:/ { match($0, /compute [0-9.]+/); c = substr($0, RSTART + 8, RLENGTH - 8)
                       match($0, /waiting [0-9.]+/); w = substr($0, RSTART + 8, RLENGTH - 8)
                       match($0, /exposed reduction [0-9.]+/); r = substr($0, RSTART + 18, RLENGTH - 18) }
        /^reduced per step:/ { sub(/^reduced per step: /, ""); split($0, a, " in the reducer"); rb = a[1];
                               n = split($0, b, "by rank 0: "); wb = b[n] }
        /^step time:/ { st = $3 }
        END { printf "  %-34s step %7.4f s  compute %7.4f  waiting %7.4f  exposed reduction %7.4f  reduced %s/step, sent %s/step\n",
                     label, st, c, w, r, rb, wb }'
}

for cfg in "tiny 8x32x32 16" "r3d18 4x32x32 4"; do
    set -- $cfg
    model=$1 clip=$2 batch=$3
    common=(bench step --model "$model" --clip "$clip" --batch "$batch" --classes 400 --threads 1
            --steps "$STEPS" --warmup "$WARMUP")
    echo "-- $model, clip $clip, batch $batch, 400 classes, $STEPS timed steps"
    run "1 process, 2 towers (host)" "$BIN" "${common[@]}" --devices cpu:2
    run "mpirun -np 2, 1 tower each (mpi)" "${MPI[@]}" -np 2 "$BIN" "${common[@]}" --devices cpu:1
done
