/*
 * prep.c: one video re-encoded to training size (prep.h). The source is decoded by
 * video_read.c's sequential decoder (vt_video_decode_all), which already scales to RGB at
 * the copy's even-sided size (one bicubic resampling: the copy is scaled again when
 * training reads it; vt_video_set_scaling) and rotates the pixels as the display matrix
 * says; each frame then goes RGB -> YUV 4:2:0, gets its source timestamp (or,
 * with --fps, the nearest-in-time frame for each output tick), and is encoded and muxed
 * with the send/receive idiom. Only the video stream is written, with no display matrix:
 * the pixels are upright now.
 *
 * It must never print, abort on a bad file or leave FFmpeg objects behind: every exit
 * goes through one cleanup label, and a data error is a negative code with the reason.
 */
#include "pipeline/data/prep.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/opt.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>

#include "base/common.h"
#include "pipeline/data/sample.h"
#include "pipeline/data/video/video.h"

void vt_prep_opts_default(vt_prep_opts *o) {
    *o = (vt_prep_opts){.short_side = VT_PREP_SHORT_SIDE, .fps = 0, .gop = VT_PREP_GOP,
                        .codec = VT_PREP_CODEC, .quality = -1, .threads = 1};
}

/* The encoder for a codec name: libx264 for h264 (FFmpeg has no native H.264 encoder
 * worth using), the native ones for mpeg4 and mjpeg. */
static const AVCodec *find_encoder(const char *codec) {
    if (!strcmp(codec, "h264"))
        return avcodec_find_encoder_by_name("libx264");
    if (!strcmp(codec, "mpeg4") || !strcmp(codec, "mjpeg"))
        return avcodec_find_encoder_by_name(codec);
    return NULL;
}

int vt_prep_codec_available(const char *codec) { return find_encoder(codec) != NULL; }

/* Does the muxer write a header for a video stream of the encoder's codec? A muxer's tag
 * table can list a codec its setup then refuses at normal strictness: FLV lists MPEG-4
 * part 2 ("not supported in the official FLV specification"), so avformat_query_codec
 * says yes and the header fails. The muxer is set up in memory for a stream as prep
 * writes it (the codec, 4:2:0, a frame rate's time base), and freed; FFmpeg's message goes
 * to the log callback, which prints nothing. */
static int muxer_writes(const AVOutputFormat *of, const AVCodec *enc) {
    vt_ffmpeg_log_init(); /* before any video is opened: the plan names the outputs first */
    AVFormatContext *oc = NULL;
    if (avformat_alloc_output_context2(&oc, of, NULL, NULL) < 0)
        return 0;
    AVStream *st = avformat_new_stream(oc, NULL);
    int ok = 0;
    if (st && avio_open_dyn_buf(&oc->pb) >= 0) {
        oc->flags |= AVFMT_FLAG_BITEXACT;
        st->time_base = (AVRational){1, 25};
        st->codecpar->codec_type = AVMEDIA_TYPE_VIDEO;
        st->codecpar->codec_id = enc->id;
        st->codecpar->width = 16;
        st->codecpar->height = 16;
        st->codecpar->format =
            enc->id == AV_CODEC_ID_MJPEG ? AV_PIX_FMT_YUVJ420P : AV_PIX_FMT_YUV420P;
        /* the muxer's setup alone: its header may want what only the encoder makes
         * (Matroska's H.264 codec private data); avformat_free_context deinits it */
        ok = avformat_init_output(oc, NULL) >= 0;
        uint8_t *buf = NULL;
        avio_close_dyn_buf(oc->pb, &buf);
        av_free(buf);
        oc->pb = NULL;
    }
    avformat_free_context(oc);
    return ok;
}

