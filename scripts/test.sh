#!/usr/bin/env bash
# test.sh: README command 2, the check before a commit. Stages, in the order given:
#   bash scripts/test.sh              normal: build/ (warnings are errors; CUDA compiled in
#                                     when nvcc is there, GPU tests skip without a GPU) and
#                                     every ctest test in it. Under 10 minutes on 2 cores.
#   bash scripts/test.sh asan         build-asan/ (CPU-only, AddressSanitizer + UBSan) and
#                                     every ctest test under it (~20 minutes on 2 cores)
#   bash scripts/test.sh fuzz         a smoke run of every libFuzzer target of tests/fuzz/
#                                     (scripts/fuzz.sh; needs clang, which scripts/setup.sh
#                                     installs; said and skipped without it)
#   bash scripts/test.sh all          the three; CI (.ci/run) runs `test.sh` then
#                                     `test.sh asan fuzz`, so every commit gets all three
#   VT_FUZZ_SECONDS=N                 seconds per fuzz target (default 20)
#   VT_ASAN_EXCLUDE=REGEX             tests the asan stage leaves out
# The sanitizer stage runs the same tests again, 3-5x slower each: it finds memory and
# UB errors the normal stage cannot, and it is why a developer's check and CI's differ
# (docs/testing.md, "The stages").
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

stages=("$@")
[ ${#stages[@]} = 0 ] && stages=(normal)
[ "${stages[*]}" = all ] && stages=(normal asan fuzz)
for s in "${stages[@]}"; do
    case $s in normal|asan|fuzz) ;; *)
        echo "test.sh: unknown stage '$s' (normal, asan, fuzz or all)" >&2; exit 2 ;; esac
done

normal() {
    echo "== build/ (Release, -Werror)"
    cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DVT_WERROR=ON ${VT_CMAKE_ARGS:-} | grep -E '✓|✗|vidtrain ' || true
    cmake --build build
    (cd build && ctest --output-on-failure -j "$jobs")
}

asan() {
    echo "== build-asan/ (CPU-only, AddressSanitizer + UndefinedBehaviorSanitizer)"
    cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVT_WERROR=ON -DVT_CUDA=OFF -DVT_SANITIZE=ON | grep -E 'vidtrain ' || true
    cmake --build build-asan
    # detect_leaks: LeakSanitizer fails a test that leaks. OpenMP/OpenBLAS thread pools are
    # process-lifetime and are not leaks, hence the suppressions file.
    (export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
     export LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp
     export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
     cd build-asan && ctest --output-on-failure -j "$jobs" -E "${VT_ASAN_EXCLUDE:-^$}")
}

fuzz() {
    local secs=${VT_FUZZ_SECONDS:-20}
    [ "$secs" = 0 ] && return 0
    if ! command -v clang >/dev/null && ! command -v clang-14 >/dev/null; then
        echo "✗ clang not found (apt-get install clang libomp-dev): skipping the fuzz smoke run"
        return 0
    fi
    echo "== build-fuzz/ (libFuzzer + ASan + UBSan smoke: ${secs} s per target)"
    bash scripts/fuzz.sh all "$secs"
}

for s in "${stages[@]}"; do
    start=$SECONDS
    "$s"
    echo "== $s: passed in $((SECONDS - start)) s"
done
