/*
 * tower_worker.c: the per-device worker — one persistent thread per tower, woken per
 * command (init, train, eval, precise BN, sync, run, quit), that owns its backend,
 * replica and optimizer: the passes of a training step with gradient accumulation and
 * one SUM over the gradient arena, forward-only evaluation written back in batch order,
 * a precise-BN pass, the broadcast of one replica, and re-sizing its replica when a
 * plan asks for bigger passes. It must never average gradients, never skip a collective
 * on a tower with no clips, and never touch another tower's replica.
 */
#include <math.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "base/common.h"
#include "models/cpu/cpu_blas.h"
#include "models/registry.h"
#include "models/xsum.h"
#include "pipeline/parallel/reduce.h"
#include "pipeline/parallel/towers/tower_impl.h"

static void sleep_s(double s) {
    if (!(s > 0))
        return;
    struct timespec ts;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* The towers' sum of one buffer (sync-BN's statistics, the running statistics after a
 * step): the net's allreduce hook. */
static void allreduce_hook(void *ctx, float *buf, int64_t n) {
    tower *tw = ctx;
    vt_reducer *r = tw->T->red;
    r->i->allreduce_sum(r, tw->rank, tw->be, buf, n);
}

/* The same for the exact sums of networks built with cfg.exact (int64, xsum.h). */
static void allreduce_i64_hook(void *ctx, int64_t *buf, int64_t n) {
    tower *tw = ctx;
    vt_reducer *r = tw->T->red;
    r->i->allreduce_sum_i64(r, tw->rank, tw->be, buf, n);
}

/* Sync-BN's hooks on (when the run has sync-BN) or off. One tower in the whole run
 * (every process counted): off, because the sum over one tower is its own sums and
 * skipping the collective changes no bit (issue 45 step 3: the reducer's no-op and, for
 * float sums, the count's copy to the host, a stream sync per batch norm, go away; the
 * count then stays the exact int64 n * S rather than a float that is exact below 2^24
 * elements a channel). test_bn_sync_one checks the bits. */
static void set_bn_sync(tower *tw, int on) {
    on = on && tw->T->cfg.sync_bn && tw->T->ng > 1;
    vt_net_set_bn_sync(tw->net, on ? allreduce_hook : NULL, on ? tw : NULL);
    if (tw->T->cfg.net.exact)
        vt_net_set_bn_sync_exact(tw->net, on ? allreduce_i64_hook : NULL, on ? tw : NULL);
}

/* Host memory for what the device copies back without a wait (issue 45 step 3): pinned
 * on a device backend (a copy into pageable memory waits anyway), else malloc. */
static void *host_buf(tower *tw, size_t bytes) {
    return tw->scratch_pinned ? tw->be->i->host_alloc(tw->be, bytes) : vt_malloc(bytes);
}
static void host_buf_free(tower *tw, void *p) {
    if (p && tw->scratch_pinned)
        tw->be->i->host_free(tw->be, p);
    else
        free(p);
}

/* The last update's gate read (issue 45 item 3): its norm and skip into the tower's
 * results, its step into the optimizer's count. wait: sync the backend first; 0 when
 * the caller's own wait came after the gate's copy back (a pass's wait). */
static void settle(tower *tw, int wait) {
    if (!tw->gate_late)
        return;
    if (wait)
        vt_backend_sync(tw->be);
    int skipped;
    double norm = vt_optim_gate_read(tw->opt, &skipped);
    const int k = (int)(tw->gate_step & 1);
    tw->gnorm[k] = (float)norm;
    tw->gskip[k] = skipped;
    tw->gate_late = 0;
}

static void grow_scratch(tower *tw, int clips) {
    const vt_net_cfg *nc = &tw->T->cfg.net;
    if (clips <= tw->scratch_clips)
        return;
    int ksum = 0; /* every head's logits of a pass side by side: one wait for them all */
    for (int h = 0; h < nc->nheads; h++)
        ksum += nc->head[h].classes;
    host_buf_free(tw, tw->logits);
    free(tw->loss_clip);
    tw->scratch_pinned = !tw->host_mem && tw->be->i->host_alloc;
    tw->logits = host_buf(tw, (size_t)clips * (size_t)VT_MAX(ksum, 1) * sizeof(float));
    tw->loss_clip = vt_malloc((size_t)clips * sizeof(float));
    tw->scratch_clips = clips;
}

