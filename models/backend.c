/*
 * backend.c: the backend-independent part of vt_backend — the budget-enforcing allocator
 * wrapper that records every live allocation, so a tower's high-water mark is measured,
 * not estimated (docs/design.md §3.3), precision names and switching, and freeing a
 * backend. Construction by name is the registry's (registry.c).
 *
 * It must never call a particular backend: every backend calls this file, so a call
 * back would make a circle (the reason the registry is a file of its own).
 */
#include "models/backend.h"

#include <math.h>
#include <string.h>

#include "base/common.h"

/* Live allocations of all backends: pointer -> (backend, size). A small open table; the
 * number of live allocations is in the hundreds (one per tensor family and activation). */
#include <pthread.h>
typedef struct vt_alloc_rec { void *ptr; vt_backend *be; size_t bytes; } vt_alloc_rec;
static vt_alloc_rec *g_recs;
static size_t g_nrecs, g_caprecs;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

int vt_pool_out(int in, int k, int s, int p, int ceil_mode) {
    int num = in + 2 * p - k;
    int out = (ceil_mode ? (num + s - 1) / s : num / s) + 1;
    /* PyTorch: the last window must start inside the input or left padding. */
    if (ceil_mode && (out - 1) * s >= in + p)
        out--;
    return out;
}

void *vt_backend_alloc(vt_backend *be, size_t bytes) {
    pthread_mutex_lock(&g_lock);
    if (be->budget > 0 && be->in_use + (int64_t)bytes > be->budget) {
        pthread_mutex_unlock(&g_lock);
        return NULL;
    }
    pthread_mutex_unlock(&g_lock);
    void *p = be->i->alloc(be, bytes ? bytes : 1);
    if (!p)
        return NULL;
    pthread_mutex_lock(&g_lock);
    if (g_nrecs == g_caprecs) {
        g_caprecs = g_caprecs ? 2 * g_caprecs : 256;
        g_recs = vt_realloc(g_recs, g_caprecs * sizeof(*g_recs));
    }
    g_recs[g_nrecs++] = (vt_alloc_rec){p, be, bytes};
    be->in_use += (int64_t)bytes;
    if (be->in_use > be->high_water)
        be->high_water = be->in_use;
    pthread_mutex_unlock(&g_lock);
    return p;
}

void *vt_backend_alloc_x(vt_backend *be, size_t bytes, const char *what) {
    void *p = vt_backend_alloc(be, bytes);
    /* within its budget, the system refused it: the process's memory limit, not the
     * budget, is the one to name (a CPU tower's default budget is drawn from it) */
    if (!p && (!be->budget || be->in_use + (int64_t)bytes <= be->budget) &&
        (be->kind == VT_BACKEND_CPU || be->kind == VT_BACKEND_CPU_REF))
        vt_out_of_memory(bytes, what);
    if (!p) {
        char a[32], b[32], c[32];
        VT_DIE("%s%d: cannot allocate %s for %s (holding %s of a %s budget)\n"
               "  hint: lower --batch or --clip, or raise the budget (--mem / --gpu-mem)",
               be->i->name, be->ordinal, vt_fmt_bytes(a, sizeof a, (int64_t)bytes), what,
               vt_fmt_bytes(b, sizeof b, be->in_use),
               be->budget ? vt_fmt_bytes(c, sizeof c, be->budget) : "unlimited");
    }
    return p;
}

void vt_backend_free_ptr(vt_backend *be, void *ptr) {
    if (!ptr)
        return;
    pthread_mutex_lock(&g_lock);
    size_t i = g_nrecs;
    while (i > 0 && g_recs[i - 1].ptr != ptr)
        i--;
    VT_CHECK(i > 0, "%s: freeing a pointer it did not allocate", be->i->name);
    be->in_use -= (int64_t)g_recs[i - 1].bytes;
    g_recs[i - 1] = g_recs[--g_nrecs];
    pthread_mutex_unlock(&g_lock);
    be->i->free(be, ptr);
}

const char *vt_precision_name(vt_precision p) {
    switch (p) {
    case VT_PREC_FP32: return "fp32";
    case VT_PREC_TF32: return "tf32";
    case VT_PREC_BF16: return "bf16";
    }
    return "?";
}

