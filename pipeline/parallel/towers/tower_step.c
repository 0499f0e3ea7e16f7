/*
 * tower_step.c: a step as the caller drives it — check the batch, give each tower its
 * clips (its offset in the batch and its global position, which dropout draws by),
 * wake the towers, gather the figures (exchanged between ranks when there are several),
 * and after a training step measure the towers and re-plan (auto and speed policies);
 * also the precise-BN pass over one batch. It must never let a step's B (the 1/B of the
 * loss) or a tower's clips differ from the global plan's, and never decide a re-plan
 * from a number that differs between ranks.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/common.h"
#include "pipeline/parallel/mpi.h"
#include "pipeline/parallel/reduce.h"
#include "pipeline/parallel/towers/tower_impl.h"

static void check_batch(const vt_towers *T, const vt_batch *b) {
    const vt_net_cfg *nc = &T->cfg.net;
    VT_CHECK(b->t == nc->clip_t && b->h == nc->clip_h && b->w == nc->clip_w,
             "batch clips %dx%dx%d, towers built for %dx%dx%d", b->t, b->h, b->w, nc->clip_t,
             nc->clip_h, nc->clip_w);
    VT_CHECK(b->n >= 0 && b->x != NULL, "batch of %d clips without data", b->n);
}

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

static void train_step(vt_towers *T, const vt_batch *b, float lr, vt_step_stats *out, int late) {
    check_batch(T, b);
    double t0 = vt_now();
    int count[VT_MAX_DEVICES]; /* clips of every tower of every process this step */
    vt_step_stats st;
    memset(&st, 0, sizeof st);
    st.ntowers = T->ng;
    int nclips;
    if (T->world > 1) {
        vt_plan p;
        vt_tw_plan_at(T, b->epoch, b->index, &p);
        vt_mpi_set_context("training step %lld (epoch %lld, batch %lld)", (long long)T->step + 1,
                           (long long)b->epoch + 1, (long long)b->index + 1);
        nclips = vt_tw_world_counts(T, b, &p, count);
        T->at_epoch = b->epoch;
        T->at_batch = b->index;
    } else {
        nclips = b->n;
        if (nclips > 0)
            vt_tw_slices_for(T, &T->plan, nclips, count);
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
        T->count_g[g] = count[g];
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
    vt_tw_weight_scale(T, b); /* --balance loss: the whole step's weight sum */
    T->batch = b;
    T->lr = lr;
    T->late = late;
    vt_tw_run_cmd(T, CMD_TRAIN);
    T->step++;
    T->issued++;
    reducer_stats(T, &r1);
    rank_fig mine;
    local_fig(T, &mine, &r0, &r1);
    st.n = nclips;
    st.id = T->issued;
    st.late = 0;
    for (int i = 0; i < T->n; i++)
        st.late |= T->tw[i].gate_late;
    if (!st.late) {
        st.grad_norm = T->tw[0].gnorm[T->issued & 1];
        st.skipped = T->tw[0].gskip[T->issued & 1];
    }
    st.buckets = T->bucket_floats > 0 ? T->tw[0].nbuckets : 0;
    st.buckets_overlapped = T->bucket_floats > 0 ? T->tw[0].noverlap : 0;
    memcpy(st.slice, count, sizeof(int) * (size_t)T->ng);
    if (T->world > 1) {
        vt_tw_world_figs(T, &mine, &st);
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
        vt_tw_check_replicas(T);

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
        vt_tw_schedule(T, &cur);
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

void vt_towers_train_step(vt_towers *T, const vt_batch *b, float lr, vt_step_stats *out) {
    train_step(T, b, lr, out, 0);
}

void vt_towers_train_issue(vt_towers *T, const vt_batch *b, float lr, vt_step_stats *out) {
    train_step(T, b, lr, out, 1);
}

void vt_towers_train_read(vt_towers *T, vt_step_stats *st) {
    if (!st->late)
        return;
    VT_CHECK(st->id == T->issued || st->id == T->issued - 1,
             "the figures of training step %lld read after step %lld: too late (the towers "
             "keep the last two)", (long long)st->id, (long long)T->issued);
    int wait = 0;
    for (int i = 0; i < T->n; i++)
        wait |= T->tw[i].gate_late && T->tw[i].gate_step == st->id;
    if (wait)
        vt_tw_run_cmd(T, CMD_SETTLE);
    st->grad_norm = T->tw[0].gnorm[st->id & 1];
    st->skipped = T->tw[0].gskip[st->id & 1];
    st->late = 0;
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
        vt_tw_check_part(T, b, &p, planned);
        vt_tw_split_rank(T, T->me, planned, b->n, count);
    } else {
        vt_tw_slices_for(T, &T->plan, b->n, count);
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
    vt_tw_run_cmd(T, CMD_EVAL);
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
    out->grad_norm = T->tw[0].gnorm[T->issued & 1]; /* the last training step's */
    out->step_s = vt_now() - t0;
}

void vt_towers_eval_features(vt_towers *T, const vt_batch *b, float *probs_out[VT_MAX_HEADS],
                             float *feat_out) {
    T->feat_out = feat_out;
    vt_towers_eval_step(T, b, probs_out, NULL);
    T->feat_out = NULL;
}

void vt_towers_bn_stats(vt_towers *T, const vt_batch *b, int fresh) {
    check_batch(T, b);
    if (fresh)
        T->bn_seen = 0;
    T->root = 0;
    T->batch = b;
    vt_tw_run_cmd(T, CMD_BNSTAT);
}
