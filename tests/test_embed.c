/*
 * test_embed.c: `vidtrain embed` (app/stream/cmd_embed.c, docs/embed.md) against `predict` and
 * the ffmpeg command, read back by an independent reader (tests/check_embed.py: numpy
 * alone, the safetensors header parsed by hand, the classifier taken from the run's
 * checkpoint by the name the embeddings' metadata gives).
 *
 * 1. The classifier applied to the written embeddings reproduces predict (fp32, K = 4
 *    clips x 3 crops): softmax(W e + b) of each --per-clip row against predict's own
 *    per-clip probabilities (--dump-input), and their mean over a video against
 *    predict's reported probabilities; with K = 1 (one clip: its features ARE the mean)
 *    softmax(W e + b) of the per-video row against predict directly. NMSE <= 1e-10 each.
 *    The per-video rows are the mean of the per-clip rows. Predict averages
 *    PROBABILITIES, and the classifier of a mean feature is the softmax of the mean
 *    LOGITS, so for K > 1 the exact statement is the per-clip one (docs/embed.md).
 *    BF16 (cpu-ref) once, per clip, within bf16's rounding of the logits.
 * 2. Segments: a labels file with start/end over the dataset folder gives a row per
 *    segment, equal to the embedding of that segment cut out by ffmpeg (lossless), and a
 *    segment past the end of the file equals the whole file.
 * 3. --timeline: the windows predict --timeline has, and a window's row equals the
 *    embedding of the window cut out by ffmpeg.
 * 4. Errors: a missing file is named and skipped, a bad --out is a usage error.
 * 5. Damage: a stream whose P-frame the decoder repairs (tests/make_media.sh's
 *    concealed.mp4, checked against the ffmpeg command) is marked in the CSV
 *    (decode_errors, as many as predict --json counts for the same clips, and a warning),
 *    a clean one is not; --timeline rows carry predict --timeline's decode_errors window
 *    by window.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/stream/timeline.h"
#include "tests/apputil.h"
#include "tests/jsonlines.h"
#include "tests/testutil.h"

static const char *g_bin, *g_dir, *g_py;

/* The figure `name` (field `field`, 0 or 1) that check_embed.py printed into
 * g_dir/check_<tag>.txt, NAN when absent. */
static double check_value(const char *tag, const char *name, int field) {
    char path[4300];
    snprintf(path, sizeof path, "%s/check_%s.txt", g_dir, tag);
    return vt_test_figure(path, name, field);
}

static int run_check(const char *tag, const char *args) {
    return vt_test_sh("'%s' '%s/tests/check_embed.py' %s > '%s/check_%s.txt' 2>&1", g_py,
                      vt_test_env("VT_SRC", "."), args, g_dir, tag);
}

/* Row index of the CSV line whose path ends in `suffix` and whose start cell is `start`
 * ("" for a whole file), -1 when none. (The test's paths hold no comma.) */
static int csv_row(const char *csv, const char *suffix, const char *start) {
    char *text = vt_test_slurp(csv, NULL);
    int row = -1;
    for (char *l = text ? strtok(text, "\n") : NULL; l && row < 0; l = strtok(NULL, "\n")) {
        char *path = strchr(l, ','), *st = path ? strchr(path + 1, ',') : NULL;
        char *end = st ? strchr(st + 1, ',') : NULL;
        if (!end)
            continue;
        *st = *end = 0;
        size_t n = strlen(path + 1), m = strlen(suffix);
        if (n >= m && !strcmp(path + 1 + n - m, suffix) && !strcmp(st + 1, start))
            row = atoi(l);
    }
    free(text);
    return row;
}

