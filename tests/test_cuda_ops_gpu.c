/*
 * test_cuda_ops_gpu.c: every op of the cuda backend against cpu-ref (the truth,
 * models/cpu/cpu_ref.c), forward and backward, on the same random inputs — after ggml's
 * test-backend-ops: NMSE per op, each tolerance commented. Also: n == 0 leaves outputs
 * alone (or writes cpu-ref's zeros for the BN sums), parameter gradients accumulate,
 * input gradients are overwritten, din == NULL is honoured, the dropout mask is the same
 * bit for bit, the optimizers follow cpu-ref over several steps, maxpool gives the
 * gradient to the FIRST maximum (inputs with many ties), avgpool counts padding and
 * honours ceil_mode, the allocator enforces its budget and reuses freed blocks, both
 * algorithm-selection modes and the deterministic mode give cpu-ref's numbers, and TF32
 * stays near them.
 *
 * Skips (77) without a GPU or in a build without CUDA. TF32 is off for everything but the
 * one TF32 check.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/testutil.h"

#ifndef VT_HAVE_CUDA
int main(void) {
    printf("test_cuda_ops_gpu: built without CUDA: skipping\n");
    return VT_TEST_SKIP;
}
#else

#include "models/backend.h"
#include "base/common.h"
#include "models/cuda/backend_cuda.h"
#include "models/cuda/cuda_info.h"
#include "models/registry.h"

/* ---- tolerances (NMSE = sum (a-b)^2 / sum b^2) ----
 * TOL_F32SUM: an FP32 sum of K products against cpu-ref's double sum has a relative error
 *   of about sqrt(K) * 6e-8 per element (NMSE ~1e-13 for K ~ 1000); cuDNN's FFT-based
 *   algorithms add transform rounding (~1e-10). An indexing or transpose bug gives
 *   NMSE ~ 1, so 1e-8 keeps four orders of magnitude on both sides.
 * TOL_DOUBLE: both sides sum in double and round once to float; only the summation order
 *   (and libm's last-ulp in exp/log) differs, so results differ by at most ~1 ulp
 *   (NMSE <= ~1e-14); 1e-12 still catches any real error.
 * TOL_TF32: TF32 rounds inputs to 10 mantissa bits (relative 5e-4 per product, averaging
 *   down over the sum): NMSE ~1e-7..1e-6; 1e-4 allows that and nothing worse. */
#define TOL_F32SUM 1e-8
#define TOL_DOUBLE 1e-12
#define TOL_TF32 1e-4

static vt_backend *R, *G; /* cpu-ref, cuda */
static vt_rng rng;

/* The same tensor on both backends. */
typedef struct pair { float *r, *g; int64_t n; } pair;

static pair pmake(int64_t n, const float *host) {
    pair p = {vt_backend_alloc_x(R, (size_t)VT_MAX(n, 1) * 4, "ref"),
              vt_backend_alloc_x(G, (size_t)VT_MAX(n, 1) * 4, "cuda"), n};
    if (host && n) {
        memcpy(p.r, host, (size_t)n * 4);
        G->i->to_device(G, p.g, host, (size_t)n * 4);
    }
    return p;
}
static pair prand(int64_t n, float scale) {
    float *h = vt_malloc((size_t)VT_MAX(n, 1) * 4);
    for (int64_t i = 0; i < n; i++)
        h[i] = (float)(scale * vt_rng_normal(&rng));
    pair p = pmake(n, h);
    free(h);
    return p;
}
static pair pconst(int64_t n, float v) {
    float *h = vt_malloc((size_t)VT_MAX(n, 1) * 4);
    for (int64_t i = 0; i < n; i++)
        h[i] = v;
    pair p = pmake(n, h);
    free(h);
    return p;
}
static void pfree(pair *p) {
    vt_backend_free_ptr(R, p->r);
    vt_backend_free_ptr(G, p->g);
    p->r = p->g = NULL;
}
static float *fetch(const pair *p) {
    float *h = vt_malloc((size_t)VT_MAX(p->n, 1) * 4);
    if (p->n)
        G->i->to_host(G, h, p->g, (size_t)p->n * 4);
    return h;
}
static int all_finite(const float *a, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(a[i]))
            return 0;
    return 1;
}
/* NMSE of the cuda result against cpu-ref. */
static void cmp(const char *what, const pair *p, double tol) {
    float *h = fetch(p);
    double e = vt_nmse(h, p->r, p->n);
    double m = vt_max_abs_diff(h, p->r, p->n);
    printf("  %-44s n=%-8lld nmse %.2e  max|d| %.2e\n", what, (long long)p->n, e, m);
    TCHECK(all_finite(h, p->n), "%s: non-finite values", what);
    TCHECK(e <= tol, "%s: nmse %.3e > %.1e", what, e, tol);
    free(h);
}
/* Bit-for-bit equality. */
static void cmp_exact(const char *what, const pair *p) {
    float *h = fetch(p);
    int64_t bad = 0;
    for (int64_t i = 0; i < p->n; i++)
        bad += memcmp(&h[i], &p->r[i], 4) != 0;
    printf("  %-44s n=%-8lld %s\n", what, (long long)p->n, bad ? "DIFFERS" : "bitwise equal");
    TCHECK(bad == 0, "%s: %lld of %lld values differ bitwise", what, (long long)bad,
           (long long)p->n);
    free(h);
}
/* Unchanged on the device (n == 0 must not write). */
static void cmp_const(const char *what, const pair *p, float v) {
    float *h = fetch(p);
    int64_t bad = 0;
    for (int64_t i = 0; i < p->n; i++)
        bad += h[i] != v;
    TCHECK(bad == 0, "%s: n == 0 wrote %lld values", what, (long long)bad);
    free(h);
}

/* ------------------------------------------------------------------ memory, element-wise */