/* Resize the replica for micro-batches of `mb` clips, keeping parameters, buffers,
 * optimizer state and step count. Frees first so the budget holds at every moment. */
static void rebuild(tower *tw, int mb) {
    vt_towers *T = tw->T;
    vt_backend *be = tw->be;
    int64_t np = vt_net_num_params(tw->net), nb = vt_net_num_buffers(tw->net);
    settle(tw, 1); /* the step count and the state the last update leaves */
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
    vt_tw_free_stage(tw);
    vt_backend_free_ptr(be, tw->buf_dev); /* made again after the net, if it fits */
    tw->buf_dev = NULL;
    tw->buf_dev_tried = 0;
    vt_optim_free(&tw->opt);
    vt_net_free(&tw->net);
    char err[512];
    vt_net_cfg nc = T->cfg.net;
    nc.ckpt = T->ckpt[tw->rank]; /* activation checkpointing: per tower */
    tw->net = vt_net_init(&nc, be, mb, err, sizeof err);
    VT_CHECK(tw->net, "tower %s: re-sizing the replica for %d clips per pass: %s", tw->dev.name,
             mb, err);
    tw->opt = vt_optim_init(&T->cfg.optim, be, np);
    be->i->to_device(be, vt_net_params(tw->net), hp, (size_t)np * sizeof(float));
    if (nb)
        be->i->to_device(be, vt_net_buffers(tw->net), hb, (size_t)nb * sizeof(float));
    if (ns)
        be->i->to_device(be, vt_optim_state(tw->opt), hs, (size_t)ns * sizeof(float));
    vt_optim_set_step_count(tw->opt, step);
    set_bn_sync(tw, 1);
    vt_tw_alloc_stage(tw, mb);
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

/* Correct predictions of head h for k clips whose logits are in tw->logits (host): the
 * true class above every other (a tie is a miss, as in app/eval/evalproto.h: argmax's
 * first maximum would pass a model that scores every class the same on every clip of
 * class 0). A clip with a non-finite logit is never right: NaN compares false, so "no
 * class scores higher" would pass a diverged model's every clip (issue 41). */
static int64_t count_correct(const vt_head_cfg *hc, const float *logits, const vt_batch *b, int h,
                             int first, int k) {
    int64_t right = 0;
    const int K = hc->classes;
    for (int j = 0; j < k; j++) {
        const float *z = logits + (int64_t)j * K;
        int finite = 1;
        for (int c = 0; c < K; c++)
            finite &= isfinite(z[c]) != 0;
        if (!finite)
            continue;
        if (hc->loss == VT_LOSS_SOFTMAX_CE) {
            if (!b->label[h])
                continue;
            int y = b->label[h][first + j], above = 1;
            if (y < 0 || y >= K) /* a bad label: the loss op reports it */
                continue;
            for (int c = 0; c < K; c++)
                above &= c == y || z[c] < z[y];
            right += above;
        } else {
            if (!b->target[h])
                continue;
            const float *y = b->target[h] + (int64_t)(first + j) * K;
            int all = 1;
            for (int c = 0; c < K; c++)
                all &= z[c] != 0 && (z[c] > 0) == (y[c] > 0.5f); /* 0: a tie, a miss */
            right += all;
        }
    }
    return right;
}

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
    /* under ulimit -v, OpenBLAS's buffers now, or a refusal said (cpu_blas.c: "Buffers") */
    if (tw->be->kind == VT_BACKEND_CPU &&
        vt_cpu_blas_reserve(tw->be->threads, err, sizeof err) != 0) {
        snprintf(tw->err, sizeof tw->err, "tower %s: %s", tw->dev.name, err);
        tw->failed = 1;
        return;
    }
    vt_net_cfg nc = T->cfg.net;
    nc.ckpt = T->ckpt[tw->rank]; /* activation checkpointing: per tower */
    tw->net = vt_net_init(&nc, tw->be, mb, err, sizeof err);
    if (!tw->net) {
        snprintf(tw->err, sizeof tw->err, "tower %s: %s", tw->dev.name, err);
        tw->failed = 1;
        return;
    }
    vt_net_init_weights(tw->net, T->cfg.seed);
    tw->opt = vt_optim_init(&T->cfg.optim, tw->be, vt_net_num_params(tw->net));
    set_bn_sync(tw, 1);
    vt_tw_alloc_stage(tw, mb);
}

