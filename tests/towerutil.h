/*
 * towerutil.h: towers built in a test's own process (pipeline/parallel/towers/tower.h)
 * on CPU towers — the device list of N `cpu` towers of one thread each, and a replica's
 * whole state read back (test_grad_late.c, test_nonfinite_towers.c, test_ckpt.c,
 * test_memcap.c).
 * Header-only (static inline), like testutil.h.
 */
#ifndef VT_TOWERUTIL_H
#define VT_TOWERUTIL_H

#include <stdio.h>
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
