/*
 * stream.c: a video read once, front to back (video.h, its Streams section) — the FFmpeg demux/decode idiom
 * (send/receive, EAGAIN and EOF not errors, flush with NULL) with no index and no seek,
 * each frame scaled through vt_scaler_convert so its pixels are read_clip's.
 *
 * It must never seek, never ask for the duration and never keep more than the one frame
 * it hands out: the input may be a pipe or a live source that never ends. A live source
 * can also stall: FFmpeg's interrupt callback (polled by every network protocol while it
 * waits) is the one watchdog, so a timeout means the same for tcp, http, rtsp and udp.
 * Its clock runs from the last frame handed out (or from the open), never from the last
 * byte: a source that trickles bytes, or sends bytes that never decode, has stalled all
 * the same (issue 41: such a server kept a 1 s timeout waiting forever).
 */
#include "pipeline/data/video/video.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#ifdef VT_HAVE_AVDEVICE
#include <libavdevice/avdevice.h>
#endif

#include "base/common.h"
#include "pipeline/data/video/video_impl.h"

struct vt_stream {
    AVFormatContext *fmt;
    AVCodecContext *dec;
    AVPacket *pkt;
    AVFrame *frame;
    int sidx;
    AVRational tb;
    int64_t first_ts;        /* the first frame's timestamp (AV_NOPTS_VALUE before it) */
    int64_t prev_ts;         /* the last frame's timestamp, as frame_time took it */
    int64_t nframes;         /* frames handed out */
    double last_t;           /* the time of the last frame handed out */
    int64_t decode_errors;
    double error_t;          /* the time (as vt_stream_next's) of the last packet the decoder
                              * rejected or picture it repaired; NAN when none, or when it
                              * cannot be placed */
    int demux_done, flushed; /* no more packets; the decoder was flushed */
    vt_stream_opts o;
    int strict;              /* network or device: a read error is an error, not the end */
    /* The watchdog's clock: seconds spent inside this stream's calls (the open, then
     * vt_stream_next) since the last frame handed out, or since the open before the first;
     * the caller's own time between calls (a slow model) does not count. */
    double waited;           /* in the calls before this one */
    double since;            /* vt_now() when this call began */
    int64_t bytes_at_frame;  /* bytes read by the last frame handed out (or the open) */
    int64_t bytes_seen;      /* the input's byte count when last looked at (the context
                              * is gone after a failed open, the count is not) */
    int64_t stall_bytes;     /* bytes read between the last frame and the timeout */
    int stopped;             /* 1 timed out, 2 interrupted */
    struct { int64_t pts; double at; } arr[64]; /* packets' read times, by pts */
    int narr;
    double arrival;          /* the handed-out frame's */
    int fail;                /* a read error, returned once the decoder is drained */
    char fail_msg[512];
    vt_video_info info;
    vt_scaler *scaler;
    uint8_t *rgb;
    size_t rgb_cap;
    char *url;               /* for the one NVDEC fallback message */
    vt_hw_dec hw;            /* --decode nvdec|auto: the decoder on the GPU (video_hw.c) */
    int pending;             /* s->frame holds the first frame, decoded at the open */
};

static void av_err(char *err, size_t errlen, const char *what, int ret) {
    char buf[AV_ERROR_MAX_STRING_SIZE] = "";
    av_strerror(ret, buf, sizeof buf);
    vt_set_err(err, errlen, "%s: %s", what, buf);
}

/* A pipe that fails before its first frame: most often a container that must seek (FFmpeg
 * reads a GIF's frames and an MP4's index, written at its end unless made "fast start",
 * by seeking), which a pipe cannot; the ffmpeg command fails the same way. Appended to
 * err, which says FFmpeg's reason. */
