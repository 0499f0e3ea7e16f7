/*
 * test_mvit_gpu.c: MViT's ops on the cuda backend (models/cuda/cuda_mvit.c,
 * kernels_mvit.cu) against cpu-ref (the truth, itself checked against finite differences
 * by test_ops_mvit and against torchvision by test_zoo_mvit), then whole training steps
 * of mvit_test and mvit_v1_test on cuda against the CPU.
 *   ops: mvit_pool forward and backward for q, k and v (kernel 3, stride (1, 2, 2),
 *     padding 1: overlapping windows cut by the edges; dw accumulating onto random values,
 *     over one chunk of windows and several), and the ungathered part (w NULL);
 *     mvit_attention forward (out, lse) and backward (dq, dk, dv overwritten; the three
 *     tables' gradients accumulating) with keys pooled coarser than the queries and
 *     finer, with and without relative tables and residual pooling, heads batched and
 *     clips batched, whole and cut into query blocks (VT_CUDA_MVIT_BQ), and at a
 *     mvit_v2_s-like head (D 96, 785 queries, 17 keys); token_maxpool forward and backward
 *     with random values, with many ties (the first maximum must win) and with NaNs among
 *     the ties (a NaN wins and propagates, the last of several takes the gradient:
 *     models/max_rule.h, checked against PyTorch by test_ops_mvit); n == 0 writes nothing.
 *   steps: mvit_test and mvit_v1_test at 8x32x32 (drop path 0.2) against cpu-ref, two
 *     SGD steps: per-clip loss, every gradient, the parameters after each step, eval logits.
 *   blocks (no GPU needed, checked before the skip): how cuda_mvit.h cuts the queries.
 * Skips (77) without a GPU or in a build without CUDA. TF32 stays off.
 * VT_TEST_MVIT_OPS_ONLY=1: the op checks only (gpu-check.sh's compute-sanitizer runs).
 *
 * Tolerances (NMSE = sum (a-b)^2 / sum b^2; each kernel's exactness is stated in
 * kernels_mvit.cu):
 *   BIT (0): the pool's forward and dqkv, the token max pool both ways: one thread does
 *     cpu-ref's operations in cpu-ref's order (exact float products summed in double).
 *     BIT_NAN: the same, for an output that holds NaNs (cpu-ref's, bit for bit).
 *   TOL_DSUM 1e-13: the pool's dw is cpu-ref's double sum cut into chunks: cpu-ref's float
 *     but for a rare 1-ulp flip (NMSE <= 2^-48 ~ 4e-15 even if all flipped); a wrong tap
 *     is NMSE ~1.
 *   TOL_ATT 1e-10: cuBLAS's float sums of D or Lk products against cpu-ref's double ones,
 *     ~1e-7 relative per logit, carried through exp and the weighted sums: NMSE ~1e-13
 *     (as test_vit_gpu's attention); a wrong stride, block or relative term is > 1e-3.
 *   TOL_TAB 1e-9: the tables' gradients: cpu-ref adds its row terms in float, row after
 *     row (hundreds of rows a table row: ~sqrt(rows) 2^-24 relative, NMSE ~1e-12), ours
 *     in double.
 *   Steps: as test_vit_gpu's (GRAD_NMSE 1e-6: every op within ~1e-10 of cpu-ref and
 *     LayerNorm renormalising each block; a wrong gradient is NMSE ~1, a mismatched drop
 *     path draw a whole branch). Loss per clip 1e-5 relative.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/cuda/cuda_mvit.h"
#include "tests/testutil.h"

/* The query blocks (plain C, no GPU needed; run before the skip): the figure
 * cuda_mvit.h gives, every block within VT_CUDA_ATTN_BLOCK_BYTES, whole 64-query tiles. */