void vt_prep_out_ext(char *ext, size_t n, const char *name, const char *codec) {
    const char *dot = strrchr(name, '.');
    const AVCodec *enc = find_encoder(codec);
    if (dot && dot[1] && enc) {
        /* av_guess_format wants a file name; query_codec is 1 only when the muxer lists
         * the codec (0 or "unknown" both fall back to mp4), and a listed codec must then
         * pass the muxer's own setup (muxer_writes). */
        /* A raw stream's muxer (.h264, .m2v) stores no timestamps: the copy would lose
         * the times prep keeps, so it goes to mp4. */
        const AVOutputFormat *of = av_guess_format(NULL, name, NULL);
        if (of && !(of->flags & AVFMT_NOTIMESTAMPS) &&
            avformat_query_codec(of, enc->id, FF_COMPLIANCE_NORMAL) == 1 &&
            muxer_writes(of, enc)) {
            snprintf(ext, n, "%s", dot + 1);
            return;
        }
    }
    snprintf(ext, n, "mp4");
}

/* The state of one re-encode, shared with the per-frame callback. */
typedef struct prep_job {
    const vt_prep_opts *o;
    vt_video *v;
    AVFormatContext *oc;
    AVCodecContext *enc;
    AVStream *st;
    AVPacket *pkt;
    struct SwsContext *sws;   /* RGB24 (ow, oh) -> yuv420p (ow, oh): colour only */
    AVFrame *held;            /* --fps: the last source frame, waiting for its ticks */
    int64_t held_tick;        /* --fps: its first output tick */
    int64_t next_tick;        /* --fps: next output frame number */
    int64_t last_pts;         /* last pts sent (encoder time base), for monotonicity */
    int tb_num, tb_den;       /* source stream time base */
    int ow, oh;
    int64_t decoded, written;
    int64_t last_n;           /* index position of the last decoded frame, -1 before one */
    int64_t disordered;       /* frames decoded after a later one: left out (on_frame) */
    int64_t ts0;              /* source timestamp of the first frame written (a segment's) */
    int ret;                  /* first error inside the callback */
    int dst_failed;           /* that error was writing the output, not reading the source */
    vt_sig_acc *sig;          /* o->signature: the frames' signature, as they come */
    char *err;
    size_t errlen;
} prep_job;

static void set_av_err(char *err, size_t errlen, const char *what, int code) {
    char buf[128];
    av_strerror(code, buf, sizeof buf);
    vt_set_err(err, errlen, "%s: %s", what, buf);
}

/* Everything the encoder has ready, into the muxer. frame NULL flushes. */
static int encode(prep_job *j, AVFrame *frame) {
    int ret = avcodec_send_frame(j->enc, frame);
    if (ret < 0) {
        set_av_err(j->err, j->errlen, "encoding", ret);
        return ret;
    }
    for (;;) {
        ret = avcodec_receive_packet(j->enc, j->pkt);
        if (ret == AVERROR(EAGAIN) || ret == AVERROR_EOF)
            return 0;
        if (ret < 0) {
            set_av_err(j->err, j->errlen, "encoding", ret);
            return ret;
        }
        av_packet_rescale_ts(j->pkt, j->enc->time_base, j->st->time_base);
        j->pkt->stream_index = j->st->index;
        ret = av_interleaved_write_frame(j->oc, j->pkt); /* takes the packet's reference */
        if (ret < 0) {
            set_av_err(j->err, j->errlen, "writing the output", ret);
            j->dst_failed = 1;
            return ret;
        }
    }
}

/* frame (a reference is taken, the caller keeps its own) encoded at pts. */
static int send_at(prep_job *j, const AVFrame *frame, int64_t pts) {
    /* Timestamps kept: a frame whose time another frame before it holds too (MPEG-TS and
     * Matroska B-frames whose times were rounded to the container's clock, VFR in a 1/25
     * time base) goes one tick of the encoder's time base after it, since the copy's
     * container holds one frame a time: every frame is written, frame n of the copy is
     * frame n of the source, as the loader numbers it (leaving it out lost 16 of 50 frames
     * of such a file, and moved every later frame). With --fps, flush_held already gave
     * each tick one frame. */
    if (pts <= j->last_pts && j->o->fps <= 0 && j->last_pts < INT64_MAX)
        pts = j->last_pts + 1;
    if (pts <= j->last_pts)
        return 0;
    AVFrame *f = av_frame_clone(frame);
    VT_CHECK_MEM(f != NULL, "the encoder's FFmpeg state");
    f->pts = pts;
    /* x264 places keyframes itself from gop_size; asking for an I-frame on every G-th
     * frame keeps the interval exact for the encoders that only honour pict_type. */
    f->pict_type = j->o->gop > 0 && j->written % j->o->gop == 0 ? AV_PICTURE_TYPE_I
                                                                : AV_PICTURE_TYPE_NONE;
    int ret = encode(j, f);
    av_frame_free(&f);
    if (ret < 0)
        return ret;
    j->last_pts = pts;
    j->written++;
    return 0;
}

