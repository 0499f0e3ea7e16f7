/*
 * test_gradcheck.c: finite-difference checks of every backward op of the CPU backends
 * (grouped and depthwise conv, SiLU, sigmoid and the channel scale included)
 * (cpu-ref, the truth, and cpu). For an op y = f(x) we take the scalar L = sum(y * r) with
 * a fixed random r, call the backward with dy = r, and compare each analytic gradient
 * element with the central difference (L(x + e) - L(x - e)) / 2e, where L is summed in
 * double from the float outputs. It must never test one backend against another: that is
 * test_ops.c; here the outside truth is calculus.
 *
 * Step size e and tolerance. The error of a central difference is truncation
 * e^2/6 * f''' plus rounding ~ u*|L|/e (u = 6e-8, float outputs). The ops that are linear
 * in the checked input (conv, linear, pooling, gap, dropout, relu away from 0) have no
 * truncation error, so a large e = 1e-2 keeps rounding small: ~6e-8 * 10 / 1e-2 = 6e-5
 * absolute on gradients of order 1, NMSE ~ 1e-9. BN, softmax and BCE are smooth with
 * O(1) third derivatives at these scales: e = 1e-2 gives truncation ~ 2e-5 relative, so
 * both sources stay below ~1e-4 relative and NMSE below ~1e-8. The checks use NMSE < 1e-6
 * (a wrong index or a missing term gives NMSE ~ 1e-2 .. 1) and a per-element bound
 * |num - ana| <= 2e-3 + 2e-3 |ana| (about 20x the worst estimate above).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/backend.h"
#include "base/common.h"
#include "models/registry.h"
#include "tests/fdutil.h"
#include "tests/testutil.h"

static vt_rng g_rng;
/* x[0..n) uniform in [lo, hi) from this file's stream g_rng */
static void urand(float *x, int64_t n, float lo, float hi) { vt_test_urand(&g_rng, x, n, lo, hi); }

static float *talloc(vt_backend *be, int64_t n) {
    float *p = vt_backend_alloc_x(be, (size_t)VT_MAX(n, 1) * sizeof(float), "test");
    memset(p, 0, (size_t)VT_MAX(n, 1) * sizeof(float));
    return p;
}
/* The FD driver (fdutil.h) with this file's bounds: NMSE < 1e-6 and every element within
 * 2e-3 + 2e-3 |analytic| (see the top of the file). */
static void fd_check(const char *be_name, const char *what, float *x, int64_t n, const float *ana,
                     vt_test_loss_fn loss, void *ctx, float eps) {
    char label[128];
    snprintf(label, sizeof label, "%s %s", be_name, what);
    const vt_test_fd f = vt_test_fd_run(x, n, ana, loss, ctx, eps, 2e-3, 2e-3, label);
    printf("  %-8s %-22s n=%-5lld nmse %.2e  max|d| %.2e\n", be_name, what, (long long)n, f.nmse,
           f.worst);
    TCHECK(f.nmse < 1e-6 && f.bad == 0, "%s %s: nmse %.3g, %lld elements off", be_name, what,
           f.nmse, (long long)f.bad);
}

/* ------------------------------------------------------------------ conv3d ---- */

typedef struct conv_ctx {
    vt_backend *be;
    float *x, *w, *b, *y, *r;
    int n, thw[3];
    vt_conv3d_p p;
    int64_t ny;
} conv_ctx;

static double conv_loss(void *c_) {
    conv_ctx *c = c_;
    VT_OP(c->be, conv3d_forward, c->y, c->x, c->w, c->b, c->n, c->thw, &c->p);
    return vt_test_dot(c->y, c->r, c->ny);
}

