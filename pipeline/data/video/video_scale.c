/*
 * video_scale.c: decoded frames to RGB24 (video.h vt_scaler): libswscale with the source's
 * colour matrix and range, a small cache of contexts per scaler, and the display rotation
 * applied to the RGB pixels. Used by clip reads and by frame caches alike, so both give
 * the very same bytes.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <libavutil/frame.h>
#include <libavutil/mem.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>

#include "base/common.h"
#include "pipeline/data/video/video.h"
#include "pipeline/data/video/video_impl.h"

/* SWS_BILINEAR: swscale widens the bilinear tent with the downscale factor, so it
 * averages like an area filter when shrinking and interpolates when enlarging, and it is
 * what `ffmpeg -vf scale=...:flags=bilinear` uses, which the tests compare against.
 * SWS_BICUBIC (prep's, vt_video_set_scaling) keeps the detail below the new
 * Nyquist limit that a tent softens. A copy also gets swscale's exact colour path
 * (SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT): its default 4:2:0 -> RGB24 path truncates,
 * about 1 level darker than the exact BT.601 conversion on average (-0.9 to -1.5 per
 * channel on the motion preset), which a copy would carry into its pixels on top of the
 * loader's own reading (docs/prep.md, Colours). The copy's frames are small, so it costs
 * little; the loader keeps the fast path that `ffmpeg` (and PyAV) use by default, so
 * training, eval and predict all read the same way. */
static int sws_flags(const vt_scaler *sc) {
    return sc->filter == VT_SCALE_BICUBIC ? SWS_BICUBIC | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT
                                          : SWS_BILINEAR;
}

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
                                            AV_PIX_FMT_RGB24, sws_flags(sc), NULL, NULL, NULL);
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

void vt_vid_scaler_clear(vt_scaler *s) {
    for (int i = 0; i < VT_SWS_CACHE; i++)
        sws_freeContext(s->sws[i].ctx);
    av_freep(&s->tmp);
    av_frame_free(&s->planar);
    memset(s, 0, sizeof *s);
}

void vt_video_set_scaling(vt_video *v, vt_scale_filter f, int even_sides) {
    vt_scaler *s = &v->sc;
    v->even_sides = even_sides != 0;
    if (s->filter == (int)f)
        return;
    for (int i = 0; i < VT_SWS_CACHE; i++) /* contexts made with the other filter */
        sws_freeContext(s->sws[i].ctx);
    memset(s->sws, 0, sizeof s->sws);
    s->filter = (int)f;
}

void vt_scaler_free(vt_scaler **ps) {
    if (!ps || !*ps)
        return;
    vt_vid_scaler_clear(*ps);
    free(*ps);
    *ps = NULL;
}

/* ---- GPU frames: NVDEC hands over 4:2:0 semi-planar (chroma interleaved), libavcodec's
 * decoders planar. swscale reads the two by different routines — at the native size,
 * where yuv420p has its own converter, they differ by whole chroma edges — so a GPU
 * frame is first rearranged, losslessly, into the planar layout a CPU decoder gives for
 * the same samples; after that it scales to the very bytes a CPU frame does. ---- */

/* The planar twin of a semi-planar format (*shift: P010 keeps its 10 bits high), or
 * AV_PIX_FMT_NONE for a format that is left as it is. */
static enum AVPixelFormat planar_twin(int fmt, int *shift) {
    *shift = 0;
    if (fmt == AV_PIX_FMT_NV12)
        return AV_PIX_FMT_YUV420P;
    if (fmt == AV_PIX_FMT_P010LE) {
        *shift = 6;
        return AV_PIX_FMT_YUV420P10LE;
    }
    return AV_PIX_FMT_NONE;
}

/* One row of n samples (1 or 2 bytes each, shifted right) from every `step`-th sample of
 * src into dst. */
static void copy_samples(uint8_t *dst, const uint8_t *src, int n, int step, int wide,
                         int shift) {
    if (!wide) {
        for (int x = 0; x < n; x++)
            dst[x] = src[x * step];
        return;
    }
    const uint16_t *s = (const uint16_t *)src;
    uint16_t *d = (uint16_t *)dst;
    for (int x = 0; x < n; x++)
        d[x] = (uint16_t)(s[x * step] >> shift);
}

/* f, or f rearranged into sc->planar; NULL with err set when that cannot be allocated. */
static const AVFrame *as_planar(vt_scaler *sc, const AVFrame *f, char *err, size_t errlen) {
    int shift;
    enum AVPixelFormat to = planar_twin(f->format, &shift);
    if (to == AV_PIX_FMT_NONE)
        return f;
    if (!sc->planar) {
        sc->planar = av_frame_alloc();
        VT_CHECK_MEM(sc->planar != NULL, "a video's FFmpeg state");
    }
    AVFrame *p = sc->planar;
    if (p->format != to || p->width != f->width || p->height != f->height) {
        av_frame_unref(p);
        p->format = to;
        p->width = f->width;
        p->height = f->height;
        if (av_frame_get_buffer(p, 0) < 0) {
            vt_set_err(err, errlen, "out of memory for a %dx%d frame", f->width, f->height);
            return NULL;
        }
    }
    p->color_range = f->color_range;
    p->colorspace = f->colorspace;
    int wide = shift != 0, cw = (f->width + 1) / 2, ch = (f->height + 1) / 2;
    for (int y = 0; y < f->height; y++)
        copy_samples(p->data[0] + (size_t)y * p->linesize[0],
                     f->data[0] + (size_t)y * f->linesize[0], f->width, 1, wide, shift);
    for (int y = 0; y < ch; y++) {
        const uint8_t *uv = f->data[1] + (size_t)y * f->linesize[1];
        copy_samples(p->data[1] + (size_t)y * p->linesize[1], uv, cw, 2, wide, shift);
        copy_samples(p->data[2] + (size_t)y * p->linesize[2], uv + (wide ? 2 : 1), cw, 2, wide,
                     shift);
    }
    return p;
}

int vt_scaler_convert(vt_scaler *sc, const AVFrame *f, int rot, uint8_t *out, int ow, int oh,
                      char *err, size_t errlen) {
    int sw = (rot == 90 || rot == 270) ? oh : ow; /* scaled size in coded orientation */
    int sh = (rot == 90 || rot == 270) ? ow : oh;
    if (f->width <= 0 || f->height <= 0) {
        vt_set_err(err, errlen, "decoder returned an empty frame");
        return AVERROR_INVALIDDATA;
    }
    f = as_planar(sc, f, err, errlen);
    if (!f)
        return AVERROR(ENOMEM);
    struct SwsContext *ctx = get_sws(sc, f, sw, sh, err, errlen);
    if (!ctx)
        return AVERROR(EINVAL);
    /* Aligned scratch rows: swscale's SIMD paths want them, and the ffmpeg command's
     * filter frames are aligned too, so both take the same code path. Room for the width
     * rounded up to 16 pixels: the x86 unscaled YUV -> RGB converters write whole blocks
     * of 8 and, when a row has no room for the last block, leave its pixels unwritten
     * (FFmpeg 5.1: widths 17-21 mod 64, e.g. 340 or 148 at native size, kept the last
     * frame's or uninitialised bytes; the ffmpeg command's frames have the room). */
    int stride = FFALIGN(FFALIGN(sw, 16) * 3, 64);
    size_t need = (size_t)stride * (size_t)sh + 64;
    if (need > sc->tmp_size) {
        av_freep(&sc->tmp);
        sc->tmp = av_malloc(need);
        if (!sc->tmp)
            vt_out_of_memory((size_t)sw * (size_t)sh * 3, "a scaled frame");
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
