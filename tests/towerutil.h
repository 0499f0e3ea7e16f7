/*
 * towerutil.h: towers built in a test's own process (pipeline/parallel/towers/tower.h)
 * on CPU towers — the device list of N `cpu` towers of one thread each, a batch of random
 * clips to step them on, and a replica's whole state read back (test_grad_late.c,
 * test_nonfinite_towers.c, test_ckpt.c, test_memcap.c, test_balance.c,
 * test_cuda_train_gpu.c).
 * Header-only (static inline), like testutil.h.
 */
#ifndef VT_TOWERUTIL_H
#define VT_TOWERUTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "models/net.h"
#include "models/optim.h"
#include "pipeline/parallel/towers/tower.h"

/* cfg's devices: n towers "cpu0".."cpu<n-1>" of the cpu backend, one thread each, no
 * budget (0: unlimited) and no emulated slowdown; the caller may set budgets after. */
static inline void vt_test_cpu_towers(vt_towers_cfg *cfg, int n) {
    cfg->devices.n = n;
    for (int i = 0; i < n; i++) {
        vt_device *d = &cfg->devices.dev[i];
        memset(d, 0, sizeof *d);
        snprintf(d->name, sizeof d->name, "cpu%d", i);
        snprintf(d->backend, sizeof d->backend, "cpu");
        d->ordinal = i;
        d->threads = 1;
        d->slowdown = 1;
    }
}

/* b: n clips of t x h x w of standard normal values, then their labels of one softmax
 * head of `classes` (uniform), drawn in that order from one vt_rng seeded with seed. The
 * clips and labels are b's own (vt_test_batch_free). */
static inline void vt_test_batch_make(vt_batch *b, int n, int t, int h, int w, int classes,
                                      uint64_t seed) {
    memset(b, 0, sizeof *b);
    b->n = b->capacity = n;
    b->t = t;
    b->h = h;
    b->w = w;
    b->nheads = 1;
    b->head_classes[0] = classes;
    b->head_loss[0] = VT_LOSS_SOFTMAX_CE;
    const int64_t cf = vt_batch_clip_floats(b);
    b->x = vt_malloc((size_t)(cf * n) * sizeof(float));
    b->label[0] = vt_malloc((size_t)n * sizeof(int32_t));
    vt_rng r;
    vt_rng_seed(&r, seed);
    for (int64_t i = 0; i < cf * n; i++)
        b->x[i] = (float)vt_rng_normal(&r);
    for (int i = 0; i < n; i++)
        b->label[0][i] = (int32_t)vt_rng_below(&r, (uint32_t)classes);
}

/* Frees what vt_test_batch_make gave b. */
static inline void vt_test_batch_free(vt_batch *b) {
    free(b->x);
    free(b->label[0]);
    b->x = NULL;
    b->label[0] = NULL;
}

/* Replica r's parameters, buffers and optimizer state in one host array (malloc'd; CPU
 * towers hold them in host memory), its length in *n and the optimizer's step count in
 * *step. */
static inline float *vt_test_replica_state(vt_towers *t, int r, int64_t *n, int64_t *step) {
    vt_net *net = vt_towers_net(t, r);
    vt_optim *o = vt_towers_optim(t, r);
    int64_t np = vt_net_num_params(net), nb = vt_net_num_buffers(net), ns = vt_optim_state_len(o);
    *n = np + nb + ns;
    float *s = vt_malloc((size_t)VT_MAX(*n, 1) * sizeof(float));
    memcpy(s, vt_net_params(net), (size_t)np * sizeof(float));
    memcpy(s + np, vt_net_buffers(net), (size_t)nb * sizeof(float));
    memcpy(s + np + nb, vt_optim_state(o), (size_t)ns * sizeof(float));
    *step = vt_optim_step_count(o);
    return s;
}

#endif
