/*
 * test_ops.c: every op of the fast CPU backend (cpu) against the reference (cpu-ref) on the
 * same random inputs, by NMSE (ggml test-backend-ops style), forward and backward, over
 * shapes that exercise stride 2, padding, non-cubic kernels, odd sizes, batch 1 and n = 0;
 * plus the contract details: parameter gradients accumulate, input gradients overwrite,
 * n = 0 touches nothing, dropout masks agree bitwise, the fast backend is deterministic
 * and gives the same bits from two threads at once as serially. It must never be the only
 * truth: cpu-ref itself is checked by test_gradcheck (calculus) and test_ops_torch (PyTorch).
 *
 * Tolerances (NMSE = sum (fast - ref)^2 / sum ref^2):
 *   GEMM-based (conv, linear): cpu sums in float in sgemm's order, cpu-ref in double. A sum
 *     of K float terms carries a relative error ~ sqrt(K) * 6e-8 in the worst direction and
 *     ~6e-8 on average; with K up to ~5000 here (dw sums N*To*Ho*Wo terms) NMSE stays under
 *     ~1e-11. We allow TOL_GEMM = 1e-9: 100x margin, while one wrong tap or a missing clip
 *     gives NMSE > 1e-4.
 *   everything else (double accumulators in both, or the same float formula): a few float
 *     roundings apart, NMSE ~ 1e-14; TOL_EW = 1e-12.
 * Ops whose fast code is the same float formula (optimizers, dropout, relu, bn_finalize)
 * are additionally expected to agree bitwise.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/backend.h"
#include "base/common.h"
#include "models/cpu/cpu_conv.h"
#include "models/registry.h"
#include "tests/testutil.h"

#define TOL_GEMM 1e-9
#define TOL_EW 1e-12

static vt_rng g_rng;
static vt_backend *g_ref, *g_cpu;

/* The same tensor in both backends. */
typedef struct pair { float *r, *f; int64_t n; } pair;

static pair pair_new(int64_t n, float lo, float hi) {
    pair p = {vt_backend_alloc_x(g_ref, (size_t)VT_MAX(n, 1) * 4, "test"),
              vt_backend_alloc_x(g_cpu, (size_t)VT_MAX(n, 1) * 4, "test"), n};
    for (int64_t i = 0; i < n; i++)
        p.r[i] = p.f[i] = lo + (hi - lo) * (float)vt_rng_uniform(&g_rng);
    return p;
}
static void pair_free(pair *p) {
    vt_backend_free_ptr(g_ref, p->r);
    vt_backend_free_ptr(g_cpu, p->f);
    p->r = p->f = NULL;
}
static void pair_check(const char *what, const pair *p, double tol) {
    double e = vt_nmse(p->f, p->r, p->n);
    printf("  %-44s n=%-7lld nmse %.2e\n", what, (long long)p->n, e);
    TCHECK(e <= tol, "%s: nmse %.3g > %.3g", what, e, tol);
}
static void pair_bitwise(const char *what, const pair *p) {
    int same = p->n == 0 || memcmp(p->r, p->f, (size_t)p->n * 4) == 0;
    printf("  %-44s n=%-7lld %s\n", what, (long long)p->n, same ? "bitwise equal" : "DIFFER");
    TCHECK(same, "%s: cpu and cpu-ref differ (max %.3g)", what, vt_max_abs_diff(p->f, p->r, p->n));
}
static int64_t vol(const int thw[3]) { return (int64_t)thw[0] * thw[1] * thw[2]; }

/* ------------------------------------------------------------------ conv3d ---- */

static void test_conv(int n, int cin, int cout, int T, int H, int W, int kt, int kh, int kw,
                      int st, int sh, int sw, int pt, int ph, int pw, int bias) {
    vt_conv3d_p p = {cin, cout, {kt, kh, kw}, {st, sh, sw}, {pt, ph, pw}, 1};
    int thw[3] = {T, H, W};
    int o[3];
    for (int d = 0; d < 3; d++)
        o[d] = vt_conv_out(thw[d], p.k[d], p.s[d], p.p[d]);
    int64_t nx = n * cin * vol(thw), ny = (int64_t)n * cout * vol(o);
    int64_t nw = (int64_t)cout * cin * kt * kh * kw;
    char what[128];
    snprintf(what, sizeof what, "conv n%d %d->%d %dx%dx%d k%d%d%d s%d%d%d p%d%d%d%s", n, cin, cout,
             T, H, W, kt, kh, kw, st, sh, sw, pt, ph, pw, bias ? "" : " nobias");
    pair x = pair_new(nx, -1, 1), w = pair_new(nw, -1, 1), b = pair_new(cout, -1, 1);
    pair y = pair_new(ny, 7, 7), dy = pair_new(ny, -1, 1);
    VT_OP(g_ref, conv3d_forward, y.r, x.r, w.r, bias ? b.r : NULL, n, thw, &p);
    VT_OP(g_cpu, conv3d_forward, y.f, x.f, w.f, bias ? b.f : NULL, n, thw, &p);
    char line[200];
    snprintf(line, sizeof line, "%s fwd", what);
    pair_check(line, &y, TOL_GEMM);
    if (n == 0) { /* nothing written: y still holds the 7s it was filled with (none here) */
        pair_free(&x), pair_free(&w), pair_free(&b), pair_free(&y), pair_free(&dy);
        return;
    }
    /* din starts as garbage (must be overwritten); dw, db start random (accumulate). */
    pair dx = pair_new(nx, 1e3f, 1e3f), dw = pair_new(nw, -1, 1), db = pair_new(cout, -1, 1);
    VT_OP(g_ref, conv3d_backward, dx.r, dw.r, bias ? db.r : NULL, dy.r, x.r, w.r, n, thw, &p);
    VT_OP(g_cpu, conv3d_backward, dx.f, dw.f, bias ? db.f : NULL, dy.f, x.f, w.f, n, thw, &p);
    snprintf(line, sizeof line, "%s din", what);
    pair_check(line, &dx, TOL_GEMM);
    snprintf(line, sizeof line, "%s dw", what);
    pair_check(line, &dw, TOL_GEMM);
    if (bias) {
        snprintf(line, sizeof line, "%s db", what);
        pair_check(line, &db, TOL_EW);
    }
    /* din == NULL: only dw, db (a network's first layer) */
    pair dw2 = pair_new(nw, 0, 0);
    VT_OP(g_ref, conv3d_backward, NULL, dw2.r, NULL, dy.r, x.r, w.r, n, thw, &p);
    VT_OP(g_cpu, conv3d_backward, NULL, dw2.f, NULL, dy.f, x.f, w.f, n, thw, &p);
    snprintf(line, sizeof line, "%s dw (din NULL)", what);
    pair_check(line, &dw2, TOL_GEMM);
    pair_free(&x), pair_free(&w), pair_free(&b), pair_free(&y), pair_free(&dy);
    pair_free(&dx), pair_free(&dw), pair_free(&db), pair_free(&dw2);
}