/* --fps: the held frame fills the output ticks from its own up to `until` (the tick the
 * next source frame, or the end, owns). A frame whose range is empty is dropped (a
 * faster source than --fps); a slower one is repeated. */
static int flush_held(prep_job *j, int64_t until) {
    for (int64_t k = j->held_tick; j->held && k < until; k++) {
        int ret = send_at(j, j->held, k);
        if (ret < 0)
            return ret;
        j->next_tick = k + 1;
    }
    av_frame_free(&j->held);
    return 0;
}

/* One decoded, scaled, rotated frame from vt_video_decode_all. */
static int on_frame(void *user, const uint8_t *rgb, int64_t n, int w, int h) {
    prep_job *j = user;
    AVFrame *f = av_frame_alloc();
    VT_CHECK_MEM(f != NULL, "the encoder's FFmpeg state");
    f->format = j->enc->pix_fmt;
    f->width = j->ow;
    f->height = j->oh;
    f->color_range = j->enc->color_range;
    f->colorspace = j->enc->colorspace;
    int ret = av_frame_get_buffer(f, 0);
    VT_CHECK_MEM(ret >= 0, "av_frame_get_buffer");
    if (!j->sws) {
        /* Same size in, same size out: a colour conversion only, rounded to nearest
         * (without SWS_ACCURATE_RND the RGB -> 4:2:0 path is 0.05 levels low). */
        j->sws = sws_getContext(j->ow, j->oh, AV_PIX_FMT_RGB24, j->ow, j->oh, j->enc->pix_fmt,
                                SWS_BILINEAR | SWS_ACCURATE_RND, NULL, NULL, NULL);
        if (!j->sws) {
            vt_set_err(j->err, j->errlen, "cannot convert rgb24 to %s",
                       av_get_pix_fmt_name(j->enc->pix_fmt));
            j->ret = AVERROR(EINVAL);
            av_frame_free(&f);
            return 1;
        }
        int *inv, *tab, sfull, dfull, bri, con, sat;
        if (sws_getColorspaceDetails(j->sws, &inv, &sfull, &tab, &dfull, &bri, &con, &sat) >= 0)
            sws_setColorspaceDetails(j->sws, inv, 1, sws_getCoefficients(SWS_CS_ITU601),
                                     j->enc->color_range == AVCOL_RANGE_JPEG, bri, con, sat);
    }
    const uint8_t *src[4] = {rgb, NULL, NULL, NULL};
    int stride[4] = {w * 3, 0, 0, 0};
    /* The decoder's frames come at the copy's size (vt_video_set_scaling): an odd side
     * (171 at 128 from 4:3) is resampled to the even one there, in RGB. Cutting the last
     * column instead stretched the copy against its source by up to half a pixel at the
     * training scale; resampling inside the RGB -> 4:2:0 conversion misplaced the chroma
     * toward the right edge (issue 25, docs/prep.md). */
    if (w != j->ow || h != j->oh) {
        vt_set_err(j->err, j->errlen, "frame of %dx%d, the copy is %dx%d", w, h, j->ow, j->oh);
        j->ret = AVERROR_BUG;
        av_frame_free(&f);
        return 1;
    }
    sws_scale(j->sws, src, stride, 0, j->oh, f->data, f->linesize);
    j->decoded++;
    /* A damaged stream's decoder may hand a frame out after a later one: the copy is
     * written in order and its place has passed, so it is left out here (send_at would
     * write it one tick after the later one); counted, and said with the damage. */
    int tbn, tbd;
    int64_t ts = vt_video_frame_ts(j->v, n, &tbn, &tbd) - j->ts0;
    if (j->sig) /* the leak check's signature from this decode: no decode of its own */
        vt_sig_acc_add_rgb(j->sig, rgb, w, h, (double)ts * tbn / tbd);
    if (n <= j->last_n) {
        j->disordered++;
        av_frame_free(&f);
        return 0;
    }
    j->last_n = n;
    if (j->o->fps > 0) {
        /* The frame owns the ticks from round(t * fps) until the next frame's: FFmpeg's
         * fps filter with its default rounding (near). */
        int64_t tick = (int64_t)llround((double)ts * tbn / tbd * j->o->fps);
        ret = flush_held(j, tick);
        j->held = f;
        j->held_tick = VT_MAX(tick, j->next_tick);
        f = NULL;
    } else {
        ret = send_at(j, f, av_rescale_q(ts, (AVRational){tbn, tbd}, j->enc->time_base));
    }
    av_frame_free(&f);
    if (ret < 0) {
        j->ret = ret;
        return 1;
    }
    return 0;
}

