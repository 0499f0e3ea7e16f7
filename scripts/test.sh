#!/usr/bin/env bash
# test.sh: README command 2. Builds two configurations and runs the whole ctest suite
# on each: the normal build (warnings are errors; CUDA compiled in when nvcc is there,
# GPU tests skip without a GPU) and a CPU-only AddressSanitizer + UBSan build.
#   bash scripts/test.sh            both
#   VT_TEST_FAST=1 bash scripts/test.sh   the normal build only
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

echo "== build/ (Release, -Werror)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DVT_WERROR=ON ${VT_CMAKE_ARGS:-} | grep -E '✓|✗|vidtrain ' || true
cmake --build build
(cd build && ctest --output-on-failure -j "$jobs")

[ "${VT_TEST_FAST:-0}" = 1 ] && exit 0
echo "== build-asan/ (CPU-only, AddressSanitizer + UndefinedBehaviorSanitizer)"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVT_WERROR=ON -DVT_CUDA=OFF -DVT_SANITIZE=ON | grep -E 'vidtrain ' || true
cmake --build build-asan
# detect_leaks: LeakSanitizer fails a test that leaks. OpenMP/OpenBLAS thread pools are
# process-lifetime and are not leaks, hence the suppressions file.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
export LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
(cd build-asan && ctest --output-on-failure -j "$jobs" -E "${VT_ASAN_EXCLUDE:-^$}")