static void check_conv(vt_backend *be, int n, int cin, int cout, const int thw[3], const int k[3],
                       const int s[3], const int pd[3], int groups) {
    conv_ctx c = {.be = be, .n = n};
    memcpy(c.thw, thw, sizeof c.thw);
    c.p.cin = cin;
    c.p.cout = cout;
    c.p.groups = groups;
    for (int d = 0; d < 3; d++)
        c.p.k[d] = k[d], c.p.s[d] = s[d], c.p.p[d] = pd[d];
    int64_t nx = (int64_t)n * cin * thw[0] * thw[1] * thw[2];
    int64_t nw = (int64_t)cout * (cin / groups) * k[0] * k[1] * k[2];
    c.ny = (int64_t)n * cout;
    for (int d = 0; d < 3; d++)
        c.ny *= vt_conv_out(thw[d], k[d], s[d], pd[d]);
    c.x = talloc(be, nx), c.w = talloc(be, nw), c.b = talloc(be, cout);
    c.y = talloc(be, c.ny), c.r = talloc(be, c.ny);
    urand(c.x, nx, -1, 1), urand(c.w, nw, -1, 1), urand(c.b, cout, -1, 1), urand(c.r, c.ny, -1, 1);
    float *dx = talloc(be, nx), *dw = talloc(be, nw), *db = talloc(be, cout);
    VT_OP(be, conv3d_backward, dx, dw, db, c.r, c.x, c.w, n, thw, &c.p);
    char what[64];
    snprintf(what, sizeof what, "conv k%d%d%d s%d%d%d p%d%d%d g%d din", k[0], k[1], k[2], s[0],
             s[1], s[2], pd[0], pd[1], pd[2], groups);
    fd_check(be->i->name, what, c.x, nx, dx, conv_loss, &c, 1e-2f);
    fd_check(be->i->name, "  conv dw", c.w, nw, dw, conv_loss, &c, 1e-2f);
    fd_check(be->i->name, "  conv db", c.b, cout, db, conv_loss, &c, 1e-2f);
    vt_backend_free_ptr(be, c.x), vt_backend_free_ptr(be, c.w), vt_backend_free_ptr(be, c.b);
    vt_backend_free_ptr(be, c.y), vt_backend_free_ptr(be, c.r);
    vt_backend_free_ptr(be, dx), vt_backend_free_ptr(be, dw), vt_backend_free_ptr(be, db);
}

/* ------------------------------------------------------------------ batch norm ---- */

typedef struct bn_ctx {
    vt_backend *be;
    float *x, *gamma, *beta, *y, *r, *sum, *sumsq, *mean, *invstd;
    int n, c;
    int64_t s;
} bn_ctx;

static void bn_fwd(bn_ctx *b) {
    VT_OP(b->be, bn_stats, b->sum, b->sumsq, b->x, NULL, b->n, b->c, b->s);
    VT_OP(b->be, bn_finalize, b->mean, b->invstd, NULL, NULL, b->sum, b->sumsq, NULL,
          (int64_t)b->n * b->s, b->c, 0.1f, 1e-5f);
    VT_OP(b->be, bn_apply, b->y, b->x, NULL, b->mean, b->invstd, b->gamma, b->beta, b->n, b->c,
          b->s);
}
static double bn_loss(void *c_) {
    bn_ctx *b = c_;
    bn_fwd(b);
    return vt_test_dot(b->y, b->r, (int64_t)b->n * b->c * b->s);
}

static void check_bn(vt_backend *be, int n, int c, int64_t s) {
    bn_ctx b = {.be = be, .n = n, .c = c, .s = s};
    int64_t nx = (int64_t)n * c * s;
    b.x = talloc(be, nx), b.y = talloc(be, nx), b.r = talloc(be, nx);
    b.gamma = talloc(be, c), b.beta = talloc(be, c), b.sum = talloc(be, c);
    b.sumsq = talloc(be, c), b.mean = talloc(be, c), b.invstd = talloc(be, c);
    /* mean ~0.5, spread ~0.6 per channel: E[x^2] - E[x]^2 keeps ~7 good digits */
    urand(b.x, nx, -0.5f, 1.5f), urand(b.r, nx, -1, 1);
    urand(b.gamma, c, 0.5f, 1.5f), urand(b.beta, c, -0.5f, 0.5f);
    bn_fwd(&b);
    float *sdy = talloc(be, c), *sdyx = talloc(be, c), *dx = talloc(be, nx);
    VT_OP(be, bn_backward_reduce, sdy, sdyx, b.r, b.x, NULL, b.mean, b.invstd, n, c, s);
    VT_OP(be, bn_backward_apply, dx, b.r, b.x, NULL, b.mean, b.invstd, b.gamma, sdy, sdyx,
          (int64_t)n * s, n, c, s);
    /* dgamma = sum_dy_xhat, dbeta = sum_dy (what the network adds) */
    fd_check(be->i->name, "bn din", b.x, nx, dx, bn_loss, &b, 1e-2f);
    fd_check(be->i->name, "bn dgamma", b.gamma, c, sdyx, bn_loss, &b, 1e-2f);
    fd_check(be->i->name, "bn dbeta", b.beta, c, sdy, bn_loss, &b, 1e-2f);
    float *all[] = {b.x,    b.y,      b.r,    b.gamma, b.beta, b.sum,
                    b.sumsq, b.mean, b.invstd, sdy,    sdyx,    dx};
    for (size_t i = 0; i < VT_ARRAY_LEN(all); i++)
        vt_backend_free_ptr(be, all[i]);
}

