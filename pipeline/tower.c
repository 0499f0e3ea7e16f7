/*
 * tower.c: the towers of tower.h — persistent threads, one replica each, that turn a
 * host batch into one synchronous data-parallel step equal to one device with the whole
 * batch: slices from the splitter, micro-batches with gradient accumulation, loss
 * gradients scaled by 1/B, one SUM over the gradient arena, the same optimizer update
 * everywhere; BN statistics either averaged by clip count after the step or synced per
 * pass (tower.h says which and why); forward-only evaluation written back in batch order.
 * It also measures each tower (compute time, waiting time) for the auto/speed policies
 * and the progress display, and hosts the emulated-slowdown knob for tests/benchmarks.
 *
 * It must never average gradients, never skip a collective on a tower with no clips,
 * never let replicas diverge (same kind of backend: same bits; mixed kinds: rank 0's
 * parameters are broadcast after every update), and never allocate past a budget: nets
 * are sized for the micro-batch, which the memory plan guarantees fits.
 */
#include "pipeline/tower.h"

#include <math.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "models/common.h"
#include "pipeline/reduce.h"

typedef enum tower_cmd {
    CMD_NONE,
    CMD_INIT,
    CMD_TRAIN,
    CMD_EVAL,
    CMD_SYNC,
    CMD_RUN,
    CMD_QUIT,
} tower_cmd;

typedef struct tower {
    struct vt_towers *T;
    int rank;
    pthread_t th;
    int started;
    vt_device dev;
    vt_backend *be;
    vt_net *net;
    vt_optim *opt;
    int host_mem;            /* backend memory is host memory: use the batch in place */
    /* device staging (non-host backends), sized for `stage_clips` */
    float *x_dev;                       /* (stage_clips, 3, T, H, W) */
    int32_t *label_dev[VT_MAX_HEADS];   /* (stage_clips) */
    float *target_dev[VT_MAX_HEADS];    /* (stage_clips, classes) */
    int stage_clips;
    /* host scratch */
    float *logits;           /* (max_batch, classes) of one head */
    float *loss_clip;        /* (max_batch) */
    int scratch_clips;
    /* this step's job */
    int off, count, chunk, npass;
    /* this step's results */
    double compute, wait, loss, head_loss[VT_MAX_HEADS];
    int64_t correct[VT_MAX_HEADS];
    int passes;
    float grad_norm;
    char err[512];
    int failed;
    /* gradient buckets (tower.h): the helper thread and what the tower tells it */
    pthread_t helper;
    int helper_started;
    pthread_mutex_t hmu;
    pthread_cond_t hcv;
    uint64_t hgen;           /* bumped to start a reduction */
    int hquit, hdone;
    int64_t ready_lo;        /* gradients at offsets >= ready_lo are final */
    int backward_done;       /* buckets_finish was reached */
    int nbuckets, noverlap;  /* this step: buckets, and those started before backward_done */
} tower;

struct vt_towers {
    vt_towers_cfg cfg;
    int n;
    tower tw[VT_MAX_DEVICES];
    vt_reducer *red;
    vt_reducer *red_grad;    /* gradient buckets' own reducer (the helpers call it) */
    int64_t bucket_floats;   /* 0: one call after backward */
    vt_memplan mp;
    int have_mp;
    vt_split_dev sd[VT_MAX_DEVICES];
    vt_plan plan;
    vt_auto aut;
    int speed_planned;
    int mixed;               /* towers on different kinds of backend */
    int64_t step;
    /* command channel */
    pthread_mutex_t mu;
    pthread_cond_t cv_go, cv_done;
    uint64_t gen;
    int done;
    tower_cmd cmd;
    /* command arguments */
    const vt_batch *batch;
    float lr;
    float **probs_out;
    int root;
    void (*run_fn)(void *ctx, vt_net *net, vt_optim *opt);
    void *run_ctx;
};

void vt_towers_cfg_default(vt_towers_cfg *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->policy.kind = VT_SPLIT_EQUAL;
    cfg->batch = 8;
    vt_optim_cfg_default(&cfg->optim, VT_OPT_SGD);
    cfg->seed = 1;
    cfg->speed_warmup = 2;
    cfg->bucket_mb = -1; /* tower.h: 25 MiB (PyTorch DDP's bucket) with a GPU tower */
}

/* ---------------------------------------------------------------- helpers */

