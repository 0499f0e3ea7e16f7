/*
 * test_shortcut.c: a frame rate, size, codec or pixel format that gives a class away is
 * said (pipeline/data/dataset/dataset_shortcut.c): by `scan` (text and --json) and by
 * `train` as a warning. The files are made here with the ffmpeg command at known rates,
 * sizes and codecs, so which class each property gives away is known by construction:
 *   fps/: a at 30 fps, b at 15, c at 25 (one of c's four portrait: a size one file has
 *     alone never counts), d three at 50 and one at 20 (75%: under the 80% line) — the
 *     frame rate gives a, b and c away, nothing else does;
 *   codec/: a MPEG-4 (yuv420p), b MJPEG (yuvj420p), each at 30 and 15 fps — the codec and
 *     the pixel format give both away, the frame rate neither;
 *   mixed/: the same codecs and rates spread over both classes — nothing;
 *   seg/: three segments of each file (labels.csv start, end): a two files at 30 fps, b one
 *     at 15 — the frame rate gives a away, and b's one file not.
 * copies/: x/dup.mp4 a copy of x/v1.mp4 (one label), y/dup.mp4 of x/v0.mp4 (two labels), a
 *   hard link y/hard.mp4 to x/v2.mp4 (the same file, not a copy: dataset.c names it), and
 *   x/v1.mp4 and y/v1.mp4 of one size and other bytes (their titles): scan lists the two
 *   copies, train and eval warn of them.
 * And the run trained on codec/ (15 and 30 fps) records its training videos' rates
 * (config.json "train_fps"): predict, --timeline, embed and eval warn of videos at 60 and
 * 10 fps (outside 15-30 by more than 1.25x: their clips span another time), not at 36;
 * trained with --stride-jitter 1 (strides 1 and 2: clips as of 7.5-30 fps), at 60 only;
 * train warns of a --val-dir video at 60 fps. predict and embed count a video only once
 * its clips are read: one that opens and then fails is in neither count.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/run/run_model.h"
#include "tests/apputil.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

static const char *bin, *dir;

/* One 0.4 s test pattern at rate fps, WxH, codec ("mpeg4" or "mjpeg"). */
static void make(const char *set, const char *cls, int k, int fps, const char *size,
                 const char *codec) {
    /* the title makes each file's bytes its own (the pictures are the same) */
    TCHECK(vt_test_sh("mkdir -p '%s/%s/%s' && ffmpeg -nostdin -v error -y -f lavfi -i "
                      "testsrc=size=%s:rate=%d:duration=0.4 -c:v %s -metadata title=%s/%s/v%d "
                      "'%s/%s/%s/v%d.%s'", dir, set, cls, size, fps, codec, set, cls, k, dir, set,
                      cls, k, !strcmp(codec, "mjpeg") ? "mkv" : "mp4") == 0,
           "ffmpeg: %s/%s/v%d", set, cls, k);
}

/* A 60 fps video that opens (its first fifth decodes) and whose later clips do not (the
 * rest of its mdat zeroed), so predict and embed skip it: it is in neither count of the
 * frame-rate warning, which said "2 of 3" of v0 (60 fps), v1 (36) and it (issue: counted
 * once it opened). And the warning's ratio with one decimal: %.2g printed 120x as
 * "1.2e+02x". */