/* ------------------------------------------------------------------ channel scale ---- */

typedef struct chs_ctx {
    vt_backend *be;
    float *x, *s, *y, *r;
    int n, c;
    int64_t sp;
} chs_ctx;

static double chs_loss(void *c_) {
    chs_ctx *c = c_;
    VT_OP(c->be, chscale_forward, c->y, c->x, c->s, c->n, c->c, c->sp);
    return vt_test_dot(c->y, c->r, (int64_t)c->n * c->c * c->sp);
}

/* SE's x * s: both gradients; ds is formed before dx, which here overwrites dout itself. */
static void check_chscale(vt_backend *be, int n, int c, int64_t sp) {
    chs_ctx h = {.be = be, .n = n, .c = c, .sp = sp};
    const int64_t nx = (int64_t)n * c * sp;
    h.x = talloc(be, nx), h.y = talloc(be, nx), h.r = talloc(be, nx), h.s = talloc(be, n * c);
    urand(h.x, nx, -1, 1), urand(h.r, nx, -1, 1), urand(h.s, (int64_t)n * c, 0, 1);
    float *d = talloc(be, nx), *ds = talloc(be, (int64_t)n * c);
    memcpy(d, h.r, (size_t)nx * sizeof(float));
    VT_OP(be, chscale_backward, d, ds, d, h.x, h.s, n, c, sp);
    fd_check(be->i->name, "chscale dx (in place)", h.x, nx, d, chs_loss, &h, 1e-2f);
    fd_check(be->i->name, "chscale ds", h.s, (int64_t)n * c, ds, chs_loss, &h, 1e-2f);
    float *all[] = {h.x, h.y, h.r, h.s, d, ds};
    for (size_t i = 0; i < VT_ARRAY_LEN(all); i++)
        vt_backend_free_ptr(be, all[i]);
}

/* ------------------------------------------------------------------ simple unary ops ---- */

typedef enum { U_RELU, U_MAXPOOL, U_AVGPOOL, U_GAP, U_DROPOUT, U_SILU, U_SIGMOID } unary_kind;
typedef struct unary_ctx {
    vt_backend *be;
    unary_kind kind;
    float *x, *y, *r, *mask;
    int n, c, thw[3];
    vt_pool3d_p p;
    int64_t nx, ny;
} unary_ctx;

static void unary_fwd(unary_ctx *u) {
    switch (u->kind) {
    case U_RELU: VT_OP(u->be, relu_forward, u->y, u->x, u->nx); break;
    case U_MAXPOOL: VT_OP(u->be, maxpool3d_forward, u->y, u->x, u->n, u->c, u->thw, &u->p); break;
    case U_AVGPOOL: VT_OP(u->be, avgpool3d_forward, u->y, u->x, u->n, u->c, u->thw, &u->p); break;
    case U_GAP:
        VT_OP(u->be, gap_forward, u->y, u->x, u->n, u->c,
              (int64_t)u->thw[0] * u->thw[1] * u->thw[2]);
        break;
    case U_DROPOUT: VT_OP(u->be, dropout_forward, u->y, u->mask, u->x, u->nx, 0.3f, 1234); break;
    case U_SILU: VT_OP(u->be, silu_forward, u->y, u->x, u->nx); break;
    case U_SIGMOID: VT_OP(u->be, sigmoid_forward, u->y, u->x, u->nx); break;
    }
}
static double unary_loss(void *c_) {
    unary_ctx *u = c_;
    unary_fwd(u);
    return vt_test_dot(u->y, u->r, u->ny);
}

