/*
 * video_pool.c: decoders kept after a video closes, for the next open of a stream with the
 * same parameters (video_impl.h; vt_video_set_decoder_pool in video.h; issue 45 item 6).
 *
 * The loader opens a video for nearly every clip of a large dataset and closes it soon
 * after. On the CPU a decoder costs ~0.05 ms to make (docs/decode.md), but an NVDEC
 * decoder is a hardware session with its picture buffers on the GPU, made and destroyed
 * for every clip. After `prep` the videos of a dataset share codec, size and format, so a
 * closed video's decoder, flushed, can decode the next one.
 *
 * A decoder is only taken for a stream whose parameters equal those it was opened with,
 * extradata byte for byte, and only for codecs whose state after a flush is what a fresh
 * decoder opened on those parameters would have: H.264 and HEVC (what NVDEC decodes
 * most, and what `prep` writes) with their parameter sets in the extradata (avcC/hvcC:
 * MP4, Matroska). A flushed decoder keeps the parameter sets it last parsed, so a stream
 * that brought any in band (Annex B: MPEG-TS, raw .h264; or an MP4 that repeats or
 * changes them) leaves its decoder with state that its extradata does not say, and a
 * later stream would decode with another file's instead of its own: such a decoder is
 * freed (vt_vid_pool_inband reads each packet's NAL unit types). So is one that rejected
 * a packet, flagged a frame, or gave up on the GPU. VP8/VP9 and the rest are not kept: a
 * flushed VP8 decoder keeps e.g. a segmentation map that a fresh one would not have. The
 * frames are the same either way (tests/test_decoder_pool.c checks them against fresh
 * decoders and the ffmpeg command).
 *
 * Bounded (VT_DECODER_POOL_IDLE idle decoders, the oldest freed first); thread-safe (one
 * mutex, held for a comparison, never for a decoder call).
 *
 * NVDEC sessions: the GPU has a few decoder engines (an H100 or H200 seven), and sessions
 * beyond them share the engines' time while each holds its picture buffers. Under a cap
 * (the environment's VT_NVDEC_SESSIONS; none by default until a GPU run has
 * measured one) an open that would make a GPU decoder past the cap frees an idle one
 * first, and when none is idle decodes on the CPU instead: the workers past the engines
 * then add the CPU's throughput to the GPU's rather than queueing on it. Only H.264
 * overflows to the CPU, where NVDEC's frames are the CPU decoder's byte for byte
 * (docs/decode.md, "Status"): which decoder reads a video then depends on timing, and it
 * must not change a pixel. Other codecs open on the GPU past the cap.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <libavcodec/avcodec.h>

#include "base/common.h"
#include "pipeline/data/video/video_impl.h"

typedef struct idle {
    AVCodecContext *dec;
    AVCodecParameters *par; /* the stream it was opened for (owned) */
    AVRational tb;
    int threads, hw;
    uint64_t used;
} idle;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static idle pool[VT_DECODER_POOL_IDLE];
static int npool;
static uint64_t tick;
static atomic_int mode = VT_DECODER_POOL_GPU;
static vt_decoder_pool_stats counts; /* gpu_live and gpu_capped under lock too */
static int sessions = -1;            /* the cap (0: none); -1 until read from VT_NVDEC_SESSIONS */

static void sessions_read(void) { /* under lock */
    if (sessions >= 0)
        return;
    const char *e = getenv("VT_NVDEC_SESSIONS");
    char *end = NULL;
    long n = e ? strtol(e, &end, 10) : 0;
    sessions = e && end != e && !*end && n > 0 && n < 100000 ? (int)n : 0;
}

/* A GPU decoder freed: its session ends. */
static void free_dec(AVCodecContext **dec, int hw) {
    if (!*dec)
        return;
    if ((*dec)->hw_device_ctx)
        vt_vid_hw_thread();
    avcodec_free_context(dec);
    if (hw) {
        pthread_mutex_lock(&lock);
        counts.gpu_live--;
        pthread_mutex_unlock(&lock);
    }
}

/* Under the lock: the least recently closed idle decoder (a GPU one when gpu_only), or -1
 * when there is none. */