static void pipe_hint(const char *url, int64_t nframes, char *err, size_t errlen) {
    size_t at = strlen(err);
    if (vt_stream_source_kind(url) != VT_SOURCE_PIPE || nframes > 0 || at + 1 >= errlen)
        return;
    snprintf(err + at, errlen - at, " (read from a pipe, which cannot seek: a GIF, or an MP4 "
             "whose index is at its end, needs its file path instead, or a remux with "
             "ffmpeg -i IN -c copy -movflags +faststart OUT.mp4)");
}

vt_source_kind vt_stream_source_kind(const char *url) {
    if (!strcmp(url, "-") || !strncmp(url, "pipe:", 5))
        return VT_SOURCE_PIPE;
    if (!strncmp(url, "/dev/video", 10))
        return VT_SOURCE_DEVICE;
    const char *p = strstr(url, "://");
    if (p && strncmp(url, "file:", 5)) {
        for (const char *q = url; q < p; q++) /* a scheme: letters, digits, + - . */
            if (!(isalnum((unsigned char)*q) || *q == '+' || *q == '-' || *q == '.'))
                return VT_SOURCE_FILE;
        return p > url ? VT_SOURCE_NETWORK : VT_SOURCE_FILE;
    }
    struct stat st;
    if (stat(url, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)))
        return VT_SOURCE_PIPE;
    if (stat(url, &st) == 0 && S_ISCHR(st.st_mode))
        return VT_SOURCE_DEVICE;
    return VT_SOURCE_FILE;
}

int vt_stream_have_devices(void) {
#ifdef VT_HAVE_AVDEVICE
    return 1;
#else
    return 0;
#endif
}

/* Seconds waited for the next frame (the watchdog's clock, above). */
static double waited(const vt_stream *s) { return s->waited + (vt_now() - s->since); }

/* Bytes read from the input so far (0 for a demuxer without one, such as rtsp). */
static int64_t bytes_read(vt_stream *s) {
    if (s->fmt && s->fmt->pb)
        s->bytes_seen = s->fmt->pb->bytes_read;
    return s->bytes_seen;
}

/* FFmpeg's interrupt callback: polled while a protocol waits, and by feed() before each
 * read. Progress is a decoded frame only: bytes and packets that bring none do not count,
 * so the open, the probe (avformat_find_stream_info, which can read a lot), the reads and
 * the decoding all fall under the one deadline. */
static int on_interrupt(void *ctx) {
    vt_stream *s = ctx;
    if (s->stopped) /* for good: the frames a demuxer flushes after the stop change nothing */
        return 1;
    if (s->o.interrupt && s->o.interrupt(s->o.interrupt_ctx)) {
        s->stopped = 2;
        return 1;
    }
    if (s->o.timeout > 0 && waited(s) > s->o.timeout) {
        s->stopped = 1;
        s->stall_bytes = bytes_read(s) - s->bytes_at_frame;
        return 1;
    }
    return 0;
}

static int open_decoder(vt_stream *s, int threads, int allow_hw, char *err, size_t errlen) {
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
    if (p->width < VT_VIDEO_MIN_SIDE || p->height < VT_VIDEO_MIN_SIDE) {
        vt_set_err(err, errlen, "frames of %dx%d pixels hold no picture to learn from (at "
                   "least %d a side; a placeholder or a broken encode?)", p->width, p->height,
                   VT_VIDEO_MIN_SIDE);
        return AVERROR_INVALIDDATA;
    }
    s->dec = avcodec_alloc_context3(codec);
    VT_CHECK_MEM(s->dec != NULL, "avcodec_alloc_context3");
    if ((ret = avcodec_parameters_to_context(s->dec, p)) < 0) {
        av_err(err, errlen, "decoder parameters", ret);
        return ret;
    }
    s->dec->thread_count = threads;
    if (s->o.live) /* frame threads hold threads - 1 decoded frames back: latency */
        s->dec->thread_type = FF_THREAD_SLICE;
    s->dec->pkt_timebase = st->time_base;
    vt_vid_dec_tap(&s->hw, s->dec);
    if (allow_hw && vt_vid_hw_usable(codec, s->url))
        vt_vid_hw_attach(&s->hw, s->dec);
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
    snprintf(in->decoder, sizeof in->decoder, "%s", s->hw.on ? "nvdec" : "cpu");
    return 0;
}

