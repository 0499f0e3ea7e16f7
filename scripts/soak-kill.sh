#!/usr/bin/env bash
# soak-kill.sh [KILLS]: kill -9 soak of `vidtrain train` (docs/design.md §3.8: checkpoints are
# written to a temporary file and renamed, so a crash leaves the old one or the new one).
# On a small `vidtrain synth` set it trains with a checkpoint after every step and a
# validation every epoch, and kills the trainer with SIGKILL KILLS times (default 50) at
# random moments, steered so that every phase is hit: during a step, during a checkpoint
# write (a temporary file is in the run folder), during validation, at start-up. After
# each kill it checks:
#   - RUN/last.safetensors loads: `vidtrain eval RUN DATA --checkpoint RUN/last.safetensors`
#     exits 0 (only before the run's first checkpoint may it be absent), and its step
#     count never goes back;
#   - `vidtrain train --resume RUN` continues: every resumed trainer is killed again or
#     finishes with exit 0, never fails on its own;
# and when a run finishes: it did every step (epochs x batches), its last.safetensors
# loads, its weights and optimizer state are bitwise those of an uninterrupted run with
# the same options (docs/design.md §3.5: a resume continues exactly as if never stopped), and
# no temporary file is left in RUN (training removes the leftovers of killed writes when
# it starts: app/run/runclean.h). Then a new run starts, until KILLS kills.
# Prints the kills per phase (as observed just before each kill) and the checks; exits 1
# when any check failed. Takes about 3-6 minutes on 2 cores; it is a script, not a ctest.
#
#   bash scripts/soak-kill.sh            50 kills
#   VT_BIN=build/vidtrain  the binary (default build/vidtrain)
#   VT_SOAK_DIR=DIR        scratch folder (default build/soak; emptied first)
#   VT_SOAK_SEED=N         the random moments (default: random; printed for a re-run)
# It must never kill anything but the trainers it started (by their PID).
set -euo pipefail
cd "$(dirname "$0")/.."
kills=${1:-50}
bin=${VT_BIN:-build/vidtrain}
work=${VT_SOAK_DIR:-build/soak}
seed=${VT_SOAK_SEED:-$(( $(date +%s) % 100000 ))}
RANDOM=$seed
[ -x "$bin" ] || { echo "soak-kill.sh: no vidtrain binary at $bin (build first, or VT_BIN=...)" >&2; exit 2; }
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
rm -rf "$work"
mkdir -p "$work"
work=$(cd "$work" && pwd)
data=$work/data

echo "== soak-kill: $kills kills, seed $seed, $bin, in $work"
"$bin" synth "$data" --classes 2 --train 6 --val 3 --test 0 --frames 24 --size 64x48 \
    > "$work/synth.log" 2>&1 || { cat "$work/synth.log"; echo "soak-kill.sh: synth failed" >&2; exit 1; }

# 12 train videos, batch 4: 3 steps an epoch, a checkpoint after each; 6 val videos x 4
# clips validated every epoch.
epochs=12
steps_per_epoch=3
train_args=(--epochs $epochs --batch 4 --clip 4x32 --checkpoint-every 1 --eval-every 1
            --val-clips 4 --devices cpu --threads 1 --workers 1 --log-every 1 --seed 7)

# The tensor data of a checkpoint (everything after the header: the header holds timings).
ckpt_data() {
    local n
    n=$(od -An -t u8 -N8 "$1" | tr -d ' ')
    tail -c +$((9 + n)) "$1"
}

# The uninterrupted run every killed run must end up equal to.
"$bin" train "$data" --out "$work/reference" "${train_args[@]}" > "$work/reference.log" 2>&1 ||
    { tail -5 "$work/reference.log"; echo "soak-kill.sh: the uninterrupted run failed" >&2; exit 1; }
ckpt_data "$work/reference/last.safetensors" > "$work/reference.data"

declare -A phase_kills=()
checks=0
failed=0
finished_runs=0
pass() { checks=$((checks + 1)); }
fail() { checks=$((checks + 1)); failed=$((failed + 1)); echo "FAIL: $*" >&2; }

# Temporary files of the atomic writers in RUN (runclean.h: NAME.tmp.XXXXXX,
# NAME.tmp.PID, NAME.PID.tmp).
temps() { compgen -G "$1/*.tmp.*" || true; compgen -G "$1/*.[0-9]*.tmp" || true; }

# The "step" metadata of a checkpoint (header only: 8-byte length, then JSON).
ckpt_step() {
    local n
    n=$(od -An -t u8 -N8 "$1" | tr -d ' ')
    head -c $((8 + n)) "$1" | tail -c "$n" | grep -o '"step":"[0-9]*"' | head -1 | tr -dc 0-9
}

# What the trainer is doing, from the run folder and its log, just before a kill.
phase_of() { # RUN LOG
    if [ -n "$(temps "$1")" ]; then echo checkpoint-write; return; fi
    local last
    last=$(grep -E '^epoch [0-9]+/[0-9]+' "$2" | tail -n 1 || true)
    if [ -z "$last" ]; then echo startup; return; fi
    if [[ $last =~ ^epoch\ [0-9]+/[0-9]+\ ([0-9]+)/([0-9]+) ]] &&
       [ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ]; then
        echo validation # after an epoch's last step, before its summary line
    else
        echo step
    fi
}