static void test_memory_elementwise(void) {
    printf("memory and element-wise\n");
    const int64_t n = 100003; /* not a multiple of any block size */
    pair a = prand(n, 1), b = prand(n, 2), o = pconst(n, 0);
    /* round trip and device copy */
    pair c = pconst(n, 0);
    G->i->copy(G, c.g, a.g, (size_t)n * 4);
    memcpy(c.r, a.r, (size_t)n * 4);
    cmp_exact("to_device/copy/to_host round trip", &c);
    VT_OP(G, fill, o.g, 3.25f, n);
    VT_OP(R, fill, o.r, 3.25f, n);
    cmp_exact("fill", &o);
    VT_OP(G, scale, c.g, -0.37f, n);
    VT_OP(R, scale, c.r, -0.37f, n);
    cmp_exact("scale", &c);
    VT_OP(G, axpy, c.g, 0.71f, b.g, n);
    VT_OP(R, axpy, c.r, 0.71f, b.r, n);
    cmp_exact("axpy", &c);
    VT_OP(G, scale, c.g, 4.0f, n); /* a few units either side of 0 */
    VT_OP(R, scale, c.r, 4.0f, n);
    VT_OP(G, round_even, c.g, n);
    VT_OP(R, round_even, c.r, n);
    cmp_exact("round_even", &c);
    VT_OP(G, add, o.g, a.g, b.g, n);
    VT_OP(R, add, o.r, a.r, b.r, n);
    cmp_exact("add", &o);
    VT_OP(G, add, a.g, a.g, b.g, n); /* in place */
    VT_OP(R, add, a.r, a.r, b.r, n);
    cmp_exact("add in place", &a);
    double sg = VT_OP(G, sumsq, b.g, n), sr = VT_OP(R, sumsq, b.r, n);
    /* Both sum in double; only the order differs: relative error ~ log2(n) * 1e-16. */
    printf("  sumsq cuda %.17g ref %.17g\n", sg, sr);
    TCHECK(fabs(sg - sr) <= 1e-12 * sr, "sumsq %.17g vs %.17g", sg, sr);
    TCHECK(VT_OP(G, sumsq, b.g, 0) == 0.0, "sumsq of nothing");
    /* n == 0 writes nothing */
    pair z = pconst(16, 7.0f);
    VT_OP(G, fill, z.g, 1.0f, 0);
    VT_OP(G, scale, z.g, 2.0f, 0);
    VT_OP(G, axpy, z.g, 2.0f, b.g, 0);
    VT_OP(G, round_even, z.g, 0);
    VT_OP(G, add, z.g, a.g, b.g, 0);
    VT_OP(G, relu_forward, z.g, b.g, 0);
    VT_OP(G, relu_backward, z.g, b.g, b.g, 0);
    cmp_const("element-wise n == 0", &z, 7.0f);
    /* pinned host memory */
    float *hp = G->i->host_alloc(G, 4096);
    TCHECK(hp != NULL, "host_alloc");
    for (int i = 0; i < 1024; i++)
        hp[i] = (float)i;
    G->i->to_device(G, z.g, hp, 16 * 4);
    float back[16];
    G->i->to_host(G, back, z.g, sizeof back);
    TCHECK(back[15] == 15.0f && back[0] == 0.0f, "pinned round trip");
    G->i->host_free(G, hp);
    pfree(&a); pfree(&b); pfree(&o); pfree(&c); pfree(&z);
}

static void test_relu_dropout(void) {
    printf("relu, dropout\n");
    const int64_t n = 65537;
    pair x = prand(n, 1), y = pconst(n, 0), dy = prand(n, 1), dx = pconst(n, 9);
    VT_OP(G, relu_forward, y.g, x.g, n);
    VT_OP(R, relu_forward, y.r, x.r, n);
    cmp_exact("relu_forward", &y);
    VT_OP(G, relu_backward, dx.g, dy.g, y.g, n);
    VT_OP(R, relu_backward, dx.r, dy.r, y.r, n);
    cmp_exact("relu_backward", &dx);
    VT_OP(G, relu_forward, x.g, x.g, n); /* in place, as the nets use it */
    VT_OP(R, relu_forward, x.r, x.r, n);
    cmp_exact("relu_forward in place", &x);

    const float ps[3] = {0.3f, 0.0f, 1.0f};
    for (int k = 0; k < 3; k++) {
        pair in = prand(n, 1), out = pconst(n, 0), mask = pconst(n, 0), din = pconst(n, 0);
        const uint64_t seed = 0x1234567890abcdefull + (uint64_t)k;
        VT_OP(G, dropout_forward, out.g, mask.g, in.g, n, ps[k], seed);
        VT_OP(R, dropout_forward, out.r, mask.r, in.r, n, ps[k], seed);
        char what[64];
        snprintf(what, sizeof what, "dropout mask p=%.1f", (double)ps[k]);
        cmp_exact(what, &mask);
        snprintf(what, sizeof what, "dropout out p=%.1f", (double)ps[k]);
        cmp_exact(what, &out);
        VT_OP(G, dropout_backward, din.g, dy.g, mask.g, n);
        VT_OP(R, dropout_backward, din.r, dy.r, mask.r, n);
        snprintf(what, sizeof what, "dropout backward p=%.1f", (double)ps[k]);
        cmp_exact(what, &din);
        pfree(&in); pfree(&out); pfree(&mask); pfree(&din);
    }
    pair z = pconst(8, 7.0f);
    VT_OP(G, dropout_forward, z.g, z.g, y.g, 0, 0.5f, 1);
    VT_OP(G, dropout_backward, z.g, y.g, y.g, 0);
    cmp_const("dropout n == 0", &z, 7.0f);
    pfree(&x); pfree(&y); pfree(&dy); pfree(&dx); pfree(&z);
}

/* ------------------------------------------------------------------ conv3d */

typedef struct conv_case {
    const char *name;
    int n, thw[3];
    vt_conv3d_p p;
    int bias, want_din;
} conv_case;