static void check_unary(vt_backend *be, unary_kind kind, const char *what, int n, int c,
                        const int thw[3], const vt_pool3d_p *p) {
    unary_ctx u = {.be = be, .kind = kind, .n = n, .c = c};
    memcpy(u.thw, thw, sizeof u.thw);
    if (p)
        u.p = *p;
    u.nx = (int64_t)n * c * thw[0] * thw[1] * thw[2];
    if (kind == U_MAXPOOL || kind == U_AVGPOOL) {
        u.ny = (int64_t)n * c;
        for (int d = 0; d < 3; d++)
            u.ny *= vt_pool_out(thw[d], p->k[d], p->s[d], p->p[d], p->ceil_mode);
    } else if (kind == U_GAP) {
        u.ny = (int64_t)n * c;
    } else {
        u.ny = u.nx;
    }
    u.x = talloc(be, u.nx), u.y = talloc(be, u.ny), u.r = talloc(be, u.ny);
    u.mask = talloc(be, u.nx);
    urand(u.r, u.ny, -1, 1);
    if (kind == U_MAXPOOL || kind == U_RELU) {
        /* Distinct values 0.05 apart, none near 0: no tie or kink lies within e = 1e-2. */
        for (int64_t i = 0; i < u.nx; i++)
            u.x[i] = 0.05f * (float)(i - u.nx / 2) + 0.025f;
        for (int64_t i = u.nx - 1; i > 0; i--) { /* shuffle */
            int64_t j = vt_rng_below(&g_rng, (uint32_t)(i + 1));
            float t = u.x[i];
            u.x[i] = u.x[j], u.x[j] = t;
        }
    } else if (kind == U_SILU || kind == U_SIGMOID) {
        urand(u.x, u.nx, -4, 4); /* both tails and the bend */
    } else {
        urand(u.x, u.nx, -1, 1);
    }
    unary_fwd(&u);
    float *dx = talloc(be, u.nx);
    switch (kind) {
    case U_RELU: VT_OP(be, relu_backward, dx, u.r, u.y, u.nx); break;
    case U_MAXPOOL: VT_OP(be, maxpool3d_backward, dx, u.r, u.x, n, c, thw, p); break;
    case U_AVGPOOL: VT_OP(be, avgpool3d_backward, dx, u.r, n, c, thw, p); break;
    case U_GAP: VT_OP(be, gap_backward, dx, u.r, n, c, (int64_t)thw[0] * thw[1] * thw[2]); break;
    case U_DROPOUT: VT_OP(be, dropout_backward, dx, u.r, u.mask, u.nx); break;
    case U_SILU: VT_OP(be, silu_backward, dx, u.r, u.x, u.nx); break;
    case U_SIGMOID: VT_OP(be, sigmoid_backward, dx, u.r, u.y, u.nx); break;
    }
    fd_check(be->i->name, what, u.x, u.nx, dx, unary_loss, &u, 1e-2f);
    vt_backend_free_ptr(be, u.x), vt_backend_free_ptr(be, u.y), vt_backend_free_ptr(be, u.r);
    vt_backend_free_ptr(be, u.mask), vt_backend_free_ptr(be, dx);
}

/* ------------------------------------------------------------------ linear ---- */

