/*
 * tower_stage.c: a tower's input staging — device buffers for the clips, labels and
 * targets of one pass (non-host backends; host-memory backends read the batch in
 * place), filled on the backend's copy stream while the previous pass computes, and
 * joined before the pass that reads them. It must never let a copy overwrite inputs
 * that issued work still reads, nor let the caller reuse a batch an upload still reads
 * (vt_tw_stage_done).
 */
#include <string.h>

#include "base/common.h"
#include "pipeline/parallel/towers/tower_impl.h"

void vt_tw_free_stage(tower *tw) {
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
    vt_tw_weights_free_dev(tw);
}

/* Device buffers for the input of `clips` clips (non-host backends only). They are part
 * of bytes_per_clip in the memory plan (input clip and targets). */
void vt_tw_alloc_stage(tower *tw, int clips) {
    const vt_net_cfg *nc = &tw->T->cfg.net;
    vt_tw_free_stage(tw);
    if (tw->host_mem || clips == 0)
        return;
    int64_t cf = (int64_t)3 * nc->clip_t * nc->clip_h * nc->clip_w;
    tw->x_dev = vt_backend_alloc_x(tw->be, (size_t)(cf * clips) * sizeof(float), "input clips");
    for (int h = 0; h < nc->nheads; h++) {
        if (nc->head[h].loss == VT_LOSS_SOFTMAX_CE)
            tw->label_dev[h] = vt_backend_alloc_x(tw->be, (size_t)clips * sizeof(int32_t), "labels");
        if (nc->head[h].loss == VT_LOSS_BCE || nc->soft_targets)
            tw->target_dev[h] = vt_backend_alloc_x(
                tw->be, (size_t)clips * (size_t)nc->head[h].classes * sizeof(float), "targets");
    }
    tw->stage_clips = clips;
    vt_tw_weights_upload(tw); /* the class weights travel with the labels */
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
 * earlier reads. Returns the ticket vt_tw_stage_take joins. */
uint64_t vt_tw_stage_issue(tower *tw, const vt_batch *b, int first, int k) {
    const vt_net_cfg *nc = &tw->T->cfg.net;
    if (tw->host_mem || k == 0)
        return 0;
    if (k > tw->stage_clips)
        vt_tw_alloc_stage(tw, k);
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
 * vt_tw_stage_issue(b, first, k) returned `ticket`: ops issued from here on see them. */
const float *vt_tw_stage_take(tower *tw, const vt_batch *b, int first, int k, uint64_t ticket,
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
void vt_tw_stage_done(tower *tw) {
    if (!tw->host_mem && tw->be->i->upload_wait)
        tw->be->i->upload_wait(tw->be);
}
