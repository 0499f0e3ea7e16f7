/*
 * signature.c: perceptual video signatures (signature.h) — keyframe sampling through
 * FFmpeg, the pHash of a frame and its central crops, set matching, and the on-disk cache.
 *
 * The cost is the point: a keyframe decodes alone, so sampling keyframes costs a few
 * frames' decoding per GOP instead of the whole stream (docs/splits.md has the measured
 * share of a full decode). It must never abort or print on a bad file, and never let
 * timing or thread counts into the bytes: one decoder thread, frames in stream order.
 */
#include "pipeline/data/signature.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libswscale/swscale.h>

#include "base/common.h"
#include "pipeline/data/video/video.h"

#define GRID 96 /* the grey thumbnail the crops are cut from */

/* ---- the hash of one frame ---- */

/* Bilinear sample of a (w x h) grey image at (x, y) in pixel centres. */
static double at(const uint8_t *g, int w, int h, int stride, double x, double y) {
    if (x < 0) x = 0;
    if (y < 0) y = 0;
    if (x > w - 1) x = w - 1;
    if (y > h - 1) y = h - 1;
    int x0 = (int)x, y0 = (int)y, x1 = x0 + (x0 < w - 1), y1 = y0 + (y0 < h - 1);
    double fx = x - x0, fy = y - y0;
    double a = g[y0 * stride + x0] * (1 - fx) + g[y0 * stride + x1] * fx;
    double b = g[y1 * stride + x0] * (1 - fx) + g[y1 * stride + x1] * fx;
    return a * (1 - fy) + b * fy;
}

int vt_sig_phash(const uint8_t *grey, int w, int h, int stride, uint64_t *out) {
    /* 32x32 by averaging 2x2 bilinear taps per cell (enough smoothing for a hash) */
    double p[32][32], mean = 0, var = 0;
    for (int y = 0; y < 32; y++)
        for (int x = 0; x < 32; x++) {
            double s = 0;
            for (int k = 0; k < 4; k++) {
                double fx = (x + 0.25 + 0.5 * (k & 1)) * w / 32.0 - 0.5;
                double fy = (y + 0.25 + 0.5 * (k >> 1)) * h / 32.0 - 0.5;
                s += at(grey, w, h, stride, fx, fy);
            }
            p[y][x] = s / 4;
            mean += p[y][x];
        }
    mean /= 1024;
    for (int y = 0; y < 32; y++)
        for (int x = 0; x < 32; x++)
            var += (p[y][x] - mean) * (p[y][x] - mean);
    int flat = sqrt(var / 1024) < 2.0;
    /* the 8x8 lowest DCT-II frequencies, separably: rows then columns */
    static double cosv[8][32];
    static int init;
    if (!init) { /* the same values whichever thread fills them first */
        for (int u = 0; u < 8; u++)
            for (int x = 0; x < 32; x++)
                cosv[u][x] = cos(M_PI * (2 * x + 1) * u / 64.0);
        init = 1;
    }
    double r[32][8], c[64];
    for (int y = 0; y < 32; y++)
        for (int u = 0; u < 8; u++) {
            double s = 0;
            for (int x = 0; x < 32; x++)
                s += p[y][x] * cosv[u][x];
            r[y][u] = s;
        }
    for (int v = 0; v < 8; v++)
        for (int u = 0; u < 8; u++) {
            double s = 0;
            for (int y = 0; y < 32; y++)
                s += r[y][u] * cosv[v][y];
            c[v * 8 + u] = s;
        }
    /* 63 bits: every coefficient but DC against their median */
    double sorted[63];
    memcpy(sorted, c + 1, sizeof sorted);
    for (int i = 1; i < 63; i++) /* insertion sort: 63 values */
        for (int j = i; j > 0 && sorted[j - 1] > sorted[j]; j--) {
            double t = sorted[j];
            sorted[j] = sorted[j - 1];
            sorted[j - 1] = t;
        }
    double med = sorted[31];
    uint64_t hsh = 0;
    for (int i = 0; i < 63; i++)
        if (c[i + 1] > med)
            hsh |= 1ull << i;
    *out = hsh;
    return flat;
}

/* The three hashes of a GRID x GRID thumbnail: whole, central 80%, central 64%. 1 flat. */
static int frame_hashes(const uint8_t *g, uint64_t h[3]) {
    static const int side[3] = {GRID, 77, 61};
    int flat = 0;
    for (int k = 0; k < 3; k++) {
        int o = (GRID - side[k]) / 2;
        int f = vt_sig_phash(g + o * GRID + o, side[k], side[k], GRID, &h[k]);
        if (k == 0)
            flat = f;
    }
    return flat;
}