static void fps_counts(const char *run, const char *v0, const char *v1) {
    char half[4300], log[4300];
    snprintf(half, sizeof half, "%s/half.mp4", dir);
    TCHECK(vt_test_sh("ffmpeg -nostdin -v error -y -f lavfi -i testsrc2=size=64x48:rate=60:"
                      "duration=2 -c:v mpeg4 -g 10 -movflags +faststart '%s'", half) == 0,
           "ffmpeg: half.mp4");
    long len = 0;
    char *b = vt_test_slurp(half, &len);
    char *md = b ? memmem(b, (size_t)len, "mdat", 4) : NULL;
    TCHECK(md != NULL, "half.mp4 has no mdat");
    if (!md) {
        free(b);
        return;
    }
    long from = (md - b) + 4 + (len - (md - b) - 4) / 5;
    memset(b + from, 0, (size_t)(len - from));
    FILE *f = fopen(half, "wb");
    TCHECK(f && fwrite(b, 1, (size_t)len, f) == (size_t)len && fclose(f) == 0, "write half.mp4");
    free(b);
    const char *cmds[2] = {"predict", "embed"};
    char out_arg[4400];
    snprintf(out_arg, sizeof out_arg, "--out '%s/half.npy'", dir);
    for (int k = 0; k < 2; k++) {
        snprintf(log, sizeof log, "%s/%s_half.txt", dir, cmds[k]);
        vt_test_sh("'%s' %s '%s' '%s' %s %s %s > '%s' 2>&1", bin, cmds[k], run, half, v0, v1,
                   k ? out_arg : "", log);
        TCHECK(vt_test_file_has(log, "half.mp4: no frame of the clip decoded") &&
                   vt_test_file_has(log, "1 of 2 videos is at a frame rate outside") &&
                   vt_test_file_has(log, "v0.mp4: 60 fps)"),
               "%s: a video skipped after it opened is counted (%s)", cmds[k], log);
    }
    vt_run_model *m = calloc(1, sizeof *m);
    m->opts.clip_t = 16;
    m->opts.stride = 1;
    m->train_fps[0] = m->train_fps[1] = 1; /* a time-lapse run: 120 fps is 120x */
    snprintf(log, sizeof log, "%s/ratio.txt", dir);
    vt_test_capture_begin(log);
    vt_run_fps_warn("predict", "video", m, 1, 1, "fast.mp4", 120);
    vt_run_fps_warn("predict", "video", m, 1, 1, "fast.mp4", 1.5);
    char *out = vt_test_capture_end(log);
    TCHECK(out && strstr(out, "spans 120.0x less") && strstr(out, "spans 1.5x less") &&
               !strstr(out, "e+"), "the ratio: %s", out ? out : "");
    free(out);
    free(m);
}

/* RUN/eval.json's number under key is `want` (checked). */
static void eval_count(const char *run, const char *key, double want) {
    char p[4400];
    snprintf(p, sizeof p, "%s/%s/eval.json", dir, run);
    cJSON *j = vt_test_read_json(p);
    const cJSON *v = cJSON_GetObjectItem(j, key);
    TCHECK(cJSON_IsNumber(v) && v->valuedouble == want, "%s: %s %g, want %g", p, key,
           cJSON_IsNumber(v) ? v->valuedouble : -1, want);
    cJSON_Delete(j);
}

/* scan --json's shortcuts as "property:class:given/of" lines, sorted, into buf. */
static void shortcuts(const char *set, const char *args, char *buf, size_t n) {
    buf[0] = 0;
    char p[4400];
    snprintf(p, sizeof p, "%s/%s.json", dir, set);
    TCHECK(vt_test_sh("'%s' scan '%s/%s' %s --no-leaks --json > '%s' 2> /dev/null", bin, dir, set,
                      args, p) == 0, "scan %s", set);
    cJSON *j = vt_test_read_json(p);
    const cJSON *a = cJSON_GetObjectItem(j, "shortcuts");
    TCHECK(cJSON_IsArray(a), "%s: scan --json has no shortcuts array", set);
    for (const cJSON *e = a ? a->child : NULL; e; e = e->next) {
        size_t l = strlen(buf);
        snprintf(buf + l, n - l, "%s:%s:%d/%d;",
                 cJSON_GetObjectItem(e, "property")->valuestring,
                 cJSON_GetObjectItem(e, "class")->valuestring,
                 (int)cJSON_GetObjectItem(e, "given")->valuedouble,
                 (int)cJSON_GetObjectItem(e, "of")->valuedouble);
    }
    cJSON_Delete(j);
}

