#!/usr/bin/env bash
# fuzz.sh TARGET SECONDS: a libFuzzer campaign on one parser of vidtrain under ASan + UBSan.
#   TARGET: safetensors | labels | lists | kinetics | hmdb | options | devspec | video | pth
#           | all (each in turn, SECONDS each)
# Builds build-fuzz/ (CC=clang, -DVT_FUZZ=ON, CPU-only) when needed, makes the seed corpus
# (tests/fuzz/make_seeds.sh, into build-fuzz/seeds/), and runs the target on the corpus
# build-fuzz/corpus/TARGET (kept between runs, so campaigns add up) plus the seeds and the
# checked-in regression inputs (tests/fuzz/regress/TARGET). Prints, per target: execs, time,
# execs/s, coverage (libFuzzer's cov and ft counters), corpus size and findings.
# Findings (crash-*, leak-*, timeout-*, oom-*) land in build-fuzz/findings/TARGET/; the
# script exits 1 when a run found one. To reproduce one: build-fuzz/fuzz_TARGET FILE.
#
#   bash scripts/fuzz.sh options 60
#   bash scripts/fuzz.sh all 20            (what scripts/test.sh runs: a smoke run)
#   VT_FUZZ_BUILD=DIR  build folder (default build-fuzz)
#   VT_FUZZ_ARGS="..." extra libFuzzer flags (e.g. -runs=1000000 -use_value_profile=1)
# One campaign at a time, one process: it never starts workers or jobs of its own.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
target=${1:?usage: fuzz.sh TARGET|all SECONDS}
secs=${2:?usage: fuzz.sh TARGET|all SECONDS}
all=(safetensors labels lists kinetics hmdb options devspec video pth)
build=${VT_FUZZ_BUILD:-build-fuzz}
case $build in /*) ;; *) build=$root/$build ;; esac

if [ "$target" = all ]; then
    rc=0
    for t in "${all[@]}"; do bash "$0" "$t" "$secs" || rc=1; done
    exit $rc
fi
case " ${all[*]} " in *" $target "*) ;; *) echo "fuzz.sh: unknown target '$target' (${all[*]} or all)" >&2; exit 2 ;; esac

cc=${VT_FUZZ_CC:-$(command -v clang || command -v clang-14 || true)}
if [ -z "$cc" ]; then
    echo "✗ clang not found (apt-get install clang libomp-dev; scripts/setup.sh does): no fuzzing" >&2
    exit 2
fi
if [ ! -f "$build/build.ninja" ]; then
    CC=$cc cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVT_FUZZ=ON \
        | grep -E '✓|✗|vidtrain ' || true
fi
if ! cmake --build "$build" --target "fuzz_$target" > "$build/build-$target.log" 2>&1; then
    grep -E 'error|FAILED' "$build/build-$target.log" | head -20 >&2
    echo "fuzz.sh: build of fuzz_$target failed (log: $build/build-$target.log)" >&2
    exit 1
fi

bash "$root/tests/fuzz/make_seeds.sh" "$build/seeds" "$target"
corpus=$build/corpus/$target
findings=$build/findings/$target
mkdir -p "$corpus" "$findings"
inputs=("$corpus" "$build/seeds/$target")
[ -d "$root/tests/fuzz/regress/$target" ] && inputs+=("$root/tests/fuzz/regress/$target")
dict=()
[ -f "$root/tests/fuzz/$target.dict" ] && dict=(-dict="$root/tests/fuzz/$target.dict")
before=$(find "$findings" -type f | wc -l)
marker=$build/.fuzz-$target.start
touch "$marker"
t0=$SECONDS

log=$build/fuzz-$target.log
# -close_fd_mask=3: the targets' own stdout/stderr (vt_warn lines for every bad input) go
#   nowhere; libFuzzer and the sanitizers keep reporting on a duplicate of stderr.
# -timeout: one input taking this long is a finding (a hang); -rss_limit_mb: memory.
# halt_on_error / abort_on_error: the first report ends the run with the input saved.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:halt_on_error=1:allocator_may_return_null=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:abort_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$root/tests/lsan.supp}
set +e
"$build/fuzz_$target" -max_total_time="$secs" -timeout=25 -rss_limit_mb=3072 \
    -close_fd_mask=3 -print_final_stats=1 -artifact_prefix="$findings/" "${dict[@]}" \
    ${VT_FUZZ_ARGS:-} "${inputs[@]}" > "$log" 2>&1
frc=$?
set -e
took=$((SECONDS - t0))

after=$(find "$findings" -type f | wc -l)
final_stat() { sed -n "s/^stat::$1: *//p" "$log" | tail -1; }
execs=$(final_stat number_of_executed_units)
rate=$(final_stat average_exec_per_sec)
last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<< "$last")
ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<< "$last")
ncorpus=$(find "$corpus" -type f | wc -l)
new=$((after - before))
printf 'fuzz_%-12s %12s execs in %ss (%s/s)  cov %s  ft %s  corpus %s  findings %d\n' \
    "$target" "${execs:-?}" "$took" "${rate:-?}" "${cov:-?}" "${ft:-?}" "$ncorpus" "$new"
if [ "$frc" -ne 0 ] || [ "$new" -gt 0 ]; then
    echo "✗ fuzz_$target: finding (libFuzzer exit $frc); new files in $findings:" >&2
    find "$findings" -type f -newer "$marker" | head -5 >&2 || true
    grep -E 'ERROR:|runtime error|FUZZ_ASSERT|SUMMARY|Test unit written' "$log" | head -20 >&2 || true
    echo "  log: $log" >&2
    exit 1
fi
