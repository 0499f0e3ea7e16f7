/*
 * video_open.c: opening a video (video.h). Open = probe, pick the best video stream,
 * refuse absurd dimensions, build the frame index and the keyframe list (video_index.c:
 * demuxing, no decoding), then decode one frame to prove the file decodes. A
 * file opened before in this process takes the index, and the first frame's facts when
 * that open proved it on the CPU, from video_known.c instead.
 * Also the handle's getters and the output-size arithmetic.
 *
 * This file must never print and never abort on a bad file: every data error becomes a
 * negative AVERROR-style code plus a reason in err.
 */
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/display.h>
#include <libavutil/pixdesc.h>

#include "base/common.h"
#include "pipeline/data/video/video.h"
#include "pipeline/data/video/video_impl.h"

int vt_vid_rotation_of(const AVStream *st) {
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

/* A stream cut anywhere (a transport stream captured mid-broadcast) starts with packets of
 * a GOP whose keyframe, and often whose parameter sets, lie before the cut, and the first
 * keyframe's leading pictures lean on that lost GOP. What the decoder makes of them
 * differs by codec and by what it saw before: H.264 hands out nothing before the keyframe,
 * MPEG-2 also drops the leading B-pictures after it, HEVC drops the keyframe's RASL
 * pictures and, fresh, hands out pictures built on nothing for the packets before it
 * (which a decoder that has the parameter sets makes differently). Such a stream is
 * decoded from its first keyframe (vt_vid_seek_ts, cut_start), and its frames are the
 * ones that come out from there: the open decodes to 16 frames past the first keyframe
 * (the reorder depth H.264 and HEVC bound by 16: every leading picture is out by then)
 * and drops the index positions up to there that no frame came out at, then decodes the
 * first frame again, as an open does. Left in the index they put every later frame that
 * many places late (a clip read other frames than asked; a clip at the start failed). The
 * ffmpeg command numbers HEVC's made-up pictures too: there the frames are its, that many
 * places on (docs/decode.md). A damaged keyframe further on is not this: a lost frame
 * keeps its place. 0, or < 0 when the decoder failed (err set). */
static int drop_unmade_lead(vt_video *v, char *err, size_t errlen) {
    vt_video_info *in = &v->info;
    if (v->no_ts || !v->cut_start || v->nkf == 0)
        return 0;
    int64_t n = in->nframes, pk = vt_vid_lower_bound(v->pts, n, v->kf[0]);
    int64_t hz = VT_MIN(n - 1, pk + 16); /* positions 0..hz are looked at */
    vt_video_stats keep = v->stats;
    char *seen = vt_calloc((size_t)hz + 1, 1);
    int ret = 1;
    for (; ret > 0; ret = vt_vid_next_frame(v, err, errlen)) {
        int64_t t = vt_vid_frame_time(v, v->frame);
        av_frame_unref(v->frame);
        if (t == AV_NOPTS_VALUE)
            continue;
        int64_t i = vt_vid_lower_bound(v->pts, n, t);
        while (i < hz && seen[i] && v->pts[i + 1] == t) /* a time two frames share */
            i++;
        if (i <= hz && i < n && v->pts[i] == t)
            seen[i] = 1;
        if (t >= v->pts[hz])
            break;
    }
    int64_t m = 0;
    for (int64_t i = 0; ret >= 0 && i < n; i++)
        if (i > hz || seen[i])
            v->pts[m++] = v->pts[i];
    free(seen);
    if (ret >= 0 && m < n && m > 0) {
        int64_t k = 0;
        for (int64_t j = 0; j < v->nkf; j++) { /* keyframes whose frame never came out go */
            int64_t i = vt_vid_lower_bound(v->pts, m, v->kf[j]);
            if (i < m && v->pts[i] == v->kf[j])
                v->kf[k++] = v->kf[j];
        }
        v->nkf = k;
        if (in->duration > 0) /* less the frames dropped, at the mean frame duration */
            in->duration = VT_MAX(in->duration - (double)(n - m) * (in->duration / (double)n),
                                  in->duration / (double)n);
        in->nframes = m;
        in->vfr = vt_vid_index_vfr(v->pts, m); /* the gaps the cut left are gone */
    }
    if (ret < 0)
        return ret;
    /* Back to the first frame, as the open left it. */
    if ((ret = vt_vid_seek_ts(v, v->start_ts, err, errlen)) < 0 ||
        (ret = vt_vid_next_frame(v, err, errlen)) < 0)
        return ret;
    v->stats = keep;
    if (ret == 0) {
        vt_set_err(err, errlen, "0 decodable frames of %lld indexed", (long long)in->nframes);
        return AVERROR_INVALIDDATA;
    }
    return 0;
}

/* Is the frame in v->frame, at v->last_pos, the only one with its timestamp? Then a read
 * that decodes it again places it at the same position (vt_vid_frame_pos). */
static int first_ts_alone(const vt_video *v) {
    return vt_vid_ts_alone_at(v, v->last_pos, vt_vid_frame_time(v, v->frame));
}

/* ---- public API ---- */

/* vt_video_open, on the GPU when allow_hw and the decode mode say so. *hw_failed: set to
 * 1 when it failed with the GPU decoder attached (a CPU open may still succeed). */
/* ---- the probe, taken from an earlier open ---- */

/* What a container's header says of a stream before the probe. */
enum { HDR_STREAMS = 16 };
typedef struct hdr_stream {
    int codec, w, h;
} hdr_stream;

static void hdr_read(const AVFormatContext *fmt, hdr_stream hdr[HDR_STREAMS]) {
    for (unsigned i = 0; i < HDR_STREAMS; i++) {
        const AVCodecParameters *p = i < fmt->nb_streams ? fmt->streams[i]->codecpar : NULL;
        hdr[i] = (hdr_stream){p ? (int)p->codec_id : 0, p ? p->width : 0, p ? p->height : 0};
    }
}

/* Containers whose header states every stream, and whose packets carry their own
 * presentation times: what the probe adds (a decoded frame's format, the reorder depth)
 * belongs to the bytes, so an unchanged file gives the same again. Others are probed every
 * time: MPEG-TS and raw streams may state a stream only in its packets, and AVI's packets
 * have no pts, which libavformat guesses from the reorder depth that the probe measures
 * (MPEG-4 with B-frames). */
static int header_states_streams(const AVInputFormat *f) {
    return !strncmp(f->name, "mov,", 4) || !strncmp(f->name, "matroska", 8);
}

/* A kept file's stream (kn) for v, instead of the probe and av_find_best_stream: when the
 * container is one whose header states its streams, and that header says of the chosen
 * stream what it said at the open that probed (the same streams, codec and size). Sets
 * v->sidx and *codec (av_find_best_stream's choice: the codec's default decoder) and the
 * stream's parameters to the probe's; 0 leaves v untouched, to be probed. */
static int take_known_stream(vt_video *v, const vt_vid_known *kn, const AVCodec **codec) {
    if (!kn->par || !header_states_streams(v->fmt->iformat) ||
        v->fmt->nb_streams != (unsigned)kn->nb_streams || kn->sidx < 0 ||
        kn->sidx >= HDR_STREAMS || kn->sidx >= kn->nb_streams)
        return 0;
    AVCodecParameters *p = v->fmt->streams[kn->sidx]->codecpar;
    if (p->codec_type != AVMEDIA_TYPE_VIDEO || (int)p->codec_id != kn->hdr_codec ||
        p->width != kn->hdr_w || p->height != kn->hdr_h)
        return 0;
    const AVCodec *c = avcodec_find_decoder(kn->par->codec_id);
    if (!c || avcodec_parameters_copy(p, kn->par) < 0)
        return 0;
    *codec = c;
    v->sidx = kn->sidx;
    return 1;
}

static int open_video(vt_video **out, const char *path, int threads, int allow_hw,
                      int *hw_failed, char *err, size_t errlen) {
    *out = NULL;
    vt_ffmpeg_log_init();
    struct stat sb;
    if (stat(path, &sb) != 0) {
        vt_set_err(err, errlen, "cannot open: %s", strerror(errno));
        return AVERROR(errno ? errno : ENOENT);
    }
    if (!S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode)) {
        vt_set_err(err, errlen, "not a regular file");
        return AVERROR(EINVAL);
    }
    if (S_ISDIR(sb.st_mode) && !vt_video_is_frame_dir(path)) {
        vt_set_err(err, errlen, "not a regular file: a folder, and not a frame folder "
                   "(numbered .jpg/.jpeg/.png files, nothing else)");
        return AVERROR(EINVAL);
    }
    if (S_ISREG(sb.st_mode) && sb.st_size == 0) {
        vt_set_err(err, errlen, "empty file (0 bytes)");
        return AVERROR_INVALIDDATA;
    }
    vt_video *v = vt_calloc(1, sizeof *v);
    v->path = vt_strdup(path);
    v->threads = threads;
    v->sidx = -1;
    v->last_pos = -1;
    v->seek_pos = -1;
    v->skip_lost_hi = -1;
    v->pkt = av_packet_alloc();
    v->frame = av_frame_alloc();
    VT_CHECK_MEM(v->pkt && v->frame, "a video's FFmpeg state");
    /* A file opened before in this process (video_known.c): its index, its stream's
     * parameters, and, when that open proved it on the CPU, its first frame's facts. */
    int reg = S_ISREG(sb.st_mode), have = 0;
    vt_vid_file_id fid = {(int64_t)sb.st_dev, (int64_t)sb.st_ino, (int64_t)sb.st_size,
                          (int64_t)sb.st_mtim.tv_sec, (int64_t)sb.st_mtim.tv_nsec};
    vt_vid_known kn = {0};
    if (reg && vt_vid_known_get(v->path, &fid, &kn)) {
        have = 1;
        v->pts = kn.pts; /* v's now: freed with it */
        v->kf = kn.kf;
    }
    int ret = vt_vid_open_input(v, 0, err, errlen);
    if (ret < 0)
        goto fail;
    hdr_stream hdr[HDR_STREAMS];
    hdr_read(v->fmt, hdr);

    const AVCodec *codec = NULL;
    if (have && take_known_stream(v, &kn, &codec)) {
        ret = v->sidx;
        vt_vid_known_probe_skipped();
    } else {
        ret = vt_vid_probe(v, err, errlen);
        if (ret < 0)
            goto fail;
        vt_vid_last_msg[0] = 0;
        ret = av_find_best_stream(v->fmt, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
    }
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
            vt_vid_set_av_err(err, errlen, "no usable video stream", ret);
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

    /* A closed video's decoder for a stream with these parameters (video_pool.c), else a
     * new one. */
    int hw = allow_hw && vt_vid_hw_usable(codec, v->path);
    int dthreads = hw ? 1 : threads < 0 ? 0 : threads;
    v->dec_pool = vt_vid_pool_wants(par, hw);
    v->dec = v->dec_pool ? vt_vid_pool_take(par, st->time_base, dthreads, hw) : NULL;
    if (!v->dec && hw && !vt_vid_pool_session(par)) { /* the NVDEC session cap: the CPU */
        hw = 0;
        dthreads = threads < 0 ? 0 : threads;
        v->dec_pool = vt_vid_pool_wants(par, hw);
        v->dec = v->dec_pool ? vt_vid_pool_take(par, st->time_base, dthreads, hw) : NULL;
    }
    v->dec_hw = hw; /* from here a GPU decoder's session ends when the pool frees it */
    if (v->dec) {
        if (hw)
            vt_vid_hw_adopt(&v->hw, v->dec);
        else
            vt_vid_dec_tap(&v->hw, v->dec);
    } else {
        v->dec = avcodec_alloc_context3(codec);
        VT_CHECK_MEM(v->dec != NULL, "a video's decoder");
        ret = avcodec_parameters_to_context(v->dec, par);
        if (ret < 0) {
            vt_vid_set_av_err(err, errlen, "bad codec parameters", ret);
            goto fail;
        }
        v->dec->thread_count = dthreads;
        v->dec->thread_type = FF_THREAD_FRAME | FF_THREAD_SLICE;
        v->dec->pkt_timebase = st->time_base;
        /* Decoders refuse larger frames themselves, even when a later header changes size. */
        v->dec->max_pixels = VT_VIDEO_MAX_PIXELS;
        vt_vid_dec_tap(&v->hw, v->dec);
        if (hw)
            vt_vid_hw_attach(&v->hw, v->dec);
        vt_vid_last_msg[0] = 0;
        ret = avcodec_open2(v->dec, codec, NULL);
        if (ret < 0) {
            vt_vid_set_av_err(err, errlen, "cannot open the decoder", ret);
            goto fail;
        }
    }
    v->dec_par = avcodec_parameters_alloc();
    VT_CHECK_MEM(v->dec_par && avcodec_parameters_copy(v->dec_par, par) >= 0, "a video's FFmpeg state");
    v->dec_tb = st->time_base;
    v->dec_threads = dthreads;

    vt_video_info *in = &v->info;
    in->width = par->width;
    in->height = par->height;
    in->rotation = vt_vid_rotation_of(st);
    AVRational sar = av_guess_sample_aspect_ratio(v->fmt, st, NULL);
    if (sar.num <= 0 || sar.den <= 0)
        sar = (AVRational){1, 1};
    in->sar_num = sar.num;
    in->sar_den = sar.den;
    snprintf(in->codec, sizeof in->codec, "%s", avcodec_get_name(par->codec_id));
    snprintf(in->container, sizeof in->container, "%s", v->fmt->iformat->name);
    char *comma = strchr(in->container, ',');
    if (comma)
        *comma = 0;
    const char *pf = av_get_pix_fmt_name(par->format);
    snprintf(in->pix_fmt, sizeof in->pix_fmt, "%s", pf ? pf : "unknown");

    vt_vid_discard_others(v);
    if (have) {
        v->nkf = kn.nkf;
        v->start_ts = kn.start_ts;
        v->no_ts = kn.no_ts;
        v->ts_back = kn.ts_back;
        v->ts_shift = kn.ts_shift;
        v->lead_untimed = kn.lead_untimed;
        v->cut_start = kn.cut_start;
        v->intra_only = kn.intra_only;
        in->nframes = kn.info.nframes;
        in->duration = kn.info.duration;
        in->fps = kn.info.fps;
        in->vfr = kn.info.vfr;
    } else {
        ret = vt_vid_build_index(v, err, errlen);
        if (ret < 0)
            goto fail;
    }

    /* Prove that the file decodes, and learn the real frame size and format. */
    ret = vt_vid_seek_ts(v, v->start_ts, err, errlen);
    v->stats.seeks = 0;
    if (ret < 0)
        goto fail;
    if (have && kn.first && !v->dec->hw_device_ctx) {
        /* Proven by an earlier open on the CPU: the decoder is at the start, which a read
         * that continues decodes again (frame first_pos among them, found by its own
         * timestamp), so it decides, seeks and decodes as after the first open. */
        *in = kn.info;
        v->last_pos = kn.first_pos;
        v->streaming = 1;
        avcodec_parameters_free(&kn.par);
        *out = v;
        return 0;
    }
    vt_vid_last_msg[0] = 0;
    ret = vt_vid_next_frame(v, err, errlen);
    if (ret < 0)
        goto fail;
    if (ret == 0) {
        if (vt_vid_last_msg[0])
            vt_set_err(err, errlen, "0 decodable frames of %lld indexed (FFmpeg: %s)",
                       (long long)in->nframes, vt_vid_last_msg);
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
    if (v->frame->width < VT_VIDEO_MIN_SIDE || v->frame->height < VT_VIDEO_MIN_SIDE) {
        vt_set_err(err, errlen, "frames of %dx%d pixels hold no picture to learn from (at "
                   "least %d a side; a placeholder or a broken encode?)", v->frame->width,
                   v->frame->height, VT_VIDEO_MIN_SIDE);
        ret = AVERROR_INVALIDDATA;
        goto fail;
    }
    if (vt_vid_hw_first_frame(&v->hw, v->frame, v->path) && threads != 1) {
        /* NVDEC declined the stream: FFmpeg decodes it in software, but with the one
         * thread the GPU decoder was opened with. Opened again on the CPU with `threads`
         * (the warning is said already). */
        vt_set_err(err, errlen, "NVDEC declined the stream");
        if (hw_failed)
            *hw_failed = 1;
        vt_video_close(&v);
        return AVERROR(EAGAIN);
    }
    ret = vt_vid_hw_download(&v->hw, v->frame, err, errlen); /* proves the copy from the GPU works */
    if (ret < 0)
        goto fail;
    snprintf(in->decoder, sizeof in->decoder, "%s", v->hw.on ? "nvdec" : "cpu");
    in->width = v->frame->width;
    in->height = v->frame->height;
    /* The stream's own format: a GPU frame arrives as NV12 whatever the file holds. */
    pf = av_get_pix_fmt_name(v->hw.on ? v->dec->sw_pix_fmt : v->frame->format);
    if (pf)
        snprintf(in->pix_fmt, sizeof in->pix_fmt, "%s", pf);
    in->full_range = v->frame->color_range == AVCOL_RANGE_JPEG || (pf && !strncmp(pf, "yuvj", 4));
    /* A stream timed by dts alone (H.264 with B-frames in AVI): the decoder times a frame
     * by the dts of the packet that pushed it out, its reorder delay after the frame's
     * own, so every frame's best-effort time is that delay later than the index's. The
     * first frame decoded from the start is position 0: the difference is the delay
     * (bounded by 16 frames; a damaged start proves nothing). */
    if (!have && v->dts_only && !v->no_ts && v->stats.decode_errors == 0 &&
        v->frame->pts == AV_NOPTS_VALUE && v->frame->best_effort_timestamp != AV_NOPTS_VALUE &&
        in->nframes > 1) {
        int64_t d = v->frame->best_effort_timestamp - v->pts[0];
        int64_t step = (v->pts[in->nframes - 1] - v->pts[0]) / (in->nframes - 1);
        if (d > 0 && step > 0 && d <= 16 * step)
            v->ts_shift = d;
    }
    if (!have && (ret = drop_unmade_lead(v, err, errlen)) < 0)
        goto fail;
    v->last_pos = vt_vid_frame_pos(v);
    v->streaming = 1;
    int first_known = !v->dec->hw_device_ctx && !v->no_ts && v->stats.decode_errors == 0 &&
                      first_ts_alone(v);
    av_frame_unref(v->frame);
    int swap = in->rotation == 90 || in->rotation == 270;
    in->disp_width = swap ? in->height : in->width;
    in->disp_height = swap ? in->width : in->height;
    if (reg && !have) {
        const hdr_stream *h = v->sidx < HDR_STREAMS ? &hdr[v->sidx] : NULL;
        vt_vid_known k = {.info = *in, .pts = v->pts, .kf = v->kf, .nkf = v->nkf,
                          .start_ts = v->start_ts, .ts_shift = v->ts_shift,
                          .lead_untimed = v->lead_untimed, .cut_start = v->cut_start,
                          .no_ts = v->no_ts, .ts_back = v->ts_back,
                          .intra_only = v->intra_only, .first = first_known,
                          .first_pos = v->last_pos,
                          .par = h ? v->fmt->streams[v->sidx]->codecpar : NULL,
                          .sidx = v->sidx, .nb_streams = (int)v->fmt->nb_streams,
                          .hdr_codec = h ? h->codec : 0, .hdr_w = h ? h->w : 0,
                          .hdr_h = h ? h->h : 0};
        vt_vid_known_put(v->path, &fid, &k);
    }
    avcodec_parameters_free(&kn.par);
    *out = v;
    return 0;

fail:
    if (hw_failed)
        *hw_failed = v->hw.on;
    avcodec_parameters_free(&kn.par);
    vt_video_close(&v);
    return ret < 0 ? ret : AVERROR_INVALIDDATA;
}

int vt_video_open(vt_video **out, const char *path, int threads, char *err, size_t errlen) {
    int hw_failed = 0;
    int ret = open_video(out, path, threads, 1, &hw_failed, err, errlen);
    if (ret < 0 && hw_failed) {
        /* Failed with the GPU decoder attached: the CPU decides whether the file is bad
         * (the reason from the GPU is only reported if the CPU reads it). */
        char why[256];
        snprintf(why, sizeof why, "%s", err && errlen ? err : "the GPU decoder failed");
        ret = open_video(out, path, threads, 0, NULL, err, errlen);
        if (ret == 0)
            vt_vid_hw_fallback(path, why);
    }
    return ret;
}

void vt_video_close(vt_video **pv) {
    if (!pv || !*pv)
        return;
    vt_video *v = *pv;
    vt_vid_scaler_clear(&v->sc);
    free(v->seq);
    if (v->hw.on)
        vt_vid_hw_thread();
    /* kept for the next open of a stream like it (video_pool.c) when nothing in it is
     * this file's alone: no rejected packet or flagged frame, no parameter set in band,
     * and the GPU decoder it was opened as still on the GPU */
    const int clean = v->dec_pool && !v->dec_dirty && v->stats.decode_errors == 0 &&
                      atomic_load(&v->hw.concealed) == 0 && v->hw.on == v->dec_hw;
    vt_vid_pool_give(&v->dec, v->dec_par, v->dec_tb, v->dec_threads, v->dec_hw, clean);
    avcodec_parameters_free(&v->dec_par);
    avformat_close_input(&v->fmt);
    av_packet_free(&v->pkt);
    av_frame_free(&v->frame);
    vt_vid_hw_free(&v->hw);
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
    int w = v->info.disp_width, h = v->info.disp_height;
    if (!v->even_sides || short_side <= 0 || w <= 0 || h <= 0) {
        vt_video_info_scaled_size(&v->info, short_side, out_w, out_h);
        return;
    }
    int s = short_side + (short_side & 1);
    const int lng = w <= h ? h : w;
    double along = (double)lng * s / (w <= h ? w : h); /* unrounded */
    int even = VT_MAX(2 * (int)lround(along / 2), s);
    if (even > lng) /* never past the source's own long side (161x120 at 120: 160, not 162) */
        even = VT_MAX(lng & ~1, s);
    *out_w = w <= h ? s : even;
    *out_h = w <= h ? even : s;
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
