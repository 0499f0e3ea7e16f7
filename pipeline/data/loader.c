/*
 * loader.c: worker threads decode whole batches into a fixed ring of batch buffers; the
 * consumer takes them strictly in batch order.
 *
 * Scheme (PyTorch DataLoader's, with C's control over memory): batch numbers are handed
 * out in increasing order to whichever worker is free and holds a free buffer; a worker
 * fills its buffer with samples [b*B, (b+1)*B) of the epoch order, each clip's randomness
 * coming from vt_sample_key(seed, epoch, sample index); the consumer waits for the buffer
 * holding batch next_deliver. Because batches are claimed in order, the one the consumer
 * waits for is always either ready or being filled, so the ring cannot deadlock. Workers
 * look at a generation counter between clips, so start_epoch and free never wait longer
 * than one clip's decode. It must never allocate per batch, never block a worker on a
 * bad file, and never let thread timing change what a batch contains: within an epoch a
 * clip is skipped without trying only when its video failed to OPEN (a property of the
 * file); videos that failed a READ are attempted until the next epoch excludes them.
 */
#include "base/thread.h"
#include "pipeline/data/loader.h"

#include <string.h>
#include <unistd.h>

#include "base/common.h"
#include "pipeline/data/loader_impl.h"

void vt_loader_cfg_default(vt_loader_cfg *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->mode = VT_LOADER_TRAIN;
    cfg->batch = 8;
    cfg->queue = 2;
    cfg->clips_per_video = 1;
    cfg->decode_threads = 1;
    cfg->cache = 4;
    vt_clip_cfg_default(&cfg->clip);
}

static void *default_alloc(void *ctx, size_t bytes) {
    (void)ctx;
    return vt_malloc(bytes);
}
static void default_free(void *ctx, void *p) {
    (void)ctx;
    free(p);
}

static int64_t align64(int64_t n) { return (n + 63) & ~(int64_t)63; }

int64_t vt_loader_batch_bytes(const vt_dataset *ds, const vt_loader_cfg *cfg) {
    int64_t cap = cfg->batch, crop = cfg->clip.crop;
    int64_t bytes = align64(cap * 3 * cfg->clip.t * crop * crop * (int64_t)sizeof(float));
    for (int h = 0; h < ds->nheads; h++)
        bytes += ds->heads[h].loss == VT_LOSS_BCE
                     ? align64(cap * ds->heads[h].nclasses * (int64_t)sizeof(float))
                     : align64(cap * (int64_t)sizeof(int32_t));
    bytes += 2 * align64(cap * (int64_t)sizeof(int32_t)); /* video, clip */
    bytes += align64(cap * (int64_t)sizeof(vt_clip_params)); /* where */
    return bytes;
}

/* Carve one buffer into the batch's arrays (same order as vt_loader_batch_bytes). */
static void slot_init(vt_loader *l, slot *s) {
    const vt_loader_cfg *c = &l->cfg;
    s->mem = c->host_alloc(c->host_ctx, (size_t)l->batch_bytes);
    if (!s->mem)
        vt_out_of_memory((size_t)l->batch_bytes, "a batch buffer of the loader");
    memset(s->mem, 0, (size_t)l->batch_bytes);
    char *p = s->mem;
    vt_batch *b = &s->b;
    memset(b, 0, sizeof *b);
    b->capacity = c->batch;
    b->t = c->clip.t;
    b->h = b->w = c->clip.crop;
    b->nheads = l->ds->nheads;
    b->x = (float *)p;
    p += align64(c->batch * l->clip_floats * (int64_t)sizeof(float));
    for (int h = 0; h < b->nheads; h++) {
        const vt_dataset_head *hd = &l->ds->heads[h];
        b->head_classes[h] = hd->nclasses;
        b->head_loss[h] = hd->loss;
        if (hd->loss == VT_LOSS_BCE) {
            b->target[h] = (float *)p;
            p += align64((int64_t)c->batch * hd->nclasses * (int64_t)sizeof(float));
        } else {
            b->label[h] = (int32_t *)p;
            p += align64((int64_t)c->batch * (int64_t)sizeof(int32_t));
        }
    }
    b->video = (int32_t *)p;
    p += align64((int64_t)c->batch * (int64_t)sizeof(int32_t));
    b->clip = (int32_t *)p;
    p += align64((int64_t)c->batch * (int64_t)sizeof(int32_t));
    b->where = (vt_clip_params *)p;
    p += align64((int64_t)c->batch * (int64_t)sizeof(vt_clip_params));
    VT_CHECK(p - (char *)s->mem == l->batch_bytes, "batch layout");
    b->owner = l;
    s->state = SLOT_FREE;
}

