/*
 * gpupair.h: what the tests that hold the cuda backend's ops and training steps to
 * cpu-ref's share (test_vit_gpu.c, test_mvit_gpu.c) — a float array made with the same
 * values on both backends (a pair), the cuda result compared with cpu-ref's (NMSE or bit
 * for bit), host copies compared by NMSE, and whole training steps of a model on cuda
 * against a CPU backend; under BF16 (G a cuda backend at BF16), [A] arrays of bf16-exact
 * values (amake) and their comparison widened to float (acmp). Also test_cuda_train_gpu.c's
 * steps of the CNNs (net_vs_cpu_opts: dropout, weight decay, BN statistics) and
 * test_grad_gate_gpu.c's pairs of normal values (pmake_normal). Header-only (static
 * inline), like testutil.h; it needs a build with CUDA (include it after the test's
 * `#ifndef VT_HAVE_CUDA` skip).
 *
 * The test sets R (cpu-ref) and G (a cuda backend; G may be swapped, as test_vit_gpu's
 * BF16 checks do) and seeds rng before its first pair. The tolerances are the test's own
 * (its module comment says why each is that size); only BIT and BIT_NAN are cmp's.
 */
#ifndef VT_GPUPAIR_H
#define VT_GPUPAIR_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "models/backend.h"
#include "models/bf16.h"
#include "models/cuda/backend_cuda.h"
#include "models/net.h"
#include "models/optim.h"
#include "models/registry.h"
#include "tests/testutil.h"

#define BIT 0.0
#define BIT_NAN -1.0 /* bit for bit, NaNs allowed where cpu-ref has a NaN (any NaN: cmp) */
#define NCLASS 5     /* the classes of net_vs_cpu's models */

static vt_backend *R, *G;
static vt_rng rng;

/* A float array on both backends, the same values (levels > 0: drawn from that many
 * integers, so windows tie; nans > 0: about one value in nans a NaN). */
typedef struct pair { float *r, *g; int64_t n; } pair;
static inline pair pmake_q(int64_t n, float lo, float hi, int levels, int nans) {
    float *h = vt_malloc((size_t)VT_MAX(n, 1) * 4);
    for (int64_t i = 0; i < n; i++)
        h[i] = levels ? (float)vt_rng_below(&rng, (uint32_t)levels)
                      : lo + (hi - lo) * (float)vt_rng_uniform(&rng);
    for (int64_t i = 0; nans > 0 && i < n; i++)
        if (vt_rng_below(&rng, (uint32_t)nans) == 0)
            h[i] = NAN;
    pair p = {vt_backend_alloc_x(R, (size_t)VT_MAX(n, 1) * 4, "ref"),
              vt_backend_alloc_x(G, (size_t)VT_MAX(n, 1) * 4, "cuda"), n};
    R->i->to_device(R, p.r, h, (size_t)n * 4);
    G->i->to_device(G, p.g, h, (size_t)n * 4);
    vt_backend_sync(G);
    free(h);
    return p;
}
static inline pair pmake(int64_t n, float lo, float hi) { return pmake_q(n, lo, hi, 0, 0); }
/* A float array on both backends of scale x standard normal values; the values also in
 * *host (the caller frees it). */
static inline pair pmake_normal(int64_t n, float scale, float **host) {
    float *h = vt_malloc((size_t)VT_MAX(n, 1) * 4);
    for (int64_t i = 0; i < n; i++)
        h[i] = (float)(scale * vt_rng_normal(&rng));
    pair p = {vt_backend_alloc_x(R, (size_t)VT_MAX(n, 1) * 4, "ref"),
              vt_backend_alloc_x(G, (size_t)VT_MAX(n, 1) * 4, "cuda"), n};
    R->i->to_device(R, p.r, h, (size_t)n * 4);
    G->i->to_device(G, p.g, h, (size_t)n * 4);
    vt_backend_sync(G);
    *host = h;
    return p;
}
static inline void pfree(pair *p) {
    vt_backend_free_ptr(R, p->r);
    vt_backend_free_ptr(G, p->g);
}
/* The cuda result against cpu-ref: NMSE <= tol, and tol 0 means bit for bit (BIT_NAN: bit
 * for bit where cpu-ref's output holds NaNs, at least one, and a NaN where cpu-ref has one:
 * its payload is the hardware's, not the op's — x86 keeps an input NaN's through float
 * arithmetic, a GPU's float unit may give its canonical 0x7fffffff — so any NaN will do). */
