/*
 * tower_plan.c: the towers' plan — the splitter's view of each tower, the printed plan,
 * the slices of a batch of any size under a plan, the schedule that makes a re-plan
 * take effect at the same batch on every rank (loaders decoding ahead keep the plan
 * they started with), the positions of a batch each rank decodes, and an explicit
 * re-plan. It must never let two ranks disagree on the plan of a batch: everything here
 * is a pure function of numbers every rank holds.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/common.h"
#include "pipeline/parallel/mpi.h"
#include "pipeline/parallel/reduce.h"
#include "pipeline/parallel/towers/tower_impl.h"

/* The splitter's view of this process's towers (budgets -> clips per pass). */
void vt_tw_fill_split_devs(vt_towers *T, vt_slice_dev *sd) {
    for (int i = 0; i < T->n; i++) {
        const vt_device *d = &T->cfg.devices.dev[i];
        vt_slice_dev *s = &sd[i];
        memset(s, 0, sizeof *s);
        snprintf(s->name, sizeof s->name, "%s", d->name);
        s->budget = d->budget;
        /* memory, and on CUDA towers cuDNN's 2^31-element tensor cap and the backend's
         * workspace reserve (slices.h) */
        T->ckpt[i] = vt_ckpt_choose(T->cfg.ckpt_act, &T->mp, T->have_mp_ckpt ? &T->mp_ckpt : NULL,
                                    d, &s->max_clips);
        s->speed = d->speed;
    }
}

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
    for (int i = 0; i < t->n; i++) /* activation checkpointing where it is on */
        if (t->ckpt[i])
            fprintf(f, "  tower %s: activation checkpointing on (--checkpoint-act %s): %s per "
                    "clip, the blocks recomputed in backward\n", t->cfg.devices.dev[i].name,
                    vt_ckpt_mode_name(t->cfg.ckpt_act),
                    vt_fmt_bytes(a, sizeof a, t->mp_ckpt.bytes_per_clip));
    vt_plan_print(&t->plan, t->sd, f);
    /* what the towers do with batch norm: nothing for a net without it (the transformers,
     * tiny_nobn) or with every layer frozen (fine-tuning's default: eval-mode statistics,
     * a clip's output its own), whatever --sync-bn says */
    int frozen = 0;
    const int nbn = t->n > 0 && t->tw[0].net ? vt_net_num_bn(t->tw[0].net, &frozen) : 0;
    const char *bn = nbn == 0         ? "none in the model"
                     : frozen == nbn  ? "frozen (running statistics: nothing to sync)"
                     : t->cfg.sync_bn ? "synced across towers per pass"
                                      : "per tower (--no-sync-bn); running stats averaged by "
                                        "clip count after each step";
    fprintf(f, "  towers: %d, reducer %s, batch norm %s; sums over clips %s\n", t->ng,
            t->red->i->name, bn,
            t->cfg.net.exact ? "exact (the same bits on any split)"
                             : "in float (equal to one device to rounding)");
}

void vt_towers_plan_line(const vt_towers *t, char *buf, size_t n) {
    vt_plan_format(&t->plan, t->sd, buf, n);
}

/* Slices of n clips over every tower under plan p: p's own when n is its batch, else
 * p's shares rescaled. */
void vt_tw_slices_for(const vt_towers *T, const vt_plan *p, int n, int *slice) {
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
void vt_tw_plan_at(vt_towers *T, int64_t epoch, int64_t batch, vt_plan *out) {
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
void vt_tw_schedule(vt_towers *T, const vt_plan *p) {
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
void vt_tw_rank_part(const vt_towers *T, const vt_plan *p, int npos, int *planned, int *lo,
                     int *hi) {
    vt_tw_slices_for(T, p, npos, planned);
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
    vt_tw_plan_at(T, epoch, batch, &p);
    vt_tw_rank_part(T, &p, npos, planned, lo, hi);
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
    vt_tw_rank_part(T, &p, npos, planned, lo, hi);
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