static void conv_one(const conv_case *cc, double tol) {
    const vt_conv3d_p *p = &cc->p;
    const int To = vt_conv_out(cc->thw[0], p->k[0], p->s[0], p->p[0]);
    const int Ho = vt_conv_out(cc->thw[1], p->k[1], p->s[1], p->p[1]);
    const int Wo = vt_conv_out(cc->thw[2], p->k[2], p->s[2], p->p[2]);
    const int64_t nin = (int64_t)cc->n * p->cin * cc->thw[0] * cc->thw[1] * cc->thw[2];
    const int64_t nout = (int64_t)cc->n * p->cout * To * Ho * Wo;
    const int64_t nw = (int64_t)p->cout * (p->cin / vt_conv_groups(p)) * p->k[0] * p->k[1] * p->k[2];
    pair x = prand(nin, 1), w = prand(nw, 0.2f), b = prand(p->cout, 0.5f);
    pair y = pconst(nout, 0), dy = prand(nout, 1);
    /* dw/db start non-zero to check accumulation; din starts as garbage to check it is
     * overwritten. */
    pair dx = pconst(nin, 123.0f), dw = prand(nw, 1), db = prand(p->cout, 1);
    char what[128];
    VT_OP(G, conv3d_forward, y.g, x.g, w.g, cc->bias ? b.g : NULL, cc->n, cc->thw, p);
    VT_OP(R, conv3d_forward, y.r, x.r, w.r, cc->bias ? b.r : NULL, cc->n, cc->thw, p);
    snprintf(what, sizeof what, "conv %s forward", cc->name);
    cmp(what, &y, tol);
    /* twice: the second call accumulates on top of the first */
    for (int rep = 0; rep < 2; rep++) {
        VT_OP(G, conv3d_backward, cc->want_din ? dx.g : NULL, dw.g, cc->bias ? db.g : NULL, dy.g,
              x.g, w.g, cc->n, cc->thw, p);
        VT_OP(R, conv3d_backward, cc->want_din ? dx.r : NULL, dw.r, cc->bias ? db.r : NULL, dy.r,
              x.r, w.r, cc->n, cc->thw, p);
    }
    if (cc->want_din) {
        snprintf(what, sizeof what, "conv %s din", cc->name);
        cmp(what, &dx, tol);
    } else {
        snprintf(what, sizeof what, "conv %s din NULL", cc->name);
        cmp_const(what, &dx, 123.0f);
    }
    snprintf(what, sizeof what, "conv %s dw (+=, twice)", cc->name);
    cmp(what, &dw, tol);
    if (cc->bias) {
        snprintf(what, sizeof what, "conv %s db (+=, twice)", cc->name);
        cmp(what, &db, tol);
    }
    /* n == 0: nothing written */
    pair y0 = pconst(nout, 7.0f), dw0 = pconst(nw, 7.0f), db0 = pconst(p->cout, 7.0f);
    VT_OP(G, conv3d_forward, y0.g, x.g, w.g, b.g, 0, cc->thw, p);
    VT_OP(G, conv3d_backward, y0.g, dw0.g, db0.g, dy.g, x.g, w.g, 0, cc->thw, p);
    snprintf(what, sizeof what, "conv %s n == 0", cc->name);
    cmp_const(what, &y0, 7.0f);
    cmp_const(what, &dw0, 7.0f);
    cmp_const(what, &db0, 7.0f);
    pfree(&x); pfree(&w); pfree(&b); pfree(&y); pfree(&dy); pfree(&dx); pfree(&dw); pfree(&db);
    pfree(&y0); pfree(&dw0); pfree(&db0);
}

static const conv_case conv_cases[] = {
    {"3x3x3 s1 p1 +bias", 2, {4, 6, 6}, {3, 4, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, 1}, 1, 1},
    {"r3d stem 3x7x7 s(1,2,2) p(1,3,3)", 2, {4, 12, 12}, {3, 8, {3, 7, 7}, {1, 2, 2}, {1, 3, 3}, 1}, 0, 0},
    {"1x1x1 s2 downsample", 3, {4, 6, 6}, {4, 6, {1, 1, 1}, {2, 2, 2}, {0, 0, 0}, 1}, 0, 1},
    {"(2+1)d spatial 1x3x3", 2, {3, 7, 7}, {5, 6, {1, 3, 3}, {1, 2, 2}, {0, 1, 1}, 1}, 1, 1},
    {"(2+1)d temporal 3x1x1 s2", 2, {5, 4, 4}, {6, 4, {3, 1, 1}, {2, 1, 1}, {1, 0, 0}, 1}, 0, 1},
    {"3x3x3 s2 p1 wide", 4, {4, 8, 8}, {16, 32, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, 1}, 1, 1},
};

static void test_conv(void) {
    printf("conv3d (cudnn algorithm search: find, default)\n");
    for (size_t i = 0; i < VT_ARRAY_LEN(conv_cases); i++)
        conv_one(&conv_cases[i], TOL_F32SUM);

    printf("conv3d, deterministic algorithms required: repeatable bit for bit\n");
    vt_cuda_set_deterministic(G, 1);
    const conv_case *cc = &conv_cases[5];
    const vt_conv3d_p *p = &cc->p;
    const int64_t nin = (int64_t)cc->n * p->cin * 4 * 8 * 8;
    const int64_t nout = (int64_t)cc->n * p->cout * 2 * 4 * 4;
    const int64_t nw = (int64_t)p->cout * p->cin * 27;
    pair x = prand(nin, 1), w = prand(nw, 0.2f), dy = prand(nout, 1);
    pair dw1 = pconst(nw, 0), dw2 = pconst(nw, 0), dx1 = pconst(nin, 0), dx2 = pconst(nin, 0);
    VT_OP(G, conv3d_backward, dx1.g, dw1.g, NULL, dy.g, x.g, w.g, cc->n, cc->thw, p);
    VT_OP(G, conv3d_backward, dx2.g, dw2.g, NULL, dy.g, x.g, w.g, cc->n, cc->thw, p);
    VT_OP(R, conv3d_backward, dx1.r, dw1.r, NULL, dy.r, x.r, w.r, cc->n, cc->thw, p);
    float *a = fetch(&dw1), *b = fetch(&dw2), *c = fetch(&dx1), *d = fetch(&dx2);
    TCHECK(!memcmp(a, b, (size_t)nw * 4), "deterministic dw differs between two runs");
    TCHECK(!memcmp(c, d, (size_t)nin * 4), "deterministic din differs between two runs");
    cmp("conv deterministic dw", &dw1, TOL_F32SUM);
    cmp("conv deterministic din", &dx1, TOL_F32SUM);
    free(a); free(b); free(c); free(d);
    vt_cuda_set_deterministic(G, 2);

    printf("conv3d, TF32 math\n");
    vt_cuda_set_tf32(G, 1);
    TCHECK(vt_cuda_tf32(G) == 1, "tf32 switch");
    pair y = pconst(nout, 0);
    VT_OP(G, conv3d_forward, y.g, x.g, w.g, NULL, cc->n, cc->thw, p);
    VT_OP(R, conv3d_forward, y.r, x.r, w.r, NULL, cc->n, cc->thw, p);
    cmp("conv forward TF32", &y, TOL_TF32);
    vt_cuda_set_tf32(G, 0);
    pfree(&x); pfree(&w); pfree(&dy); pfree(&dw1); pfree(&dw2); pfree(&dx1); pfree(&dx2);
    pfree(&y);
}