int main(void) {
    bin = vt_test_bin("test_shortcut");
    if (!bin)
        return VT_TEST_SKIP;
    dir = vt_test_dir("shortcut");
    TCHECK(vt_test_sh("rm -rf '%s/fps' '%s/codec' '%s/mixed' '%s/other' '%s/seg' '%s/valdir' "
                      "'%s/copies'", dir, dir, dir, dir, dir, dir, dir) == 0, "clean");
    for (int k = 0; k < 4; k++) {
        make("fps", "a", k, 30, "64x48", "mpeg4");
        make("fps", "b", k, 15, "64x48", "mpeg4");
        make("fps", "c", k, 25, k == 3 ? "48x64" : "64x48", "mpeg4");
        make("fps", "d", k, k == 3 ? 20 : 50, "64x48", "mpeg4");
        make("codec", "a", k, k % 2 ? 15 : 30, "64x48", "mpeg4");
        make("codec", "b", k, k % 2 ? 15 : 30, "64x48", "mjpeg");
        make("mixed", "a", k, k % 2 ? 15 : 30, "64x48", k < 2 ? "mpeg4" : "mjpeg");
        make("mixed", "b", k, k % 2 ? 30 : 15, "64x48", k < 2 ? "mjpeg" : "mpeg4");
    }
    char got[1024];
    shortcuts("fps", "", got, sizeof got);
    TCHECK(!strcmp(got, "frame rate:a:4/4;frame rate:b:4/4;frame rate:c:4/4;"),
           "fps/: shortcuts %s", got);
    shortcuts("codec", "", got, sizeof got);
    TCHECK(!strcmp(got, "codec:a:4/4;codec:b:4/4;pixel format:a:4/4;pixel format:b:4/4;"),
           "codec/: shortcuts %s", got);
    shortcuts("mixed", "", got, sizeof got);
    TCHECK(!strcmp(got, ""), "mixed/: shortcuts %s", got);
    /* segments (a labels file's start and end): a's 30 fps is in two files, b's 15 in one,
     * however many segments of it b has */
    make("seg", "a", 0, 30, "64x48", "mpeg4");
    make("seg", "a", 1, 30, "64x48", "mpeg4");
    make("seg", "b", 0, 15, "64x48", "mpeg4");
    char csv[4400], args[4500];
    snprintf(csv, sizeof csv, "%s/seg.csv", dir);
    FILE *f = fopen(csv, "w");
    TCHECK(f != NULL, "%s", csv);
    fprintf(f, "path,label,start,end\n");
    for (int k = 0; k < 3; k++)
        for (int s = 0; s < 3; s++)
            fprintf(f, "%s/v%d.mp4,%s,%g,%g\n", k < 2 ? "a" : "b", k % 2, k < 2 ? "a" : "b",
                    0.1 * s, 0.1 * (s + 1));
    fclose(f);
    snprintf(args, sizeof args, "--labels '%s'", csv);
    shortcuts("seg", args, got, sizeof got);
    TCHECK(!strcmp(got, "frame rate:a:6/6;"), "seg/: shortcuts %s", got);

    /* copies */
    char cpath[4400];
    for (int k = 0; k < 3; k++) {
        make("copies", "x", k, 30, "64x48", "mpeg4");
        make("copies", "y", k, 30, "64x48", "mpeg4");
    }
    TCHECK(vt_test_sh("cd '%s/copies' && cp x/v1.mp4 x/dup.mp4 && cp x/v0.mp4 y/dup.mp4 && "
                      "ln x/v2.mp4 y/hard.mp4 && test $(stat -c %%s x/v1.mp4) = "
                      "$(stat -c %%s y/v1.mp4) && ! cmp -s x/v1.mp4 y/v1.mp4", dir) == 0,
           "copies/: the copy, the link, one size of other bytes");
    snprintf(cpath, sizeof cpath, "%s/copies.json", dir);
    TCHECK(vt_test_sh("'%s' scan '%s/copies' --no-leaks --json > '%s' 2> /dev/null", bin, dir,
                      cpath) == 0, "scan copies/");
    cJSON *cj0 = vt_test_read_json(cpath);
    const cJSON *cpa = cJSON_GetObjectItem(cj0, "copies");
    char pairs[512] = "";
    for (const cJSON *e = cpa ? cpa->child : NULL; e; e = e->next) {
        size_t l = strlen(pairs);
        snprintf(pairs + l, sizeof pairs - l, "%s=%s:%d;",
                 cJSON_GetObjectItem(e, "path")->valuestring,
                 cJSON_GetObjectItem(e, "same_bytes_as")->valuestring,
                 cJSON_IsTrue(cJSON_GetObjectItem(e, "same_labels")));
    }
    TCHECK(!strcmp(pairs, "x/v1.mp4=x/dup.mp4:1;y/dup.mp4=x/v0.mp4:0;") ||
               !strcmp(pairs, "y/dup.mp4=x/v0.mp4:0;x/v1.mp4=x/dup.mp4:1;"),
           "copies/: scan --json copies %s", pairs);
    cJSON_Delete(cj0);
    snprintf(cpath, sizeof cpath, "%s/copies_train.txt", dir);
    TCHECK(vt_test_sh("'%s' train '%s/copies' --out '%s/runc' --force --model tiny --epochs 1 "
                      "--batch 4 --clip 4x32 --workers 1 --val-split 0 --precise-bn 0 --quiet "
                      "> '%s' 2>&1", bin, dir, dir, cpath) == 0, "train copies/ (%s)",
           cpath);
    TCHECK(vt_test_file_has(cpath, "vidtrain train: warning: among the training videos, 2 files "
                                 "hold another's bytes under a second name (one of two labels "
                                 "is wrong") &&
           vt_test_file_has(cpath, "  y/dup.mp4 = x/v0.mp4 (other labels)"),
           "train warns of the copies (%s)", cpath);
    snprintf(cpath, sizeof cpath, "%s/copies_eval.txt", dir);
    TCHECK(vt_test_sh("'%s' eval '%s/runc' --split train -q > '%s' 2>&1", bin, dir, cpath) == 0 &&
           vt_test_file_has(cpath, "vidtrain eval: warning: among the videos evaluated, 2 files"),
           "eval warns of the copies (%s)", cpath);
    eval_count("runc", "copies", 2);

    /* the text report, and train's warning at its start */
    char log[4400];
    snprintf(log, sizeof log, "%s/scan.txt", dir);
    TCHECK(vt_test_sh("'%s' scan '%s/fps' --no-leaks > '%s' 2>&1", bin, dir, log) == 0, "scan");
    TCHECK(vt_test_file_has(log, "shortcut: the frame rate alone tells these classes apart") &&
           vt_test_file_has(log, "class 'b': 4 of its 4 training videos at 15 fps") &&
           !vt_test_file_has(log, "class 'd'"), "scan's text names the shortcut (%s)", log);
    snprintf(log, sizeof log, "%s/train.txt", dir);
    TCHECK(vt_test_sh("'%s' train '%s/codec' --out '%s/run' --force --model tiny --epochs 1 "
                      "--batch 4 --clip 4x32 --workers 1 --val-split 0 --precise-bn 0 --quiet > "
                      "'%s' 2>&1", bin, dir, dir, log) == 0, "train (%s)", log);
    TCHECK(vt_test_file_has(log, "vidtrain train: warning: the codec alone tells these classes "
                                 "apart") &&
           vt_test_file_has(log, "class 'a': 4 of its 4 training videos in mpeg4"),
           "train warns of the codec (%s)", log);
    /* under mpirun, once: every rank opens the data, only rank 0 speaks */
    const char *mpirun = getenv("VT_MPIRUN");
    if (mpirun && *mpirun) {
        setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1); /* CI runs as root in a container */
        setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
        /* sanitizer runs: Open MPI's own allocations suppressed by name (test_mpi.c's why) */
        const char *asan = getenv("ASAN_OPTIONS");
        char env[1200];
        snprintf(env, sizeof env, "OMPI_MCA_mca_base_component_disable_dlclose=1%s%s%s",
                 asan ? " ASAN_OPTIONS='" : "", asan ? asan : "",
                 asan ? ":fast_unwind_on_malloc=0'" : "");
        snprintf(log, sizeof log, "%s/train_mpi.txt", dir);
        TCHECK(vt_test_sh("%s '%s' --oversubscribe --bind-to none -np 2 '%s' train '%s/codec' --out "
                          "'%s/run_mpi' --force --model tiny --epochs 1 --batch 4 --clip 4x32 "
                          "--workers 1 --val-split 0 --precise-bn 0 --quiet > '%s' 2>&1 && "
                          "test \"$(grep -c 'the codec alone tells' '%s')\" = 1", env, mpirun, bin,
                          dir, dir, log, log) == 0,
               "mpirun -np 2 train warns of the codec once (%s)", log);
    }

    /* frame rates outside the training videos' */
    char cfg[4400];
    snprintf(cfg, sizeof cfg, "%s/run/config.json", dir);
    cJSON *cj = vt_test_read_json(cfg);
    const cJSON *tf = cJSON_GetObjectItem(cj, "train_fps");
    TCHECK(cJSON_GetArraySize(tf) == 2 && cJSON_GetArrayItem(tf, 0)->valuedouble == 15 &&
               cJSON_GetArrayItem(tf, 1)->valuedouble == 30, "config.json train_fps [15, 30]");
    cJSON_Delete(cj);
    const int rates[3] = {60, 36, 10};
    for (int k = 0; k < 3; k++)
        make("other/test/a", "", k, rates[k], "64x48", "mpeg4");
    char vids[3][4300], both[13000];
    for (int k = 0; k < 3; k++)
        snprintf(vids[k], sizeof vids[k], "'%s/other/test/a/v%d.mp4'", dir, k);
    snprintf(both, sizeof both, "%s %s %s", vids[0], vids[1], vids[2]);
    const char *want = "2 of 3 videos are at a frame rate outside the 15-30 fps the run trained on";
    snprintf(log, sizeof log, "%s/predict.txt", dir);
    TCHECK(vt_test_sh("'%s' predict '%s/run' %s > '%s' 2>&1", bin, dir, both, log) == 0 &&
           vt_test_file_has(log, "vidtrain predict: warning: ") && vt_test_file_has(log, want) &&
           vt_test_file_has(log, "v0.mp4: 60 fps)"), "predict warns of 60 and 10 fps (%s)", log);
    snprintf(log, sizeof log, "%s/predict.json", dir);
    TCHECK(vt_test_sh("'%s' predict '%s/run' %s --json > '%s' 2> /dev/null", bin, dir, both,
                      log) == 0, "predict --json");
    cJSON *pj = vt_test_read_json(log);
    for (int k = 0; k < 3; k++) {
        const cJSON *fo = cJSON_GetObjectItem(cJSON_GetArrayItem(pj, k), "fps_outside_training");
        TCHECK((k == 1) == (fo == NULL) && (!fo || fo->valuedouble == rates[k]),
               "predict --json: v%d (%d fps) fps_outside_training %s", k, rates[k],
               fo ? "given" : "absent");
    }
    cJSON_Delete(pj);
    snprintf(log, sizeof log, "%s/timeline.txt", dir);
    TCHECK(vt_test_sh("'%s' predict '%s/run' %s %s --timeline > '%s' 2>&1", bin, dir, vids[1],
                      vids[2], log) == 0 &&
           vt_test_file_has(log, "1 of 1 video is at a frame rate outside") &&
           vt_test_file_has(log, "v2.mp4: 10 fps)") && !vt_test_file_has(log, "v1.mp4: 36"),
           "--timeline warns of the 10 fps video only (%s)", log);
    snprintf(log, sizeof log, "%s/predict1.txt", dir); /* one of two: "1 of 2 videos is" */
    TCHECK(vt_test_sh("'%s' predict '%s/run' %s %s > '%s' 2>&1", bin, dir, vids[1], vids[2],
                      log) == 0 &&
           vt_test_file_has(log, "1 of 2 videos is at a frame rate outside"),
           "predict: one video of two outside (%s)", log);
    /* validation videos outside the training rates, said when training starts */
    make("valdir", "a", 0, 60, "64x48", "mpeg4");
    make("valdir", "b", 0, 30, "64x48", "mjpeg");
    snprintf(log, sizeof log, "%s/train_vd.txt", dir);
    TCHECK(vt_test_sh("'%s' train '%s/codec' --val-dir '%s/valdir' --out '%s/run_vd' --force "
                      "--model tiny --epochs 1 --batch 4 --clip 4x32 --workers 1 --precise-bn 0 "
                      "--quiet > '%s' 2>&1", bin, dir, dir, dir, log) == 0 &&
           vt_test_file_has(log, "vidtrain train: warning: 1 of 2 validation videos is at a "
                                 "frame rate outside the 15-30 fps the run trained on (") &&
           vt_test_file_has(log, "valdir/a/v0.mp4: 60 fps): a 4-frame clip at stride 1 "),
           "train warns of a --val-dir video at 60 fps (%s)", log);
    /* --stride-jitter 1 trained on clips at strides 1 and 2: as of 7.5-30 fps at stride 1,
     * so 10 fps is inside and 60 still outside */
    snprintf(log, sizeof log, "%s/train_j.txt", dir);
    TCHECK(vt_test_sh("'%s' train '%s/codec' --out '%s/run_j' --force --model tiny --epochs 1 "
                      "--batch 4 --clip 4x32 --stride-jitter 1 --workers 1 --val-split 0 "
                      "--precise-bn 0 --quiet > '%s' 2>&1", bin, dir, dir, log) == 0,
           "train --stride-jitter 1 (%s)", log);
    snprintf(log, sizeof log, "%s/predict_j.txt", dir);
    TCHECK(vt_test_sh("'%s' predict '%s/run_j' %s > '%s' 2>&1", bin, dir, both, log) == 0 &&
           vt_test_file_has(log, "1 of 3 videos is at a frame rate outside the 15-30 fps the "
                                 "run trained on, its stride jitter 1 making clips as of 7.5-30 "
                                 "fps (") &&
           vt_test_file_has(log, "v0.mp4: 60 fps): a 4-frame clip at stride 1 spans 2.0x less"),
           "predict: the stride jitter's rates are inside (%s)", log);
    snprintf(log, sizeof log, "%s/embed.txt", dir);
    TCHECK(vt_test_sh("'%s' embed '%s/run' %s --out '%s/e.npy' > '%s' 2>&1", bin, dir, both, dir,
                      log) == 0 && vt_test_file_has(log, "vidtrain embed: warning: ") &&
           vt_test_file_has(log, want), "embed warns (%s)", log);
    snprintf(cfg, sizeof cfg, "%s/run", dir);
    fps_counts(cfg, vids[0], vids[1]);
    snprintf(log, sizeof log, "%s/eval.txt", dir);
    TCHECK(vt_test_sh("'%s' eval '%s/run' '%s/other' -q > '%s' 2>&1", bin, dir, dir, log) == 0 &&
           vt_test_file_has(log, "vidtrain eval: warning: ") && vt_test_file_has(log, want),
           "eval warns (%s)", log);
    eval_count("run", "fps_outside_training", 2);
    return vt_test_done("test_shortcut");
}
