/*
 * video.c: one video file through FFmpeg (video.h). Open = probe, pick the best video
 * stream, refuse absurd dimensions, demux every packet once (no decoding) to build the
 * frame index (one pts per frame, sorted into presentation order, so VFR files are
 * addressed by timestamp) and the keyframe list, then decode one frame to prove the file
 * decodes. A clip read seeks to the keyframe at or before the first wanted frame, decodes
 * forward with the send/receive idiom, picks frames by pts, scales them with swscale
 * straight to RGB24 and rotates the RGB pixels when the display matrix asks for it.
 *
 * This file must never print and never abort on a bad file: every data error becomes a
 * negative AVERROR-style code plus a reason in err. FFmpeg's own logging is captured by
 * a callback (the last error line goes into reasons, nothing reaches stderr unless
 * VT_FFMPEG_LOG=1 is set for debugging).
 */
#include "pipeline/data/video.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/display.h>
#include <libavutil/imgutils.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>

#include "models/common.h"

/* SWS_BILINEAR: swscale widens the bilinear tent with the downscale factor, so it
 * averages like an area filter when shrinking and interpolates when enlarging, and it is
 * what `ffmpeg -vf scale=...:flags=bilinear` uses, which the tests compare against. */
#define VT_SWS_FLAGS SWS_BILINEAR
#define VT_SWS_CACHE 4   /* sws contexts per video: a few sizes, a mid-stream format change */
#define VT_MAX_SEEK_RETRY 2
#define VT_SKIP_KEEP 64  /* skipped positions remembered exactly (reorder + thread delay is less) */

typedef struct vt_sws_entry {
    struct SwsContext *ctx;
    int src_w, src_h, src_fmt, dst_w, dst_h, colorspace, range;
    uint64_t used;
} vt_sws_entry;

struct vt_scaler {
    vt_sws_entry sws[VT_SWS_CACHE];
    uint64_t sws_tick;
    uint8_t *tmp;           /* RGB24 before rotation, rows 64-byte aligned */
    size_t tmp_size;
};

struct vt_video {
    char *path;
    int threads;
    AVFormatContext *fmt;
    AVCodecContext *dec;
    AVPacket *pkt;
    AVFrame *frame;
    int sidx;
    vt_video_info info;
    int64_t *pts;           /* (nframes) presentation timestamps, sorted */
    int64_t *kf;            /* (nkf) keyframe pts, sorted */
    int64_t nkf;
    int64_t start_ts;       /* smallest dts/pts seen: a seek here is a seek to the start */
    int no_ts;              /* packets without timestamps: frames are counted, not looked up */
    int intra_only;         /* every packet is a keyframe (MJPEG, FFV1...): frames independent */
    const int64_t *want;    /* (nwant) sorted index positions the current read needs, or NULL */
    int nwant;
    /* Positions whose packet was skipped (not decoded) since the last seek: a later read
     * that wants one of them must seek. The most recent VT_SKIP_KEEP are kept exactly
     * (a continuing read checks its wanted positions against them); older ones only
     * by their highest position, skip_lost_hi (-1 if none). */
    int64_t skipped[VT_SKIP_KEEP];
    int nskipped;           /* entries filled, up to VT_SKIP_KEEP; then a ring at skip_at */
    int skip_at;
    int64_t skip_lost_hi;
    /* decoder position */
    int streaming;          /* 1 when the decoder continues from last_pos without a seek */
    int eof_sent;           /* NULL packet sent: drained, needs a seek before more reads */
    int64_t last_pos;       /* index position of the last frame received, -1 after a seek */
    vt_scaler sc;           /* scaling */
    vt_video_frame_sink sink; /* clean decoded frames also go here (vt_video_set_sink) */
    void *sink_ctx;
    uint8_t *seq;           /* (h, w, 3) frame handed to decode_all callbacks */
    size_t seq_size;
    vt_video_stats stats;
};

/* ---- FFmpeg logging: captured, never printed ---- */

static _Thread_local char last_av_msg[256];
static int av_log_forward;
static pthread_once_t log_once = PTHREAD_ONCE_INIT;

static void log_cb(void *avcl, int level, const char *fmt, va_list vl) {
    if (av_log_forward) {
        va_list copy;
        va_copy(copy, vl);
        av_log_default_callback(avcl, level, fmt, copy);
        va_end(copy);
    }
    if (level > AV_LOG_ERROR)
        return;
    char line[256];
    int prefix = 0;
    av_log_format_line2(avcl, level, fmt, vl, line, sizeof line, &prefix);
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' '))
        line[--n] = 0;
    if (n)
        snprintf(last_av_msg, sizeof last_av_msg, "%s", line);
}

static void log_init(void) {
    const char *e = getenv("VT_FFMPEG_LOG");
    av_log_forward = e && *e && strcmp(e, "0") != 0;
    av_log_set_level(av_log_forward ? AV_LOG_INFO : AV_LOG_ERROR);
    av_log_set_callback(log_cb);
}

void vt_ffmpeg_log_init(void) { pthread_once(&log_once, log_init); }

/* "cannot read the container: moov atom not found (Invalid data found when processing
 * input)": FFmpeg's own last error line says more than the AVERROR code, so it goes first. */
static void set_av_err(char *err, size_t errlen, const char *what, int code) {
    char buf[128];
    av_strerror(code, buf, sizeof buf);
    if (last_av_msg[0])
        vt_set_err(err, errlen, "%s: %s (%s)", what, last_av_msg, buf);
    else
        vt_set_err(err, errlen, "%s: %s", what, buf);
}