/* The cpu backend's conv tiles (models/cpu/cpu_conv.h) under a budget that leaves it `margin`
 * bytes of scratch: several clips per tile with a remainder, one clip, bands of rows, one
 * row (the floor), and the direct 1x1x1 path batched over clips. Against cpu-ref, and
 * bitwise the same with 1 and 2 threads (the tiling depends on shape and budget only). */
static void test_conv_tiled(int n, int cin, int cout, int T, int H, int W, int kt, int kh,
                            int kw, int st, int sh, int sw, int pt, int ph, int pw,
                            int64_t margin) {
    vt_conv3d_p p = {cin, cout, {kt, kh, kw}, {st, sh, sw}, {pt, ph, pw}, 1};
    int thw[3] = {T, H, W}, o[3];
    for (int d = 0; d < 3; d++)
        o[d] = vt_conv_out(thw[d], p.k[d], p.s[d], p.p[d]);
    const int64_t nx = (int64_t)n * cin * vol(thw), ny = (int64_t)n * cout * vol(o);
    const int64_t nw = (int64_t)cout * cin * kt * kh * kw;
    /* 2, 1 and 3 threads: 3 does not divide the blocks evenly (dynamic schedules) */
    vt_backend *bes[3] = {vt_backend_init("cpu", 0, 2, 0), vt_backend_init("cpu", 0, 1, 0),
                          vt_backend_init("cpu", 0, 3, 0)};
    float *res[3][4]; /* y, dx, dw, db per backend */
    pair x = pair_new(nx, -1, 1), w = pair_new(nw, -1, 1), b = pair_new(cout, -1, 1);
    pair dy = pair_new(ny, -1, 1), y = pair_new(ny, 0, 0), dx = pair_new(nx, 0, 0);
    pair dw = pair_new(nw, 0, 0), db = pair_new(cout, 0, 0);
    VT_OP(g_ref, conv3d_forward, y.r, x.r, w.r, b.r, n, thw, &p);
    VT_OP(g_ref, conv3d_backward, dx.r, dw.r, db.r, dy.r, x.r, w.r, n, thw, &p);
    vt_cpu_conv_tiling tl = {0, 0, 0};
    int64_t hw = 0;
    for (int k = 0; k < 3; k++) {
        vt_backend *be = bes[k];
        const int64_t sz[8] = {nx, nw, cout, ny, ny, nx, nw, cout};
        float *t[8];
        for (int i = 0; i < 8; i++)
            t[i] = vt_backend_alloc_x(be, (size_t)sz[i] * 4, "t");
        memcpy(t[0], x.r, (size_t)nx * 4), memcpy(t[1], w.r, (size_t)nw * 4);
        memcpy(t[2], b.r, (size_t)cout * 4), memcpy(t[3], dy.r, (size_t)ny * 4);
        memset(t[6], 0, (size_t)nw * 4), memset(t[7], 0, (size_t)cout * 4);
        be->budget = be->in_use + margin;
        VT_OP(be, conv3d_forward, t[4], t[0], t[1], t[2], n, thw, &p);
        VT_OP(be, conv3d_backward, t[5], t[6], t[7], t[3], t[0], t[1], n, thw, &p);
        TCHECK(be->high_water <= be->budget, "tiled conv passed its budget");
        hw = be->high_water - (be->budget - margin);
        for (int i = 0; i < 4; i++) {
            res[k][i] = vt_malloc((size_t)sz[4 + i] * 4);
            memcpy(res[k][i], t[4 + i], (size_t)sz[4 + i] * 4);
        }
        for (int i = 0; i < 8; i++)
            vt_backend_free_ptr(be, t[i]);
        TCHECK(be->in_use == 0, "tiled conv leaks");
    }
    /* the tiling the op settled on: the largest whose scratch fits the margin */
    int64_t cap = VT_CPU_CONV_SCRATCH_CAP / 4;
    do {
        vt_cpu_conv_tiling_make(&tl, n, thw, &p, cap);
        cap = tl.scratch_floats / 2;
    } while (tl.scratch_floats * 4 > margin && !(tl.clips == 1 && tl.rows == 1));
    char what[160], line[220];
    snprintf(what, sizeof what, "tiled n%d %d->%d %dx%dx%d k%d%d%d s%d%d%d (%d clips x %d rows)",
             n, cin, cout, T, H, W, kt, kh, kw, st, sh, sw, tl.clips, tl.rows);
    TCHECK(hw == tl.scratch_floats * 4, "%s: scratch held %lld, tiling says %lld", what,
           (long long)hw, (long long)tl.scratch_floats * 4);
    memcpy(y.f, res[0][0], (size_t)ny * 4), memcpy(dx.f, res[0][1], (size_t)nx * 4);
    memcpy(dw.f, res[0][2], (size_t)nw * 4), memcpy(db.f, res[0][3], (size_t)cout * 4);
    snprintf(line, sizeof line, "%s fwd", what);
    pair_check(line, &y, TOL_GEMM);
    snprintf(line, sizeof line, "%s din", what);
    pair_check(line, &dx, TOL_GEMM);
    snprintf(line, sizeof line, "%s dw", what);
    pair_check(line, &dw, TOL_GEMM);
    const int64_t len[4] = {ny, nx, nw, cout};
    int same = 1;
    for (int i = 0; i < 4; i++)
        same &= memcmp(res[0][i], res[1][i], (size_t)len[i] * 4) == 0 &&
                memcmp(res[0][i], res[2][i], (size_t)len[i] * 4) == 0;
    TCHECK(same, "%s: 1, 2 and 3 threads differ", what);
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < 4; i++)
            free(res[k][i]);
        vt_backend_free(&bes[k]);
    }
    pair_free(&x), pair_free(&w), pair_free(&b), pair_free(&dy), pair_free(&y);
    pair_free(&dx), pair_free(&dw), pair_free(&db);
}

