/*
 * tower_world.c: the world of ranks (tower.h, "Several processes") — what the ranks
 * exchange: device lists and budgets at init (every rank then plans the same global
 * batch), every phase's ok or error, each rank's clip count before a training step
 * (holes from failed decodes) and its figures after it. None of it runs in a one-process
 * run. (VT_CHECK_REPLICAS's hash of each rank's replica is tower.c's: it runs on a tower's
 * thread, and this file never calls back into the towers.) It must never let
 * one rank go on when another failed, and never let two ranks step different batches.
 */
#include <string.h>

#include "base/common.h"
#include "pipeline/parallel/mpi.h"
#include "pipeline/parallel/towers/tower_impl.h"

/* What one process tells the others at init: its towers, or why it has none. */
typedef struct rank_devs {
    int32_t ok, n;
    char err[480];
    vt_device dev[VT_MAX_DEVICES];
    vt_slice_dev sd[VT_MAX_DEVICES];
} rank_devs;

/* Every rank's ok and error after a phase of init: 0 when all are fine, else -1 with err
 * naming the first rank that failed (the same message on every rank). */
int vt_tw_world_status(vt_towers *T, int ok, char *err, size_t errlen, const char *phase) {
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
int vt_tw_world_devices(vt_towers *T, int ok, const vt_slice_dev *sd_local, char *err,
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

/* Rank q's k clips over its towers, in proportion to their planned slices (exactly
 * those when nothing is missing): count[g] for q's towers. */
void vt_tw_split_rank(const vt_towers *T, int q, const int *planned, int k, int *count) {
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

/* Several processes: this rank's part of b under p must be the one its loader decoded. */
void vt_tw_check_part(const vt_towers *T, const vt_batch *b, const vt_plan *p, int *planned) {
    int lo, hi;
    vt_tw_rank_part(T, p, b->npos, planned, &lo, &hi);
    VT_CHECK(b->part_lo == lo && b->part_hi == hi && b->n <= hi - lo,
             "batch %lld of epoch %lld holds positions [%d, %d) (%d clips) of %d, but this rank's "
             "towers own [%d, %d): give the loader vt_towers_part_train/_eval",
             (long long)b->index, (long long)b->epoch, b->part_lo, b->part_hi, b->n, b->npos,
             lo, hi);
}

/* Several processes, before a training step: every rank's clip count for this batch
 * (checked to be the same batch everywhere) -> count[g] for every tower. Returns the
 * step's clips over all ranks. */
int vt_tw_world_counts(vt_towers *T, const vt_batch *b, const vt_plan *p, int *count) {
    typedef struct rank_count { int64_t epoch, index; int32_t n, npos; } rank_count;
    int planned[VT_MAX_DEVICES];
    vt_tw_check_part(T, b, p, planned);
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
        vt_tw_split_rank(T, q, planned, r->n, count);
        total += r->n;
    }
    free(all);
    return total;
}

/* Several processes: every rank's figures into st (the same on every rank). */
void vt_tw_world_figs(vt_towers *T, const rank_fig *mine, vt_step_stats *st) {
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
