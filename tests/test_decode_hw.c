/*
 * test_decode_hw.c: `--decode cpu|nvdec|auto` (video.h vt_decode_mode, docs/decode.md).
 * The truth is the CPU decode, itself checked against the ffmpeg command by test_decode.
 *
 *  1. the mode names parse, anything else is refused;
 *  2. every test medium (H.264, MPEG-4, MJPEG, FFV1, VFR, rotated), read as clips and
 *     decoded whole, under nvdec and auto: where a file decodes on the CPU (no GPU here,
 *     or a codec NVDEC lacks) the bytes equal --decode cpu's exactly; where it decodes on
 *     the GPU, H.264 is still byte-identical (its decode is bit-exact and (3) holds) and
 *     the codecs whose IDCT is not fixed (MPEG-4, MJPEG) stay within a small mean;
 *     Each H.264 file's nvdec reading takes the NVDEC decoder its auto reading closed (the
 *     decoder pool, video_pool.c): on a GPU, reused decoders are what (2) compares;
 *  3. the GPU's output layouts emulated on the CPU: a decoded yuv420p frame rearranged
 *     into NV12 (the same samples, chroma interleaved), and a 10-bit frame into P010,
 *     scale through the reader's scaler to the very bytes of the planar frame, at every
 *     size (swscale's native-size converter included) and rotation;
 *  3b. the streaming reader (stream.c, predict --timeline) under each mode: under cpu its
 *     frames are the bytes of the reader's whole decode; under nvdec and auto the same
 *     rules as (2) against its cpu reading;
 *  4. the command: under --decode nvdec exactly ONE warning (a path and a reason) for a
 *     set where some file cannot decode on the GPU — here all of them, on a GPU machine
 *     the FFV1 file — and none under auto or cpu; --decode bogus refused with the hint
 *     by bench decode, train, eval and predict.
 * It runs on any machine: on one with a GPU, (2) compares real NVDEC output.
 */
#include <libavutil/frame.h>
#include <libavutil/pixfmt.h>

#include "base/common.h"
#include "pipeline/data/video/video.h"
#include "tests/apputil.h"
#include "tests/mediautil.h"
#include "tests/testutil.h"

#define SS 64 /* short side of the scaled reads: downscaling, the loader's usual case */

static const char *const media[] = {"h264.mp4", "mpeg4.avi", "mjpeg.mkv",
                                    "ffv1.mkv", "vfr.mp4",   "rot90.mp4"};
#define NMEDIA ((int)(sizeof media / sizeof *media))

static int gpu_files;   /* files that decoded on the GPU in (2) */
static int gpu_streams; /* ... and in (3b) */

static void test_parse(void) {
    TCHECK(vt_decode_mode_parse("cpu") == VT_DECODE_CPU, "cpu");
    TCHECK(vt_decode_mode_parse("nvdec") == VT_DECODE_NVDEC, "nvdec");
    TCHECK(vt_decode_mode_parse("auto") == VT_DECODE_AUTO, "auto");
    const char *bad[] = {"bogus", "", "NVDEC", "gpu", "cuda", "cpu ", NULL};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        TCHECK(vt_decode_mode_parse(bad[i]) == -1, "'%s' must be refused",
               bad[i] ? bad[i] : "NULL");
    for (int m = VT_DECODE_AUTO; m <= VT_DECODE_NVDEC; m++)
        TCHECK(vt_decode_mode_parse(vt_decode_mode_name((vt_decode_mode)m)) == m, "name %d", m);
    TCHECK(vt_video_get_decode() == VT_DECODE_CPU, "the default is cpu");
}

/* Everything one mode reads from a file: three clips at two sizes and a whole decode. */
typedef struct reading {
    vt_test_bytes out;
    char decoder[8];
    double t[2], dur[2]; /* (3b) the first frame's time and duration, and the last's */
    int64_t frames;
} reading;