/* Whether the workers fill the frame cache before their first batch: training in one
 * process (under mpirun each decodes only its part of every batch). */
static int warms_first(const vt_loader *l) {
    return l->frames && l->cfg.mode == VT_LOADER_TRAIN && !l->cfg.part;
}

static void *worker_main(void *arg) {
    worker *w = arg;
    vt_loader *l = w->l;
    if (warms_first(l)) {
        vt_loader_warm_cache(w);
        pthread_mutex_lock(&l->lock);
        if (--l->warming == 0)
            pthread_cond_broadcast(&l->cv_work);
        while (l->warming > 0 && !atomic_load(&l->stop))
            pthread_cond_wait(&l->cv_work, &l->lock);
        pthread_mutex_unlock(&l->lock);
    }
    pthread_mutex_lock(&l->lock);
    for (;;) {
        int si = -1;
        while (!atomic_load(&l->stop)) {
            if (!l->pausing && l->next_assign < l->nbatches)
                for (int k = 0; k < l->nslots && si < 0; k++)
                    if (l->slots[k].state == SLOT_FREE)
                        si = k;
            if (si >= 0)
                break;
            pthread_cond_wait(&l->cv_work, &l->lock);
        }
        if (atomic_load(&l->stop))
            break;
        slot *s = &l->slots[si];
        int64_t b = l->next_assign++, epoch = l->epoch;
        int gen = atomic_load(&l->gen);
        s->state = SLOT_FILLING;
        l->busy++;
        pthread_mutex_unlock(&l->lock);

        s->b.n = 0;
        s->b.index = b;
        s->b.epoch = epoch;
        s->nbad = 0;
        w->filled = 0;
        w->errors = 0;
        int64_t i0 = b * l->cfg.batch, i1 = VT_MIN(i0 + l->cfg.batch, l->nsamples);
        int npos = (int)(i1 - i0), lo = 0, hi = npos;
        if (l->cfg.part) {
            l->cfg.part(l->cfg.part_ctx, epoch, b, npos, l->nslots, &lo, &hi);
            VT_CHECK(0 <= lo && lo <= hi && hi <= npos, "part [%d, %d) of %d samples", lo, hi, npos);
        }
        s->b.npos = npos;
        s->b.part_lo = lo;
        s->b.part_hi = hi;
        int aborted = 0;
        for (int64_t i = i0 + lo; i < i0 + hi; i++) {
            if (atomic_load(&l->gen) != gen || atomic_load(&l->stop)) {
                aborted = 1;
                break;
            }
            if (vt_loader_fill_clip(w, &s->b, s->b.n, i))
                s->b.n++;
            else
                s->nbad++;
        }
        s->nfilled = w->filled;
        s->nerrors = w->errors;

        pthread_mutex_lock(&l->lock);
        l->busy--;
        aborted |= atomic_load(&l->gen) != gen;
        s->state = aborted ? SLOT_FREE : SLOT_READY;
        if (aborted)
            pthread_cond_broadcast(&l->cv_work);
        else
            pthread_cond_broadcast(&l->cv_ready);
        pthread_cond_broadcast(&l->cv_idle);
    }
    pthread_mutex_unlock(&l->lock);
    return NULL;
}

/* The epoch's samples and their order: in training, of the videos not bad now (one that
 * failed leaves later epochs, docs/design.md §3.6); in an evaluation, of every video it
 * was given, so that each pass scores the same videos: a validation video with one clip
 * that does not decode was dropped from every later validation, whose figures (and the
 * best checkpoint chosen by them) then compared other sets of videos. Its clips that fail
 * are left out and counted each pass, the same ones every time. Called with no worker
 * busy. */