static int check_blocks(void) {
    TCHECK(vt_cuda_mvit_bq(25089, 393, 8) == 5312, "mvit_v2_s stage 1, 8 clips: 5312 "
           "queries, got %d", vt_cuda_mvit_bq(25089, 393, 8));
    TCHECK(vt_cuda_mvit_bq(785, 17, 2) == 785, "a small head: one block");
    int bad = 0;
    for (int Lq = 1; Lq <= 40000; Lq += 397)
        for (int Lk = 1; Lk <= 3000; Lk += 211)
            for (int B = 1; B <= 16; B += 5) {
                const int bq = vt_cuda_mvit_bq(Lq, Lk, B);
                const int64_t blk = (int64_t)B * bq * Lk * 4;
                bad += bq < 1 || bq > Lq || (blk > VT_CUDA_ATTN_BLOCK_BYTES && bq > 1) ||
                       (bq < Lq && bq >= 64 && bq % 64) ||
                       vt_cuda_mvit_scratch_bound(Lq, Lk, B) != 2 * blk;
            }
    TCHECK(bad == 0, "%d (Lq, Lk, B) with a block out of bounds", bad);
    return vt_test_failures;
}

#ifndef VT_HAVE_CUDA
int main(void) {
    if (check_blocks())
        return vt_test_done("test_mvit_gpu");
    printf("test_mvit_gpu: built without CUDA: skipping\n");
    return VT_TEST_SKIP;
}
#else

#include "base/common.h"
#include "models/backend.h"
#include "models/cuda/backend_cuda.h"
#include "models/cuda/cuda_info.h"
#include "models/net.h"
#include "models/optim.h"
#include "models/registry.h"

#define BIT 0.0
#define BIT_NAN -1.0 /* bit for bit, NaNs allowed where cpu-ref has the same */
#define TOL_DSUM 1e-13
#define TOL_ATT 1e-10
#define TOL_TAB 1e-9
#define GRAD_NMSE 1e-6
#define LOSS_REL 1e-5
#define NCLASS 5

static vt_backend *R, *G;
static vt_rng rng;

/* A float array on both backends, the same values (levels > 0: drawn from that many
 * integers, so windows tie; nans > 0: about one value in nans a NaN). */