/* Same cases through cuDNN's heuristics (VT_CUDA_CONV_ALGO=heuristic) on a fresh backend. */
static void test_conv_heuristic(void) {
    printf("conv3d (cudnn heuristics, no timing)\n");
    vt_backend *keep = G;
    setenv("VT_CUDA_CONV_ALGO", "heuristic", 1);
    G = vt_backend_cuda_init(0, 0);
    unsetenv("VT_CUDA_CONV_ALGO");
    for (size_t i = 0; i < VT_ARRAY_LEN(conv_cases); i += 2)
        conv_one(&conv_cases[i], TOL_F32SUM);
    vt_backend_free(&G);
    G = keep;
}

/* ------------------------------------------------------------------ batch norm */

static void bn_case(int n, int c, int64_t s) {
    char what[96];
    const int64_t nx = (int64_t)n * c * s;
    pair x = prand(nx, 2), dy = prand(nx, 1);
    /* shift the channels so the mean matters */
    float *h = vt_malloc((size_t)VT_MAX(nx, 1) * 4);
    memcpy(h, x.r, (size_t)nx * 4);
    for (int64_t i = 0; i < nx; i++)
        h[i] += (float)((i / s) % c);
    pfree(&x);
    x = pmake(nx, h);
    free(h);
    pair sum = pconst(c, 5), sq = pconst(c, 5), mean = pconst(c, 0), inv = pconst(c, 0);
    pair rm = prand(c, 0.1f), rv = pconst(c, 1.5f), gam = prand(c, 1), bet = prand(c, 1);
    pair y = pconst(nx, 0), sdy = pconst(c, 5), sdyx = pconst(c, 5), dx = pconst(nx, 9);
    pair sh = prand(c, 1); /* bn_stats's shift (net.c passes the batch mean) */
    VT_OP(G, bn_stats, sum.g, sq.g, x.g, sh.g, n, c, s);
    VT_OP(R, bn_stats, sum.r, sq.r, x.r, sh.r, n, c, s);
    snprintf(what, sizeof what, "bn_stats sum n=%d c=%d s=%lld", n, c, (long long)s);
    cmp(what, &sum, TOL_DOUBLE);
    cmp("bn_stats sumsq", &sq, TOL_DOUBLE);
    /* finalize from the SAME sums on both sides, so apply/backward compare only themselves */
    const int64_t count = (int64_t)n * s;
    if (count > 0) {
        G->i->to_device(G, sum.g, sum.r, (size_t)c * 4);
        G->i->to_device(G, sq.g, sq.r, (size_t)c * 4);
        VT_OP(G, bn_finalize, mean.g, inv.g, rm.g, rv.g, sum.g, sq.g, sh.g, count, c, 0.1f,
              1e-5f);
        VT_OP(R, bn_finalize, mean.r, inv.r, rm.r, rv.r, sum.r, sq.r, sh.r, count, c, 0.1f,
              1e-5f);
        cmp("bn_finalize mean", &mean, TOL_DOUBLE);
        cmp("bn_finalize invstd", &inv, TOL_DOUBLE);
        cmp("bn_finalize running_mean", &rm, TOL_DOUBLE);
        cmp("bn_finalize running_var (unbiased)", &rv, TOL_DOUBLE);
        G->i->to_device(G, mean.g, mean.r, (size_t)c * 4);
        G->i->to_device(G, inv.g, inv.r, (size_t)c * 4);
        VT_OP(G, bn_apply, y.g, x.g, sh.g, mean.g, inv.g, gam.g, bet.g, n, c, s);
        VT_OP(R, bn_apply, y.r, x.r, sh.r, mean.r, inv.r, gam.r, bet.r, n, c, s);
        cmp("bn_apply", &y, TOL_DOUBLE);
        VT_OP(G, bn_apply, y.g, x.g, NULL, mean.g, inv.g, NULL, NULL, n, c, s);
        VT_OP(R, bn_apply, y.r, x.r, NULL, mean.r, inv.r, NULL, NULL, n, c, s);
        cmp("bn_apply gamma/beta NULL", &y, TOL_DOUBLE);
        /* the fused tail (issue 45): against cpu-ref's composition, and bit for bit
         * against this backend's own bn_apply, add, relu_forward */
        for (int with_res = 0; with_res < 2; with_res++) {
            pair res = prand(nx, 1), f = pconst(nx, 0);
            VT_OP(G, bn_apply_relu, f.g, x.g, sh.g, mean.g, inv.g, gam.g, bet.g,
                  with_res ? res.g : NULL, n, c, s);
            VT_OP(R, bn_apply_relu, f.r, x.r, sh.r, mean.r, inv.r, gam.r, bet.r,
                  with_res ? res.r : NULL, n, c, s);
            cmp(with_res ? "bn_apply_relu with res" : "bn_apply_relu", &f, TOL_DOUBLE);
            VT_OP(G, bn_apply, y.g, x.g, sh.g, mean.g, inv.g, gam.g, bet.g, n, c, s);
            if (with_res)
                VT_OP(G, add, y.g, y.g, res.g, nx);
            VT_OP(G, relu_forward, y.g, y.g, nx);
            G->i->to_host(G, f.r, y.g, (size_t)nx * 4);
            cmp_exact(with_res ? "bn_apply_relu res = cuda's 3 ops" : "bn_apply_relu = cuda's 2 ops",
                      &f);
            pfree(&res);
            pfree(&f);
        }
        VT_OP(G, bn_backward_reduce, sdy.g, sdyx.g, dy.g, x.g, sh.g, mean.g, inv.g, n, c, s);
        VT_OP(R, bn_backward_reduce, sdy.r, sdyx.r, dy.r, x.r, sh.r, mean.r, inv.r, n, c, s);
        cmp("bn_backward_reduce sum_dy", &sdy, TOL_DOUBLE);
        cmp("bn_backward_reduce sum_dy_xhat", &sdyx, TOL_DOUBLE);
        G->i->to_device(G, sdy.g, sdy.r, (size_t)c * 4);
        G->i->to_device(G, sdyx.g, sdyx.r, (size_t)c * 4);
        /* a larger count, as under sync-BN with other towers */
        VT_OP(G, bn_backward_apply, dx.g, dy.g, x.g, sh.g, mean.g, inv.g, gam.g, sdy.g, sdyx.g,
              count * 3, n, c, s);
        VT_OP(R, bn_backward_apply, dx.r, dy.r, x.r, sh.r, mean.r, inv.r, gam.r, sdy.r, sdyx.r,
              count * 3, n, c, s);
        cmp("bn_backward_apply", &dx, TOL_DOUBLE);
    } else {
        /* n == 0: the sums are zeros (cpu-ref writes them, so a tower without clips adds
         * nothing to the sync-BN collective); apply/backward_apply write nothing. */
        cmp_exact("bn_stats n == 0 sum", &sum);
        cmp_exact("bn_stats n == 0 sumsq", &sq);
        VT_OP(G, bn_backward_reduce, sdy.g, sdyx.g, dy.g, x.g, NULL, mean.g, inv.g, 0, c, s);
        VT_OP(R, bn_backward_reduce, sdy.r, sdyx.r, dy.r, x.r, NULL, mean.r, inv.r, 0, c, s);
        cmp_exact("bn_backward_reduce n == 0", &sdy);
        pair z = pconst(64, 7.0f);
        VT_OP(G, bn_apply, z.g, x.g, NULL, mean.g, inv.g, gam.g, bet.g, 0, c, s);
        VT_OP(G, bn_backward_apply, z.g, dy.g, x.g, NULL, mean.g, inv.g, gam.g, sdy.g, sdyx.g, 10, 0, c,
              s);
        cmp_const("bn apply/backward_apply n == 0", &z, 7.0f);
        pfree(&z);
    }
    /* eval: count = 0 takes the running statistics */
    VT_OP(G, bn_finalize, mean.g, inv.g, rm.g, rv.g, sum.g, sq.g, NULL, 0, c, 0.1f, 1e-5f);
    VT_OP(R, bn_finalize, mean.r, inv.r, rm.r, rv.r, sum.r, sq.r, NULL, 0, c, 0.1f, 1e-5f);
    cmp("bn_finalize eval mean", &mean, TOL_DOUBLE);
    cmp("bn_finalize eval invstd", &inv, TOL_DOUBLE);
    pfree(&x); pfree(&dy); pfree(&sum); pfree(&sq); pfree(&mean); pfree(&inv); pfree(&rm);
    pfree(&rv); pfree(&gam); pfree(&bet); pfree(&y); pfree(&sdy); pfree(&sdyx); pfree(&dx);
    pfree(&sh);
}