static void build_order(vt_loader *l) {
    const vt_loader_cfg *c = &l->cfg;
    int64_t n = 0;
    for (int i = 0; i < l->nindices; i++) {
        int v = l->indices[i];
        if (c->mode == VT_LOADER_TRAIN && vt_dataset_bad(l->ds, v) != VT_BAD_NONE)
            continue;
        for (int k = 0; k < l->per_video[v]; k++) {
            l->base[n].video = v;
            l->base[n].clip = k;
            n++;
        }
    }
    l->nsamples = n * c->repeat_aug; /* the order below is of the n; fill_clip repeats */
    l->nbatches = (l->nsamples + c->batch - 1) / c->batch;
    if (c->mode == VT_LOADER_TRAIN) {
        if (l->bal) /* base's video field, a sample being two int32s */
            vt_balancer_order(l->bal, l->perm, &l->base->video, 2, n, c->seed, l->epoch);
        else
            vt_sample_shuffle(l->perm, n, c->seed, l->epoch);
        for (int64_t i = 0; i < n; i++)
            l->order[i] = l->base[l->perm[i]];
    } else {
        memcpy(l->order, l->base, (size_t)n * sizeof *l->order);
    }
}

vt_loader *vt_loader_init(vt_dataset *ds, const vt_loader_cfg *cfg, char *err, size_t errlen) {
    vt_loader_cfg c = *cfg;
    const vt_clip_cfg *cc = &c.clip;
    if (c.workers <= 0)
        c.workers = (int)VT_MAX(sysconf(_SC_NPROCESSORS_ONLN), 1);
    if (c.queue <= 0)
        c.queue = 2;
    if (c.clips_per_video <= 0)
        c.clips_per_video = 1;
    c.repeat_aug = c.mode == VT_LOADER_TRAIN ? VT_MAX(c.repeat_aug, 1) : 1;
    if (c.decode_threads <= 0)
        c.decode_threads = 1;
    if (c.cache <= 0)
        c.cache = 4;
    if (!c.host_alloc || !c.host_free) {
        c.host_alloc = default_alloc;
        c.host_free = default_free;
        c.host_ctx = NULL;
    }
    int min_side = c.mode == VT_LOADER_TRAIN ? cc->jitter_min : cc->short_side;
    if (c.batch < 1 || cc->t < 1 || cc->stride < 1 || cc->crop < 1) {
        vt_set_err(err, errlen, "batch %d, clip %dx%d stride %d: all must be >= 1", c.batch,
                   cc->t, cc->crop, cc->stride);
        return NULL;
    }
    if (min_side < cc->crop || (c.mode == VT_LOADER_TRAIN && cc->jitter_max < cc->jitter_min)) {
        vt_set_err(err, errlen, "crop %d needs a short side >= %d (got %s %d..%d)", cc->crop,
                   cc->crop, c.mode == VT_LOADER_TRAIN ? "jitter" : "short side", min_side,
                   c.mode == VT_LOADER_TRAIN ? cc->jitter_max : cc->short_side);
        return NULL;
    }
    if (c.mode == VT_LOADER_EVAL && cc->ncrops != 1 && cc->ncrops != 3 && cc->ncrops != 0) {
        vt_set_err(err, errlen, "ncrops %d: 1 or 3", cc->ncrops);
        return NULL;
    }
    if (ds->nheads < 1) {
        vt_set_err(err, errlen, "the dataset has no label heads");
        return NULL;
    }

    vt_loader *l = vt_calloc(1, sizeof *l);
    l->ds = ds;
    if (c.frames) {
        l->frames = c.frames;
        l->frames_borrowed = 1;
    } else if (c.frame_cache > 0) {
        l->frames = vt_frame_cache_new(ds->nvideos, c.frame_cache);
    }
    l->indices = vt_malloc((size_t)(ds->nvideos ? ds->nvideos : 1) * sizeof *l->indices);
    if (c.indices) {
        for (int i = 0; i < c.nindices; i++) {
            int v = c.indices[i];
            if (v < 0 || v >= ds->nvideos || !ds->videos[v].labeled) {
                vt_set_err(err, errlen, "video index %d is %s", v,
                           v < 0 || v >= ds->nvideos ? "out of range" : "unlabelled");
                free(l->indices);
                free(l);
                return NULL;
            }
            if (l->nindices < ds->nvideos)
                l->indices[l->nindices++] = v;
        }
    } else {
        for (int i = 0; i < ds->nvideos; i++)
            if (ds->videos[i].labeled)
                l->indices[l->nindices++] = i;
    }
    c.indices = NULL; /* copied */
    l->cfg = c;
    l->clip_floats = (int64_t)3 * cc->t * cc->crop * cc->crop;
    l->batch_bytes = vt_loader_batch_bytes(ds, &c);
    l->per_video = vt_loader_clip_counts(ds, &c);
    l->cfg.video_clips = c.video_clips && c.mode == VT_LOADER_TRAIN ? l->per_video : NULL;
    l->cap_samples = 0;
    for (int i = 0; i < l->nindices; i++)
        l->cap_samples += l->per_video[l->indices[i]];
    size_t ns = (size_t)VT_MAX(l->cap_samples, 1);
    l->base = vt_malloc(ns * sizeof *l->base);
    l->order = vt_malloc(ns * sizeof *l->order);
    l->perm = vt_malloc(ns * sizeof *l->perm);
    if (c.balance && c.mode == VT_LOADER_TRAIN) /* head 0 is softmax: the caller checks */
        l->bal = vt_balancer_new(ds, 0, l->cap_samples);

    pthread_mutex_init(&l->lock, NULL);
    pthread_cond_init(&l->cv_work, NULL);
    pthread_cond_init(&l->cv_ready, NULL);
    pthread_cond_init(&l->cv_idle, NULL);
    atomic_init(&l->gen, 0);
    atomic_init(&l->stop, 0);
    l->held = -1;
    l->nslots = c.queue + c.workers;
    l->slots = vt_calloc((size_t)l->nslots, sizeof *l->slots);
    for (int i = 0; i < l->nslots; i++)
        slot_init(l, &l->slots[i]);
    l->stats.batch_bytes = l->batch_bytes;
    l->stats.buffer_bytes = l->batch_bytes * l->nslots;

    l->epoch = c.epoch;
    build_order(l);
    l->next_assign = l->next_deliver = VT_MAX(c.start_batch, 0);

    l->nworkers = c.workers;
    l->warming = warms_first(l) ? c.workers : 0;
    l->workers = vt_calloc((size_t)l->nworkers, sizeof *l->workers);
    for (int i = 0; i < l->nworkers; i++) {
        worker *w = &l->workers[i];
        w->l = l;
        w->memo_video = -1;
        w->scaler = vt_scaler_new();
        w->cache = vt_calloc((size_t)c.cache, sizeof *w->cache);
        for (int k = 0; k < c.cache; k++)
            w->cache[k].video = -1;
    }
    for (int i = 0; i < l->nworkers; i++)
        vt_thread_start(&l->workers[i].tid, worker_main, &l->workers[i], "the loader's workers");
    return l;
}