static void sleep_s(double s) {
    if (!(s > 0))
        return;
    struct timespec ts;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* ---- gradient buckets (tower.h) ---- */

static void grad_ready_hook(void *ctx, int64_t lo) {
    tower *tw = ctx;
    pthread_mutex_lock(&tw->hmu);
    if (lo < tw->ready_lo) {
        tw->ready_lo = lo;
        pthread_cond_broadcast(&tw->hcv);
    }
    pthread_mutex_unlock(&tw->hmu);
}

/* The helper: per reduction, buckets from the arena's end to its start, each once the
 * tower has made it final. Only this thread calls T->red_grad for this rank. */
static void *helper_main(void *arg) {
    tower *tw = arg;
    vt_towers *T = tw->T;
    uint64_t seen = 0;
    pthread_mutex_lock(&tw->hmu);
    for (;;) {
        while (!tw->hquit && tw->hgen == seen)
            pthread_cond_wait(&tw->hcv, &tw->hmu);
        if (tw->hquit)
            break;
        seen = tw->hgen;
        const int64_t np = vt_net_num_params(tw->net);
        float *g = vt_net_grads(tw->net);
        for (int64_t hi = np; hi > 0;) {
            const int64_t lo = VT_MAX(hi - T->bucket_floats, 0);
            while (tw->ready_lo > lo)
                pthread_cond_wait(&tw->hcv, &tw->hmu);
            tw->nbuckets++;
            tw->noverlap += !tw->backward_done;
            pthread_mutex_unlock(&tw->hmu);
            T->red_grad->i->allreduce_sum(T->red_grad, tw->rank, tw->be, g + lo, hi - lo);
            pthread_mutex_lock(&tw->hmu);
            hi = lo;
        }
        tw->hdone = 1;
        pthread_cond_broadcast(&tw->hcv);
    }
    pthread_mutex_unlock(&tw->hmu);
    return NULL;
}

/* Start a reduction: nothing final yet (the last pass's backward reports it). */
static void buckets_start(tower *tw) {
    pthread_mutex_lock(&tw->hmu);
    tw->ready_lo = vt_net_num_params(tw->net);
    tw->hdone = 0;
    tw->backward_done = 0;
    tw->nbuckets = tw->noverlap = 0;
    tw->hgen++;
    pthread_cond_broadcast(&tw->hcv);
    pthread_mutex_unlock(&tw->hmu);
}

/* Everything is final now (also for a tower that ran no pass); wait for the helper. */
static void buckets_finish(tower *tw) {
    pthread_mutex_lock(&tw->hmu);
    tw->ready_lo = 0;
    tw->backward_done = 1;
    pthread_cond_broadcast(&tw->hcv);
    while (!tw->hdone)
        pthread_cond_wait(&tw->hcv, &tw->hmu);
    pthread_mutex_unlock(&tw->hmu);
}

static void bn_sync_hook(void *ctx, float *buf, int64_t n) {
    tower *tw = ctx;
    vt_reducer *r = tw->T->red;
    r->i->allreduce_sum(r, tw->rank, tw->be, buf, n);
}

static void free_stage(tower *tw) {
    /* an upload may still be writing into these buffers on the copy stream */
    if (tw->be->i->upload_wait)
        tw->be->i->upload_wait(tw->be);
    vt_backend_free_ptr(tw->be, tw->x_dev);
    tw->x_dev = NULL;
    for (int h = 0; h < VT_MAX_HEADS; h++) {
        vt_backend_free_ptr(tw->be, tw->label_dev[h]);
        vt_backend_free_ptr(tw->be, tw->target_dev[h]);
        tw->label_dev[h] = NULL;
        tw->target_dev[h] = NULL;
    }
    tw->stage_clips = 0;
}

/* Device buffers for the input of `clips` clips (non-host backends only). They are part
 * of bytes_per_clip in the memory plan (input clip and targets). */
static void alloc_stage(tower *tw, int clips) {
    const vt_net_cfg *nc = &tw->T->cfg.net;
    free_stage(tw);
    if (tw->host_mem || clips == 0)
        return;
    int64_t cf = (int64_t)3 * nc->clip_t * nc->clip_h * nc->clip_w;
    tw->x_dev = vt_backend_alloc_x(tw->be, (size_t)(cf * clips) * sizeof(float), "input clips");
    for (int h = 0; h < nc->nheads; h++) {
        if (nc->head[h].loss == VT_LOSS_SOFTMAX_CE)
            tw->label_dev[h] = vt_backend_alloc_x(tw->be, (size_t)clips * sizeof(int32_t), "labels");
        else
            tw->target_dev[h] = vt_backend_alloc_x(
                tw->be, (size_t)clips * (size_t)nc->head[h].classes * sizeof(float), "targets");
    }
    tw->stage_clips = clips;
}

static void grow_scratch(tower *tw, int clips) {
    const vt_net_cfg *nc = &tw->T->cfg.net;
    if (clips <= tw->scratch_clips)
        return;
    int kmax = 1;
    for (int h = 0; h < nc->nheads; h++)
        kmax = VT_MAX(kmax, nc->head[h].classes);
    free(tw->logits);
    free(tw->loss_clip);
    tw->logits = vt_malloc((size_t)clips * (size_t)kmax * sizeof(float));
    tw->loss_clip = vt_malloc((size_t)clips * sizeof(float));
    tw->scratch_clips = clips;
}

/* Resize the replica for micro-batches of `mb` clips, keeping parameters, buffers,
 * optimizer state and step count. Frees first so the budget holds at every moment. */
static void rebuild(tower *tw, int mb) {
    vt_towers *T = tw->T;
    vt_backend *be = tw->be;
    int64_t np = vt_net_num_params(tw->net), nb = vt_net_num_buffers(tw->net);
    int64_t ns = vt_optim_state_len(tw->opt), step = vt_optim_step_count(tw->opt);
    float *hp = vt_malloc((size_t)VT_MAX(np, 1) * sizeof(float));
    float *hb = vt_malloc((size_t)VT_MAX(nb, 1) * sizeof(float));
    float *hs = vt_malloc((size_t)VT_MAX(ns, 1) * sizeof(float));
    vt_backend_sync(be);
    be->i->to_host(be, hp, vt_net_params(tw->net), (size_t)np * sizeof(float));
    if (nb)
        be->i->to_host(be, hb, vt_net_buffers(tw->net), (size_t)nb * sizeof(float));
    if (ns)
        be->i->to_host(be, hs, vt_optim_state(tw->opt), (size_t)ns * sizeof(float));
    free_stage(tw);
    vt_optim_free(&tw->opt);
    vt_net_free(&tw->net);
    char err[512];
    tw->net = vt_net_init(&T->cfg.net, be, mb, err, sizeof err);
    VT_CHECK(tw->net, "tower %s: re-sizing the replica for %d clips per pass: %s", tw->dev.name,
             mb, err);
    tw->opt = vt_optim_init(&T->cfg.optim, be, np);
    be->i->to_device(be, vt_net_params(tw->net), hp, (size_t)np * sizeof(float));
    if (nb)
        be->i->to_device(be, vt_net_buffers(tw->net), hb, (size_t)nb * sizeof(float));
    if (ns)
        be->i->to_device(be, vt_optim_state(tw->opt), hs, (size_t)ns * sizeof(float));
    vt_optim_set_step_count(tw->opt, step);
    if (T->cfg.sync_bn)
        vt_net_set_bn_sync(tw->net, bn_sync_hook, tw);
    alloc_stage(tw, mb);
    free(hp);
    free(hb);
    free(hs);
}

/* Make room for passes of `chunk` clips: grow by a quarter beyond the need (so that the
 * auto policy's small moves do not re-size every step), never beyond what fits. */
static void ensure_capacity(tower *tw, int chunk) {
    if (chunk <= vt_net_max_batch(tw->net))
        return;
    int fits = tw->T->sd[tw->rank].max_clips;
    int mb = VT_MIN(fits, chunk + chunk / 4);
    VT_CHECK(mb >= chunk, "tower %s: %d clips per pass but only %d fit", tw->dev.name, chunk, fits);
    rebuild(tw, mb);
}

/* Host to device: an upload on the backend's copy stream when it has one (returns its
 * ticket), else a copy on the compute stream (ticket 0). */
static uint64_t copy_in(tower *tw, void *dst, const void *src, size_t bytes) {
    vt_backend *be = tw->be;
    if (be->i->upload)
        return be->i->upload(be, dst, src, bytes);
    be->i->to_device(be, dst, src, bytes);
    return 0;
}

/* Start moving the inputs of clips [first, first + k) of b into this tower's staging
 * buffers (device backends; host-memory backends read b in place). The copies are
 * ordered after every op issued so far, so they may overwrite inputs that work issued
 * earlier reads. Returns the ticket stage_take joins. */
static uint64_t stage_issue(tower *tw, const vt_batch *b, int first, int k) {
    const vt_net_cfg *nc = &tw->T->cfg.net;
    if (tw->host_mem || k == 0)
        return 0;
    if (k > tw->stage_clips)
        alloc_stage(tw, k);
    const int64_t cf = vt_batch_clip_floats(b);
    uint64_t t = copy_in(tw, tw->x_dev, b->x + cf * first, (size_t)(cf * k) * sizeof(float));
    for (int h = 0; h < nc->nheads; h++) {
        if (b->label[h] && tw->label_dev[h])
            t = copy_in(tw, tw->label_dev[h], b->label[h] + first, (size_t)k * sizeof(int32_t));
        if (b->target[h] && tw->target_dev[h])
            t = copy_in(tw, tw->target_dev[h],
                        b->target[h] + (int64_t)first * nc->head[h].classes,
                        (size_t)k * (size_t)nc->head[h].classes * sizeof(float));
    }
    return t;
}

/* Pointers to the inputs of clips [first, first + k) of b on this tower's backend, after
 * stage_issue(b, first, k) returned `ticket`: ops issued from here on see them. */
static const float *stage_take(tower *tw, const vt_batch *b, int first, int k, uint64_t ticket,
                               vt_targets *tg) {
    const vt_net_cfg *nc = &tw->T->cfg.net;
    memset(tg, 0, sizeof *tg);
    if (tw->host_mem) {
        for (int h = 0; h < nc->nheads; h++) {
            if (b->label[h])
                tg->label[h] = b->label[h] + first;
            if (b->target[h])
                tg->target[h] = b->target[h] + (int64_t)first * nc->head[h].classes;
        }
        return b->x + vt_batch_clip_floats(b) * first;
    }
    if (k == 0)
        return tw->x_dev;
    if (ticket && tw->be->i->upload_join)
        tw->be->i->upload_join(tw->be, ticket); /* uploads complete in issue order */
    for (int h = 0; h < nc->nheads; h++) {
        if (b->label[h] && tw->label_dev[h])
            tg->label[h] = tw->label_dev[h];
        if (b->target[h] && tw->target_dev[h])
            tg->target[h] = tw->target_dev[h];
    }
    return tw->x_dev;
}

/* Every upload from the host batch is done: the caller may hand it back to the loader. */
static void stage_done(tower *tw) {
    if (!tw->host_mem && tw->be->i->upload_wait)
        tw->be->i->upload_wait(tw->be);
}

/* Correct predictions of head h for k clips whose logits are in tw->logits (host). */
static int64_t count_correct(const vt_head_cfg *hc, const float *logits, const vt_batch *b, int h,
                             int first, int k) {
    int64_t right = 0;
    const int K = hc->classes;
    for (int j = 0; j < k; j++) {
        const float *z = logits + (int64_t)j * K;
        if (hc->loss == VT_LOSS_SOFTMAX_CE) {
            if (!b->label[h])
                continue;
            int arg = 0;
            for (int c = 1; c < K; c++)
                if (z[c] > z[arg])
                    arg = c;
            right += arg == b->label[h][first + j];
        } else {
            if (!b->target[h])
                continue;
            const float *y = b->target[h] + (int64_t)(first + j) * K;
            int all = 1;
            for (int c = 0; c < K; c++)
                all &= (z[c] > 0) == (y[c] > 0.5f);
            right += all;
        }
    }
    return right;
}

/* ---------------------------------------------------------------- the commands */

static void do_init(tower *tw) {
    vt_towers *T = tw->T;
    tw->be = vt_backend_init(tw->dev.backend, tw->dev.ordinal, tw->dev.threads, tw->dev.budget);
    if (!tw->be) {
        snprintf(tw->err, sizeof tw->err, "tower %s: backend '%s' is not built into this vidtrain",
                 tw->dev.name, tw->dev.backend);
        tw->failed = 1;
        return;
    }
    tw->host_mem = tw->be->kind == VT_BACKEND_CPU || tw->be->kind == VT_BACKEND_CPU_REF;
    int mb = T->plan.mb[tw->rank];
    char err[400];
    tw->net = vt_net_init(&T->cfg.net, tw->be, mb, err, sizeof err);
    if (!tw->net) {
        snprintf(tw->err, sizeof tw->err, "tower %s: %s", tw->dev.name, err);
        tw->failed = 1;
        return;
    }
    vt_net_init_weights(tw->net, T->cfg.seed);
    tw->opt = vt_optim_init(&T->cfg.optim, tw->be, vt_net_num_params(tw->net));
    if (T->cfg.sync_bn)
        vt_net_set_bn_sync(tw->net, bn_sync_hook, tw);
    alloc_stage(tw, mb);
}

static void do_train(tower *tw) {
    vt_towers *T = tw->T;
    const vt_batch *b = T->batch;
    const vt_net_cfg *nc = &T->cfg.net;
    vt_reducer *red = T->red;
    vt_backend *be = tw->be;
    const int nh = nc->nheads;
    const float scale = 1.0f / (float)b->n;

    ensure_capacity(tw, tw->chunk);
    grow_scratch(tw, VT_MAX(tw->chunk, 1));
    tw->loss = 0;
    memset(tw->head_loss, 0, sizeof tw->head_loss);
    memset(tw->correct, 0, sizeof tw->correct);
    /* Passes: own micro-batches; under sync-BN every tower runs the same number. */
    int npass = T->cfg.sync_bn ? tw->npass : (tw->chunk ? (tw->count + tw->chunk - 1) / tw->chunk : 0);
    tw->passes = npass;

    double t0 = vt_now();
    vt_net_zero_grad(tw->net);
    const int buckets = T->bucket_floats > 0;
    if (buckets)
        buckets_start(tw);
    uint64_t drop_base = vt_hash64(T->cfg.seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)(T->step + 1)));
    /* Pass p's clips and size; pass p + 1's inputs are uploaded while pass p computes:
     * after its forward and loss when the net keeps its own copy of the input (BF16),
     * else after its backward (the first conv's backward reads the staged input). */
