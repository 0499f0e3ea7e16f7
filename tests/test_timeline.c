/*
 * test_timeline.c: `predict --timeline` (app/stream/timeline.h, pipeline/data/video/video.h).
 *
 * 1. The window engine with a stand-in model whose "probabilities" are the first and
 *    last pixel of each clip, over frames whose pixels are their own index: the window
 *    count against vt_timeline_expected_windows and against counts worked out by hand
 *    (overlapping windows, a partial tail, gaps when hop > window, a video shorter than a
 *    window), every clip's first and last frame against predict's positions
 *    (vt_sample_eval_start), and the frames held bounded by the window, not the video.
 * 2. End to end, against the ffmpeg command as the outside truth: a trained run's
 *    timeline of a 10 s video; each window checked is cut out with ffmpeg (trim filter,
 *    lossless x264, so the cut holds exactly the frames with t in [start, end) and their
 *    pixels) and given to plain `predict`, whose probabilities must match the window's.
 * 3. The stream reader fed from a pipe ("-", MPEG-TS on standard input): the same windows.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/stream/timeline.h"
#include "tests/apputil.h"
#include "tests/jsonlines.h"
#include "tests/testutil.h"

/* ---- 1. the engine, with a stand-in model ---- */

#define FPS 25.0
#define SIDE 8

typedef struct fake {
    vt_timeline_cfg cfg;
    int64_t nwin, nfull, npartial;
    double last_end;
    int bad_pos;
} fake;

/* probs[0] = the clip's first value, probs[1] = its last (frame values are index/255) */
static void fake_run(void *ctx, const vt_batch *b, float *probs[VT_MAX_HEADS]) {
    (void)ctx;
    int64_t cf = vt_batch_clip_floats(b);
    for (int r = 0; r < b->n; r++) {
        probs[0][2 * r] = b->x[r * cf];
        probs[0][2 * r + 1] = b->x[r * cf + cf - 1];
    }
}

static void fake_emit(void *ctx, const vt_timeline_window *w) {
    fake *f = ctx;
    const vt_timeline_cfg *c = &f->cfg;
    TCHECK(w->index >= 0 && w->start == w->index * c->hop, "window %lld start %g",
           (long long)w->index, w->start);
    TCHECK(w->start >= f->last_end - c->window - 1e-9, "windows out of order");
    /* the window's first frame: the first index i with i / FPS >= start */
    int64_t first = (int64_t)ceil(w->start * FPS - 1e-6);
    int span = vt_clip_span(&c->clip);
    double want0 = 0, want1 = 0;
    for (int j = 0; j < c->K; j++) {
        int64_t pos[64];
        vt_clip_positions(w->nframes, vt_sample_eval_start(w->nframes, span, j, c->K),
                          c->clip.t, c->clip.stride, c->clip.pad, pos);
        want0 += (double)(first + pos[0]) / 255.0;
        want1 += (double)(first + pos[c->clip.t - 1]) / 255.0;
    }
    want0 /= c->K;
    want1 /= c->K;
    /* float pixels averaged in double: 1e-6 is float rounding of values below 1 */
    if (fabs(w->probs[0][0] - want0) > 1e-6 || fabs(w->probs[0][1] - want1) > 1e-6)
        f->bad_pos++;
    f->nwin++;
    f->nfull += !w->partial;
    f->npartial += w->partial;
    f->last_end = w->end;
}

/* Pushes `seconds` of frames at FPS through a fresh engine; returns the peak held. */
static int64_t run_engine(fake *f, double seconds, double window, double hop) {
    memset(f, 0, sizeof *f);
    vt_timeline_cfg *c = &f->cfg;
    vt_clip_cfg_default(&c->clip);
    c->clip.t = 4;
    c->clip.stride = 3;
    c->clip.crop = SIDE;
    c->clip.short_side = SIDE;
    c->clip.pad = VT_PAD_REPEAT_LAST;
    for (int k = 0; k < 3; k++) {
        c->clip.mean[k] = 0;
        c->clip.std[k] = 1;
    }
    c->window = window;
    c->hop = hop;
    c->K = 3;
    c->crops = 1;
    c->batch = 4; /* not a multiple of K: windows straddle model calls */
    c->nheads = 1;
    c->classes[0] = 2;
    char err[256];
    vt_timeline *tl = vt_timeline_new(c, SIDE, SIDE, fake_run, fake_emit, f, err, sizeof err);
    TCHECK(tl != NULL, "new: %s", err);
    if (!tl)
        return -1;
    uint8_t px[SIDE * SIDE * 3];
    int64_t n = (int64_t)llround(seconds * FPS);
    for (int64_t i = 0; i < n; i++) {
        memset(px, (int)(i % 256), sizeof px);
        vt_timeline_push(tl, px, (double)i / FPS, 1.0 / FPS);
    }
    vt_timeline_finish(tl);
    vt_timeline_stats st;
    vt_timeline_get_stats(tl, &st);
    vt_timeline_free(&tl);
    TCHECK(st.windows == f->nwin && st.frames == n, "stats %lld windows %lld frames",
           (long long)st.windows, (long long)st.frames);
    return st.peak_frames;
}

