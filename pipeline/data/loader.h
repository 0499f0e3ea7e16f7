/*
 * loader.h: the prefetching loader — decode worker threads fill batches of clips ahead
 * of the training loop, through a bounded queue with a fixed memory footprint.
 *
 * Promises: (1) batch b of an epoch holds samples [b*B, (b+1)*B) of the epoch order, in
 * that order, whatever the thread timing; every clip of a sample comes from (seed, epoch,
 * sample index) alone, so two runs with the same seed give bitwise-identical batches.
 * (2) memory is (queue + workers) batch buffers allocated once (through a host_alloc hook
 * when given: pinned CUDA memory) plus per-worker decode scratch that only grows to the
 * largest clip seen, plus a few open videos per worker, plus the frame cache when asked
 * for (bounded by its cap), plus what opening videos learned (process-wide, 64 MiB at
 * most: vt_video_set_open_cache). (3) it never hangs and never
 * aborts on data: a clip that fails to decode is left out (the batch has fewer clips, no
 * padding duplicates), its video is reported once via vt_warn with FFmpeg's reason,
 * counted, and excluded from later epochs. (4) vt_loader_free returns promptly even
 * while workers are mid-batch. (5) a batch buffer is refilled only after the consumer
 * gave it back: implicitly at the next vt_loader_next, or — for a batch it vt_loader_keep-s,
 * e.g. while asynchronous device copies still read it — at vt_loader_release. (6) with a
 * part function (several processes, each decoding only its towers' share of every batch)
 * a worker decodes only the positions part gives for the batch it claims, and every
 * batch is delivered, even one with no clip here, so that all processes step together.
 * This file must never know about networks, devices or processes: the part function is
 * the caller's.
 */
#ifndef VT_LOADER_H
#define VT_LOADER_H

#include <stddef.h>
#include <stdint.h>

#include "pipeline/data/batch.h"
#include "pipeline/data/dataset/dataset.h"
#include "pipeline/data/frame_cache.h"
#include "pipeline/data/sample.h"

typedef enum vt_loader_mode {
    VT_LOADER_TRAIN, /* shuffled; random start, scale jitter, crop, flip */
    VT_LOADER_EVAL,  /* in order; K uniform clips x ncrops per video, fixed scale */
} vt_loader_mode;

typedef struct vt_loader_cfg {
    vt_loader_mode mode;
    int batch;             /* clips per batch (B) */
    int workers;           /* decode threads; 0 = cores */
    int queue;             /* prefetched batches (default 2 when 0) */
    uint64_t seed;
    int64_t epoch;         /* first epoch (later ones: vt_loader_start_epoch) */
    int64_t start_batch;   /* resume inside the first epoch at this batch (data cursor) */
    int clips_per_video;   /* train: clips drawn per video per epoch; eval: K temporal
                              clips (default 1) */
    const int32_t *video_clips; /* train: (ds->nvideos) clips drawn per epoch from each
                              dataset video instead of clips_per_video for all
                              (--clips-per-video auto: vt_loader_auto_clips); draw k of
                              n comes from stratum k of the video (vt_sample_stratum).
                              NULL: clips_per_video each. Copied */
    int repeat_aug;        /* train: K clips from each sample of the epoch order, one
                              decode: consecutive samples K i .. K i + K - 1 of the epoch,
                              same frames and scale, each its own crop, flip and colour
                              (vt_sample_repeat_params); every video K times an epoch.
                              0 or 1: off */
    vt_clip_cfg clip;
    const int32_t *indices; /* (nindices) dataset videos to use (a split); NULL = every
                              labelled video; copied */
    int nindices;
    int balance;           /* train: the epoch order class-balanced over head 0 (--balance
                              sampler; balance.h vt_balance_order) instead of shuffled */
    int decode_threads;    /* FFmpeg threads per open video (default 1) */
    int cache;             /* open videos kept per worker (LRU, default 4) */
    int64_t frame_cache;   /* bytes of decoded frames kept across epochs, shared by the
                              workers (frame_cache.h); 0: none (the default) */
    vt_frame_cache *frames; /* instead: another loader's frame cache over the SAME dataset
                              (vt_loader_frame_cache), borrowed: it must outlive this
                              loader; NULL: none */
    int no_marks;          /* a side pass over another loader's dataset: a clip that fails
                              is left out WITHOUT marking its video bad in the dataset, so
                              the other loader's epochs stay as they were (0: mark) */
    /* Several processes: part(part_ctx, epoch, batch, npos, depth, &lo, &hi) gives the
     * positions [lo, hi) of batch `batch`'s npos samples that this process decodes (depth:
     * how many batches this loader can hold ahead, queue + workers). The batch then holds
     * those clips (bad ones left out) in rows 0..n-1 with npos/part_lo/part_hi set, and
     * is delivered even with n = 0. NULL: whole batches. Called from worker threads. */
    void (*part)(void *ctx, int64_t epoch, int64_t batch, int npos, int depth, int *lo, int *hi);
    void *part_ctx;
    /* Batch buffer allocation hook (e.g. cudaHostAlloc); NULL = malloc/free. */
    void *(*host_alloc)(void *ctx, size_t bytes);
    void (*host_free)(void *ctx, void *p);
    void *host_ctx;
} vt_loader_cfg;

