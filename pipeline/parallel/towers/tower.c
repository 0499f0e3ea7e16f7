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
 *
 * This file is the towers' life: init (the plan, one thread and one replica per tower),
 * free, the loader's host hook, replica access, and what the caller runs between steps
 * (run_on, sync_from, set_momentum, the replica check). The rest, one concern a file,
 * shares tower_impl.h:
 * tower_worker.c (the per-device thread and its commands), tower_stage.c (input
 * staging), tower_buckets.c (the gradient buckets' helper thread), tower_step.c (a
 * training, evaluation or precise-BN step as the caller drives it), tower_plan.c (the
 * plan, its schedule and each rank's part), tower_world.c (the exchanges between
 * ranks) and tower_weights.c (class-weighted losses).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "base/thread.h"
#include "pipeline/parallel/mpi.h"
#include "pipeline/parallel/reduce.h"
#include "pipeline/parallel/towers/tower_impl.h"

void vt_towers_cfg_default(vt_towers_cfg *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->policy.kind = VT_SLICE_EQUAL;
    cfg->batch = 8;
    vt_optim_cfg_default(&cfg->optim, VT_OPT_SGD);
    cfg->seed = 1;
    cfg->speed_warmup = 2;
    cfg->bucket_mb = -1; /* tower.h: 25 MiB (PyTorch DDP's bucket) with a GPU tower */
}

int vt_towers_exact(const vt_towers *t) { return t->cfg.net.exact; }

/* 1 when every device of the list is a CPU backend. */
static int all_host(const vt_device_list *d) {
    for (int i = 0; i < d->n; i++)
        if (!strcmp(d->dev[i].backend, "cuda"))
            return 0;
    return 1;
}

int vt_towers_exact_for(const vt_device_list *devices, int exact_off) {
    const char *xe = getenv("VT_EXACT_SUMS");
    if (exact_off || (xe && !strcmp(xe, "0")))
        return 0;
    /* GPU towers: only when asked (VT_EXACT_SUMS=1), until a GPU run has measured the
     * cost of their per-clip convolutions (docs/distributed.md) */
    return all_host(devices) || (xe && !strcmp(xe, "1"));
}

