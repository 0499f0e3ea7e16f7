/*
 * test_ops_attn.c: the transformer ops of backend.h (layernorm, GELU, multi-head attention,
 * token transpose / mean / broadcast add, per-clip scaling) on the CPU backends, against
 * three outside truths:
 *   1. PyTorch in float64 (tests/oracle/torch_attn.py: F.layer_norm, F.gelu, a naive
 *      softmax(q k^T / sqrt(D)) v, flatten/transpose/mean), forward and backward, for
 *      cpu-ref AND cpu (each against PyTorch, not against each other);
 *   2. finite differences of cpu-ref's forward (the backward ops' calculus);
 *   3. the fast backend's own contract: the same bits with 1 thread and with 2.
 * Without torch in $VT_PYTHON, 2 and 3 still run and the PyTorch part is reported skipped.
 *
 * Tolerances. The reference is float64 rounded once. cpu-ref sums in double and rounds
 * once: NMSE ~ u^2 = 4e-15 at most; TOL_REF = 1e-12 (250x margin). cpu sums in float
 * (sgemm, float exp): relative errors ~ u * sqrt(K) for dot products of K <= 384 terms and
 * ~ u * |s| (|s| <= ~6) through exp, so NMSE ~ 1e-13 .. 1e-12; TOL_FAST = 1e-10. A wrong
 * index, a missing term, a softmax without its max shift at these scales or a tanh-GELU
 * instead of erf (|d| up to 5e-4 of values ~1: NMSE ~1e-7) are all far above both.
 * Finite differences: test_gradcheck.c's argument (central differences, e = 1e-2, L summed
 * in double; these ops are smooth with O(1) third derivatives at these scales): NMSE < 1e-6.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/backend.h"
#include "base/common.h"
#include "models/registry.h"
#include "tests/goldenutil.h"
#include "tests/fdutil.h"
#include "tests/testutil.h"

#define TOL_REF 1e-12
#define TOL_FAST 1e-10

static vt_test_recs g_recs; /* the oracle's records */

/* The record (read-only: the ops never write their inputs). */
static const float *rget(const char *fmt, int i, int64_t *n) {
    char name[64];
    snprintf(name, sizeof name, fmt, i);
    const vt_test_rec *r = vt_test_recs_find(&g_recs, name);
    if (!r)
        VT_DIE("record %s missing from the torch file", name);
    if (n)
        *n = r->n;
    return r->v;
}
static float *zeros(int64_t n) { return vt_calloc((size_t)VT_MAX(n, 1), sizeof(float)); }

static void cmp(const char *be, const char *what, int i, const float *ours, const char *ref_fmt,
                double tol) {
    int64_t n;
    const float *ref = rget(ref_fmt, i, &n);
    double e = vt_nmse(ours, ref, n);
    char name[80];
    snprintf(name, sizeof name, what, i);
    printf("  %-8s %-22s n=%-6lld nmse %.2e\n", be, name, (long long)n, e);
    TCHECK(e <= tol, "%s %s: nmse %.3g > %.3g (max |d| %.3g)", be, name, e, tol,
           vt_max_abs_diff(ours, ref, n));
}

/* ---------------------------------------------------------------- vs PyTorch ---- */

