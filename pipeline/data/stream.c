/*
 * stream.c: a video read once, front to back (stream.h) — the FFmpeg demux/decode idiom
 * (send/receive, EAGAIN and EOF not errors, flush with NULL) with no index and no seek,
 * each frame scaled through vt_scaler_convert so its pixels are read_clip's.
 *
 * It must never seek, never ask for the duration and never keep more than the one frame
 * it hands out: the input may be a pipe or a live source that never ends.
 */
#include "pipeline/data/stream.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>

#include "models/common.h"
#include "pipeline/data/video_impl.h"

struct vt_stream {
    AVFormatContext *fmt;
    AVCodecContext *dec;
    AVPacket *pkt;
    AVFrame *frame;
    int sidx;
    AVRational tb;
    int64_t first_ts;        /* the first frame's timestamp (AV_NOPTS_VALUE before it) */
    int64_t nframes;         /* frames handed out */
    int64_t decode_errors;
    int demux_done, flushed; /* no more packets; the decoder was flushed */
    vt_video_info info;
    vt_scaler *scaler;
    uint8_t *rgb;
    size_t rgb_cap;
};

static void av_err(char *err, size_t errlen, const char *what, int ret) {
    char buf[AV_ERROR_MAX_STRING_SIZE] = "";
    av_strerror(ret, buf, sizeof buf);
    vt_set_err(err, errlen, "%s: %s", what, buf);
}