static int read_all(reading *r, const char *path, vt_decode_mode mode) {
    vt_video_set_decode(mode);
    memset(r, 0, sizeof *r);
    char err[512];
    vt_video *v = NULL;
    if (vt_video_open(&v, path, 1, err, sizeof err) < 0) {
        TCHECK(0, "%s (%s): open: %s", path, vt_decode_mode_name(mode), err);
        return -1;
    }
    snprintf(r->decoder, sizeof r->decoder, "%s", vt_video_get_info(v)->decoder);
    /* A start mid-GOP, a stride, a read past the end (padding), then back to the start
     * (a seek), each scaled and at the native size. */
    const struct { int64_t start; int t, stride, ss; } clips[] = {
        {5, 8, 1, SS}, {9, 6, 3, 0}, {40, 8, 2, SS}, {0, 4, 1, 0},
    };
    for (size_t c = 0; c < sizeof clips / sizeof *clips; c++) {
        int w, h;
        vt_video_scaled_size(v, clips[c].ss, &w, &h);
        size_t bytes = (size_t)clips[c].t * w * h * 3;
        int rc = vt_video_read_clip(v, vt_test_bytes_grow(&r->out, bytes), clips[c].start, clips[c].t,
                                    clips[c].stride, clips[c].ss, VT_PAD_LOOP, err, sizeof err);
        TCHECK(rc == 0, "%s (%s): clip %zu: %s", path, vt_decode_mode_name(mode), c, err);
    }
    int64_t got = 0;
    int rc = vt_video_decode_all(v, SS, vt_test_keep_frame, &r->out, &got, err, sizeof err);
    TCHECK(rc == 0 && got > 0, "%s (%s): decode_all: %s", path, vt_decode_mode_name(mode), err);
    vt_video_close(&v);
    return 0;
}

/* Mean and max absolute difference of two byte arrays. */
static void diff_stats(const uint8_t *a, const uint8_t *b, size_t n, double *mean, int *max) {
    double s = 0;
    *max = 0;
    for (size_t i = 0; i < n; i++) {
        int d = abs((int)a[i] - (int)b[i]);
        s += d;
        if (d > *max)
            *max = d;
    }
    *mean = n ? s / (double)n : 0;
}

/* A reading under mode m against the --decode cpu one: where it decoded on the CPU the
 * bytes are equal; on the GPU, the decoder is named "nvdec" and the pixels are within
 * the codec's tolerance. `what`: "" (the clip reader) or "stream " (3b). 1 when it
 * decoded on the GPU. */
static int agree(const char *name, const char *what, vt_decode_mode m, const reading *alt,
                 const reading *cpu) {
    if (!strcmp(alt->decoder, "cpu")) {
        TCHECK(alt->out.n == cpu->out.n && !memcmp(alt->out.p, cpu->out.p, cpu->out.n),
               "%s (%s, %son the CPU): pixels differ from --decode cpu", name,
               vt_decode_mode_name(m), what);
        return 0;
    }
    TCHECK(!strcmp(alt->decoder, "nvdec"), "%s: %sdecoder '%s'", name, what, alt->decoder);
    double mean;
    int max;
    diff_stats(alt->out.p, cpu->out.p, VT_MIN(alt->out.n, cpu->out.n), &mean, &max);
    /* H.264 decodes bit-exactly on any conforming decoder (the standard fixes every
     * integer transform and filter) and (3) shows the NV12 layout scales to the same
     * bytes: 0. MPEG-4 part 2 and MJPEG fix their IDCT only to IEEE 1180 accuracy (+-1 per
     * coefficient block), and P-frames carry it along a GOP of 12: a mean of 2 levels
     * still catches a wrong plane, a chroma swap or a shifted frame (tens of levels). */
    int exact = strstr(name, "mp4") != NULL; /* H.264 files */
    double tol = exact ? 0.0 : 2.0;
    printf("  %-10s %son the GPU (%s): mean |diff| %.4f, max %d levels\n", name, what,
           vt_decode_mode_name(m), mean, max);
    TCHECK(mean <= tol, "%s (%s, %son the GPU): mean |diff| %.3f > %.1f", name,
           vt_decode_mode_name(m), what, mean, tol);
    return 1;
}

