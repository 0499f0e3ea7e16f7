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
 * Across processes (tower.h, "Several processes") the same step runs on every rank with
 * a global plan: device lists are exchanged at init, clip counts before each step (holes
 * from failed decodes), figures after it, and plan changes go through a schedule keyed
 * by (epoch, batch) so that loaders decoding ahead keep using the plan they started with.
 *
 * The numbers of the model — losses, probabilities, the merge of BN buffers — are the
 * net's (models/net.h), made by the backend's ops; a tower only moves them and counts.
 *
 * It must never average gradients, never skip a collective on a tower with no clips,
 * never let replicas diverge (same kind of backend: same bits; mixed kinds: rank 0's
 * parameters are broadcast after every update), never let two ranks disagree on a plan
 * or a batch, never allocate past a budget (nets are sized for the micro-batch, which
 * the memory plan guarantees fits), and never do the model's math or read a net's layout
 * itself.
 */
#include "pipeline/parallel/tower.h"

#include <pthread.h>
#include <string.h>
#include <time.h>

#include "models/common.h"
#include "models/registry.h"
#include "pipeline/parallel/mpi.h"
#include "pipeline/parallel/reduce.h"

typedef enum tower_cmd {
    CMD_NONE,
    CMD_INIT,
    CMD_TRAIN,
    CMD_EVAL,
    CMD_SYNC,
    CMD_BNSTAT,
    CMD_RUN,
    CMD_QUIT,
} tower_cmd;

typedef struct tower {
    struct vt_towers *T;
    int rank;                /* index in this process */
    int g;                   /* index among the towers of every process (plan, sd) */
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
    /* this step's job: clips [off, off + count) of the batch's rows, which sit at
     * [goff, goff + count) of the whole step's clips (dropout draws by those) */
    int off, goff, count, chunk, npass;
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

/* A plan change across processes: in force from training batch (epoch, batch) on. */
#define SCHED_MAX 32
typedef struct sched_entry {
    int64_t epoch, batch;
    vt_plan plan;
} sched_entry;

struct vt_towers {
    vt_towers_cfg cfg;
    int n;                   /* towers of this process */
    tower tw[VT_MAX_DEVICES];
    vt_reducer *red;
    vt_reducer *red_grad;    /* gradient buckets' own reducer (the helpers call it) */
    int64_t bucket_floats;   /* 0: one call after backward */
    vt_memplan mp;
    int have_mp;
    /* Every process's towers (one process: the same as cfg.devices), in rank order. */
    int ng;
    vt_device_list gdev;
    vt_slice_dev sd[VT_MAX_DEVICES];
    vt_plan plan;            /* the newest plan (the one a re-plan was decided on) */
    /* ---- several processes (pipeline/parallel/mpi.h) ---- */
    int world, me;           /* processes, this one's rank */
    int g0;                  /* global index of this process's first tower */
    int rank_first[VT_MAX_DEVICES + 1]; /* global index of each rank's first tower */
    pthread_mutex_t sched_mu;/* guards plan and the schedule (loader workers read them) */
    vt_plan base;            /* plan in force before the first schedule entry */
    sched_entry sched[SCHED_MAX];
    int nsched;
    int depth;               /* the deepest prefetch a loader of this process reported */
    int lag;                 /* the deepest over every process (exchanged each step) */
    int64_t at_epoch, at_batch; /* the last training batch stepped */
    int check_replicas;      /* VT_CHECK_REPLICAS: compare replicas across ranks each step */
    int64_t nclips;          /* this step's clips over every process: the B of 1/B */
    int64_t sync_step;       /* optimizer step count that CMD_SYNC installs */
    int64_t bn_seen;         /* clips in the running statistics of a precise-BN pass */
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
    cfg->policy.kind = VT_SLICE_EQUAL;
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

/* The towers' sum of one buffer (sync-BN's statistics, the running statistics after a
 * step): the net's allreduce hook. */
static void allreduce_hook(void *ctx, float *buf, int64_t n) {
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
        vt_net_set_bn_sync(tw->net, allreduce_hook, tw);
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
    int fits = tw->T->sd[tw->g].max_clips;
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
    int mb = T->plan.mb[tw->g];
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
        vt_net_set_bn_sync(tw->net, allreduce_hook, tw);
    alloc_stage(tw, mb);
}

static void do_train(tower *tw) {
    vt_towers *T = tw->T;
    const vt_batch *b = T->batch;
    const vt_net_cfg *nc = &T->cfg.net;
    vt_reducer *red = T->red;
    vt_backend *be = tw->be;
    const int nh = nc->nheads;
    const float scale = 1.0f / (float)T->nclips; /* B: every clip of the step, all ranks */

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
        /* dropout masks by GLOBAL clip position: the same whichever tower (or process)
         * runs a clip */
        vt_net_set_dropout_seed(tw->net, drop_base + (uint64_t)(tw->goff + p * tw->chunk));
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
        vt_net_merge_buffers(tw->net, (float)tw->count / (float)T->nclips, allreduce_hook, tw);
    }
    tw->wait += vt_now() - t2;
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
        ensure_capacity(tw, VT_MIN(tw->count, T->sd[tw->g].max_clips));
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
        /* probabilities and losses by the net, before the next pass's inputs (its labels
         * too) may replace these */
        float *prob[VT_MAX_HEADS] = {0};
        float hl[VT_MAX_HEADS] = {0};
        for (int h = 0; h < nc->nheads && T->probs_out; h++)
            if (T->probs_out[h])
                prob[h] = T->probs_out[h] + (int64_t)first * nc->head[h].classes;
        vt_net_outputs(tw->net, prob, tw->loss_clip, hl, &tg);
        if (first + chunk < end)
            ticket = stage_issue(tw, b, first + chunk, VT_MIN(chunk, end - first - chunk));
        tw->passes++;
        for (int j = 0; j < k; j++)
            tw->loss += tw->loss_clip[j];
        for (int h = 0; h < nc->nheads; h++) {
            const vt_head_cfg *hc = &nc->head[h];
            tw->head_loss[h] += hl[h];
            be->i->to_host(be, tw->logits, vt_net_logits(tw->net, h),
                           (size_t)k * hc->classes * sizeof(float));
            tw->correct[h] += count_correct(hc, tw->logits, b, h, first, k);
        }
    }
    stage_done(tw);
    tw->compute = vt_now() - t0;
}