/* ---- frames to a signature ---- */

/* Frames in, a signature out: each frame at least `gap` seconds after the last one kept
 * is reduced to a GRID x GRID grey thumbnail and hashed (flat ones left out). */
struct vt_sig_acc {
    vt_sig sig;
    int cap;
    double gap, start, next_t;
    struct SwsContext *sws;
};

static void acc_init(vt_sig_acc *a, double gap) {
    memset(a, 0, sizeof *a);
    a->gap = gap;
    a->start = NAN;
}

/* A frame at t seconds (from any origin: the first frame's t is the signature's 0). */
static void acc_add(vt_sig_acc *a, const uint8_t *const *data, const int *linesize, int w, int h,
                    int fmt, double t) {
    if (isnan(t))
        t = isnan(a->start) ? 0 : a->start + a->next_t;
    if (isnan(a->start))
        a->start = t;
    t -= a->start;
    if (t < a->next_t - 1e-6)
        return; /* a frame between samples */
    a->next_t = t + a->gap;
    a->sws = sws_getCachedContext(a->sws, w, h, fmt, GRID, GRID, AV_PIX_FMT_GRAY8, SWS_AREA,
                                  NULL, NULL, NULL);
    if (!a->sws)
        return;
    uint8_t grey[GRID * GRID];
    uint8_t *dst[4] = {grey, NULL, NULL, NULL};
    int dst_stride[4] = {GRID, 0, 0, 0};
    if (sws_scale(a->sws, data, linesize, 0, h, dst, dst_stride) != GRID)
        return;
    vt_sig_frame sf = {.t = (float)t};
    if (frame_hashes(grey, sf.h))
        return;
    if (a->sig.n == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 64;
        a->sig.f = vt_realloc(a->sig.f, (size_t)a->cap * sizeof *a->sig.f);
    }
    a->sig.f[a->sig.n++] = sf;
}

vt_sig_acc *vt_sig_acc_new(void) {
    vt_sig_acc *a = vt_malloc(sizeof *a);
    acc_init(a, VT_SIG_DENSE_GAP);
    return a;
}

void vt_sig_acc_add_rgb(vt_sig_acc *a, const uint8_t *rgb, int w, int h, double t) {
    const uint8_t *data[4] = {rgb, NULL, NULL, NULL};
    int linesize[4] = {3 * w, 0, 0, 0};
    acc_add(a, data, linesize, w, h, AV_PIX_FMT_RGB24, t);
}

static void thin(vt_sig *s);

void vt_sig_acc_finish(vt_sig_acc **ap, double duration, vt_sig *out) {
    vt_sig_acc *a = *ap;
    memset(out, 0, sizeof *out);
    if (!a)
        return;
    *out = a->sig;
    out->duration = duration;
    out->full_decode = 1;
    thin(out);
    sws_freeContext(a->sws);
    free(a);
    *ap = NULL;
}

void vt_sig_acc_free(vt_sig_acc **ap) {
    if (!*ap)
        return;
    vt_sig_free(&(*ap)->sig);
    sws_freeContext((*ap)->sws);
    free(*ap);
    *ap = NULL;
}

/* ---- sampling a file ---- */

typedef struct pass {
    AVFormatContext *fmt;
    AVCodecContext *dec;
    AVPacket *pkt;
    AVFrame *frame;
    int stream;
    double tb;
    vt_sig_acc acc;
} pass;

static void push(pass *p, const AVFrame *fr) {
    int64_t ts = fr->best_effort_timestamp != AV_NOPTS_VALUE ? fr->best_effort_timestamp : fr->pts;
    acc_add(&p->acc, (const uint8_t *const *)fr->data, fr->linesize, fr->width, fr->height,
            fr->format, ts == AV_NOPTS_VALUE ? NAN : ts * p->tb);
}

static void drain(pass *p) {
    while (avcodec_receive_frame(p->dec, p->frame) == 0) {
        push(p, p->frame);
        av_frame_unref(p->frame);
    }
}

/* Frees all but p->acc.sig (the result, or the caller frees it). */
static void pass_close(pass *p) {
    sws_freeContext(p->acc.sws);
    av_packet_free(&p->pkt);
    av_frame_free(&p->frame);
    avcodec_free_context(&p->dec);
    avformat_close_input(&p->fmt);
}

