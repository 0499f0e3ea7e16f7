/*
 * frame_cache.c: decoded frames kept across epochs (frame_cache.h says what and why).
 * One mutex guards the tables; it is held only to look up or store references, never
 * while a frame is converted (references keep a frame alive after the lock is dropped,
 * and the pixels are never written once decoded).
 */
#include "pipeline/data/frame_cache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <libavutil/frame.h>

#include "base/common.h"

typedef struct entry {
    vt_video_info info; /* valid when f is set */
    AVFrame **f;   /* (info.nframes) kept frames, NULL where none; NULL: no handle attached */
} entry;

typedef struct sink_ctx {
    struct vt_frame_cache *c;
    int64_t id;
} sink_ctx;

struct vt_frame_cache {
    pthread_mutex_t lock;
    entry *e;        /* (n) */
    sink_ctx *sinks; /* (n) what each video's handles pass to their sink */
    int64_t n;
    vt_frame_cache_stats st;
};

vt_frame_cache *vt_frame_cache_new(int64_t nvideos, int64_t cap) {
    vt_frame_cache *c = vt_calloc(1, sizeof *c);
    pthread_mutex_init(&c->lock, NULL);
    c->n = nvideos;
    c->e = vt_calloc((size_t)VT_MAX(nvideos, 1), sizeof *c->e);
    c->sinks = vt_calloc((size_t)VT_MAX(nvideos, 1), sizeof *c->sinks);
    for (int64_t i = 0; i < nvideos; i++)
        c->sinks[i] = (sink_ctx){.c = c, .id = i};
    c->st.cap = cap;
    return c;
}

void vt_frame_cache_free(vt_frame_cache **pc) {
    if (!pc || !*pc)
        return;
    vt_frame_cache *c = *pc;
    for (int64_t i = 0; i < c->n; i++) {
        entry *e = &c->e[i];
        for (int64_t k = 0; e->f && k < e->info.nframes; k++)
            av_frame_free(&e->f[k]);
        free(e->f);
    }
    free(c->e);
    free(c->sinks);
    pthread_mutex_destroy(&c->lock);
    free(c);
    *pc = NULL;
}

/* Bytes behind a frame: its buffers, padding included (what it costs to keep). */
static int64_t frame_bytes(const AVFrame *f) {
    int64_t b = 0;
    for (int i = 0; i < AV_NUM_DATA_POINTERS; i++)
        if (f->buf[i])
            b += (int64_t)f->buf[i]->size;
    for (int i = 0; i < f->nb_extended_buf; i++)
        b += (int64_t)f->extended_buf[i]->size;
    return b;
}

static void sink(void *ctx, int64_t pos, const AVFrame *f) {
    sink_ctx *s = ctx;
    vt_frame_cache *c = s->c;
    /* Sized and the ref taken outside the lock. A frame decoded again (by a clip that
     * missed, or a video that two handles decode) is often kept already: look first. */
    pthread_mutex_lock(&c->lock);
    entry *e = &c->e[s->id];
    int want = e->f && pos < e->info.nframes && !e->f[pos] && !c->st.full;
    pthread_mutex_unlock(&c->lock);
    if (!want || !f->buf[0])
        return;
    int64_t bytes = frame_bytes(f);
    AVFrame *ref = av_frame_clone(f);
    VT_CHECK_MEM(ref != NULL, "keeping a decoded frame");
    pthread_mutex_lock(&c->lock);
    if (!e->f[pos] && c->st.bytes + bytes <= c->st.cap) {
        e->f[pos] = ref;
        ref = NULL;
        c->st.bytes += bytes;
        c->st.frames++;
    } else if (!e->f[pos]) {
        c->st.full = 1;
    }
    pthread_mutex_unlock(&c->lock);
    av_frame_free(&ref);
}

void vt_frame_cache_attach(vt_frame_cache *c, int64_t id, vt_video *v) {
    VT_CHECK(id >= 0 && id < c->n, "frame cache: video %lld of %lld", (long long)id,
             (long long)c->n);
    const vt_video_info *in = vt_video_get_info(v);
    pthread_mutex_lock(&c->lock);
    entry *e = &c->e[id];
    if (!e->f && in->nframes > 0) {
        e->info = *in;
        e->f = vt_calloc((size_t)in->nframes, sizeof *e->f);
    }
    int same = e->f && e->info.nframes == in->nframes;
    pthread_mutex_unlock(&c->lock);
    /* A file that changed between two opens (its frame count) keeps its first frames
     * and adds none. */
    if (same)
        vt_video_set_sink(v, sink, &c->sinks[id]);
}

int vt_frame_cache_info(vt_frame_cache *c, int64_t id, vt_video_info *info) {
    if (id < 0 || id >= c->n)
        return 0;
    pthread_mutex_lock(&c->lock);
    int has = c->e[id].f != NULL;
    if (has)
        *info = c->e[id].info;
    pthread_mutex_unlock(&c->lock);
    return has;
}

#define VT_CACHE_CLIP_MAX 1024 /* longer clips are read from the file */

int vt_frame_cache_read_clip(vt_frame_cache *c, int64_t id, vt_scaler *sc, uint8_t *out,
                             int64_t start, int t, int stride, int short_side,
                             vt_pad_policy pad, char *err, size_t errlen) {
    if (id < 0 || id >= c->n || t <= 0 || t > VT_CACHE_CLIP_MAX || start < 0 || stride <= 0)
        return 0;
    int64_t pos[VT_CACHE_CLIP_MAX];
    AVFrame *f[VT_CACHE_CLIP_MAX];
    pthread_mutex_lock(&c->lock);
    entry *e = &c->e[id];
    int all = e->f != NULL;
    vt_video_info in = e->info;
    if (all) {
        vt_clip_positions(in.nframes, start, t, stride, pad, pos);
        for (int i = 0; i < t && all; i++)
            all = e->f[pos[i]] != NULL;
    }
    if (all) {
        for (int i = 0; i < t; i++) {
            f[i] = av_frame_clone(e->f[pos[i]]);
            if (!f[i])
                vt_out_of_memory(sizeof(AVFrame), "a cached frame's reference");
        }
        c->st.hits++;
    } else {
        c->st.misses++;
    }
    pthread_mutex_unlock(&c->lock);
    if (!all)
        return 0;
    int ow, oh, ret = 1;
    vt_video_info_scaled_size(&in, short_side, &ow, &oh);
    size_t fbytes = (size_t)ow * oh * 3;
    for (int i = 0; i < t && ret > 0; i++) {
        int dup = -1; /* a looped or repeated frame: the bytes of its first slot */
        for (int j = 0; j < i && dup < 0; j++)
            if (pos[j] == pos[i])
                dup = j;
        if (dup >= 0) {
            memcpy(out + (size_t)i * fbytes, out + (size_t)dup * fbytes, fbytes);
        } else {
            int r = vt_scaler_convert(sc, f[i], in.rotation, out + (size_t)i * fbytes, ow, oh,
                                      err, errlen);
            if (r < 0)
                ret = r;
        }
    }
    for (int i = 0; i < t; i++)
        av_frame_free(&f[i]);
    return ret;
}

void vt_frame_cache_get_stats(vt_frame_cache *c, vt_frame_cache_stats *st) {
    pthread_mutex_lock(&c->lock);
    *st = c->st;
    pthread_mutex_unlock(&c->lock);
}
