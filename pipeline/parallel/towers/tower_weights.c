/*
 * tower_weights.c: class-weighted and logit-adjusted softmax losses on the towers
 * (--balance loss and logit, docs/balance.md) — each tower's copy of the class weights
 * and logit adjustments, and each step's normaliser of the weighted loss,
 * 1 / (the weight sum of the step's clips over every tower of every rank): PyTorch's
 * F.cross_entropy(weight=...) mean over the whole batch, never a tower's own mean
 * (docs/design.md §3.1, §3.2). It must never let the normaliser depend on the split:
 * the sum is formed from integer class counts, in class order.
 */
#include <string.h>

#include "base/common.h"
#include "pipeline/parallel/mpi.h"
#include "pipeline/parallel/towers/tower_impl.h"

/* A host copy of a softmax head's per-class array (class weights, logit adjustments),
 * or NULL; *cfg_ptr then points at the copy (the caller's array may go). */
static float *copy_classes(const vt_towers *T, int h, const float **cfg_ptr) {
    const vt_head_cfg *hc = &T->cfg.net.head[h];
    if (!*cfg_ptr || hc->loss != VT_LOSS_SOFTMAX_CE) {
        *cfg_ptr = NULL;
        return NULL;
    }
    float *c = vt_malloc(sizeof(float) * (size_t)hc->classes);
    memcpy(c, *cfg_ptr, sizeof(float) * (size_t)hc->classes);
    *cfg_ptr = c;
    return c;
}

void vt_tw_weights_init(vt_towers *T) {
    for (int h = 0; h < T->cfg.net.nheads; h++) {
        T->cw[h] = copy_classes(T, h, &T->cfg.class_weight[h]);
        T->la[h] = copy_classes(T, h, &T->cfg.logit_adjust[h]);
    }
}

void vt_tw_weights_free(vt_towers *T) {
    for (int h = 0; h < VT_MAX_HEADS; h++) {
        free(T->cw[h]);
        free(T->la[h]);
        T->cw[h] = T->la[h] = NULL;
    }
}

/* A device copy of a host per-class array, or NULL. */
static float *upload_classes(tower *tw, int h, const float *host, const char *what) {
    if (!host)
        return NULL;
    size_t bytes = sizeof(float) * (size_t)tw->T->cfg.net.head[h].classes;
    float *d = vt_backend_alloc_x(tw->be, bytes, what);
    tw->be->i->to_device(tw->be, d, host, bytes);
    return d;
}

void vt_tw_weights_upload(tower *tw) {
    const vt_towers *T = tw->T;
    for (int h = 0; h < T->cfg.net.nheads && !tw->host_mem; h++) {
        tw->cw_dev[h] = upload_classes(tw, h, T->cw[h], "class weights");
        tw->la_dev[h] = upload_classes(tw, h, T->la[h], "logit adjustments");
    }
}

void vt_tw_weights_free_dev(tower *tw) {
    for (int h = 0; h < VT_MAX_HEADS; h++) {
        vt_backend_free_ptr(tw->be, tw->cw_dev[h]);
        vt_backend_free_ptr(tw->be, tw->la_dev[h]);
        tw->cw_dev[h] = tw->la_dev[h] = NULL;
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
        if (T->la[h])
            tg->logit_adjust[h] = tw->host_mem ? T->la[h] : tw->la_dev[h];
        if (!T->cw[h])
            continue;
        tg->class_weight[h] = tw->host_mem ? T->cw[h] : tw->cw_dev[h];
        tg->weight_scale[h] = T->wscale[h];
    }
}