static void classifier_tests(void) {
    char v[8600], a[16384];
    snprintf(v, sizeof v, "'%s/data/test/move_right/move_right_0000.mp4' "
             "'%s/data/test/move_left/move_left_0000.mp4'", g_dir, g_dir);
    const char *kc = "--clips-per-video 4 --crops 3";
    int rc = vt_test_sh("'%s' predict '%s/run' %s %s --json --top 1000 --dump-input "
                        "'%s/dump.json' > '%s/pred.json'", g_bin, g_dir, v, kc, g_dir, g_dir);
    rc |= vt_test_sh("'%s' predict '%s/run' %s --clips-per-video 1 --json --top 1000 > "
                     "'%s/pred1.json'", g_bin, g_dir, v, g_dir);
    rc |= vt_test_sh("'%s' embed '%s/run' %s %s --per-clip --out '%s/clips.safetensors' "
                     "2> '%s/embed.log'", g_bin, g_dir, v, kc, g_dir, g_dir);
    rc |= vt_test_sh("'%s' embed '%s/run' %s %s --out '%s/videos.npy' 2>> '%s/embed.log'",
                     g_bin, g_dir, v, kc, g_dir, g_dir);
    rc |= vt_test_sh("'%s' embed '%s/run' %s --clips-per-video 1 --out '%s/k1.npy' "
                     "2>> '%s/embed.log'", g_bin, g_dir, v, g_dir, g_dir);
    TCHECK(rc == 0, "predict and embed (see %s/embed.log)", g_dir);
    snprintf(a, sizeof a, "classifier '%s/run/best.safetensors' '%s/pred.json' '%s/dump.json' "
             "'%s/clips.safetensors' '%s/videos.npy' '%s/k1.npy' '%s/pred1.json'", g_dir, g_dir,
             g_dir, g_dir, g_dir, g_dir, g_dir);
    TCHECK(run_check("fp32", a) == 0, "check_embed.py (see %s/check_fp32.txt)", g_dir);
    TCHECK(check_value("fp32", "perclip_rows", 0) == 24 &&
           check_value("fp32", "perclip_rows", 1) == 24, "per-clip rows: %g, predict's clips %g "
           "(2 videos x 4 clips x 3 crops)", check_value("fp32", "perclip_rows", 0),
           check_value("fp32", "perclip_rows", 1));
    TCHECK(check_value("fp32", "dim", 0) == check_value("fp32", "dim", 1) &&
           check_value("fp32", "dim", 0) == 128, "D %g, the classifier's input %g (tiny: 128)",
           check_value("fp32", "dim", 0), check_value("fp32", "dim", 1));
    /* The same float32 features and weights; only the order of the 128-term sums differs
     * (the net's GEMM in float32 against numpy's in float64): logit errors ~1e-7
     * relative, NMSE ~1e-14 (measured 1.6e-15). 1e-10 is the bar, and a wrong
     * layer or a wrong row order gives NMSE ~1e-3 and up. */
    const char *fig[] = {"perclip_nmse", "video_nmse", "k1_nmse"};
    for (int i = 0; i < 3; i++) {
        double x = check_value("fp32", fig[i], 0);
        printf("embed fp32: %s %.3g\n", fig[i], x);
        TCHECK(x <= 1e-10, "%s = %g > 1e-10 (see %s/check_fp32.txt)", fig[i], x, g_dir);
    }
    /* the mean of 12 float32 rows, summed in double and rounded once: 1 ulp (6e-8) */
    double mr = check_value("fp32", "video_mean_maxrel", 0);
    TCHECK(check_value("fp32", "video_rows", 0) == 2 && mr <= 1e-6,
           "per-video rows %g (2), their difference from the mean of the clips' rows %g",
           check_value("fp32", "video_rows", 0), mr);

    /* BF16 on cpu-ref: vt_net_features widens the bf16 activations on the host */
    const char *bf = "--precision bf16 --backend cpu-ref --clips-per-video 2";
    rc = vt_test_sh("'%s' predict '%s/run' %s %s --json --top 1000 --dump-input "
                    "'%s/dumpb.json' > '%s/predb.json'", g_bin, g_dir, v, bf, g_dir, g_dir);
    rc |= vt_test_sh("'%s' embed '%s/run' %s %s --per-clip --out '%s/clipsb.safetensors' "
                     "2>> '%s/embed.log'", g_bin, g_dir, v, bf, g_dir, g_dir);
    rc |= vt_test_sh("'%s' embed '%s/run' %s %s --out '%s/videosb.npy' 2>> '%s/embed.log'",
                     g_bin, g_dir, v, bf, g_dir, g_dir);
    snprintf(a, sizeof a, "classifier '%s/run/best.safetensors' '%s/predb.json' "
             "'%s/dumpb.json' '%s/clipsb.safetensors' '%s/videosb.npy' '%s/k1.npy' "
             "'%s/pred1.json'", g_dir, g_dir, g_dir, g_dir, g_dir, g_dir, g_dir);
    TCHECK(rc == 0 && run_check("bf16", a) == 0, "bf16 (see %s/check_bf16.txt)", g_dir);
    /* The net's classifier runs in bf16 (its logits rounded to 8 bits, 2^-9 relative),
     * numpy's in float64 on the widened features: NMSE of the probabilities about
     * (2^-9 * |logit|)^2, below 1e-6 for logits under 1 (measured 4.7e-8); features
     * read as garbage (a wrong widening) give O(1). */
    double xb = check_value("bf16", "perclip_nmse", 0);
    printf("embed bf16: perclip_nmse %.3g\n", xb);
    TCHECK(xb <= 1e-6, "bf16 perclip_nmse %g > 1e-6 (see %s/check_bf16.txt)", xb, g_dir);
}

