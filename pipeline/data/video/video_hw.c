/*
 * video_hw.c: decoding on the GPU (NVDEC) through FFmpeg's hwaccel API, for the video
 * reader (video.h, `--decode`) and the streaming reader (stream.c: predict --timeline).
 * One CUDA device context per process, made on first use (device 0 of what
 * CUDA_VISIBLE_DEVICES shows) and shared by every decoder; a decoder gets it when its
 * codec lists a CUDA hw config; get_format then picks AV_PIX_FMT_CUDA.
 * Decoded frames stay on the GPU until a read needs their pixels: then they are copied
 * to system memory (NV12, or P010/P016 for deeper streams) and go through the very swscale
 * path CPU frames take, so GPU scaling is not needed for correctness.
 *
 * It needs no CUDA SDK and no GPU to build: the hwcontext API is libavutil's, which loads
 * libcuda at run time; without one, the device cannot be made and everything decodes on
 * the CPU.
 *
 * The device is a CUDA context of its own, not the primary context the towers use
 * through the CUDA runtime, because the two cannot share one: cuDNN 9 captures some of
 * its work into CUDA graphs (inside cudnnFind*, and in some engines' execution), and
 * libnvcuvid synchronises its context (cuCtxSynchronize); in a shared context that sync
 * meets the capturing stream, the capture is invalidated, and the tower dies with
 * CUDNN_STATUS_EXECUTION_FAILED or "cuDNN offers no ... algorithm" (seen on an H100 and
 * an H200 with `train --decode nvdec`: docs/decode.md, "Status"). Its own context costs
 * a few hundred MB of the GPU and context switches with the towers' kernels. Each
 * thread that touches a decoder also sets its stream-capture mode to relaxed
 * (vt_vid_hw_thread): in the default, global mode its "potentially unsafe" calls
 * (cuMemAlloc, synchronisations) fail while any other thread captures. The relaxed mode
 * alone, in the primary context, was not enough. scripts/gpu-check.sh section 3c runs
 * the own context on a GPU.
 *
 * It must never abort, and it prints one thing only: under `--decode nvdec`,
 * the first fallback to the CPU (path and reason), once per process — the user asked for
 * the GPU and must learn it is not used; `auto` falls back silently.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <libavcodec/avcodec.h>
#include <libavutil/buffer.h>
#include <libavutil/error.h>
#include <libavutil/hwcontext.h>
#include <libavutil/pixdesc.h>

#include "base/common.h"
#include "pipeline/data/video/video.h"
#include "pipeline/data/video/video_impl.h"

/* The CPU by default until a GPU run has measured NVDEC here: its decoders hold GPU memory
 * outside the towers' budgets (docs/design.md §3.3) and its pixels for MPEG-4/MJPEG
 * are unchecked; auto and nvdec are asked for by name. */
static atomic_int decode_mode = VT_DECODE_CPU;

static const char *const mode_names[] = {
    [VT_DECODE_AUTO] = "auto",
    [VT_DECODE_CPU] = "cpu",
    [VT_DECODE_NVDEC] = "nvdec",
};

int vt_decode_mode_parse(const char *s) {
    for (int m = 0; s && m < (int)(sizeof mode_names / sizeof mode_names[0]); m++)
        if (!strcmp(s, mode_names[m]))
            return m;
    return -1;
}

const char *vt_decode_mode_name(vt_decode_mode m) {
    return (int)m >= 0 && (int)m < (int)(sizeof mode_names / sizeof mode_names[0])
               ? mode_names[m]
               : "?";
}

void vt_video_set_decode(vt_decode_mode m) { atomic_store(&decode_mode, (int)m); }

vt_decode_mode vt_video_get_decode(void) { return (vt_decode_mode)atomic_load(&decode_mode); }

/* ---- the process's CUDA device: made once, on first use, shared by every decoder ---- */

static pthread_once_t device_once = PTHREAD_ONCE_INIT;
static AVBufferRef *device;        /* NULL when there is none; kept until exit */
static char device_why[256];       /* why there is none */

static void device_make(void) {
    if (av_hwdevice_find_type_by_name("cuda") != AV_HWDEVICE_TYPE_CUDA) {
        snprintf(device_why, sizeof device_why, "this FFmpeg was built without CUDA");
        return;
    }
    /* A context of its own (FFmpeg's default), never the primary one: see the top. */
    vt_vid_last_msg[0] = 0;
    int ret = av_hwdevice_ctx_create(&device, AV_HWDEVICE_TYPE_CUDA, NULL, NULL, 0);
    if (ret < 0) {
        device = NULL;
        vt_vid_set_av_err(device_why, sizeof device_why, "no CUDA device", ret);
    }
}

/* ---- the calling thread's stream-capture mode (see the top of this file) ---- */

/* libcuda's cuThreadExchangeStreamCaptureMode (CUDA >= 10.1), found at run time as FFmpeg
 * finds the rest of libcuda: no CUDA SDK at build time. CU_STREAM_CAPTURE_MODE_RELAXED. */
typedef int (*exchange_fn)(int *mode);
enum { CAPTURE_MODE_RELAXED = 2 };
static pthread_once_t exchange_once = PTHREAD_ONCE_INIT;
static exchange_fn exchange;

static void exchange_find(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL); /* kept until exit */
    if (lib)
        *(void **)&exchange = dlsym(lib, "cuThreadExchangeStreamCaptureMode");
}

