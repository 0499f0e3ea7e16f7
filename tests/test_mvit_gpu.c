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
 * The pairs, their comparison and the whole-step runs are tests/gpupair.h's.
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

#include "models/cuda/cuda_info.h"
#include "tests/gpupair.h"

#define TOL_DSUM 1e-13
#define TOL_ATT 1e-10
#define TOL_TAB 1e-9
#define GRAD_NMSE 1e-6
#define LOSS_REL 1e-5
static const step_tol STEP_TOL = {LOSS_REL, GRAD_NMSE, 0, 0};

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
        net_vs_cpu("mvit_test", "cpu-ref", 8, 32, 32, 2, 0.2f, 2, &STEP_TOL);
        net_vs_cpu("mvit_v1_test", "cpu-ref", 8, 32, 32, 2, 0.2f, 2, &STEP_TOL);
    }
    return vt_test_done("test_mvit_gpu");
}
#endif