/* ---- small helpers ---- */

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* First index i with a[i] >= x (n when none). */
static int64_t lower_bound(const int64_t *a, int64_t n, int64_t x) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (a[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int rotation_of(const AVStream *st) {
    const int32_t *m = NULL;
#if LIBAVCODEC_VERSION_INT >= AV_VERSION_INT(60, 29, 100)
    const AVPacketSideData *sd = av_packet_side_data_get(st->codecpar->coded_side_data,
                                                         st->codecpar->nb_coded_side_data,
                                                         AV_PKT_DATA_DISPLAYMATRIX);
    if (sd && sd->size >= 9 * sizeof(int32_t))
        m = (const int32_t *)sd->data;
#else
    size_t size = 0;
    const uint8_t *sd = av_stream_get_side_data(st, AV_PKT_DATA_DISPLAYMATRIX, &size);
    if (sd && size >= 9 * sizeof(int32_t))
        m = (const int32_t *)sd;
#endif
    if (!m)
        return 0;
    /* Same convention as the ffmpeg command (fftools get_rotation): the matrix rotates
     * counter-clockwise by av_display_rotation_get; displaying needs the opposite. */
    double theta = -round(av_display_rotation_get(m));
    if (isnan(theta))
        return 0;
    theta -= 360 * floor(theta / 360 + 0.9 / 360);
    for (int r = 0; r < 360; r += 90)
        if (fabs(theta - r) < 1.0)
            return r;
    return 0; /* not a multiple of 90 degrees (or mirrored): left as coded */
}

static int open_input(vt_video *v, char *err, size_t errlen) {
    last_av_msg[0] = 0;
    int ret = avformat_open_input(&v->fmt, v->path, NULL, NULL);
    if (ret < 0) {
        set_av_err(err, errlen, "cannot read the container", ret);
        return ret;
    }
    /* Refuse absurd headers before find_stream_info reads (and allocates) a frame. */
    for (unsigned i = 0; i < v->fmt->nb_streams; i++) {
        const AVCodecParameters *p = v->fmt->streams[i]->codecpar;
        if (p->codec_type != AVMEDIA_TYPE_VIDEO)
            continue;
        if (p->width > VT_VIDEO_MAX_SIDE || p->height > VT_VIDEO_MAX_SIDE ||
            (int64_t)p->width * p->height > VT_VIDEO_MAX_PIXELS) {
            vt_set_err(err, errlen,
                       "dimensions %dx%d exceed the limit (%d per side, %lld Mpixel): "
                       "corrupt header or not a training video",
                       p->width, p->height, VT_VIDEO_MAX_SIDE, VT_VIDEO_MAX_PIXELS >> 20);
            return AVERROR(ERANGE);
        }
    }
    ret = avformat_find_stream_info(v->fmt, NULL);
    if (ret < 0) {
        set_av_err(err, errlen, "cannot find stream parameters", ret);
        return ret;
    }
    return 0;
}

/* Keep only the video stream's packets: demuxing skips the rest cheaply. */
static void discard_others(vt_video *v) {
    for (unsigned i = 0; i < v->fmt->nb_streams; i++)
        v->fmt->streams[i]->discard = (int)i == v->sidx ? AVDISCARD_DEFAULT : AVDISCARD_ALL;
}

/* One pts per frame by demuxing, no decoding. */
static int build_index(vt_video *v, char *err, size_t errlen) {
    int64_t cap = 256, n = 0, kcap = 16, nk = 0;
    v->pts = vt_malloc((size_t)cap * sizeof(int64_t));
    v->kf = vt_malloc((size_t)kcap * sizeof(int64_t));
    v->start_ts = INT64_MAX;
    int64_t last_dur = 0;
    for (;;) {
        int ret = av_read_frame(v->fmt, v->pkt);
        if (ret < 0)
            break; /* EOF, or a truncated tail: the index holds what could be read */
        if (v->pkt->stream_index == v->sidx && !(v->pkt->flags & AV_PKT_FLAG_DISCARD)) {
            int64_t ts = v->pkt->pts != AV_NOPTS_VALUE ? v->pkt->pts : v->pkt->dts;
            if (ts == AV_NOPTS_VALUE) {
                v->no_ts = 1;
                ts = n;
            }
            if (v->pkt->dts != AV_NOPTS_VALUE && v->pkt->dts < v->start_ts)
                v->start_ts = v->pkt->dts;
            if (ts < v->start_ts)
                v->start_ts = ts;
            if (n == cap) {
                cap *= 2;
                v->pts = vt_realloc(v->pts, (size_t)cap * sizeof(int64_t));
            }
            v->pts[n++] = ts;
            if (v->pkt->flags & AV_PKT_FLAG_KEY) {
                if (nk == kcap) {
                    kcap *= 2;
                    v->kf = vt_realloc(v->kf, (size_t)kcap * sizeof(int64_t));
                }
                v->kf[nk++] = ts;
            }
            if (v->pkt->duration > 0)
                last_dur = v->pkt->duration;
        }
        av_packet_unref(v->pkt);
    }
    if (n == 0) {
        vt_set_err(err, errlen, "the video stream has no packets (empty or truncated file)");
        return AVERROR_INVALIDDATA;
    }
    if (!v->no_ts) {
        qsort(v->pts, (size_t)n, sizeof(int64_t), cmp_i64);
        qsort(v->kf, (size_t)nk, sizeof(int64_t), cmp_i64);
    }
    v->info.nframes = n;
    v->nkf = nk;
    const AVCodecDescriptor *cd = avcodec_descriptor_get(v->fmt->streams[v->sidx]->codecpar->codec_id);
    v->intra_only = nk == n && cd && (cd->props & AV_CODEC_PROP_INTRA_ONLY);

    /* Duration, fps, VFR from the sorted timestamps. */
    AVStream *st = v->fmt->streams[v->sidx];
    double tb = av_q2d(st->time_base);
    int64_t dmin = INT64_MAX, dmax = 0;
    if (!v->no_ts)
        for (int64_t i = 1; i < n; i++) {
            int64_t d = v->pts[i] - v->pts[i - 1];
            if (d < dmin)
                dmin = d;
            if (d > dmax)
                dmax = d;
        }
    if (last_dur <= 0 && n > 1 && !v->no_ts)
        last_dur = (v->pts[n - 1] - v->pts[0]) / (n - 1);
    if (!v->no_ts && tb > 0)
        v->info.duration = (double)(v->pts[n - 1] - v->pts[0] + last_dur) * tb;
    if (v->info.duration <= 0 && v->fmt->duration > 0)
        v->info.duration = (double)v->fmt->duration / AV_TIME_BASE;
    AVRational afr = st->avg_frame_rate;
    if (afr.num > 0 && afr.den > 0)
        v->info.fps = av_q2d(afr);
    else if (v->info.duration > 0)
        v->info.fps = (double)n / v->info.duration;
    /* VFR: frame durations differ by more than 1% and by more than one tick (a 1 ms
     * timebase rounds 29.97 fps into 33/34 ms steps, which is not VFR). */
    if (n > 2 && dmax > 0 && dmin != INT64_MAX)
        v->info.vfr = (dmax - dmin) > 1 && (double)(dmax - dmin) > 0.01 * (double)dmax;
    return 0;
}

/* ---- decoding ---- */

static int seek_ts(vt_video *v, int64_t ts, char *err, size_t errlen);

/* Reopen the container when a demuxer cannot seek (some formats only read forward). */
static int reopen(vt_video *v, char *err, size_t errlen) {
    avformat_close_input(&v->fmt);
    int ret = open_input(v, err, errlen);
    if (ret < 0)
        return ret;
    if (v->sidx >= (int)v->fmt->nb_streams) {
        vt_set_err(err, errlen, "stream layout changed on reopen");
        return AVERROR_INVALIDDATA;
    }
    discard_others(v);
    return 0;
}

static int seek_ts(vt_video *v, int64_t ts, char *err, size_t errlen) {
    v->stats.seeks++;
    int ret = av_seek_frame(v->fmt, v->sidx, ts, AVSEEK_FLAG_BACKWARD);
    if (ret < 0 && ts <= v->start_ts)
        ret = avformat_seek_file(v->fmt, v->sidx, INT64_MIN, ts, ts, 0);
    if (ret < 0) {
        /* Cannot seek: start again from the top; frames before ts are skipped by pts. */
        ret = reopen(v, err, errlen);
        if (ret < 0)
            return ret;
    }
    avcodec_flush_buffers(v->dec);
    v->nskipped = 0;
    v->skip_at = 0;
    v->skip_lost_hi = -1;
    v->eof_sent = 0;
    v->streaming = 0;
    v->last_pos = -1;
    return 0;
}

/* Does the current read need the frame of this packet? Unknown (no exact pts) = yes.
 * A skipped position is remembered: a later read that wants it must seek. */
static int packet_wanted(vt_video *v, const AVPacket *pkt) {
    if (!v->want || v->no_ts)
        return 1;
    int64_t ts = pkt->pts != AV_NOPTS_VALUE ? pkt->pts : pkt->dts;
    if (ts == AV_NOPTS_VALUE)
        return 1;
    int64_t i = lower_bound(v->pts, v->info.nframes, ts);
    if (i >= v->info.nframes || v->pts[i] != ts)
        return 1;
    int64_t j = lower_bound(v->want, v->nwant, i);
    if (j < v->nwant && v->want[j] == i)
        return 1;
    if (v->nskipped < VT_SKIP_KEEP) {
        v->skipped[v->nskipped++] = i;
    } else {
        if (v->skipped[v->skip_at] > v->skip_lost_hi)
            v->skip_lost_hi = v->skipped[v->skip_at];
        v->skipped[v->skip_at] = i;
        v->skip_at = (v->skip_at + 1) % VT_SKIP_KEEP;
    }
    return 0;
}

/* Next frame into v->frame: 1 got one, 0 end of stream, < 0 error (err set).
 * Decode errors (a corrupt packet) are counted and skipped, never fatal. */
static int next_frame(vt_video *v, char *err, size_t errlen) {
    int bad_in_a_row = 0;
    for (;;) {
        int ret = avcodec_receive_frame(v->dec, v->frame);
        if (ret >= 0) {
            if ((v->frame->flags & AV_FRAME_FLAG_CORRUPT) || v->frame->decode_error_flags)
                v->stats.decode_errors++;
            v->stats.frames_decoded++;
            return 1;
        }
        if (ret == AVERROR_EOF)
            return 0;
        if (ret != AVERROR(EAGAIN)) {
            /* A frame-threaded decoder reports a bad packet here, not from send. */
            v->stats.decode_errors++;
            if (++bad_in_a_row > 10000) {
                set_av_err(err, errlen, "decoder keeps failing", ret);
                return ret;
            }
            continue;
        }
        if (v->eof_sent)
            return 0; /* drained decoder answering EAGAIN: nothing more will come */
        ret = av_read_frame(v->fmt, v->pkt);
        if (ret < 0) {
            /* EOF, or a read error in a truncated file: drain what was sent. */
            avcodec_send_packet(v->dec, NULL);
            v->eof_sent = 1;
            continue;
        }
        if (v->pkt->stream_index != v->sidx) {
            av_packet_unref(v->pkt);
            continue;
        }
        /* Less decoding, same pixels: a frame nobody wants is not decoded when nothing
         * depends on it — any frame of an intra-only stream (not even sent), or a
         * non-reference frame (B-frames) of any codec (skip_frame, read per packet,
         * also by frame threads). Frames that are wanted decode exactly as before. */
        int wanted = packet_wanted(v, v->pkt);
        if (!wanted && v->intra_only && !(v->pkt->flags & AV_PKT_FLAG_DISCARD)) {
            av_packet_unref(v->pkt);
            continue;
        }
        v->dec->skip_frame = wanted ? AVDISCARD_DEFAULT : AVDISCARD_NONREF;
        ret = avcodec_send_packet(v->dec, v->pkt);
        av_packet_unref(v->pkt);
        if (ret < 0 && ret != AVERROR(EAGAIN)) {
            v->stats.decode_errors++;
            if (++bad_in_a_row > 10000) {
                set_av_err(err, errlen, "decoder keeps failing", ret);
                return ret;
            }
        }
    }
}

/* Index position of the frame in v->frame (after last_pos). */
static int64_t frame_pos(vt_video *v) {
    int64_t n = v->info.nframes;
    int64_t ts = v->frame->pts;
    if (ts == AV_NOPTS_VALUE)
        ts = v->frame->best_effort_timestamp;
    if (v->no_ts || ts == AV_NOPTS_VALUE)
        return v->last_pos + 1;
    int64_t i = lower_bound(v->pts, n, ts);
    if (i < n && v->pts[i] == ts) {
        /* Duplicate timestamps (broken muxers): take the next unused one. */
        while (i <= v->last_pos && i + 1 < n && v->pts[i + 1] == ts)
            i++;
        return i;
    }
    /* Not in the index (decoder-made timestamp): the nearest indexed frame. */
    if (i == 0)
        return 0;
    if (i == n)
        return n - 1;
    return (ts - v->pts[i - 1] <= v->pts[i] - ts) ? i - 1 : i;
}

/* ---- scaling and rotation ---- */

static struct SwsContext *get_sws(vt_scaler *sc, const AVFrame *f, int dw, int dh,
                                  char *err, size_t errlen) {
    int range = f->color_range;
    int cs = f->colorspace;
    vt_sws_entry *slot = NULL;
    for (int i = 0; i < VT_SWS_CACHE; i++) {
        vt_sws_entry *e = &sc->sws[i];
        if (e->ctx && e->src_w == f->width && e->src_h == f->height && e->src_fmt == f->format &&
            e->dst_w == dw && e->dst_h == dh && e->colorspace == cs && e->range == range) {
            e->used = ++sc->sws_tick;
            return e->ctx;
        }
        if (!slot || !e->ctx || (slot->ctx && e->used < slot->used))
            slot = e;
    }
    sws_freeContext(slot->ctx);
    memset(slot, 0, sizeof *slot);
    struct SwsContext *ctx = sws_getContext(f->width, f->height, f->format, dw, dh,
                                            AV_PIX_FMT_RGB24, VT_SWS_FLAGS, NULL, NULL, NULL);
    if (!ctx) {
        const char *name = av_get_pix_fmt_name(f->format);
        vt_set_err(err, errlen, "cannot convert %dx%d %s to %dx%d rgb24", f->width, f->height,
                   name ? name : "?", dw, dh);
        return NULL;
    }
    /* Colour matrix and range from the frame, as `ffmpeg -vf scale` does: a BT.709 file
     * converts with BT.709 coefficients, full-range (JPEG) input stays full range. */
    const AVPixFmtDescriptor *d = av_pix_fmt_desc_get(f->format);
    if (d && !(d->flags & AV_PIX_FMT_FLAG_RGB) && d->nb_components >= 3) {
        int *inv_table, *table, src_full, dst_full, bri, con, sat;
        if (sws_getColorspaceDetails(ctx, &inv_table, &src_full, &table, &dst_full, &bri, &con,
                                     &sat) >= 0) {
            int c = cs;
            if (c < 1 || c > 10 || c == 8)
                c = SWS_CS_DEFAULT;
            if (range == AVCOL_RANGE_JPEG)
                src_full = 1;
            else if (range == AVCOL_RANGE_MPEG)
                src_full = 0;
            sws_setColorspaceDetails(ctx, sws_getCoefficients(c), src_full, table, dst_full, bri,
                                     con, sat);
        }
    }
    slot->ctx = ctx;
    slot->src_w = f->width;
    slot->src_h = f->height;
    slot->src_fmt = f->format;
    slot->dst_w = dw;
    slot->dst_h = dh;
    slot->colorspace = cs;
    slot->range = range;
    slot->used = ++sc->sws_tick;
    return ctx;
}

vt_scaler *vt_scaler_new(void) { return vt_calloc(1, sizeof(vt_scaler)); }

static void scaler_clear(vt_scaler *s) {
    for (int i = 0; i < VT_SWS_CACHE; i++)
        sws_freeContext(s->sws[i].ctx);
    av_freep(&s->tmp);
    memset(s, 0, sizeof *s);
}

void vt_scaler_free(vt_scaler **ps) {
    if (!ps || !*ps)
        return;
    scaler_clear(*ps);
    free(*ps);
    *ps = NULL;
}

int vt_scaler_convert(vt_scaler *sc, const AVFrame *f, int rot, uint8_t *out, int ow, int oh,
                      char *err, size_t errlen) {
    int sw = (rot == 90 || rot == 270) ? oh : ow; /* scaled size in coded orientation */
    int sh = (rot == 90 || rot == 270) ? ow : oh;
    if (f->width <= 0 || f->height <= 0) {
        vt_set_err(err, errlen, "decoder returned an empty frame");
        return AVERROR_INVALIDDATA;
    }
    struct SwsContext *ctx = get_sws(sc, f, sw, sh, err, errlen);
    if (!ctx)
        return AVERROR(EINVAL);
    /* Aligned scratch rows: swscale's SIMD paths want them, and the ffmpeg command's
     * filter frames are aligned too, so both take the same code path. */
    int stride = FFALIGN(sw * 3, 64);
    size_t need = (size_t)stride * (size_t)sh + 64;
    if (need > sc->tmp_size) {
        av_freep(&sc->tmp);
        sc->tmp = av_malloc(need);
        VT_CHECK(sc->tmp != NULL, "out of memory for a %dx%d frame", sw, sh);
        sc->tmp_size = need;
    }
    uint8_t *dst[4] = {sc->tmp, NULL, NULL, NULL};
    int dst_stride[4] = {stride, 0, 0, 0};
    int ret = sws_scale(ctx, (const uint8_t *const *)f->data, f->linesize, 0, f->height, dst,
                        dst_stride);
    if (ret <= 0) {
        vt_set_err(err, errlen, "swscale failed on a %dx%d frame", f->width, f->height);
        return AVERROR(EINVAL);
    }
    const uint8_t *s = sc->tmp;
    if (rot == 0) {
        for (int y = 0; y < oh; y++)
            memcpy(out + (size_t)y * ow * 3, s + (size_t)y * stride, (size_t)ow * 3);
    } else if (rot == 180) {
        for (int y = 0; y < oh; y++) {
            const uint8_t *row = s + (size_t)(sh - 1 - y) * stride;
            uint8_t *o = out + (size_t)y * ow * 3;
            for (int x = 0; x < ow; x++)
                memcpy(o + 3 * x, row + 3 * (sw - 1 - x), 3);
        }
    } else if (rot == 90) { /* clockwise: out(x, y) = src(col y, row sh-1-x) */
        for (int y = 0; y < oh; y++) {
            uint8_t *o = out + (size_t)y * ow * 3;
            for (int x = 0; x < ow; x++)
                memcpy(o + 3 * x, s + (size_t)(sh - 1 - x) * stride + 3 * y, 3);
        }
    } else { /* 270 clockwise: out(x, y) = src(col sw-1-y, row x) */
        for (int y = 0; y < oh; y++) {
            uint8_t *o = out + (size_t)y * ow * 3;
            for (int x = 0; x < ow; x++)
                memcpy(o + 3 * x, s + (size_t)x * stride + 3 * (sw - 1 - y), 3);
        }
    }
    return 0;
}

/* ---- public API ---- */

int vt_video_open(vt_video **out, const char *path, int threads, char *err, size_t errlen) {
    *out = NULL;
    vt_ffmpeg_log_init();
    struct stat sb;
    if (stat(path, &sb) != 0) {
        vt_set_err(err, errlen, "cannot open: %s", strerror(errno));
        return AVERROR(errno ? errno : ENOENT);
    }
    if (!S_ISREG(sb.st_mode)) {
        vt_set_err(err, errlen, "not a regular file");
        return AVERROR(EINVAL);
    }
    if (sb.st_size == 0) {
        vt_set_err(err, errlen, "empty file (0 bytes)");
        return AVERROR_INVALIDDATA;
    }
    vt_video *v = vt_calloc(1, sizeof *v);
    v->path = vt_strdup(path);
    v->threads = threads;
    v->sidx = -1;
    v->last_pos = -1;
    v->skip_lost_hi = -1;
    v->pkt = av_packet_alloc();
    v->frame = av_frame_alloc();
    VT_CHECK(v->pkt && v->frame, "out of memory");
    int ret = open_input(v, err, errlen);
    if (ret < 0)
        goto fail;

    const AVCodec *codec = NULL;
    last_av_msg[0] = 0;
    ret = av_find_best_stream(v->fmt, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
    if (ret < 0) {
        if (ret == AVERROR_STREAM_NOT_FOUND) {
            char what[96] = "";
            for (unsigned i = 0; i < v->fmt->nb_streams && !what[0]; i++) {
                const AVCodecParameters *p = v->fmt->streams[i]->codecpar;
                if (p->codec_type == AVMEDIA_TYPE_AUDIO)
                    snprintf(what, sizeof what, " (audio only: %s)", avcodec_get_name(p->codec_id));
            }
            vt_set_err(err, errlen, "no video stream%s", what);
        } else if (ret == AVERROR_DECODER_NOT_FOUND) {
            int i = av_find_best_stream(v->fmt, AVMEDIA_TYPE_VIDEO, -1, -1, NULL, 0);
            vt_set_err(err, errlen, "no decoder for the video codec '%s' in this FFmpeg build",
                       i >= 0 ? avcodec_get_name(v->fmt->streams[i]->codecpar->codec_id) : "?");
        } else {
            set_av_err(err, errlen, "no usable video stream", ret);
        }
        goto fail;
    }
    v->sidx = ret;
    AVStream *st = v->fmt->streams[v->sidx];
    /* Cover art (an attached picture) is not a video. */
    if (st->disposition & AV_DISPOSITION_ATTACHED_PIC) {
        vt_set_err(err, errlen, "no video stream (only an attached picture)");
        ret = AVERROR_STREAM_NOT_FOUND;
        goto fail;
    }
    AVCodecParameters *par = st->codecpar;
    if (par->width > VT_VIDEO_MAX_SIDE || par->height > VT_VIDEO_MAX_SIDE ||
        (int64_t)par->width * par->height > VT_VIDEO_MAX_PIXELS) {
        vt_set_err(err, errlen,
                   "dimensions %dx%d exceed the limit (%d per side, %lld Mpixel): corrupt "
                   "header or not a training video",
                   par->width, par->height, VT_VIDEO_MAX_SIDE, VT_VIDEO_MAX_PIXELS >> 20);
        ret = AVERROR(ERANGE);
        goto fail;
    }

    v->dec = avcodec_alloc_context3(codec);
    VT_CHECK(v->dec != NULL, "out of memory");
    ret = avcodec_parameters_to_context(v->dec, par);
    if (ret < 0) {
        set_av_err(err, errlen, "bad codec parameters", ret);
        goto fail;
    }
    v->dec->thread_count = threads < 0 ? 0 : threads;
    v->dec->thread_type = FF_THREAD_FRAME | FF_THREAD_SLICE;
    v->dec->pkt_timebase = st->time_base;
    /* Decoders refuse larger frames themselves, even when a later header changes size. */
    v->dec->max_pixels = VT_VIDEO_MAX_PIXELS;
    last_av_msg[0] = 0;
    ret = avcodec_open2(v->dec, codec, NULL);
    if (ret < 0) {
        set_av_err(err, errlen, "cannot open the decoder", ret);
        goto fail;
    }

    vt_video_info *in = &v->info;
    in->width = par->width;
    in->height = par->height;
    in->rotation = rotation_of(st);
    snprintf(in->codec, sizeof in->codec, "%s", avcodec_get_name(par->codec_id));
    snprintf(in->container, sizeof in->container, "%s", v->fmt->iformat->name);
    char *comma = strchr(in->container, ',');
    if (comma)
        *comma = 0;
    const char *pf = av_get_pix_fmt_name(par->format);
    snprintf(in->pix_fmt, sizeof in->pix_fmt, "%s", pf ? pf : "unknown");

    discard_others(v);
    ret = build_index(v, err, errlen);
    if (ret < 0)
        goto fail;

    /* Prove that the file decodes, and learn the real frame size and format. */
    ret = seek_ts(v, v->start_ts, err, errlen);
    v->stats.seeks = 0;
    if (ret < 0)
        goto fail;
    last_av_msg[0] = 0;
    ret = next_frame(v, err, errlen);
    if (ret < 0)
        goto fail;
    if (ret == 0) {
        if (last_av_msg[0])
            vt_set_err(err, errlen, "0 decodable frames of %lld indexed (FFmpeg: %s)",
                       (long long)in->nframes, last_av_msg);
        else
            vt_set_err(err, errlen, "0 decodable frames of %lld indexed", (long long)in->nframes);
        ret = AVERROR_INVALIDDATA;
        goto fail;
    }
    if (v->frame->width > VT_VIDEO_MAX_SIDE || v->frame->height > VT_VIDEO_MAX_SIDE ||
        (int64_t)v->frame->width * v->frame->height > VT_VIDEO_MAX_PIXELS) {
        vt_set_err(err, errlen, "dimensions %dx%d exceed the limit", v->frame->width,
                   v->frame->height);
        ret = AVERROR(ERANGE);
        goto fail;
    }
    in->width = v->frame->width;
    in->height = v->frame->height;
    pf = av_get_pix_fmt_name(v->frame->format);
    if (pf)
        snprintf(in->pix_fmt, sizeof in->pix_fmt, "%s", pf);
    v->last_pos = frame_pos(v);
    v->streaming = 1;
    av_frame_unref(v->frame);
    int swap = in->rotation == 90 || in->rotation == 270;
    in->disp_width = swap ? in->height : in->width;
    in->disp_height = swap ? in->width : in->height;
    *out = v;
    return 0;

fail:
    vt_video_close(&v);
    return ret < 0 ? ret : AVERROR_INVALIDDATA;
}

void vt_video_close(vt_video **pv) {
    if (!pv || !*pv)
        return;
    vt_video *v = *pv;
    scaler_clear(&v->sc);
    free(v->seq);
    avcodec_free_context(&v->dec);
    avformat_close_input(&v->fmt);
    av_packet_free(&v->pkt);
    av_frame_free(&v->frame);
    free(v->pts);
    free(v->kf);
    free(v->path);
    free(v);
    *pv = NULL;
}

const vt_video_info *vt_video_get_info(const vt_video *v) { return &v->info; }

const vt_video_stats *vt_video_get_stats(const vt_video *v) { return &v->stats; }

int64_t vt_video_frame_ts(const vt_video *v, int64_t n, int *tb_num, int *tb_den) {
    AVRational tb = v->fmt->streams[v->sidx]->time_base;
    if (v->no_ts || tb.num <= 0 || tb.den <= 0) {
        AVRational fr = av_d2q(v->info.fps > 0 ? v->info.fps : 25.0, 1 << 16);
        *tb_num = fr.den;
        *tb_den = fr.num;
        return n;
    }
    *tb_num = tb.num;
    *tb_den = tb.den;
    return v->pts[n] - v->pts[0];
}

void vt_video_scaled_size(const vt_video *v, int short_side, int *out_w, int *out_h) {
    vt_video_info_scaled_size(&v->info, short_side, out_w, out_h);
}

void vt_video_info_scaled_size(const vt_video_info *in, int short_side, int *out_w,
                               int *out_h) {
    int w = in->disp_width, h = in->disp_height;
    if (short_side > 0 && w > 0 && h > 0) {
        if (w <= h) {
            h = (int)lround((double)h * short_side / w);
            w = short_side;
        } else {
            w = (int)lround((double)w * short_side / h);
            h = short_side;
        }
    }
    *out_w = w < 1 ? 1 : w;
    *out_h = h < 1 ? 1 : h;
}

/* Seek so that decoding reaches position q: to the keyframe at or before it, `back`
 * keyframes earlier on a retry, the start of the file after VT_MAX_SEEK_RETRY. */
static int seek_for(vt_video *v, int64_t q, int back, char *err, size_t errlen) {
    if (v->no_ts || v->nkf == 0 || back >= VT_MAX_SEEK_RETRY)
        return seek_ts(v, v->start_ts, err, errlen);
    int64_t k = lower_bound(v->kf, v->nkf, v->pts[q] + 1) - 1 - back; /* last kf <= pts[q] */
    if (k < 0)
        return seek_ts(v, v->start_ts, err, errlen);
    return seek_ts(v, v->kf[k], err, errlen);
}

/* Could the decoder reach q from where it is without a seek, and should it? Yes when q
 * is ahead and a seek would not save work: no keyframe lies between the current position
 * and q (a seek would land at or before where we already are), or the keyframe before q
 * is at most VT_CONTINUE_REFS frames ahead (a seek would skip decoding that few frames
 * but costs a demuxer seek, a decoder flush and, with frame threads, refilling the
 * pipeline). In an intra-only stream passing a frame costs one packet read (it is never
 * sent), so up to VT_CONTINUE_INTRA frames are passed rather than seeking per frame.
 * Pixels are the same either way: a keyframe decodes the same whether it was reached by
 * seeking or by decoding on (decoding on is what the ffmpeg command does). */
#define VT_CONTINUE_REFS 4
#define VT_CONTINUE_INTRA 32
static int can_continue(const vt_video *v, int64_t q) {
    if (!v->streaming || v->eof_sent || v->last_pos < 0 || q <= v->last_pos)
        return 0;
    if (v->no_ts)
        return 1;
    if (v->intra_only)
        return q - v->last_pos <= VT_CONTINUE_INTRA;
    int64_t k = lower_bound(v->kf, v->nkf, v->pts[q] + 1) - 1;
    if (k < 0 || v->kf[k] <= v->pts[v->last_pos])
        return 1;
    int64_t kpos = lower_bound(v->pts, v->info.nframes, v->kf[k]); /* index position */
    return kpos - v->last_pos - 1 <= VT_CONTINUE_REFS;
}

void vt_clip_positions(int64_t nframes, int64_t start, int t, int stride, vt_pad_policy pad,
                       int64_t *pos) {
    for (int i = 0; i < t; i++) {
        int64_t p = start + (int64_t)i * stride;
        if (p >= nframes)
            p = pad == VT_PAD_REPEAT_LAST ? nframes - 1 : p % nframes;
        pos[i] = p;
    }
}

void vt_video_set_sink(vt_video *v, vt_video_frame_sink sink, void *ctx) {
    v->sink = sink;
    v->sink_ctx = ctx;
}

/* May the frame in v->frame, at index position m, go to the sink? Only when its pixels
 * cannot depend on how the decoder got there: no decode error on this handle so far, the
 * frame not flagged corrupt, and its position read off a timestamp that only it has (a
 * counted or duplicate-timestamp position could depend on the seek). */
static int frame_is_clean(const vt_video *v, int64_t m) {
    const AVFrame *f = v->frame;
    if (v->no_ts || v->stats.decode_errors || (f->flags & AV_FRAME_FLAG_CORRUPT) ||
        f->decode_error_flags || m < 0 || m >= v->info.nframes)
        return 0;
    int64_t ts = f->pts != AV_NOPTS_VALUE ? f->pts : f->best_effort_timestamp;
    return ts == v->pts[m] && (m + 1 >= v->info.nframes || v->pts[m + 1] != ts) &&
           (m == 0 || v->pts[m - 1] != ts);
}

int vt_video_read_clip(vt_video *v, uint8_t *out, int64_t start, int t, int stride,
                       int short_side, vt_pad_policy pad, char *err, size_t errlen) {
    int64_t n = v->info.nframes;
    if (start < 0 || t <= 0 || stride <= 0) {
        vt_set_err(err, errlen, "bad clip request: start %lld, %d frames, stride %d",
                   (long long)start, t, stride);
        return AVERROR(EINVAL);
    }
    int ow, oh;
    vt_video_scaled_size(v, short_side, &ow, &oh);
    size_t fbytes = (size_t)ow * oh * 3;
    int64_t *want = vt_malloc((size_t)t * sizeof(int64_t));   /* (t) index position per slot */
    int64_t *uniq = vt_malloc((size_t)t * sizeof(int64_t));   /* (nu) sorted distinct positions */
    char *filled = vt_calloc((size_t)t, 1);
    int ret = 0, nu = 0;
    vt_clip_positions(n, start, t, stride, pad, want);
    memcpy(uniq, want, (size_t)t * sizeof(int64_t));
    qsort(uniq, (size_t)t, sizeof(int64_t), cmp_i64);
    for (int i = 0; i < t; i++)
        if (nu == 0 || uniq[nu - 1] != uniq[i])
            uniq[nu++] = uniq[i];
    /* The decoder may be past packets that an earlier read skipped (not decoded); if this
     * read wants one of them, it starts from a seek. */
    if (v->skip_lost_hi >= uniq[0])
        v->streaming = 0;
    for (int i = 0; i < v->nskipped && v->streaming; i++) {
        int64_t j = lower_bound(uniq, nu, v->skipped[i]);
        if (j < nu && uniq[j] == v->skipped[i])
            v->streaming = 0;
    }
    v->want = uniq;
    v->nwant = nu;

    for (int k = 0; k < nu; k++) {
        int64_t q = uniq[k];
        int got_q = 0;
        for (int i = 0; i < t; i++)
            if (want[i] == q && filled[i])
                got_q = 1;
        if (got_q)
            continue;
        int back = 0, fresh = 0;
        if (!can_continue(v, q)) {
            ret = seek_for(v, q, back, err, errlen);
            if (ret < 0)
                goto done;
            fresh = 1;
        }
        for (;;) {
            ret = next_frame(v, err, errlen);
            if (ret < 0)
                goto done;
            if (ret == 0) { /* end of stream before q: q (and later ones) are missing */
                v->streaming = 0;
                if (fresh && back < VT_MAX_SEEK_RETRY && v->last_pos < 0) {
                    /* Nothing decoded after this seek: try from an earlier keyframe. */
                    back++;
                    ret = seek_for(v, q, back, err, errlen);
                    if (ret < 0)
                        goto done;
                    continue;
                }
                ret = 0;
                break;
            }
            int64_t m = frame_pos(v);
            if (fresh && m > q && back < VT_MAX_SEEK_RETRY) {
                /* Overshot: the demuxer's seek landed after q (dts-indexed containers,
                 * open GOPs). Go one keyframe further back. */
                av_frame_unref(v->frame);
                back++;
                ret = seek_for(v, q, back, err, errlen);
                if (ret < 0)
                    goto done;
                continue;
            }
            fresh = 0;
            v->last_pos = m;
            v->streaming = 1;
            if (v->sink && frame_is_clean(v, m))
                v->sink(v->sink_ctx, m, v->frame);
            int first = -1;
            for (int i = 0; i < t; i++) {
                if (want[i] != m || filled[i])
                    continue;
                uint8_t *dst = out + (size_t)i * fbytes;
                if (first < 0) {
                    ret = vt_scaler_convert(&v->sc, v->frame, v->info.rotation, dst, ow, oh,
                                            err, errlen);
                    if (ret < 0) {
                        av_frame_unref(v->frame);
                        goto done;
                    }
                    first = i;
                } else {
                    memcpy(dst, out + (size_t)first * fbytes, fbytes);
                }
                filled[i] = 1;
            }
            av_frame_unref(v->frame);
            if (m >= q)
                break;
        }
    }

    /* Frames that never decoded: nearest decoded frame of the clip, earlier first. */
    int any = 0;
    for (int i = 0; i < t; i++)
        any |= filled[i];
    if (!any) {
        vt_set_err(err, errlen, "no frame of the clip decoded (frames %lld..%lld of %lld; "
                   "corrupt stream)", (long long)want[0], (long long)want[t - 1], (long long)n);
        ret = AVERROR_INVALIDDATA;
        goto done;
    }
    for (int i = 0; i < t; i++) {
        if (filled[i])
            continue;
        int src = -1;
        for (int j = i - 1; j >= 0 && src < 0; j--)
            if (filled[j])
                src = j;
        for (int j = i + 1; j < t && src < 0; j++)
            if (filled[j])
                src = j;
        memcpy(out + (size_t)i * fbytes, out + (size_t)src * fbytes, fbytes);
        v->stats.missing_frames++;
    }
    ret = 0;

done:
    if (ret < 0)
        v->streaming = 0; /* after an error, the next read starts from a clean seek */
    v->want = NULL;
    v->nwant = 0;
    free(want);
    free(uniq);
    free(filled);
    return ret;
}

int vt_video_decode_all(vt_video *v, int short_side, vt_video_frame_fn fn, void *user,
                        int64_t *out_frames, char *err, size_t errlen) {
    int ow, oh, scale = short_side >= 0;
    vt_video_scaled_size(v, VT_MAX(short_side, 0), &ow, &oh);
    size_t fbytes = (size_t)ow * oh * 3;
    if (scale && fbytes > v->seq_size) {
        free(v->seq);
        v->seq = vt_malloc(fbytes);
        v->seq_size = fbytes;
    }
    int64_t count = 0;
    int ret = seek_ts(v, v->start_ts, err, errlen);
    if (ret < 0)
        goto done;
    for (;;) {
        ret = next_frame(v, err, errlen);
        if (ret <= 0)
            break;
        int64_t m = frame_pos(v);
        v->last_pos = m;
        if (v->sink && frame_is_clean(v, m))
            v->sink(v->sink_ctx, m, v->frame);
        if (scale)
            ret = vt_scaler_convert(&v->sc, v->frame, v->info.rotation, v->seq, ow, oh, err,
                                    errlen);
        av_frame_unref(v->frame);
        if (ret < 0)
            break;
        count++;
        if (scale && fn && fn(user, v->seq, m, ow, oh))
            break;
    }
    v->streaming = 0; /* the decoder is drained or stopped mid-way: next read seeks */
    if (ret >= 0 && count == 0) {
        vt_set_err(err, errlen, "0 decodable frames");
        ret = AVERROR_INVALIDDATA;
    }
done:
    if (out_frames)
        *out_frames = count;
    return ret < 0 ? ret : 0;
}
