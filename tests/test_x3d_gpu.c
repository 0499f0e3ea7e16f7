/*
 * test_x3d_gpu.c: X3D's element-wise ops on the cuda backend against cpu-ref (the truth,
 * itself checked against PyTorch by test_ops_torch): SiLU and sigmoid forward and
 * backward (sigmoid's in place over dout, as the graph runs it), the channel scale of
 * squeeze-excitation (dx in place over dout: ds must be formed first), in FP32 and in
 * BF16, and n == 0 writing nothing; grouped and depthwise conv3d (cuDNN's group count)
 * in FP32, csn_r101's depthwise strided in time too. Skips (77) without a GPU or in a
 * build without CUDA.
 *
 * Tolerances (NMSE = sum (a-b)^2 / sum b^2). FP32: expf against cpu-ref's double exp,
 * a few float roundings, NMSE ~1e-14; ds is a double sum on both sides: TOL_F32 1e-12.
 * BF16: both sides round every stored activation to bf16 (8 bits), but from float
 * results that differ in the last float bits, so an element may land one bf16 ulp apart
 * (relative 2^-8) now and then: NMSE ~1e-6 at worst; TOL_BF16 1e-4 still fails a wrong
 * formula (NMSE ~1e-1).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/testutil.h"

#ifndef VT_HAVE_CUDA
int main(void) {
    printf("test_x3d_gpu: built without CUDA: skipping\n");
    return VT_TEST_SKIP;
}
#else

#include "models/backend.h"
#include "models/bf16.h"
#include "base/common.h"
#include "models/cuda/backend_cuda.h"
#include "models/cuda/cuda_info.h"
#include "models/registry.h"

#define TOL_F32 1e-12
#define TOL_BF16 1e-4

static vt_backend *R, *G;
static vt_rng rng;
static int g_bf16;

/* An activation array on both backends from float values (bf16-rounded under BF16). */
typedef struct pair { float *r, *g; int64_t n; } pair;
static pair pmake(int64_t n, float lo, float hi) {
    float *h = vt_malloc((size_t)VT_MAX(n, 1) * 4);
    for (int64_t i = 0; i < n; i++)
        h[i] = lo + (hi - lo) * (float)vt_rng_uniform(&rng);
    pair p = {vt_backend_alloc_x(R, (size_t)VT_MAX(n, 1) * 4, "ref"),
              vt_backend_alloc_x(G, (size_t)VT_MAX(n, 1) * 4, "cuda"), n};
    float *tmp = vt_backend_alloc_x(G, (size_t)VT_MAX(n, 1) * 4, "tmp");
    G->i->to_device(G, tmp, h, (size_t)n * 4);
    VT_OP(G, act_from_f32, p.g, tmp, n);
    VT_OP(R, act_from_f32, p.r, h, n);
    vt_backend_sync(G);
    vt_backend_free_ptr(G, tmp);
    free(h);
    return p;
}
static void pfree(pair *p) {
    vt_backend_free_ptr(R, p->r);
    vt_backend_free_ptr(G, p->g);
}
/* NMSE of the cuda result against cpu-ref, both widened to float; tol < 0: the
 * precision's own (TOL_F32 or TOL_BF16). */
static void cmp_tol(const char *what, const pair *p, double tol_in) {
    float *h = vt_malloc((size_t)VT_MAX(p->n, 1) * 4), *r = vt_malloc((size_t)VT_MAX(p->n, 1) * 4);
    float *tmp = vt_backend_alloc_x(G, (size_t)VT_MAX(p->n, 1) * 4, "tmp");
    VT_OP(G, act_to_f32, tmp, p->g, p->n);
    G->i->to_host(G, h, tmp, (size_t)p->n * 4);
    VT_OP(R, act_to_f32, r, p->r, p->n);
    vt_backend_free_ptr(G, tmp);
    const double tol = tol_in >= 0 ? tol_in : g_bf16 ? TOL_BF16 : TOL_F32;
    const double e = vt_nmse(h, r, p->n);
    printf("  %-5s %-32s n=%-8lld nmse %.2e\n", g_bf16 ? "bf16" : "fp32", what, (long long)p->n,
           e);
    TCHECK(e <= tol, "%s %s: nmse %.3e > %.1e", g_bf16 ? "bf16" : "fp32", what, e, tol);
    free(h);
    free(r);
}
static void cmp(const char *what, const pair *p) { cmp_tol(what, p, -1); }