const char vt_precision_help[] =
    "fp32 | tf32 | bf16 (default fp32). tf32: CUDA convs and\n"
    "                      GEMMs on TF32 tensor cores. bf16: mixed precision,\n"
    "                      activations stored as bf16 (about half the memory per\n"
    "                      clip), float32 weights, batch norm, losses, optimizer;\n"
    "                      on CUDA, and on the CPU with --backend cpu-ref (slow:\n"
    "                      for checking numerics; the transformers: CUDA only)";

int vt_precision_parse(const char *name) {
    if (!name)
        return -1;
    if (!strcmp(name, "fp32"))
        return VT_PREC_FP32;
    if (!strcmp(name, "tf32"))
        return VT_PREC_TF32;
    if (!strcmp(name, "bf16"))
        return VT_PREC_BF16;
    return -1;
}

int vt_backend_set_precision(vt_backend *be, vt_precision p, char *err, size_t errlen) {
    if (p == be->precision)
        return 0;
    int ok = be->i->set_precision ? be->i->set_precision(be, p) == 0 : p != VT_PREC_BF16;
    if (!ok && be->kind == VT_BACKEND_CUDA) {
        vt_set_err(err, errlen, "cuda:%d: %s needs a GPU of compute capability 8.0 or newer "
                   "(Ampere, Hopper); use --precision fp32 on this one", be->ordinal,
                   vt_precision_name(p));
        return -1;
    }
    if (!ok) {
        vt_set_err(err, errlen, "the %s backend has no %s mode (bf16 runs on cuda, and on the "
                   "CPU with the reference backend: --backend cpu-ref, slow, for checking "
                   "numerics)", be->i->name, vt_precision_name(p));
        return -1;
    }
    be->precision = p;
    return 0;
}

void vt_backend_free(vt_backend **pbe) {
    if (!pbe || !*pbe)
        return;
    vt_backend *be = *pbe;
    if (be->i->destroy)
        be->i->destroy(be);
    free(be);
    *pbe = NULL;
}

void vt_backend_bn_apply_relu_composed(vt_backend *be, float *out, const float *x,
                                       const float *k, const float *mean, const float *invstd,
                                       const float *gamma, const float *beta, const float *res,
                                       int n, int c, int64_t s) {
    const int64_t nf = (int64_t)n * c * s;
    be->i->bn_apply(be, out, x, k, mean, invstd, gamma, beta, n, c, s);
    if (res)
        be->i->add(be, out, out, res, nf);
    be->i->relu_forward(be, out, out, nf);
}

void vt_backend_relu_backward_skip_composed(vt_backend *be, float *din, float *skip,
                                            const float *dout, const float *out, int64_t n) {
    be->i->relu_backward(be, din, dout, out, n);
    be->i->copy(be, skip, din, (size_t)n * (size_t)vt_precision_act_size(be->precision));
}

void vt_backend_bn_relu_backward_reduce_composed(vt_backend *be, float *sum_dy,
                                                 float *sum_dy_xhat, float *dy,
                                                 const float *dout, const float *y,
                                                 const float *x, const float *k,
                                                 const float *mean, const float *invstd, int n,
                                                 int c, int64_t s) {
    be->i->relu_backward(be, dy, dout, y, (int64_t)n * c * s);
    be->i->bn_backward_reduce(be, sum_dy, sum_dy_xhat, dy, x, k, mean, invstd, n, c, s);
}

/* The arithmetic is optim.c's before the gate (issue 45 item 3): norm = sqrt of the
 * double sum; coef = (double)clip / (norm + 1e-6) (torch's clip_grad_norm_), so a CPU run
 * clips with the very bits it did when the host computed it. */
void vt_backend_grad_gate_host(vt_backend *be, vt_grad_gate *gate, float clip_norm,
                               double skip_at, int skip) {
    (void)be;
    const double norm = sqrt(gate->sumsq);
    gate->norm = norm;
    gate->skip = skip || (skip_at > 0 && !(norm < skip_at));
    gate->coef = clip_norm > 0 ? (double)clip_norm / (norm + 1e-6) : 1.0;
}

void vt_backend_copy_if_skip_host(vt_backend *be, void *dst, const void *src, size_t bytes,
                                  const vt_grad_gate *gate) {
    (void)be;
    if (gate->skip)
        memcpy(dst, src, bytes);
}
