/*
 * batch.h: what the loader hands to the towers — a batch of normalised clips in host
 * memory with their targets and where each clip came from. The towers slice it by clip
 * ranges; the merged outputs are written back in this order.
 */
#ifndef VT_BATCH_H
#define VT_BATCH_H

#include <stdint.h>

#include "models/net_types.h"
#include "pipeline/data/sample.h"

typedef struct vt_batch {
    int n;                  /* clips in this batch (<= capacity) */
    int capacity;
    int t, h, w;            /* clip shape; 3 channels */
    int nheads;
    int head_classes[VT_MAX_HEADS];
    vt_loss_kind head_loss[VT_MAX_HEADS];
    float *x;               /* (capacity, 3, t, h, w) normalised; host (pinned if hooked) */
    int32_t *label[VT_MAX_HEADS];  /* (capacity) class id, softmax heads */
    float *target[VT_MAX_HEADS];   /* (capacity, classes) {0,1}, BCE heads */
    int32_t *video;         /* (capacity) dataset video index */
    int32_t *clip;          /* (capacity) clip index within the video (eval) */
    vt_clip_params *where;  /* (capacity) the frames and crop each clip was cut from: start
                               frame, short side, crop origin, flip (tests, --dump) */
    int64_t index;          /* batch number within the epoch */
    int64_t epoch;          /* the epoch it belongs to */
    /* Several processes (loader.h part): the batch is samples [0, npos) of the epoch's
     * batch, and this process decoded positions [part_lo, part_hi) of them — its towers'
     * share — into rows 0..n-1 (a clip that failed to decode is left out). A whole batch
     * has npos = its samples, part = [0, npos). Zeros from a hand-made batch. */
    int npos, part_lo, part_hi;
    void *owner;            /* the loader's bookkeeping */
} vt_batch;

/* Floats per clip of x. */
static inline int64_t vt_batch_clip_floats(const vt_batch *b) {
    return (int64_t)3 * b->t * b->h * b->w;
}

#endif