/* The input format o asks for (or a device's default), NULL for FFmpeg's guess. 0, or
 * a negative code with err naming what is missing. */
static int input_format(const char *url, const vt_stream_opts *o, const AVInputFormat **fmt,
                        char *err, size_t errlen) {
    const char *name = o->format;
    if (!name && vt_stream_source_kind(url) == VT_SOURCE_DEVICE && !strncmp(url, "/dev/video", 10))
        name = "v4l2";
    *fmt = NULL;
    if (!name)
        return 0;
#ifdef VT_HAVE_AVDEVICE
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, avdevice_register_all);
#endif
    if ((*fmt = av_find_input_format(name)) != NULL)
        return 0;
    if (!vt_stream_have_devices()) {
        vt_set_err(err, errlen, "input format '%s' is not in this build: cameras and other "
                   "devices (v4l2, x11grab, alsa...) are FFmpeg's libavdevice, which vidtrain was "
                   "built without. Install it (Debian/Ubuntu: apt install libavdevice-dev) and "
                   "re-run cmake, or let ffmpeg read the device and pipe it in: ffmpeg -f %s -i "
                   "%s -c:v libx264 -preset ultrafast -tune zerolatency -f mpegts - | vidtrain "
                   "predict RUN - --timeline", name, name, url);
    } else {
        vt_set_err(err, errlen, "FFmpeg has no input format '%s' (ffmpeg -formats lists them)",
                   name);
    }
    return AVERROR_DEMUXER_NOT_FOUND;
}

/* Why an open or a read stopped, when the watchdog stopped it: no data at all, or data
 * that brought no frame (a trickle, bytes that do not decode). */
static void stop_err(const vt_stream *s, char *err, size_t errlen, const char *what) {
    int64_t got = s->stall_bytes;
    if (s->stopped != 1)
        vt_set_err(err, errlen, "%s: interrupted", what);
    else if (got > 0)
        vt_set_err(err, errlen, "%s: stalled: no frame decoded for %g s (the timeout), though "
                   "%lld bytes came: a stream this cannot decode, or too slow a link", what,
                   s->o.timeout, (long long)got);
    else
        vt_set_err(err, errlen, "%s: stalled: no data for %g s (the timeout)", what,
                   s->o.timeout);
}

static int receive(vt_stream *s, char *err, size_t errlen);

/* A source that can be opened a second time: a file, not a pipe, a URL or a device. */
static int reopenable(const char *url) {
    return vt_stream_source_kind(url) == VT_SOURCE_FILE && strcmp(url, "-") != 0;
}

/* vt_stream_open_opts, the decoder on the GPU when allow_hw and the decode mode say so.
 * *hw_failed: set to 1 when the decoder could not open, or its first frame not be decoded
 * or copied, with the GPU attached (not for a timeout, an interrupt or a read error). */