static void test_bn(void) {
    printf("batch norm\n");
    bn_case(3, 5, 50);
    bn_case(2, 3, 4 * 48 * 48); /* S > the kernels' chunk: several partials per clip */
    bn_case(1, 70, 1);          /* S = 1: a BN after global pooling */
    bn_case(0, 4, 50);
}

/* ------------------------------------------------------------------ pooling */

typedef struct pool_case {
    const char *name;
    int n, c, thw[3];
    vt_pool3d_p p;
} pool_case;

static void pool_one(const pool_case *pc) {
    int o[3];
    for (int d = 0; d < 3; d++)
        o[d] = vt_pool_out(pc->thw[d], pc->p.k[d], pc->p.s[d], pc->p.p[d], pc->p.ceil_mode);
    const int64_t nin = (int64_t)pc->n * pc->c * pc->thw[0] * pc->thw[1] * pc->thw[2];
    const int64_t nout = (int64_t)pc->n * pc->c * o[0] * o[1] * o[2];
    /* Values from {-1, 0, 1, 2}: most windows hold ties, so "first maximum" is tested. */
    float *h = vt_malloc((size_t)nin * 4);
    for (int64_t i = 0; i < nin; i++)
        h[i] = (float)vt_rng_below(&rng, 4) - 1.0f;
    pair x = pmake(nin, h);
    free(h);
    pair y = pconst(nout, 0), dy = prand(nout, 1), dx = pconst(nin, 9);
    char what[128];
    VT_OP(G, maxpool3d_forward, y.g, x.g, pc->n, pc->c, pc->thw, &pc->p);
    VT_OP(R, maxpool3d_forward, y.r, x.r, pc->n, pc->c, pc->thw, &pc->p);
    snprintf(what, sizeof what, "maxpool %s forward", pc->name);
    cmp_exact(what, &y);
    VT_OP(G, maxpool3d_backward, dx.g, dy.g, x.g, pc->n, pc->c, pc->thw, &pc->p);
    VT_OP(R, maxpool3d_backward, dx.r, dy.r, x.r, pc->n, pc->c, pc->thw, &pc->p);
    snprintf(what, sizeof what, "maxpool %s backward (first max)", pc->name);
    cmp_exact(what, &dx);
    pfree(&x);
    x = prand(nin, 1);
    VT_OP(G, avgpool3d_forward, y.g, x.g, pc->n, pc->c, pc->thw, &pc->p);
    VT_OP(R, avgpool3d_forward, y.r, x.r, pc->n, pc->c, pc->thw, &pc->p);
    snprintf(what, sizeof what, "avgpool %s forward", pc->name);
    cmp(what, &y, TOL_DOUBLE);
    VT_OP(G, avgpool3d_backward, dx.g, dy.g, pc->n, pc->c, pc->thw, &pc->p);
    VT_OP(R, avgpool3d_backward, dx.r, dy.r, pc->n, pc->c, pc->thw, &pc->p);
    snprintf(what, sizeof what, "avgpool %s backward", pc->name);
    cmp(what, &dx, TOL_DOUBLE);
    pair z = pconst(nout, 7.0f);
    VT_OP(G, maxpool3d_forward, z.g, x.g, 0, pc->c, pc->thw, &pc->p);
    VT_OP(G, avgpool3d_forward, z.g, x.g, 0, pc->c, pc->thw, &pc->p);
    VT_OP(G, maxpool3d_backward, z.g, dy.g, x.g, 0, pc->c, pc->thw, &pc->p);
    VT_OP(G, avgpool3d_backward, z.g, dy.g, 0, pc->c, pc->thw, &pc->p);
    snprintf(what, sizeof what, "pool %s n == 0", pc->name);
    cmp_const(what, &z, 7.0f);
    pfree(&x); pfree(&y); pfree(&dy); pfree(&dx); pfree(&z);
}