/* The encoder for the options: size, pixel format, time base, keyframe interval,
 * quality. */
static int open_encoder(prep_job *j, const AVCodec *codec, const vt_video_info *in,
                        char *err, size_t errlen) {
    const vt_prep_opts *o = j->o;
    AVCodecContext *c = avcodec_alloc_context3(codec);
    VT_CHECK_MEM(c != NULL, "the encoder's FFmpeg state");
    j->enc = c;
    int mjpeg = codec->id == AV_CODEC_ID_MJPEG;
    c->width = j->ow;
    c->height = j->oh;
    /* MJPEG is full-range JPEG; the others BT.601 4:2:0, tagged so that every reader (our
     * loader, ffmpeg, PyAV) converts back with the same matrix. H.264 keeps a full-range
     * source full range (MJPEG cameras, some phones): squeezing 256 levels into 220 cost
     * the motion preset's MJPEG files half a level on average (docs/prep.md, Colours).
     * FFmpeg's MPEG-4 encoder does not write the range (nor can AVI): limited. */
    int full = mjpeg || (codec->id == AV_CODEC_ID_H264 && in->full_range);
    c->pix_fmt = mjpeg ? AV_PIX_FMT_YUVJ420P : AV_PIX_FMT_YUV420P;
    c->color_range = full ? AVCOL_RANGE_JPEG : AVCOL_RANGE_MPEG;
    c->colorspace = AVCOL_SPC_SMPTE170M;
    c->sample_aspect_ratio = (AVRational){1, 1};
    /* The source's pixel shape, kept: a DVD's 720x480 at 32:27 shows 16:9, and its copy at
     * 192x128 was tagged square and showed 3:2, squeezed in every player (vidtrain reads
     * the stored pixels of either). Upright, a quarter turn swaps the pixel's sides; the
     * copy's display aspect is the source's (its sides' rounding aside). */
    if (in->sar_num > 0 && in->sar_den > 0 && in->sar_num != in->sar_den) {
        const int turn = in->rotation == 90 || in->rotation == 270;
        const int64_t sn = turn ? in->sar_den : in->sar_num, sd = turn ? in->sar_num : in->sar_den;
        av_reduce(&c->sample_aspect_ratio.num, &c->sample_aspect_ratio.den,
                  sn * in->disp_width * j->oh, sd * in->disp_height * j->ow, 1 << 16);
    }
    double fps = o->fps > 0 ? o->fps : in->fps > 0 ? in->fps : 25.0;
    c->framerate = av_d2q(fps, 1 << 16);
    if (o->fps > 0) {
        c->time_base = av_inv_q(c->framerate);
    } else {
        c->time_base = (AVRational){j->tb_num, j->tb_den};
        /* MPEG-4 part 2 stores the time base in 16 bits: a 1/90000 source goes to
         * 1/60000 (exact for 24, 25, 30, 50 and 60 fps, within 17 us otherwise). */
        if (codec->id == AV_CODEC_ID_MPEG4 && c->time_base.den > 65535)
            c->time_base = (AVRational){1, 60000};
        /* AVI counts frames, not time: a fine time base would become empty chunks. */
        if (!strcmp(j->oc->oformat->name, "avi"))
            c->time_base = av_inv_q(c->framerate);
    }
    c->gop_size = VT_MAX(o->gop, 1);
    c->max_b_frames = 0; /* pts = dts: no reorder delay after a seek, any container */
    c->thread_count = VT_MAX(o->threads, 1);
    if (j->oc->oformat->flags & AVFMT_GLOBALHEADER)
        c->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    AVDictionary *d = NULL;
    if (codec->id == AV_CODEC_ID_H264) {
        char buf[32];
        snprintf(buf, sizeof buf, "%d", o->quality >= 0 ? o->quality : VT_PREP_CRF);
        av_dict_set(&d, "crf", buf, 0);
        /* veryfast: most of medium's compression at a quarter of its time, and prep is
         * bound by decoding the HD source anyway. fastdecode (CAVLC, no deblocking, no
         * weighted prediction): the loader reads it 1.7x faster per core for 6% more
         * bytes (bench/bench-prep-codecs.sh). keyint_min = gop with no scenecut: the
         * keyframes fall every gop frames exactly, so a seek never decodes more. */
        av_dict_set(&d, "preset", "veryfast", 0);
        av_dict_set(&d, "tune", "fastdecode", 0);
        snprintf(buf, sizeof buf, "scenecut=0:keyint_min=%d", c->gop_size);
        av_dict_set(&d, "x264-params", buf, 0);
    } else {
        int q = o->quality >= 1 ? o->quality : mjpeg ? 3 : 4;
        c->flags |= AV_CODEC_FLAG_QSCALE;
        c->global_quality = FF_QP2LAMBDA * q;
    }
    int ret = avcodec_open2(c, codec, &d);
    av_dict_free(&d);
    if (ret < 0) {
        set_av_err(err, errlen, "cannot open the encoder", ret);
        return ret;
    }
    return 0;
}