/* dw and db accumulate: two backward calls from zero give twice one call; din overwrites. */
static void test_accumulate(vt_backend *be) {
    vt_conv3d_p p = {2, 3, {3, 3, 3}, {1, 2, 2}, {1, 1, 1}, 1};
    int thw[3] = {4, 6, 6}, o[3];
    for (int d = 0; d < 3; d++)
        o[d] = vt_conv_out(thw[d], p.k[d], p.s[d], p.p[d]);
    int64_t nx = 2 * 2 * vol(thw), ny = 2 * 3 * vol(o), nw = 3 * 2 * 27;
    float *x = vt_malloc(nx * 4), *w = vt_malloc(nw * 4), *dy = vt_malloc(ny * 4);
    float *dx1 = vt_malloc(nx * 4), *dx2 = vt_malloc(nx * 4);
    float *dw1 = vt_calloc(nw, 4), *dw2 = vt_calloc(nw, 4), *db1 = vt_calloc(3, 4),
          *db2 = vt_calloc(3, 4);
    for (int64_t i = 0; i < nx; i++)
        x[i] = (float)vt_rng_uniform(&g_rng) - 0.5f;
    for (int64_t i = 0; i < nw; i++)
        w[i] = (float)vt_rng_uniform(&g_rng) - 0.5f;
    for (int64_t i = 0; i < ny; i++)
        dy[i] = (float)vt_rng_uniform(&g_rng) - 0.5f;
    VT_OP(be, conv3d_backward, dx1, dw1, db1, dy, x, w, 2, thw, &p);
    VT_OP(be, conv3d_backward, dx2, dw2, db2, dy, x, w, 2, thw, &p);
    VT_OP(be, conv3d_backward, dx2, dw2, db2, dy, x, w, 2, thw, &p);
    for (int64_t i = 0; i < nw; i++)
        dw1[i] *= 2;
    for (int i = 0; i < 3; i++)
        db1[i] *= 2;
    /* dw2 = g + g where dw1 = 2g: exact unless sgemm folds beta*C in mid-sum (NMSE ~1e-14) */
    TCHECK(vt_nmse(dw2, dw1, nw) < TOL_EW, "%s conv dw accumulates: nmse %.3g", be->i->name,
           vt_nmse(dw2, dw1, nw));
    TCHECK(vt_nmse(db2, db1, 3) < TOL_EW, "%s conv db accumulates", be->i->name);
    TCHECK(memcmp(dx1, dx2, nx * 4) == 0, "%s conv din is overwritten, not accumulated",
           be->i->name);
    /* linear too */
    float *lx = vt_malloc(6 * 4), *lw = vt_malloc(12 * 4), *ldy = vt_malloc(8 * 4);
    float *ldw = vt_calloc(12, 4), *ldb = vt_calloc(4, 4), *ldx = vt_malloc(6 * 4);
    float *ldw1 = vt_calloc(12, 4), *ldb1 = vt_calloc(4, 4), *ldx1 = vt_malloc(6 * 4);
    for (int i = 0; i < 6; i++)
        lx[i] = (float)i - 2.5f;
    for (int i = 0; i < 12; i++)
        lw[i] = 0.25f * (float)(i % 5) - 0.5f;
    for (int i = 0; i < 8; i++)
        ldy[i] = 0.125f * (float)i - 0.3f;
    VT_OP(be, linear_backward, ldx1, ldw1, ldb1, ldy, lx, lw, 2, 3, 4);
    VT_OP(be, linear_backward, ldx, ldw, ldb, ldy, lx, lw, 2, 3, 4);
    VT_OP(be, linear_backward, ldx, ldw, ldb, ldy, lx, lw, 2, 3, 4);
    int ok = 1;
    for (int i = 0; i < 12; i++)
        ok &= fabsf(ldw[i] - 2 * ldw1[i]) <= 1e-6f * (1 + fabsf(ldw[i]));
    for (int i = 0; i < 4; i++)
        ok &= fabsf(ldb[i] - 2 * ldb1[i]) <= 1e-6f * (1 + fabsf(ldb[i]));
    ok &= memcmp(ldx, ldx1, 6 * 4) == 0;
    TCHECK(ok, "%s linear: dw/db accumulate, din overwrites", be->i->name);
    printf("  %-44s %s\n", be->i->name, "accumulate/overwrite semantics checked");
    free(x), free(w), free(dy), free(dx1), free(dx2), free(dw1), free(dw2), free(db1), free(db2);
    free(lx), free(lw), free(ldy), free(ldw), free(ldb), free(ldx), free(ldw1), free(ldb1);
    free(ldx1);
}

/* n == 0: every op leaves its outputs alone (bn_stats/bn_backward_reduce write zeros: the
 * sums over no values, so a clip-less tower still joins the sync-BN collective). */
static void test_n0(vt_backend *be) {
    float out[64], dw[64], db[4], in[64] = {0}, w[64] = {0};
    for (int i = 0; i < 64; i++)
        out[i] = dw[i] = 5.0f;
    for (int i = 0; i < 4; i++)
        db[i] = 5.0f;
    vt_conv3d_p p = {1, 1, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, 1};
    int thw[3] = {2, 2, 2};
    VT_OP(be, conv3d_forward, out, in, w, NULL, 0, thw, &p);
    VT_OP(be, conv3d_backward, out, dw, db, in, in, w, 0, thw, &p);
    vt_pool3d_p pp = {{2, 2, 2}, {2, 2, 2}, {0, 0, 0}, 0};
    VT_OP(be, maxpool3d_forward, out, in, 0, 1, thw, &pp);
    VT_OP(be, maxpool3d_backward, out, in, in, 0, 1, thw, &pp);
    VT_OP(be, avgpool3d_forward, out, in, 0, 1, thw, &pp);
    VT_OP(be, avgpool3d_backward, out, in, 0, 1, thw, &pp);
    VT_OP(be, gap_forward, out, in, 0, 1, 8);
    VT_OP(be, gap_backward, out, in, 0, 1, 8);
    VT_OP(be, linear_forward, out, in, w, NULL, 0, 2, 2);
    VT_OP(be, linear_backward, out, dw, db, in, in, w, 0, 2, 2);
    VT_OP(be, bn_apply, out, in, in, in, in, NULL, NULL, 0, 1, 8);
    VT_OP(be, bn_backward_apply, out, in, in, in, in, in, in, in, in, 0, 0, 1, 8);
    int32_t lab[1] = {0};
    VT_OP(be, softmax_xent, out, out, out, in, lab, 0, 2, 0.1f, 1.0f);
    VT_OP(be, bce_logits, out, out, out, in, in, 0, 2, 1.0f);
    VT_OP(be, round_even, out, 0);
    int ok = 1;
    for (int i = 0; i < 64; i++)
        ok &= out[i] == 5.0f && dw[i] == 5.0f;
    for (int i = 0; i < 4; i++)
        ok &= db[i] == 5.0f;
    float sum[2] = {5, 5}, sq[2] = {5, 5};
    VT_OP(be, bn_stats, sum, sq, in, NULL, 0, 2, 8);
    ok &= sum[0] == 0 && sum[1] == 0 && sq[0] == 0 && sq[1] == 0;
    VT_OP(be, bn_backward_reduce, sum, sq, in, in, in, in, in, 0, 2, 8);
    ok &= sum[0] == 0 && sum[1] == 0 && sq[0] == 0 && sq[1] == 0;
    TCHECK(ok, "%s: n = 0 must leave outputs alone", be->i->name);
    printf("  %-44s %s\n", be->i->name, "n = 0 leaves outputs alone");
}