typedef struct lin_ctx {
    vt_backend *be;
    float *x, *w, *b, *y, *r;
    int n, in_f, out_f;
} lin_ctx;
static double lin_loss(void *c_) {
    lin_ctx *l = c_;
    VT_OP(l->be, linear_forward, l->y, l->x, l->w, l->b, l->n, l->in_f, l->out_f);
    return vt_test_dot(l->y, l->r, (int64_t)l->n * l->out_f);
}
static void check_linear(vt_backend *be, int n, int in_f, int out_f) {
    lin_ctx l = {.be = be, .n = n, .in_f = in_f, .out_f = out_f};
    l.x = talloc(be, (int64_t)n * in_f), l.w = talloc(be, (int64_t)in_f * out_f);
    l.b = talloc(be, out_f), l.y = talloc(be, (int64_t)n * out_f);
    l.r = talloc(be, (int64_t)n * out_f);
    urand(l.x, (int64_t)n * in_f, -1, 1), urand(l.w, (int64_t)in_f * out_f, -1, 1);
    urand(l.b, out_f, -1, 1), urand(l.r, (int64_t)n * out_f, -1, 1);
    float *dx = talloc(be, (int64_t)n * in_f), *dw = talloc(be, (int64_t)in_f * out_f);
    float *db = talloc(be, out_f);
    VT_OP(be, linear_backward, dx, dw, db, l.r, l.x, l.w, n, in_f, out_f);
    fd_check(be->i->name, "linear din", l.x, (int64_t)n * in_f, dx, lin_loss, &l, 1e-2f);
    fd_check(be->i->name, "linear dw", l.w, (int64_t)in_f * out_f, dw, lin_loss, &l, 1e-2f);
    fd_check(be->i->name, "linear db", l.b, out_f, db, lin_loss, &l, 1e-2f);
    float *all[] = {l.x, l.w, l.b, l.y, l.r, dx, dw, db};
    for (size_t i = 0; i < VT_ARRAY_LEN(all); i++)
        vt_backend_free_ptr(be, all[i]);
}

/* ------------------------------------------------------------------ losses ---- */

typedef struct loss_ctx {
    vt_backend *be;
    int bce;
    float *z, *loss, *dz, *target;
    int32_t *label;
    int n, k;
    float smoothing;
} loss_ctx;
static double loss_loss(void *c_) {
    loss_ctx *l = c_;
    if (l->bce)
        VT_OP(l->be, bce_logits, l->loss, NULL, NULL, l->z, l->target, l->n, l->k, 1.0f);
    else
        VT_OP(l->be, softmax_xent, l->loss, NULL, NULL, l->z, l->label, l->n, l->k, l->smoothing,
              1.0f);
    double s = 0;
    for (int i = 0; i < l->n; i++)
        s += l->loss[i];
    return s;
}
static void check_loss(vt_backend *be, int bce, int n, int k, float smoothing) {
    loss_ctx l = {.be = be, .bce = bce, .n = n, .k = k, .smoothing = smoothing};
    l.z = talloc(be, (int64_t)n * k), l.loss = talloc(be, n), l.dz = talloc(be, (int64_t)n * k);
    l.target = talloc(be, (int64_t)n * k);
    l.label = vt_malloc((size_t)n * sizeof(int32_t));
    urand(l.z, (int64_t)n * k, -3, 3);
    for (int64_t i = 0; i < (int64_t)n * k; i++)
        l.target[i] = vt_rng_uniform(&g_rng) < 0.5 ? 1.0f : 0.0f;
    for (int i = 0; i < n; i++)
        l.label[i] = (int32_t)vt_rng_below(&g_rng, (uint32_t)k);
    /* grad_scale 0.5: dlogits must be exactly half the FD gradient of sum(loss) */
    if (bce)
        VT_OP(be, bce_logits, l.loss, l.dz, NULL, l.z, l.target, n, k, 0.5f);
    else
        VT_OP(be, softmax_xent, l.loss, l.dz, NULL, l.z, l.label, n, k, smoothing, 0.5f);
    for (int64_t i = 0; i < (int64_t)n * k; i++)
        l.dz[i] *= 2.0f;
    const char *what = bce ? "bce dlogits"
                           : (smoothing > 0 ? "xent(smooth) dlogits" : "xent dlogits");
    fd_check(be->i->name, what, l.z, (int64_t)n * k, l.dz, loss_loss, &l, 1e-2f);
    vt_backend_free_ptr(be, l.z), vt_backend_free_ptr(be, l.loss), vt_backend_free_ptr(be, l.dz);
    vt_backend_free_ptr(be, l.target);
    free(l.label);
}