/* A segment's frames [r.first, r.first + r.count) to on_frame, read in runs through
 * read_clip (which seeks to the first and then decodes on): the pixels decode_all gives. */
#define TRIM_RUN 32
static int decode_range(prep_job *j, vt_frame_range r, int s, char *err, size_t errlen) {
    int w, h, ret = 0;
    vt_video_scaled_size(j->v, s, &w, &h);
    size_t frame = (size_t)w * (size_t)h * 3;
    uint8_t *buf = vt_malloc(frame * TRIM_RUN);
    for (int64_t f = r.first; f < r.first + r.count && ret == 0; f += TRIM_RUN) {
        int t = (int)VT_MIN((int64_t)TRIM_RUN, r.first + r.count - f);
        ret = vt_video_read_clip(j->v, buf, f, t, 1, s, VT_PAD_REPEAT_LAST, err, errlen);
        for (int k = 0; k < t && ret == 0; k++)
            if (on_frame(j, buf + (size_t)k * frame, f + k, w, h))
                ret = j->ret < 0 ? j->ret : 0;
    }
    free(buf);
    return ret;
}

static int prep_range(vt_prep_result *res, const char *src, const char *dst, const char *ext,
                      const vt_prep_opts *o, double start, double end, char *err,
                      size_t errlen);

int vt_prep_file(vt_prep_result *res, const char *src, const char *dst, const char *ext,
                 const vt_prep_opts *o, char *err, size_t errlen) {
    return prep_range(res, src, dst, ext, o, 0, 0, err, errlen);
}

int vt_prep_segment(vt_prep_result *res, const char *src, const char *dst, const char *ext,
                    const vt_prep_opts *o, double start, double end, char *err,
                    size_t errlen) {
    if (!(end > start)) {
        vt_set_err(err, errlen, "segment %.3f-%.3f s: the end must come after the start",
                   start, end);
        return AVERROR(EINVAL);
    }
    return prep_range(res, src, dst, ext, o, start, end, err, errlen);
}