#define PASS_FIRST(p) (tw->off + (p) * tw->chunk)
#define PASS_K(p) (tw->chunk ? VT_MAX(0, VT_MIN(tw->chunk, tw->count - (p) * tw->chunk)) : 0)
    const int early = !vt_net_reads_input_in_backward(tw->net);
    uint64_t ticket = npass > 0 ? stage_issue(tw, b, PASS_FIRST(0), PASS_K(0)) : 0;
    for (int p = 0; p < npass; p++) {
        double tp = vt_now();
        int first = PASS_FIRST(p);
        int k = PASS_K(p);
        vt_targets tg;
        const float *x = stage_take(tw, b, first, k, ticket, &tg);
        /* dropout masks by GLOBAL clip position: the same whichever tower runs a clip */
        vt_net_set_dropout_seed(tw->net, drop_base + (uint64_t)first);
        vt_net_forward(tw->net, x, k, 1);
        float hl[VT_MAX_HEADS] = {0};
        vt_net_loss(tw->net, tw->loss_clip, hl, &tg, scale);
        if (early && p + 1 < npass)
            ticket = stage_issue(tw, b, PASS_FIRST(p + 1), PASS_K(p + 1));
        /* the last pass makes the gradients final, layer by layer: the helper reduces
         * each bucket as soon as it is */
        if (buckets && p == npass - 1)
            vt_net_set_grad_ready(tw->net, grad_ready_hook, tw);
        vt_net_backward(tw->net);
        vt_net_set_grad_ready(tw->net, NULL, NULL);
        if (!early && p + 1 < npass)
            ticket = stage_issue(tw, b, PASS_FIRST(p + 1), PASS_K(p + 1));
        for (int j = 0; j < k; j++)
            tw->loss += tw->loss_clip[j];
        for (int h = 0; h < nh && k > 0; h++) {
            tw->head_loss[h] += hl[h];
            be->i->to_host(be, tw->logits, vt_net_logits(tw->net, h),
                           (size_t)k * (size_t)nc->head[h].classes * sizeof(float));
            tw->correct[h] += count_correct(&nc->head[h], tw->logits, b, h, first, k);
        }
        vt_backend_sync(be);
        /* TEST/BENCHMARK KNOB: run K x slower by idling (K-1) x this pass's time. */
        if (tw->dev.slowdown > 1.0 && k > 0)
            sleep_s((tw->dev.slowdown - 1.0) * (vt_now() - tp));
    }