void vt_vid_hw_thread(void) {
    static _Thread_local int relaxed;
    if (relaxed)
        return;
    pthread_once(&exchange_once, exchange_find);
    int mode = CAPTURE_MODE_RELAXED;
    /* a driver without the call has no capture to spoil; a failed call (no cuInit yet)
     * is tried again on this thread's next decoder call */
    if (!exchange || exchange(&mode) == 0)
        relaxed = 1;
}

/* ---- the one message ---- */

static atomic_int warned;

void vt_vid_hw_fallback(const char *path, const char *reason) {
    if (vt_video_get_decode() != VT_DECODE_NVDEC || atomic_exchange(&warned, 1))
        return;
    vt_warn("--decode nvdec: %s: %s; decoding on the CPU instead (said once for all files; "
            "--decode cpu or auto is silent, docs/decode.md)\n",
            path, reason);
}

/* ---- one decoder ---- */

/* FFmpeg lists the hardware formats first, then the software ones. A decoder that gave
 * up on the GPU (h->on cleared) gets the first software format, never CUDA again: with
 * a device attached, avcodec_default_get_format would pick the GPU itself. When the
 * hwaccel cannot start (a profile or size NVDEC lacks), FFmpeg calls this again without
 * CUDA in the list and the software format decodes. */
static enum AVPixelFormat get_format(AVCodecContext *ctx, const enum AVPixelFormat *fmts) {
    const vt_hw_dec *h = ctx->opaque;
    for (const enum AVPixelFormat *p = fmts; *p != AV_PIX_FMT_NONE; p++)
        if (*p == AV_PIX_FMT_CUDA && h->on)
            return *p;
    for (const enum AVPixelFormat *p = fmts; *p != AV_PIX_FMT_NONE; p++) {
        const AVPixFmtDescriptor *d = av_pix_fmt_desc_get(*p);
        if (d && !(d->flags & AV_PIX_FMT_FLAG_HWACCEL))
            return *p;
    }
    return AV_PIX_FMT_NONE;
}

static int codec_has_nvdec(const AVCodec *codec) {
    for (int i = 0;; i++) {
        const AVCodecHWConfig *c = avcodec_get_hw_config(codec, i);
        if (!c)
            return 0;
        if ((c->methods & AV_CODEC_HW_CONFIG_METHOD_HW_DEVICE_CTX) &&
            c->device_type == AV_HWDEVICE_TYPE_CUDA && c->pix_fmt == AV_PIX_FMT_CUDA)
            return 1;
    }
}

int vt_vid_hw_usable(const AVCodec *codec, const char *path) {
    if (vt_video_get_decode() == VT_DECODE_CPU)
        return 0;
    vt_vid_hw_thread(); /* before cuCtxCreate too, when the towers' runtime has run cuInit */
    pthread_once(&device_once, device_make);
    if (!device) {
        vt_vid_hw_fallback(path, device_why);
        return 0;
    }
    if (!codec_has_nvdec(codec)) {
        char why[128];
        snprintf(why, sizeof why, "FFmpeg has no NVDEC decoder for the codec '%s'",
                 codec->name);
        vt_vid_hw_fallback(path, why);
        return 0;
    }
    return 1;
}

void vt_vid_hw_attach(vt_hw_dec *h, AVCodecContext *dec) {
    dec->hw_device_ctx = av_buffer_ref(device);
    VT_CHECK_MEM(dec->hw_device_ctx != NULL, "a video's FFmpeg state");
    /* The GPU decodes; CPU frame threads would only add delay and copies of state. */
    dec->thread_count = 1;
    dec->get_format = get_format;
    vt_vid_hw_adopt(h, dec);
    vt_vid_hw_thread(); /* again: the call in usable fails before anyone has run cuInit */
}

void vt_vid_hw_adopt(vt_hw_dec *h, AVCodecContext *dec) {
    vt_vid_dec_tap(h, dec); /* get_format reads h through opaque */
    h->on = 1;
}

int vt_vid_hw_first_frame(vt_hw_dec *h, const AVFrame *f, const char *path) {
    if (!h->on || f->format == AV_PIX_FMT_CUDA)
        return 0;
    char why[320];
    snprintf(why, sizeof why, "NVDEC declined the stream%s%s%s",
             vt_vid_last_msg[0] ? " (FFmpeg: " : "", vt_vid_last_msg,
             vt_vid_last_msg[0] ? ")" : "");
    h->on = 0;
    vt_vid_hw_fallback(path, why);
    return 1;
}

int vt_vid_hw_download(vt_hw_dec *h, AVFrame *f, char *err, size_t errlen) {
    if (f->format != AV_PIX_FMT_CUDA)
        return 0;
    vt_vid_hw_thread();
    if (!h->tmp) {
        h->tmp = av_frame_alloc();
        VT_CHECK_MEM(h->tmp != NULL, "a video's FFmpeg state");
    }
    vt_vid_last_msg[0] = 0;
    int ret = av_hwframe_transfer_data(h->tmp, f, 0);
    if (ret >= 0)
        ret = av_frame_copy_props(h->tmp, f); /* pts, flags, colour matrix and range */
    if (ret < 0) {
        av_frame_unref(h->tmp);
        vt_vid_set_av_err(err, errlen, "copying a decoded frame from the GPU failed", ret);
        return ret;
    }
    av_frame_unref(f);
    av_frame_move_ref(f, h->tmp);
    return 0;
}

void vt_vid_hw_free(vt_hw_dec *h) {
    av_frame_free(&h->tmp);
    h->on = 0;
}