static int open_stream(vt_stream **out, const char *url, const vt_stream_opts *o, int allow_hw,
                       int *hw_failed, char *err, size_t errlen) {
    *out = NULL;
    vt_ffmpeg_log_init();
    const AVInputFormat *ifmt;
    int ret = input_format(url, o, &ifmt, err, errlen);
    if (ret < 0)
        return ret;
    vt_stream *s = vt_calloc(1, sizeof *s);
    s->url = vt_strdup(url);
    s->first_ts = AV_NOPTS_VALUE;
    s->prev_ts = AV_NOPTS_VALUE;
    s->error_t = NAN;
    s->o = *o;
    vt_source_kind kind = vt_stream_source_kind(url);
    s->strict = kind == VT_SOURCE_NETWORK || kind == VT_SOURCE_DEVICE;
    /* the deadline runs from here: opening, probing and the first frame together */
    s->since = vt_now();
    s->fmt = avformat_alloc_context();
    VT_CHECK_MEM(s->fmt != NULL, "avformat_alloc_context");
    s->fmt->interrupt_callback.callback = on_interrupt;
    s->fmt->interrupt_callback.opaque = s;
    AVDictionary *d = NULL;
    if (s->strict && o->timeout > 0) {
        /* the protocols' own I/O limits (microseconds), a backstop for one that does not
         * poll the callback: later than the watchdog, whose message is the clearer */
        char us[32];
        snprintf(us, sizeof us, "%lld", (long long)((o->timeout + 5) * 1e6));
        av_dict_set(&d, "rw_timeout", us, 0);
        if (!strncmp(url, "rtsp", 4))
            av_dict_set(&d, "timeout", us, 0);
        /* The probe reads up to 5 s of the stream (FFmpeg's analyzeduration), live: at
         * most half the timeout, so a stream that works opens within it (the default 10 s
         * keeps FFmpeg's 5 s). */
        snprintf(us, sizeof us, "%lld", (long long)(VT_MIN(5.0, o->timeout / 2) * 1e6));
        av_dict_set(&d, "analyzeduration", us, 0);
    }
    const char *name = strcmp(url, "-") ? url : "pipe:0";
    ret = avformat_open_input(&s->fmt, name, ifmt, &d);
    av_dict_free(&d);
    if (ret < 0) {
        if (s->stopped)
            stop_err(s, err, errlen, "cannot open");
        else if (vt_stream_source_kind(url) == VT_SOURCE_DEVICE &&
                 (ret == AVERROR(ENOENT) || ret == AVERROR(EACCES)))
            vt_set_err(err, errlen, "cannot open the camera: %s (v4l2-ctl --list-devices lists "
                       "them; a user needs the video group to read one)",
                       ret == AVERROR(ENOENT) ? "no such device" : "permission denied");
        else
            av_err(err, errlen, "cannot open", ret);
        pipe_hint(url, 0, err, errlen);
        vt_stream_close(&s);
        return ret;
    }
    if ((ret = avformat_find_stream_info(s->fmt, NULL)) < 0 || s->stopped) {
        if (s->stopped)
            stop_err(s, err, errlen, "cannot find stream parameters");
        else
            av_err(err, errlen, "cannot find stream parameters", ret);
        vt_stream_close(&s);
        return ret < 0 ? ret : AVERROR_EXIT;
    }
    s->pkt = av_packet_alloc();
    s->frame = av_frame_alloc();
    s->scaler = vt_scaler_new();
    VT_CHECK_MEM(s->pkt && s->frame, "av_packet_alloc/av_frame_alloc");
    if ((ret = open_decoder(s, o->threads, allow_hw, err, errlen)) < 0) {
        *hw_failed = s->hw.on;
        vt_stream_close(&s);
        return ret;
    }
    if (s->hw.on) {
        /* Prove that the GPU decodes this stream and that its frames come to system memory:
         * the first frame, kept for the first vt_stream_next (nothing is read twice, so a
         * pipe or a live source loses nothing). */
        vt_vid_last_msg[0] = 0;
        ret = receive(s, err, errlen);
        if (ret == 0 && !s->fail)
            vt_set_err(err, errlen, "0 decodable frames%s%s", vt_vid_last_msg[0] ? ": " : "",
                       vt_vid_last_msg);
        if (ret > 0) {
            if (vt_vid_hw_first_frame(&s->hw, s->frame, url) && o->threads != 1 &&
                reopenable(url)) {
                /* NVDEC declined the stream and FFmpeg decodes it in software, but with
                 * the one thread the GPU decoder was opened with: a file is opened again
                 * on the CPU with all its threads (the warning is said already). A pipe
                 * or a live source cannot be read again and goes on with one thread. */
                vt_set_err(err, errlen, "NVDEC declined the stream");
                *hw_failed = 1;
                vt_stream_close(&s);
                return AVERROR(EAGAIN);
            }
            ret = vt_vid_hw_download(&s->hw, s->frame, err, errlen);
            if (ret == 0)
                ret = 1;
        }
        if (ret <= 0) {
            /* the GPU is blamed only for what the input did not do: not a timeout, an
             * interrupt or a read error */
            *hw_failed = !s->stopped && !s->fail;
            vt_stream_close(&s);
            return ret < 0 ? ret : AVERROR_INVALIDDATA;
        }
        snprintf(s->info.decoder, sizeof s->info.decoder, "%s", s->hw.on ? "nvdec" : "cpu");
        s->pending = 1;
    }
    /* the open's time counts toward the first frame (none was handed out yet) */
    s->waited = s->pending ? 0 : vt_now() - s->since;
    if (s->pending)
        s->bytes_at_frame = bytes_read(s);
    *out = s;
    return 0;
}