#undef PASS_FIRST
#undef PASS_K
    stage_done(tw);
    double t1 = vt_now();
    tw->compute = t1 - t0;

    /* One SUM over the whole gradient arena (in buckets, mostly done by now, or in one
     * call): towers scaled by 1/B, nobody averages. */
    int64_t np = vt_net_num_params(tw->net);
    if (buckets)
        buckets_finish(tw);
    else
        red->i->allreduce_sum(red, tw->rank, be, vt_net_grads(tw->net), np);
    tw->wait = vt_now() - t1;
    tw->grad_norm = vt_optim_step(tw->opt, vt_net_params(tw->net), vt_net_grads(tw->net), T->lr);

    double t2 = vt_now();
    int64_t nb = vt_net_num_buffers(tw->net);
    if (T->mixed) {
        /* different backend kinds may round an update differently: rank 0's bits win */
        red->i->broadcast(red, tw->rank, be, vt_net_params(tw->net), np, 0);
        if (nb)
            red->i->broadcast(red, tw->rank, be, vt_net_buffers(tw->net), nb, 0);
    } else if (!T->cfg.sync_bn && nb > 0) {
        /* Running statistics: the clip-weighted average over towers (tower.h). */
        float w = (float)tw->count / (float)b->n;
        VT_OP(be, scale, vt_net_buffers(tw->net), w, nb);
        red->i->allreduce_sum(red, tw->rank, be, vt_net_buffers(tw->net), nb);
        float *buf = vt_net_buffers(tw->net);
        for (int i = 0; i < vt_net_num_tensors(tw->net); i++) {
            const vt_tensor_info *ti = vt_net_tensor(tw->net, i);
            if (!ti->is_buffer || !ti->is_int64)
                continue;
            for (int64_t e = 0; e < ti->numel; e++) {
                float v;
                be->i->to_host(be, &v, buf + ti->offset + e, sizeof v);
                v = rintf(v);
                be->i->to_device(be, buf + ti->offset + e, &v, sizeof v);
            }
        }
    }
    tw->wait += vt_now() - t2;
}

/* Host loss of one head for clips with logits z (k, K): what vt_net_loss computes. */
static double host_loss(const vt_head_cfg *hc, const float *z, const vt_batch *b, int h, int first,
                        int j) {
    const int K = hc->classes;
    const float *r = z + (int64_t)j * K;
    if (hc->loss == VT_LOSS_SOFTMAX_CE) {
        if (!b->label[h])
            return 0;
        double m = r[0];
        for (int c = 1; c < K; c++)
            m = r[c] > m ? r[c] : m;
        double s = 0, sumlog = 0;
        for (int c = 0; c < K; c++)
            s += exp((double)r[c] - m);
        double lse = m + log(s);
        for (int c = 0; c < K; c++)
            sumlog += (double)r[c] - lse;
        double eps = hc->smoothing;
        return -((1 - eps) * ((double)r[b->label[h][first + j]] - lse) + eps / K * sumlog);
    }
    if (!b->target[h])
        return 0;
    const float *y = b->target[h] + (int64_t)(first + j) * K;
    double l = 0;
    for (int c = 0; c < K; c++) {
        double x = r[c];
        l += (x > 0 ? x : 0) - x * y[c] + log1p(exp(-fabs(x)));
    }
    return l;
}