typedef struct pair { float *r, *g; int64_t n; } pair;
static pair pmake_q(int64_t n, float lo, float hi, int levels, int nans) {
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
static pair pmake(int64_t n, float lo, float hi) { return pmake_q(n, lo, hi, 0, 0); }
static void pfree(pair *p) {
    vt_backend_free_ptr(R, p->r);
    vt_backend_free_ptr(G, p->g);
}
/* The cuda result against cpu-ref: NMSE <= tol, and tol 0 means bit for bit (BIT_NAN: bit
 * for bit where cpu-ref's output holds NaNs, at least one). */
static void cmp(const char *what, const pair *p, double tol) {
    float *h = vt_malloc((size_t)VT_MAX(p->n, 1) * 4), *r = vt_malloc((size_t)VT_MAX(p->n, 1) * 4);
    G->i->to_host(G, h, p->g, (size_t)p->n * 4);
    R->i->to_host(R, r, p->r, (size_t)p->n * 4);
    const double e = vt_nmse(h, r, p->n);
    int64_t diff = 0, finite = 1, nans = 0;
    for (int64_t i = 0; i < p->n; i++) {
        diff += memcmp(&h[i], &r[i], 4) != 0;
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

static int grid(const int t[3]) { return t[0] * t[1] * t[2]; }

/* mvit_pool of every part, pooled (kernel 3, stride (1, s, s), padding 1) and gathered. */
static void test_pool(int n, int heads, int D, const int thw[3], int s) {
    printf("mvit_pool n %d heads %d D %d grid %dx%dx%d stride (1, %d, %d)\n", n, heads, D, thw[0],
           thw[1], thw[2], s, s);
    const vt_pool3d_p p = {{3, 3, 3}, {1, s, s}, {1, 1, 1}, 0};
    int og[3];
    for (int d = 0; d < 3; d++)
        og[d] = vt_conv_out(thw[d], p.k[d], p.s[d], p.p[d]);
    const int64_t L = 1 + grid(thw), C3 = 3LL * heads * D;
    pair qkv = pmake(n * L * C3, -1, 1), dqkv = pmake(n * L * C3, 5, 6);
    for (int part = 0; part < 3; part++)
        for (int pooled = 1; pooled >= 0; pooled--) {
            const int64_t Lo = pooled ? 1 + grid(og) : L, no = (int64_t)n * heads * Lo * D;
            pair w = pmake((int64_t)D * 27, -0.5f, 0.5f), dw = pmake((int64_t)D * 27, -1, 1);
            pair out = pmake(no, 0, 0), dout = pmake(no, -1, 1);
            char what[64];
            const float *wg = pooled ? w.g : NULL, *wr = pooled ? w.r : NULL;
            VT_OP(G, mvit_pool_forward, out.g, qkv.g, wg, n, heads, D, part, thw, &p);
            VT_OP(R, mvit_pool_forward, out.r, qkv.r, wr, n, heads, D, part, thw, &p);
            snprintf(what, sizeof what, "pool part %d%s forward", part, pooled ? "" : " (gather)");
            cmp(what, &out, BIT);
            VT_OP(G, mvit_pool_backward, dqkv.g, pooled ? dw.g : NULL, dout.g, qkv.g, wg, n,
                  heads, D, part, thw, &p);
            VT_OP(R, mvit_pool_backward, dqkv.r, pooled ? dw.r : NULL, dout.r, qkv.r, wr, n,
                  heads, D, part, thw, &p);
            snprintf(what, sizeof what, "pool part %d%s dqkv", part, pooled ? "" : " (gather)");
            cmp(what, &dqkv, BIT);
            if (pooled) {
                snprintf(what, sizeof what, "pool part %d dw (+=)", part);
                cmp(what, &dw, TOL_DSUM);
            }
            pfree(&w), pfree(&dw), pfree(&out), pfree(&dout);
        }
    pfree(&qkv), pfree(&dqkv);
}

/* bq > 0: VT_CUDA_MVIT_BQ, the cuda side in blocks of bq queries. */
static void test_attention(int n, int H, int D, const int qthw[3], const int kthw[3], int rel,
                           int residual, int bq) {
    printf("mvit_attention n %d H %d D %d q %dx%dx%d k %dx%dx%d%s%s%s\n", n, H, D, qthw[0],
           qthw[1], qthw[2], kthw[0], kthw[1], kthw[2], rel ? " rel" : "",
           residual ? " residual" : "", bq ? " in query blocks" : "");
    char v[16];
    snprintf(v, sizeof v, "%d", bq);
    if (bq)
        setenv("VT_CUDA_MVIT_BQ", v, 1);
    const int64_t Lq = 1 + grid(qthw), Lk = 1 + grid(kthw), nq = n * H * Lq * D,
                  nk = n * H * Lk * D;
    int64_t tab[3];
    for (int a = 0; a < 3; a++)
        tab[a] = (2LL * VT_MAX(qthw[a], kthw[a]) - 1) * D;
    pair q = pmake(nq, -1, 1), k = pmake(nk, -1, 1), vv = pmake(nk, -1, 1);
    pair rt = pmake(tab[0], -0.5f, 0.5f), rh = pmake(tab[1], -0.5f, 0.5f),
         rw = pmake(tab[2], -0.5f, 0.5f);
    pair out = pmake(nq, 0, 0), lse = pmake(n * H * Lq, 0, 0), dout = pmake(nq, -1, 1);
    pair dq = pmake(nq, 7, 7), dk = pmake(nk, 7, 7), dv = pmake(nk, 7, 7);
    pair drt = pmake(tab[0], -1, 1), drh = pmake(tab[1], -1, 1), drw = pmake(tab[2], -1, 1);
#define TABS(s) rel ? rh.s : NULL, rel ? rw.s : NULL, rel ? rt.s : NULL
#define DTABS(s) rel ? drh.s : NULL, rel ? drw.s : NULL, rel ? drt.s : NULL
    VT_OP(G, mvit_attention_forward, out.g, lse.g, q.g, k.g, vv.g, TABS(g), n, H, D, qthw, kthw,
          residual);
    VT_OP(R, mvit_attention_forward, out.r, lse.r, q.r, k.r, vv.r, TABS(r), n, H, D, qthw, kthw,
          residual);
    cmp("attention out", &out, TOL_ATT);
    cmp("attention lse", &lse, TOL_ATT);
    VT_OP(G, mvit_attention_backward, dq.g, dk.g, dv.g, DTABS(g), dout.g, q.g, k.g, vv.g, TABS(g),
          lse.g, n, H, D, qthw, kthw, residual);
    VT_OP(R, mvit_attention_backward, dq.r, dk.r, dv.r, DTABS(r), dout.r, q.r, k.r, vv.r, TABS(r),
          lse.r, n, H, D, qthw, kthw, residual);
    cmp("attention dq", &dq, TOL_ATT);
    cmp("attention dk", &dk, TOL_ATT);
    cmp("attention dv", &dv, TOL_ATT);
    if (rel) {
        cmp("attention drt (+=)", &drt, TOL_TAB);
        cmp("attention drh (+=)", &drh, TOL_TAB);
        cmp("attention drw (+=)", &drw, TOL_TAB);
    }
    /* n == 0: nothing written */
    VT_OP(G, mvit_attention_forward, out.g, lse.g, q.g, k.g, vv.g, TABS(g), 0, H, D, qthw, kthw,
          residual);
    VT_OP(G, mvit_attention_backward, dq.g, dk.g, dv.g, DTABS(g), dout.g, q.g, k.g, vv.g, TABS(g),
          lse.g, 0, H, D, qthw, kthw, residual);
    cmp("attention n == 0 untouched", &dq, TOL_ATT);
#undef TABS
#undef DTABS
    unsetenv("VT_CUDA_MVIT_BQ");
    pfree(&q), pfree(&k), pfree(&vv), pfree(&rt), pfree(&rh), pfree(&rw), pfree(&out);
    pfree(&lse), pfree(&dout), pfree(&dq), pfree(&dk), pfree(&dv), pfree(&drt), pfree(&drh);
    pfree(&drw);
}

/* nans > 0: about one input in nans a NaN (the forward then holds NaNs: BIT_NAN). */
static void test_maxpool(int n, int c, const int thw[3], int levels, int nans) {
    printf("token_maxpool n %d c %d grid %dx%dx%d%s%s\n", n, c, thw[0], thw[1], thw[2],
           levels ? " (ties)" : "", nans ? " (NaNs)" : "");
    const vt_pool3d_p p = {{3, 3, 3}, {1, 2, 2}, {1, 1, 1}, 0};
    int og[3];
    for (int d = 0; d < 3; d++)
        og[d] = vt_conv_out(thw[d], p.k[d], p.s[d], p.p[d]);
    const int64_t L = 1 + grid(thw), Lo = 1 + grid(og);
    pair x = pmake_q(n * L * c, -1, 1, levels, nans), y = pmake(n * Lo * c, 0, 0);
    pair dy = pmake(n * Lo * c, -1, 1), dx = pmake(n * L * c, 9, 9);
    VT_OP(G, token_maxpool_forward, y.g, x.g, n, c, thw, &p);
    VT_OP(R, token_maxpool_forward, y.r, x.r, n, c, thw, &p);
    cmp("token_maxpool forward", &y, nans ? BIT_NAN : BIT);
    VT_OP(G, token_maxpool_backward, dx.g, dy.g, x.g, n, c, thw, &p);
    VT_OP(R, token_maxpool_backward, dx.r, dy.r, x.r, n, c, thw, &p);
    cmp("token_maxpool backward", &dx, BIT);
    VT_OP(G, token_maxpool_backward, dx.g, dy.g, x.g, 0, c, thw, &p);
    cmp("token_maxpool n == 0 untouched", &dx, BIT);
    pfree(&x), pfree(&y), pfree(&dy), pfree(&dx);
}

/* ------------------------------------------------------------------ whole steps */

static float *host_copy(vt_backend *be, const float *src, int64_t n) {
    float *h = vt_malloc((size_t)VT_MAX(n, 1) * sizeof(float));
    if (n)
        be->i->to_host(be, h, src, (size_t)n * sizeof(float));
    return h;
}
static void cmp_host(const char *what, const float *got, const float *want, int64_t n, double tol) {
    const double e = vt_nmse(got, want, n);
    int finite = 1;
    for (int64_t i = 0; i < n; i++)
        finite &= isfinite(got[i]) != 0;
    printf("    %-28s n=%-9lld nmse %.2e\n", what, (long long)n, e);
    TCHECK(finite, "%s: non-finite values", what);
    TCHECK(e <= tol, "%s: nmse %.3e > %.1e", what, e, tol);
}

typedef struct side {
    vt_backend *be;
    vt_net *net;
    vt_optim *opt;
    float *x;
    int32_t *label;
} side;

static void net_vs_cpu(const char *model, const char *ref_name, int t, int h, int w, int batch,
                       float drop_path, int steps) {
    printf("%s %dx%dx%d batch %d drop path %g: cuda vs %s\n", model, t, h, w, batch,
           (double)drop_path, ref_name);
    vt_net_cfg nc;
    vt_net_cfg_default(&nc, model, NCLASS, t, h, w);
    nc.drop_path = drop_path;
    vt_optim_cfg oc;
    vt_optim_cfg_default(&oc, VT_OPT_SGD);
    oc.momentum = 0.9f;
    side sd[2] = {{.be = vt_backend_init(ref_name, 0, 0, 0)}, {.be = vt_backend_cuda_init(0, 0)}};
    const int64_t cf = (int64_t)3 * t * h * w;
    for (int k = 0; k < 2; k++) {
        char err[256];
        sd[k].net = vt_net_init(&nc, sd[k].be, batch, err, sizeof err);
        TCHECK(sd[k].net != NULL, "vt_net_init %s on %s: %s", model, sd[k].be->i->name, err);
        if (!sd[k].net)
            goto end;
        vt_net_init_weights(sd[k].net, 77);
        sd[k].opt = vt_optim_init(&oc, sd[k].be, vt_net_num_params(sd[k].net));
        sd[k].x = vt_backend_alloc_x(sd[k].be, (size_t)(cf * batch) * 4, "clips");
        sd[k].label = vt_backend_alloc_x(sd[k].be, (size_t)batch * 4, "labels");
    }
    const int64_t np = vt_net_num_params(sd[0].net);
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
            vt_net_set_dropout_seed(s->net, 1000 + (uint64_t)step * 16);
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
        TCHECK(worst <= LOSS_REL, "%s step %d: loss differs by %.3e", model, step + 1, worst);
        float *gg = host_copy(sd[1].be, vt_net_grads(sd[1].net), np);
        float *gr = host_copy(sd[0].be, vt_net_grads(sd[0].net), np);
        cmp_host("gradients", gg, gr, np, GRAD_NMSE);
        free(gg), free(gr);
        for (int k = 0; k < 2; k++)
            vt_optim_step(sd[k].opt, vt_net_params(sd[k].net), vt_net_grads(sd[k].net), 0.05f);
        float *pg = host_copy(sd[1].be, vt_net_params(sd[1].net), np);
        float *pr = host_copy(sd[0].be, vt_net_params(sd[0].net), np);
        cmp_host("parameters after the step", pg, pr, np, GRAD_NMSE);
        free(pg), free(pr);
    }
    for (int k = 0; k < 2; k++)
        vt_net_forward(sd[k].net, sd[k].x, batch, 0);
    {
        float *zg = host_copy(sd[1].be, vt_net_logits(sd[1].net, 0), (int64_t)batch * NCLASS);
        float *zr = host_copy(sd[0].be, vt_net_logits(sd[0].net, 0), (int64_t)batch * NCLASS);
        cmp_host("eval logits", zg, zr, (int64_t)batch * NCLASS, GRAD_NMSE);
        free(zg), free(zr);
    }
    printf("  cuda high water %.1f MiB\n", (double)sd[1].be->high_water / (1 << 20));
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

int main(void) {
    if (check_blocks())
        return vt_test_done("test_mvit_gpu");
    if (vt_cuda_device_count() == 0) {
        printf("test_mvit_gpu: no CUDA device: skipping\n");
        return VT_TEST_SKIP;
    }
    unsetenv("VT_TF32"); /* numerics are checked in FP32 */
    unsetenv("VT_CUDA_MVIT_BQ");
    vt_rng_seed(&rng, 4545);
    R = vt_backend_cpu_ref_init(0);
    G = vt_backend_cuda_init(0, 0);
    test_pool(2, 2, 8, (const int[3]){2, 6, 6}, 2);
    test_pool(4, 2, 8, (const int[3]){4, 16, 16}, 2); /* 2048 windows: dw in 4 chunks */
    test_pool(2, 1, 16, (const int[3]){3, 5, 7}, 1);
    /* keys pooled coarser than the queries (MViT), clips batched (n > heads) */
    test_attention(2, 1, 8, (const int[3]){2, 4, 4}, (const int[3]){2, 2, 2}, 1, 1, 0);
    test_attention(2, 1, 8, (const int[3]){2, 4, 4}, (const int[3]){2, 2, 2}, 1, 1, 5);
    /* heads batched, q coarser than k, whole and in blocks of 4 */
    test_attention(1, 3, 8, (const int[3]){1, 2, 3}, (const int[3]){2, 4, 3}, 1, 1, 0);
    test_attention(1, 3, 8, (const int[3]){1, 2, 3}, (const int[3]){2, 4, 3}, 1, 1, 4);
    test_attention(2, 2, 16, (const int[3]){2, 3, 3}, (const int[3]){2, 3, 3}, 1, 0, 0);
    test_attention(3, 2, 16, (const int[3]){2, 3, 3}, (const int[3]){1, 2, 2}, 0, 0, 7); /* v1 */
    test_attention(2, 2, 16, (const int[3]){2, 3, 3}, (const int[3]){1, 1, 1}, 0, 1, 0);
    /* mvit_v2_s's first stage, scaled down: head_dim 96, 785 queries, 17 keys */
    test_attention(2, 1, 96, (const int[3]){4, 14, 14}, (const int[3]){4, 2, 2}, 1, 1, 0);
    test_attention(2, 1, 96, (const int[3]){4, 14, 14}, (const int[3]){4, 2, 2}, 1, 1, 256);
    test_maxpool(2, 16, (const int[3]){4, 8, 8}, 0, 0);
    test_maxpool(3, 8, (const int[3]){3, 7, 9}, 3, 0); /* values 0, 1, 2: ties everywhere */
    /* NaNs among ties: a window of 27 taps holds none (~25%), one (~35%) or several */
    test_maxpool(3, 8, (const int[3]){3, 7, 9}, 3, 20);
    TCHECK(R->in_use == 0, "cpu-ref leaked %lld bytes", (long long)R->in_use);
    vt_backend_free(&G);
    vt_backend_free(&R);
    if (!getenv("VT_TEST_MVIT_OPS_ONLY")) { /* gpu-check.sh's compute-sanitizer runs */
        net_vs_cpu("mvit_test", "cpu-ref", 8, 32, 32, 2, 0.2f, 2);
        net_vs_cpu("mvit_v1_test", "cpu-ref", 8, 32, 32, 2, 0.2f, 2);
    }
    return vt_test_done("test_mvit_gpu");
}
#endif