void vt_loader_free(vt_loader **pl) {
    if (!pl || !*pl)
        return;
    vt_loader *l = *pl;
    pthread_mutex_lock(&l->lock);
    atomic_store(&l->stop, 1);
    atomic_fetch_add(&l->gen, 1);
    pthread_cond_broadcast(&l->cv_work);
    pthread_mutex_unlock(&l->lock);
    for (int i = 0; i < l->nworkers; i++) {
        worker *w = &l->workers[i];
        pthread_join(w->tid, NULL);
        for (int k = 0; k < l->cfg.cache; k++)
            vt_video_close(&w->cache[k].v);
        free(w->cache);
        free(w->scratch);
        free(w->ra_buf);
        vt_scaler_free(&w->scaler);
    }
    vt_video_decoder_pool_drain(); /* the decoders its videos left kept (video.h) */
    if (!l->frames_borrowed)
        vt_frame_cache_free(&l->frames);
    free(l->workers);
    for (int i = 0; i < l->nslots; i++)
        l->cfg.host_free(l->cfg.host_ctx, l->slots[i].mem);
    free(l->slots);
    free(l->base);
    free(l->order);
    free(l->perm);
    vt_balancer_free(&l->bal);
    free(l->indices);
    free(l->per_video);
    pthread_cond_destroy(&l->cv_work);
    pthread_cond_destroy(&l->cv_ready);
    pthread_cond_destroy(&l->cv_idle);
    pthread_mutex_destroy(&l->lock);
    free(l);
    *pl = NULL;
}