static int open_decoder(vt_stream *s, int threads, char *err, size_t errlen) {
    const AVCodec *codec = NULL;
    int ret = av_find_best_stream(s->fmt, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
    if (ret < 0 || !codec) {
        vt_set_err(err, errlen, "no decodable video stream");
        return ret < 0 ? ret : AVERROR_DECODER_NOT_FOUND;
    }
    s->sidx = ret;
    AVStream *st = s->fmt->streams[ret];
    for (unsigned i = 0; i < s->fmt->nb_streams; i++) /* demux only what is decoded */
        s->fmt->streams[i]->discard = (int)i == s->sidx ? AVDISCARD_DEFAULT : AVDISCARD_ALL;
    const AVCodecParameters *p = st->codecpar;
    if (p->width <= 0 || p->height <= 0 || p->width > VT_VIDEO_MAX_SIDE ||
        p->height > VT_VIDEO_MAX_SIDE || (int64_t)p->width * p->height > VT_VIDEO_MAX_PIXELS) {
        vt_set_err(err, errlen, "frame size %dx%d is not a video's (limit %d per side)",
                   p->width, p->height, VT_VIDEO_MAX_SIDE);
        return AVERROR_INVALIDDATA;
    }
    s->dec = avcodec_alloc_context3(codec);
    VT_CHECK(s->dec != NULL, "avcodec_alloc_context3 (out of memory)");
    if ((ret = avcodec_parameters_to_context(s->dec, p)) < 0) {
        av_err(err, errlen, "decoder parameters", ret);
        return ret;
    }
    s->dec->thread_count = threads;
    s->dec->pkt_timebase = st->time_base;
    if ((ret = avcodec_open2(s->dec, codec, NULL)) < 0) {
        av_err(err, errlen, "cannot open the decoder", ret);
        return ret;
    }
    s->tb = st->time_base;
    vt_video_info *in = &s->info;
    in->width = p->width;
    in->height = p->height;
    in->rotation = vt_vid_rotation_of(st);
    int swap = in->rotation == 90 || in->rotation == 270;
    in->disp_width = swap ? p->height : p->width;
    in->disp_height = swap ? p->width : p->height;
    AVRational fr = st->avg_frame_rate.num > 0 ? st->avg_frame_rate : st->r_frame_rate;
    in->fps = fr.num > 0 && fr.den > 0 ? av_q2d(fr) : 0;
    in->duration = s->fmt->duration > 0 ? (double)s->fmt->duration / AV_TIME_BASE : 0;
    snprintf(in->codec, sizeof in->codec, "%s", codec->name);
    snprintf(in->container, sizeof in->container, "%s", s->fmt->iformat->name);
    return 0;
}

int vt_stream_open(vt_stream **out, const char *url, int threads, char *err, size_t errlen) {
    *out = NULL;
    vt_ffmpeg_log_init();
    vt_stream *s = vt_calloc(1, sizeof *s);
    s->first_ts = AV_NOPTS_VALUE;
    const char *name = strcmp(url, "-") ? url : "pipe:0";
    int ret = avformat_open_input(&s->fmt, name, NULL, NULL);
    if (ret < 0) {
        av_err(err, errlen, "cannot open", ret);
        vt_stream_close(&s);
        return ret;
    }
    if ((ret = avformat_find_stream_info(s->fmt, NULL)) < 0) {
        av_err(err, errlen, "cannot find stream parameters", ret);
        vt_stream_close(&s);
        return ret;
    }
    if ((ret = open_decoder(s, threads, err, errlen)) < 0) {
        vt_stream_close(&s);
        return ret;
    }
    s->pkt = av_packet_alloc();
    s->frame = av_frame_alloc();
    s->scaler = vt_scaler_new();
    VT_CHECK(s->pkt && s->frame, "av_packet_alloc/av_frame_alloc (out of memory)");
    *out = s;
    return 0;
}

void vt_stream_close(vt_stream **ps) {
    if (!ps || !*ps)
        return;
    vt_stream *s = *ps;
    avcodec_free_context(&s->dec);
    avformat_close_input(&s->fmt);
    av_packet_free(&s->pkt);
    av_frame_free(&s->frame);
    vt_scaler_free(&s->scaler);
    free(s->rgb);
    free(s);
    *ps = NULL;
}

const vt_video_info *vt_stream_info(const vt_stream *s) { return &s->info; }
int64_t vt_stream_decode_errors(const vt_stream *s) { return s->decode_errors; }

/* Feeds the decoder the next packet of the stream (NULL once the input ends). 0, or a
 * negative code for a read error that is not the end. */
static int feed(vt_stream *s, char *err, size_t errlen) {
    if (s->demux_done) {
        if (!s->flushed) {
            s->flushed = 1;
            avcodec_send_packet(s->dec, NULL);
        }
        return 0;
    }
    for (;;) {
        int ret = av_read_frame(s->fmt, s->pkt);
        if (ret == AVERROR_EOF || ret == AVERROR(EIO) || (ret < 0 && avio_feof(s->fmt->pb))) {
            s->demux_done = 1; /* a truncated tail ends the stream like EOF */
            return feed(s, err, errlen);
        }
        if (ret < 0) {
            av_err(err, errlen, "read failed", ret);
            return ret;
        }
        if (s->pkt->stream_index != s->sidx) {
            av_packet_unref(s->pkt);
            continue;
        }
        ret = avcodec_send_packet(s->dec, s->pkt);
        av_packet_unref(s->pkt);
        if (ret < 0 && ret != AVERROR(EAGAIN))
            s->decode_errors++; /* a bad packet: the next keyframe recovers */
        return 0;
    }
}

/* Seconds of the frame's timing: its timestamp from the first one, its duration. */
static void frame_time(vt_stream *s, double *t, double *dur) {
    int64_t ts = s->frame->best_effort_timestamp;
    if (ts == AV_NOPTS_VALUE) /* no timing at all: frames at the nominal rate */
        ts = s->info.fps > 0 ? (int64_t)llround(s->nframes / s->info.fps / av_q2d(s->tb))
                             : s->nframes;
    if (s->first_ts == AV_NOPTS_VALUE)
        s->first_ts = ts;
    *t = (double)(ts - s->first_ts) * av_q2d(s->tb);
#if LIBAVUTIL_VERSION_INT >= AV_VERSION_INT(57, 30, 100)
    int64_t d = s->frame->duration;
#else
    int64_t d = s->frame->pkt_duration;
#endif
    *dur = d > 0 ? (double)d * av_q2d(s->tb) : s->info.fps > 0 ? 1.0 / s->info.fps : 0;
}

int vt_stream_next(vt_stream *s, int short_side, const uint8_t **rgb, int *w, int *h, double *t,
                   double *dur, char *err, size_t errlen) {
    for (;;) {
        int ret = avcodec_receive_frame(s->dec, s->frame);
        if (ret == AVERROR_EOF)
            return 0;
        if (ret < 0 && ret != AVERROR(EAGAIN)) { /* a frame that failed: skipped, counted */
            s->decode_errors++;
            if (s->flushed)
                return 0; /* nothing more will come */
        }
        if (ret < 0) { /* the decoder wants input: it takes a packet without EAGAIN */
            if ((ret = feed(s, err, errlen)) < 0)
                return ret;
            continue;
        }
        vt_video_info_scaled_size(&s->info, short_side, w, h);
        size_t need = (size_t)*w * (size_t)*h * 3;
        if (need > s->rgb_cap) {
            free(s->rgb);
            s->rgb = vt_malloc(need);
            s->rgb_cap = need;
        }
        frame_time(s, t, dur);
        ret = vt_scaler_convert(s->scaler, s->frame, s->info.rotation, s->rgb, *w, *h, err, errlen);
        av_frame_unref(s->frame);
        if (ret < 0)
            return ret;
        s->nframes++;
        *rgb = s->rgb;
        return 1;
    }
}