static void do_eval(tower *tw) {
    vt_towers *T = tw->T;
    const vt_batch *b = T->batch;
    const vt_net_cfg *nc = &T->cfg.net;
    vt_backend *be = tw->be;
    tw->loss = 0;
    memset(tw->head_loss, 0, sizeof tw->head_loss);
    memset(tw->correct, 0, sizeof tw->correct);
    tw->passes = 0;
    if (tw->count == 0)
        return;
    if (vt_net_max_batch(tw->net) == 0)
        ensure_capacity(tw, VT_MIN(tw->count, T->sd[tw->rank].max_clips));
    int chunk = VT_MIN(tw->count, vt_net_max_batch(tw->net));
    grow_scratch(tw, chunk);
    double t0 = vt_now();
    const int end = tw->off + tw->count;
    uint64_t ticket = stage_issue(tw, b, tw->off, VT_MIN(chunk, tw->count));
    for (int first = tw->off; first < end; first += chunk) {
        int k = VT_MIN(chunk, end - first);
        vt_targets tg;
        const float *x = stage_take(tw, b, first, k, ticket, &tg);
        vt_net_forward(tw->net, x, k, 0);
        /* forward only: the next pass's inputs may replace these once it has run */
        if (first + chunk < end)
            ticket = stage_issue(tw, b, first + chunk, VT_MIN(chunk, end - first - chunk));
        tw->passes++;
        for (int h = 0; h < nc->nheads; h++) {
            const vt_head_cfg *hc = &nc->head[h];
            const int K = hc->classes;
            be->i->to_host(be, tw->logits, vt_net_logits(tw->net, h), (size_t)k * K * sizeof(float));
            tw->correct[h] += count_correct(hc, tw->logits, b, h, first, k);
            for (int j = 0; j < k; j++) {
                double l = host_loss(hc, tw->logits, b, h, first, j);
                tw->head_loss[h] += l;
                tw->loss += hc->weight * l;
            }
            float *out = T->probs_out ? T->probs_out[h] : NULL;
            if (!out)
                continue;
            for (int j = 0; j < k; j++) {
                const float *z = tw->logits + (int64_t)j * K;
                float *o = out + (int64_t)(first + j) * K;
                if (hc->loss == VT_LOSS_SOFTMAX_CE) {
                    double m = z[0], s = 0;
                    for (int c = 1; c < K; c++)
                        m = z[c] > m ? z[c] : m;
                    for (int c = 0; c < K; c++)
                        s += exp((double)z[c] - m);
                    for (int c = 0; c < K; c++)
                        o[c] = (float)(exp((double)z[c] - m) / s);
                } else {
                    for (int c = 0; c < K; c++)
                        o[c] = (float)(1.0 / (1.0 + exp(-(double)z[c])));
                }
            }
        }
    }
    stage_done(tw);
    tw->compute = vt_now() - t0;
}

static void do_sync(tower *tw) {
    vt_towers *T = tw->T;
    vt_reducer *red = T->red;
    int root = T->root;
    red->i->broadcast(red, tw->rank, tw->be, vt_net_params(tw->net), vt_net_num_params(tw->net), root);
    if (vt_net_num_buffers(tw->net))
        red->i->broadcast(red, tw->rank, tw->be, vt_net_buffers(tw->net), vt_net_num_buffers(tw->net),
                          root);
    if (vt_optim_state_len(tw->opt))
        red->i->broadcast(red, tw->rank, tw->be, vt_optim_state(tw->opt), vt_optim_state_len(tw->opt),
                          root);
    /* the step count travels on the host: a float would round it past 2^24 */
    if (tw->rank != root)
        vt_optim_set_step_count(tw->opt, vt_optim_step_count(T->tw[root].opt));
}

static void do_quit(tower *tw) {
    if (tw->be)
        free_stage(tw);
    vt_optim_free(&tw->opt);
    vt_net_free(&tw->net);
    vt_backend_free(&tw->be);
    free(tw->logits);
    free(tw->loss_clip);
    tw->logits = tw->loss_clip = NULL;
}

static void *tower_main(void *arg) {
    tower *tw = arg;
    vt_towers *T = tw->T;
    uint64_t seen = 0;
    for (;;) {
        pthread_mutex_lock(&T->mu);
        while (T->gen == seen)
            pthread_cond_wait(&T->cv_go, &T->mu);
        seen = T->gen;
        tower_cmd cmd = T->cmd;
        pthread_mutex_unlock(&T->mu);
        switch (cmd) {
        case CMD_INIT: do_init(tw); break;
        case CMD_TRAIN: do_train(tw); break;
        case CMD_EVAL: do_eval(tw); break;
        case CMD_SYNC: do_sync(tw); break;
        case CMD_RUN:
            if (tw->rank == T->root)
                T->run_fn(T->run_ctx, tw->net, tw->opt);
            break;
        case CMD_QUIT: do_quit(tw); break;
        case CMD_NONE: break;
        }
        pthread_mutex_lock(&T->mu);
        if (++T->done == T->n)
            pthread_cond_signal(&T->cv_done);
        pthread_mutex_unlock(&T->mu);
        if (cmd == CMD_QUIT)
            return NULL;
    }
}

/* Wake every tower with cmd and wait until all have finished it. */
static void run_cmd(vt_towers *T, tower_cmd cmd) {
    pthread_mutex_lock(&T->mu);
    T->cmd = cmd;
    T->done = 0;
    T->gen++;
    pthread_cond_broadcast(&T->cv_go);
    while (T->done < T->n)
        pthread_cond_wait(&T->cv_done, &T->mu);
    pthread_mutex_unlock(&T->mu);
}