static void torch_cases(vt_backend *be, double tol) {
    const char *bn = be->i->name;
    int count = (int)rget("ln.count", 0, NULL)[0];
    for (int i = 0; i < count; i++) {
        const float *g = rget("ln%d.geo", i, NULL);
        int64_t rows = (int64_t)g[0];
        int c = (int)g[1];
        float *y = zeros(rows * c), *m = zeros(rows), *is = zeros(rows), *dx = zeros(rows * c);
        float *dg = zeros(c), *db = zeros(c);
        const float *x = rget("ln%d.x", i, NULL);
        VT_OP(be, layernorm_forward, y, m, is, x, rget("ln%d.g", i, NULL), rget("ln%d.b", i, NULL),
              rows, c, 1e-6f);
        VT_OP(be, layernorm_backward, dx, dg, db, rget("ln%d.dy", i, NULL), x, m, is,
              rget("ln%d.g", i, NULL), rows, c);
        cmp(bn, "layernorm%d y", i, y, "ln%d.y", tol);
        cmp(bn, "layernorm%d dx", i, dx, "ln%d.dx", tol);
        cmp(bn, "layernorm%d dgamma", i, dg, "ln%d.dg", tol);
        cmp(bn, "layernorm%d dbeta", i, db, "ln%d.db", tol);
        free(y), free(m), free(is), free(dx), free(dg), free(db);
    }
    int64_t n;
    const float *x = rget("gelu.x", 0, &n);
    float *y = zeros(n), *dx = zeros(n);
    VT_OP(be, gelu_forward, y, x, n);
    VT_OP(be, gelu_backward, dx, rget("gelu.dy", 0, NULL), x, n);
    cmp(bn, "gelu y", 0, y, "gelu.y", tol);
    cmp(bn, "gelu dx", 0, dx, "gelu.dx", tol);
    free(y), free(dx);

    count = (int)rget("att.count", 0, NULL)[0];
    for (int i = 0; i < count; i++) {
        const float *g = rget("att%d.geo", i, NULL);
        int N = (int)g[0], L = (int)g[1], H = (int)g[2], D = (int)g[3];
        int64_t no = (int64_t)N * L * H * D;
        float *o = zeros(no), *lse = zeros((int64_t)N * H * L), *dqkv = zeros(3 * no);
        const float *qkv = rget("att%d.qkv", i, NULL);
        VT_OP(be, attention_forward, o, lse, qkv, N, L, H, D);
        VT_OP(be, attention_backward, dqkv, rget("att%d.dy", i, NULL), qkv, o, lse, N, L, H, D);
        cmp(bn, "attention%d out", i, o, "att%d.out", tol);
        cmp(bn, "attention%d lse", i, lse, "att%d.lse", tol);
        cmp(bn, "attention%d dqkv", i, dqkv, "att%d.dqkv", tol);
        free(o), free(lse), free(dqkv);
    }

    /* tokens: transpose, + pos, mean; backward through all three */
    const float *tg = rget("tok.geo", 0, NULL);
    int N = (int)tg[0], C = (int)tg[1], L = (int)tg[2];
    float *tok = zeros((int64_t)N * L * C), *mean = zeros((int64_t)N * C);
    float *dtok = zeros((int64_t)N * L * C), *dx2 = zeros((int64_t)N * L * C);
    float *dpos = zeros((int64_t)L * C);
    VT_OP(be, transpose, tok, rget("tok.x", 0, NULL), N, C, L);
    cmp(bn, "tokens", 0, tok, "tok.tok", tol);
    VT_OP(be, add_bcast, tok, tok, rget("tok.pos", 0, NULL), N, (int64_t)L * C);
    VT_OP(be, token_mean_forward, mean, tok, N, L, C);
    cmp(bn, "tokens+pos mean", 0, mean, "tok.mean", tol);
    VT_OP(be, token_mean_backward, dtok, rget("tok.dy", 0, NULL), N, L, C);
    VT_OP(be, add_bcast_backward, dpos, dtok, N, (int64_t)L * C);
    VT_OP(be, transpose, dx2, dtok, N, L, C);
    cmp(bn, "tokens dpos", 0, dpos, "tok.dpos", tol);
    cmp(bn, "tokens dx", 0, dx2, "tok.dx", tol);
    free(tok), free(mean), free(dtok), free(dx2), free(dpos);
}

/* ---------------------------------------------------------------- finite differences ---- */

static vt_rng g_rng;
/* x[0..n) uniform in [lo, hi) from this file's stream g_rng */
static void urand(float *x, int64_t n, float lo, float hi) { vt_test_urand(&g_rng, x, n, lo, hi); }

