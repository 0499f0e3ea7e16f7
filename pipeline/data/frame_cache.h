/*
 * frame_cache.h: decoded frames kept in memory across epochs, shared by the loader's
 * workers, so that a small dataset is decoded once instead of once per epoch.
 *
 * What is kept: a reference to each clean frame a worker's decoder produced (wanted or
 * passed on the way; see vt_video_set_sink), in the decoder's own pixel format (YUV 4:2:0
 * is 1.5 bytes a pixel), by (dataset video, index position), with the video's info. A
 * clip whose frames are all kept is served from them — no open, no seek, no decode —
 * through the same swscale conversion, so its bytes equal a decode's and batches do not
 * depend on what is cached. Frames are kept until the cache is freed; once `cap` bytes
 * are held, no more are added (with random clip positions every frame is as likely as
 * any other to be wanted again, so evicting would only trade one miss for another).
 * Thread-safe.
 */
#ifndef VT_FRAME_CACHE_H
#define VT_FRAME_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "pipeline/data/video/video.h"

typedef struct vt_frame_cache vt_frame_cache;

typedef struct vt_frame_cache_stats {
    int64_t cap;     /* bytes allowed */
    int64_t bytes;   /* bytes held (frame buffers) */
    int64_t frames;  /* frames held */
    int64_t hits;    /* clips served from the cache */
    int64_t misses;  /* clips that had to decode */
    int full;        /* a frame was turned away for want of room */
} vt_frame_cache_stats;

/* A cache for videos 0..nvideos-1 (dataset indices) holding up to cap bytes. */
vt_frame_cache *vt_frame_cache_new(int64_t nvideos, int64_t cap);
void vt_frame_cache_free(vt_frame_cache **c);

/* Route v's clean frames (video `id`) into c; records v's info. */
void vt_frame_cache_attach(vt_frame_cache *c, int64_t id, vt_video *v);

/* The info of video id, when a handle of it was attached: 1, else 0. */
int vt_frame_cache_info(vt_frame_cache *c, int64_t id, vt_video_info *info);

/* vt_video_read_clip from kept frames: 1 when every frame of the clip is kept (out
 * written, same bytes), 0 when one is not (out untouched: decode), < 0 on a conversion
 * error (err set). sc: the caller's scaler. */
int vt_frame_cache_read_clip(vt_frame_cache *c, int64_t id, vt_scaler *sc, uint8_t *out,
                             int64_t start, int t, int stride, int short_side,
                             vt_pad_policy pad, char *err, size_t errlen);

void vt_frame_cache_get_stats(vt_frame_cache *c, vt_frame_cache_stats *st);

#endif