static void test_modes_agree(void) {
    for (int f = 0; f < NMEDIA; f++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", vt_media, media[f]);
        reading cpu, alt;
        if (read_all(&cpu, path, VT_DECODE_CPU) < 0)
            continue;
        TCHECK(!strcmp(cpu.decoder, "cpu"), "%s: --decode cpu decoded on '%s'", media[f],
               cpu.decoder);
        for (vt_decode_mode m = VT_DECODE_AUTO; m <= VT_DECODE_NVDEC; m++) {
            if (m == VT_DECODE_CPU || read_all(&alt, path, m) < 0)
                continue;
            TCHECK(alt.out.n == cpu.out.n, "%s (%s): %zu bytes read, cpu %zu", media[f],
                   vt_decode_mode_name(m), alt.out.n, cpu.out.n);
            gpu_files += agree(media[f], "", m, &alt, &cpu) && m == VT_DECODE_NVDEC;
            free(alt.out.p);
        }
        free(cpu.out.p);
    }
    vt_video_set_decode(VT_DECODE_CPU);
}

/* ---- (3b) the streaming reader ---- */

/* Every frame of path through vt_stream at SS under mode. 0, or -1 (counted). */
static int read_stream(reading *r, const char *path, vt_decode_mode mode) {
    vt_video_set_decode(mode);
    memset(r, 0, sizeof *r);
    char err[512];
    vt_stream *st = NULL;
    if (vt_stream_open(&st, path, 1, err, sizeof err) < 0) {
        TCHECK(0, "%s (%s): stream open: %s", path, vt_decode_mode_name(mode), err);
        return -1;
    }
    snprintf(r->decoder, sizeof r->decoder, "%s", vt_stream_info(st)->decoder);
    const uint8_t *rgb;
    int w, h, rc;
    double t, dur;
    while ((rc = vt_stream_next(st, SS, &rgb, &w, &h, &t, &dur, err, sizeof err)) == 1) {
        vt_test_keep_frame(&r->out, rgb, 0, w, h);
        /* the first frame is the one a GPU open decodes early and keeps: its timing too */
        if (r->frames++ == 0) {
            r->t[0] = t;
            r->dur[0] = dur;
        }
        r->t[1] = t;
        r->dur[1] = dur;
    }
    TCHECK(rc == 0 && r->frames > 0, "%s (%s): stream read: %lld frames, %s", path,
           vt_decode_mode_name(mode), (long long)r->frames, rc ? err : "");
    vt_stream_close(&st);
    if (rc != 0 || r->frames == 0) {
        free(r->out.p);
        r->out.p = NULL;
        return -1;
    }
    return 0;
}

static void test_stream_modes(void) {
    for (int f = 0; f < NMEDIA; f++) {
        char path[4200], err[512];
        snprintf(path, sizeof path, "%s/%s", vt_media, media[f]);
        reading whole = {0}, cpu, alt;
        vt_video_set_decode(VT_DECODE_CPU);
        vt_video *v = NULL;
        int64_t got = 0;
        TCHECK(vt_video_open(&v, path, 1, err, sizeof err) == 0 &&
               vt_video_decode_all(v, SS, vt_test_keep_frame, &whole.out, &got, err, sizeof err) == 0 &&
               got > 0 && whole.out.n > 0,
               "%s: whole decode: %lld frames, %s", media[f], (long long)got, err);
        vt_video_close(&v);
        if (read_stream(&cpu, path, VT_DECODE_CPU) == 0) {
            TCHECK(!strcmp(cpu.decoder, "cpu"), "%s: stream under cpu decoded on '%s'",
                   media[f], cpu.decoder);
            /* the streams' promise (video.h): the reader's bytes for every frame */
            TCHECK(cpu.out.n == whole.out.n && !memcmp(cpu.out.p, whole.out.p, cpu.out.n),
                   "%s: the stream's frames (%zu bytes) differ from the reader's (%zu)",
                   media[f], cpu.out.n, whole.out.n);
            for (vt_decode_mode m = VT_DECODE_AUTO; m <= VT_DECODE_NVDEC; m++) {
                if (m == VT_DECODE_CPU || read_stream(&alt, path, m) < 0)
                    continue;
                TCHECK(alt.out.n == cpu.out.n, "%s (%s): stream %zu bytes, cpu %zu", media[f],
                       vt_decode_mode_name(m), alt.out.n, cpu.out.n);
                /* timing comes from the packets whoever decodes: equal, exactly */
                TCHECK(alt.frames == cpu.frames && alt.t[0] == cpu.t[0] &&
                       alt.dur[0] == cpu.dur[0] && alt.t[1] == cpu.t[1] &&
                       alt.dur[1] == cpu.dur[1],
                       "%s (%s): stream timing: %lld frames, first %g+%g, last %g+%g; cpu %lld, "
                       "%g+%g, %g+%g", media[f], vt_decode_mode_name(m), (long long)alt.frames,
                       alt.t[0], alt.dur[0], alt.t[1], alt.dur[1], (long long)cpu.frames,
                       cpu.t[0], cpu.dur[0], cpu.t[1], cpu.dur[1]);
                gpu_streams +=
                    agree(media[f], "stream ", m, &alt, &cpu) && m == VT_DECODE_NVDEC;
                free(alt.out.p);
            }
            free(cpu.out.p);
        }
        free(whole.out.p);
    }
    vt_video_set_decode(VT_DECODE_CPU);
}