/* Row ra of a against row rb of b: their largest difference relative to b's largest value. */
static double rows_maxrel(const char *tag, const char *a, int ra, const char *b, int rb) {
    char args[9000];
    snprintf(args, sizeof args, "rows '%s' %d '%s' %d", a, ra, b, rb);
    if (run_check(tag, args) != 0)
        return NAN;
    return check_value(tag, "row_maxrel", 0);
}

static void segment_tests(void) {
    char csv[4300], out[4300], cut[4300], ce[4300], src[4300];
    snprintf(src, sizeof src, "%s/data/test/move_right/move_right_0000.mp4", g_dir);
    snprintf(csv, sizeof csv, "%s/labels_seg.csv", g_dir);
    /* 0.2-0.6 s of a 25 fps file: 10 frames, fewer than the clip's span (15): the
     * clips are padded at the SEGMENT's end, as a file cut to it pads at its own */
    vt_test_write_file(g_dir, "labels_seg.csv", "path,class,start,end\n"
                       "test/move_right/move_right_0000.mp4,move_right,0.2,0.6\n"
                       "test/move_right/move_right_0000.mp4,move_right,0,100\n");
    snprintf(out, sizeof out, "%s/seg.npy", g_dir);
    int rc = vt_test_sh("'%s' embed '%s/run' '%s/data' --labels '%s' --clips-per-video 3 "
                        "--out '%s' 2>> '%s/embed.log'", g_bin, g_dir, g_dir, csv, out, g_dir);
    TCHECK(rc == 0, "embed DIR --labels (see %s/embed.log)", g_dir);
    snprintf(cut, sizeof cut, "%s/seg_cut.mp4", g_dir);
    rc = vt_test_sh("ffmpeg -v error -y -i '%s' -vf 'trim=start=0.2:end=0.6,setpts=PTS-STARTPTS' "
                    "-c:v libx264 -qp 0 -pix_fmt yuv420p '%s'", src, cut);
    TCHECK(rc == 0 && vt_test_ffprobe_frames(cut) == 10, "ffmpeg cut of [0.2, 0.6): 10 frames");
    snprintf(ce, sizeof ce, "%s/seg_cut.npy", g_dir);
    rc = vt_test_sh("'%s' embed '%s/run' '%s' '%s' --clips-per-video 3 --out '%s' "
                    "2>> '%s/embed.log'", g_bin, g_dir, cut, src, ce, g_dir);
    TCHECK(rc == 0, "embed the cut");
    snprintf(csv, sizeof csv, "%s/seg.csv", g_dir);
    int rs = csv_row(csv, "test/move_right/move_right_0000.mp4", "0.200000");
    int rw = csv_row(csv, "test/move_right/move_right_0000.mp4", "0.000000");
    int rl = csv_row(csv, "test/move_left/move_left_0000.mp4", "");
    TCHECK(rs >= 0 && rw >= 0 && rl >= 0, "seg.csv rows: segment %d, long segment %d, a whole "
           "file %d", rs, rw, rl);
    if (rs < 0 || rw < 0)
        return;
    /* The same pixels (lossless cut) and the same clips through the same model in the
     * same batch shape: equal to the bit (measured 0); 1e-6 leaves room for a GEMM that
     * blocks differently */
    double d = rows_maxrel("seg", out, rs, ce, 0);
    TCHECK(d <= 1e-6, "segment [0.2, 0.6) against the ffmpeg cut: max rel diff %g", d);
    d = rows_maxrel("seg", out, rw, ce, 1);
    TCHECK(d <= 1e-6, "segment [0, 100) (past the end) against the whole file: %g", d);
}