/* One op's forward as L = sum(y * r), on cpu-ref. */
typedef struct fd_ctx {
    vt_backend *be;
    int op; /* 0 layernorm, 1 gelu, 2 attention */
    float *x, *g, *b, *y, *r, *s1, *s2;
    int64_t rows, ny;
    int c, N, L, H, D;
} fd_ctx;

static double fd_loss(fd_ctx *c) {
    if (c->op == 0)
        VT_OP(c->be, layernorm_forward, c->y, c->s1, c->s2, c->x, c->g, c->b, c->rows, c->c, 1e-6f);
    else if (c->op == 1)
        VT_OP(c->be, gelu_forward, c->y, c->x, c->ny);
    else
        VT_OP(c->be, attention_forward, c->y, c->s1, c->x, c->N, c->L, c->H, c->D);
    return vt_test_dot(c->y, c->r, c->ny);
}

static double fd_loss_v(void *c) { return fd_loss(c); }

/* Central differences of fd_loss over v[0..n) against ana (fdutil.h, test_gradcheck.c's
 * driver). */
static void fd_check(const char *what, fd_ctx *c, float *v, int64_t n, const float *ana) {
    const vt_test_fd f = vt_test_fd_run(v, n, ana, fd_loss_v, c, 1e-2f, INFINITY, 0, what);
    printf("  cpu-ref  fd %-19s n=%-6lld nmse %.2e\n", what, (long long)n, f.nmse);
    TCHECK(f.nmse < 1e-6, "finite differences of %s: nmse %.3g", what, f.nmse);
}

static void fd_cases(void) {
    vt_backend *be = vt_backend_init("cpu-ref", 0, 1, 0);
    vt_rng_seed(&g_rng, 44);
    /* layernorm: x, gamma, beta */
    fd_ctx c = {.be = be, .op = 0, .rows = 4, .c = 6};
    c.ny = c.rows * c.c;
    c.x = zeros(c.ny), c.g = zeros(c.c), c.b = zeros(c.c), c.y = zeros(c.ny), c.r = zeros(c.ny);
    c.s1 = zeros(c.rows), c.s2 = zeros(c.rows);
    urand(c.x, c.ny, -2, 2), urand(c.g, c.c, 0.5f, 1.5f), urand(c.b, c.c, -1, 1);
    urand(c.r, c.ny, -1, 1);
    float *dx = zeros(c.ny), *dg = zeros(c.c), *db = zeros(c.c);
    fd_loss(&c);
    VT_OP(be, layernorm_backward, dx, dg, db, c.r, c.x, c.s1, c.s2, c.g, c.rows, c.c);
    fd_check("layernorm dx", &c, c.x, c.ny, dx);
    fd_check("layernorm dgamma", &c, c.g, c.c, dg);
    fd_check("layernorm dbeta", &c, c.b, c.c, db);
    free(c.x), free(c.g), free(c.b), free(c.y), free(c.r), free(c.s1), free(c.s2);
    free(dx), free(dg), free(db);
    /* gelu, across its curved part */
    c = (fd_ctx){.be = be, .op = 1, .ny = 64};
    c.x = zeros(c.ny), c.y = zeros(c.ny), c.r = zeros(c.ny), dx = zeros(c.ny);
    urand(c.x, c.ny, -3, 3), urand(c.r, c.ny, -1, 1);
    VT_OP(be, gelu_backward, dx, c.r, c.x, c.ny);
    fd_check("gelu dx", &c, c.x, c.ny, dx);
    free(c.x), free(c.y), free(c.r), free(dx);
    /* attention: q, k and v all at once */
    c = (fd_ctx){.be = be, .op = 2, .N = 2, .L = 5, .H = 2, .D = 3};
    c.ny = (int64_t)c.N * c.L * c.H * c.D;
    c.x = zeros(3 * c.ny), c.y = zeros(c.ny), c.r = zeros(c.ny), dx = zeros(3 * c.ny);
    c.s1 = zeros((int64_t)c.N * c.H * c.L);
    urand(c.x, 3 * c.ny, -1.5f, 1.5f), urand(c.r, c.ny, -1, 1);
    fd_loss(&c);
    VT_OP(be, attention_backward, dx, c.r, c.x, c.y, c.s1, c.N, c.L, c.H, c.D);
    fd_check("attention dqkv", &c, c.x, 3 * c.ny, dx);
    free(c.x), free(c.y), free(c.r), free(dx), free(c.s1);
    vt_backend_free(&be);
}