/* ---- (3) the NV12 path on the CPU ---- */

typedef struct grab {
    int64_t want;
    AVFrame *f;
} grab;

static void grab_sink(void *ctx, int64_t pos, const AVFrame *frame) {
    grab *g = ctx;
    if (pos == g->want && !g->f)
        g->f = av_frame_clone(frame);
}

/* Sample (x, y) of plane c of a planar 4:2:0 frame, 8 or 16 bits. */
static unsigned sample(const AVFrame *f, int c, int x, int y, int wide) {
    const uint8_t *row = f->data[c] + (size_t)y * f->linesize[c];
    return wide ? ((const uint16_t *)row)[x] : row[x];
}

static void put(AVFrame *f, int c, int x, int y, int wide, unsigned v) {
    uint8_t *row = f->data[c] + (size_t)y * f->linesize[c];
    if (wide)
        ((uint16_t *)row)[x] = (uint16_t)v;
    else
        row[x] = (uint8_t)v;
}

/* The same samples as planar src (yuv420p or yuv420p10le) laid out as NVDEC hands them
 * over: NV12, or P010 (10 bits in the high bits of 16). */
static AVFrame *to_semiplanar(const AVFrame *src) {
    int wide = src->format == AV_PIX_FMT_YUV420P10LE, shift = wide ? 6 : 0;
    AVFrame *d = av_frame_alloc();
    if (!d)
        return NULL;
    d->format = wide ? AV_PIX_FMT_P010LE : AV_PIX_FMT_NV12;
    d->width = src->width;
    d->height = src->height;
    if (av_frame_get_buffer(d, 0) < 0 || av_frame_copy_props(d, src) < 0) {
        av_frame_free(&d);
        return NULL;
    }
    for (int y = 0; y < src->height; y++)
        for (int x = 0; x < src->width; x++)
            put(d, 0, x, y, wide, sample(src, 0, x, y, wide) << shift);
    for (int y = 0; y < (src->height + 1) / 2; y++)
        for (int x = 0; x < (src->width + 1) / 2; x++) {
            put(d, 1, 2 * x, y, wide, sample(src, 1, x, y, wide) << shift);
            put(d, 1, 2 * x + 1, y, wide, sample(src, 2, x, y, wide) << shift);
        }
    return d;
}

/* A 10-bit yuv420p10le frame of w x h with smooth gradients and sharp colour edges. */
static AVFrame *make_10bit(int w, int h) {
    AVFrame *f = av_frame_alloc();
    if (!f)
        return NULL;
    f->format = AV_PIX_FMT_YUV420P10LE;
    f->width = w;
    f->height = h;
    f->color_range = AVCOL_RANGE_MPEG;
    f->colorspace = AVCOL_SPC_BT709;
    if (av_frame_get_buffer(f, 0) < 0) {
        av_frame_free(&f);
        return NULL;
    }
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            put(f, 0, x, y, 1, 64 + (unsigned)((x * 7 + y * 3) % 877));
    for (int y = 0; y < (h + 1) / 2; y++)
        for (int x = 0; x < (w + 1) / 2; x++) {
            put(f, 1, x, y, 1, (x / 8 + y / 8) % 2 ? 900u : 124u);
            put(f, 2, x, y, 1, 64 + (unsigned)((x * 13) % 896));
        }
    return f;
}