static void timeline_tests(void) {
    char src[4300], out[4300], cut[4300], ce[4300];
    snprintf(src, sizeof src, "%s/src.mp4", g_dir);
    int rc = vt_test_sh("ffmpeg -v error -y -f lavfi -i testsrc2=size=320x180:rate=25 -t 4 "
                        "-c:v libx264 -pix_fmt yuv420p -g 50 '%s'", src);
    TCHECK(rc == 0, "ffmpeg source");
    snprintf(out, sizeof out, "%s/tl.safetensors", g_dir);
    rc = vt_test_sh("'%s' embed '%s/run' '%s' --timeline --window 2s --hop 1s "
                    "--clips-per-video 3 --batch 5 --out '%s' 2>> '%s/embed.log'", g_bin, g_dir,
                    src, out, g_dir);
    TCHECK(rc == 0, "embed --timeline");
    snprintf(cut, sizeof cut, "%s/tl_cut.mp4", g_dir);
    rc = vt_test_sh("ffmpeg -v error -y -i '%s' -vf 'trim=start=1:end=3,setpts=PTS-STARTPTS' "
                    "-c:v libx264 -qp 0 -pix_fmt yuv420p '%s'", src, cut);
    snprintf(ce, sizeof ce, "%s/tl_cut.npy", g_dir);
    rc |= vt_test_sh("'%s' embed '%s/run' '%s' --clips-per-video 3 --out '%s' 2>> "
                     "'%s/embed.log'", g_bin, g_dir, cut, ce, g_dir);
    TCHECK(rc == 0, "cut and embed window [1, 3)");
    char csv[4300];
    snprintf(csv, sizeof csv, "%s/tl.csv", g_dir);
    int r1 = csv_row(csv, "src.mp4", "1.000000");
    /* The window's 3 clips ran in batches of 5 with other windows' clips, the cut's in
     * one of 3: GEMM blocking may differ (measured 6.7e-8) */
    double d = rows_maxrel("tl", out, r1, ce, 0);
    TCHECK(r1 == 1 && d <= 1e-6, "window [1, 3): row %d, against the ffmpeg cut %g", r1, d);
    int64_t want = vt_timeline_expected_windows(4.0, 2, 1);
    TCHECK(check_value("tl", "rows", 0) == (double)want, "--timeline rows %g, %lld windows "
           "expected from 4 s / 2 s / 1 s", check_value("tl", "rows", 0), (long long)want);
}