# Waits until the trainer pid reaches the target phase (or 10 s pass, or it exits).
wait_for() { # TARGET RUN LOG PID
    local target=$1 run=$2 log=$3 pid=$4 t0=$SECONDS
    while kill -0 "$pid" 2>/dev/null && [ $((SECONDS - t0)) -lt 10 ]; do
        case $target in
            checkpoint-write) [ -n "$(temps "$run")" ] && return 0 ;;
            validation) [ "$(phase_of "$run" "$log")" = validation ] && {
                    sleep "0.0$((RANDOM % 4))"; return 0; } ;;
            step) [ "$(phase_of "$run" "$log")" = step ] && {
                    sleep "0.0$((RANDOM % 3))"; return 0; } ;;
            any) sleep "$((RANDOM % 2)).$((RANDOM % 10))"; return 0 ;;
        esac
        sleep 0.003
    done
    return 0
}

# A run that finished: every step done, the checkpoint loads, no temporary file left.
check_finished() { # RUN LOG
    local run=$1 log=$2 s
    finished_runs=$((finished_runs + 1))
    s=$(ckpt_step "$run/last.safetensors" 2>/dev/null || true)
    if [ "$s" = $((epochs * steps_per_epoch)) ]; then pass; else
        fail "$run finished at step '${s}', not $((epochs * steps_per_epoch))"; fi
    if ckpt_data "$run/last.safetensors" | cmp -s - "$work/reference.data"; then pass; else
        fail "$run: its final weights and optimizer state differ from the uninterrupted run's"; fi
    if "$bin" eval "$run" "$data" --checkpoint "$run/last.safetensors" --clips-per-video 1 \
        --devices cpu --threads 1 -q > "$run/eval-final.log" 2>&1; then pass; else
        fail "$run: the finished run's last.safetensors does not load (see $run/eval-final.log)"; fi
    local left
    left=$(temps "$run")
    if [ -z "$left" ]; then pass; else
        fail "$run: temporary files left after the resumed run finished (training must remove" \
             "leftovers at start: app/run/runclean.h vt_run_clean_temps):" $left; fi
    # a kill between an epoch's renames leaves its set's record, which --resume finishes
    if [ ! -e "$run/.last.safetensors.set" ]; then pass; else
        fail "$run: $run/.last.safetensors.set left after the resumed run finished" \
             "(base/fileset.h: --resume finishes the set)"; fi
}

bag=()
next_target() {
    if [ ${#bag[@]} -eq 0 ]; then
        bag=(checkpoint-write checkpoint-write validation validation step step any)
        local i j tmp
        for ((i = ${#bag[@]} - 1; i > 0; i--)); do
            j=$((RANDOM % (i + 1))); tmp=${bag[i]}; bag[i]=${bag[j]}; bag[j]=$tmp
        done
    fi
    target=${bag[0]}
    bag=("${bag[@]:1}")
}

runno=1
run=$work/run$runno
attempt=0
done_kills=0
prev_step=0
t_start=$SECONDS
while :; do
    attempt=$((attempt + 1))
    log=$run.attempt$attempt.log
    if [ -f "$run/last.safetensors" ]; then
        "$bin" train --resume "$run" > "$log" 2>&1 &
    else
        rm -rf "$run"
        "$bin" train "$data" --out "$run" "${train_args[@]}" > "$log" 2>&1 &
    fi
    pid=$!
    if [ "$done_kills" -ge "$kills" ]; then
        # Enough kills: let this run finish.
        if wait "$pid"; then check_finished "$run" "$log"; else
            fail "$run: the resumed trainer failed on its own (exit $?; see $log)"; fi
        break
    fi
    next_target
    wait_for "$target" "$run" "$log" "$pid"
    phase=$(phase_of "$run" "$log")
    kill -9 "$pid" 2>/dev/null || true # it may have finished meanwhile: wait says
    set +e; wait "$pid" 2>/dev/null; rc=$?; set -e # (2>: no "Killed" line from bash)
    if [ "$rc" -eq 0 ]; then # it finished before the kill landed
        check_finished "$run" "$log"
        runno=$((runno + 1)); run=$work/run$runno; prev_step=0
        continue
    fi
    if [ "$rc" -ne 137 ]; then
        fail "$run: the trainer exited $rc on its own, not by the kill (see $log)"
        runno=$((runno + 1)); run=$work/run$runno; prev_step=0
        continue
    fi
    done_kills=$((done_kills + 1))
    phase_kills[$phase]=$(( ${phase_kills[$phase]:-0} + 1 ))
    # After the kill: the checkpoint on disk is whole, and never older than before.
    if [ -f "$run/last.safetensors" ]; then
        if "$bin" eval "$run" "$data" --checkpoint "$run/last.safetensors" --clips-per-video 1 \
            --devices cpu --threads 1 -q > "$log.eval" 2>&1; then pass; else
            fail "kill $done_kills ($phase): $run/last.safetensors does not load (see $log.eval)"
            cp "$run/last.safetensors" "$log.last.safetensors" 2>/dev/null || true
        fi
        s=$(ckpt_step "$run/last.safetensors" || true)
        if [ -n "$s" ] && [ "$s" -ge "$prev_step" ]; then pass; prev_step=$s; else
            fail "kill $done_kills ($phase): checkpoint step '${s}' after $prev_step"; fi
    elif [ "$prev_step" -gt 0 ]; then
        fail "kill $done_kills ($phase): $run/last.safetensors vanished"
    fi
    printf '  kill %2d  %-17s step %3s  temporary files %d  %3ds\n' "$done_kills" "$phase" \
        "${prev_step}" "$(temps "$run" | grep -c . || true)" $((SECONDS - t_start))
done

echo "== kills by phase (observed just before each kill):"
for p in startup step checkpoint-write validation; do
    printf '  %-17s %d\n' "$p" "${phase_kills[$p]:-0}"
done
echo "== $done_kills kills, $finished_runs run(s) finished, $checks checks, $failed failed, $((SECONDS - t_start)) s"
[ "$failed" -eq 0 ] || exit 1
echo "✓ soak-kill passed"