static inline void cmp(const char *what, const pair *p, double tol) {
    float *h = vt_malloc((size_t)VT_MAX(p->n, 1) * 4), *r = vt_malloc((size_t)VT_MAX(p->n, 1) * 4);
    G->i->to_host(G, h, p->g, (size_t)p->n * 4);
    R->i->to_host(R, r, p->r, (size_t)p->n * 4);
    const double e = vt_nmse(h, r, p->n);
    int64_t diff = 0, finite = 1, nans = 0;
    for (int64_t i = 0; i < p->n; i++) {
        diff += memcmp(&h[i], &r[i], 4) != 0 && !(tol == BIT_NAN && isnan(h[i]) && isnan(r[i]));
        finite &= isfinite(h[i]) != 0;
        nans += isnan(r[i]) != 0;
    }
    printf("  %-40s n=%-8lld nmse %.2e, %lld elements not bit-equal\n", what, (long long)p->n, e,
           (long long)diff);
    if (tol == BIT_NAN)
        TCHECK(nans > 0, "%s: no NaN in cpu-ref's output (the case checks nothing)", what);
    else
        TCHECK(finite, "%s: non-finite values", what);
    if (tol == BIT || tol == BIT_NAN)
        TCHECK(diff == 0, "%s: %lld elements differ (bit for bit expected)", what, (long long)diff);
    else
        TCHECK(e <= tol, "%s: nmse %.3e > %.1e", what, e, tol);
    free(h);
    free(r);
}

/* BF16: the n host values h (bf16-exact) into the [A] pair p: float on cpu-ref, bf16 on
 * cuda. */
static inline void aput(const pair *p, const float *h) {
    float *t = vt_backend_alloc_x(G, (size_t)VT_MAX(p->n, 1) * 4, "cuda f32");
    R->i->to_device(R, p->r, h, (size_t)p->n * 4);
    G->i->to_device(G, t, h, (size_t)p->n * 4);
    G->i->act_from_f32(G, p->g, t, p->n);
    vt_backend_sync(G);
    vt_backend_free_ptr(G, t);
}

/* BF16 (G is then a cuda backend at BF16): an [A] array, bf16-exact values, float on
 * cpu-ref and bf16 on cuda (in an allocation of n floats). */
static inline pair amake(int64_t n, float lo, float hi) {
    float *h = vt_malloc((size_t)VT_MAX(n, 1) * 4);
    for (int64_t i = 0; i < n; i++)
        h[i] = vt_bf16_round(lo + (hi - lo) * (float)vt_rng_uniform(&rng));
    pair p = {vt_backend_alloc_x(R, (size_t)VT_MAX(n, 1) * 4, "ref"),
              vt_backend_alloc_x(G, (size_t)VT_MAX(n, 1) * 4, "cuda"), n};
    aput(&p, h);
    free(h);
    return p;
}
/* An [A] result against cpu-ref's FP32 one from the same values: widened to float first. */
static inline void acmp(const char *what, const pair *p, double tol) {
    pair w = {p->r, vt_backend_alloc_x(G, (size_t)VT_MAX(p->n, 1) * 4, "cuda f32"), p->n};
    G->i->act_to_f32(G, w.g, p->g, p->n);
    vt_backend_sync(G);
    cmp(what, &w, tol);
    vt_backend_free_ptr(G, w.g);
}

/* ------------------------------------------------------------------ whole steps */