static int oldest(int gpu_only) {
    int old = -1;
    for (int i = 0; i < npool; i++)
        if ((!gpu_only || pool[i].hw) && (old < 0 || pool[i].used < pool[old].used))
            old = i;
    return old;
}

/* Under the lock: entry i out of the pool. */
static idle take_out(int i) {
    idle e = pool[i];
    pool[i] = pool[--npool];
    return e;
}

/* An entry out of the pool freed: outside the lock, as a GPU decoder's close waits. */
static void discard(idle *e) {
    free_dec(&e->dec, e->hw);
    avcodec_parameters_free(&e->par);
}

int vt_vid_pool_session(const AVCodecParameters *par) {
    for (int tries = 0;; tries++) {
        pthread_mutex_lock(&lock);
        sessions_read();
        if (sessions == 0 || counts.gpu_live < sessions || par->codec_id != AV_CODEC_ID_H264) {
            if (++counts.gpu_live > counts.gpu_peak)
                counts.gpu_peak = counts.gpu_live;
            pthread_mutex_unlock(&lock);
            return 1;
        }
        const int old = oldest(1);
        if (old < 0 || tries > 0) {
            counts.gpu_capped++;
            pthread_mutex_unlock(&lock);
            return 0;
        }
        idle e = take_out(old);
        counts.evicted++;
        pthread_mutex_unlock(&lock);
        discard(&e);
    }
}

static const char *const mode_names[] = {
    [VT_DECODER_POOL_OFF] = "off",
    [VT_DECODER_POOL_GPU] = "gpu",
    [VT_DECODER_POOL_ALL] = "all",
};

int vt_decoder_pool_parse(const char *s) {
    for (int m = 0; s && m < (int)VT_ARRAY_LEN(mode_names); m++)
        if (!strcmp(s, mode_names[m]))
            return m;
    return -1;
}

const char *vt_decoder_pool_name(vt_decoder_pool_mode m) {
    return (int)m >= 0 && (int)m < (int)VT_ARRAY_LEN(mode_names) ? mode_names[m] : "?";
}

/* Codecs whose flushed decoder starts the next stream as a fresh one would (see the top).
 * H.264's avcC and HEVC's hvcC both begin with configurationVersion 1; Annex B extradata
 * begins with a start code (0). */
static int pool_codec(const AVCodecParameters *p) {
    switch (p->codec_id) {
    case AV_CODEC_ID_H264:
    case AV_CODEC_ID_HEVC:
        return p->extradata_size >= 7 && p->extradata[0] == 1;
    default:
        return 0;
    }
}

/* The parameters avcodec_parameters_to_context gives a decoder (video fields). */
static int same_par(const AVCodecParameters *a, const AVCodecParameters *b) {
    return a->codec_id == b->codec_id && a->codec_tag == b->codec_tag &&
           a->format == b->format && a->width == b->width && a->height == b->height &&
           a->profile == b->profile && a->level == b->level &&
           a->bits_per_coded_sample == b->bits_per_coded_sample &&
           a->bits_per_raw_sample == b->bits_per_raw_sample &&
           a->field_order == b->field_order && a->color_range == b->color_range &&
           a->color_primaries == b->color_primaries && a->color_trc == b->color_trc &&
           a->color_space == b->color_space && a->chroma_location == b->chroma_location &&
           a->sample_aspect_ratio.num == b->sample_aspect_ratio.num &&
           a->sample_aspect_ratio.den == b->sample_aspect_ratio.den &&
           a->video_delay == b->video_delay && a->extradata_size == b->extradata_size &&
           (a->extradata_size == 0 || !memcmp(a->extradata, b->extradata,
                                              (size_t)a->extradata_size));
}

void vt_video_set_decoder_pool(vt_decoder_pool_mode m) {
    atomic_store(&mode, (int)m);
    if (m == VT_DECODER_POOL_OFF)
        vt_video_decoder_pool_drain();
}

vt_decoder_pool_mode vt_video_get_decoder_pool(void) {
    return (vt_decoder_pool_mode)atomic_load(&mode);
}

