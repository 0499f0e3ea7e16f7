/*
 * loader_impl.h: the loader's own types (loader.c runs the ring of batch buffers and the
 * workers, loader_fill.c fills one clip of a batch), shared by those two files only. The
 * scheme and its rules are loader.c's comment.
 */
#ifndef VT_LOADER_IMPL_H
#define VT_LOADER_IMPL_H

#include <pthread.h>
#include <stdatomic.h>

#include "pipeline/data/balance.h"
#include "pipeline/data/frame_cache.h"
#include "pipeline/data/loader.h"

/* HELD: handed out by vt_loader_next, given back by the next call; KEPT: handed out and
 * kept (vt_loader_keep), given back only by vt_loader_release. */
enum { SLOT_FREE, SLOT_FILLING, SLOT_READY, SLOT_HELD, SLOT_KEPT };

typedef struct sample {
    int32_t video; /* dataset index */
    int32_t clip;  /* train: draw within the video; eval: k * ncrops + crop */
} sample;

typedef struct slot {
    vt_batch b;
    void *mem;        /* the one allocation behind every array of b */
    int state;
    int64_t nbad;     /* clips of this batch left out */
    int64_t nfilled;  /* frames its reads filled in (vt_loader_stats.filled_frames) */
    int64_t nerrors;  /* decode errors its reads met (vt_loader_stats.decode_errors) */
} slot;

typedef struct cached {
    int video;        /* -1: empty */
    vt_video *v;
    uint64_t used;    /* LRU tick */
} cached;

typedef struct worker {
    struct vt_loader *l;
    pthread_t tid;
    uint8_t *scratch; /* (t, h, w, 3) of the largest clip decoded so far */
    vt_scaler *scaler; /* for clips served from the frame cache */
    size_t scratch_cap;
    uint8_t *ra_buf; size_t ra_cap; /* RandAugment's uint8 crop (vt_clip_transform_aug) */
    cached *cache;    /* (cfg.cache) */
    uint64_t tick;
    /* The last decode, reused when the next sample is the same clip at another crop
     * (eval with 3 crops). */
    int memo_video, memo_ss, memo_stride;
    int64_t memo_start;
    int64_t filled;   /* frames filled in over the samples of the slot it fills: each sample
                         counts its clip's, so 3 crops count a clip 3 times whether their
                         decode was shared or not (the count is the data's, not the split's) */
    int64_t errors;   /* decode errors met, counted as `filled` is */
    int64_t clip_filled; /* the clip in scratch: frames its reads filled in */
    int64_t clip_errors; /* ... and the decode errors its reads met (vt_video_stats) */
} worker;

struct vt_loader {
    vt_dataset *ds;
    vt_loader_cfg cfg;
    int32_t *indices;           /* (nindices) */
    int32_t *per_video;         /* (ds->nvideos) samples each video gives an epoch */
    int nindices;
    int64_t clip_floats;        /* 3 * t * crop * crop */
    int64_t batch_bytes;

    sample *base;               /* (cap_samples) this epoch's samples before shuffling */
    sample *order;              /* (cap_samples) the epoch order */
    int32_t *perm;              /* (cap_samples) */
    vt_balancer *bal;           /* cfg.balance: the balanced order's classes and scratch */
    int64_t cap_samples, nsamples, nbatches;
    int64_t epoch, next_assign, next_deliver;

    slot *slots;                /* (nslots) = queue + workers */
    int nslots;
    int held;                   /* slot the consumer holds, -1 none */
    worker *workers;
    int nworkers, busy;
    int pausing;                /* start_epoch is rebuilding the order: claim nothing */
    atomic_int gen;             /* bumped by start_epoch/free: in-flight work is dropped */
    atomic_int stop;

    pthread_mutex_t lock;
    pthread_cond_t cv_work;     /* workers: a batch and a buffer may be available */
    pthread_cond_t cv_ready;    /* consumer: a batch was filled */
    pthread_cond_t cv_idle;     /* start_epoch: a worker went idle */
    vt_loader_stats stats;
    vt_frame_cache *frames;     /* decoded frames kept across epochs, or NULL */
    int frames_borrowed;        /* frames is cfg.frames, another loader's */
    atomic_llong decodes;       /* vt_loader_stats.decodes */
    atomic_int warm_next;       /* next of indices to decode into it before the first batch */
    int warming;                /* workers still filling it (under lock): none claims a
                                   batch before all are done, so no clip decodes twice */
};

/* loader_fill.c. Sample i of the epoch order into row n of b (its clip decoded or read
 * from the frame cache, augmented, normalised; its targets): 1, or 0 when the clip is
 * left out (its video reported bad). */
int vt_loader_fill_clip(worker *w, vt_batch *b, int n, int64_t i);
/* Training with a frame cache: the workers' pass that fills it before their first batch. */
void vt_loader_warm_cache(worker *w);

#endif
