/*
 * test_ops_x3d.c: X3D's ops on the fast CPU backend (cpu) against the reference (cpu-ref),
 * as test_ops.c does for the others: grouped and depthwise conv3d forward and backward
 * (cpu: depthwise by the direct kernel of cpu_dwconv.c, other groups group by group on
 * the GEMM engine) over X3D's shapes (3x3x3 stride 1 and (1,2,2), the stem's 5x1x1),
 * odd sizes, padding wider than k/2, bias, n = 0 and din == NULL; SiLU, sigmoid and the
 * channel scale (dx over dout in place); the contract (dw accumulates, din overwrites);
 * and the fast backend's bits the same with 1 and 2 threads. The outside truths for
 * cpu-ref are test_gradcheck.c (finite differences) and test_ops_torch.c (F.conv3d with
 * groups, F.silu, torch.sigmoid, x * s).
 *
 * Tolerances (NMSE = sum (fast - ref)^2 / sum ref^2). cpu sums in float, cpu-ref in
 * double: a depthwise output or input gradient sums at most 27 float products (relative
 * error ~27 * 6e-8 worst, NMSE ~1e-14); a weight gradient sums each row in float and the
 * rows in double (rows of <= 16 products here: NMSE ~1e-14); a grouped conv is the GEMM
 * engine of test_ops.c. TOL_CONV = 1e-9 is test_ops.c's TOL_GEMM: 1e5x margin, while one
 * wrong tap, a channel read from the wrong group or a missing clip gives NMSE > 1e-4.
 * SiLU and sigmoid: float expf against double exp, a few roundings, NMSE ~1e-14: TOL_EW
 * 1e-12. The channel scale's forward and dx are one float product each on both: bitwise.
 */
#include <stdio.h>
#include <string.h>

#include "models/backend.h"
#include "base/common.h"
#include "models/registry.h"
#include "tests/testutil.h"

#define TOL_CONV 1e-9
#define TOL_EW 1e-12

static vt_rng g_rng;
static vt_backend *g_ref, *g_cpu, *g_cpu1;

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
}
static void pair_check(const char *what, const char *part, const pair *p, double tol) {
    double e = vt_nmse(p->f, p->r, p->n);
    printf("  %-50s %-4s n=%-7lld nmse %.2e\n", what, part, (long long)p->n, e);
    TCHECK(e <= tol, "%s %s: nmse %.3g > %.3g", what, part, e, tol);
}
static void pair_bitwise(const char *what, const pair *p) {
    int same = p->n == 0 || memcmp(p->r, p->f, (size_t)p->n * 4) == 0;
    printf("  %-55s n=%-7lld %s\n", what, (long long)p->n, same ? "bitwise equal" : "DIFFER");
    TCHECK(same, "%s: cpu and cpu-ref differ (max %.3g)", what, vt_max_abs_diff(p->f, p->r, p->n));
}

/* One grouped conv, forward and backward on both; then the fast backend with 1 thread
 * must give the 2-thread bits. */