/* ---------------------------------------------------------------- public */

static vt_reducer *make_reducer(const vt_towers_cfg *cfg, int n, char *err, size_t errlen) {
    const char *want = cfg->reducer && *cfg->reducer ? cfg->reducer : "auto";
    int ncuda = 0, distinct = 1;
    int ids[VT_MAX_DEVICES];
    for (int i = 0; i < n; i++)
        if (!strcmp(cfg->devices.dev[i].backend, "cuda")) {
            for (int j = 0; j < ncuda; j++)
                if (ids[j] == cfg->devices.dev[i].ordinal)
                    distinct = 0;
            ids[ncuda++] = cfg->devices.dev[i].ordinal;
        }
    if (!strcmp(want, "auto")) {
        want = "host";
#ifdef VT_HAVE_CUDA
        if (ncuda == n && n > 1) {
            int same = 1;
            for (int j = 1; j < ncuda; j++)
                same &= ids[j] == ids[0];
            /* one tower per GPU: NCCL; all on one GPU: device-local sums; else host */
            want = distinct ? "nccl" : same ? "local" : "host";
        }
#endif
    }
    if (!strcmp(want, "host"))
        return vt_reducer_host_init(n);
#ifdef VT_HAVE_CUDA
    if (!strcmp(want, "nccl")) {
        if (ncuda != n || !distinct) {
            vt_set_err(err, errlen, "reducer nccl: needs one tower per GPU, all towers on GPUs");
            return NULL;
        }
        return vt_reducer_nccl_init(n, ids);
    }
    if (!strcmp(want, "local")) {
        for (int j = 1; j < ncuda; j++)
            if (ids[j] != ids[0] || ncuda != n) {
                vt_set_err(err, errlen, "reducer local: needs every tower on the same GPU");
                return NULL;
            }
        return vt_reducer_local_init(n, ids[0]);
    }
#endif
    (void)distinct;
    vt_set_err(err, errlen, "reducer '%s': not available (host%s)", want,
#ifdef VT_HAVE_CUDA
               ", nccl, local"
#else
               "; nccl and local need CUDA"
#endif
    );
    return NULL;
}

static void fill_split_devs(vt_towers *T) {
    for (int i = 0; i < T->n; i++) {
        const vt_device *d = &T->cfg.devices.dev[i];
        vt_split_dev *s = &T->sd[i];
        memset(s, 0, sizeof *s);
        snprintf(s->name, sizeof s->name, "%s", d->name);
        s->budget = d->budget;
        if (d->budget <= 0) {
            s->max_clips = VT_SPLIT_UNLIMITED;
        } else {
            int m = vt_memplan_max_clips(&T->mp, d->budget);
            s->max_clips = VT_MIN(m, VT_SPLIT_UNLIMITED);
        }
        s->speed = d->speed;
    }
}

vt_towers *vt_towers_init(const vt_towers_cfg *cfg, char *err, size_t errlen) {
    VT_CHECK(cfg->devices.n >= 1 && cfg->devices.n <= VT_MAX_DEVICES, "%d towers", cfg->devices.n);
    VT_CHECK(cfg->batch >= 1, "towers: batch %d", cfg->batch);
    vt_towers *T = vt_calloc(1, sizeof *T);
    T->cfg = *cfg;
    T->n = cfg->devices.n;
    if (T->cfg.speed_warmup <= 0)
        T->cfg.speed_warmup = 2;
    pthread_mutex_init(&T->mu, NULL);
    pthread_cond_init(&T->cv_go, NULL);
    pthread_cond_init(&T->cv_done, NULL);
    for (int i = 0; i < T->n; i++) {
        pthread_mutex_init(&T->tw[i].hmu, NULL);
        pthread_cond_init(&T->tw[i].hcv, NULL);
    }
    if (vt_memplan_build(&T->mp, &cfg->net, vt_optim_state_per_param(&cfg->optim), err, errlen))
        goto fail;
    T->have_mp = 1;
    fill_split_devs(T);
    for (int i = 0; i < T->n; i++) {
        if (T->sd[i].max_clips > 0)
            continue;
        char a[32], b[32], c[32];
        vt_set_err(err, errlen, "tower %s: its budget of %s cannot hold one clip of %s at %dx%dx%d "
                   "(needs %s fixed + %s per clip); raise --mem/--gpu-mem or use a smaller clip",
                   T->sd[i].name, vt_fmt_bytes(a, sizeof a, T->sd[i].budget), cfg->net.model,
                   cfg->net.clip_t, cfg->net.clip_h, cfg->net.clip_w,
                   vt_fmt_bytes(b, sizeof b, T->mp.fixed_bytes),
                   vt_fmt_bytes(c, sizeof c, T->mp.bytes_per_clip));
        goto fail;
    }
    vt_split_policy start = cfg->policy;
    if (start.kind == VT_SPLIT_AUTO)
        start.kind = VT_SPLIT_MEMORY; /* auto starts from memory and measures */
    if (vt_split_plan(&T->plan, &start, cfg->batch, T->n, T->sd, err, errlen))
        goto fail;
    T->plan.kind = cfg->policy.kind;
    vt_auto_init(&T->aut, T->n);
    for (int i = 0; i < T->n; i++) {
        const vt_device *d = &cfg->devices.dev[i];
        if (strcmp(d->backend, cfg->devices.dev[0].backend))
            T->mixed = 1;
        T->tw[i].T = T;
        T->tw[i].rank = i;
        T->tw[i].dev = *d;
    }
    T->red = make_reducer(cfg, T->n, err, errlen);
    if (!T->red)
        goto fail;
    double bucket_mb = cfg->bucket_mb;
    if (bucket_mb < 0) {
        bucket_mb = 0;
        for (int i = 0; i < T->n; i++)
            if (!strcmp(cfg->devices.dev[i].backend, "cuda"))
                bucket_mb = 25;
    }
    if (T->n > 1 && bucket_mb > 0 && !strcmp(T->red->i->name, "host")) {
        T->red_grad = vt_reducer_host_init(T->n);
        T->bucket_floats = VT_MAX((int64_t)(bucket_mb * 1048576.0 / 4.0), 1);
    }
    for (int i = 0; i < T->n; i++) {
        VT_CHECK(pthread_create(&T->tw[i].th, NULL, tower_main, &T->tw[i]) == 0, "pthread_create");
        T->tw[i].started = 1;
        if (T->bucket_floats > 0) {
            VT_CHECK(pthread_create(&T->tw[i].helper, NULL, helper_main, &T->tw[i]) == 0,
                     "pthread_create");
            T->tw[i].helper_started = 1;
        }
    }
    run_cmd(T, CMD_INIT);
    for (int i = 0; i < T->n; i++)
        if (T->tw[i].failed) {
            vt_set_err(err, errlen, "%s", T->tw[i].err);
            goto fail;
        }
    return T;
fail:
    vt_towers_free(&T);
    return NULL;
}