static void run_all(void) {
    const int64_t n = 100003;
    pair x = pmake(n, -8, 8), y = pmake(n, 0, 0), d = pmake(n, -1, 1), dx = pmake(n, 3, 3);
    VT_OP(G, silu_forward, y.g, x.g, n), VT_OP(R, silu_forward, y.r, x.r, n);
    cmp("silu forward", &y);
    VT_OP(G, silu_backward, dx.g, d.g, x.g, n), VT_OP(R, silu_backward, dx.r, d.r, x.r, n);
    cmp("silu backward", &dx);
    VT_OP(G, sigmoid_forward, y.g, x.g, n), VT_OP(R, sigmoid_forward, y.r, x.r, n);
    cmp("sigmoid forward", &y);
    VT_OP(G, sigmoid_backward, d.g, d.g, y.g, n), VT_OP(R, sigmoid_backward, d.r, d.r, y.r, n);
    cmp("sigmoid backward (in place)", &d);
    /* n == 0 writes nothing: dx still holds the backward's values */
    VT_OP(G, silu_forward, dx.g, x.g, 0), VT_OP(G, chscale_forward, dx.g, x.g, x.g, 0, 4, 9);
    cmp("n == 0 untouched", &dx);
    pfree(&x), pfree(&y), pfree(&d), pfree(&dx);
    /* SE over X3D-like planes: 2 clips x 54 channels x 4x20x20, and a 1x1x1 one */
    static const int cs[][3] = {{2, 54, 1600}, {3, 7, 1}};
    for (size_t k = 0; k < VT_ARRAY_LEN(cs); k++) {
        const int nn = cs[k][0], c = cs[k][1];
        const int64_t sp = cs[k][2], nx = (int64_t)nn * c * sp;
        pair xs = pmake(nx, -1, 1), s = pmake((int64_t)nn * c, 0, 1), o = pmake(nx, 0, 0);
        pair g = pmake(nx, -1, 1), ds = pmake((int64_t)nn * c, 9, 9);
        VT_OP(G, chscale_forward, o.g, xs.g, s.g, nn, c, sp);
        VT_OP(R, chscale_forward, o.r, xs.r, s.r, nn, c, sp);
        cmp("chscale forward", &o);
        VT_OP(G, chscale_backward, g.g, ds.g, g.g, xs.g, s.g, nn, c, sp);
        VT_OP(R, chscale_backward, g.r, ds.r, g.r, xs.r, s.r, nn, c, sp);
        cmp("chscale dx (in place over dout)", &g);
        cmp("chscale ds", &ds);
        pfree(&xs), pfree(&s), pfree(&o), pfree(&g), pfree(&ds);
    }
}

/* A grouped conv (cudnnSetConvolutionGroupCount), forward and backward, dw and db
 * accumulating onto random values, din overwriting garbage. FP32: cuDNN's float sums of
 * at most 27 products (depthwise) or 54 (grouped) against cpu-ref's double ones, NMSE
 * ~1e-14; TOL_CONV 1e-8 is test_cuda_ops_gpu.c's TOL_F32SUM (FFT algorithms' rounding). */