static const pool_case pool_cases[] = {
    {"k2 s2", 2, 3, {4, 6, 6}, {{2, 2, 2}, {2, 2, 2}, {0, 0, 0}, 0}},
    {"k3 s2 p1 (overlapping)", 2, 2, {5, 7, 7}, {{3, 3, 3}, {2, 2, 2}, {1, 1, 1}, 0}},
    {"c3d pool1 (1,2,2)", 2, 4, {4, 8, 8}, {{1, 2, 2}, {1, 2, 2}, {0, 0, 0}, 0}},
    {"c3d pool5 p(0,1,1)", 1, 3, {2, 7, 7}, {{2, 2, 2}, {2, 2, 2}, {0, 1, 1}, 0}},
    {"k3 s2 ceil_mode", 2, 2, {6, 8, 9}, {{3, 3, 3}, {2, 2, 2}, {0, 0, 0}, 1}},
    {"k2 s2 p1 ceil_mode", 1, 3, {5, 6, 7}, {{2, 2, 2}, {2, 2, 2}, {1, 1, 1}, 1}},
};

static void test_pool(void) {
    printf("pooling\n");
    for (size_t i = 0; i < VT_ARRAY_LEN(pool_cases); i++)
        pool_one(&pool_cases[i]);
    const int n = 3, c = 7;
    const int64_t s = 2 * 7 * 7;
    pair x = prand((int64_t)n * c * s, 1), y = pconst(n * c, 0), dy = prand(n * c, 1);
    pair dx = pconst((int64_t)n * c * s, 9);
    VT_OP(G, gap_forward, y.g, x.g, n, c, s);
    VT_OP(R, gap_forward, y.r, x.r, n, c, s);
    cmp("gap_forward", &y, TOL_DOUBLE);
    VT_OP(G, gap_backward, dx.g, dy.g, n, c, s);
    VT_OP(R, gap_backward, dx.r, dy.r, n, c, s);
    cmp_exact("gap_backward", &dx);
    pair z = pconst(64, 7.0f);
    VT_OP(G, gap_forward, z.g, x.g, 0, c, s);
    VT_OP(G, gap_backward, z.g, dy.g, 0, c, s);
    cmp_const("gap n == 0", &z, 7.0f);
    pfree(&x); pfree(&y); pfree(&dy); pfree(&dx); pfree(&z);
}

/* ------------------------------------------------------------------ linear */

static void linear_case(int n, int in_f, int out_f, int bias, int want_din) {
    char what[96];
    pair x = prand((int64_t)n * in_f, 1), w = prand((int64_t)out_f * in_f, 0.1f);
    pair b = prand(out_f, 1), y = pconst((int64_t)n * out_f, 0), dy = prand((int64_t)n * out_f, 1);
    pair dx = pconst((int64_t)n * in_f, 123.0f), dw = prand((int64_t)out_f * in_f, 1);
    pair db = prand(out_f, 1);
    VT_OP(G, linear_forward, y.g, x.g, w.g, bias ? b.g : NULL, n, in_f, out_f);
    VT_OP(R, linear_forward, y.r, x.r, w.r, bias ? b.r : NULL, n, in_f, out_f);
    snprintf(what, sizeof what, "linear %dx%d->%d%s forward", n, in_f, out_f, bias ? " +b" : "");
    cmp(what, &y, TOL_F32SUM);
    for (int rep = 0; rep < 2; rep++) {
        VT_OP(G, linear_backward, want_din ? dx.g : NULL, dw.g, bias ? db.g : NULL, dy.g, x.g, w.g,
              n, in_f, out_f);
        VT_OP(R, linear_backward, want_din ? dx.r : NULL, dw.r, bias ? db.r : NULL, dy.r, x.r, w.r,
              n, in_f, out_f);
    }
    if (want_din)
        cmp("linear din", &dx, TOL_F32SUM);
    else
        cmp_const("linear din NULL", &dx, 123.0f);
    cmp("linear dw (+=, twice)", &dw, TOL_F32SUM);
    if (bias)
        cmp("linear db (+=, twice)", &db, TOL_DOUBLE);
    pair z = pconst((int64_t)out_f * in_f, 7.0f);
    VT_OP(G, linear_forward, z.g, x.g, w.g, b.g, 0, in_f, out_f);
    VT_OP(G, linear_backward, z.g, z.g, z.g, dy.g, x.g, w.g, 0, in_f, out_f);
    cmp_const("linear n == 0", &z, 7.0f);
    pfree(&x); pfree(&w); pfree(&b); pfree(&y); pfree(&dy); pfree(&dx); pfree(&dw); pfree(&db);
    pfree(&z);
}

static void test_linear(void) {
    printf("linear (cuBLAS)\n");
    linear_case(5, 37, 11, 1, 1);
    linear_case(32, 512, 400, 1, 0);
    linear_case(1, 3, 2, 0, 1);
}

/* ------------------------------------------------------------------ losses */

