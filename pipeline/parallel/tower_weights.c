/*
 * tower_weights.c: class-weighted softmax losses on the towers (--balance loss,
 * docs/balance.md) — each tower's copy of the class weights, and each step's normaliser,
 * 1 / (the weight sum of the step's clips over every tower of every rank): PyTorch's
 * F.cross_entropy(weight=...) mean over the whole batch, never a tower's own mean
 * (DESIGN.md invariants 1 and 2). It must never let the normaliser depend on the split:
 * the sum is formed from integer class counts, in class order.
 */
#include <string.h>

#include "models/common.h"
#include "pipeline/parallel/mpi.h"
#include "pipeline/parallel/tower_impl.h"

void vt_tw_weights_init(vt_towers *T) {
    const vt_net_cfg *nc = &T->cfg.net;
    for (int h = 0; h < nc->nheads; h++) {
        const float *w = T->cfg.class_weight[h];
        if (!w || nc->head[h].loss != VT_LOSS_SOFTMAX_CE) {
            T->cfg.class_weight[h] = NULL;
            continue;
        }
        T->cw[h] = vt_malloc(sizeof(float) * (size_t)nc->head[h].classes);
        memcpy(T->cw[h], w, sizeof(float) * (size_t)nc->head[h].classes);
        T->cfg.class_weight[h] = T->cw[h]; /* the caller's array may go */
    }
}

void vt_tw_weights_free(vt_towers *T) {
    for (int h = 0; h < VT_MAX_HEADS; h++) {
        free(T->cw[h]);
        T->cw[h] = NULL;
    }
}

void vt_tw_weights_upload(tower *tw) {
    const vt_towers *T = tw->T;
    for (int h = 0; h < T->cfg.net.nheads && !tw->host_mem; h++) {
        if (!T->cw[h])
            continue;
        size_t bytes = sizeof(float) * (size_t)T->cfg.net.head[h].classes;
        tw->cw_dev[h] = vt_backend_alloc_x(tw->be, bytes, "class weights");
        tw->be->i->to_device(tw->be, tw->cw_dev[h], T->cw[h], bytes);
    }
}

void vt_tw_weights_free_dev(tower *tw) {
    for (int h = 0; h < VT_MAX_HEADS; h++) {
        vt_backend_free_ptr(tw->be, tw->cw_dev[h]);
        tw->cw_dev[h] = NULL;
    }
}

void vt_tw_weight_scale(vt_towers *T, const vt_batch *b) {
    const vt_net_cfg *nc = &T->cfg.net;
    for (int h = 0; h < nc->nheads; h++) {
        T->wscale[h] = 0;
        if (!T->cw[h])
            continue;
        const int k = nc->head[h].classes;
        /* counts as doubles: integers below 2^53 add exactly in any order */
        double *count = vt_calloc((size_t)k, sizeof *count);
        for (int i = 0; i < b->n && b->label[h]; i++) {
            int y = b->label[h][i];
            if (y >= 0 && y < k) /* a bad label is the loss op's to report */
                count[y] += 1;
        }
        if (T->world > 1)
            vt_mpi_sum_f64(count, k, "the class counts of a weighted training step");
        double wsum = 0;
        for (int c = 0; c < k; c++)
            wsum += count[c] * (double)T->cw[h][c];
        free(count);
        /* a step whose clips all weigh 0 teaches this head nothing */
        T->wscale[h] = wsum > 0 ? (float)(1.0 / wsum) : 0.0f;
    }
}

void vt_tw_weigh(const tower *tw, vt_targets *tg) {
    const vt_towers *T = tw->T;
    for (int h = 0; h < T->cfg.net.nheads; h++) {
        if (!T->cw[h])
            continue;
        tg->class_weight[h] = tw->host_mem ? T->cw[h] : tw->cw_dev[h];
        tg->weight_scale[h] = T->wscale[h];
    }
}