/* The buffers (BN running statistics, num_batches_tracked) before this step's forward
 * moves them: a skipped step puts them back, so it leaves no trace but its count. */
static void save_buffers(tower *tw) {
    vt_backend *be = tw->be;
    int64_t nb = vt_net_num_buffers(tw->net);
    tw->buf_chk_ok = 0;
    if (nb > tw->buf_saved_n) {
        free(tw->buf_saved);
        host_buf_free(tw, tw->buf_chk);
        tw->buf_saved = vt_malloc((size_t)nb * sizeof(float));
        tw->buf_chk = tw->scratch_pinned ? host_buf(tw, (size_t)nb * sizeof(float)) : NULL;
        tw->buf_saved_n = nb;
        vt_backend_free_ptr(be, tw->buf_dev);
        tw->buf_dev = NULL;
        tw->buf_dev_tried = 0;
    }
    if (!nb)
        return;
    /* a device backend keeps them on the device: a copy on the stream, no host wait (a
     * few KiB past the memory plan; where they do not fit, the host copy as before) */
    if (!tw->host_mem && !tw->buf_dev_tried) {
        tw->buf_dev_tried = 1;
        tw->buf_dev = vt_backend_alloc(be, (size_t)nb * sizeof(float));
    }
    if (tw->buf_dev)
        be->i->copy(be, tw->buf_dev, vt_net_buffers(tw->net), (size_t)nb * sizeof(float));
    else
        be->i->to_host(be, tw->buf_saved, vt_net_buffers(tw->net), (size_t)nb * sizeof(float));
}

/* The buffers after the step's last forward, queued into buf_chk for buffers_nonfinite
 * (read after the pass's wait; the backward and the reduction leave them as they are). */
static void queue_buffers(tower *tw) {
    int64_t nb = vt_net_num_buffers(tw->net);
    if (nb && tw->buf_chk) {
        vt_backend_to_host_async(tw->be, tw->buf_chk, vt_net_buffers(tw->net),
                                 (size_t)nb * sizeof(float));
        tw->buf_chk_ok = 1;
    }
}

/* 1 when this step moved a buffer (a BN running statistic) to NaN or inf: batch-norm
 * sums past the exact sums' range are NaN (models/xsum.h), and a relu after the batch
 * norm can hide them from the loss and the gradients. */
static int buffers_nonfinite(tower *tw) {
    int64_t nb = vt_net_num_buffers(tw->net), bad = 0;
    if (nb == 0)
        return 0;
    float *h = tw->buf_chk_ok ? NULL : vt_malloc((size_t)nb * sizeof(float));
    if (h)
        tw->be->i->to_host(tw->be, h, vt_net_buffers(tw->net), (size_t)nb * sizeof(float));
    const float *v = h ? h : tw->buf_chk;
    for (int64_t i = 0; i < nb; i++)
        bad |= !isfinite(v[i]);
    free(h);
    return bad != 0;
}

/* 1 when this step's loss (or a buffer it moved) was not finite on any tower of any
 * process: a 0/1 flag per tower summed by the reducer, so that every tower decides the
 * same (the losses are each tower's own until the step's figures are gathered, after the
 * update). */
static int loss_nonfinite_anywhere(tower *tw) {
    vt_towers *T = tw->T;
    float flag = isfinite(tw->loss) && !buffers_nonfinite(tw) ? 0.0f : 1.0f;
    if (T->ng == 1)
        return flag > 0;
    vt_backend *be = tw->be;
    float *buf = &tw->flag_host;
    if (!tw->host_mem) {
        if (!tw->flag_dev)
            tw->flag_dev = vt_backend_alloc_x(be, sizeof(float), "the non-finite flag");
        buf = tw->flag_dev;
    }
    be->i->to_device(be, buf, &flag, sizeof flag);
    T->red->i->allreduce_sum(T->red, tw->rank, be, buf, 1);
    be->i->to_host(be, &flag, buf, sizeof flag);
    return flag > 0;
}