/* A stream whose times restart (two MPEG-TS files joined, a camera restarted): the frames
 * after the jump were dropped in silence (predict --timeline on cat a.ts b.ts read half the
 * frames and ended 0), then counted as left out; they go on right after the last frame, as
 * one stream of 6 s (the windows' frames as fake_emit expects them at i / FPS). A step back
 * of under a second is a broken timestamp: that frame is left out, counted. */
static void backwards_test(void) {
    fake f;
    memset(&f, 0, sizeof f);
    vt_timeline_cfg *c = &f.cfg;
    vt_clip_cfg_default(&c->clip);
    c->clip.t = 4;
    c->clip.crop = c->clip.short_side = SIDE;
    c->window = 2;
    c->hop = 1;
    c->K = 1;
    c->crops = 1;
    c->batch = 1;
    c->nheads = 1;
    c->classes[0] = 2;
    for (int k = 0; k < 3; k++) { /* pixel values as they are: fake_emit reads the frames */
        c->clip.mean[k] = 0;
        c->clip.std[k] = 1;
    }
    char err[256];
    vt_timeline *tl = vt_timeline_new(c, SIDE, SIDE, fake_run, fake_emit, &f, err, sizeof err);
    TCHECK(tl != NULL, "new: %s", err);
    if (!tl)
        return;
    uint8_t px[SIDE * SIDE * 3];
    const int n = (int)(3 * FPS); /* 3 s, then 3 s more timed from 0 again */
    for (int part = 0; part < 2; part++)
        for (int i = 0; i < n; i++) {
            memset(px, part * n + i, sizeof px); /* its index in the stream spliced */
            vt_timeline_push(tl, px, (double)i / FPS, 1.0 / FPS);
            if (part == 1 && i == n / 2) { /* a broken timestamp, half a second back */
                memset(px, 255, sizeof px);
                vt_timeline_push(tl, px, (double)i / FPS - 0.5, 1.0 / FPS);
            }
        }
    vt_timeline_finish(tl);
    vt_timeline_stats st;
    vt_timeline_get_stats(tl, &st);
    vt_timeline_free(&tl);
    TCHECK(st.frames == 2 * n && st.restarts == 1 && st.backwards == 1,
           "a restarted stream: %lld frames on the timeline (of %d), %lld restarts, %lld left "
           "out", (long long)st.frames, 2 * n, (long long)st.restarts, (long long)st.backwards);
    /* 6 s, 2 s windows every 1 s: ends 2..6, none partial, each holding its frames */
    TCHECK(f.nwin == 5 && f.npartial == 0 && f.bad_pos == 0, "a restarted stream: %lld windows "
           "(%lld partial, %d with other frames), 5 expected", (long long)f.nwin,
           (long long)f.npartial, f.bad_pos);
}