static void test_losses(void) {
    printf("losses\n");
    const int n = 9, k = 13;
    pair z = prand((int64_t)n * k, 3);
    int32_t lab[9];
    for (int i = 0; i < n; i++)
        lab[i] = (int32_t)vt_rng_below(&rng, k);
    int32_t *lr = vt_backend_alloc_x(R, sizeof lab, "labels");
    int32_t *lg = vt_backend_alloc_x(G, sizeof lab, "labels");
    memcpy(lr, lab, sizeof lab);
    G->i->to_device(G, lg, lab, sizeof lab);
    pair loss = pconst(n, 0), dl = pconst((int64_t)n * k, 0), prob = pconst((int64_t)n * k, 0);
    VT_OP(G, softmax_xent, loss.g, dl.g, prob.g, z.g, lg, n, k, 0.1f, 1.0f / 32);
    VT_OP(R, softmax_xent, loss.r, dl.r, prob.r, z.r, lr, n, k, 0.1f, 1.0f / 32);
    cmp("softmax_xent loss (smoothing 0.1)", &loss, TOL_DOUBLE);
    cmp("softmax_xent dlogits", &dl, TOL_DOUBLE);
    cmp("softmax_xent prob", &prob, TOL_DOUBLE);
    VT_OP(G, softmax_xent, loss.g, NULL, NULL, z.g, lg, n, k, 0.0f, 1.0f);
    VT_OP(R, softmax_xent, loss.r, NULL, NULL, z.r, lr, n, k, 0.0f, 1.0f);
    cmp("softmax_xent loss only", &loss, TOL_DOUBLE);
    pair cw = prand(k, 1); /* class weights (--balance loss), some negative: still exact */
    VT_OP(G, softmax_xent_w, loss.g, dl.g, NULL, z.g, lg, cw.g, n, k, 0.1f, 1.0f / 32);
    VT_OP(R, softmax_xent_w, loss.r, dl.r, NULL, z.r, lr, cw.r, n, k, 0.1f, 1.0f / 32);
    cmp("softmax_xent_w loss (class weights, smoothing 0.1)", &loss, TOL_DOUBLE);
    cmp("softmax_xent_w dlogits", &dl, TOL_DOUBLE);
    pfree(&cw);
    float *t = vt_malloc((size_t)n * k * 4);
    for (int i = 0; i < n * k; i++)
        t[i] = (float)vt_rng_below(&rng, 2);
    pair tgt = pmake((int64_t)n * k, t);
    free(t);
    VT_OP(G, bce_logits, loss.g, dl.g, prob.g, z.g, tgt.g, n, k, 0.25f);
    VT_OP(R, bce_logits, loss.r, dl.r, prob.r, z.r, tgt.r, n, k, 0.25f);
    cmp("bce_logits loss", &loss, TOL_DOUBLE);
    cmp("bce_logits dlogits", &dl, TOL_DOUBLE);
    cmp("bce_logits prob", &prob, TOL_DOUBLE);
    /* evaluation's form: probabilities alone (no labels), in place over the logits */
    pair q = prand((int64_t)n * k, 3);
    G->i->copy(G, q.g, z.g, (size_t)n * k * 4);
    memcpy(q.r, z.r, (size_t)n * k * 4);
    VT_OP(G, softmax_xent, NULL, NULL, q.g, q.g, NULL, n, k, 0.0f, 0.0f);
    VT_OP(R, softmax_xent, NULL, NULL, q.r, q.r, NULL, n, k, 0.0f, 0.0f);
    cmp("softmax_xent prob alone, in place", &q, TOL_DOUBLE);
    G->i->copy(G, q.g, z.g, (size_t)n * k * 4);
    memcpy(q.r, z.r, (size_t)n * k * 4);
    VT_OP(G, bce_logits, NULL, NULL, q.g, q.g, NULL, n, k, 0.0f);
    VT_OP(R, bce_logits, NULL, NULL, q.r, q.r, NULL, n, k, 0.0f);
    cmp("bce_logits prob alone, in place", &q, TOL_DOUBLE);
    pfree(&q);
    pair c7 = pconst((int64_t)n * k, 7.0f);
    VT_OP(G, softmax_xent, c7.g, c7.g, c7.g, z.g, lg, 0, k, 0.1f, 1.0f);
    VT_OP(G, bce_logits, c7.g, c7.g, c7.g, z.g, tgt.g, 0, k, 1.0f);
    cmp_const("losses n == 0", &c7, 7.0f);
    vt_backend_free_ptr(R, lr);
    vt_backend_free_ptr(G, lg);
    pfree(&z); pfree(&loss); pfree(&dl); pfree(&prob); pfree(&tgt); pfree(&c7);
}

/* ------------------------------------------------------------------ optimizers */

/* Variant v's update on one backend (no gate: every step taken, unclipped). */
static const char *const optim_names[7] = {
    "sgd momentum .9 wd 1e-4", "sgd nesterov dampening 0", "sgd dampening .1",
    "sgd no momentum (no buffer)", "rmsprop", "rmsprop momentum .9", "adamw wd .01"};
static void optim_update(vt_backend *be, int v, float *p, const float *g, float *s1, float *s2,
                         int64_t n, int64_t step) {
    switch (v) {
    case 0: VT_OP(be, sgd_update, p, g, s1, n, 0.1f, 0.9f, 0.0f, 1e-4f, 0, step, NULL); break;
    case 1: VT_OP(be, sgd_update, p, g, s1, n, 0.05f, 0.9f, 0.0f, 5e-4f, 1, step, NULL); break;
    case 2: VT_OP(be, sgd_update, p, g, s1, n, 0.05f, 0.8f, 0.1f, 0.0f, 0, step, NULL); break;
    case 3: VT_OP(be, sgd_update, p, g, NULL, n, 0.1f, 0.0f, 0.0f, 1e-4f, 0, step, NULL); break;
    case 4:
        VT_OP(be, rmsprop_update, p, g, s1, NULL, n, 0.01f, 0.99f, 1e-8f, 1e-4f, 0.0f, NULL);
        break;
    case 5:
        VT_OP(be, rmsprop_update, p, g, s1, s2, n, 0.01f, 0.9f, 1e-8f, 0.0f, 0.9f, NULL);
        break;
    case 6:
        VT_OP(be, adamw_update, p, g, s1, s2, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, step, NULL);
        break;
    }
}

/* Three steps with fresh gradients. The kernels repeat cpu-ref's float operations
 * unfused, so the parameters are expected bitwise equal; the check allows 1e-12 NMSE
 * (a stray ulp) and prints whether they are bitwise. */
static void test_optim(void) {
    printf("optimizers (3 steps each)\n");
    const int64_t n = 70001;
    for (int v = 0; v < 7; v++) {
        pair p = prand(n, 1), s1 = pconst(n, 0), s2 = pconst(n, 0);
        const char *name = optim_names[v];
        for (int64_t step = 1; step <= 3; step++) {
            pair g = prand(n, 0.1f);
            optim_update(G, v, p.g, g.g, s1.g, s2.g, n, step);
            optim_update(R, v, p.r, g.r, s1.r, s2.r, n, step);
            pfree(&g);
        }
        char what[96];
        snprintf(what, sizeof what, "%s: params", name);
        cmp(what, &p, TOL_DOUBLE);
        float *h = fetch(&p);
        printf("  %-44s %s\n", "", memcmp(h, p.r, (size_t)n * 4) ? "(not bitwise)" : "(bitwise)");
        free(h);
        if (v != 3) {
            snprintf(what, sizeof what, "%s: state", name);
            cmp(what, &s1, TOL_DOUBLE);
        }
        pair z = pconst(16, 7.0f);
        VT_OP(G, sgd_update, z.g, z.g, z.g, 0, 0.1f, 0.9f, 0.0f, 0.0f, 0, 1, NULL);
        VT_OP(G, adamw_update, z.g, z.g, z.g, z.g, 0, 0.1f, 0.9f, 0.99f, 1e-8f, 0.0f, 1, NULL);
        VT_OP(G, rmsprop_update, z.g, z.g, z.g, z.g, 0, 0.1f, 0.9f, 1e-8f, 0.0f, 0.9f, NULL);
        cmp_const("optimizers n == 0", &z, 7.0f);
        pfree(&z); pfree(&p); pfree(&s1); pfree(&s2);
    }
}