/* What a whole-step comparison holds the cuda side to. */
typedef struct step_tol {
    double loss_rel; /* the per-clip loss, relative */
    double grad;     /* NMSE: every gradient, the parameters after the step, eval logits */
    double tensor;   /* > 0: each parameter tensor's gradient NMSE too */
    int bf16;        /* the cuda side at BF16 (the reference stays FP32) */
    double floor;    /* > 0: a tensor's NMSE divides by at least floor x its share (by
                        elements) of all gradients' sum of squares: a tensor whose true
                        gradient is ~0 is held to that absolute scale */
    double param;    /* > 0: NMSE of the parameters (and BN statistics) after a step; 0:
                        grad's */
} step_tol;

/* What net_vs_cpu_opts runs beyond net_vs_cpu (NULL: net_vs_cpu's run). */
typedef struct step_opts {
    float dropout;             /* the net's dropout (vt_net_cfg.dropout) */
    float wd;                  /* SGD's weight decay */
    uint64_t seed0, seed_step; /* step s's dropout seed: seed0 + s seed_step */
    int same_init;             /* first check both sides start from the same weights, bitwise */
} step_opts;

/* n floats of be's memory copied to a fresh host array (the caller frees it). */
static inline float *host_copy(vt_backend *be, const float *src, int64_t n) {
    float *h = vt_malloc((size_t)VT_MAX(n, 1) * sizeof(float));
    if (n)
        be->i->to_host(be, h, src, (size_t)n * sizeof(float));
    return h;
}
/* Host arrays: got finite and NMSE <= tol against want. */
static inline void cmp_host(const char *what, const float *got, const float *want, int64_t n,
                            double tol) {
    const double e = vt_nmse(got, want, n);
    int finite = 1;
    for (int64_t i = 0; i < n; i++)
        finite &= isfinite(got[i]) != 0;
    printf("    %-28s n=%-9lld nmse %.2e\n", what, (long long)n, e);
    TCHECK(finite, "%s: non-finite values", what);
    TCHECK(e <= tol, "%s: nmse %.3e > %.1e", what, e, tol);
}

/* One side of net_vs_cpu: its backend, net, optimizer and device inputs. */
typedef struct side {
    vt_backend *be;
    vt_net *net;
    vt_optim *opt;
    float *x;
    int32_t *label;
} side;

/* Per-tensor gradient NMSE (BF16 against FP32): every parameter tensor within the bound
 * (floor > 0: step_tol's floored NMSE). */
static inline void cmp_tensors(const vt_net *net, const float *got, const float *want,
                               double tol, double floor) {
    double worst = 0, ss = 0;
    int64_t all = 0;
    const char *wname = "";
    for (int i = 0; floor > 0 && i < vt_net_num_tensors(net); i++) {
        const vt_tensor_info *ti = vt_net_tensor(net, i);
        for (int64_t j = 0; !ti->is_buffer && j < ti->numel; j++)
            ss += (double)want[ti->offset + j] * want[ti->offset + j];
        all += ti->is_buffer ? 0 : ti->numel;
    }
    for (int i = 0; i < vt_net_num_tensors(net); i++) {
        const vt_tensor_info *ti = vt_net_tensor(net, i);
        if (ti->is_buffer)
            continue;
        double e = vt_nmse(got + ti->offset, want + ti->offset, ti->numel);
        if (floor > 0) {
            double d = 0, s2 = 0;
            for (int64_t j = 0; j < ti->numel; j++) {
                const double a = got[ti->offset + j], b = want[ti->offset + j];
                d += (a - b) * (a - b);
                s2 += b * b;
            }
            e = d / VT_MAX(VT_MAX(s2, floor * ss * (double)ti->numel / (double)VT_MAX(all, 1)),
                           1e-300);
        }
        TCHECK(e <= tol, "gradient of %s: nmse %.3e > %.1e", ti->name, e, tol);
        if (e > worst)
            worst = e, wname = ti->name;
    }
    printf("    %-28s worst nmse %.2e (%s)\n", "gradients per tensor", worst, wname);
}