static void test_gconv(int n, int cin, int cout, int groups, const int thw[3], const int k[3],
                       const int s[3], const int pd[3], int bias) {
    vt_conv3d_p p = {cin, cout, {k[0], k[1], k[2]}, {s[0], s[1], s[2]}, {pd[0], pd[1], pd[2]},
                     groups};
    int o[3];
    for (int d = 0; d < 3; d++)
        o[d] = vt_conv_out(thw[d], k[d], s[d], pd[d]);
    const int64_t nx = (int64_t)n * cin * thw[0] * thw[1] * thw[2];
    const int64_t ny = (int64_t)n * cout * o[0] * o[1] * o[2];
    const int64_t nw = (int64_t)cout * (cin / groups) * k[0] * k[1] * k[2];
    char what[128];
    snprintf(what, sizeof what, "conv n%d %d->%d g%d %dx%dx%d k%d%d%d s%d%d%d p%d%d%d%s", n, cin,
             cout, groups, thw[0], thw[1], thw[2], k[0], k[1], k[2], s[0], s[1], s[2], pd[0],
             pd[1], pd[2], bias ? "" : " nobias");
    pair x = pair_new(nx, -1, 1), w = pair_new(nw, -1, 1), b = pair_new(cout, -1, 1);
    pair y = pair_new(ny, 7, 7), dy = pair_new(ny, -1, 1);
    VT_OP(g_ref, conv3d_forward, y.r, x.r, w.r, bias ? b.r : NULL, n, thw, &p);
    VT_OP(g_cpu, conv3d_forward, y.f, x.f, w.f, bias ? b.f : NULL, n, thw, &p);
    pair_check(what, "fwd", &y, TOL_CONV);
    /* din starts as garbage (overwritten), dw and db random (accumulated) */
    pair dx = pair_new(nx, 1e3f, 1e3f), dw = pair_new(nw, -1, 1), db = pair_new(cout, -1, 1);
    VT_OP(g_ref, conv3d_backward, dx.r, dw.r, bias ? db.r : NULL, dy.r, x.r, w.r, n, thw, &p);
    VT_OP(g_cpu, conv3d_backward, dx.f, dw.f, bias ? db.f : NULL, dy.f, x.f, w.f, n, thw, &p);
    pair_check(what, "din", &dx, TOL_CONV);
    pair_check(what, "dw", &dw, TOL_CONV);
    if (bias)
        pair_check(what, "db", &db, TOL_CONV);
    pair dw2 = pair_new(nw, 0, 0);
    VT_OP(g_ref, conv3d_backward, NULL, dw2.r, NULL, dy.r, x.r, w.r, n, thw, &p);
    VT_OP(g_cpu, conv3d_backward, NULL, dw2.f, NULL, dy.f, x.f, w.f, n, thw, &p);
    pair_check(what, "dw*", &dw2, TOL_CONV); /* din NULL */
    if (n > 0) { /* 1 thread: the same bits (cpu memory is plain host memory) */
        float *y1 = vt_malloc((size_t)ny * 4), *dx1 = vt_malloc((size_t)nx * 4);
        float *dw1 = vt_calloc((size_t)nw, 4), *dwz = vt_calloc((size_t)nw, 4);
        VT_OP(g_cpu, conv3d_forward, y.r, x.f, w.f, bias ? b.f : NULL, n, thw, &p);
        VT_OP(g_cpu1, conv3d_forward, y1, x.f, w.f, bias ? b.f : NULL, n, thw, &p);
        VT_OP(g_cpu, conv3d_backward, dx.r, dwz, NULL, dy.f, x.f, w.f, n, thw, &p);
        VT_OP(g_cpu1, conv3d_backward, dx1, dw1, NULL, dy.f, x.f, w.f, n, thw, &p);
        TCHECK(!memcmp(y1, y.r, (size_t)ny * 4) && !memcmp(dx1, dx.r, (size_t)nx * 4) &&
                   !memcmp(dw1, dwz, (size_t)nw * 4),
               "%s: 1 and 2 threads differ", what);
        free(y1), free(dx1), free(dw1), free(dwz);
    }
    pair_free(&x), pair_free(&w), pair_free(&b), pair_free(&y), pair_free(&dy);
    pair_free(&dx), pair_free(&dw), pair_free(&db), pair_free(&dw2);
}

static void test_act(int64_t n) {
    pair x = pair_new(n, -8, 8), y = pair_new(n, 0, 0), d = pair_new(n, -1, 1);
    pair dx = pair_new(n, 5, 5);
    VT_OP(g_ref, silu_forward, y.r, x.r, n), VT_OP(g_cpu, silu_forward, y.f, x.f, n);
    pair_check("silu", "fwd", &y, TOL_EW);
    VT_OP(g_ref, silu_backward, dx.r, d.r, x.r, n), VT_OP(g_cpu, silu_backward, dx.f, d.f, x.f, n);
    pair_check("silu", "bwd", &dx, TOL_EW);
    VT_OP(g_ref, sigmoid_forward, y.r, x.r, n), VT_OP(g_cpu, sigmoid_forward, y.f, x.f, n);
    pair_check("sigmoid", "fwd", &y, TOL_EW);
    /* in place, as the graph runs it: din over dout, reading the output */
    VT_OP(g_ref, sigmoid_backward, d.r, d.r, y.r, n), VT_OP(g_cpu, sigmoid_backward, d.f, d.f,
                                                            y.f, n);
    pair_check("sigmoid (in place)", "bwd", &d, TOL_EW);
    pair_free(&x), pair_free(&y), pair_free(&d), pair_free(&dx);
}

