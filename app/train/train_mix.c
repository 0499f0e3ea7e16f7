/*
 * train_mix.c: --mixup and --cutmix in the training loop (train.h vt_train_mix_*): the
 * whole batch mixed on the host before the towers slice it, with the draw of the step
 * (pipeline/data/mix.h), so any split of the towers sees the same clips and targets and
 * a resumed run the same draws. It must never mix a part of a batch.
 */
#include "app/train/train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "pipeline/data/mix.h"
#include "pipeline/parallel/mpi.h"

static void mix_cfg(const vt_train *t, vt_mix_cfg *c) {
    memset(c, 0, sizeof *c);
    c->mixup = t->o.mixup;
    c->cutmix = t->o.cutmix;
    c->switch_prob = t->o.mix_switch;
    c->seed = t->o.seed;
}

int vt_train_mix_heads(vt_train *t) {
    vt_mix_cfg c;
    mix_cfg(t, &c);
    if (!vt_mix_on(&c))
        return 0;
    const char *why = vt_mpi_size() > 1
        ? "runs in one process only: a clip's partner is anywhere in the global batch, and "
          "each process of several holds only its towers' part of it"
        : !strcmp(t->o.balance, "loss") ? "does not go with --balance loss (class weights of a "
                                          "mixed target); use --balance sampler"
        : NULL;
    if (why) {
        fprintf(stderr, "vidtrain train: --mixup/--cutmix %s\n", why);
        return 2;
    }
    t->tc.net.soft_targets = 1;
    return 0;
}

int vt_train_mix_draw(const vt_train *t, int64_t step, int h, int w, vt_mix_draw *d) {
    vt_mix_cfg c;
    mix_cfg(t, &c);
    if (!vt_mix_on(&c))
        return 0;
    vt_mix_decide(&c, step, h, w, d);
    return 1;
}

void vt_train_mix_batch(vt_train *t, vt_batch *b, int64_t step) {
    vt_mix_cfg c;
    mix_cfg(t, &c);
    if (!vt_mix_on(&c))
        return;
    float smoothing[VT_MAX_HEADS] = {0};
    for (int h = 0; h < b->nheads; h++) {
        smoothing[h] = t->heads.cfg[h].smoothing;
        if (b->head_loss[h] == VT_LOSS_SOFTMAX_CE && !t->mix_soft[h]) /* the loader's size */
            t->mix_soft[h] = vt_calloc((size_t)b->capacity * (size_t)b->head_classes[h],
                                       sizeof(float));
    }
    vt_mix_draw d;
    vt_mix_decide(&c, step, b->h, b->w, &d);
    vt_mix_apply(&d, b, t->mix_soft, smoothing);
    for (int h = 0; h < b->nheads; h++)
        if (b->head_loss[h] == VT_LOSS_SOFTMAX_CE)
            b->target[h] = t->mix_soft[h];
}

void vt_train_mix_done(vt_train *t, vt_batch *b) {
    for (int h = 0; h < b->nheads; h++)
        if (b->head_loss[h] == VT_LOSS_SOFTMAX_CE && b->target[h] == t->mix_soft[h])
            b->target[h] = NULL;
}

void vt_train_mix_free(vt_train *t) {
    for (int h = 0; h < VT_MAX_HEADS; h++) {
        free(t->mix_soft[h]);
        t->mix_soft[h] = NULL;
    }
}