vt_towers *vt_towers_init(const vt_towers_cfg *cfg, char *err, size_t errlen) {
    VT_CHECK(cfg->devices.n >= 1 && cfg->devices.n <= VT_MAX_DEVICES, "%d towers", cfg->devices.n);
    VT_CHECK(cfg->batch >= 1, "towers: batch %d", cfg->batch);
    vt_towers *T = vt_calloc(1, sizeof *T);
    T->cfg = *cfg;
    vt_tw_weights_init(T); /* --balance loss: T's own copies of the class weights */
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
    /* Exact sums where this process's towers can have them (tower.h exact_off); the
     * plan counts their bytes, and the world's towers may still turn them off below. */
    T->cfg.net.exact = vt_towers_exact_for(&cfg->devices, cfg->exact_off);
    int ok = vt_memplan_build(&T->mp, &T->cfg.net, vt_optim_state_per_param(&cfg->optim), err,
                              errlen) == 0;
    T->have_mp = ok;
    T->cfg.net.ckpt = 0; /* per tower, T->ckpt (vt_tw_fill_split_devs) */
    if (ok && T->mp.ckpt_segments > 0 && cfg->ckpt_act != VT_CKPT_OFF) {
        vt_net_cfg nc = T->cfg.net;
        nc.ckpt = 1;
        ok = vt_memplan_build(&T->mp_ckpt, &nc, vt_optim_state_per_param(&cfg->optim), err,
                              errlen) == 0;
        T->have_mp_ckpt = ok;
    }
    if (ok)
        vt_tw_fill_split_devs(T, sd_local);
    for (int i = 0; ok && i < T->n; i++) {
        if (sd_local[i].max_clips > 0)
            continue;
        char a[32], b[32], c[32], e[32], d[96] = "";
        if (T->have_mp_ckpt) /* no room even with checkpointing: its figure too */
            snprintf(d, sizeof d, ", %s with activation checkpointing",
                     vt_fmt_bytes(e, sizeof e, T->mp_ckpt.bytes_per_clip));
        /* a CPU tower's default budget is what the process's memory limit leaves: that
         * limit is the one to name (--mem cannot raise it) */
        const int lim = cfg->devices.dev[i].mem_default && cfg->devices.mem_note[0];
        vt_set_err(err, errlen, "tower %s: its budget of %s cannot hold one clip of %s at %dx%dx%d "
                   "(needs %s fixed + %s per clip%s); %s%s%s",
                   sd_local[i].name, vt_fmt_bytes(a, sizeof a, sd_local[i].budget), cfg->net.model,
                   cfg->net.clip_t, cfg->net.clip_h, cfg->net.clip_w,
                   vt_fmt_bytes(b, sizeof b, T->mp.fixed_bytes),
                   vt_fmt_bytes(c, sizeof c, T->mp.bytes_per_clip), d,
                   lim ? "raise the limit that decided, give fewer --threads, fewer --workers or "
                         "a smaller --frame-cache, or use a smaller clip (" :
                         "raise --mem/--gpu-mem or use a smaller clip",
                   lim ? cfg->devices.mem_note : "", lim ? ")" : "");
        ok = 0;
    }
    if (T->world > 1) {
        /* Every rank learns every rank's towers, or every rank fails with one message. */
        if (vt_tw_world_devices(T, ok, sd_local, err, errlen))
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
    /* Every process decides from the same global list and the same kind of reducer. */
    if (!vt_towers_exact_for(&T->gdev, cfg->exact_off) || !T->red->i->allreduce_sum_i64)
        T->cfg.net.exact = 0;
    double bucket_mb = T->cfg.net.exact ? 0 : cfg->bucket_mb; /* exact: one sum after backward */
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
        vt_thread_start(&T->tw[i].th, vt_tw_tower_main, &T->tw[i], "a tower");
        T->tw[i].started = 1;
        if (T->bucket_floats > 0) {
            vt_thread_start(&T->tw[i].helper, vt_tw_helper_main, &T->tw[i], "a tower's helper");
            T->tw[i].helper_started = 1;
        }
    }
    vt_tw_run_cmd(T, CMD_INIT);
    ok = 1;
    for (int i = 0; i < T->n && ok; i++)
        if (T->tw[i].failed) {
            vt_set_err(err, errlen, "%s", T->tw[i].err);
            ok = 0;
        }
    if (T->world > 1 ? vt_tw_world_status(T, ok, err, errlen, "start-up (towers built)") : !ok)
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
        vt_tw_run_cmd(T, CMD_QUIT);
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
    if (T->have_mp_ckpt)
        vt_memplan_free(&T->mp_ckpt);
    pthread_mutex_destroy(&T->mu);
    pthread_mutex_destroy(&T->sched_mu);
    pthread_cond_destroy(&T->cv_go);
    pthread_cond_destroy(&T->cv_done);
    vt_tw_weights_free(T);
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
/* A training step's gate still in flight is read before the caller touches a replica
 * (vt_towers_train_issue): its state, step count and BN buffers are then the step's. */
static void settle_all(vt_towers *t) {
    for (int i = 0; i < t->n; i++)
        if (t->tw[i].gate_late) {
            vt_tw_run_cmd(t, CMD_SETTLE);
            return;
        }
}
vt_net *vt_towers_net(vt_towers *t, int rank) {
    settle_all(t);
    return t->tw[rank].net;
}
vt_optim *vt_towers_optim(vt_towers *t, int rank) {
    settle_all(t);
    return t->tw[rank].opt;
}
vt_backend *vt_towers_backend(vt_towers *t, int rank) {
    settle_all(t);
    return t->tw[rank].be;
}

void vt_towers_set_momentum(vt_towers *T, float momentum) {
    /* between steps the tower threads are parked: their optimizers are ours to set */
    for (int i = 0; i < T->n; i++)
        vt_optim_set_momentum(T->tw[i].opt, momentum);
}

void vt_towers_run_on(vt_towers *T, int rank, void (*fn)(void *ctx, vt_net *net, vt_optim *opt),
                      void *ctx) {
    VT_CHECK(rank >= 0 && rank < T->n, "rank %d of %d", rank, T->n);
    T->root = rank;
    T->run_fn = fn;
    T->run_ctx = ctx;
    vt_tw_run_cmd(T, CMD_RUN);
}

void vt_towers_sync_from(vt_towers *T, int root) {
    VT_CHECK(root >= 0 && root < T->n, "root %d of %d", root, T->n);
    T->root = root;
    settle_all(T);
    int64_t step = T->me == 0 ? vt_optim_step_count(T->tw[root].opt) : 0;
    vt_mpi_bcast(&step, sizeof step, 0, "the optimizer step count of a checkpoint");
    T->sync_step = step;
    T->step = step; /* dropout masks follow the step: a resumed run draws the same ones */
    vt_tw_run_cmd(T, CMD_SYNC);
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

void vt_tw_check_replicas(vt_towers *T) {
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
