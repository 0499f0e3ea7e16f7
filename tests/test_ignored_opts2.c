/*
 * test_ignored_opts2.c: test_ignored_opts's rule for the commands other than train: an
 * option that would change nothing beside the others is refused with why and what to do
 * (exit 2), never taken without a word; and an option given at its default value is
 * given (the checks ask app/opts.h's vt_opts_given, never whether a value differs):
 *   - bench decode: --starts-out, --workers, --seed, --clips-per-video, --clip, --stride
 *     with --mode sequential (--starts-out wrote no file, exit 0), the clip options and
 *     --list with --probe, --clip/--stride/--mode with --list;
 *   - bench step: --tf32 and --precision together (the later one won in silence);
 *     --bucket-mb with one tower (no buckets; exact sums: refused before), --tower-split
 *     with one tower (nothing to split), --pageable with CPU towers only (no page-locked
 *     memory to leave out), --sync-bn for a model without batch norm or with one tower
 *     (nothing to sync, no average to skip since the gradient gate: tower_worker.c);
 *     --precision tf32 on CPU towers only (they compute fp32), for plan, predict, eval and
 *     embed too (app/device_opts.c vt_devices_check_precision);
 *   - bench conv: --small beside --clip, --batch or --reps (whichever came later won);
 *   - prep: --gop beside --codec mjpeg (forced to 1), --crf 0 for mpeg4 (the encoder took
 *     its default 4 while DST recorded 0), --fold/--list-format without --lists;
 *   - scan: --fold/--list-format without --lists, --fold with a Kinetics list, --group
 *     without --val-split or with --val-split 0, --val-split on a folder that has val
 *     videos (none drawn);
 *   - scan, bench decode, eval, predict, embed, prep: --frame-rate with no frame folder
 *     among the inputs (a video file's frames carry their own timestamps; prep checks
 *     before DST is made, so a refusal leaves nothing);
 *   - predict --timeline: --timeout with no network URL or camera among the inputs,
 *     --reconnect with no network URL (a file, pipe or camera is never reopened);
 *   - the device options of every command: --threads with no tower of the cpu backend
 *     (cpu-ref runs one thread), --backend with no plain cpu entry to give a backend to;
 *   - eval, predict (--timeline too), embed and plan: --tower-split with one tower (nothing
 *     to split; app/run/run_model.c); plan: --checkpoint-act for a model without
 *     transformer blocks (it only warned for `on`).
 * Each refusal is checked for its exit code and its reason; the same options where they
 * do act are still taken.
 */
#include <stdlib.h>
#include <string.h>

#include "tests/apputil.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