/* end <= 0: the whole file. */
static int prep_range(vt_prep_result *res, const char *src, const char *dst, const char *ext,
                      const vt_prep_opts *o, double start, double end, char *err,
                      size_t errlen) {
    prep_job j = {.o = o, .last_pts = INT64_MIN, .last_n = -1, .err = err, .errlen = errlen};
    memset(res, 0, sizeof *res);
    int ret = 0, header = 0;
    char name[64];
    const AVCodec *codec = find_encoder(o->codec);
    if (!codec) {
        vt_set_err(err, errlen, "no encoder for codec '%s' in this FFmpeg", o->codec);
        ret = AVERROR_ENCODER_NOT_FOUND;
        goto end;
    }
    ret = vt_video_open(&j.v, src, VT_MAX(o->threads, 1), err, errlen);
    if (ret < 0)
        goto end;
    /* A copy is scaled twice: here, and by the loader to the training scale. Bilinear
     * here (the loader's tent) plus a second resampling to even sides lost 14% of the
     * fine detail and 6% of the frame-to-frame change at an 80-pixel training scale
     * against reading the source; a model trained on such a copy of the motion preset
     * learned later (docs/prep.md). One bicubic resampling, straight to the even size. */
    vt_video_set_scaling(j.v, VT_SCALE_BICUBIC, 1);
    const vt_video_info *in = vt_video_get_info(j.v);
    vt_frame_range range = {0, in->nframes};
    double duration = in->duration;
    if (end > 0) {
        range = vt_sample_segment_frames(j.v, start, end);
        if (range.count <= 0) {
            vt_set_err(err, errlen, "segment %.3f-%.3f s has no frame: the file is %.3f s long",
                       start, end, in->duration);
            ret = AVERROR_INVALIDDATA;
            goto end;
        }
        duration = VT_MIN(end, in->duration) - start;
        int tn, td;
        j.ts0 = vt_video_frame_ts(j.v, range.first, &tn, &td);
    }
    res->src_duration = duration;
    res->src_frames = in->nframes;
    res->src_width = in->width;
    res->src_height = in->height;
    res->rotation = in->rotation;
    res->vfr = in->vfr;
    snprintf(res->src_codec, sizeof res->src_codec, "%s", in->codec);

    /* Written at even sides (4:2:0 needs them) to the source's exact aspect: the short
     * side is s, even already; the long one the nearest even number, so the copy's aspect
     * is the source's within one pixel and the loader scales both to the same picture
     * (vt_video_set_scaling above: the decoder's frames come at that size). */
    int s = o->short_side + (o->short_side & 1);
    /* Never upscaled: a source whose displayed short side is S or less keeps its size
     * (even sides); the loader scales it as it scales the source, and a copy holds no
     * pixels the source did not have. */
    int src_short = VT_MIN(in->disp_width, in->disp_height);
    if (src_short > 0 && src_short <= s) { /* the source's own short side, rounded down */
        s = VT_MAX(src_short & ~1, 2);
        res->size_kept = 1;
    }
    vt_video_scaled_size(j.v, s, &j.ow, &j.oh);
    if (res->size_kept && (j.ow != in->disp_width || j.oh != in->disp_height))
        res->size_kept = 2; /* an odd side: resampled to the even sides 4:2:0 needs */
    res->out_width = j.ow;
    res->out_height = j.oh;
    vt_video_frame_ts(j.v, 0, &j.tb_num, &j.tb_den);

    snprintf(name, sizeof name, "x.%s", ext);
    const AVOutputFormat *of = av_guess_format(NULL, name, NULL);
    if (!of) {
        vt_set_err(err, errlen, "no muxer for .%s in this FFmpeg", ext);
        ret = AVERROR_MUXER_NOT_FOUND;
        goto end;
    }
    ret = avformat_alloc_output_context2(&j.oc, of, NULL, dst);
    if (ret < 0) {
        set_av_err(err, errlen, "cannot set up the output", ret);
        goto end;
    }
    /* No random UIDs or dates (Matroska's segment UID): the same source and options give
     * the same bytes, so two preps of one SRC give the same manifest hashes. */
    j.oc->flags |= AVFMT_FLAG_BITEXACT;
    ret = open_encoder(&j, codec, in, err, errlen);
    if (ret < 0)
        goto end;
    j.st = avformat_new_stream(j.oc, NULL);
    VT_CHECK_MEM(j.st != NULL, "the encoder's FFmpeg state");
    j.st->time_base = j.enc->time_base;
    j.st->avg_frame_rate = j.enc->framerate;
    j.st->sample_aspect_ratio = j.enc->sample_aspect_ratio;
    ret = avcodec_parameters_from_context(j.st->codecpar, j.enc);
    VT_CHECK_MEM(ret >= 0, "avcodec_parameters_from_context");
    ret = avio_open(&j.oc->pb, dst, AVIO_FLAG_WRITE);
    if (ret < 0) {
        set_av_err(err, errlen, "cannot create the output file", ret);
        j.dst_failed = 1;
        goto end;
    }
    ret = avformat_write_header(j.oc, NULL);
    if (ret < 0) {
        set_av_err(err, errlen, "cannot write the output header", ret);
        /* DST's failure only when writing failed: a muxer that refuses the stream
         * (EINVAL: a codec its setup does not take) is this video's, and stopping the
         * run for it left every later file unwritten. */
        j.dst_failed = j.oc->pb->error < 0 || ret == AVERROR(ENOSPC) ||
                       ret == AVERROR(EDQUOT) || ret == AVERROR(EROFS) ||
                       ret == AVERROR(EIO) || ret == AVERROR(EFBIG);
        goto end;
    }
    header = 1;
    j.pkt = av_packet_alloc();
    VT_CHECK_MEM(j.pkt != NULL, "the encoder's FFmpeg state");

    int64_t got = 0;
    if (o->signature)
        j.sig = vt_sig_acc_new();
    ret = end > 0 ? decode_range(&j, range, s, err, errlen)
                  : vt_video_decode_all(j.v, s, on_frame, &j, &got, err, errlen);
    if (j.ret < 0) {
        ret = j.ret;
        goto end;
    }
    if (ret < 0 && j.decoded == 0)
        goto end;
    /* A decode error after frames came out is a damaged tail: what decoded is kept, as
     * the loader would read it; the counts say what was lost. */
    if (o->fps > 0) {
        int64_t end_tick = (int64_t)llround(duration * o->fps);
        if (j.written == 0) /* a video shorter than half a tick still gives one frame */
            end_tick = VT_MAX(end_tick, j.held_tick + 1);
        ret = flush_held(&j, end_tick);
        if (ret < 0)
            goto end;
    }
    ret = encode(&j, NULL);
    if (ret < 0)
        goto end;
    /* The trailer is written once, whatever it returns: it frees the muxer's state, and a
     * second call after a failed one (a full disk) used a freed muxer and crashed. */
    header = 0;
    ret = av_write_trailer(j.oc);
    if (ret < 0) {
        set_av_err(err, errlen, "cannot finish the output", ret);
        j.dst_failed = 1;
        goto end;
    }
    /* avio_close flushes but drops the flush's error: a full disk found by the last
     * buffer is seen only here. */
    avio_flush(j.oc->pb);
    ret = j.oc->pb->error;
    if (ret >= 0)
        ret = avio_closep(&j.oc->pb);
    if (ret < 0) {
        set_av_err(err, errlen, "cannot finish the output", ret);
        j.dst_failed = 1;
        goto end;
    }
    if (j.written == 0) {
        vt_set_err(err, errlen, "no frame written");
        ret = AVERROR_INVALIDDATA;
        goto end;
    }
    res->frames_decoded = j.decoded;
    res->frames_written = j.written;
    res->frames_disordered = j.disordered;
    res->decode_errors = vt_video_get_stats(j.v)->decode_errors;
    res->frames_missing = end > 0 ? vt_video_get_stats(j.v)->missing_frames
                                  : VT_MAX(range.count - j.decoded, 0);
    vt_sig_acc_finish(&j.sig, duration, &res->sig);
    ret = 0;

end:
    if (header)
        av_write_trailer(j.oc); /* frees the muxer's private state; the file is abandoned */
    if (j.oc && j.oc->pb)
        avio_closep(&j.oc->pb);
    if (ret < 0 && j.dst_failed)
        res->dst_failed = 1;
    avformat_free_context(j.oc);
    avcodec_free_context(&j.enc);
    av_packet_free(&j.pkt);
    av_frame_free(&j.held);
    sws_freeContext(j.sws);
    vt_sig_acc_free(&j.sig);
    vt_video_close(&j.v);
    return ret;
}