static void test_nv12_path(void) {
    char path[4200], err[512];
    snprintf(path, sizeof path, "%s/h264.mp4", vt_media);
    vt_video_set_decode(VT_DECODE_CPU);
    vt_video *v = NULL;
    TCHECK(vt_video_open(&v, path, 1, err, sizeof err) == 0, "open: %s", err);
    if (!v)
        return;
    grab g = {.want = 7};
    vt_video_set_sink(v, grab_sink, &g);
    int w, h;
    vt_video_scaled_size(v, 0, &w, &h);
    uint8_t *clip = vt_malloc((size_t)w * h * 3);
    TCHECK(vt_video_read_clip(v, clip, 7, 1, 1, 0, VT_PAD_LOOP, err, sizeof err) == 0, "%s", err);
    vt_video_close(&v);
    vt_video_set_decode(VT_DECODE_CPU);
    TCHECK(g.f && g.f->format == AV_PIX_FMT_YUV420P, "frame 7 as yuv420p from the sink");
    if (!g.f || g.f->format != AV_PIX_FMT_YUV420P) {
        free(clip);
        av_frame_free(&g.f);
        return;
    }
    AVFrame *planar[2] = {g.f, make_10bit(160, 120)};
    TCHECK(planar[1] != NULL, "10-bit frame");
    vt_scaler *s = vt_scaler_new();
    /* Downscaled (the loader's case), the native size (swscale's unscaled converters, where
     * semi-planar and planar input would differ by whole chroma edges if passed to swscale
     * as they are), enlarged, and rotated. */
    const struct { int ow, oh, rot; } sizes[] = {
        {85, 64, 0}, {160, 120, 0}, {213, 160, 0}, {64, 85, 90}, {120, 160, 270},
    };
    for (int b = 0; b < 2 && planar[b]; b++) {
        AVFrame *semi = to_semiplanar(planar[b]);
        TCHECK(semi != NULL, "semi-planar frame");
        for (size_t k = 0; semi && k < sizeof sizes / sizeof *sizes; k++) {
            size_t bytes = (size_t)sizes[k].ow * sizes[k].oh * 3;
            uint8_t *x = vt_malloc(bytes), *y = vt_malloc(bytes);
            int rx = vt_scaler_convert(s, planar[b], sizes[k].rot, x, sizes[k].ow, sizes[k].oh,
                                       err, sizeof err);
            int ry = vt_scaler_convert(s, semi, sizes[k].rot, y, sizes[k].ow, sizes[k].oh, err,
                                       sizeof err);
            TCHECK(rx == 0 && ry == 0, "convert %zu: %s", k, err);
            double mean;
            int max;
            diff_stats(x, y, bytes, &mean, &max);
            /* The same samples: the reader rearranges them losslessly, so the bytes are
             * equal, not close. */
            TCHECK(max == 0, "%s vs %s at %dx%d rot %d: mean |diff| %.3f, max %d",
                   b ? "p010" : "nv12", b ? "yuv420p10" : "yuv420p", sizes[k].ow, sizes[k].oh,
                   sizes[k].rot, mean, max);
            free(x);
            free(y);
        }
        av_frame_free(&semi);
    }
    vt_scaler_free(&s);
    av_frame_free(&planar[1]);
    av_frame_free(&g.f);
    free(clip);
}

/* ---- (4) the command ---- */

/* Lines of file `path` that contain `needle`. */
static int count_lines(const char *path, const char *needle) {
    char *text = vt_test_slurp(path, NULL);
    int n = 0;
    for (char *line = text ? strtok(text, "\n") : NULL; line; line = strtok(NULL, "\n"))
        n += strstr(line, needle) != NULL;
    free(text);
    return n;
}

