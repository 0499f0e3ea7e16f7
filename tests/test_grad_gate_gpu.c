/*
 * test_grad_gate_gpu.c: the gradient gate's CUDA side (issue 45 item 3; models/grad_gate.h,
 * backend.h grad_sumsq, grad_gate, copy_if_skip and the gated optimizer updates) against
 * cpu-ref, the truth, on the same inputs:
 *   - grad_sumsq: the sum of squares over an arena and over groups added in order (add =
 *     1), in double: the two sum in another order, so within TOL_SUMSQ;
 *   - grad_gate: from the same sumsq (written into both gates), the norm, the clip factor
 *     and the skip bit for bit (IEEE double, each operation rounded once: __dsqrt_rn,
 *     __dadd_rn, __ddiv_rn against the host's sqrt, + and /), for no clip, a clip above
 *     and below the norm, a skip threshold met and not, the caller's skip, inf and NaN
 *     (a NaN as any NaN: its payload is the hardware's);
 *   - copy_if_skip: copies when the gate skips, leaves dst alone when it does not;
 *   - the updates (SGD with momentum, RMSprop, AdamW) read through a gate that clips and
 *     through one that skips: clipped, within the optimizers' tolerance of
 *     test_cuda_ops_gpu (TOL_DOUBLE); skipped, parameters and state unchanged bit for bit.
 * tests/test_grad_late.c checks the gate's logic on the CPU; this waits for a GPU.
 * Skips (77) without a GPU or in a build without CUDA.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/testutil.h"

#ifndef VT_HAVE_CUDA
int main(void) {
    printf("test_grad_gate_gpu: built without CUDA: skipping\n");
    return VT_TEST_SKIP;
}
#else

#include "base/common.h"
#include "models/backend.h"
#include "models/cuda/backend_cuda.h"
#include "models/cuda/cuda_info.h"
#include "models/registry.h"
#include "tests/gpupair.h"

/* TOL_SUMSQ: both sum float squares in double, in another order: a relative difference of
 *   a few ulps of double (~1e-15 per term, n = 1e5 terms: ~1e-13 at worst); a missed or
 *   doubled range is off by a whole range's share (> 1e-3). */
#define TOL_SUMSQ 1e-11
/* TOL_DOUBLE: test_cuda_ops_gpu's for the optimizers (NMSE; ~1 ulp at most). */
#define TOL_DOUBLE 1e-12

typedef struct gates { vt_grad_gate *r, *g; } gates;

static gates gates_new(void) {
    gates x = {vt_backend_alloc_x(R, sizeof(vt_grad_gate), "ref gate"),
               vt_backend_alloc_x(G, sizeof(vt_grad_gate), "cuda gate")};
    memset(x.r, 0, sizeof *x.r);
    G->i->to_device(G, x.g, x.r, sizeof *x.r);
    return x;
}
static void gates_set(gates *x, const vt_grad_gate *v) {
    *x->r = *v;
    G->i->to_device(G, x->g, v, sizeof *v);
}
static vt_grad_gate gate_of_gpu(const gates *x) {
    vt_grad_gate v;
    G->i->to_host(G, &v, x->g, sizeof v);
    return v;
}
static void gates_free(gates *x) {
    vt_backend_free_ptr(R, x->r);
    vt_backend_free_ptr(G, x->g);
}