/* A train config with the defaults of vt_clip_cfg_default, batch 8, queue 2. */
void vt_loader_cfg_default(vt_loader_cfg *cfg);

typedef struct vt_loader_stats {
    int64_t clips;         /* clips delivered (all epochs) */
    int64_t bad_clips;     /* sampled clips left out because their decode failed */
    int64_t filled_frames; /* frames of the clips delivered that the stream never gave,
                              filled with the nearest decoded frame (vt_video_read_clip);
                              each clip and crop counts its own */
    int64_t decode_errors; /* decode errors the reads of those clips met (packets rejected,
                              pictures repaired: vt_video_stats), counted as filled_frames */
    int64_t batches;       /* batches delivered */
    int64_t bad_videos;    /* videos marked bad by this loader (each reported once) */
    double wait_s;         /* time the consumer spent blocked in vt_loader_next */
    int64_t buffer_bytes;  /* batch buffers: (queue + workers) * batch_bytes, fixed */
    int64_t batch_bytes;   /* one batch buffer */
    int64_t scratch_bytes; /* decode scratch over all workers (grows to the largest clip),
                              RandAugment's crops included */
    int64_t decodes;       /* clips whose frames were read (decoded or from the frame
                              cache): the rest reused the previous clip's (3 crops,
                              --repeat-aug) */
    vt_frame_cache_stats frames; /* zero without a frame cache */
} vt_loader_stats;

typedef struct vt_loader vt_loader;
/* The loader's frame cache (NULL: none), for another loader over the same dataset. */
vt_frame_cache *vt_loader_frame_cache(vt_loader *l);

/* Starts the workers on cfg->epoch from cfg->start_batch. ds must outlive the loader
 * (its bad-video marks are shared with other loaders). Returns NULL with err set for a
 * bad config (crop larger than the short side, batch < 1, unknown head...). */
vt_loader *vt_loader_init(vt_dataset *ds, const vt_loader_cfg *cfg, char *err, size_t errlen);
/* Stops the workers (they drop what they were decoding) and frees everything. */
void vt_loader_free(vt_loader **l);

/* Next batch of the epoch, or NULL at its end. Valid until the next call (or
 * start_epoch/free) unless kept. Empty batches (every clip bad) are skipped (not with a
 * part function), so batch->index may jump; a data cursor is batch->index + 1. Aborts (a
 * programmer error) when it would wait forever: every buffer kept by the consumer, none
 * left to fill. */
const vt_batch *vt_loader_next(vt_loader *l);
/* Keep b — the batch the last vt_loader_next returned — valid and unchanged past later
 * vt_loader_next and vt_loader_start_epoch calls, until vt_loader_release(l, b). The
 * consumer may keep up to queue + workers - 1 batches at once (the rest must circulate).
 * For consumers whose reads of b outlive the call that started them (a pinned batch
 * copied to GPUs asynchronously: release once the copies are done). */
void vt_loader_keep(vt_loader *l, const vt_batch *b);
/* Give a kept batch back: its buffer may be refilled from now on. */
void vt_loader_release(vt_loader *l, const vt_batch *b);
/* Abandon the current epoch and start `epoch` at `start_batch` (cheap: no allocation).
 * Videos found bad so far are left out of its order. */
void vt_loader_start_epoch(vt_loader *l, int64_t epoch, int64_t start_batch);

/* Samples and batches of the current epoch. */
int64_t vt_loader_num_samples(const vt_loader *l);
int64_t vt_loader_num_batches(const vt_loader *l);
void vt_loader_get_stats(vt_loader *l, vt_loader_stats *out);
/* The samples each dataset video gives an epoch under cfg (malloc'd, ds->nvideos):
 * training, its video_clips entry or clips_per_video; evaluation, K clips x crops. */
int32_t *vt_loader_clip_counts(const vt_dataset *ds, const vt_loader_cfg *cfg);
/* --clips-per-video auto: out[v] = vt_sample_auto_clips(the sample's duration, every)
 * for every dataset video v (a segment's duration for a segment), for
 * vt_loader_cfg.video_clips; returns the sum over indices[0..n) (n < 0: every video). */
int64_t vt_loader_auto_clips(int32_t *out /* (ds->nvideos) */, const vt_dataset *ds,
                             double every, const int32_t *indices, int n);

/* Bytes of one batch buffer for this config and dataset (x, labels, targets, ids). */
int64_t vt_loader_batch_bytes(const vt_dataset *ds, const vt_loader_cfg *cfg);

#endif