static void test_command(const char *bin) {
    const char *dir = vt_test_dir("decode_hw");
    char files[8192] = "", log[4200];
    for (int f = 0; f < NMEDIA; f++) {
        size_t len = strlen(files);
        snprintf(files + len, sizeof files - len, " '%s/%s'", vt_media, media[f]);
    }
    const char *modes[] = {"nvdec", "auto", "cpu"};
    for (int m = 0; m < 3; m++) {
        snprintf(log, sizeof log, "%s/%s.err", dir, modes[m]);
        int rc = vt_test_sh("'%s' bench decode%s --decode %s --mode clips --clips-per-video 2 "
                            "> '%s/%s.out' 2> '%s'", bin, files, modes[m], dir, modes[m], log);
        TCHECK(rc == 0, "bench decode --decode %s exited %d", modes[m], rc);
        int warned = count_lines(log, "--decode nvdec");
        if (m == 0) {
            /* FFV1 has no NVDEC decoder, so some file always falls back: one line. */
            TCHECK(warned == 1, "--decode nvdec: %d warning lines, want exactly 1 (see %s)",
                   warned, log);
            char *text = vt_test_slurp(log, NULL);
            TCHECK(text && strstr(text, vt_media) && strstr(text, "CPU"),
                   "the warning names a path and the CPU: %s", text ? text : "(none)");
            if (text && !gpu_files)
                TCHECK(strstr(text, "no CUDA device") != NULL, "reason: %s", text);
            free(text);
        } else {
            TCHECK(warned == 0, "--decode %s: %d warning lines, want none", modes[m], warned);
        }
    }
    /* bogus: every command that decodes refuses it with the three names, exit code 2. */
    const char *cmds[] = {"bench decode '%s'", "train '%s' --out '%s/run'", "eval '%s/run' '%s'",
                          "predict '%s/run' '%s'"};
    for (int c = 0; c < 4; c++) {
        char args[8400];
        if (c == 0)
            snprintf(args, sizeof args, cmds[c], vt_media);
        else if (c == 1)
            snprintf(args, sizeof args, cmds[c], vt_media, dir);
        else
            snprintf(args, sizeof args, cmds[c], dir, vt_media);
        snprintf(log, sizeof log, "%s/bogus%d.err", dir, c);
        int rc = vt_test_sh("'%s' %s --decode bogus > /dev/null 2> '%s'", bin, args, log);
        TCHECK(rc == 2, "%.20s --decode bogus exited %d, want 2 (usage)", args, rc);
        TCHECK(count_lines(log, "'bogus': expected cpu, nvdec or auto") == 1,
               "%.20s: the hint line (see %s)", args, log);
    }
}

int main(void) {
    const char *bin = vt_test_bin("test_decode_hw");
    if (!bin)
        return VT_TEST_SKIP;
    if (vt_test_media_make())
        return 1;
    test_parse();
    test_modes_agree();
    printf("files decoded on the GPU under --decode nvdec: %d of %d\n", gpu_files, NMEDIA);
    /* The decoder pool (video_pool.c) keeps NVDEC decoders by default: each H.264 MP4 read
     * under nvdec took the decoder its read under auto closed, so (2) compared reused
     * NVDEC decoders with the CPU. */
    vt_decoder_pool_stats dp;
    vt_video_get_decoder_pool_stats(&dp);
    printf("NVDEC decoders reused from the pool: %lld, made: %lld\n", (long long)dp.reused,
           (long long)dp.made);
    TCHECK(gpu_files == 0 || dp.reused > 0, "no NVDEC decoder was reused");
    test_stream_modes();
    printf("streams decoded on the GPU under --decode nvdec: %d of %d\n", gpu_streams, NMEDIA);
    /* a file the reader decodes on the GPU, the stream must too (the same attach) */
    TCHECK(gpu_streams == gpu_files, "the GPU decoded %d files as clips but %d as streams",
           gpu_files, gpu_streams);
    test_nv12_path();
    test_command(bin);
    return vt_test_done("test_decode_hw");
}