#define TOL_CONV 1e-8
static void conv_case(int n, const int thw[3], vt_conv3d_p p, int bias) {
    int o[3];
    for (int d = 0; d < 3; d++)
        o[d] = vt_conv_out(thw[d], p.k[d], p.s[d], p.p[d]);
    const int64_t nx = (int64_t)n * p.cin * thw[0] * thw[1] * thw[2];
    const int64_t ny = (int64_t)n * p.cout * o[0] * o[1] * o[2];
    const int64_t nw = (int64_t)p.cout * (p.cin / p.groups) * p.k[0] * p.k[1] * p.k[2];
    pair x = pmake(nx, -1, 1), w = pmake(nw, -1, 1), b = pmake(p.cout, -1, 1);
    pair y = pmake(ny, 0, 0), dy = pmake(ny, -1, 1), dx = pmake(nx, 7, 7);
    pair dw = pmake(nw, -1, 1), db = pmake(p.cout, -1, 1);
    VT_OP(G, conv3d_forward, y.g, x.g, w.g, bias ? b.g : NULL, n, thw, &p);
    VT_OP(R, conv3d_forward, y.r, x.r, w.r, bias ? b.r : NULL, n, thw, &p);
    VT_OP(G, conv3d_backward, dx.g, dw.g, bias ? db.g : NULL, dy.g, x.g, w.g, n, thw, &p);
    VT_OP(R, conv3d_backward, dx.r, dw.r, bias ? db.r : NULL, dy.r, x.r, w.r, n, thw, &p);
    char what[96];
    const double keep = TOL_CONV; /* FP32 only: main runs these before BF16 */
    snprintf(what, sizeof what, "conv g%d k%d%d%d forward", p.groups, p.k[0], p.k[1], p.k[2]);
    cmp_tol(what, &y, keep);
    snprintf(what, sizeof what, "conv g%d k%d%d%d din", p.groups, p.k[0], p.k[1], p.k[2]);
    cmp_tol(what, &dx, keep);
    snprintf(what, sizeof what, "conv g%d k%d%d%d dw (+=)", p.groups, p.k[0], p.k[1], p.k[2]);
    cmp_tol(what, &dw, keep);
    if (bias) {
        snprintf(what, sizeof what, "conv g%d db (+=)", p.groups);
        cmp_tol(what, &db, keep);
    }
    pfree(&x), pfree(&w), pfree(&b), pfree(&y), pfree(&dy), pfree(&dx), pfree(&dw), pfree(&db);
}

static void test_gconv(void) {
    /* X3D's depthwise conv_b (stride (1,2,2)) and stem conv_xy (5x1x1), a grouped conv */
    conv_case(2, (const int[3]){4, 9, 9},
              (vt_conv3d_p){24, 24, {3, 3, 3}, {1, 2, 2}, {1, 1, 1}, 24}, 0);
    conv_case(2, (const int[3]){6, 5, 5},
              (vt_conv3d_p){8, 8, {5, 1, 1}, {1, 1, 1}, {2, 0, 0}, 8}, 0);
    conv_case(2, (const int[3]){3, 6, 6},
              (vt_conv3d_p){4, 6, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, 2}, 1);
    /* csn_r101's depthwise conv_b in a stage's first block: stride 2 in time and space,
     * odd sizes (5 -> 3, 7 -> 4) */
    conv_case(2, (const int[3]){5, 7, 7},
              (vt_conv3d_p){16, 16, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, 16}, 0);
}

int main(void) {
    if (vt_cuda_device_count() == 0) {
        printf("test_x3d_gpu: no CUDA device: skipping\n");
        return VT_TEST_SKIP;
    }
    unsetenv("VT_TF32"); /* numerics are checked in FP32 */
    vt_rng_seed(&rng, 4343);
    R = vt_backend_cpu_ref_init(0);
    G = vt_backend_cuda_init(0, 0);
    test_gconv();
    run_all();
    char err[256];
    if (vt_backend_set_precision(G, VT_PREC_BF16, err, sizeof err) == 0) {
        VT_CHECK(vt_backend_set_precision(R, VT_PREC_BF16, err, sizeof err) == 0, "%s", err);
        g_bf16 = 1;
        run_all();
    } else {
        printf("bf16: %s (skipped)\n", err);
    }
    TCHECK(R->in_use == 0, "cpu-ref leaked %lld bytes", (long long)R->in_use);
    vt_backend_free(&G);
    vt_backend_free(&R);
    return vt_test_done("test_x3d_gpu");
}
#endif