const vt_batch *vt_loader_next(vt_loader *l) {
    pthread_mutex_lock(&l->lock);
    if (l->held >= 0) {
        l->slots[l->held].state = SLOT_FREE;
        l->held = -1;
        pthread_cond_broadcast(&l->cv_work);
    }
    const vt_batch *out = NULL;
    double t0 = 0;
    while (l->next_deliver < l->nbatches) {
        int si = -1, nfree = 0;
        for (int k = 0; k < l->nslots; k++) {
            if (l->slots[k].state == SLOT_READY && l->slots[k].b.index == l->next_deliver)
                si = k;
            nfree += l->slots[k].state == SLOT_FREE;
        }
        if (si < 0) {
            /* The batch we wait for is not claimed yet, and no worker can claim it: every
             * buffer is kept by the consumer (or holds a later batch, impossible while
             * batches are claimed in order). Waiting would never end. */
            VT_CHECK(l->next_assign > l->next_deliver || nfree > 0,
                     "vt_loader_next: all %d batch buffers are kept by the consumer; "
                     "vt_loader_release one before asking for the next batch", l->nslots);
            if (t0 == 0)
                t0 = vt_now();
            pthread_cond_wait(&l->cv_ready, &l->lock);
            continue;
        }
        slot *s = &l->slots[si];
        l->next_deliver++;
        l->stats.bad_clips += s->nbad;
        l->stats.filled_frames += s->nfilled;
        l->stats.decode_errors += s->nerrors;
        if (s->b.n == 0 && !l->cfg.part) { /* every clip bad: nothing to hand out */
            s->state = SLOT_FREE;
            pthread_cond_broadcast(&l->cv_work);
            continue;
        }
        s->state = SLOT_HELD;
        l->held = si;
        l->stats.clips += s->b.n;
        l->stats.batches++;
        out = &s->b;
        break;
    }
    if (t0 != 0)
        l->stats.wait_s += vt_now() - t0;
    pthread_mutex_unlock(&l->lock);
    return out;
}

void vt_loader_start_epoch(vt_loader *l, int64_t epoch, int64_t start_batch) {
    pthread_mutex_lock(&l->lock);
    atomic_fetch_add(&l->gen, 1);
    l->pausing = 1;
    while (l->busy > 0)
        pthread_cond_wait(&l->cv_idle, &l->lock);
    l->pausing = 0;
    for (int k = 0; k < l->nslots; k++)
        if (l->slots[k].state != SLOT_KEPT) /* the consumer's until it releases them */
            l->slots[k].state = SLOT_FREE;
    l->held = -1;
    l->epoch = epoch;
    build_order(l);
    l->next_assign = l->next_deliver = VT_MAX(start_batch, 0);
    pthread_cond_broadcast(&l->cv_work);
    pthread_mutex_unlock(&l->lock);
}

/* The slot behind a batch this loader handed out. */
static int slot_of(const vt_loader *l, const vt_batch *b) {
    for (int k = 0; k < l->nslots; k++)
        if (&l->slots[k].b == b)
            return k;
    VT_DIE("batch %p was not handed out by this loader", (const void *)b);
}

void vt_loader_keep(vt_loader *l, const vt_batch *b) {
    pthread_mutex_lock(&l->lock);
    int k = slot_of(l, b);
    VT_CHECK(k == l->held && l->slots[k].state == SLOT_HELD,
             "vt_loader_keep: batch %lld is not the one the last vt_loader_next returned",
             (long long)b->index);
    l->slots[k].state = SLOT_KEPT;
    l->held = -1;
    pthread_mutex_unlock(&l->lock);
}

void vt_loader_release(vt_loader *l, const vt_batch *b) {
    pthread_mutex_lock(&l->lock);
    int k = slot_of(l, b);
    VT_CHECK(l->slots[k].state == SLOT_KEPT, "vt_loader_release: batch %lld is not kept",
             (long long)b->index);
    l->slots[k].state = SLOT_FREE;
    pthread_cond_broadcast(&l->cv_work);
    pthread_mutex_unlock(&l->lock);
}

vt_frame_cache *vt_loader_frame_cache(vt_loader *l) { return l->frames; }
int64_t vt_loader_num_samples(const vt_loader *l) { return l->nsamples; }
int64_t vt_loader_num_batches(const vt_loader *l) { return l->nbatches; }

void vt_loader_get_stats(vt_loader *l, vt_loader_stats *out) {
    pthread_mutex_lock(&l->lock);
    *out = l->stats;
    pthread_mutex_unlock(&l->lock);
    out->decodes = atomic_load(&l->decodes);
    if (l->frames)
        vt_frame_cache_get_stats(l->frames, &out->frames);
}