int main(void) {
    const char *bin = vt_test_bin("test_ignored_opts2");
    if (!bin)
        return VT_TEST_SKIP;
    char dir[4096], err[4200];
    snprintf(dir, sizeof dir, "%s", vt_test_dir("ignored_opts2"));
    snprintf(err, sizeof err, "%s/e.err", dir);
    TCHECK(vt_test_synth(bin, dir, "--classes 2 --train 2 --val 1 --test 1 --frames 12 "
                                   "--no-h264 --threads 1") == 0, "synth");
    int rc = vt_test_sh("cd '%s' && '%s' train data --out run --model tiny --clip 4x32 --batch 2 "
                        "--epochs 1 --max-steps 1 -q --devices cpu:1 > /dev/null 2>&1", dir, bin);
    TCHECK(rc == 0, "train: exit %d", rc);
    /* %V: a video of the set; the commands run in dir */
    static const char *const refused[][2] = {
        {"bench decode %V --mode sequential --starts-out s.tsv", "--starts-out: clip mode's"},
        {"bench decode %V --mode sequential --workers 1", "--workers: clip mode's"},
        {"bench decode %V --mode sequential --clip 16", "--clip: clip mode's"},
        {"bench decode %V --probe --list", "--list: not with --probe"},
        {"bench decode %V --probe --seed 1", "--seed: not with --probe"},
        {"bench decode %V --list --stride 2", "--stride: not with --list"},
        {"bench step --precision bf16 --tf32", "--tf32 is --precision tf32"},
        {"bench step --tf32 --precision=tf32", "--tf32 is --precision tf32"},
        {"bench step --devices cpu:1 --precision tf32", "TF32 is a GPU mode"},
        {"bench step --model tiny --clip 4x16x16 --batch 2 --devices cpu:2 --bucket-mb 1 "
         "--steps 1 --warmup 0", "there are no buckets"},
        {"bench step --model tiny --clip 4x16x16 --batch 2 --devices cpu:1 --tower-split speed "
         "--steps 1 --warmup 0", "nothing to split"},
        {"bench step --model tiny --clip 4x16x16 --batch 2 --devices cpu:1 --pageable --steps 1 "
         "--warmup 0", "no tower's backend has any"},
        {"bench step --model tiny --clip 4x16x16 --batch 2 --devices cpu:1 --sync-bn --steps 1 "
         "--warmup 0", "one tower has no statistics to sync"},
        {"bench step --model tiny_nobn --clip 4x16x16 --batch 2 --devices cpu:2 --sync-bn "
         "--steps 1 --warmup 0", "tiny_nobn has no batch norm"},
        {"plan --devices cpu:2 --precision tf32", "TF32 is a GPU mode"},
        {"bench conv --batch 8 --small", "--small is --clip 8x56 --batch 4 --reps 2"},
        {"bench conv --small --reps 2", "--small is --clip 8x56 --batch 4 --reps 2"},
        {"prep data p --codec mjpeg --gop 8", "mjpeg makes every frame a keyframe"},
        {"prep data p --codec mpeg4 --crf 0", "qscale from 1 to 31"},
        {"prep data p --fold 1", "--fold says how --lists is read"},
        {"prep data p --frame-rate 10", "data holds none"},
        {"prep data p --list-format ucf101", "--list-format says how --lists is read"},
        {"scan data --fold 1", "--fold says how --lists is read"},
        {"scan data --lists k.csv --list-format kinetics --fold 2", "one split column"},
        {"scan data --group auto", "not without --val-split"},
        {"scan data --val-split 0.3", "has val videos"},
        {"scan data/train --val-split 0 --group auto", "not with --val-split 0"},
        {"scan data --frame-rate 10", "data holds none"},
        {"bench decode %V --frame-rate 10", "none of the inputs is one"},
        {"eval run data --frame-rate 10 -q", "data holds none"},
        {"predict run %V --frame-rate 10", "none of the inputs is one"},
        {"embed run %V --out e.npy --frame-rate 10", "none of the inputs is one"},
        {"embed run data --out e.npy --frame-rate 10", "data holds none"},
        {"devices --devices cpu-ref --threads 2", "threads per tower of the cpu backend"},
        {"devices --devices cpu:1 --backend cpu-ref --threads 1", "threads per tower of the cpu"},
        {"devices --devices cpu-ref:2 --backend cpu", "--backend cpu: it picks the backend"},
        {"predict run %V --devices cpu:1 --precision tf32", "TF32 is a GPU mode"},
        {"predict run %V --devices cpu-ref --threads 2", "threads per tower of the cpu"},
        {"eval run data --devices cpu:1 --precision tf32 -q", "TF32 is a GPU mode"},
        {"predict run %V --timeline --timeout 10s", "none of the inputs is one"},
        {"predict run - %V --timeline --reconnect 5", "none of the inputs is one"},
        {"predict run /dev/video97 --timeline --reconnect 0", "a camera is never reopened"},
        {"embed run %V --out e.npy --devices cpu:1 --precision tf32", "TF32 is a GPU mode"},
        {"eval run data --devices cpu:1 --tower-split equal -q", "nothing to split"},
        {"predict run %V --tower-split memory", "nothing to split"},
        {"predict run %V --timeline --tower-split speed", "nothing to split"},
        {"embed run %V --out e.npy --tower-split equal", "nothing to split"},
        {"plan --model tiny --clip 4x32x32 --batch 4 --devices cpu:1 --tower-split equal",
         "nothing to split"},
        {"plan --model tiny --clip 4x32x32 --batch 4 --checkpoint-act off",
         "tiny has no transformer blocks"},
    };
    /* the first video of a class (its container depends on synth's rotation) */
    static const char video[] = "\"$(ls -d data/test/move_left/* | head -1)\"";
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        char args[512];
        const char *v = strstr(refused[i][0], "%V");
        if (v)
            snprintf(args, sizeof args, "%.*s%s%s", (int)(v - refused[i][0]), refused[i][0],
                     video, v + 2);
        else
            snprintf(args, sizeof args, "%s", refused[i][0]);
        rc = vt_test_sh("cd '%s' && '%s' %s > /dev/null 2> e.err", dir, bin, args);
        printf("%-62s exit %d\n", args, rc);
        TCHECK(rc == 2 && vt_test_file_has(err, refused[i][1]),
               "%s: exit %d, want 2 naming why ('%s')", args,
               rc, refused[i][1]);
    }
    /* --bucket-mb with one tower (float sums, so not refused for exact ones): no gradients
     * of another tower to sum during backward; it was taken and the step measured the same */
    rc = vt_test_sh("cd '%s' && VT_EXACT_SUMS=0 '%s' bench step --model tiny --clip 4x16x16 "
                    "--batch 2 --devices cpu:1 --bucket-mb 1 --steps 1 --warmup 0 > /dev/null 2> "
                    "e.err", dir, bin);
    TCHECK(rc == 2 && vt_test_file_has(err, "it has one, so there are no buckets"),
           "bench step --bucket-mb with one tower: exit %d, want 2 naming why", rc);
    TCHECK(vt_test_sh("cd '%s' && test -s \"$(ls -d data/test/move_left/* | head -1)\"", dir)
           == 0, "no video in data/test/move_left");
    TCHECK(vt_test_sh("cd '%s' && test ! -e s.tsv && test ! -e p && test ! -e e.npy", dir) == 0,
           "a refused command left an output");
    /* where they act, the same options are taken */
    char fine[][160] = {
        "bench decode %V --mode sequential --threads 1 --short-side 64",
        "bench decode %V --probe --clip 4 --stride 1 --short-side 64",
        "bench decode %V --list --short-side 64",
        "devices --devices cpu:1,cpu-ref:1 --threads 1",
        "devices --devices cpu:1 --backend cpu-ref",
        "scan data/train --val-split 0.5 --group auto --no-leaks",
        "predict run %V --devices cpu:1 --threads 1 --clips-per-video 1",
        "predict run %V --devices cpu:2 --threads 1 --tower-split equal --clips-per-video 1",
        "plan --model tiny --clip 4x32x32 --batch 4 --devices cpu:2 --tower-split equal",
        "plan --model vit_test --clip 4x32x32 --batch 4 --checkpoint-act off",
        /* a frame folder (one video, as in a dataset: its images were listed one by one) */
        "bench decode fr --frame-rate 10 --mode sequential --short-side 64",
        /* ... and below a class folder, where prep reads it */
        "prep frd pf --frame-rate 10 --jobs 1",
    };
    TCHECK(vt_test_sh("cd '%s' && mkdir -p fr frd/a && ffmpeg -v error -y -f lavfi -i "
                      "testsrc2=s=64x48:r=30 -frames:v 12 fr/%%03d.png && cp -r fr frd/a/", dir)
           == 0, "a frame folder");
    for (size_t i = 0; i < sizeof fine / sizeof *fine; i++) {
        char args[512];
        const char *v = strstr(fine[i], "%V");
        if (v)
            snprintf(args, sizeof args, "%.*s%s%s", (int)(v - fine[i]), fine[i], video, v + 2);
        else
            snprintf(args, sizeof args, "%s", fine[i]);
        rc = vt_test_sh("cd '%s' && '%s' %s > /dev/null 2> e.err", dir, bin, args);
        printf("%-62s exit %d\n", args, rc);
        TCHECK(rc == 0, "%s: exit %d (refused where it acts?)", args, rc);
    }
    return vt_test_done("test_ignored_opts2");
}