int vt_stream_open_opts(vt_stream **out, const char *url, const vt_stream_opts *o, char *err,
                        size_t errlen) {
    int hw_failed = 0;
    int ret = open_stream(out, url, o, 1, &hw_failed, err, errlen);
    /* The GPU could not open or decode the first frame: a file is opened again on the CPU,
     * which decides whether it is bad; a pipe, a network or a device source is not read a
     * second time here (a reconnect is the caller's), and fails with the GPU's reason. */
    if (ret < 0 && hw_failed && reopenable(url)) {
        char why[256];
        snprintf(why, sizeof why, "%s", err && errlen ? err : "the GPU decoder failed");
        ret = open_stream(out, url, o, 0, &hw_failed, err, errlen);
        if (ret == 0)
            vt_vid_hw_fallback(url, why);
    }
    return ret;
}

int vt_stream_open(vt_stream **out, const char *url, int threads, char *err, size_t errlen) {
    vt_stream_opts o;
    memset(&o, 0, sizeof o);
    o.threads = threads;
    /* every blocking read has a deadline: a network source or a device that gives no
     * frame (embed --timeline on a URL) ends instead of waiting forever */
    vt_source_kind kind = vt_stream_source_kind(url);
    if (kind == VT_SOURCE_NETWORK || kind == VT_SOURCE_DEVICE)
        o.timeout = VT_STREAM_TIMEOUT;
    return vt_stream_open_opts(out, url, &o, err, errlen);
}

int vt_stream_stopped(const vt_stream *s) { return s->stopped; }
double vt_stream_arrival(const vt_stream *s) { return s->arrival; }

/* Remembers when the packet with this pts was read, for the frame it decodes to. */
static void note_arrival(vt_stream *s, int64_t pts, double at) {
    int n = (int)(sizeof s->arr / sizeof s->arr[0]);
    s->arr[s->narr % n].pts = pts;
    s->arr[s->narr % n].at = at;
    s->narr++;
}

/* The read time of the packet of pts (the latest when the frame's pts is unknown or not
 * among the last 64 packets: never earlier than it was). */
static double arrival_of(const vt_stream *s, int64_t pts) {
    int n = (int)(sizeof s->arr / sizeof s->arr[0]), m = VT_MIN(s->narr, n);
    double latest = m ? s->arr[(s->narr - 1) % n].at : 0;
    if (pts == AV_NOPTS_VALUE)
        return latest;
    for (int i = 0; i < m; i++)
        if (s->arr[i].pts == pts)
            return s->arr[i].at;
    return latest;
}

void vt_stream_close(vt_stream **ps) {
    if (!ps || !*ps)
        return;
    vt_stream *s = *ps;
    if (s->hw.on)
        vt_vid_hw_thread();
    avcodec_free_context(&s->dec);
    avformat_close_input(&s->fmt);
    av_packet_free(&s->pkt);
    av_frame_free(&s->frame);
    vt_scaler_free(&s->scaler);
    vt_vid_hw_free(&s->hw);
    free(s->rgb);
    free(s->url);
    free(s);
    *ps = NULL;
}

