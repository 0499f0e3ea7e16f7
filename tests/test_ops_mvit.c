/*
 * test_ops_mvit.c: MViT's ops of backend.h (mvit_pool, mvit_attention, token_maxpool) on
 * the CPU backends, against outside truths:
 *   1. finite differences of cpu-ref's forward for every backward: the pool's dqkv and
 *      dw (kernel 3, stride (1, 2, 2), padding 1: windows that overlap and that the edge
 *      cuts); the attention's dq, dk, dv and the three relative tables' gradients, with
 *      residual pooling, for a q grid finer than k's and one coarser (both of
 *      torchvision's distance ratios); the token max pool's din (values 0.1 apart, so no
 *      window's maximum changes under the 1e-2 step);
 *   2. cpu (float sums, threads) against cpu-ref (double sums) on a larger case, and
 *      cpu's bits the same with 1 and with 2 threads (cpu_mvit.h's promise);
 *   3. the token max pool with NaNs (first, middle, several in a window) on cpu-ref and
 *      cpu, against PyTorch's max_pool3d on the same values (its outputs written out
 *      below): a NaN propagates, and the gradient goes to the last NaN, so the backward
 *      routes each window's gradient to the tap the forward returned (max_rule.h).
 * The forward against PyTorch is test_zoo_mvit.c's (torchvision's whole MViT in float64).
 * Tolerances: finite differences as test_ops_attn.c (central, e = 1e-2, the loss summed
 * in double; smooth ops with O(1) third derivatives at these scales): NMSE < 1e-6 (a
 * wrong tap, a missing relative term or a table index off by one is > 1e-2). cpu vs
 * cpu-ref: float sums of <= a few hundred terms, NMSE ~1e-13: TOL_FAST 1e-10.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "models/backend.h"
#include "models/registry.h"
#include "tests/fdutil.h"
#include "tests/testutil.h"

#define TOL_FAST 1e-10

static vt_rng g_rng;
/* x[0..n) uniform in [lo, hi) from this file's stream g_rng */
static void urand(float *x, int64_t n, float lo, float hi) { vt_test_urand(&g_rng, x, n, lo, hi); }
static float *zeros(int64_t n) { return vt_calloc((size_t)VT_MAX(n, 1), sizeof(float)); }

/* One case of one op: its inputs, output, and L = sum(y * r). */
typedef struct mcase {
    int op; /* 0 pool, 1 attention, 2 token maxpool */
    int n, heads, D, part, residual;
    int thw[3], qthw[3], kthw[3];
    vt_pool3d_p p;
    float *x, *w;                  /* pool: qkv, kernel; maxpool: x */
    float *q, *k, *v, *rh, *rw, *rt, *lse;
    float *y, *r;
    int64_t nx, nw, nq, nk, nh, nt, ny, nl;
} mcase;

static int g3(const int a[3]) { return a[0] * a[1] * a[2]; }

static void forward(vt_backend *be, mcase *c) {
    if (c->op == 0)
        VT_OP(be, mvit_pool_forward, c->y, c->x, c->w, c->n, c->heads, c->D, c->part, c->thw, &c->p);
    else if (c->op == 1)
        VT_OP(be, mvit_attention_forward, c->y, c->lse, c->q, c->k, c->v, c->rh, c->rw, c->rt,
              c->n, c->heads, c->D, c->qthw, c->kthw, c->residual);
    else
        VT_OP(be, token_maxpool_forward, c->y, c->x, c->n, c->D, c->thw, &c->p);
}

/* The gradients of L: g[0..6) as the op's backward gives them (pool: dqkv, dw; attention:
 * dq, dk, dv, drh, drw, drt; maxpool: din). */
static void backward(vt_backend *be, mcase *c, float *g[6]) {
    forward(be, c);
    if (c->op == 0)
        VT_OP(be, mvit_pool_backward, g[0], g[1], c->r, c->x, c->w, c->n, c->heads, c->D, c->part,
              c->thw, &c->p);
    else if (c->op == 1)
        VT_OP(be, mvit_attention_backward, g[0], g[1], g[2], g[3], g[4], g[5], c->r, c->q, c->k,
              c->v, c->rh, c->rw, c->rt, c->lse, c->n, c->heads, c->D, c->qthw, c->kthw,
              c->residual);
    else
        VT_OP(be, token_maxpool_backward, g[0], c->r, c->x, c->n, c->D, c->thw, &c->p);
}