static void sumsq_groups(void) {
    const int64_t n = 100003;
    float *h;
    pair a = pmake_normal(n, 0.5f, &h);
    float *r = a.r, *g = a.g;
    gates x = gates_new();
    /* the arena, then three groups added in order (optim.c's frozen ranges left out) */
    const int64_t lo[3] = {0, 1000, 70001}, hi[3] = {17, 50000, 100003};
    for (int grouped = 0; grouped < 2; grouped++) {
        if (!grouped) {
            VT_OP(R, grad_sumsq, x.r, r, n, 0);
            VT_OP(G, grad_sumsq, x.g, g, n, 0);
        } else {
            VT_OP(R, grad_sumsq, x.r, r, 0, 0);
            VT_OP(G, grad_sumsq, x.g, g, 0, 0);
            for (int k = 0; k < 3; k++) {
                VT_OP(R, grad_sumsq, x.r, r + lo[k], hi[k] - lo[k], 1);
                VT_OP(G, grad_sumsq, x.g, g + lo[k], hi[k] - lo[k], 1);
            }
        }
        vt_grad_gate v = gate_of_gpu(&x);
        double rel = fabs(v.sumsq - x.r->sumsq) / x.r->sumsq;
        printf("  grad_sumsq %-10s cuda %.17g ref %.17g rel %.2e\n", grouped ? "3 groups" : "arena",
               v.sumsq, x.r->sumsq, rel);
        TCHECK(rel <= TOL_SUMSQ, "grad_sumsq (%s): relative difference %.3e",
               grouped ? "groups" : "arena", rel);
    }
    gates_free(&x);
    pfree(&a);
    free(h);
}

/* The same bits, or both NaN: a NaN's payload is not IEEE's to fix (x86's sqrt keeps its
 * input's, a GPU's double unit may give its canonical NaN), and nothing reads it: a NaN
 * norm skips the step either way. */
static int same_double(double a, double b) {
    return (isnan(a) && isnan(b)) || !memcmp(&a, &b, sizeof a);
}

static void gate_decisions(void) {
    static const struct {
        const char *what;
        double sumsq;
        float clip;
        double skip_at;
        int skip;
    } c[] = {
        {"no clip", 9.0, 0.0f, INFINITY, 0},
        {"clip above the norm", 9.0, 5.0f, INFINITY, 0},
        {"clip below the norm", 1234.5678, 2.0f, INFINITY, 0},
        {"an odd norm", 0.1234567890123, 0.3f, INFINITY, 0},
        {"skip_at met (exact sums)", 17179869184.0 * 17179869184.0, 1.0f, 17179869184.0, 0},
        {"skip_at not met", 16.0, 1.0f, 17179869184.0, 0},
        {"the caller's skip", 4.0, 1.0f, INFINITY, 1},
        {"sumsq inf", INFINITY, 1.0f, INFINITY, 0},
        {"sumsq NaN", NAN, 1.0f, INFINITY, 0},
        {"zero gradients", 0.0, 1.0f, INFINITY, 0},
    };
    gates x = gates_new();
    for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
        vt_grad_gate v = {.sumsq = c[k].sumsq};
        gates_set(&x, &v);
        VT_OP(R, grad_gate, x.r, c[k].clip, c[k].skip_at, c[k].skip);
        VT_OP(G, grad_gate, x.g, c[k].clip, c[k].skip_at, c[k].skip);
        vt_grad_gate gv = gate_of_gpu(&x);
        const int same = same_double(gv.norm, x.r->norm) && same_double(gv.coef, x.r->coef) &&
                         gv.skip == x.r->skip;
        printf("  grad_gate %-26s norm %.17g coef %.17g skip %d: %s\n", c[k].what, x.r->norm,
               x.r->coef, x.r->skip, same ? "bitwise equal" : "DIFFERS");
        TCHECK(same, "grad_gate (%s): cuda norm %.17g coef %.17g skip %d, ref %.17g %.17g %d",
               c[k].what, gv.norm, gv.coef, gv.skip, x.r->norm, x.r->coef, x.r->skip);
    }
    gates_free(&x);
}