/* ------------------------------------------------------------------ allocator */

static void test_allocator(void) {
    printf("allocator (budget 256 MiB)\n");
    const int64_t budget = (int64_t)256 << 20;
    vt_backend *b = vt_backend_cuda_init(0, budget);
    TCHECK(b->budget == budget, "budget %lld", (long long)b->budget);
    const size_t mib = (size_t)1 << 20;
    void *a = vt_backend_alloc(b, 100 * mib);
    TCHECK(a != NULL, "100 MiB within a 256 MiB budget");
    void *c = vt_backend_alloc(b, 200 * mib);
    TCHECK(c == NULL, "200 MiB more must pass the budget and return NULL");
    vt_cuda_mem_stats st0, st1;
    vt_cuda_mem_stats_get(b, &st0);
    vt_backend_free_ptr(b, a);
    void *a2 = vt_backend_alloc(b, 100 * mib);
    vt_cuda_mem_stats_get(b, &st1);
    TCHECK(a2 == a, "a freed block of the same size is reused");
    TCHECK(st1.device_mallocs == st0.device_mallocs, "reuse makes no cudaMalloc (%lld -> %lld)",
           (long long)st0.device_mallocs, (long long)st1.device_mallocs);
    TCHECK(st1.cache_hits >= 1, "cache hits %lld", (long long)st1.cache_hits);
    vt_backend_free_ptr(b, a2);
    /* the cached 100 MiB must not stop 200 MiB from fitting: the cache is released */
    void *d = vt_backend_alloc(b, 200 * mib);
    TCHECK(d != NULL, "200 MiB after freeing 100 MiB");
    vt_cuda_mem_stats_get(b, &st1);
    TCHECK(st1.high_water <= budget, "device high water %lld within the budget",
           (long long)st1.high_water);
    TCHECK(b->high_water <= budget, "counted high water %lld within the budget",
           (long long)b->high_water);
    printf("  high water %lld B, mallocs %lld, hits %lld\n", (long long)st1.high_water,
           (long long)st1.device_mallocs, (long long)st1.cache_hits);
    vt_backend_free_ptr(b, d);
    vt_backend_free(&b);

    /* default budget: free memory at init */
    vt_backend *e = vt_backend_cuda_init(0, 0);
    vt_gpu_info gi;
    TCHECK(vt_cuda_device_query(0, &gi) == 0, "device query");
    TCHECK(e->budget > 0 && e->budget <= gi.total_bytes, "default budget %lld of %lld",
           (long long)e->budget, (long long)gi.total_bytes);
    vt_backend_free(&e);
}

/* Steady state: the same op sequence a second time makes no cudaMalloc. */
static void test_steady_state(void) {
    printf("steady state\n");
    const conv_case *cc = &conv_cases[0];
    pair x = prand(2 * 3 * 4 * 6 * 6, 1), w = prand(4 * 3 * 27, 0.2f), y = pconst(2 * 4 * 4 * 6 * 6, 0);
    pair dw = pconst(4 * 3 * 27, 0), dx = pconst(2 * 3 * 4 * 6 * 6, 0);
    vt_cuda_mem_stats a, b;
    for (int it = 0; it < 3; it++) {
        if (it == 2)
            vt_cuda_mem_stats_get(G, &a);
        float *tmp = vt_backend_alloc_x(G, 4096 * 4, "activation");
        VT_OP(G, conv3d_forward, y.g, x.g, w.g, NULL, cc->n, cc->thw, &cc->p);
        VT_OP(G, conv3d_backward, dx.g, dw.g, NULL, y.g, x.g, w.g, cc->n, cc->thw, &cc->p);
        VT_OP(G, bn_stats, tmp, tmp + 8, y.g, NULL, 2, 4, 4 * 6 * 6);
        (void)VT_OP(G, sumsq, dw.g, dw.n);
        vt_backend_free_ptr(G, tmp);
    }
    vt_cuda_mem_stats_get(G, &b);
    TCHECK(b.device_mallocs == a.device_mallocs, "steady-state step made %lld cudaMalloc calls",
           (long long)(b.device_mallocs - a.device_mallocs));
    pfree(&x); pfree(&w); pfree(&y); pfree(&dw); pfree(&dx);
}

int main(void) {
    if (vt_cuda_device_count() == 0) {
        printf("test_cuda_ops_gpu: no CUDA device: skipping\n");
        return VT_TEST_SKIP;
    }
    vt_cuda_versions v;
    vt_cuda_versions_get(&v);
    vt_gpu_info gi;
    vt_cuda_device_query(0, &gi);
    printf("cuda:0 %s (cc %d.%d, %d SMs), driver %d runtime %d cudnn %d cublas %d nccl %d\n",
           gi.name, gi.cc_major, gi.cc_minor, gi.multiprocessors, v.driver, v.runtime, v.cudnn,
           v.cublas, v.nccl);
    unsetenv("VT_TF32"); /* numerics are checked in FP32 */
    vt_rng_seed(&rng, 20240611);
    R = vt_backend_cpu_ref_init(0);
    G = vt_backend_cuda_init(0, 0);
    TCHECK(vt_cuda_tf32(G) == 0, "TF32 must be off by default");

    test_memory_elementwise();
    test_relu_dropout();
    test_conv();
    test_conv_heuristic();
    test_bn();
    test_pool();
    test_linear();
    test_losses();
    test_optim();
    test_steady_state();
    test_allocator();

    TCHECK(R->in_use == 0, "cpu-ref leaked %lld bytes", (long long)R->in_use);
    vt_backend_free(&G);
    vt_backend_free(&R);
    return vt_test_done("test_cuda_ops_gpu");
}
#endif
