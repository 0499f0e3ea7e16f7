/*
 * backend_waits.c: VT_HOST_WAITS (backend_waits.h) — a copy of a backend's op table per
 * backend, whose waiting slots count before they call the backend's own, and whose
 * destroy prints the counts, puts the backend's table back and frees the copy.
 *
 * It must never change what an op does: every slot calls the backend's own, and a slot
 * the backend leaves NULL stays NULL (upload_wait: the towers then stage no uploads),
 * except synchronize and to_host_async, which the CPU backends leave NULL and the callers
 * then skip or replace by to_host (backend.h): those get a slot that calls the backend's
 * own when it has one and else does what the caller would have done.
 */
#include "models/backend_waits.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"

/* be->i points at `i`, the first member: a slot finds its copy from be. */
typedef struct waits_i {
    vt_backend_i i;
    const vt_backend_i *real;
    int64_t n[VT_WAIT_KINDS], updates;
} waits_i;

static const char *const kind_names[VT_WAIT_KINDS] = {"to_host", "synchronize", "sumsq",
                                                     "upload_wait"};

static waits_i *w_of(vt_backend *be) { return (waits_i *)(void *)be->i; }
/* a tower's bucket helper may copy on its own thread while the tower runs ops */
static void bump(int64_t *n) { __atomic_fetch_add(n, 1, __ATOMIC_RELAXED); }

int vt_backend_waits_enabled(void) {
    const char *e = getenv("VT_HOST_WAITS");
    return e && *e && strcmp(e, "0") != 0;
}

static void w_to_host(vt_backend *be, void *dst, const void *src, size_t bytes) {
    waits_i *w = w_of(be);
    bump(&w->n[VT_WAIT_TO_HOST]);
    w->real->to_host(be, dst, src, bytes);
}
static void w_to_host_async(vt_backend *be, void *dst, const void *src, size_t bytes) {
    waits_i *w = w_of(be);
    if (w->real->to_host_async)
        w->real->to_host_async(be, dst, src, bytes);
    else /* a CPU backend: its copy is done at once, nothing to wait for */
        w->real->to_host(be, dst, src, bytes);
}
static void w_synchronize(vt_backend *be) {
    waits_i *w = w_of(be);
    bump(&w->n[VT_WAIT_SYNCHRONIZE]);
    if (w->real->synchronize)
        w->real->synchronize(be);
}
static double w_sumsq(vt_backend *be, const float *x, int64_t n) {
    waits_i *w = w_of(be);
    bump(&w->n[VT_WAIT_SUMSQ]);
    return w->real->sumsq(be, x, n);
}
static void w_upload_wait(vt_backend *be) {
    waits_i *w = w_of(be);
    bump(&w->n[VT_WAIT_UPLOAD]);
    w->real->upload_wait(be);
}
static void w_sgd(vt_backend *be, float *p, const float *g, float *buf, int64_t n, float lr,
                  float mom, float damp, float wd, int nesterov, int64_t step,
                  const vt_grad_gate *gate) {
    waits_i *w = w_of(be);
    bump(&w->updates);
    w->real->sgd_update(be, p, g, buf, n, lr, mom, damp, wd, nesterov, step, gate);
}
static void w_rmsprop(vt_backend *be, float *p, const float *g, float *sq, float *buf, int64_t n,
                      float lr, float alpha, float eps, float wd, float mom,
                      const vt_grad_gate *gate) {
    waits_i *w = w_of(be);
    bump(&w->updates);
    w->real->rmsprop_update(be, p, g, sq, buf, n, lr, alpha, eps, wd, mom, gate);
}
static void w_adamw(vt_backend *be, float *p, const float *g, float *m, float *v, int64_t n,
                    float lr, float b1, float b2, float eps, float wd, int64_t step,
                    const vt_grad_gate *gate) {
    waits_i *w = w_of(be);
    bump(&w->updates);
    w->real->adamw_update(be, p, g, m, v, n, lr, b1, b2, eps, wd, step, gate);
}

static void w_destroy(vt_backend *be) {
    waits_i *w = w_of(be);
    int64_t all = 0;
    fprintf(stderr, "VT_HOST_WAITS %s%d: host waits through the op table:", w->real->name,
            be->ordinal);
    for (int k = 0; k < VT_WAIT_KINDS; k++) {
        fprintf(stderr, " %s %lld,", kind_names[k], (long long)w->n[k]);
        all += w->n[k];
    }
    fprintf(stderr, " %lld in all", (long long)all);
    if (w->updates > 0)
        fprintf(stderr, ", %.2f per optimizer update (%lld updates)",
                (double)all / (double)w->updates, (long long)w->updates);
    fprintf(stderr, "\n");
    be->i = w->real;
    free(w);
    if (be->i->destroy)
        be->i->destroy(be);
}

void vt_backend_count_waits(vt_backend *be) {
    if (be->i->destroy == w_destroy)
        return;
    waits_i *w = vt_calloc(1, sizeof *w);
    w->real = be->i;
    w->i = *be->i;
    w->i.to_host = w_to_host;
    w->i.to_host_async = w_to_host_async;
    w->i.synchronize = w_synchronize;
    w->i.sumsq = w_sumsq;
    w->i.upload_wait = be->i->upload_wait ? w_upload_wait : NULL;
    w->i.sgd_update = w_sgd;
    w->i.rmsprop_update = w_rmsprop;
    w->i.adamw_update = w_adamw;
    w->i.destroy = w_destroy;
    be->i = &w->i;
}

int vt_backend_waits(const vt_backend *be, int64_t waits[VT_WAIT_KINDS], int64_t *updates) {
    if (be->i->destroy != w_destroy)
        return -1;
    const waits_i *w = (const waits_i *)(const void *)be->i;
    for (int k = 0; k < VT_WAIT_KINDS; k++)
        waits[k] = __atomic_load_n(&w->n[k], __ATOMIC_RELAXED);
    if (updates)
        *updates = __atomic_load_n(&w->updates, __ATOMIC_RELAXED);
    return 0;
}