const vt_video_info *vt_stream_info(const vt_stream *s) { return &s->info; }
int64_t vt_stream_decode_errors(const vt_stream *s) { return s->decode_errors; }
double vt_stream_error_time(const vt_stream *s) { return s->error_t; }

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
        /* the deadline, checked here too: a demuxer or a decoder that churns through
         * bytes already read (random bytes, packets that never decode) polls no protocol.
         * Past it, the read still runs: the protocol fails at once (the stop is for good),
         * and the demuxer hands out the whole packets it holds before the error */
        on_interrupt(s);
        int ret = av_read_frame(s->fmt, s->pkt);
        if (ret < 0 && (s->stopped || (s->strict && s->fmt->pb && s->fmt->pb->error < 0 &&
                                       s->fmt->pb->error != AVERROR_EOF))) {
            /* the frames the decoder holds are whole: they go out first, then the error */
            if (s->stopped)
                stop_err(s, s->fail_msg, sizeof s->fail_msg, "read failed");
            else
                av_err(s->fail_msg, sizeof s->fail_msg, "read failed", s->fmt->pb->error);
            s->fail = s->stopped ? AVERROR_EXIT : s->fmt->pb->error;
            s->demux_done = 1;
            return feed(s, err, errlen);
        }
        if (ret == AVERROR_EOF || ret == AVERROR(EIO) || (ret < 0 && avio_feof(s->fmt->pb))) {
            s->demux_done = 1; /* a truncated tail ends the stream like EOF */
            return feed(s, err, errlen);
        }
        if (ret < 0) {
            av_err(err, errlen, "read failed", ret);
            pipe_hint(s->url, s->nframes, err, errlen);
            return ret;
        }
        if (s->pkt->stream_index != s->sidx) {
            av_packet_unref(s->pkt);
            continue;
        }
        note_arrival(s, s->pkt->pts, vt_now());
        int64_t pts = s->pkt->pts;
        ret = avcodec_send_packet(s->dec, s->pkt);
        av_packet_unref(s->pkt);
        if (ret < 0 && ret != AVERROR(EAGAIN)) {
            s->decode_errors++; /* a bad packet: the next keyframe recovers */
            s->error_t = pts != AV_NOPTS_VALUE && s->first_ts != AV_NOPTS_VALUE
                             ? (double)(pts - s->first_ts) * av_q2d(s->tb)
                             : NAN;
        }
        return 0;
    }
}

/* Seconds of the frame's timing: its timestamp from the first one, its duration. */
static void frame_time(vt_stream *s, double *t, double *dur) {
#if LIBAVUTIL_VERSION_INT >= AV_VERSION_INT(57, 30, 100)
    int64_t d = s->frame->duration;
#else
    int64_t d = s->frame->pkt_duration;
#endif
    int64_t ts = s->frame->best_effort_timestamp;
    if (ts == AV_NOPTS_VALUE && s->prev_ts != AV_NOPTS_VALUE) {
        /* an untimed frame after timed ones (a reordering decoder's last frames in an AVI,
         * timed by the dts of the packet that pushed them out, a delay behind): one frame
         * after the last; the nominal count below put it before it, and it was left out
         * as "a broken timestamp" */
        double step = d > 0 ? (double)d : s->info.fps > 0 ? 1.0 / s->info.fps / av_q2d(s->tb) : 1;
        ts = s->prev_ts + VT_MAX((int64_t)llround(step), 1);
    } else if (ts == AV_NOPTS_VALUE) { /* no timing at all: frames at the nominal rate */
        ts = s->info.fps > 0 ? (int64_t)llround(s->nframes / s->info.fps / av_q2d(s->tb))
                             : s->nframes;
    }
    s->prev_ts = ts;
    if (s->first_ts == AV_NOPTS_VALUE)
        s->first_ts = ts;
    *t = (double)(ts - s->first_ts) * av_q2d(s->tb);
    *dur = d > 0 ? (double)d * av_q2d(s->tb) : s->info.fps > 0 ? 1.0 / s->info.fps : 0;
}