static void error_tests(void) {
    char good[4300];
    snprintf(good, sizeof good, "%s/data/test/move_left/move_left_0000.mp4", g_dir);
    int rc = vt_test_sh("'%s' embed '%s/run' '%s/nope.mp4' '%s' --out '%s/err.npy' 2> "
                        "'%s/err.log'", g_bin, g_dir, g_dir, good, g_dir, g_dir);
    char path[4300];
    snprintf(path, sizeof path, "%s/err.log", g_dir);
    char *log = vt_test_slurp(path, NULL);
    TCHECK(rc == 0 && log && strstr(log, "nope.mp4") && strstr(log, "skipped"),
           "a missing file among good ones: exit %d (0), named and skipped in the log", rc);
    free(log);
    rc = vt_test_sh("'%s' embed '%s/run' '%s/nope.mp4' --out '%s/err2.npy' 2> /dev/null",
                    g_bin, g_dir, g_dir, g_dir);
    TCHECK(rc == 1, "only a missing file: exit %d (1)", rc);
    rc = vt_test_sh("'%s' embed '%s/run' '%s' --out '%s/x.txt' 2> /dev/null", g_bin, g_dir, good,
                    g_dir);
    TCHECK(rc == 2, "--out x.txt: exit %d (2)", rc);
    rc = vt_test_sh("'%s' embed '%s/run' '%s' --hop 1 --out '%s/x.npy' 2> /dev/null", g_bin,
                    g_dir, good, g_dir);
    TCHECK(rc == 2, "--hop without --timeline: exit %d (2)", rc);
    /* the CSV beside --out would overwrite the labels file it reads */
    rc = vt_test_sh("'%s' embed '%s/run' '%s/data' --labels '%s/labels_seg.csv' --out "
                    "'%s/labels_seg.npy' 2> /dev/null", g_bin, g_dir, g_dir, g_dir, g_dir);
    TCHECK(rc == 2, "--out over the labels file's name: exit %d (2)", rc);
}

/* The last two cells (decode_errors, filled_frames) of csv's row `row` (0-based, after the
 * header); -1 each when there is no such row. */
static void csv_damage(const char *csv, int row, int64_t *errors, int64_t *filled) {
    *errors = *filled = -1;
    char *text = vt_test_slurp(csv, NULL);
    int i = -1;
    for (char *line = text ? strtok(text, "\n") : NULL; line; line = strtok(NULL, "\n"), i++) {
        char *c2 = strrchr(line, ','), *c1;
        if (i != row || !c2)
            continue;
        *c2 = 0;
        c1 = strrchr(line, ',');
        *filled = atoll(c2 + 1);
        *errors = c1 ? atoll(c1 + 1) : -1;
    }
    free(text);
}