/* Clips of pass p over every tower of every process: what the towers' PASS_K(p) add up
 * to (each tower's chunk as vt_towers_train_step sets it), known on every host. */
static int64_t pass_clips_all(const vt_towers *T, int p) {
    int64_t k = 0;
    for (int g = 0; g < T->ng; g++) {
        const int c = T->count_g[g], chunk = c > 0 ? VT_MIN(c, T->sd[g].max_clips) : 0;
        if (chunk)
            k += VT_MAX(0, VT_MIN(chunk, c - p * chunk));
    }
    return k;
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
    save_buffers(tw);
    vt_net_zero_grad(tw->net);
    const int buckets = T->bucket_floats > 0;
    if (buckets)
        vt_tw_buckets_start(tw);
    uint64_t drop_base = vt_towers_dropout_base(T->cfg.seed, (long long)T->step + 1);
    /* Pass p's clips and size; pass p + 1's inputs are uploaded while pass p computes:
     * after its forward and loss when the net keeps its own copy of the input (BF16),
     * else after its backward (the first conv's backward reads the staged input). */
#define PASS_FIRST(p) (tw->off + (p) * tw->chunk)
#define PASS_K(p) (tw->chunk ? VT_MAX(0, VT_MIN(tw->chunk, tw->count - (p) * tw->chunk)) : 0)
    const int early = !vt_net_reads_input_in_backward(tw->net);
    uint64_t ticket = npass > 0 ? vt_tw_stage_issue(tw, b, PASS_FIRST(0), PASS_K(0)) : 0;
    for (int p = 0; p < npass; p++) {
        double tp = vt_now();
        int first = PASS_FIRST(p);
        int k = PASS_K(p);
        vt_targets tg;
        const float *x = vt_tw_stage_take(tw, b, first, k, ticket, &tg);
        vt_tw_weigh(tw, &tg); /* class weights and the step's 1 / weight sum, if any */
        /* dropout masks by GLOBAL clip position: the same whichever tower (or process)
         * runs a clip */
        vt_net_set_dropout_seed(tw->net, drop_base + (uint64_t)(tw->goff + p * tw->chunk));
        if (T->cfg.sync_bn && T->ng > 1) /* the count from the plan: no sync per BN */
            vt_net_set_bn_pass_clips(tw->net, pass_clips_all(T, p));
        vt_net_forward(tw->net, x, k, 1);
        /* The losses, the logits and (last pass) the buffers are copied back as they are
         * made, the backward queued behind them, and the host waits once, at the pass's
         * end (issue 45 step 3; docs/cuda.md "Host waits"). */
        vt_net_loss_issue(tw->net, &tg, scale);
        for (int h = 0, at = 0; h < nh && k > 0; at += k * nc->head[h].classes, h++)
            vt_backend_to_host_async(be, tw->logits + at, vt_net_logits(tw->net, h),
                                     (size_t)k * (size_t)nc->head[h].classes * sizeof(float));
        if (p == npass - 1)
            queue_buffers(tw);
        if (early && p + 1 < npass)
            ticket = vt_tw_stage_issue(tw, b, PASS_FIRST(p + 1), PASS_K(p + 1));
        /* the last pass makes the gradients final, layer by layer: the helper reduces
         * each bucket as soon as it is */
        if (buckets && p == npass - 1)
            vt_net_set_grad_ready(tw->net, vt_tw_grad_ready_hook, tw);
        vt_net_backward(tw->net);
        vt_net_set_grad_ready(tw->net, NULL, NULL);
        if (!early && p + 1 < npass)
            ticket = vt_tw_stage_issue(tw, b, PASS_FIRST(p + 1), PASS_K(p + 1));
        vt_backend_sync(be); /* the pass's one wait */
        if (p == 0) /* it covered the last step's gate, queued back at that step's end */
            settle(tw, 0);
        float hl[VT_MAX_HEADS] = {0};
        vt_net_loss_collect(tw->net, tw->loss_clip, hl);
        for (int j = 0; j < k; j++)
            tw->loss += tw->loss_clip[j];
        for (int h = 0, at = 0; h < nh && k > 0; at += k * nc->head[h].classes, h++) {
            tw->head_loss[h] += hl[h];
            tw->correct[h] += count_correct(&nc->head[h], tw->logits + at, b, h, first, k);
        }
        /* TEST/BENCHMARK KNOB: run K x slower by idling (K-1) x this pass's time. */
        if (tw->dev.slowdown > 1.0 && k > 0)
            sleep_s((tw->dev.slowdown - 1.0) * (vt_now() - tp));
    }
#undef PASS_FIRST
#undef PASS_K
    vt_net_set_bn_pass_clips(tw->net, -1); /* evaluation and precise BN: the count travels */
    vt_tw_stage_done(tw);
    settle(tw, 1); /* no pass ran (no clips): the last gate is read before this update */
    double t1 = vt_now();
    tw->compute = t1 - t0;

    /* One SUM over the whole gradient arena (in buckets, mostly done by now, or in one
     * call): towers scaled by 1/B, nobody averages. */
    int64_t np = vt_net_num_params(tw->net);
    if (T->cfg.net.exact) {
        /* the towers' accumulators summed as integers (exact: the same in any order),
         * then rounded once */
        if (T->ng > 1)
            red->i->allreduce_sum_i64(red, tw->rank, be, vt_net_xgrads(tw->net), 2 * np);
        vt_net_round_grads(tw->net);
    } else if (buckets) {
        vt_tw_buckets_finish(tw);
    } else {
        red->i->allreduce_sum(red, tw->rank, be, vt_net_grads(tw->net), np);
    }
    /* A non-finite step (issue 41) is skipped on every tower alike: the reduced norm is
     * the same bits everywhere, the loss flag is reduced. No update, the optimizer state
     * and step count untouched, the buffers back as they were; the caller stops the run
     * or counts the step (vidtrain train --skip-nonfinite). With exact sums a NaN or inf
     * gradient saturates to a finite total (xsum.h): a norm at the sums' range is how it
     * shows (before the loss a NaN can still vanish, e.g. into a BN statistic of exact sums;
     * relu and max pool pass it on, as PyTorch does).
     * The norm, the clip and the skip are decided on the device (issue 45 item 3;
     * models/optim.h): the gate, the buffers put back if it skips, the update that reads
     * it, and the gate's copy back are queued, and the host reads the gate after the next
     * step's first pass, whose wait covers it (settle). Nothing here waits for it unless
     * something after the update must know: the towers' average of the running statistics
     * (several towers without sync-BN), the broadcast of mixed backends, buffers saved on
     * the host, or a caller that wants the figures now (vt_towers_train_step). */
    int loss_bad = loss_nonfinite_anywhere(tw); /* a collective: every tower calls it */
    vt_optim *opt = tw->opt;
    vt_optim_gate(opt, vt_net_grads(tw->net), loss_bad,
                  T->cfg.net.exact ? VT_XSUM_GRAD_MAX : INFINITY);
    int64_t nb = vt_net_num_buffers(tw->net);
    const int host_saved = nb && !tw->buf_dev && !tw->host_mem;
    if (nb && !host_saved)
        VT_OP(be, copy_if_skip, vt_net_buffers(tw->net), tw->buf_dev ? tw->buf_dev : tw->buf_saved,
              (size_t)nb * sizeof(float), vt_optim_gate_dev(opt));
    vt_optim_apply_gated(opt, vt_net_params(tw->net), vt_net_grads(tw->net), T->lr);
    vt_optim_gate_fetch(opt);
    tw->gate_step = T->issued + 1;
    tw->gate_late = 1;
    /* One tower in the whole run: the clip-weighted average of its own statistics, at
     * weight 1, changes no bit (scale by 1, a reducer of one rank returns at once, integer
     * counters round to themselves), so it is left out and the step need not be known. */
    const int merge = !T->mixed && !T->cfg.sync_bn && nb > 0 && T->ng > 1;
    if (!T->late || merge || T->mixed || host_saved) {
        settle(tw, 1);
        if (tw->gskip[tw->gate_step & 1]) {
            if (host_saved) {
                be->i->to_device(be, vt_net_buffers(tw->net), tw->buf_saved,
                                 (size_t)nb * sizeof(float));
                vt_backend_sync(be);
            }
            tw->wait = vt_now() - t1;
            return;
        }
    }
    tw->wait = vt_now() - t1;

    double t2 = vt_now();
    if (T->mixed) {
        /* different backend kinds may round an update differently: rank 0's bits win */
        red->i->broadcast(red, tw->rank, be, vt_net_params(tw->net), np, 0);
        if (nb)
            red->i->broadcast(red, tw->rank, be, vt_net_buffers(tw->net), nb, 0);
    } else if (merge) {
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
    uint64_t ticket = vt_tw_stage_issue(tw, b, tw->off, VT_MIN(chunk, tw->count));
    for (int first = tw->off; first < end; first += chunk) {
        int k = VT_MIN(chunk, end - first);
        vt_targets tg;
        const float *x = vt_tw_stage_take(tw, b, first, k, ticket, &tg);
        vt_net_forward(tw->net, x, k, 0);
        if (T->feat_out) /* vt_towers_eval_features: the heads' input, batch order */
            vt_net_features(tw->net, T->feat_out + (int64_t)first * vt_net_feature_dim(tw->net), k);
        /* probabilities and losses by the net, before the next pass's inputs (its labels
         * too) may replace these */
        float *prob[VT_MAX_HEADS] = {0};
        float hl[VT_MAX_HEADS] = {0};
        for (int h = 0; h < nc->nheads && T->probs_out; h++)
            if (T->probs_out[h])
                prob[h] = T->probs_out[h] + (int64_t)first * nc->head[h].classes;
        vt_net_outputs(tw->net, prob, tw->loss_clip, hl, &tg);
        if (first + chunk < end)
            ticket = vt_tw_stage_issue(tw, b, first + chunk, VT_MIN(chunk, end - first - chunk));
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
    vt_tw_stage_done(tw);
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
    set_bn_sync(tw, 0);
    uint64_t ticket = vt_tw_stage_issue(tw, b, 0, chunk);
    for (int first = 0; first < b->n; first += chunk) {
        int k = VT_MIN(chunk, b->n - first);
        vt_targets tg;
        const float *x = vt_tw_stage_take(tw, b, first, k, ticket, &tg);
        T->bn_seen += k;
        vt_net_set_bn_momentum(tw->net, (float)k / (float)T->bn_seen);
        vt_net_forward(tw->net, x, k, 1);
        if (first + chunk < b->n)
            ticket = vt_tw_stage_issue(tw, b, first + chunk, VT_MIN(chunk, b->n - first - chunk));
    }
    vt_tw_stage_done(tw);
    vt_backend_sync(tw->be);
    vt_net_set_bn_momentum(tw->net, 0);
    set_bn_sync(tw, 1);
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
    if (tw->be) {
        vt_tw_free_stage(tw);
        vt_backend_free_ptr(tw->be, tw->flag_dev);
        vt_backend_free_ptr(tw->be, tw->buf_dev);
        tw->flag_dev = tw->buf_dev = NULL;
        host_buf_free(tw, tw->logits); /* pinned ones through their backend, before it goes */
        host_buf_free(tw, tw->buf_chk);
    } else {
        free(tw->logits);
    }
    tw->logits = tw->buf_chk = NULL;
    free(tw->buf_saved);
    tw->buf_saved = NULL;
    tw->buf_saved_n = 0;
    vt_optim_free(&tw->opt);
    vt_net_free(&tw->net);
    vt_backend_free(&tw->be);
    free(tw->loss_clip);
    tw->loss_clip = NULL;
}

void *vt_tw_tower_main(void *arg) {
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
        if (cmd != CMD_TRAIN && cmd != CMD_INIT && cmd != CMD_NONE && tw->be)
            settle(tw, 1); /* a late gate first (vt_tw_run_cmd) */
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
        case CMD_SETTLE: /* done above */
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
void vt_tw_run_cmd(vt_towers *T, tower_cmd cmd) {
    pthread_mutex_lock(&T->mu);
    T->cmd = cmd;
    T->done = 0;
    T->gen++;
    pthread_cond_broadcast(&T->cv_go);
    while (T->done < T->n)
        pthread_cond_wait(&T->cv_done, &T->mu);
    pthread_mutex_unlock(&T->mu);
}

uint64_t vt_towers_dropout_base(uint64_t seed, long long step) {
    return vt_hash64(seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)step));
}