/* The next decoded frame into s->frame: 1, 0 at the end (or s->fail), < 0 an error. */
static int receive(vt_stream *s, char *err, size_t errlen) {
    if (s->hw.on)
        vt_vid_hw_thread();
    for (;;) {
        int ret = avcodec_receive_frame(s->dec, s->frame);
        if (ret >= 0) {
            /* pictures the decoder repaired (concealed) or flagged: counted, and placed at
             * this frame's time (the repaired frame's own, or at most the decoder's delay
             * after it when a frame thread lost its mark: vt_vid_dec_damage) */
            int64_t n = vt_vid_dec_damage(&s->hw, s->dec, s->frame);
            if (n) {
                int64_t ts = s->frame->best_effort_timestamp;
                s->decode_errors += n;
                s->error_t = ts == AV_NOPTS_VALUE ? NAN
                             : s->first_ts == AV_NOPTS_VALUE
                                 ? 0 /* the first frame: its time is 0 */
                                 : (double)(ts - s->first_ts) * av_q2d(s->tb);
            }
            return 1;
        }
        int64_t n = ret == AVERROR_EOF ? vt_vid_dec_damage(&s->hw, s->dec, NULL) : 0;
        if (n) { /* repairs whose frames lost their mark, among the last few out */
            s->decode_errors += n;
            s->error_t = s->nframes ? s->last_t : NAN;
        }
        if (ret != AVERROR(EAGAIN) && ret != AVERROR_EOF) /* skipped, counted */
            s->decode_errors++;
        if (ret == AVERROR_EOF || (ret != AVERROR(EAGAIN) && s->flushed)) {
            if (s->fail) /* nothing more will come: the read error that ended it */
                vt_set_err(err, errlen, "%s", s->fail_msg);
            return s->fail;
        }
        /* the decoder wants input: it takes a packet without EAGAIN */
        if ((ret = feed(s, err, errlen)) < 0)
            return ret;
    }
}

int vt_stream_next(vt_stream *s, int short_side, const uint8_t **rgb, int *w, int *h, double *t,
                   double *dur, char *err, size_t errlen) {
    /* the timeout counts time spent here waiting for a frame, not the caller's time
     * between calls (a slow model, a first GPU call) */
    s->since = vt_now();
    int ret = 1;
    if (s->pending)
        s->pending = 0;
    else
        ret = receive(s, err, errlen);
    if (ret <= 0)
        return ret;
    s->waited = 0; /* a frame: the clock starts again */
    s->bytes_at_frame = bytes_read(s);
    /* a GPU frame comes to system memory here: NV12, which the scaler rearranges */
    if ((ret = vt_vid_hw_download(&s->hw, s->frame, err, errlen)) < 0) {
        av_frame_unref(s->frame);
        return ret;
    }
    vt_video_info_scaled_size(&s->info, short_side, w, h);
    size_t need = (size_t)*w * (size_t)*h * 3;
    if (need > s->rgb_cap) {
        free(s->rgb);
        s->rgb = vt_malloc(need);
        s->rgb_cap = need;
    }
    frame_time(s, t, dur);
    s->last_t = *t;
    s->arrival = arrival_of(s, s->frame->pts);
    ret = vt_scaler_convert(s->scaler, s->frame, s->info.rotation, s->rgb, *w, *h, err, errlen);
    av_frame_unref(s->frame);
    if (ret < 0)
        return ret;
    s->nframes++;
    *rgb = s->rgb;
    return 1;
}
