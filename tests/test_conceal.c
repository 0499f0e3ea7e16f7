/*
 * test_conceal.c: a frame FFmpeg's error concealment repaired is counted as damage
 * (vt_video_stats.decode_errors, vt_stream_decode_errors), whatever the decoder threads.
 *
 * The truth is the ffmpeg command: single-threaded, it says "concealing ... errors in P
 * frame" once per picture it repaired. hostile/concealed.mp4 (tests/make_media.sh) has one
 * P-frame whose slice data is half zeros: the packet decodes, the frame comes out, and
 * before the counter read FFmpeg's log a frame-threaded decoder often handed it out
 * without its FF_DECODE_ERROR_CONCEALMENT_ACTIVE mark, so nothing was counted. Each
 * thread count is tried several times because that loss depends on thread timing. A clean
 * file must count none.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/data/video/video.h"
#pragma GCC diagnostic ignored "-Wformat-truncation" /* test paths are short */
#include "tests/testutil.h"

static char dir[4096];

/* Pictures the ffmpeg command conceals in path, decoding on one thread. */
static int ffmpeg_concealed(const char *path) {
    char cmd[8400];
    snprintf(cmd, sizeof cmd, "ffmpeg -nostdin -hide_banner -threads 1 -i '%s' -f null - 2>&1 | "
             "grep -c 'concealing '", path);
    FILE *p = popen(cmd, "r");
    int n = -1;
    if (p) {
        if (fscanf(p, "%d", &n) != 1)
            n = -1;
        pclose(p);
    }
    return n;
}

/* decode_errors after decoding every frame once, through a fresh open. */
static int64_t decode_all_errors(const char *path, int threads) {
    vt_video *v = NULL;
    char err[512] = "";
    TCHECK(vt_video_open(&v, path, threads, err, sizeof err) == 0, "%s: %s", path, err);
    if (!v)
        return -1;
    int64_t got = 0;
    TCHECK(vt_video_decode_all(v, 32, NULL, NULL, &got, err, sizeof err) == 0, "%s: %s", path,
           err);
    TCHECK(got == vt_video_get_info(v)->nframes, "%s: %lld of %lld frames", path,
           (long long)got, (long long)vt_video_get_info(v)->nframes);
    int64_t e = vt_video_get_stats(v)->decode_errors;
    vt_video_close(&v);
    return e;
}

/* The stream reader over the whole file: its decode errors, and the time of the last. */
static int64_t stream_errors(const char *path, int threads, int live, double *t_err) {
    vt_stream_opts o = {.threads = threads, .live = live};
    vt_stream *s = NULL;
    char err[512] = "";
    TCHECK(vt_stream_open_opts(&s, path, &o, err, sizeof err) == 0, "%s: %s", path, err);
    if (!s)
        return -1;
    const uint8_t *rgb;
    int w, h, r;
    double t, dur;
    while ((r = vt_stream_next(s, 32, &rgb, &w, &h, &t, &dur, err, sizeof err)) == 1) {
    }
    TCHECK(r == 0, "%s: %s", path, err);
    int64_t e = vt_stream_decode_errors(s);
    *t_err = vt_stream_error_time(s);
    vt_stream_close(&s);
    return e;
}

int main(void) {
    snprintf(dir, sizeof dir, "%s", vt_test_dir("conceal"));
    if (vt_test_make_media(dir, "hostile"))
        return 1;
    char bad[8192], clean[8192];
    snprintf(bad, sizeof bad, "%s/hostile/concealed.mp4", dir);
    snprintf(clean, sizeof clean, "%s/hostile/short5.mp4", dir);
    int want = ffmpeg_concealed(bad);
    TCHECK(want >= 1, "ffmpeg conceals %d pictures of concealed.mp4: make_media.sh's damage "
           "no longer reaches the slice data", want);
    TCHECK(ffmpeg_concealed(clean) == 0, "ffmpeg conceals pictures of the clean short5.mp4");
    printf("ffmpeg: %d picture(s) concealed in concealed.mp4\n", want);

    static const int threads[] = {1, 2, 3, 4, 0};
    for (size_t i = 0; i < sizeof threads / sizeof *threads; i++)
        for (int rep = 0; rep < 3; rep++) {
            int64_t e = decode_all_errors(bad, threads[i]);
            TCHECK(e == want, "threads %d (try %d): %lld decode errors counted, ffmpeg "
                   "concealed %d", threads[i], rep, (long long)e, want);
        }
    TCHECK(decode_all_errors(clean, 0) == 0, "a clean file counts no decode error");

    /* The stream reader: frame threads, and slice threads (--live: FFmpeg turns error
     * concealment off there, and the frame's own flag is what says so). The damaged
     * P-frame is in the second GOP (frames 12..23 at 25 fps). A repair known only from
     * the log is placed up to the decoder's delay after its frame (twice the 2 frames of
     * B-frame reordering, plus threads frames in flight), which is the slack here; with
     * FFmpeg's own thread count (0) it is unknown: up to the end. */
    for (int live = 0; live <= 1; live++)
        for (size_t i = 0; i < sizeof threads / sizeof *threads; i++) {
            double t = NAN;
            int64_t e = stream_errors(bad, threads[i], live, &t);
            TCHECK(e == want, "stream, threads %d%s: %lld decode errors counted, ffmpeg "
                   "concealed %d", threads[i], live ? " (live)" : "", (long long)e, want);
            int late = threads[i] == 0 ? 24 : 4 + threads[i];
            TCHECK(t >= 12 / 25.0 - 1e-6 && t < (24 + late) / 25.0, "stream, threads %d%s: "
                   "the error placed at %.3f s, outside the damaged GOP", threads[i],
                   live ? " (live)" : "", t);
        }
    double t = NAN;
    TCHECK(stream_errors(clean, 0, 0, &t) == 0, "stream: a clean file counts no decode error");
    return vt_test_done("test_conceal");
}