static void engine_tests(void) {
    fake f;
    /* 10 s, 2 s every 1 s: windows end at 2..10: 9, none partial */
    int64_t peak = run_engine(&f, 10, 2, 1);
    TCHECK(f.nwin == 9 && f.npartial == 0, "10/2/1: %lld windows (%lld partial)",
           (long long)f.nwin, (long long)f.npartial);
    TCHECK(f.bad_pos == 0, "10/2/1: %d windows with other clip frames than predict's", f.bad_pos);
    /* frames held: one window's 50, plus the frame that closes it */
    TCHECK(peak <= 2 * FPS + 1, "10/2/1: %lld frames held", (long long)peak);
    int64_t peak_long = run_engine(&f, 300, 2, 1);
    TCHECK(f.nwin == 299 && peak_long == peak, "300 s: %lld windows, %lld frames held (10 s: "
           "%lld): memory must not grow with the video", (long long)f.nwin,
           (long long)peak_long, (long long)peak);
    /* 10 s, 2 s every 1.5 s: ends 2, 3.5, ..., 9.5 (6), then [9, 10) partial */
    run_engine(&f, 10, 2, 1.5);
    TCHECK(f.nfull == 6 && f.npartial == 1 && fabs(f.last_end - 10) < 1e-9,
           "10/2/1.5: %lld + %lld partial, last end %g", (long long)f.nfull,
           (long long)f.npartial, f.last_end);
    TCHECK(f.bad_pos == 0, "10/2/1.5: clip frames");
    /* hop > window: [0,1), [2,3), ... [8,9): 5, the frames between held by none */
    peak = run_engine(&f, 10, 1, 2);
    TCHECK(f.nwin == 5 && f.npartial == 0 && f.bad_pos == 0, "10/1/2: %lld windows",
           (long long)f.nwin);
    TCHECK(peak <= FPS + 1, "10/1/2: %lld frames held", (long long)peak);
    /* shorter than a window: one partial window over all of it (predict's view) */
    run_engine(&f, 1, 2, 1);
    TCHECK(f.nwin == 1 && f.npartial == 1 && fabs(f.last_end - 1) < 1e-9 && f.bad_pos == 0,
           "1 s / 2 s window: %lld windows, end %g", (long long)f.nwin, f.last_end);
    /* the documented count rule, which the end-to-end part checks against */
    TCHECK(vt_timeline_expected_windows(10, 2, 1) == 9, "expected 10/2/1");
    TCHECK(vt_timeline_expected_windows(10, 2, 1.5) == 7, "expected 10/2/1.5");
    TCHECK(vt_timeline_expected_windows(10, 1, 2) == 5, "expected 10/1/2");
    TCHECK(vt_timeline_expected_windows(1, 2, 1) == 1, "expected 1/2/1");
    TCHECK(vt_timeline_expected_windows(3600, 2, 1) == 3599, "expected 1 h");
}

/* ---- 2, 3. end to end against the ffmpeg command ---- */

static const char *g_bin, *g_dir;

/* Cuts [start, end) out of src losslessly and checks predict's probabilities on it
 * against the window's. */
static void check_cut(const char *src, const cJSON *win, int K) {
    double s = cJSON_GetObjectItem(win, "start")->valuedouble;
    double e = cJSON_GetObjectItem(win, "end")->valuedouble;
    char cut[4300], out[4300];
    snprintf(cut, sizeof cut, "%s/cut_%g.mp4", g_dir, s);
    snprintf(out, sizeof out, "%s/cut_%g.json", g_dir, s);
    /* trim keeps the frames with start <= t < end; -qp 0: lossless, same pixels */
    int rc = vt_test_sh("ffmpeg -v error -y -i '%s' -vf 'trim=start=%.6f:end=%.6f,setpts=PTS-"
                        "STARTPTS' -c:v libx264 -qp 0 -pix_fmt yuv420p '%s'", src, s, e, cut);
    TCHECK(rc == 0, "ffmpeg cut [%g, %g)", s, e);
    int64_t frames = vt_test_ffprobe_frames(cut);
    TCHECK(frames == (int64_t)cJSON_GetObjectItem(win, "frames")->valuedouble,
           "[%g, %g): ffmpeg's cut has %lld frames, the window %g", s, e, (long long)frames,
           cJSON_GetObjectItem(win, "frames")->valuedouble);
    rc = vt_test_sh("'%s' predict '%s/run' '%s' --json --top 2 --clips-per-video %d > '%s'",
                    g_bin, g_dir, cut, K, out);
    cJSON *p = vt_test_read_json(out);
    const cJSON *entry = cJSON_GetArrayItem(p, 0);
    TCHECK(rc == 0 && entry, "predict on the cut [%g, %g)", s, e);
    const char *labels[] = {"move_left", "move_right"};
    for (int i = 0; i < 2 && entry; i++) {
        double a = vt_prob_of(win, labels[i]), b = vt_prob_of(entry, labels[i]);
        /* The same clips of the same pixels through the same model: only the batch they
         * ran in differs (GEMM blocking), and predict's mean is rounded to float for
         * printing (1 ulp of a probability < 1 is 6e-8): measured 1.5e-8 */
        TCHECK(a >= 0 && fabs(a - b) <= 1e-6, "[%g, %g) %s: timeline %.9f, predict on the cut "
               "%.9f", s, e, labels[i], a, b);
    }
    cJSON_Delete(p);
}

