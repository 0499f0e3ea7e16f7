/*
 * train_bn.c: precise BN statistics for a run (train.h vt_train_precise_bn). Training
 * normalises with each batch's statistics, and the running averages that evaluation
 * uses are those of the TRAINING clips: colour-jittered (contrast scaled down, brightness
 * shifted), at jittered scales. Evaluation sees clean clips, whose activations then sit
 * off the statistics they are normalised with. This pass recomputes the running
 * statistics from clean evaluation-style clips of the training videos (centre crop, the
 * evaluation short side, K uniformly spaced clips per video, no jitter) with the weights
 * as they are — PySlowFast's "precise BN", on the inputs evaluation will see. It changes
 * no parameter and no training step: the next training forwards go on updating the
 * running statistics as before, and a clip that fails to decode here is left out without
 * marking its video bad (the training epochs stay as they were). Its clips are served
 * from (and counted in) the training loader's frame cache. It must never decode or touch
 * a backend itself: the loader (borrowing the training loader's frame cache) and the
 * towers do.
 */
#include "app/train/train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "app/dist.h"
#include "base/common.h"
#include "models/backend.h"
#include "models/net.h"

/* At most this many clips a pass (a large set takes every j-th video): fvcore's
 * precise BN uses 200 batches; 2048 clips settle the running statistics of a 3D-CNN to
 * well under a percent and cost one forward each, no backward. */
#define PRECISE_BN_MAX_CLIPS 2048

/* Replica 0's buffers to or from the host (on its tower's thread). */
typedef struct bufs_job {
    vt_towers *t;
    float *host;
    int64_t n;
    int put; /* 1: host -> replica */
} bufs_job;

static void bufs_on_tower(void *ctx, vt_net *net, vt_optim *opt) {
    (void)opt;
    bufs_job *j = ctx;
    vt_backend *be = vt_towers_backend(j->t, 0);
    if (j->put)
        be->i->to_device(be, vt_net_buffers(net), j->host, (size_t)j->n * sizeof(float));
    else
        be->i->to_host(be, j->host, vt_net_buffers(net), (size_t)j->n * sizeof(float));
    vt_backend_sync(be);
}

/* Rank 0's part: its replica 0's running statistics from the pass's clips. 0, or -1. */
static int lead_pass(vt_train *t) {
    const vt_train_opts *o = &t->o;
    const int K = o->precise_bn;
    char err[1024];
    const int per = VT_MAX(1, PRECISE_BN_MAX_CLIPS / K); /* videos that fit the cap */
    const int every = (t->ntrain + per - 1) / per;
    int n = 0;
    int32_t *idx = vt_malloc(sizeof(int32_t) * (size_t)t->ntrain);
    for (int i = 0; i < t->ntrain; i += every)
        idx[n++] = t->train_idx[i];
    vt_eval_opts eo; /* validation's clips, K per video, one centre crop */
    vt_train_val_opts(&eo, o);
    eo.clips_per_video = K;
    eo.crops = 1;
    vt_loader_cfg lc;
    vt_eval_loader_cfg(&lc, &eo);
    lc.indices = idx;
    lc.nindices = n;
    lc.frames = vt_loader_frame_cache(t->loader); /* the training clips' frames, decoded */
    lc.no_marks = 1; /* a clip that fails here must not drop its video from training */
    vt_towers_host_hook(t->towers, &lc.host_alloc, &lc.host_free, &lc.host_ctx);
    vt_loader *l = vt_loader_init(t->ds, &lc, err, sizeof err);
    free(idx);
    if (!l) {
        fprintf(stderr, "vidtrain train: precise BN: %s\n", err);
        return -1;
    }
    /* A model whose clean clips' statistics are past the exact sums' range (a diverged
     * run: they are NaN, models/xsum.h) keeps the statistics it had, with a word. */
    bufs_job j = {.t = t->towers, .n = vt_net_num_buffers(vt_towers_net(t->towers, 0))};
    float *before = vt_malloc((size_t)VT_MAX(j.n, 1) * sizeof(float));
    j.host = before;
    vt_towers_run_on(t->towers, 0, bufs_on_tower, &j);
    const vt_batch *b;
    int fresh = 1;
    while ((b = vt_loader_next(l)) != NULL) {
        if (b->n == 0)
            continue;
        vt_towers_bn_stats(t->towers, b, fresh);
        fresh = 0;
    }
    vt_loader_free(&l);
    float *after = vt_malloc((size_t)VT_MAX(j.n, 1) * sizeof(float));
    j.host = after;
    vt_towers_run_on(t->towers, 0, bufs_on_tower, &j);
    int64_t bad = 0;
    for (int64_t i = 0; i < j.n; i++)
        bad += !isfinite(after[i]);
    if (bad) {
        fprintf(stderr, "vidtrain train: precise BN: %lld batch-norm statistic(s) of the clean "
                "clips are not finite (the activations are past the sums' range: the model "
                "diverged); the running statistics are kept as they were\n", (long long)bad);
        j.host = before;
        j.put = 1;
        vt_towers_run_on(t->towers, 0, bufs_on_tower, &j);
    }
    free(before);
    free(after);
    return 0;
}

int vt_train_precise_bn(vt_train *t) {
    if (t->o.precise_bn <= 0 || t->ntrain == 0)
        return 0;
    /* Under mpirun rank 0's replica 0 alone forwards (vt_towers_bn_stats): the other
     * ranks decode nothing and take its statistics from the sync, a collective that
     * every rank reaches. */
    if (vt_dist_lead() && lead_pass(t) != 0)
        return -1;
    vt_towers_sync_from(t->towers, 0);
    return 0;
}