/* L of case c on backend be (fdutil.h's loss). */
typedef struct fd_ctx {
    vt_backend *be;
    mcase *c;
} fd_ctx;
static double fd_loss(void *ctx) {
    fd_ctx *f = ctx;
    forward(f->be, f->c);
    return vt_test_dot(f->c->y, f->c->r, f->c->ny);
}

static void fd_check(vt_backend *be, const char *what, mcase *c, float *v, int64_t n,
                     const float *ana) {
    fd_ctx ctx = {be, c};
    const vt_test_fd f = vt_test_fd_run(v, n, ana, fd_loss, &ctx, 1e-2f, INFINITY, 0, what);
    printf("  cpu-ref  fd %-26s n=%-6lld nmse %.2e\n", what, (long long)n, f.nmse);
    TCHECK(f.nmse < 1e-6 && f.sa > 0, "finite differences of %s: nmse %.3g (|grad|^2 %.3g)",
           what, f.nmse, f.sa);
}

/* A pool case: n clips, heads, D, grid thw, kernel 3, stride (1, s, s), padding 1. */
static mcase pool_case(int n, int heads, int D, int T, int HW, int s, int part) {
    mcase c = {.op = 0, .n = n, .heads = heads, .D = D, .part = part, .thw = {T, HW, HW}};
    for (int d = 0; d < 3; d++) {
        c.p.k[d] = 3;
        c.p.s[d] = d ? s : 1;
        c.p.p[d] = 1;
    }
    const int64_t L = 1 + g3(c.thw);
    int o[3];
    for (int d = 0; d < 3; d++)
        o[d] = vt_conv_out(c.thw[d], 3, c.p.s[d], 1);
    c.nx = n * L * 3 * heads * D, c.nw = (int64_t)D * 27, c.ny = (int64_t)n * heads * (1 + g3(o)) * D;
    c.x = zeros(c.nx), c.w = zeros(c.nw), c.y = zeros(c.ny), c.r = zeros(c.ny);
    urand(c.x, c.nx, -1.5f, 1.5f), urand(c.w, c.nw, -0.5f, 0.5f), urand(c.r, c.ny, -1, 1);
    return c;
}

static mcase attn_case(int n, int heads, int D, const int qthw[3], const int kthw[3]) {
    mcase c = {.op = 1, .n = n, .heads = heads, .D = D, .residual = 1};
    for (int d = 0; d < 3; d++)
        c.qthw[d] = qthw[d], c.kthw[d] = kthw[d];
    const int64_t Lq = 1 + g3(qthw), Lk = 1 + g3(kthw);
    c.nq = (int64_t)n * heads * Lq * D, c.nk = (int64_t)n * heads * Lk * D;
    c.nh = (int64_t)(2 * VT_MAX(qthw[1], kthw[1]) - 1) * D;
    c.nt = (int64_t)(2 * VT_MAX(qthw[0], kthw[0]) - 1) * D;
    c.ny = c.nq, c.nl = (int64_t)n * heads * Lq;
    c.q = zeros(c.nq), c.k = zeros(c.nk), c.v = zeros(c.nk), c.rh = zeros(c.nh);
    c.rw = zeros(c.nh), c.rt = zeros(c.nt), c.lse = zeros(c.nl), c.y = zeros(c.ny), c.r = zeros(c.ny);
    urand(c.q, c.nq, -1.5f, 1.5f), urand(c.k, c.nk, -1.5f, 1.5f), urand(c.v, c.nk, -1, 1);
    urand(c.rh, c.nh, -0.5f, 0.5f), urand(c.rw, c.nh, -0.5f, 0.5f), urand(c.rt, c.nt, -0.5f, 0.5f);
    urand(c.r, c.ny, -1, 1);
    return c;
}

/* values 0.1 apart in a random order: no window's maximum moves under a 1e-2 step */
static mcase maxpool_case(int n, int C, int T, int HW) {
    mcase c = {.op = 2, .n = n, .D = C, .thw = {T, HW, HW}};
    for (int d = 0; d < 3; d++) {
        c.p.k[d] = d ? 3 : 1;
        c.p.s[d] = d ? 2 : 1;
        c.p.p[d] = d ? 1 : 0;
    }
    int o[3] = {T, vt_conv_out(HW, 3, 2, 1), vt_conv_out(HW, 3, 2, 1)};
    c.nx = (int64_t)n * (1 + g3(c.thw)) * C, c.ny = (int64_t)n * (1 + g3(o)) * C;
    c.x = zeros(c.nx), c.y = zeros(c.ny), c.r = zeros(c.ny);
    for (int64_t i = 0; i < c.nx; i++)
        c.x[i] = 0.1f * (float)i;
    for (int64_t i = c.nx - 1; i > 0; i--) {
        int64_t j = (int64_t)(vt_rng_uniform(&g_rng) * (double)(i + 1));
        float t = c.x[i];
        c.x[i] = c.x[j], c.x[j] = t;
    }
    urand(c.r, c.ny, -1, 1);
    return c;
}