/* model at t x h x w, batch clips: `steps` SGD steps (momentum 0.9, lr 0.05) on cuda and
 * on ref_name from the same weights, clips (rng's draws) and drop-path and dropout draws,
 * held to tol; o (NULL: dropout as the model's default, no weight decay, dropout seeds
 * 1000 + 16 s) sets the rest. The losses, gradients and parameters (BN's statistics too)
 * are compared every step, the eval logits at the end. */
static inline void net_vs_cpu_opts(const char *model, const char *ref_name, int t, int h,
                                   int w, int batch, float drop_path, int steps,
                                   const step_tol *tol, const step_opts *o) {
    const int bf16 = tol->bf16;
    printf("%s %dx%dx%d batch %d drop path %g: cuda%s vs %s\n", model, t, h, w, batch,
           (double)drop_path, bf16 ? " at BF16" : "", ref_name);
    const double loss_rel = tol->loss_rel, grad_tol = tol->grad;
    const double param_tol = tol->param > 0 ? tol->param : grad_tol;
    const uint64_t seed0 = o ? o->seed0 : 1000, seed_step = o ? o->seed_step : 16;
    vt_net_cfg nc;
    vt_net_cfg_default(&nc, model, NCLASS, t, h, w);
    nc.drop_path = drop_path;
    if (o)
        nc.dropout = o->dropout;
    vt_optim_cfg oc;
    vt_optim_cfg_default(&oc, VT_OPT_SGD);
    oc.momentum = 0.9f;
    if (o)
        oc.wd = o->wd;
    side sd[2] = {{.be = vt_backend_init(ref_name, 0, 0, 0)}, {.be = vt_backend_cuda_init(0, 0)}};
    const int64_t cf = (int64_t)3 * t * h * w;
    for (int k = 0; k < 2; k++) {
        char err[256];
        vt_net_cfg ck = nc;
        ck.precision = k == 1 && bf16 ? VT_PREC_BF16 : VT_PREC_FP32;
        sd[k].net = vt_net_init(&ck, sd[k].be, batch, err, sizeof err);
        TCHECK(sd[k].net != NULL, "vt_net_init %s on %s: %s", model, sd[k].be->i->name, err);
        if (!sd[k].net)
            goto end;
        vt_net_init_weights(sd[k].net, 77);
        sd[k].opt = vt_optim_init(&oc, sd[k].be, vt_net_num_params(sd[k].net));
        sd[k].x = vt_backend_alloc_x(sd[k].be, (size_t)(cf * batch) * 4, "clips");
        sd[k].label = vt_backend_alloc_x(sd[k].be, (size_t)batch * 4, "labels");
    }
    const int64_t np = vt_net_num_params(sd[0].net), nb = vt_net_num_buffers(sd[0].net);
    if (o && o->same_init) {
        TCHECK(vt_net_num_params(sd[1].net) == np, "same parameter count");
        float *pg = host_copy(sd[1].be, vt_net_params(sd[1].net), np);
        float *pr = host_copy(sd[0].be, vt_net_params(sd[0].net), np);
        TCHECK(!memcmp(pg, pr, (size_t)np * 4), "initial weights are bitwise equal");
        free(pg), free(pr);
    }
    float *x = vt_malloc((size_t)(cf * batch) * 4), loss[2][16];
    int32_t lab[16];
    for (int step = 0; step < steps; step++) {
        for (int64_t i = 0; i < cf * batch; i++)
            x[i] = (float)vt_rng_normal(&rng);
        for (int i = 0; i < batch; i++)
            lab[i] = (int32_t)vt_rng_below(&rng, NCLASS);
        for (int k = 0; k < 2; k++) {
            side *s = &sd[k];
            s->be->i->to_device(s->be, s->x, x, (size_t)(cf * batch) * 4);
            s->be->i->to_device(s->be, s->label, lab, (size_t)batch * 4);
            vt_targets tg;
            memset(&tg, 0, sizeof tg);
            tg.label[0] = s->label;
            vt_net_zero_grad(s->net);
            vt_net_set_dropout_seed(s->net, seed0 + (uint64_t)step * seed_step);
            vt_net_forward(s->net, s->x, batch, 1);
            vt_net_loss(s->net, loss[k], NULL, &tg, 1.0f / (float)batch);
            vt_net_backward(s->net);
        }
        printf("  step %d\n", step + 1);
        double worst = 0;
        for (int i = 0; i < batch; i++)
            worst = VT_MAX(worst, fabs((double)loss[1][i] - loss[0][i]) /
                                      VT_MAX(fabs((double)loss[0][i]), 1e-3));
        printf("    %-28s max rel diff %.2e (cuda %.6f ref %.6f)\n", "loss per clip", worst,
               (double)loss[1][0], (double)loss[0][0]);
        TCHECK(worst <= loss_rel, "%s step %d: loss differs by %.3e", model, step + 1, worst);
        float *gg = host_copy(sd[1].be, vt_net_grads(sd[1].net), np);
        float *gr = host_copy(sd[0].be, vt_net_grads(sd[0].net), np);
        cmp_host("gradients", gg, gr, np, grad_tol);
        if (tol->tensor > 0)
            cmp_tensors(sd[0].net, gg, gr, tol->tensor, tol->floor);
        free(gg), free(gr);
        for (int k = 0; k < 2; k++)
            vt_optim_step(sd[k].opt, vt_net_params(sd[k].net), vt_net_grads(sd[k].net), 0.05f);
        float *pg = host_copy(sd[1].be, vt_net_params(sd[1].net), np);
        float *pr = host_copy(sd[0].be, vt_net_params(sd[0].net), np);
        cmp_host("parameters after the step", pg, pr, np, param_tol);
        free(pg), free(pr);
        if (nb) {
            float *bg = host_copy(sd[1].be, vt_net_buffers(sd[1].net), nb);
            float *br = host_copy(sd[0].be, vt_net_buffers(sd[0].net), nb);
            cmp_host("BN running statistics", bg, br, nb, param_tol);
            free(bg), free(br);
        }
    }
    for (int k = 0; k < 2; k++)
        vt_net_forward(sd[k].net, sd[k].x, batch, 0);
    {
        float *zg = host_copy(sd[1].be, vt_net_logits(sd[1].net, 0), (int64_t)batch * NCLASS);
        float *zr = host_copy(sd[0].be, vt_net_logits(sd[0].net, 0), (int64_t)batch * NCLASS);
        cmp_host("eval logits", zg, zr, (int64_t)batch * NCLASS, grad_tol);
        free(zg), free(zr);
    }
    {
        vt_cuda_mem_stats ms;
        vt_cuda_mem_stats_get(sd[1].be, &ms);
        char a[32], b[32];
        printf("  cuda memory: high water %s, counted %s, %lld cudaMalloc, %lld cache hits, %d "
               "conv shapes\n", vt_fmt_bytes(a, sizeof a, ms.high_water),
               vt_fmt_bytes(b, sizeof b, sd[1].be->high_water), (long long)ms.device_mallocs,
               (long long)ms.cache_hits, ms.conv_shapes);
    }
    free(x);
end:
    for (int k = 0; k < 2; k++) {
        vt_backend_free_ptr(sd[k].be, sd[k].x);
        vt_backend_free_ptr(sd[k].be, sd[k].label);
        vt_optim_free(&sd[k].opt);
        vt_net_free(&sd[k].net);
        vt_backend_free(&sd[k].be);
    }
}

/* net_vs_cpu_opts with no options (test_vit_gpu's, test_mvit_gpu's runs). */
static inline void net_vs_cpu(const char *model, const char *ref_name, int t, int h, int w,
                              int batch, float drop_path, int steps, const step_tol *tol) {
    net_vs_cpu_opts(model, ref_name, t, h, w, batch, drop_path, steps, tol, NULL);
}

#endif