static void e2e_tests(void) {
    int rc = vt_test_synth(g_bin, g_dir, "--classes 2 --train 3 --val 1 --test 1 --frames 24");
    TCHECK(rc == 0, "synth");
    rc = vt_test_sh("'%s' train '%s/data' --out '%s/run' --model tiny --clip 8x32 --stride 2 "
                    "--batch 4 --epochs 1 --val-clips 1 --workers 1 --seed 5 > '%s/train.log' "
                    "2>&1", g_bin, g_dir, g_dir, g_dir);
    TCHECK(rc == 0, "train (see %s/train.log)", g_dir);
    if (rc)
        return;
    char src[4300], out[4300];
    snprintf(src, sizeof src, "%s/src.mp4", g_dir);
    /* 10 s at 25 fps, x264's default B-frames (frames decode out of order) */
    rc = vt_test_sh("ffmpeg -v error -y -f lavfi -i testsrc2=size=320x180:rate=25 -t 10 "
                    "-c:v libx264 -pix_fmt yuv420p -g 50 '%s'", src);
    TCHECK(rc == 0, "ffmpeg source");
    const int K = 3;
    double hops[] = {1, 1.5};
    for (int h = 0; h < 2; h++) {
        snprintf(out, sizeof out, "%s/tl_%d.jsonl", g_dir, h);
        rc = vt_test_sh("'%s' predict '%s/run' '%s' --timeline --window 2s --hop %g --json "
                        "--top 2 --clips-per-video %d --batch 5 > '%s' 2> '%s.err'", g_bin,
                        g_dir, src, hops[h], K, out, out);
        TCHECK(rc == 0, "timeline hop %g", hops[h]);
        int n;
        cJSON **l = vt_read_lines(out, &n);
        int64_t want = vt_timeline_expected_windows(10.0, 2, hops[h]);
        TCHECK(n == want, "hop %g: %d windows, %lld expected from 10 s / 2 s / %g s", hops[h], n,
               (long long)want, hops[h]);
        /* the first, one in the middle, the last (hop 1.5: the partial tail) */
        if (n >= 3) {
            check_cut(src, l[0], K);
            check_cut(src, l[n / 2], K);
            check_cut(src, l[n - 1], K);
        }
        if (h == 1 && n > 0)
            TCHECK(cJSON_IsTrue(cJSON_GetObjectItem(l[n - 1], "partial")), "the tail is partial");
        vt_free_lines(l, n);
    }
    /* 3. from a pipe: no seek, no index, no duration; the same windows */
    snprintf(out, sizeof out, "%s/pipe.jsonl", g_dir);
    rc = vt_test_sh("ffmpeg -v error -i '%s' -c copy -f mpegts - | '%s' predict '%s/run' - "
                    "--timeline --json --top 2 --clips-per-video %d > '%s' 2> '%s.err'",
                    src, g_bin, g_dir, K, out, out);
    int n;
    cJSON **l = vt_read_lines(out, &n);
    TCHECK(rc == 0 && n == 9, "stdin: exit %d, %d windows (9 expected)", rc, n);
    char ref[4300];
    snprintf(ref, sizeof ref, "%s/tl_0.jsonl", g_dir);
    int nr;
    cJSON **r = vt_read_lines(ref, &nr);
    for (int i = 0; i < n && i < nr; i++) {
        double a = vt_prob_of(l[i], "move_left"), b = vt_prob_of(r[i], "move_left");
        TCHECK(fabs(a - b) <= 1e-6, "stdin window %d: %.9f vs the file's %.9f", i, a, b);
    }
    vt_free_lines(l, n);
    /* two copies joined (cat a.ts a.ts: the second's times start again): 20 s of windows,
     * the second copy's spliced on at 10 s, so window 10 + i holds what window i held */
    snprintf(out, sizeof out, "%s/joined.jsonl", g_dir);
    rc = vt_test_sh("ffmpeg -v error -y -i '%s' -c copy -f mpegts '%s/a.ts' && cat '%s/a.ts' "
                    "'%s/a.ts' | '%s' predict '%s/run' - --timeline --json --top 2 "
                    "--clips-per-video %d > '%s' 2> '%s.err'", src, g_dir, g_dir, g_dir, g_bin,
                    g_dir, K, out, out);
    l = vt_read_lines(out, &n);
    TCHECK(rc == 0 && n == 19, "cat a.ts a.ts: exit %d, %d windows (19 expected)", rc, n);
    for (int i = 0; i < 9 && n == 19 && nr >= 9; i++) {
        double a = vt_prob_of(l[10 + i], "move_left"), b = vt_prob_of(r[i], "move_left");
        TCHECK(fabs(a - b) <= 1e-6, "cat a.ts a.ts: window %d %.9f, the file's window %d %.9f",
               10 + i, a, i, b);
    }
    char errf[4400];
    snprintf(errf, sizeof errf, "%s.err", out);
    TCHECK(vt_test_file_has(errf, "the stream's times restarted 1 time, spliced on") &&
               !vt_test_file_has(errf, "frames left out"),
           "cat a.ts a.ts: the end line counts the restart (%s)", errf);
    vt_free_lines(l, n);
    vt_free_lines(r, nr);
    /* --decode nvdec (docs/decode.md), from the file and from a pipe: the same windows.
     * Without a GPU it decodes on the CPU after one warning; on a GPU, H.264 decodes
     * bit-exactly (test_decode_hw), so the probabilities match to the same 1e-6. */
    for (int p = 0; p < 2; p++) {
        snprintf(out, sizeof out, "%s/nvdec_%d.jsonl", g_dir, p);
        if (p == 0)
            rc = vt_test_sh("'%s' predict '%s/run' '%s' --timeline --json --top 2 "
                            "--clips-per-video %d --decode nvdec > '%s' 2> '%s.err'", g_bin,
                            g_dir, src, K, out, out);
        else
            rc = vt_test_sh("ffmpeg -v error -i '%s' -c copy -f mpegts - | '%s' predict "
                            "'%s/run' - --timeline --json --top 2 --clips-per-video %d "
                            "--decode nvdec > '%s' 2> '%s.err'", src, g_bin, g_dir, K, out, out);
        l = vt_read_lines(out, &n);
        r = vt_read_lines(ref, &nr);
        TCHECK(rc == 0 && n == nr && n == 9, "--decode nvdec (%s): exit %d, %d windows, %d "
               "with cpu", p ? "pipe" : "file", rc, n, nr);
        for (int i = 0; i < n && i < nr; i++) {
            double a = vt_prob_of(l[i], "move_left"), b = vt_prob_of(r[i], "move_left");
            TCHECK(fabs(a - b) <= 1e-6, "--decode nvdec window %d: %.9f vs cpu %.9f", i, a, b);
        }
        vt_free_lines(l, n);
        vt_free_lines(r, nr);
        char err_path[4400];
        snprintf(err_path, sizeof err_path, "%s.err", out);
        char *text = vt_test_slurp(err_path, NULL);
        int warned = 0;
        for (const char *q = text; q && (q = strstr(q, "--decode nvdec:")) != NULL; q++)
            warned++;
        int gpu = text && strstr(text, "decoded on the GPU (NVDEC)");
        /* either the GPU decoded it (no warning) or one warning said the CPU did */
        TCHECK(gpu ? warned == 0 : warned == 1, "--decode nvdec (%s): %d warnings, GPU %d: %s",
               p ? "pipe" : "file", warned, gpu, text ? text : "(no stderr)");
        free(text);
    }
    /* usage: timeline options without --timeline */
    rc = vt_test_sh("'%s' predict '%s/run' '%s' --hop 1 2> /dev/null", g_bin, g_dir, src);
    TCHECK(rc == 2, "--hop without --timeline: exit %d", rc);
    rc = vt_test_sh("'%s' predict '%s/run' '%s/nope.mp4' --timeline 2> /dev/null", g_bin, g_dir,
                    g_dir);
    TCHECK(rc == 1, "missing video: exit %d", rc);
}

int main(void) {
    engine_tests();
    backwards_test();
    g_bin = vt_test_bin("test_timeline");
    if (g_bin) {
        static char dir[4096];
        snprintf(dir, sizeof dir, "%s", vt_test_dir("timeline"));
        g_dir = dir;
        e2e_tests();
    }
    return vt_test_done("test_timeline");
}