void vt_video_get_decoder_pool_stats(vt_decoder_pool_stats *out) {
    pthread_mutex_lock(&lock);
    *out = counts;
    out->idle = npool;
    pthread_mutex_unlock(&lock);
}

static int wanted(int hw) {
    int m = atomic_load(&mode);
    return m == VT_DECODER_POOL_ALL || (m == VT_DECODER_POOL_GPU && hw);
}

int vt_vid_pool_wants(const AVCodecParameters *par, int hw) {
    return wanted(hw) && pool_codec(par);
}

AVCodecContext *vt_vid_pool_take(const AVCodecParameters *par, AVRational tb, int threads,
                                 int hw) {
    if (!vt_vid_pool_wants(par, hw))
        return NULL;
    AVCodecContext *dec = NULL;
    pthread_mutex_lock(&lock);
    for (int i = npool - 1; i >= 0; i--) { /* the most recently closed first */
        idle *e = &pool[i];
        if (e->hw != hw || e->threads != threads || av_cmp_q(e->tb, tb) != 0 ||
            !same_par(e->par, par))
            continue;
        idle t = take_out(i);
        dec = t.dec;
        avcodec_parameters_free(&t.par);
        break;
    }
    if (dec)
        counts.reused++;
    else
        counts.made++;
    pthread_mutex_unlock(&lock);
    return dec;
}

void vt_vid_pool_give(AVCodecContext **pdec, const AVCodecParameters *par, AVRational tb,
                      int threads, int hw, int clean) {
    AVCodecContext *dec = *pdec;
    *pdec = NULL;
    if (!dec)
        return;
    if (!clean || !par || !vt_vid_pool_wants(par, hw) || !avcodec_is_open(dec)) {
        free_dec(&dec, hw);
        return;
    }
    avcodec_flush_buffers(dec); /* no frame, reference or delayed output of this stream kept */
    dec->opaque = NULL;         /* the next video's GPU state is set when it is taken */
    AVCodecParameters *copy = avcodec_parameters_alloc();
    if (!copy || avcodec_parameters_copy(copy, par) < 0) {
        avcodec_parameters_free(&copy);
        free_dec(&dec, hw);
        return;
    }
    idle evict = {0};
    pthread_mutex_lock(&lock);
    if (npool == VT_DECODER_POOL_IDLE) { /* the least recently closed goes */
        evict = take_out(oldest(0));
        counts.evicted++;
    }
    pool[npool++] = (idle){.dec = dec, .par = copy, .tb = tb, .threads = threads, .hw = hw,
                           .used = ++tick};
    pthread_mutex_unlock(&lock);
    discard(&evict);
}

void vt_video_decoder_pool_drain(void) {
    for (;;) {
        idle e = {0};
        pthread_mutex_lock(&lock);
        const int any = npool > 0;
        if (any)
            e = take_out(npool - 1);
        pthread_mutex_unlock(&lock);
        if (!any)
            return;
        discard(&e);
    }
}

/* The NAL units of a length-prefixed packet (avcC / hvcC): 1 at a parameter set, or where
 * the lengths do not add up (the decoder's state is then unknown), else 0. */
int vt_vid_pool_inband(const AVCodecParameters *par, const AVPacket *pkt) {
    const int h264 = par->codec_id == AV_CODEC_ID_H264;
    if (!h264 && par->codec_id != AV_CODEC_ID_HEVC)
        return 1; /* not a codec the pool keeps */
    if (par->extradata_size < (h264 ? 7 : 23))
        return 1;
    const int nls = ((h264 ? par->extradata[4] : par->extradata[21]) & 3) + 1;
    const uint8_t *d = pkt->data;
    for (int64_t at = 0, size = pkt->size; at < size;) {
        if (size - at < nls + 1)
            return 1;
        uint32_t len = 0;
        for (int i = 0; i < nls; i++)
            len = len << 8 | d[at + i];
        at += nls;
        if (len == 0 || len > (uint64_t)(size - at))
            return 1;
        const int type = h264 ? d[at] & 0x1f : (d[at] >> 1) & 0x3f;
        if (h264 ? (type == 7 || type == 8 || type == 13 || type == 15)
                 : (type >= 32 && type <= 34))
            return 1;
        at += len;
    }
    return 0;
}