static void damage_tests(void) {
    char media[4300], bad[4400], good[4300], out[4300], csv[4300], log[4300];
    snprintf(media, sizeof media, "%s/media", g_dir);
    int rc = vt_test_sh("bash '%s/tests/make_media.sh' '%s' hostile", vt_test_env("VT_SRC", "."),
                        media);
    TCHECK(rc == 0, "make_media.sh");
    snprintf(bad, sizeof bad, "%s/hostile/concealed.mp4", media);
    snprintf(good, sizeof good, "%s/src.mp4", g_dir); /* timeline_tests' clean file */
    /* the truth: the ffmpeg command repairs one picture of it */
    rc = vt_test_sh("test \"$(ffmpeg -nostdin -hide_banner -threads 1 -i '%s' -f null - 2>&1 | "
                    "grep -c 'concealing ')\" = 1", bad);
    TCHECK(rc == 0, "ffmpeg conceals one picture of %s", bad);
    snprintf(out, sizeof out, "%s/dmg.npy", g_dir);
    snprintf(log, sizeof log, "%s/dmg.log", g_dir);
    rc = vt_test_sh("'%s' embed '%s/run' '%s' '%s' --clips-per-video 4 --out '%s' 2> '%s'",
                    g_bin, g_dir, bad, good, out, log);
    TCHECK(rc == 0, "embed a damaged and a clean file");
    rc = vt_test_sh("'%s' predict '%s/run' '%s' --clips-per-video 4 --json > '%s/dmg.json' "
                    "2> /dev/null", g_bin, g_dir, bad, g_dir);
    TCHECK(rc == 0, "predict the damaged file");
    char pj[4300];
    snprintf(pj, sizeof pj, "%s/dmg.json", g_dir);
    char *text = vt_test_slurp(pj, NULL);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    free(text);
    const cJSON *e0 = cJSON_IsArray(j) ? cJSON_GetArrayItem(j, 0)
                      : cJSON_GetArrayItem(cJSON_GetObjectItem(j, "videos"), 0);
    const cJSON *pe = cJSON_GetObjectItem(e0, "decode_errors");
    int64_t want = cJSON_IsNumber(pe) ? (int64_t)pe->valuedouble : -1;
    TCHECK(want >= 1, "predict --json: the damaged file's decode_errors %lld", (long long)want);
    cJSON_Delete(j);
    snprintf(csv, sizeof csv, "%s/dmg.csv", g_dir);
    int64_t e, f;
    csv_damage(csv, csv_row(csv, "concealed.mp4", ""), &e, &f);
    TCHECK(e == want && f == 0, "embed CSV: the damaged file's decode_errors %lld, filled "
           "%lld; predict counts %lld for the same clips", (long long)e, (long long)f,
           (long long)want);
    csv_damage(csv, csv_row(csv, "src.mp4", ""), &e, &f);
    TCHECK(e == 0 && f == 0, "embed CSV: the clean file's decode_errors %lld, filled %lld",
           (long long)e, (long long)f);
    TCHECK(vt_test_sh("grep -q 'concealed.mp4: .*decode error' '%s'", log) == 0 &&
               vt_test_sh("grep -q 'src.mp4: .*decode error' '%s'", log) != 0,
           "embed warns about the damaged file alone (%s)", log);

    /* --timeline: the same windows as predict --timeline, the same decode_errors */
    snprintf(out, sizeof out, "%s/dmgtl.npy", g_dir);
    rc = vt_test_sh("'%s' embed '%s/run' '%s' --timeline --window 1s --hop 0.5s "
                    "--clips-per-video 2 --decode-threads 2 --out '%s' 2> /dev/null", g_bin,
                    g_dir, bad, out);
    rc |= vt_test_sh("'%s' predict '%s/run' '%s' --timeline --window 1s --hop 0.5s "
                     "--clips-per-video 2 --decode-threads 2 --json > '%s/dmgtl.jsonl' "
                     "2> /dev/null", g_bin, g_dir, bad, g_dir);
    TCHECK(rc == 0, "embed and predict --timeline of the damaged file");
    snprintf(csv, sizeof csv, "%s/dmgtl.csv", g_dir);
    snprintf(pj, sizeof pj, "%s/dmgtl.jsonl", g_dir);
    int nw = 0;
    int64_t sum = 0;
    cJSON **wl = vt_read_lines(pj, &nw);
    for (int i = 0; i < nw; i++) {
        const cJSON *de = cJSON_GetObjectItem(wl[i], "decode_errors");
        int64_t pw = cJSON_IsNumber(de) ? (int64_t)de->valuedouble : -1;
        csv_damage(csv, i, &e, &f);
        TCHECK(e == pw && f == 0, "--timeline window %d: embed's decode_errors %lld, "
               "predict's %lld", i, (long long)e, (long long)pw);
        sum += e > 0 ? e : 0;
    }
    vt_free_lines(wl, nw);
    TCHECK(nw >= 3 && sum >= 1, "--timeline: %d windows, %lld decode errors in them", nw,
           (long long)sum);
}

int main(void) {
    g_bin = vt_test_bin("test_embed");
    g_py = vt_test_env("VT_PYTHON", "/usr/bin/python3");
    if (!g_bin)
        return VT_TEST_SKIP;
    if (vt_test_sh("'%s' -c 'import numpy' 2> /dev/null", g_py) != 0) {
        fprintf(stderr, "test_embed: %s has no numpy (the independent reader)\n", g_py);
        return VT_TEST_SKIP;
    }
    static char dir[4096];
    snprintf(dir, sizeof dir, "%s", vt_test_dir("embed"));
    g_dir = dir;
    int rc = vt_test_synth(g_bin, g_dir, "--classes 2 --train 3 --val 1 --test 1 --frames 24");
    TCHECK(rc == 0, "synth");
    rc = vt_test_sh("'%s' train '%s/data' --out '%s/run' --model tiny --clip 8x32 --stride 2 "
                    "--batch 4 --epochs 1 --val-clips 1 --workers 1 --seed 5 > '%s/train.log' "
                    "2>&1", g_bin, g_dir, g_dir, g_dir);
    TCHECK(rc == 0, "train (see %s/train.log)", g_dir);
    if (rc == 0) {
        classifier_tests();
        segment_tests();
        timeline_tests();
        error_tests();
        damage_tests();
    }
    return vt_test_done("test_embed");
}