static void free_case(mcase *c) {
    float *p[] = {c->x, c->w, c->q, c->k, c->v, c->rh, c->rw, c->rt, c->lse, c->y, c->r};
    for (size_t i = 0; i < VT_ARRAY_LEN(p); i++)
        free(p[i]);
}

/* the sizes of a case's six gradients */
static void gsizes(const mcase *c, int64_t s[6]) {
    int64_t a[6] = {c->nx, c->nw, 0, 0, 0, 0}, b[6] = {c->nq, c->nk, c->nk, c->nh, c->nh, c->nt};
    for (int i = 0; i < 6; i++)
        s[i] = c->op == 1 ? b[i] : a[i];
    if (c->op == 2)
        s[1] = 0;
}

static void alloc_g(const mcase *c, float *g[6]) {
    int64_t s[6];
    gsizes(c, s);
    for (int i = 0; i < 6; i++)
        g[i] = s[i] ? zeros(s[i]) : NULL;
}

static void fd_cases(void) {
    vt_backend *be = vt_backend_init("cpu-ref", 0, 1, 0);
    vt_rng_seed(&g_rng, 45);
    float *g[6];
    mcase c = pool_case(2, 2, 3, 2, 5, 2, 1); /* k of 2 heads, a 2x5x5 grid: 3x3 out */
    alloc_g(&c, g);
    backward(be, &c, g);
    fd_check(be, "mvit_pool dqkv", &c, c.x, c.nx, g[0]);
    fd_check(be, "mvit_pool dw", &c, c.w, c.nw, g[1]);
    for (int i = 0; i < 6; i++)
        free(g[i]);
    free_case(&c);
    static const int grids[2][2][3] = {{{2, 4, 4}, {2, 2, 2}}, {{1, 2, 2}, {2, 4, 4}}};
    for (int k = 0; k < 2; k++) {
        c = attn_case(2, 2, 3, grids[k][0], grids[k][1]);
        alloc_g(&c, g);
        backward(be, &c, g);
        char what[64];
        const char *nm[6] = {"dq", "dk", "dv", "drel_h", "drel_w", "drel_t"};
        float *in[6] = {c.q, c.k, c.v, c.rh, c.rw, c.rt};
        int64_t s[6];
        gsizes(&c, s);
        for (int t = 0; t < 6; t++) {
            snprintf(what, sizeof what, "attention q%s %s", k ? "<k" : ">k", nm[t]);
            fd_check(be, what, &c, in[t], s[t], g[t]);
            free(g[t]);
        }
        free_case(&c);
    }
    c = maxpool_case(2, 3, 2, 5);
    alloc_g(&c, g);
    backward(be, &c, g);
    fd_check(be, "token_maxpool din", &c, c.x, c.nx, g[0]);
    free(g[0]);
    free_case(&c);
    vt_backend_free(&be);
}

/* cpu against cpu-ref, and cpu with 1 and 2 threads: every output and gradient. */
static void fast_cases(void) {
    vt_rng_seed(&g_rng, 8);
    static const int qg[3] = {2, 8, 8}, kg[3] = {2, 2, 2};
    mcase cs[3] = {pool_case(2, 2, 16, 2, 8, 2, 0), attn_case(2, 2, 16, qg, kg),
                   maxpool_case(2, 32, 2, 8)};
    const char *nm[3] = {"mvit_pool", "mvit_attention", "token_maxpool"};
    for (int k = 0; k < 3; k++) {
        mcase *c = &cs[k];
        int64_t s[6];
        gsizes(c, s);
        float *g[3][6], *y[3];
        const char *bes[3] = {"cpu-ref", "cpu", "cpu"};
        for (int b = 0; b < 3; b++) {
            vt_backend *be = vt_backend_init(bes[b], 0, b == 2 ? 2 : 1, 0);
            alloc_g(c, g[b]);
            backward(be, c, g[b]);
            y[b] = zeros(c->ny);
            memcpy(y[b], c->y, (size_t)c->ny * 4);
            vt_backend_free(&be);
        }
        double worst = vt_nmse(y[1], y[0], c->ny);
        int same = !memcmp(y[1], y[2], (size_t)c->ny * 4);
        for (int t = 0; t < 6; t++)
            if (s[t]) {
                worst = fmax(worst, vt_nmse(g[1][t], g[0][t], s[t]));
                same = same && !memcmp(g[1][t], g[2][t], (size_t)s[t] * 4);
            }
        printf("  cpu      %-15s vs cpu-ref: worst nmse %.2e; 1 vs 2 threads: %s\n", nm[k],
               worst, same ? "same bits" : "DIFFERENT");
        TCHECK(worst <= TOL_FAST, "%s: cpu against cpu-ref nmse %.3g", nm[k], worst);
        TCHECK(same, "%s: cpu's bits differ between 1 and 2 threads", nm[k]);
        for (int b = 0; b < 3; b++) {
            for (int t = 0; t < 6; t++)
                free(g[b][t]);
            free(y[b]);
        }
        free_case(c);
    }
}