int main(void) {
    vt_rng_seed(&g_rng, 42);
    const char *names[] = {"cpu-ref", "cpu"};
    for (size_t bi = 0; bi < VT_ARRAY_LEN(names); bi++) {
        vt_backend *be = vt_backend_init(names[bi], 0, 2, 0);
        TCHECK(be != NULL, "backend %s", names[bi]);
        if (!be)
            continue;
        printf("%s\n", names[bi]);
        {
            int thw[3] = {4, 5, 5}, k[3] = {3, 3, 3}, s[3] = {1, 1, 1}, p[3] = {1, 1, 1};
            check_conv(be, 2, 2, 3, thw, k, s, p, 1);
        }
        {
            int thw[3] = {5, 6, 7}, k[3] = {1, 3, 3}, s[3] = {1, 2, 2}, p[3] = {0, 1, 1};
            check_conv(be, 1, 3, 2, thw, k, s, p, 1);
        }
        {
            int thw[3] = {5, 4, 3}, k[3] = {3, 1, 1}, s[3] = {2, 1, 1}, p[3] = {1, 0, 0};
            check_conv(be, 2, 2, 2, thw, k, s, p, 1);
        }
        {
            int thw[3] = {3, 4, 4}, k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, p[3] = {0, 0, 0};
            check_conv(be, 2, 3, 4, thw, k, s, p, 1);
        }
        { /* depthwise (X3D's conv_b, stride 2; its stem's conv_xy) and grouped */
            int thw[3] = {3, 5, 6}, k[3] = {3, 3, 3}, s[3] = {1, 2, 2}, p[3] = {1, 1, 1};
            check_conv(be, 2, 3, 3, thw, k, s, p, 3);
            int thw2[3] = {5, 3, 3}, k2[3] = {5, 1, 1}, s2[3] = {1, 1, 1}, p2[3] = {2, 0, 0};
            check_conv(be, 2, 2, 2, thw2, k2, s2, p2, 2);
            check_conv(be, 1, 4, 6, thw, k, s, p, 2);
        }
        check_bn(be, 3, 2, 10);
        check_bn(be, 1, 3, 7);
        int thw[3] = {4, 5, 5};
        check_unary(be, U_RELU, "relu", 2, 2, thw, NULL);
        check_unary(be, U_DROPOUT, "dropout", 2, 2, thw, NULL);
        check_unary(be, U_GAP, "gap", 2, 3, thw, NULL);
        check_unary(be, U_SILU, "silu", 2, 2, thw, NULL);
        check_unary(be, U_SIGMOID, "sigmoid", 2, 2, thw, NULL);
        check_chscale(be, 2, 3, 7);
        vt_pool3d_p mp = {{2, 3, 3}, {2, 2, 2}, {0, 1, 1}, 0};
        check_unary(be, U_MAXPOOL, "maxpool k233 p011", 2, 2, thw, &mp);
        vt_pool3d_p mpc = {{2, 2, 2}, {2, 2, 2}, {0, 0, 0}, 1};
        check_unary(be, U_MAXPOOL, "maxpool ceil", 1, 2, thw, &mpc);
        vt_pool3d_p ap = {{3, 3, 3}, {2, 2, 2}, {1, 1, 1}, 0};
        check_unary(be, U_AVGPOOL, "avgpool k3 s2 p1", 2, 2, thw, &ap);
        vt_pool3d_p apc = {{2, 2, 2}, {2, 2, 2}, {0, 1, 0}, 1};
        check_unary(be, U_AVGPOOL, "avgpool ceil", 1, 2, thw, &apc);
        check_linear(be, 3, 7, 5);
        check_loss(be, 0, 4, 5, 0.0f);
        check_loss(be, 0, 4, 5, 0.1f);
        check_loss(be, 1, 3, 4, 0.0f);
        TCHECK(be->in_use == 0, "%s: %lld bytes still held", names[bi], (long long)be->in_use);
        vt_backend_free(&be);
    }
    return vt_test_done("test_gradcheck");
}