/* ---------------------------------------------------------------- thread counts ---- */

/* cpu's attention and layernorm give the same bits with 1 and 2 threads (a case big
 * enough to run parallel: n*H*L*L*D above CPU_GEMM_PAR_MIN, L past one query block). */
static void thread_cases(void) {
    const int N = 2, L = 100, H = 4, D = 16;
    const int64_t no = (int64_t)N * L * H * D;
    vt_rng_seed(&g_rng, 7);
    float *qkv = zeros(3 * no), *dy = zeros(no);
    urand(qkv, 3 * no, -2, 2), urand(dy, no, -1, 1);
    float *o[2], *lse[2], *dq[2], *ln[2], *dln[2], *st[2], *dg[2];
    for (int t = 0; t < 2; t++) {
        vt_backend *be = vt_backend_init("cpu", 0, t + 1, 0);
        o[t] = zeros(no), lse[t] = zeros((int64_t)N * H * L), dq[t] = zeros(3 * no);
        ln[t] = zeros(no), dln[t] = zeros(no), st[t] = zeros(2 * (int64_t)N * L), dg[t] = zeros(2 * H * D);
        VT_OP(be, attention_forward, o[t], lse[t], qkv, N, L, H, D);
        VT_OP(be, attention_backward, dq[t], dy, qkv, o[t], lse[t], N, L, H, D);
        VT_OP(be, layernorm_forward, ln[t], st[t], st[t] + N * L, qkv, NULL, NULL,
              (int64_t)N * L, H * D, 1e-6f);
        VT_OP(be, layernorm_backward, dln[t], dg[t], dg[t] + H * D, dy, qkv, st[t], st[t] + N * L,
              NULL, (int64_t)N * L, H * D);
        vt_backend_free(&be);
    }
    int same = !memcmp(o[0], o[1], (size_t)no * 4) && !memcmp(lse[0], lse[1], (size_t)N * H * L * 4) &&
               !memcmp(dq[0], dq[1], (size_t)3 * no * 4) && !memcmp(ln[0], ln[1], (size_t)no * 4) &&
               !memcmp(dln[0], dln[1], (size_t)no * 4) && !memcmp(dg[0], dg[1], (size_t)2 * H * D * 4);
    printf("  cpu      1 vs 2 threads: %s\n", same ? "same bits" : "DIFFERENT");
    TCHECK(same, "cpu's transformer ops differ between 1 and 2 threads");
    for (int t = 0; t < 2; t++)
        free(o[t]), free(lse[t]), free(dq[t]), free(ln[t]), free(dln[t]), free(st[t]), free(dg[t]);
    free(qkv), free(dy);
}

int main(void) {
    fd_cases();
    thread_cases();
    if (vt_test_oracle_recs("test_ops_attn", "torch_attn", "torch", &g_recs) <= 0) {
        printf("test_ops_attn: the PyTorch part not run\n");
        return vt_test_done("test_ops_attn");
    }
    vt_backend *ref = vt_backend_init("cpu-ref", 0, 1, 0), *cpu = vt_backend_init("cpu", 0, 2, 0);
    torch_cases(ref, TOL_REF);
    torch_cases(cpu, TOL_FAST);
    vt_backend_free(&ref);
    vt_backend_free(&cpu);
    vt_test_recs_free(&g_recs);
    return vt_test_done("test_ops_attn");
}