/* ------------------------------------------------------------------ batch norm ---- */

static void test_bn(int n, int c, int64_t s) {
    char what[96];
    int64_t nx = (int64_t)n * c * s;
    pair x = pair_new(nx, -1, 3), g = pair_new(c, 0.5f, 1.5f), b = pair_new(c, -1, 1);
    pair sum = pair_new(c, 0, 0), sq = pair_new(c, 0, 0), mean = pair_new(c, 0, 0);
    pair inv = pair_new(c, 0, 0), rm = pair_new(c, -1, 1), rv = pair_new(c, 0.5f, 2);
    pair y = pair_new(nx, 0, 0), dy = pair_new(nx, -1, 1), sdy = pair_new(c, 0, 0);
    pair sdyx = pair_new(c, 0, 0), dx = pair_new(nx, 0, 0);
    pair sh = pair_new(c, 0, 0); /* the shift k: the batch mean, as net.c bn_forward makes it */
    vt_backend *bes[2] = {g_ref, g_cpu};
    for (int k = 0; k < 2; k++) {
        vt_backend *be = bes[k];
#define P(v) (k ? v.f : v.r)
        VT_OP(be, bn_stats, P(sh), P(sq), P(x), NULL, n, c, s);
        VT_OP(be, scale, P(sh), (float)(1.0 / (double)((int64_t)n * s)), c);
        VT_OP(be, bn_stats, P(sum), P(sq), P(x), P(sh), n, c, s);
        VT_OP(be, bn_finalize, P(mean), P(inv), P(rm), P(rv), P(sum), P(sq), P(sh),
              (int64_t)n * s, c, 0.1f, 1e-5f);
        VT_OP(be, bn_apply, P(y), P(x), P(sh), P(mean), P(inv), P(g), P(b), n, c, s);
        VT_OP(be, bn_backward_reduce, P(sdy), P(sdyx), P(dy), P(x), P(sh), P(mean), P(inv), n, c,
              s);
        VT_OP(be, bn_backward_apply, P(dx), P(dy), P(x), P(sh), P(mean), P(inv), P(g), P(sdy),
              P(sdyx),
              (int64_t)n * s, n, c, s);
#undef P
    }
    snprintf(what, sizeof what, "bn n%d c%d s%lld", n, c, (long long)s);
    char line[160];
#define CHK(v, tol)                                                                \
    snprintf(line, sizeof line, "%s %s", what, #v), pair_check(line, &v, tol)
    CHK(sh, TOL_EW);
    CHK(sum, TOL_EW);
    CHK(sq, TOL_EW);
    CHK(mean, TOL_EW);
    CHK(inv, TOL_EW);
    CHK(rm, TOL_EW);
    CHK(rv, TOL_EW);
    CHK(y, TOL_EW);
    CHK(sdy, TOL_EW);
    CHK(sdyx, TOL_EW);
    CHK(dx, TOL_EW);
    /* eval: count 0 -> the running statistics */
    VT_OP(g_ref, bn_finalize, mean.r, inv.r, rm.r, rv.r, sum.r, sq.r, NULL, 0, c, 0.1f, 1e-5f);
    VT_OP(g_cpu, bn_finalize, mean.f, inv.f, rm.f, rv.f, sum.f, sq.f, NULL, 0, c, 0.1f, 1e-5f);
    int ok = 1;
    for (int i = 0; i < c; i++)
        ok &= mean.r[i] == rm.r[i] &&
              fabsf(inv.r[i] - 1.0f / sqrtf(rv.r[i] + 1e-5f)) <= 1e-6f * inv.r[i];
    TCHECK(ok, "bn_finalize count 0 uses the running statistics");
    CHK(mean, TOL_EW);
    CHK(inv, TOL_EW);
#undef CHK
    pair *all[] = {&x, &g, &b, &sum, &sq, &mean, &inv, &rm, &rv, &y, &dy, &sdy, &sdyx, &dx, &sh};
    for (size_t i = 0; i < VT_ARRAY_LEN(all); i++)
        pair_free(all[i]);
}

/* ------------------------------------------------------------------ pooling ---- */

static void test_pool(int n, int c, int T, int H, int W, vt_pool3d_p pp) {
    int thw[3] = {T, H, W}, o[3];
    for (int d = 0; d < 3; d++)
        o[d] = vt_pool_out(thw[d], pp.k[d], pp.s[d], pp.p[d], pp.ceil_mode);
    int64_t nx = (int64_t)n * c * vol(thw), ny = (int64_t)n * c * vol(o);
    char what[128], line[200];
    snprintf(what, sizeof what, "pool n%d c%d %dx%dx%d k%d%d%d s%d%d%d p%d%d%d%s", n, c, T, H, W,
             pp.k[0], pp.k[1], pp.k[2], pp.s[0], pp.s[1], pp.s[2], pp.p[0], pp.p[1], pp.p[2],
             pp.ceil_mode ? " ceil" : "");
    pair x = pair_new(nx, -1, 1), y = pair_new(ny, 0, 0), dy = pair_new(ny, -1, 1);
    pair dx = pair_new(nx, 9, 9);
    /* some exact ties so "first maximum" matters */
    for (int64_t i = 0; i + 1 < nx; i += 5)
        x.r[i + 1] = x.f[i + 1] = x.r[i];
    VT_OP(g_ref, maxpool3d_forward, y.r, x.r, n, c, thw, &pp);
    VT_OP(g_cpu, maxpool3d_forward, y.f, x.f, n, c, thw, &pp);
    snprintf(line, sizeof line, "max%s fwd", what);
    pair_bitwise(line, &y);
    VT_OP(g_ref, maxpool3d_backward, dx.r, dy.r, x.r, n, c, thw, &pp);
    VT_OP(g_cpu, maxpool3d_backward, dx.f, dy.f, x.f, n, c, thw, &pp);
    snprintf(line, sizeof line, "max%s bwd", what);
    pair_check(line, &dx, TOL_EW);
    VT_OP(g_ref, avgpool3d_forward, y.r, x.r, n, c, thw, &pp);
    VT_OP(g_cpu, avgpool3d_forward, y.f, x.f, n, c, thw, &pp);
    snprintf(line, sizeof line, "avg%s fwd", what);
    pair_check(line, &y, TOL_EW);
    VT_OP(g_ref, avgpool3d_backward, dx.r, dy.r, n, c, thw, &pp);
    VT_OP(g_cpu, avgpool3d_backward, dx.f, dy.f, n, c, thw, &pp);
    snprintf(line, sizeof line, "avg%s bwd", what);
    pair_check(line, &dx, TOL_EW);
    pair_free(&x), pair_free(&y), pair_free(&dy), pair_free(&dx);
}

static void test_gap(int n, int c, int64_t s) {
    pair x = pair_new(n * c * s, -1, 1), y = pair_new(n * c, 0, 0), dy = pair_new(n * c, -1, 1);
    pair dx = pair_new(n * c * s, 0, 0);
    VT_OP(g_ref, gap_forward, y.r, x.r, n, c, s);
    VT_OP(g_cpu, gap_forward, y.f, x.f, n, c, s);
    pair_check("gap fwd", &y, TOL_EW);
    VT_OP(g_ref, gap_backward, dx.r, dy.r, n, c, s);
    VT_OP(g_cpu, gap_backward, dx.f, dy.f, n, c, s);
    pair_check("gap bwd", &dx, TOL_EW);
    pair_free(&x), pair_free(&y), pair_free(&dy), pair_free(&dx);
}

/* ------------------------------------------------------------------ linear ---- */

static void test_linear(int n, int in_f, int out_f) {
    char line[128];
    pair x = pair_new((int64_t)n * in_f, -1, 1), w = pair_new((int64_t)in_f * out_f, -1, 1);
    pair b = pair_new(out_f, -1, 1), y = pair_new((int64_t)n * out_f, 0, 0);
    pair dy = pair_new((int64_t)n * out_f, -1, 1), dx = pair_new((int64_t)n * in_f, 9, 9);
    pair dw = pair_new((int64_t)in_f * out_f, -1, 1), db = pair_new(out_f, -1, 1);
    VT_OP(g_ref, linear_forward, y.r, x.r, w.r, b.r, n, in_f, out_f);
    VT_OP(g_cpu, linear_forward, y.f, x.f, w.f, b.f, n, in_f, out_f);
    snprintf(line, sizeof line, "linear n%d %d->%d fwd", n, in_f, out_f);
    pair_check(line, &y, TOL_GEMM);
    VT_OP(g_ref, linear_backward, dx.r, dw.r, db.r, dy.r, x.r, w.r, n, in_f, out_f);
    VT_OP(g_cpu, linear_backward, dx.f, dw.f, db.f, dy.f, x.f, w.f, n, in_f, out_f);
    snprintf(line, sizeof line, "linear n%d %d->%d din", n, in_f, out_f);
    pair_check(line, &dx, TOL_GEMM);
    snprintf(line, sizeof line, "linear n%d %d->%d dw", n, in_f, out_f);
    pair_check(line, &dw, TOL_GEMM);
    snprintf(line, sizeof line, "linear n%d %d->%d db", n, in_f, out_f);
    pair_check(line, &db, TOL_EW);
    pair *all[] = {&x, &w, &b, &y, &dy, &dx, &dw, &db};
    for (size_t i = 0; i < VT_ARRAY_LEN(all); i++)
        pair_free(all[i]);
}

/* ------------------------------------------------------------------ element-wise ---- */

static void test_elementwise(int64_t n) {
    pair a = pair_new(n, -1, 1), b = pair_new(n, -1, 1), o = pair_new(n, 0, 0);
    pair m = pair_new(n, 0, 0);
    VT_OP(g_ref, add, o.r, a.r, b.r, n), VT_OP(g_cpu, add, o.f, a.f, b.f, n);
    pair_bitwise("add", &o);
    VT_OP(g_ref, axpy, o.r, 0.3f, a.r, n), VT_OP(g_cpu, axpy, o.f, 0.3f, a.f, n);
    pair_bitwise("axpy", &o);
    VT_OP(g_ref, scale, o.r, -1.7f, n), VT_OP(g_cpu, scale, o.f, -1.7f, n);
    pair_bitwise("scale", &o);
    double s1 = VT_OP(g_ref, sumsq, a.r, n), s2 = VT_OP(g_cpu, sumsq, a.f, n);
    /* two double sums of n float squares in different orders: relative ~n * 1e-16 */
    TCHECK(fabs(s1 - s2) <= 1e-10 * s1, "sumsq %.17g vs %.17g", s1, s2);
    printf("  %-44s n=%-7lld rel diff %.2e\n", "sumsq", (long long)n, fabs(s1 - s2) / s1);
    VT_OP(g_ref, relu_forward, o.r, a.r, n), VT_OP(g_cpu, relu_forward, o.f, a.f, n);
    pair_bitwise("relu fwd", &o);
    VT_OP(g_ref, relu_backward, m.r, b.r, o.r, n), VT_OP(g_cpu, relu_backward, m.f, b.f, o.f, n);
    pair_bitwise("relu bwd", &m);
    VT_OP(g_ref, relu_forward, a.r, a.r, n), VT_OP(g_cpu, relu_forward, a.f, a.f, n);
    pair_bitwise("relu in place", &a);
    VT_OP(g_ref, dropout_forward, o.r, m.r, b.r, n, 0.4f, 99), VT_OP(g_cpu, dropout_forward, o.f,
                                                                     m.f, b.f, n, 0.4f, 99);
    pair_bitwise("dropout mask", &m);
    pair_bitwise("dropout out", &o);
    int64_t kept = 0;
    for (int64_t i = 0; i < n; i++)
        kept += m.r[i] != 0;
    /* binomial(n, 0.6): 5 standard deviations */
    double sd = sqrt(n * 0.24);
    TCHECK(fabs(kept - 0.6 * n) < 5 * sd + 1, "dropout keeps %lld of %lld", (long long)kept,
           (long long)n);
    VT_OP(g_ref, dropout_backward, a.r, b.r, m.r, n), VT_OP(g_cpu, dropout_backward, a.f, b.f,
                                                            m.f, n);
    pair_bitwise("dropout bwd", &a);
    VT_OP(g_ref, fill, o.r, 2.5f, n), VT_OP(g_cpu, fill, o.f, 2.5f, n);
    pair_bitwise("fill", &o);
    /* a few units either side of 0, every 7th an exact half: ties go to the even integer */
    for (int64_t i = 0; i < n; i++)
        o.r[i] = o.f[i] = i % 7 == 0 ? (float)(i % 11) - 4.5f : 8.0f * b.r[i];
    VT_OP(g_ref, round_even, o.r, n), VT_OP(g_cpu, round_even, o.f, n);
    pair_bitwise("round_even", &o);
    TCHECK(o.r[0] == -4.0f && o.r[7] == 2.0f, "round_even: -4.5 -> %g, 2.5 -> %g (ties to even)",
           (double)o.r[0], (double)o.r[7]);
    pair_free(&a), pair_free(&b), pair_free(&o), pair_free(&m);
}

/* ------------------------------------------------------------------ losses ---- */

static void test_losses(int n, int k, float smoothing) {
    pair z = pair_new((int64_t)n * k, -4, 4), l = pair_new(n, 0, 0);
    pair dz = pair_new((int64_t)n * k, 0, 0), pr = pair_new((int64_t)n * k, 0, 0);
    pair t = pair_new((int64_t)n * k, 0, 0);
    int32_t *lab = vt_malloc((size_t)VT_MAX(n, 1) * 4);
    for (int i = 0; i < n; i++)
        lab[i] = (int32_t)vt_rng_below(&g_rng, (uint32_t)k);
    for (int64_t i = 0; i < (int64_t)n * k; i++)
        t.r[i] = t.f[i] = vt_rng_uniform(&g_rng) < 0.3 ? 1.0f : 0.0f;
    char line[128];
    VT_OP(g_ref, softmax_xent, l.r, dz.r, pr.r, z.r, lab, n, k, smoothing, 0.25f);
    VT_OP(g_cpu, softmax_xent, l.f, dz.f, pr.f, z.f, lab, n, k, smoothing, 0.25f);
    snprintf(line, sizeof line, "softmax_xent n%d k%d eps%.2f loss", n, k, smoothing);
    pair_check(line, &l, TOL_EW);
    snprintf(line, sizeof line, "softmax_xent n%d k%d eps%.2f dlogits", n, k, smoothing);
    pair_check(line, &dz, TOL_EW);
    snprintf(line, sizeof line, "softmax_xent n%d k%d eps%.2f prob", n, k, smoothing);
    pair_check(line, &pr, TOL_EW);
    /* evaluation's form: probabilities alone (no labels), in place over the logits */
    pair q = pair_new((int64_t)n * k, 0, 0);
    memcpy(q.r, z.r, (size_t)n * k * 4), memcpy(q.f, z.f, (size_t)n * k * 4);
    VT_OP(g_ref, softmax_xent, NULL, NULL, q.r, q.r, NULL, n, k, smoothing, 0.0f);
    VT_OP(g_cpu, softmax_xent, NULL, NULL, q.f, q.f, NULL, n, k, smoothing, 0.0f);
    snprintf(line, sizeof line, "softmax_xent n%d k%d prob alone, in place", n, k);
    TCHECK(!memcmp(q.r, pr.r, (size_t)n * k * 4) && !memcmp(q.f, pr.f, (size_t)n * k * 4),
           "%s: not the bits of the prob beside the loss", line);
    printf("  %-44s n=%-7lld %s\n", line, (long long)q.n, "bitwise the prob above");
    VT_OP(g_ref, bce_logits, l.r, dz.r, pr.r, z.r, t.r, n, k, 0.5f);
    VT_OP(g_cpu, bce_logits, l.f, dz.f, pr.f, z.f, t.f, n, k, 0.5f);
    snprintf(line, sizeof line, "bce n%d k%d loss", n, k);
    pair_check(line, &l, TOL_EW);
    snprintf(line, sizeof line, "bce n%d k%d dlogits", n, k);
    pair_check(line, &dz, TOL_EW);
    snprintf(line, sizeof line, "bce n%d k%d prob (sigmoid)", n, k);
    pair_check(line, &pr, TOL_EW);
    memcpy(q.r, z.r, (size_t)n * k * 4), memcpy(q.f, z.f, (size_t)n * k * 4);
    VT_OP(g_ref, bce_logits, NULL, NULL, q.r, q.r, NULL, n, k, 0.0f);
    VT_OP(g_cpu, bce_logits, NULL, NULL, q.f, q.f, NULL, n, k, 0.0f);
    snprintf(line, sizeof line, "bce n%d k%d prob alone, in place", n, k);
    TCHECK(!memcmp(q.r, pr.r, (size_t)n * k * 4) && !memcmp(q.f, pr.f, (size_t)n * k * 4),
           "%s: not the bits of the prob beside the loss", line);
    printf("  %-44s n=%-7lld %s\n", line, (long long)q.n, "bitwise the prob above");
    free(lab);
    pair_free(&z), pair_free(&l), pair_free(&dz), pair_free(&pr), pair_free(&t), pair_free(&q);
}

/* ------------------------------------------------------------------ optimizers ---- */

static void test_optim(int64_t n) {
    pair p = pair_new(n, -1, 1), g = pair_new(n, -1, 1), s1 = pair_new(n, 0, 0);
    pair s2 = pair_new(n, 0, 0);
    /* SGD: momentum, dampening, nesterov, weight decay; state from step 1 */
    for (int nest = 0; nest < 2; nest++)
        for (int64_t step = 1; step <= 3; step++) {
            VT_OP(g_ref, sgd_update, p.r, g.r, s1.r, n, 0.1f, 0.9f, nest ? 0.0f : 0.1f, 1e-2f,
                  nest, step, NULL);
            VT_OP(g_cpu, sgd_update, p.f, g.f, s1.f, n, 0.1f, 0.9f, nest ? 0.0f : 0.1f, 1e-2f,
                  nest, step, NULL);
        }
    pair_bitwise("sgd (momentum, nesterov, wd) param", &p);
    pair_bitwise("sgd momentum buffer", &s1);
    for (int64_t step = 1; step <= 2; step++) { /* plain SGD: no buffer */
        VT_OP(g_ref, sgd_update, p.r, g.r, NULL, n, 0.1f, 0.0f, 0.0f, 0.0f, 0, step, NULL);
        VT_OP(g_cpu, sgd_update, p.f, g.f, NULL, n, 0.1f, 0.0f, 0.0f, 0.0f, 0, step, NULL);
    }
    pair_bitwise("sgd plain param", &p);
    for (int mom = 0; mom < 2; mom++)
        for (int step = 0; step < 3; step++) {
            VT_OP(g_ref, rmsprop_update, p.r, g.r, s1.r, s2.r, n, 0.01f, 0.99f, 1e-8f, 1e-3f,
                  mom ? 0.9f : 0.0f, NULL);
            VT_OP(g_cpu, rmsprop_update, p.f, g.f, s1.f, s2.f, n, 0.01f, 0.99f, 1e-8f, 1e-3f,
                  mom ? 0.9f : 0.0f, NULL);
        }
    pair_bitwise("rmsprop (momentum, wd) param", &p);
    pair_bitwise("rmsprop square_avg", &s1);
    pair_bitwise("rmsprop momentum", &s2);
    for (int64_t step = 1; step <= 3; step++) {
        VT_OP(g_ref, adamw_update, p.r, g.r, s1.r, s2.r, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.05f,
              step, NULL);
        VT_OP(g_cpu, adamw_update, p.f, g.f, s1.f, s2.f, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.05f,
              step, NULL);
    }
    pair_bitwise("adamw param", &p);
    pair_bitwise("adamw exp_avg", &s1);
    pair_bitwise("adamw exp_avg_sq", &s2);
    pair_free(&p), pair_free(&g), pair_free(&s1), pair_free(&s2);
}

/* ------------------------------------------------------------------ determinism, threads ---- */

/* A small forward+backward chain on one backend; writes its results to res (floats). */
typedef struct chain { vt_backend *be; float *res; int64_t nres; } chain;
#define CH_N 3
#define CH_CIN 5
#define CH_COUT 16
static const int ch_thw[3] = {6, 14, 14};

static void *run_chain(void *arg) {
    chain *c = arg;
    vt_backend *be = c->be;
    vt_conv3d_p p = {CH_CIN, CH_COUT, {3, 3, 3}, {1, 2, 2}, {1, 1, 1}, 1};
    int o[3];
    for (int d = 0; d < 3; d++)
        o[d] = vt_conv_out(ch_thw[d], p.k[d], p.s[d], p.p[d]);
    int64_t nx = (int64_t)CH_N * CH_CIN * vol(ch_thw), ny = (int64_t)CH_N * CH_COUT * vol(o);
    int64_t nw = (int64_t)CH_COUT * CH_CIN * 27;
    vt_rng r;
    vt_rng_seed(&r, 7);
    float *x = vt_backend_alloc_x(be, nx * 4, "x"), *w = vt_backend_alloc_x(be, nw * 4, "w");
    float *y = vt_backend_alloc_x(be, ny * 4, "y"), *dy = vt_backend_alloc_x(be, ny * 4, "dy");
    for (int64_t i = 0; i < nx; i++)
        x[i] = (float)vt_rng_uniform(&r) - 0.5f;
    for (int64_t i = 0; i < nw; i++)
        w[i] = (float)vt_rng_uniform(&r) - 0.5f;
    for (int64_t i = 0; i < ny; i++)
        dy[i] = (float)vt_rng_uniform(&r) - 0.5f;
    /* res = [y | bn out | dx | dw | sumsq] */
    c->nres = ny + ny + nx + nw + 1;
    c->res = vt_calloc((size_t)c->nres, 4);
    float *ry = c->res, *rb = ry + ny, *rdx = rb + ny, *rdw = rdx + nx;
    VT_OP(be, conv3d_forward, ry, x, w, NULL, CH_N, ch_thw, &p);
    float sum[CH_COUT], sq[CH_COUT], mean[CH_COUT], inv[CH_COUT];
    VT_OP(be, bn_stats, sum, sq, ry, NULL, CH_N, CH_COUT, vol(o));
    VT_OP(be, bn_finalize, mean, inv, NULL, NULL, sum, sq, NULL, CH_N * vol(o), CH_COUT, 0.1f,
          1e-5f);
    VT_OP(be, bn_apply, rb, ry, NULL, mean, inv, NULL, NULL, CH_N, CH_COUT, vol(o));
    VT_OP(be, relu_forward, y, rb, ny);
    VT_OP(be, relu_backward, y, dy, y, ny);
    VT_OP(be, conv3d_backward, rdx, rdw, NULL, y, x, w, CH_N, ch_thw, &p);
    rdw[nw] = (float)VT_OP(be, sumsq, rdx, nx);
    vt_backend_free_ptr(be, x), vt_backend_free_ptr(be, w), vt_backend_free_ptr(be, y);
    vt_backend_free_ptr(be, dy);
    return NULL;
}

static void test_determinism_threads(void) {
    chain a = {g_cpu, NULL, 0}, b = {g_cpu, NULL, 0};
    run_chain(&a);
    run_chain(&b);
    TCHECK(a.nres == b.nres && memcmp(a.res, b.res, (size_t)a.nres * 4) == 0,
           "cpu backend: two runs differ");
    printf("  %-44s %s\n", "determinism: conv/bn/relu chain twice", "bitwise equal");
    /* the chain also agrees with cpu-ref */
    chain r = {g_ref, NULL, 0};
    run_chain(&r);
    double e = vt_nmse(a.res, r.res, a.nres - 1); /* the last float, sumsq, would dominate */
    printf("  %-44s nmse %.2e\n", "chain cpu vs cpu-ref", e);
    TCHECK(e < TOL_GEMM, "chain: cpu vs cpu-ref nmse %.3g", e);
    /* two towers, each owning a cpu backend, at the same time */
    /* different thread counts on purpose: the bits must not depend on them either */
    vt_backend *t1 = vt_backend_init("cpu", 1, 2, 0), *t2 = vt_backend_init("cpu", 2, 1, 0);
    chain c1 = {t1, NULL, 0}, c2 = {t2, NULL, 0};
    pthread_t th1, th2;
    VT_CHECK(pthread_create(&th1, NULL, run_chain, &c1) == 0, "pthread_create");
    VT_CHECK(pthread_create(&th2, NULL, run_chain, &c2) == 0, "pthread_create");
    pthread_join(th1, NULL);
    pthread_join(th2, NULL);
    int same = memcmp(c1.res, a.res, (size_t)a.nres * 4) == 0 &&
               memcmp(c2.res, a.res, (size_t)a.nres * 4) == 0;
    TCHECK(same, "two concurrent cpu backends differ from the serial run");
    printf("  %-44s %s\n", "2 threads x own cpu backend vs serial",
           same ? "bitwise equal" : "DIFFER");
    TCHECK(t1->in_use == 0 && t2->in_use == 0, "tower backends leak allocations");
    vt_backend_free(&t1);
    vt_backend_free(&t2);
    /* OpenBLAS's process-wide thread count: restore what g_cpu asked for */
    vt_backend *again = vt_backend_init("cpu", 0, g_cpu->threads, 0);
    vt_backend_free(&again);
    free(a.res), free(b.res), free(r.res), free(c1.res), free(c2.res);
}

int main(void) {
    vt_rng_seed(&g_rng, 1234);
    g_ref = vt_backend_init("cpu-ref", 0, 1, 0);
    g_cpu = vt_backend_init("cpu", 0, 2, 0);
    TCHECK(g_ref && g_cpu, "backends");
    if (!g_ref || !g_cpu)
        return vt_test_done("test_ops");
    TCHECK(!strcmp(g_ref->i->name, "cpu-ref") && !strcmp(g_cpu->i->name, "cpu"), "names");

    printf("conv3d\n");
    /*         n cin cout  T  H  W  k      s      p     bias */
    test_conv(2, 3, 4, 5, 9, 9, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1);
    test_conv(1, 4, 6, 4, 11, 13, 3, 3, 3, 2, 2, 2, 1, 1, 1, 1);   /* stride 2, odd sizes */
    test_conv(2, 3, 5, 6, 10, 10, 1, 3, 3, 1, 2, 2, 0, 1, 1, 0);   /* (2+1)D spatial */
    test_conv(3, 5, 3, 7, 5, 6, 3, 1, 1, 1, 1, 1, 1, 0, 0, 1);     /* (2+1)D temporal */
    test_conv(2, 8, 6, 3, 7, 7, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1);     /* 1x1x1: direct sgemm */
    test_conv(2, 6, 8, 5, 7, 7, 1, 1, 1, 2, 2, 2, 0, 0, 0, 0);     /* 1x1x1 stride 2 shortcut */
    test_conv(1, 3, 4, 8, 16, 16, 3, 7, 7, 1, 2, 2, 1, 3, 3, 0);   /* r3d conv1 shape, small */
    test_conv(2, 2, 3, 4, 4, 4, 2, 2, 2, 1, 1, 1, 0, 0, 0, 1);     /* even kernel */
    test_conv(2, 2, 3, 3, 3, 3, 3, 3, 3, 1, 1, 1, 2, 2, 2, 1);     /* padding > k/2 */
    test_conv(0, 3, 4, 4, 6, 6, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1);     /* n = 0 */

    printf("conv3d tiles (cpu scratch squeezed by the budget)\n");
    /*              n cin cout T  H  W  k      s      p      scratch margin */
    test_conv_tiled(5, 4, 6, 4, 8, 8, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1 << 30); /* 4 + 1 clips */
    test_conv_tiled(5, 4, 6, 4, 8, 8, 3, 3, 3, 1, 1, 1, 1, 1, 1, 200 << 10); /* 1 clip */
    test_conv_tiled(3, 4, 6, 4, 8, 8, 3, 3, 3, 1, 1, 1, 1, 1, 1, 40 << 10);  /* bands */
    test_conv_tiled(2, 4, 6, 4, 8, 8, 3, 3, 3, 1, 1, 1, 1, 1, 1, 4 << 10);   /* one row */
    test_conv_tiled(3, 3, 5, 5, 9, 9, 1, 3, 3, 1, 2, 2, 0, 1, 1, 12 << 10);  /* stride 2 */
    test_conv_tiled(3, 3, 4, 4, 9, 10, 2, 3, 3, 1, 1, 1, 1, 2, 1, 10 << 10); /* p > k/2 */
    test_conv_tiled(5, 8, 6, 4, 6, 6, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1 << 30);  /* 1x1x1 batched */
    test_conv_tiled(5, 8, 6, 4, 6, 6, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0);        /* 1x1x1 direct */
    test_conv_tiled(3, 6, 8, 4, 6, 6, 1, 1, 1, 2, 2, 2, 0, 0, 0, 1 << 30);  /* 1x1x1 s2 */
    test_conv_tiled(2, 5, 16, 3, 7, 7, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1 << 30); /* Cout > tc */
    /* one region over all tiles (cpu_conv.c conv_fwd_flat): clips of >= 512 output columns */
    test_conv_tiled(3, 3, 8, 4, 16, 16, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1 << 30); /* whole clips */
    test_conv_tiled(3, 3, 8, 4, 16, 16, 3, 3, 3, 1, 1, 1, 1, 1, 1, 200 << 10); /* 2 bands */
    test_conv_tiled(2, 8, 6, 4, 16, 16, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0);        /* direct */
    /* 118 rows in bands of 24 + a last of 22: its blocks are fewer and wider (11 rows, not
     * 8) than a full band's, and must still fit a thread's chunk buffer */
    test_conv_tiled(2, 3, 8, 2, 59, 32, 3, 3, 3, 1, 1, 1, 1, 1, 1, 248 << 10);

    printf("accumulation, n = 0\n");
    test_accumulate(g_ref);
    test_accumulate(g_cpu);
    test_n0(g_ref);
    test_n0(g_cpu);

    printf("batch norm\n");
    test_bn(3, 4, 5 * 7 * 7);
    test_bn(1, 3, 1);
    test_bn(2, 5, 13);

    printf("pooling\n");
    test_pool(2, 3, 5, 9, 9, (vt_pool3d_p){{1, 3, 3}, {1, 2, 2}, {0, 1, 1}, 0});
    test_pool(1, 2, 6, 7, 7, (vt_pool3d_p){{2, 2, 2}, {2, 2, 2}, {0, 0, 0}, 0});
    test_pool(1, 2, 5, 7, 7, (vt_pool3d_p){{2, 2, 2}, {2, 2, 2}, {0, 0, 0}, 1});   /* ceil */
    test_pool(2, 2, 3, 5, 5, (vt_pool3d_p){{2, 2, 2}, {2, 2, 2}, {0, 1, 1}, 0});   /* C3D pool5 */
    test_pool(1, 3, 5, 6, 7, (vt_pool3d_p){{3, 3, 3}, {2, 2, 2}, {1, 1, 1}, 1});   /* ceil+pad */
    test_pool(2, 1, 4, 4, 4, (vt_pool3d_p){{3, 1, 1}, {1, 1, 1}, {1, 0, 0}, 0});
    test_gap(3, 5, 4 * 7 * 7);
    test_gap(1, 1, 1);

    printf("linear\n");
    test_linear(4, 512, 101);
    test_linear(1, 7, 3);
    test_linear(5, 33, 1);

    printf("element-wise, dropout\n");
    test_elementwise(100003);
    test_elementwise(17);

    printf("losses\n");
    test_losses(8, 101, 0.1f);
    test_losses(3, 2, 0.0f);
    test_losses(1, 400, 0.2f);

    printf("optimizers\n");
    test_optim(100003);
    test_optim(5);

    printf("determinism and threads\n");
    test_determinism_threads();

    TCHECK(g_ref->in_use == 0 && g_cpu->in_use == 0, "test leaks backend memory");
    vt_backend_free(&g_ref);
    vt_backend_free(&g_cpu);
    return vt_test_done("test_ops");
}