void vt_towers_free(vt_towers **pt) {
    if (!pt || !*pt)
        return;
    vt_towers *T = *pt;
    for (int i = 0; i < T->n; i++) { /* helpers first: they are idle between steps */
        tower *tw = &T->tw[i];
        if (!tw->helper_started)
            continue;
        pthread_mutex_lock(&tw->hmu);
        tw->hquit = 1;
        pthread_cond_broadcast(&tw->hcv);
        pthread_mutex_unlock(&tw->hmu);
        pthread_join(tw->helper, NULL);
    }
    int started = 0;
    for (int i = 0; i < T->n; i++)
        started += T->tw[i].started;
    if (started == T->n && T->n > 0) {
        run_cmd(T, CMD_QUIT);
        for (int i = 0; i < T->n; i++)
            pthread_join(T->tw[i].th, NULL);
    }
    vt_reducer_free(&T->red);
    vt_reducer_free(&T->red_grad);
    for (int i = 0; i < T->n; i++) {
        pthread_mutex_destroy(&T->tw[i].hmu);
        pthread_cond_destroy(&T->tw[i].hcv);
    }
    if (T->have_mp)
        vt_memplan_free(&T->mp);
    pthread_mutex_destroy(&T->mu);
    pthread_cond_destroy(&T->cv_go);
    pthread_cond_destroy(&T->cv_done);
    free(T);
    *pt = NULL;
}

static void *host_hook_alloc(void *ctx, size_t bytes) {
    vt_backend *be = ctx;
    return be->i->host_alloc(be, bytes);
}
static void host_hook_free(void *ctx, void *p) {
    vt_backend *be = ctx;
    be->i->host_free(be, p);
}

int vt_towers_host_hook(vt_towers *T, void *(**alloc)(void *ctx, size_t bytes),
                        void (**free_fn)(void *ctx, void *p), void **ctx) {
    *alloc = NULL;
    *free_fn = NULL;
    *ctx = NULL;
    for (int i = 0; i < T->n; i++) {
        vt_backend *be = T->tw[i].be;
        if (be && be->i->host_alloc && be->i->host_free) {
            *alloc = host_hook_alloc;
            *free_fn = host_hook_free;
            *ctx = be;
            return 1;
        }
    }
    return 0;
}

int vt_towers_count(const vt_towers *t) { return t->n; }
const vt_plan *vt_towers_plan(const vt_towers *t) { return &t->plan; }
const vt_memplan *vt_towers_memplan(const vt_towers *t) { return &t->mp; }
vt_net *vt_towers_net(vt_towers *t, int rank) { return t->tw[rank].net; }
vt_optim *vt_towers_optim(vt_towers *t, int rank) { return t->tw[rank].opt; }
vt_backend *vt_towers_backend(vt_towers *t, int rank) { return t->tw[rank].be; }

void vt_towers_print_plan(const vt_towers *t, FILE *f) {
    char a[32], b[32];
    fprintf(f, "model %s, clip %dx%dx%d, %s: %s fixed per tower + %s per clip (memory plan)\n",
            t->cfg.net.model, t->cfg.net.clip_t, t->cfg.net.clip_h, t->cfg.net.clip_w,
            vt_precision_name(t->cfg.net.precision), vt_fmt_bytes(a, sizeof a, t->mp.fixed_bytes),
            vt_fmt_bytes(b, sizeof b, t->mp.bytes_per_clip));
    vt_device_list_print(&t->cfg.devices, f);
    vt_plan_print(&t->plan, t->sd, f);
    fprintf(f, "  towers: %d, reducer %s, batch norm %s\n", t->n, t->red->i->name,
            t->cfg.sync_bn ? "synced across towers per pass (--sync-bn)"
                           : "per tower; running stats averaged by clip count after each step");
}

void vt_towers_plan_line(const vt_towers *t, char *buf, size_t n) {
    vt_plan_format(&t->plan, t->sd, buf, n);
}

/* Slices of n clips: the plan's when n == B, else the plan's shares rescaled. */
static void slices_for(const vt_towers *T, int n, int *slice) {
    if (n == T->plan.batch) {
        memcpy(slice, T->plan.slice, sizeof(int) * (size_t)T->n);
        return;
    }
    double w[VT_MAX_DEVICES];
    double sum = 0;
    for (int i = 0; i < T->n; i++)
        sum += w[i] = T->plan.slice[i];
    if (!(sum > 0))
        for (int i = 0; i < T->n; i++)
            w[i] = T->sd[i].max_clips > 0;
    memset(slice, 0, sizeof(int) * (size_t)T->n);
    if (n > 0)
        vt_split_round(slice, n, w, T->n);
}

static void check_batch(const vt_towers *T, const vt_batch *b) {
    const vt_net_cfg *nc = &T->cfg.net;
    VT_CHECK(b->t == nc->clip_t && b->h == nc->clip_h && b->w == nc->clip_w,
             "batch clips %dx%dx%d, towers built for %dx%dx%d", b->t, b->h, b->w, nc->clip_t,
             nc->clip_h, nc->clip_w);
    VT_CHECK(b->n >= 0 && b->x != NULL, "batch of %d clips without data", b->n);
}