static void test_chscale(int n, int c, int64_t sp) {
    const int64_t nx = (int64_t)n * c * sp;
    pair x = pair_new(nx, -1, 1), s = pair_new((int64_t)n * c, 0, 1), y = pair_new(nx, 0, 0);
    pair d = pair_new(nx, -1, 1), ds = pair_new((int64_t)n * c, 9, 9);
    char what[64];
    snprintf(what, sizeof what, "chscale n%d c%d s%lld", n, c, (long long)sp);
    VT_OP(g_ref, chscale_forward, y.r, x.r, s.r, n, c, sp);
    VT_OP(g_cpu, chscale_forward, y.f, x.f, s.f, n, c, sp);
    pair_bitwise(what, &y);
    VT_OP(g_ref, chscale_backward, d.r, ds.r, d.r, x.r, s.r, n, c, sp);
    VT_OP(g_cpu, chscale_backward, d.f, ds.f, d.f, x.f, s.f, n, c, sp);
    pair_bitwise("  dx (in place over dout)", &d);
    pair_check(what, "ds", &ds, TOL_EW);
    pair_free(&x), pair_free(&s), pair_free(&y), pair_free(&d), pair_free(&ds);
}

#define T3(a, b, c) ((const int[3]){a, b, c})

int main(void) {
    vt_rng_seed(&g_rng, 4343);
    g_ref = vt_backend_init("cpu-ref", 0, 1, 0);
    g_cpu = vt_backend_init("cpu", 0, 2, 0);
    g_cpu1 = vt_backend_init("cpu", 0, 1, 0);
    TCHECK(g_ref && g_cpu && g_cpu1, "backends");
    if (!g_ref || !g_cpu || !g_cpu1)
        return vt_test_done("test_ops_x3d");
    printf("grouped and depthwise conv3d\n");
    /* X3D's conv_b: depthwise 3x3x3, stride 1 and (1,2,2); odd and even sizes */
    test_gconv(2, 6, 6, 6, T3(4, 9, 9), T3(3, 3, 3), T3(1, 1, 1), T3(1, 1, 1), 0);
    test_gconv(2, 5, 5, 5, T3(3, 11, 10), T3(3, 3, 3), T3(1, 2, 2), T3(1, 1, 1), 0);
    test_gconv(1, 4, 4, 4, T3(2, 2, 2), T3(3, 3, 3), T3(1, 2, 2), T3(1, 1, 1), 1); /* to 1x1 */
    /* the stem's conv_xy: 5x1x1 depthwise, padding 2 over T = 4 */
    test_gconv(3, 3, 3, 3, T3(4, 6, 5), T3(5, 1, 1), T3(1, 1, 1), T3(2, 0, 0), 1);
    test_gconv(2, 4, 4, 4, T3(5, 5, 5), T3(2, 3, 3), T3(2, 1, 2), T3(2, 2, 0), 1); /* p > k/2 */
    /* enough work for both threads: 64 planes of 8x16x16 */
    test_gconv(2, 32, 32, 32, T3(8, 16, 16), T3(3, 3, 3), T3(1, 2, 2), T3(1, 1, 1), 0);
    /* grouped, not depthwise: 2 and 3 groups, a channel multiplier (cout = 2 cin) */
    test_gconv(2, 4, 6, 2, T3(3, 7, 7), T3(3, 3, 3), T3(1, 1, 1), T3(1, 1, 1), 1);
    test_gconv(3, 6, 3, 3, T3(4, 5, 6), T3(1, 3, 3), T3(1, 2, 2), T3(0, 1, 1), 0);
    test_gconv(2, 3, 6, 3, T3(3, 5, 5), T3(3, 3, 3), T3(1, 1, 1), T3(1, 1, 1), 1);
    test_gconv(0, 4, 4, 4, T3(3, 5, 5), T3(3, 3, 3), T3(1, 1, 1), T3(1, 1, 1), 1); /* n = 0 */
    printf("silu, sigmoid, channel scale\n");
    test_act(100003);
    test_act(7);
    test_chscale(2, 5, 4 * 9 * 9);
    test_chscale(3, 64, 3 * 16 * 16);
    test_chscale(1, 3, 1);
    TCHECK(g_ref->in_use == 0 && g_cpu->in_use == 0, "test leaks backend memory");
    vt_backend_free(&g_ref);
    vt_backend_free(&g_cpu);
    vt_backend_free(&g_cpu1);
    return vt_test_done("test_ops_x3d");
}