/* Three channels over a 1x1x5 grid, kernel (1, 1, 3), stride (1, 1, 2), padding (0, 0, 1):
 * windows {0, 1}, {1, 2, 3}, {3, 4}. The truth is PyTorch 2's (F.max_pool3d on
 * x.view(1, 3, 1, 1, 5) with dy = 1, 2, 4 ... 256): its y and x.grad, exact (the gradients
 * are sums of distinct powers of two). The rule before max_rule.h (the forward skipping a
 * NaN, the backward keeping a first NaN) got 7 of the 12 outputs and 7 of the 18
 * gradients wrong. */
static void nan_cases(void) {
    const float N = NAN;
    static const int thw[3] = {1, 1, 5};
    const vt_pool3d_p p = {{1, 1, 3}, {1, 1, 2}, {0, 0, 1}, 0};
    /* (grid index, channel) as PyTorch's (channel, index) transposed; row 0 the class token */
    const float xc[3][5] = {{1, N, 3, 2, 5}, {N, 4, N, 1, 0}, {N, N, 7, N, 2}};
    const float yc[3][3] = {{N, N, 5}, {N, N, 1}, {N, N, N}};
    const float dxc[3][5] = {{0, 3, 0, 0, 4}, {8, 0, 16, 32, 0}, {0, 64, 0, 384, 0}};
    float x[6 * 3], dy[4 * 3], want_y[4 * 3], want_dx[6 * 3];
    for (int ch = 0; ch < 3; ch++) {
        x[ch] = -1.0f - (float)ch, want_y[ch] = x[ch];      /* the class token: copied */
        dy[ch] = 0.5f + (float)ch, want_dx[ch] = dy[ch];
        for (int i = 0; i < 5; i++)
            x[(1 + i) * 3 + ch] = xc[ch][i], want_dx[(1 + i) * 3 + ch] = dxc[ch][i];
        for (int o = 0; o < 3; o++)
            dy[(1 + o) * 3 + ch] = (float)(1 << (3 * ch + o)), want_y[(1 + o) * 3 + ch] = yc[ch][o];
    }
    const char *bes[3] = {"cpu-ref", "cpu", "cpu"};
    for (int b = 0; b < 3; b++) {
        vt_backend *be = vt_backend_init(bes[b], 0, b == 2 ? 2 : 1, 0);
        float y[4 * 3], dx[6 * 3];
        VT_OP(be, token_maxpool_forward, y, x, 1, 3, thw, &p);
        VT_OP(be, token_maxpool_backward, dx, dy, x, 1, 3, thw, &p);
        int bad_y = 0, bad_dx = 0;
        for (int i = 0; i < 12; i++)
            bad_y += isnan(want_y[i]) ? !isnan(y[i]) : y[i] != want_y[i];
        for (int i = 0; i < 18; i++)
            bad_dx += dx[i] != want_dx[i];
        printf("  %-8s token_maxpool with NaNs vs PyTorch: %d of 12 outputs, %d of 18 "
               "gradients differ (%d thread%s)\n", bes[b], bad_y, bad_dx, b == 2 ? 2 : 1,
               b == 2 ? "s" : "");
        TCHECK(bad_y == 0, "%s: token_maxpool forward with NaNs: %d outputs differ from "
               "PyTorch's (a NaN must propagate)", bes[b], bad_y);
        TCHECK(bad_dx == 0, "%s: token_maxpool backward with NaNs: %d gradients differ from "
               "PyTorch's (the last NaN takes the gradient)", bes[b], bad_dx);
        vt_backend_free(&be);
    }
}

int main(void) {
    fd_cases();
    fast_cases();
    nan_cases();
    return vt_test_done("test_ops_mvit");
}