static void copy_and_updates(void) {
    const int64_t n = 4099;
    gates x = gates_new();
    for (int skip = 0; skip < 2; skip++) {
        /* copy_if_skip */
        float *dh, *sh;
        pair d = pmake_normal(n, 1.0f, &dh), s = pmake_normal(n, 1.0f, &sh);
        vt_grad_gate v = {.sumsq = 100.0, .norm = 10.0, .coef = 0.25, .skip = skip};
        gates_set(&x, &v);
        VT_OP(G, copy_if_skip, d.g, s.g, (size_t)n * 4, x.g);
        float *got = host_copy(G, d.g, n);
        TCHECK(!memcmp(got, skip ? sh : dh, (size_t)n * 4), "copy_if_skip (skip %d): dst is "
               "not %s", skip, skip ? "the source" : "left alone");
        free(got);
        free(dh);
        free(sh);
        pfree(&d);
        pfree(&s);
        /* the updates through the gate: clipping (coef 0.25) or skipped */
        for (int kind = 0; kind < 3; kind++) {
            /* parameters, gradient, two state arrays (zeros, then a step's worth) */
            static const float scale[4] = {1.0f, 0.1f, 0.0f, 0.0f};
            pair v[4];
            float *h[4];
            for (int i = 0; i < 4; i++)
                v[i] = pmake_normal(n, scale[i], &h[i]);
            float *pr = v[0].r, *pg = v[0].g, *gr = v[1].r, *gg = v[1].g, *ar = v[2].r,
                  *ag = v[2].g, *br = v[3].r, *bg = v[3].g, *ph = h[0], *gh = h[1];
            const char *name = kind == 0 ? "sgd" : kind == 1 ? "rmsprop" : "adamw";
            for (int64_t step = 1; step <= 2; step++) {
                vt_grad_gate w = {.sumsq = 100.0, .norm = 10.0, .coef = 0.25,
                                  .skip = step == 2 && skip};
                gates_set(&x, &w);
                if (kind == 0) {
                    VT_OP(R, sgd_update, pr, gr, ar, n, 0.1f, 0.9f, 0.0f, 1e-4f, 1, step, x.r);
                    VT_OP(G, sgd_update, pg, gg, ag, n, 0.1f, 0.9f, 0.0f, 1e-4f, 1, step, x.g);
                } else if (kind == 1) {
                    VT_OP(R, rmsprop_update, pr, gr, ar, br, n, 0.01f, 0.99f, 1e-8f, 1e-4f, 0.9f,
                          x.r);
                    VT_OP(G, rmsprop_update, pg, gg, ag, bg, n, 0.01f, 0.99f, 1e-8f, 1e-4f, 0.9f,
                          x.g);
                } else {
                    VT_OP(R, adamw_update, pr, gr, ar, br, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f,
                          step, x.r);
                    VT_OP(G, adamw_update, pg, gg, ag, bg, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f,
                          step, x.g);
                }
                if (step == 1) /* the state after one clipped step: what a skip must keep */
                    memcpy(ph, pr, (size_t)n * 4);
            }
            float *p = host_copy(G, pg, n), *a = host_copy(G, ag, n);
            const double e = vt_nmse(p, pr, n), ea = vt_nmse(a, ar, n);
            printf("  %-8s clipped%s: params nmse %.2e, state nmse %.2e\n", name,
                   skip ? ", then skipped" : " twice", e, ea);
            TCHECK(e <= TOL_DOUBLE && ea <= TOL_DOUBLE, "%s (skip %d): params nmse %.3e, state "
                   "%.3e", name, skip, e, ea);
            if (skip) /* the skipped step changed nothing on either backend */
                TCHECK(!memcmp(pr, ph, (size_t)n * 4), "%s: cpu-ref moved on a skipped step",
                       name);
            /* the gradient itself is never scaled by the gate */
            float *gk = host_copy(G, gg, n);
            TCHECK(!memcmp(gk, gh, (size_t)n * 4), "%s: the gradient was changed", name);
            free(gk);
            free(p);
            free(a);
            for (int i = 0; i < 4; i++) {
                free(h[i]);
                pfree(&v[i]);
            }
        }
    }
    gates_free(&x);
}

int main(void) {
    if (vt_cuda_device_count() == 0) {
        printf("test_grad_gate_gpu: no CUDA device: skipping\n");
        return VT_TEST_SKIP;
    }
    unsetenv("VT_TF32");
    vt_rng_seed(&rng, 20261129);
    R = vt_backend_cpu_ref_init(0);
    G = vt_backend_cuda_init(0, 0);
    printf("gradient gate, cuda against cpu-ref\n");
    sumsq_groups();
    gate_decisions();
    copy_and_updates();
    vt_backend_free(&G);
    vt_backend_free(&R);
    return vt_test_done("test_grad_gate_gpu");
}
#endif