static void fill_stats(vt_towers *T, const vt_batch *b, vt_step_stats *st, const int *slice,
                       double t0) {
    if (!st)
        return;
    memset(st, 0, sizeof *st);
    st->n = b->n;
    st->ntowers = T->n;
    for (int i = 0; i < T->n; i++) {
        tower *tw = &T->tw[i];
        st->loss += tw->loss;
        for (int h = 0; h < T->cfg.net.nheads; h++) {
            st->head_loss[h] += tw->head_loss[h];
            st->head_correct[h] += tw->correct[h];
        }
        st->slice[i] = slice[i];
        st->passes[i] = tw->passes;
        st->compute_s[i] = tw->compute;
        st->wait_s[i] = tw->wait;
    }
    st->grad_norm = T->tw[0].grad_norm;
    st->buckets = T->bucket_floats > 0 ? T->tw[0].nbuckets : 0;
    st->buckets_overlapped = T->bucket_floats > 0 ? T->tw[0].noverlap : 0;
    st->step_s = vt_now() - t0;
}

void vt_towers_train_step(vt_towers *T, const vt_batch *b, float lr, vt_step_stats *out) {
    check_batch(T, b);
    double t0 = vt_now();
    int slice[VT_MAX_DEVICES];
    if (b->n == 0) {
        if (out) {
            memset(out, 0, sizeof *out);
            out->ntowers = T->n;
        }
        return;
    }
    slices_for(T, b->n, slice);
    int off = 0, npass = 0;
    for (int i = 0; i < T->n; i++) {
        tower *tw = &T->tw[i];
        tw->off = off;
        tw->count = slice[i];
        tw->chunk = slice[i] > 0 ? VT_MIN(slice[i], T->sd[i].max_clips) : 0;
        tw->compute = tw->wait = 0;
        off += slice[i];
        if (tw->chunk)
            npass = VT_MAX(npass, (slice[i] + tw->chunk - 1) / tw->chunk);
    }
    for (int i = 0; i < T->n; i++)
        T->tw[i].npass = npass;
    T->batch = b;
    T->lr = lr;
    run_cmd(T, CMD_TRAIN);
    T->step++;
    fill_stats(T, b, out, slice, t0);

    /* Measure and re-plan (auto: whenever worth > 3%; speed: once, after warm-up). */
    vt_split_kind k = T->cfg.policy.kind;
    int changed = 0;
    if (k == VT_SPLIT_AUTO || (k == VT_SPLIT_SPEED && !T->speed_planned)) {
        int clips[VT_MAX_DEVICES];
        double comp[VT_MAX_DEVICES];
        for (int i = 0; i < T->n; i++) {
            clips[i] = slice[i];
            comp[i] = T->tw[i].compute;
        }
        if (k == VT_SPLIT_AUTO && b->n == T->plan.batch) {
            changed = vt_auto_observe(&T->aut, &T->plan, T->sd, clips, comp);
        } else if (k == VT_SPLIT_SPEED) {
            int known = 1;
            for (int i = 0; i < T->n; i++)
                known &= T->cfg.devices.dev[i].speed > 0;
            vt_plan scratch = T->plan;
            vt_auto_observe(&T->aut, &scratch, T->sd, clips, comp);
            if (known) {
                T->speed_planned = 1;
            } else if (T->aut.steps >= T->aut.warmup + T->cfg.speed_warmup) {
                vt_split_policy pol = {.kind = VT_SPLIT_SPEED};
                char err[256];
                if (vt_split_plan(&scratch, &pol, T->plan.batch, T->n, T->sd, err, sizeof err) == 0) {
                    changed = memcmp(scratch.slice, T->plan.slice, sizeof scratch.slice) != 0;
                    T->plan = scratch;
                }
                T->speed_planned = 1;
            }
        }
    }
    if (changed && T->cfg.verbose) {
        char line[512];
        vt_towers_plan_line(T, line, sizeof line);
        fprintf(stderr, "re-planned after step %lld: %s\n", (long long)T->step, line);
    }
    if (out)
        out->replanned = changed;
}

void vt_towers_eval_step(vt_towers *T, const vt_batch *b, float *probs_out[VT_MAX_HEADS],
                         vt_step_stats *out) {
    check_batch(T, b);
    double t0 = vt_now();
    int slice[VT_MAX_DEVICES];
    if (b->n == 0) {
        if (out) {
            memset(out, 0, sizeof *out);
            out->ntowers = T->n;
        }
        return;
    }
    slices_for(T, b->n, slice);
    int off = 0;
    for (int i = 0; i < T->n; i++) {
        T->tw[i].off = off;
        T->tw[i].count = slice[i];
        T->tw[i].wait = 0;
        T->tw[i].compute = 0;
        off += slice[i];
    }
    T->batch = b;
    T->probs_out = probs_out;
    run_cmd(T, CMD_EVAL);
    T->probs_out = NULL;
    fill_stats(T, b, out, slice, t0);
}

int vt_towers_replan(vt_towers *T, const vt_split_policy *pol, char *err, size_t errlen) {
    vt_plan p;
    vt_split_policy use = *pol;
    if (use.kind == VT_SPLIT_AUTO) {
        int known = 0;
        for (int i = 0; i < T->n; i++)
            known += T->sd[i].speed > 0;
        if (!known)
            use.kind = VT_SPLIT_MEMORY;
    }
    if (vt_split_plan(&p, &use, T->plan.batch, T->n, T->sd, err, errlen))
        return -1;
    p.kind = pol->kind;
    T->plan = p;
    T->cfg.policy = *pol;
    T->speed_planned = pol->kind != VT_SPLIT_SPEED;
    return 0;
}

void vt_towers_run_on(vt_towers *T, int rank, void (*fn)(void *ctx, vt_net *net, vt_optim *opt),
                      void *ctx) {
    VT_CHECK(rank >= 0 && rank < T->n, "rank %d of %d", rank, T->n);
    T->root = rank;
    T->run_fn = fn;
    T->run_ctx = ctx;
    run_cmd(T, CMD_RUN);
}

void vt_towers_sync_from(vt_towers *T, int root) {
    VT_CHECK(root >= 0 && root < T->n, "root %d of %d", root, T->n);
    T->root = root;
    run_cmd(T, CMD_SYNC);
}