/* A precise-statistics pass over one batch (vt_towers_bn_stats): replica T->root of
 * process 0 alone forwards every clip in training mode, in micro-batches of what its
 * device fits, each forward of k clips weighted k / (clips so far) in the running
 * statistics, so that they end as the clip-weighted average of the passes' batch
 * statistics. No loss, no gradient, no
 * collective (sync-BN's hook is lifted for it); the other replicas idle. */
static void do_bnstat(tower *tw) {
    vt_towers *T = tw->T;
    const vt_batch *b = T->batch;
    if (tw->rank != T->root || T->me != 0 || b->n == 0)
        return; /* other processes: rank 0's statistics reach them by the sync after */
    /* Micro-batches of what the device fits, not of the replica's present capacity (which
     * re-plans and evaluation grow): the same chunks, the same statistics, in a run and
     * in its resumed or budget-timed twin. */
    const int chunk = VT_MAX(1, VT_MIN(b->n, T->sd[tw->g].max_clips));
    ensure_capacity(tw, chunk);
    grow_scratch(tw, chunk);
    vt_net_set_bn_sync(tw->net, NULL, NULL);
    uint64_t ticket = stage_issue(tw, b, 0, chunk);
    for (int first = 0; first < b->n; first += chunk) {
        int k = VT_MIN(chunk, b->n - first);
        vt_targets tg;
        const float *x = stage_take(tw, b, first, k, ticket, &tg);
        T->bn_seen += k;
        vt_net_set_bn_momentum(tw->net, (float)k / (float)T->bn_seen);
        vt_net_forward(tw->net, x, k, 1);
        if (first + chunk < b->n)
            ticket = stage_issue(tw, b, first + chunk, VT_MIN(chunk, b->n - first - chunk));
    }
    stage_done(tw);
    vt_backend_sync(tw->be);
    vt_net_set_bn_momentum(tw->net, 0);
    if (T->cfg.sync_bn)
        vt_net_set_bn_sync(tw->net, allreduce_hook, tw);
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
    /* the step count travels on the host (vt_towers_sync_from): a float would round it
     * past 2^24 */
    if (!(T->me == 0 && tw->rank == root))
        vt_optim_set_step_count(tw->opt, T->sync_step);
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
        case CMD_BNSTAT: do_bnstat(tw); break;
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

/* The splitter's view of this process's towers (budgets -> clips per pass). */
static void fill_split_devs(vt_towers *T, vt_slice_dev *sd) {
    for (int i = 0; i < T->n; i++) {
        const vt_device *d = &T->cfg.devices.dev[i];
        vt_slice_dev *s = &sd[i];
        memset(s, 0, sizeof *s);
        snprintf(s->name, sizeof s->name, "%s", d->name);
        s->budget = d->budget;
        if (d->budget <= 0) {
            s->max_clips = VT_SLICE_UNLIMITED;
        } else {
            int m = vt_memplan_max_clips(&T->mp, d->budget);
            s->max_clips = VT_MIN(m, VT_SLICE_UNLIMITED);
        }
        s->speed = d->speed;
    }
}

/* What one process tells the others at init: its towers, or why it has none. */
typedef struct rank_devs {
    int32_t ok, n;
    char err[480];
    vt_device dev[VT_MAX_DEVICES];
    vt_slice_dev sd[VT_MAX_DEVICES];
} rank_devs;

/* Every rank's ok and error after a phase of init: 0 when all are fine, else -1 with err
 * naming the first rank that failed (the same message on every rank). */
static int world_status(vt_towers *T, int ok, char *err, size_t errlen, const char *phase) {
    typedef struct status { int32_t ok; char err[480]; } status;
    status me, *all = vt_calloc((size_t)T->world, sizeof *all);
    memset(&me, 0, sizeof me);
    me.ok = ok;
    if (!ok)
        snprintf(me.err, sizeof me.err, "%s", err);
    vt_mpi_allgather(&me, all, sizeof me, phase);
    int rc = 0;
    for (int q = 0; q < T->world && rc == 0; q++)
        if (!all[q].ok) {
            vt_set_err(err, errlen, "rank %d (host %s): %s", q, vt_mpi_host(q), all[q].err);
            rc = -1;
        }
    free(all);
    return rc;
}

/* Several processes: exchange device lists and split views; fill gdev, sd, rank_first. */
static int world_devices(vt_towers *T, int ok, const vt_slice_dev *sd_local, char *err,
                         size_t errlen) {
    rank_devs *me = vt_calloc(1, sizeof *me), *all = vt_calloc((size_t)T->world, sizeof *all);
    me->ok = ok;
    me->n = T->n;
    if (!ok)
        snprintf(me->err, sizeof me->err, "%s", err);
    memcpy(me->dev, T->cfg.devices.dev, sizeof(vt_device) * (size_t)T->n);
    memcpy(me->sd, sd_local, sizeof(vt_slice_dev) * (size_t)T->n);
    vt_mpi_allgather(me, all, sizeof *me, "start-up (every rank's devices)");
    int rc = 0, ng = 0;
    for (int q = 0; q < T->world && rc == 0; q++) {
        if (!all[q].ok) {
            vt_set_err(err, errlen, "rank %d (host %s): %s", q, vt_mpi_host(q), all[q].err);
            rc = -1;
        }
        ng += all[q].n;
    }
    if (rc == 0 && ng > VT_MAX_DEVICES) {
        vt_set_err(err, errlen, "%d towers over %d processes: at most %d in one run", ng,
                   T->world, VT_MAX_DEVICES);
        rc = -1;
    }
    if (rc == 0) {
        int g = 0;
        for (int q = 0; q < T->world; q++) {
            T->rank_first[q] = g;
            if (q == T->me)
                T->g0 = g;
            for (int i = 0; i < all[q].n; i++, g++) {
                vt_device *d = &T->gdev.dev[g];
                char nm[64]; /* "r1.cuda0": rank 1's cuda0 */
                snprintf(nm, sizeof nm, "r%d.%s", q, all[q].dev[i].name);
                *d = all[q].dev[i];
                snprintf(d->name, sizeof d->name, "%.31s", nm);
                snprintf(d->desc, sizeof d->desc, "%.40s: %.80s", vt_mpi_host(q), all[q].dev[i].desc);
                T->sd[g] = all[q].sd[i];
                snprintf(T->sd[g].name, sizeof T->sd[g].name, "%.31s", nm);
            }
        }
        T->rank_first[T->world] = g;
        T->ng = T->gdev.n = g;
    }
    free(me);
    free(all);
    return rc;
}

vt_towers *vt_towers_init(const vt_towers_cfg *cfg, char *err, size_t errlen) {
    VT_CHECK(cfg->devices.n >= 1 && cfg->devices.n <= VT_MAX_DEVICES, "%d towers", cfg->devices.n);
    VT_CHECK(cfg->batch >= 1, "towers: batch %d", cfg->batch);
    vt_towers *T = vt_calloc(1, sizeof *T);
    T->cfg = *cfg;
    T->n = cfg->devices.n;
    T->world = vt_mpi_size();
    T->me = vt_mpi_rank();
    T->at_epoch = T->at_batch = -1;
    const char *cr = getenv("VT_CHECK_REPLICAS");
    T->check_replicas = cr && *cr && strcmp(cr, "0");
    if (T->cfg.speed_warmup <= 0)
        T->cfg.speed_warmup = 2;
    pthread_mutex_init(&T->mu, NULL);
    pthread_mutex_init(&T->sched_mu, NULL);
    pthread_cond_init(&T->cv_go, NULL);
    pthread_cond_init(&T->cv_done, NULL);
    for (int i = 0; i < T->n; i++) {
        pthread_mutex_init(&T->tw[i].hmu, NULL);
        pthread_cond_init(&T->tw[i].hcv, NULL);
    }
    vt_slice_dev sd_local[VT_MAX_DEVICES];
    memset(sd_local, 0, sizeof sd_local);
    int ok = vt_memplan_build(&T->mp, &cfg->net, vt_optim_state_per_param(&cfg->optim), err,
                              errlen) == 0;
    T->have_mp = ok;
    if (ok)
        fill_split_devs(T, sd_local);
    for (int i = 0; ok && i < T->n; i++) {
        if (sd_local[i].max_clips > 0)
            continue;
        char a[32], b[32], c[32];
        vt_set_err(err, errlen, "tower %s: its budget of %s cannot hold one clip of %s at %dx%dx%d "
                   "(needs %s fixed + %s per clip); raise --mem/--gpu-mem or use a smaller clip",
                   sd_local[i].name, vt_fmt_bytes(a, sizeof a, sd_local[i].budget), cfg->net.model,
                   cfg->net.clip_t, cfg->net.clip_h, cfg->net.clip_w,
                   vt_fmt_bytes(b, sizeof b, T->mp.fixed_bytes),
                   vt_fmt_bytes(c, sizeof c, T->mp.bytes_per_clip));
        ok = 0;
    }
    if (T->world > 1) {
        /* Every rank learns every rank's towers, or every rank fails with one message. */
        if (world_devices(T, ok, sd_local, err, errlen))
            goto fail;
    } else {
        if (!ok)
            goto fail;
        T->ng = T->n;
        T->gdev = cfg->devices;
        memcpy(T->sd, sd_local, sizeof T->sd);
        T->rank_first[1] = T->n;
    }
    vt_slice_policy start = cfg->policy;
    if (start.kind == VT_SLICE_AUTO)
        start.kind = VT_SLICE_MEMORY; /* auto starts from memory and measures */
    if (vt_slice_plan(&T->plan, &start, cfg->batch, T->ng, T->sd, err, errlen))
        goto fail;
    T->plan.kind = cfg->policy.kind;
    T->base = T->plan;
    vt_auto_init(&T->aut, T->ng);
    for (int g = 0; g < T->ng; g++)
        if (strcmp(T->gdev.dev[g].backend, T->gdev.dev[0].backend))
            T->mixed = 1;
    for (int i = 0; i < T->n; i++) {
        T->tw[i].T = T;
        T->tw[i].rank = i;
        T->tw[i].g = T->g0 + i;
        T->tw[i].dev = T->gdev.dev[T->g0 + i];
    }
    T->red = vt_reducer_choose(cfg->reducer, &T->gdev, T->world, T->rank_first, T->me, err,
                               errlen);
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
    ok = 1;
    for (int i = 0; i < T->n && ok; i++)
        if (T->tw[i].failed) {
            vt_set_err(err, errlen, "%s", T->tw[i].err);
            ok = 0;
        }
    if (T->world > 1 ? world_status(T, ok, err, errlen, "start-up (towers built)") : !ok)
        goto fail;
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
    pthread_mutex_destroy(&T->sched_mu);
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
int vt_towers_count_all(const vt_towers *t) { return t->ng; }
const vt_device_list *vt_towers_devices(const vt_towers *t) { return &t->gdev; }
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
    if (t->world > 1) {
        fprintf(f, "processes: %d (mpirun), timeout %.0f s (VT_MPI_TIMEOUT)\n", t->world,
                vt_mpi_timeout());
        for (int q = 0; q < t->world; q++)
            fprintf(f, "  rank %d: host %s, pid %d, towers %d..%d\n", q, vt_mpi_host(q),
                    vt_mpi_pid(q), t->rank_first[q], t->rank_first[q + 1] - 1);
    }
    vt_device_list_print(&t->gdev, f);
    vt_plan_print(&t->plan, t->sd, f);
    fprintf(f, "  towers: %d, reducer %s, batch norm %s\n", t->ng, t->red->i->name,
            t->cfg.sync_bn ? "synced across towers per pass (--sync-bn)"
                           : "per tower; running stats averaged by clip count after each step");
}

void vt_towers_plan_line(const vt_towers *t, char *buf, size_t n) {
    vt_plan_format(&t->plan, t->sd, buf, n);
}

/* Slices of n clips over every tower under plan p: p's own when n is its batch, else
 * p's shares rescaled. */
static void slices_for(const vt_towers *T, const vt_plan *p, int n, int *slice) {
    if (n == p->batch) {
        memcpy(slice, p->slice, sizeof(int) * (size_t)T->ng);
        return;
    }
    double w[VT_MAX_DEVICES];
    double sum = 0;
    for (int i = 0; i < T->ng; i++)
        sum += w[i] = p->slice[i];
    if (!(sum > 0))
        for (int i = 0; i < T->ng; i++)
            w[i] = T->sd[i].max_clips > 0;
    memset(slice, 0, sizeof(int) * (size_t)T->ng);
    if (n > 0)
        vt_slice_round(slice, n, w, T->ng);
}

/* The plan in force for training batch (epoch, batch): the newest schedule entry at or
 * before it, else the base plan. */
static void plan_at(vt_towers *T, int64_t epoch, int64_t batch, vt_plan *out) {
    pthread_mutex_lock(&T->sched_mu);
    const vt_plan *p = &T->base;
    for (int k = 0; k < T->nsched; k++) {
        const sched_entry *e = &T->sched[k];
        if (e->epoch < epoch || (e->epoch == epoch && e->batch <= batch))
            p = &e->plan;
    }
    *out = *p;
    pthread_mutex_unlock(&T->sched_mu);
}

/* Several processes: plan p takes effect `lag` + 1 batches after the one just stepped.
 * Entries already in force fold into the base; a full schedule keeps its plans (the
 * same on every rank: the schedule is). Called with sched_mu held. */
static void schedule(vt_towers *T, const vt_plan *p) {
    int64_t e = T->at_epoch, b = T->at_batch + 1 + T->lag;
    while (T->nsched > 0) {
        const sched_entry *s = &T->sched[0];
        if (!(s->epoch < T->at_epoch || (s->epoch == T->at_epoch && s->batch <= T->at_batch)))
            break;
        T->base = s->plan;
        memmove(&T->sched[0], &T->sched[1], sizeof T->sched[0] * (size_t)(T->nsched - 1));
        T->nsched--;
    }
    if (T->nsched == SCHED_MAX)
        return;
    sched_entry *s = &T->sched[T->nsched++];
    s->epoch = e;
    s->batch = b;
    s->plan = *p;
}

/* This process's positions [lo, hi) of npos under plan p; planned (ng) gets every tower's
 * slice. */
static void rank_part(const vt_towers *T, const vt_plan *p, int npos, int *planned, int *lo,
                      int *hi) {
    slices_for(T, p, npos, planned);
    int a = 0, m = 0;
    for (int g = 0; g < T->g0; g++)
        a += planned[g];
    for (int i = 0; i < T->n; i++)
        m += planned[T->g0 + i];
    *lo = a;
    *hi = a + m;
}

void vt_towers_part_train(void *towers, int64_t epoch, int64_t batch, int npos, int depth,
                          int *lo, int *hi) {
    vt_towers *T = towers;
    vt_plan p;
    int planned[VT_MAX_DEVICES];
    pthread_mutex_lock(&T->sched_mu);
    T->depth = VT_MAX(T->depth, depth);
    pthread_mutex_unlock(&T->sched_mu);
    plan_at(T, epoch, batch, &p);
    rank_part(T, &p, npos, planned, lo, hi);
}

void vt_towers_part_eval(void *towers, int64_t epoch, int64_t batch, int npos, int depth,
                         int *lo, int *hi) {
    vt_towers *T = towers;
    (void)epoch;
    (void)batch;
    (void)depth;
    vt_plan p;
    int planned[VT_MAX_DEVICES];
    pthread_mutex_lock(&T->sched_mu);
    p = T->plan;
    pthread_mutex_unlock(&T->sched_mu);
    rank_part(T, &p, npos, planned, lo, hi);
}

/* Rank q's k clips over its towers, in proportion to their planned slices (exactly
 * those when nothing is missing): count[g] for q's towers. */
static void split_rank(const vt_towers *T, int q, const int *planned, int k, int *count) {
    int a = T->rank_first[q], m = T->rank_first[q + 1] - a, sum = 0;
    double w[VT_MAX_DEVICES];
    for (int i = 0; i < m; i++)
        sum += planned[a + i];
    VT_CHECK(k <= sum, "rank %d has %d clips for a part of %d", q, k, sum);
    if (k == sum) {
        memcpy(count + a, planned + a, sizeof(int) * (size_t)m);
        return;
    }
    for (int i = 0; i < m; i++)
        w[i] = planned[a + i];
    memset(count + a, 0, sizeof(int) * (size_t)m);
    if (k > 0)
        vt_slice_round(count + a, k, w, m);
}

static void check_batch(const vt_towers *T, const vt_batch *b) {
    const vt_net_cfg *nc = &T->cfg.net;
    VT_CHECK(b->t == nc->clip_t && b->h == nc->clip_h && b->w == nc->clip_w,
             "batch clips %dx%dx%d, towers built for %dx%dx%d", b->t, b->h, b->w, nc->clip_t,
             nc->clip_h, nc->clip_w);
    VT_CHECK(b->n >= 0 && b->x != NULL, "batch of %d clips without data", b->n);
}

/* Several processes: this rank's part of b under p must be the one its loader decoded. */
static void check_part(const vt_towers *T, const vt_batch *b, const vt_plan *p, int *planned) {
    int lo, hi;
    rank_part(T, p, b->npos, planned, &lo, &hi);
    VT_CHECK(b->part_lo == lo && b->part_hi == hi && b->n <= hi - lo,
             "batch %lld of epoch %lld holds positions [%d, %d) (%d clips) of %d, but this rank's "
             "towers own [%d, %d): give the loader vt_towers_part_train/_eval",
             (long long)b->index, (long long)b->epoch, b->part_lo, b->part_hi, b->n, b->npos,
             lo, hi);
}

/* Several processes, before a training step: every rank's clip count for this batch
 * (checked to be the same batch everywhere) -> count[g] for every tower. Returns the
 * step's clips over all ranks. */
static int world_counts(vt_towers *T, const vt_batch *b, const vt_plan *p, int *count) {
    typedef struct rank_count { int64_t epoch, index; int32_t n, npos; } rank_count;
    int planned[VT_MAX_DEVICES];
    check_part(T, b, p, planned);
    rank_count me = {b->epoch, b->index, b->n, b->npos};
    rank_count *all = vt_malloc(sizeof *all * (size_t)T->world);
    vt_mpi_allgather(&me, all, sizeof me, "the clip counts before a training step");
    int total = 0;
    for (int q = 0; q < T->world; q++) {
        const rank_count *r = &all[q];
        if (r->epoch != me.epoch || r->index != me.index || r->npos != me.npos)
            vt_mpi_abort(1, "rank %d is at batch %lld of epoch %lld (%d samples) while this rank is "
                         "at batch %lld of epoch %lld (%d samples): the ranks are out of step "
                         "(different data or options?)", q, (long long)r->index + 1,
                         (long long)r->epoch + 1, r->npos, (long long)me.index + 1,
                         (long long)me.epoch + 1, me.npos);
        split_rank(T, q, planned, r->n, count);
        total += r->n;
    }
    free(all);
    return total;
}

/* What every rank tells the others after a training step. */
typedef struct rank_fig {
    double loss, head_loss[VT_MAX_HEADS];
    int64_t correct[VT_MAX_HEADS];
    double compute[VT_MAX_DEVICES], wait[VT_MAX_DEVICES];
    int32_t passes[VT_MAX_DEVICES];
    double red_wait, red_s;
    int64_t red_bytes, wire_bytes;
    int32_t signal, depth;
} rank_fig;

/* The reducers' figures so far. Gradient buckets (one process) are summed while backward
 * runs: their bytes count, their time is not exposed (tw->wait says what is). */
static void reducer_stats(const vt_towers *T, vt_reduce_stats *out) {
    memset(out, 0, sizeof *out);
    if (T->red->i->stats)
        T->red->i->stats(T->red, out);
    if (T->red_grad && T->red_grad->i->stats) {
        vt_reduce_stats g;
        T->red_grad->i->stats(T->red_grad, &g);
        out->calls += g.calls;
        out->bytes += g.bytes;
    }
}

/* This rank's figures of the step just run. */
static void local_fig(vt_towers *T, rank_fig *f, const vt_reduce_stats *r0, const vt_reduce_stats *r1) {
    memset(f, 0, sizeof *f);
    for (int i = 0; i < T->n; i++) {
        tower *tw = &T->tw[i];
        f->loss += tw->loss;
        for (int h = 0; h < T->cfg.net.nheads; h++) {
            f->head_loss[h] += tw->head_loss[h];
            f->correct[h] += tw->correct[h];
        }
        f->compute[i] = tw->compute;
        f->wait[i] = tw->wait;
        f->passes[i] = tw->passes;
    }
    f->red_wait = r1->wait_s - r0->wait_s;
    f->red_s = r1->reduce_s - r0->reduce_s;
    f->red_bytes = r1->bytes - r0->bytes;
    f->wire_bytes = r1->wire_bytes - r0->wire_bytes;
    f->signal = T->world > 1 ? vt_mpi_signal_pending() : 0;
    pthread_mutex_lock(&T->sched_mu);
    f->depth = T->depth;
    pthread_mutex_unlock(&T->sched_mu);
}

/* Several processes: every rank's figures into st (the same on every rank). */
static void world_figs(vt_towers *T, const rank_fig *mine, vt_step_stats *st) {
    rank_fig *all = vt_malloc(sizeof *all * (size_t)T->world);
    vt_mpi_allgather(mine, all, sizeof *mine, "the figures after a training step");
    int lag = 0;
    for (int q = 0; q < T->world; q++) {
        const rank_fig *f = &all[q];
        st->loss += f->loss;
        for (int h = 0; h < T->cfg.net.nheads; h++) {
            st->head_loss[h] += f->head_loss[h];
            st->head_correct[h] += f->correct[h];
        }
        for (int g = T->rank_first[q]; g < T->rank_first[q + 1]; g++) {
            st->compute_s[g] = f->compute[g - T->rank_first[q]];
            st->wait_s[g] = f->wait[g - T->rank_first[q]];
            st->passes[g] = f->passes[g - T->rank_first[q]];
        }
        st->reduce_wait_s = VT_MAX(st->reduce_wait_s, f->red_wait);
        st->reduce_s = VT_MAX(st->reduce_s, f->red_s);
        if (!st->signal)
            st->signal = f->signal;
        lag = VT_MAX(lag, f->depth);
    }
    st->reduce_bytes = all[0].red_bytes;
    st->wire_bytes = all[0].wire_bytes;
    T->lag = lag;
    free(all);
}

/* VT_CHECK_REPLICAS: a hash of replica 0's parameters and buffers on every rank. */
typedef struct hash_job { uint64_t h; } hash_job;
static void hash_replica(void *ctx, vt_net *net, vt_optim *opt) {
    (void)opt;
    hash_job *j = ctx;
    vt_backend *be = vt_net_backend(net);
    int64_t np = vt_net_num_params(net), nb = vt_net_num_buffers(net);
    float *h = vt_malloc((size_t)VT_MAX(np + nb, 1) * sizeof(float));
    vt_backend_sync(be);
    be->i->to_host(be, h, vt_net_params(net), (size_t)np * sizeof(float));
    if (nb)
        be->i->to_host(be, h + np, vt_net_buffers(net), (size_t)nb * sizeof(float));
    j->h = vt_fnv1a(h, (size_t)(np + nb) * sizeof(float), VT_FNV_SEED);
    free(h);
}

static void check_replicas(vt_towers *T) {
    hash_job j = {0};
    vt_towers_run_on(T, 0, hash_replica, &j);
    uint64_t *all = vt_malloc(sizeof *all * (size_t)T->world);
    vt_mpi_allgather(&j.h, all, sizeof j.h, "the replica check (VT_CHECK_REPLICAS)");
    for (int q = 1; q < T->world; q++)
        if (all[q] != all[0])
            vt_mpi_abort(1, "VT_CHECK_REPLICAS: after step %lld rank %d's replica differs from "
                         "rank 0's (hash %016llx vs %016llx): the replicas diverged (a bug)",
                         (long long)T->step, q, (unsigned long long)all[q],
                         (unsigned long long)all[0]);
    free(all);
}

void vt_towers_set_momentum(vt_towers *T, float momentum) {
    /* between steps the tower threads are parked: their optimizers are ours to set */
    for (int i = 0; i < T->n; i++)
        vt_optim_set_momentum(T->tw[i].opt, momentum);
}

void vt_towers_train_step(vt_towers *T, const vt_batch *b, float lr, vt_step_stats *out) {
    check_batch(T, b);
    double t0 = vt_now();
    int count[VT_MAX_DEVICES]; /* clips of every tower of every process this step */
    vt_step_stats st;
    memset(&st, 0, sizeof st);
    st.ntowers = T->ng;
    int nclips;
    if (T->world > 1) {
        vt_plan p;
        plan_at(T, b->epoch, b->index, &p);
        vt_mpi_set_context("training step %lld (epoch %lld, batch %lld)", (long long)T->step + 1,
                           (long long)b->epoch + 1, (long long)b->index + 1);
        nclips = world_counts(T, b, &p, count);
        T->at_epoch = b->epoch;
        T->at_batch = b->index;
    } else {
        nclips = b->n;
        if (nclips > 0)
            slices_for(T, &T->plan, nclips, count);
    }
    if (nclips == 0) { /* every rank has nothing: no step anywhere */
        if (out)
            *out = st;
        return;
    }
    /* This process's towers: rows of b from 0, positions from the earlier ranks' clips. */
    int base = 0, off = 0, npass = 0;
    for (int g = 0; g < T->g0; g++)
        base += count[g];
    for (int g = 0; g < T->ng; g++) {
        int chunk = count[g] > 0 ? VT_MIN(count[g], T->sd[g].max_clips) : 0;
        if (chunk)
            npass = VT_MAX(npass, (count[g] + chunk - 1) / chunk);
    }
    for (int i = 0; i < T->n; i++) {
        tower *tw = &T->tw[i];
        int c = count[tw->g];
        tw->off = off;
        tw->goff = base + off;
        tw->count = c;
        tw->chunk = c > 0 ? VT_MIN(c, T->sd[tw->g].max_clips) : 0;
        tw->compute = tw->wait = 0;
        tw->npass = npass;
        off += c;
    }
    VT_CHECK(off == b->n, "this rank's towers take %d clips of a batch of %d", off, b->n);
    vt_reduce_stats r0, r1;
    reducer_stats(T, &r0);
    T->nclips = nclips;
    T->batch = b;
    T->lr = lr;
    run_cmd(T, CMD_TRAIN);
    T->step++;
    reducer_stats(T, &r1);
    rank_fig mine;
    local_fig(T, &mine, &r0, &r1);
    st.n = nclips;
    st.grad_norm = T->tw[0].grad_norm;
    st.buckets = T->bucket_floats > 0 ? T->tw[0].nbuckets : 0;
    st.buckets_overlapped = T->bucket_floats > 0 ? T->tw[0].noverlap : 0;
    memcpy(st.slice, count, sizeof(int) * (size_t)T->ng);
    if (T->world > 1) {
        world_figs(T, &mine, &st);
    } else {
        st.loss = mine.loss;
        for (int h = 0; h < T->cfg.net.nheads; h++) {
            st.head_loss[h] = mine.head_loss[h];
            st.head_correct[h] = mine.correct[h];
        }
        for (int i = 0; i < T->n; i++) {
            st.compute_s[i] = mine.compute[i];
            st.wait_s[i] = mine.wait[i];
            st.passes[i] = mine.passes[i];
        }
        st.reduce_wait_s = mine.red_wait;
        st.reduce_s = mine.red_s;
        st.reduce_bytes = mine.red_bytes;
        st.wire_bytes = mine.wire_bytes;
    }
    if (T->check_replicas && T->world > 1)
        check_replicas(T);

    /* Measure and re-plan (auto: whenever worth > 3%; speed: once, after warm-up). Every
     * number here is the same on every rank, so every rank decides the same. */
    vt_slice_kind k = T->cfg.policy.kind;
    int changed = 0;
    vt_plan cur = T->plan;
    if (k == VT_SLICE_AUTO || (k == VT_SLICE_SPEED && !T->speed_planned)) {
        int clips[VT_MAX_DEVICES];
        double comp[VT_MAX_DEVICES];
        for (int g = 0; g < T->ng; g++) {
            clips[g] = count[g];
            comp[g] = st.compute_s[g];
        }
        if (k == VT_SLICE_AUTO && nclips == cur.batch) {
            changed = vt_auto_observe(&T->aut, &cur, T->sd, clips, comp);
        } else if (k == VT_SLICE_SPEED) {
            int known = 1;
            for (int g = 0; g < T->ng; g++)
                known &= T->gdev.dev[g].speed > 0;
            vt_plan scratch = cur;
            vt_auto_observe(&T->aut, &scratch, T->sd, clips, comp);
            if (known) {
                T->speed_planned = 1;
            } else if (T->aut.steps >= T->aut.warmup + T->cfg.speed_warmup) {
                vt_slice_policy pol = {.kind = VT_SLICE_SPEED};
                char err[256];
                if (vt_slice_plan(&scratch, &pol, cur.batch, T->ng, T->sd, err, sizeof err) == 0) {
                    changed = memcmp(scratch.slice, cur.slice, sizeof scratch.slice) != 0;
                    cur = scratch;
                }
                T->speed_planned = 1;
            }
        }
    }
    pthread_mutex_lock(&T->sched_mu);
    T->plan = cur;
    if (T->world == 1)
        T->base = cur;
    else if (changed)
        schedule(T, &cur);
    pthread_mutex_unlock(&T->sched_mu);
    if (changed && T->cfg.verbose) {
        char line[1024];
        vt_towers_plan_line(T, line, sizeof line);
        if (T->world > 1) {
            if (T->me == 0)
                fprintf(stderr, "re-planned after step %lld (from batch %lld of epoch %lld on): "
                        "%s\n", (long long)T->step, (long long)T->at_batch + 2 + T->lag,
                        (long long)T->at_epoch + 1, line);
        } else {
            fprintf(stderr, "re-planned after step %lld: %s\n", (long long)T->step, line);
        }
    }
    st.replanned = changed;
    st.step_s = vt_now() - t0;
    if (out)
        *out = st;
}

void vt_towers_eval_step(vt_towers *T, const vt_batch *b, float *probs_out[VT_MAX_HEADS],
                         vt_step_stats *out) {
    check_batch(T, b);
    double t0 = vt_now();
    int count[VT_MAX_DEVICES];
    if (b->n == 0) {
        if (out) {
            memset(out, 0, sizeof *out);
            out->ntowers = T->n;
        }
        return;
    }
    if (T->world > 1) {
        /* This rank's clips over its own towers; no other rank is needed. */
        vt_plan p;
        int planned[VT_MAX_DEVICES];
        pthread_mutex_lock(&T->sched_mu);
        p = T->plan;
        pthread_mutex_unlock(&T->sched_mu);
        check_part(T, b, &p, planned);
        split_rank(T, T->me, planned, b->n, count);
    } else {
        slices_for(T, &T->plan, b->n, count);
    }
    int off = 0;
    for (int i = 0; i < T->n; i++) {
        tower *tw = &T->tw[i];
        tw->off = off;
        tw->goff = off;
        tw->count = count[tw->g];
        tw->wait = 0;
        tw->compute = 0;
        off += tw->count;
    }
    T->batch = b;
    T->probs_out = probs_out;
    run_cmd(T, CMD_EVAL);
    T->probs_out = NULL;
    if (!out)
        return;
    /* This rank's figures (the caller merges ranks). */
    memset(out, 0, sizeof *out);
    out->n = b->n;
    out->ntowers = T->n;
    for (int i = 0; i < T->n; i++) {
        tower *tw = &T->tw[i];
        out->loss += tw->loss;
        for (int h = 0; h < T->cfg.net.nheads; h++) {
            out->head_loss[h] += tw->head_loss[h];
            out->head_correct[h] += tw->correct[h];
        }
        out->slice[i] = tw->count;
        out->passes[i] = tw->passes;
        out->compute_s[i] = tw->compute;
        out->wait_s[i] = tw->wait;
    }
    out->grad_norm = T->tw[0].grad_norm;
    out->step_s = vt_now() - t0;
}

int vt_towers_replan(vt_towers *T, const vt_slice_policy *pol, char *err, size_t errlen) {
    vt_plan p;
    vt_slice_policy use = *pol;
    if (use.kind == VT_SLICE_AUTO) {
        int known = 0;
        for (int i = 0; i < T->ng; i++)
            known += T->sd[i].speed > 0;
        if (!known)
            use.kind = VT_SLICE_MEMORY;
    }
    if (vt_slice_plan(&p, &use, T->plan.batch, T->ng, T->sd, err, errlen))
        return -1;
    p.kind = pol->kind;
    pthread_mutex_lock(&T->sched_mu);
    T->plan = p;
    T->base = p;
    T->nsched = 0;
    pthread_mutex_unlock(&T->sched_mu);
    T->cfg.policy = *pol;
    T->speed_planned = pol->kind != VT_SLICE_SPEED;
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

void vt_towers_bn_stats(vt_towers *T, const vt_batch *b, int fresh) {
    check_batch(T, b);
    if (fresh)
        T->bn_seen = 0;
    T->root = 0;
    T->batch = b;
    run_cmd(T, CMD_BNSTAT);
}

void vt_towers_sync_from(vt_towers *T, int root) {
    VT_CHECK(root >= 0 && root < T->n, "root %d of %d", root, T->n);
    T->root = root;
    int64_t step = T->me == 0 ? vt_optim_step_count(T->tw[root].opt) : 0;
    vt_mpi_bcast(&step, sizeof step, 0, "the optimizer step count of a checkpoint");
    T->sync_step = step;
    T->step = step; /* dropout masks follow the step: a resumed run draws the same ones */
    run_cmd(T, CMD_SYNC);
}
