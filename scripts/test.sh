#!/usr/bin/env bash
# test.sh: README command 2. Builds two configurations and runs the whole ctest suite
# on each: the normal build (warnings are errors; CUDA compiled in when nvcc is there,
# GPU tests skip without a GPU) and a CPU-only AddressSanitizer + UBSan build; then a
# fuzz smoke run: every libFuzzer target of tests/fuzz/ for 20 s (scripts/fuzz.sh; needs
# clang, which scripts/setup.sh installs; said and skipped without it).
#   bash scripts/test.sh            all three
#   VT_TEST_FAST=1 bash scripts/test.sh   the normal build only
#   VT_FUZZ_SECONDS=N               seconds per fuzz target (default 20; 0 skips the smoke)
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

secs=${VT_FUZZ_SECONDS:-20}
[ "$secs" = 0 ] && exit 0
if ! command -v clang >/dev/null && ! command -v clang-14 >/dev/null; then
    echo "✗ clang not found (apt-get install clang libomp-dev): skipping the fuzz smoke run"
    exit 0
fi
echo "== build-fuzz/ (libFuzzer + ASan + UBSan smoke: ${secs} s per target)"
bash scripts/fuzz.sh all "$secs"