/* The container's header names every video stream's codec and size (MP4, MKV, AVI): no
 * need for avformat_find_stream_info, which decodes the first frames to learn them (on a
 * 1080p file its first keyframe: ~0.1 s, as much as the rest of a keyframe pass). */
static int header_complete(const AVFormatContext *f) {
    int any = 0;
    for (unsigned i = 0; i < f->nb_streams; i++) {
        const AVCodecParameters *c = f->streams[i]->codecpar;
        if (c->codec_type != AVMEDIA_TYPE_VIDEO)
            continue;
        if (c->codec_id == AV_CODEC_ID_NONE || c->width <= 0 || c->height <= 0)
            return 0;
        any = 1;
    }
    return any;
}

/* keys_only: send only keyframe packets, p.acc.gap apart; else decode everything (but
 * frames nothing refers to) and keep a frame every VT_SIG_DENSE_GAP seconds. */
static int sample(const char *path, int keys_only, vt_sig *out, char *err, size_t errlen) {
    pass p = {0};
    acc_init(&p.acc, VT_SIG_DENSE_GAP);
    memset(out, 0, sizeof *out);
    char why[512] = "";
    int ret = vt_video_open_input(&p.fmt, path, why, sizeof why);
    if (ret < 0 || (!header_complete(p.fmt) && (ret = avformat_find_stream_info(p.fmt, NULL)) < 0)) {
        vt_set_err(err, errlen, "%s: %s", path, why[0] ? why : av_err2str(ret));
        pass_close(&p);
        return ret < 0 ? ret : -1;
    }
    const AVCodec *codec = NULL;
    p.stream = av_find_best_stream(p.fmt, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
    if (p.stream < 0 || !codec) {
        vt_set_err(err, errlen, "%s: no video stream with a decoder", path);
        pass_close(&p);
        return -1;
    }
    AVStream *st = p.fmt->streams[p.stream];
    p.tb = av_q2d(st->time_base);
    double duration = p.fmt->duration > 0 ? p.fmt->duration / (double)AV_TIME_BASE : 0;
    p.dec = avcodec_alloc_context3(codec);
    avcodec_parameters_to_context(p.dec, st->codecpar);
    p.dec->thread_count = 1;
    /* a 32x32 hash cannot see deblocking, nor miss a frame nothing refers to */
    p.dec->skip_loop_filter = AVDISCARD_ALL;
    p.dec->skip_frame = keys_only ? AVDISCARD_NONKEY : AVDISCARD_NONREF;
    double gap = duration / VT_SIG_MIN_FRAMES;
    if (keys_only)
        p.acc.gap = gap > VT_SIG_KEY_GAP ? VT_SIG_KEY_GAP : gap < VT_SIG_GAP ? VT_SIG_GAP : gap;
    if ((ret = avcodec_open2(p.dec, codec, NULL)) < 0) {
        vt_set_err(err, errlen, "%s: cannot open the decoder (%s)", path, av_err2str(ret));
        pass_close(&p);
        return ret;
    }
    p.pkt = av_packet_alloc();
    p.frame = av_frame_alloc();
    double next_key = -1e300;
    while (av_read_frame(p.fmt, p.pkt) >= 0) {
        if (p.pkt->stream_index == p.stream) {
            int send = 1;
            if (keys_only) {
                int64_t ts = p.pkt->pts != AV_NOPTS_VALUE ? p.pkt->pts : p.pkt->dts;
                double t = ts == AV_NOPTS_VALUE ? next_key : ts * p.tb;
                send = (p.pkt->flags & AV_PKT_FLAG_KEY) && t >= next_key - 1e-6;
                if (send)
                    next_key = t + p.acc.gap;
            }
            /* a packet the decoder refuses (corrupt) is skipped: the others still count */
            if (send && avcodec_send_packet(p.dec, p.pkt) >= 0)
                drain(&p);
        }
        av_packet_unref(p.pkt);
    }
    avcodec_send_packet(p.dec, NULL);
    drain(&p);
    pass_close(&p);
    *out = p.acc.sig;
    out->duration = duration;
    return 0;
}

static void thin(vt_sig *s) {
    if (s->n <= VT_SIG_MAX_FRAMES)
        return;
    for (int i = 0; i < VT_SIG_MAX_FRAMES; i++)
        s->f[i] = s->f[(int64_t)i * s->n / VT_SIG_MAX_FRAMES];
    s->n = VT_SIG_MAX_FRAMES;
}

/* What a whole decode of path would cost, before any is done: its duration and the
 * pixels it would decode (width x height x frames, from the container's header). */
typedef struct probe {
    double duration;  /* seconds, 0 unknown */
    double pixels;    /* 0 unknown (then a whole decode is not refused for its cost) */
} probe;

/* path's probe; zeros when unknown or unreadable (the keyframe pass then says why). */
static probe probe_of(const char *path) {
    AVFormatContext *f = NULL;
    probe pr = {0, 0};
    char why[512];
    if (vt_video_open_input(&f, path, why, sizeof why) == 0) {
        if (f->duration > 0)
            pr.duration = f->duration / (double)AV_TIME_BASE;
        int s = av_find_best_stream(f, AVMEDIA_TYPE_VIDEO, -1, -1, NULL, 0);
        if (s >= 0) {
            const AVStream *st = f->streams[s];
            double fps = av_q2d(st->avg_frame_rate) > 0 ? av_q2d(st->avg_frame_rate)
                                                        : av_q2d(st->r_frame_rate);
            double frames = st->nb_frames > 0 ? (double)st->nb_frames
                            : fps > 0 && fps < 1000 ? pr.duration * fps : 0;
            pr.pixels = (double)st->codecpar->width * st->codecpar->height * frames;
        }
    }
    avformat_close_input(&f);
    return pr;
}

int vt_sig_compute(const char *path, vt_sig *out, char *err, size_t errlen) {
    probe pr = probe_of(path);
    /* a whole decode only where it is cheap: never more than VT_SIG_DENSE_PIXELS decoded
     * (a long-GOP HD file is signed by its keyframes alone: docs/splits.md) */
    int dense_ok = pr.pixels <= VT_SIG_DENSE_PIXELS;
    /* too short for VT_SIG_MIN_FRAMES keyframes VT_SIG_GAP apart: straight to the whole
     * decode (short clips: one open instead of two) */
    if (dense_ok && pr.duration > 0 && pr.duration < VT_SIG_MIN_FRAMES * VT_SIG_GAP) {
        int r = sample(path, 0, out, err, errlen);
        if (r == 0 && out->n > 0) {
            out->full_decode = 1;
            thin(out);
            return 0;
        }
        vt_sig_free(out);
    }
    int ret = sample(path, 1, out, err, errlen);
    if (ret < 0)
        return ret;
    /* too few keyframes for the length: one whole decode, sampled evenly */
    if (dense_ok && out->n < VT_SIG_MIN_FRAMES &&
        out->duration > (out->n + 1) * VT_SIG_DENSE_GAP) {
        vt_sig full;
        if (sample(path, 0, &full, err, errlen) == 0 && full.n > out->n) {
            vt_sig_free(out);
            *out = full;
            out->full_decode = 1;
        } else {
            vt_sig_free(&full);
        }
    }
    out->sparse = !dense_ok && out->n < VT_SIG_MIN_FRAMES &&
                  out->duration > (out->n + 1) * VT_SIG_DENSE_GAP;
    thin(out);
    return 0;
}

void vt_sig_free(vt_sig *s) {
    if (!s)
        return;
    vt_freep(&s->f);
    memset(s, 0, sizeof *s);
}

/* ---- matching ---- */

/* Fewest differing bits between frame x of a and frame y of b: whole against whole, or
 * the crop of one against the other's whole (a copy cropped from the other). */
static int frame_dist(const vt_sig_frame *x, const vt_sig_frame *y) {
    int d = __builtin_popcountll(x->h[0] ^ y->h[0]);
    for (int k = 1; k < 3; k++) {
        int a = __builtin_popcountll(x->h[k] ^ y->h[0]);
        int b = __builtin_popcountll(x->h[0] ^ y->h[k]);
        d = a < d ? a : d;
        d = b < d ? b : d;
    }
    return d;
}

static int best_dist(const vt_sig *a, const vt_sig_frame *y) {
    int best = 64;
    for (int i = 0; i < a->n && best > 0; i++) {
        int d = frame_dist(&a->f[i], y);
        best = d < best ? d : best;
    }
    return best;
}

double vt_sig_share(const vt_sig *a, const vt_sig *b, int *nmatch) {
    int m = 0;
    for (int j = 0; j < b->n; j++)
        m += best_dist(a, &b->f[j]) <= VT_SIG_HAMMING;
    if (nmatch)
        *nmatch = m;
    return b->n ? (double)m / b->n : 0;
}

int vt_sig_near(const vt_sig *a, const vt_sig *b, double share, double *sim) {
    if (sim)
        *sim = 0;
    if (!a->n || !b->n)
        return 0;
    if (a->n == 1 || b->n == 1) {
        const vt_sig *one = a->n == 1 ? a : b, *other = a->n == 1 ? b : a;
        int d = best_dist(other, &one->f[0]);
        if (sim)
            *sim = d <= VT_SIG_HAMMING ? 1 : 0;
        return d <= VT_SIG_HAMMING / 2;
    }
    int mab, mba;
    double ab = vt_sig_share(a, b, &mab), ba = vt_sig_share(b, a, &mba);
    double s = ab > ba ? ab : ba;
    int m = ab > ba ? mab : mba;
    if (sim)
        *sim = s;
    return s >= share && m >= 2;
}

/* ---- the cache ---- */

static const char magic[8] = "VTSIG01";

static int cache_path(const char *path, const char *dir, char *out, size_t n) {
    struct stat st;
    char *real = realpath(path, NULL);
    if (!real || stat(real, &st) != 0) {
        free(real);
        return -1;
    }
    char key[4400];
    snprintf(key, sizeof key, "%s\n%lld\n%lld.%09ld\nv%d", real, (long long)st.st_size,
             (long long)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec, VT_SIG_VERSION);
    free(real);
    uint64_t h = vt_hash64(vt_fnv1a(key, strlen(key), VT_FNV_SEED));
    snprintf(out, n, "%s/%016llx.sig", dir, (unsigned long long)h);
    return 0;
}

/* A cached file: validated whole (its length is the count's), else -1 (recompute). A
 * FIFO or a device where a file should be is not waited on: recomputed. */
static int cache_read(const char *file, vt_sig *out) {
    char err[64];
    FILE *f = vt_fopen_regular(file, err, sizeof err);
    if (!f)
        return -1;
    char m[8];
    uint32_t n = 0, full = 0;
    double dur = 0;
    int ok = fread(m, 8, 1, f) == 1 && !memcmp(m, magic, 8) && fread(&n, 4, 1, f) == 1 &&
             fread(&full, 4, 1, f) == 1 && fread(&dur, 8, 1, f) == 1 &&
             n <= VT_SIG_MAX_FRAMES && isfinite(dur);
    memset(out, 0, sizeof *out);
    if (ok) {
        out->f = vt_malloc((size_t)(n ? n : 1) * sizeof *out->f);
        for (uint32_t i = 0; ok && i < n; i++) {
            float t;
            ok = fread(&t, 4, 1, f) == 1 && fread(out->f[i].h, 8, 3, f) == 3;
            out->f[i].t = t;
        }
        ok = ok && fgetc(f) == EOF;
        out->n = (int)n;
        out->full_decode = (full & 1) != 0;
        out->sparse = (full & 2) != 0;
        out->duration = dur;
    }
    fclose(f);
    if (!ok)
        vt_sig_free(out);
    return ok ? 0 : -1;
}

static int cache_write(const char *file, const vt_sig *s) {
    size_t len = 24 + (size_t)s->n * 28;
    uint8_t *b = vt_malloc(len), *q = b;
    uint32_t n = (uint32_t)s->n, full = (uint32_t)(s->full_decode | s->sparse << 1);
    memcpy(q, magic, 8), q += 8;
    memcpy(q, &n, 4), q += 4;
    memcpy(q, &full, 4), q += 4;
    memcpy(q, &s->duration, 8), q += 8;
    for (int i = 0; i < s->n; i++) {
        memcpy(q, &s->f[i].t, 4), q += 4;
        memcpy(q, s->f[i].h, 24), q += 24;
    }
    char err[1024];
    int rc = vt_file_write_atomic(file, b, len, err, sizeof err);
    free(b);
    return rc;
}

int vt_sig_store(const char *path, const char *cache_dir, const vt_sig *s) {
    char file[4600];
    if (!cache_dir || cache_path(path, cache_dir, file, sizeof file) != 0)
        return -1;
    return cache_write(file, s) == 0 ? 0 : -1;
}

int vt_sig_cached(const char *path, const char *cache_dir, vt_sig *out, int *hit, char *err,
                  size_t errlen) {
    char file[4600];
    if (hit)
        *hit = 0;
    int have = cache_dir && cache_path(path, cache_dir, file, sizeof file) == 0;
    if (have && cache_read(file, out) == 0) {
        if (hit)
            *hit = 1;
        return 0;
    }
    int ret = vt_sig_compute(path, out, err, errlen);
    if (ret < 0 || !have)
        return ret;
    cache_write(file, out); /* a cache that cannot be written only costs time */
    return 0;
}
