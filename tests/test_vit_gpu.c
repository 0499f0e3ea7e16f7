/*
 * test_vit_gpu.c: the transformer ops of the cuda backend (models/cuda/cuda_attn.c,
 * kernels_attn.cu, kernels_tokens.cu) against cpu-ref (the truth, itself checked against
 * PyTorch by test_ops_attn and test_zoo_vit), then whole training steps of vit_test and
 * videomae_vit_s on cuda against the CPU.
 *   ops: LayerNorm forward (out, mean, invstd; with and without gamma/beta) and backward
 *     (din, dgamma and dbeta accumulating onto random values, din NULL); GELU forward and
 *     backward; attention forward (out, lse) and backward (dqkv) at vit_test's shape, at a
 *     ViT-like 197 tokens x 3 heads x 64, and the same cut into query blocks of 64
 *     (VT_CUDA_ATTN_BQ: dK and dV then add up over 4 blocks), and with more clips than
 *     heads (the GEMMs then batch the clips), whole and in blocks; transpose, token mean,
 *     broadcast add and its gradient (few rows and many), per-clip scaling; n == 0 writes
 *     nothing.
 *   steps: vit_test (drop path 0.5, so the per-clip draws must agree) against cpu-ref,
 *     three SGD steps; videomae_vit_s at 4x32x32 (8 tokens, all 12 blocks) against the
 *     fast cpu backend, one step: per-clip loss, every gradient, the parameters after the
 *     step, eval logits.
 *   bf16 (a second cuda backend at BF16, compute capability >= 8.0; inputs bf16-exact,
 *     so cpu-ref's FP32 result on the same values is the reference and only the bf16
 *     path's own roundings count): every op above, attention at vit_test's shape, 197
 *     tokens whole and in 4 blocks (the float dK/dV sums), clips batched in blocks; then
 *     vit_test's training step at BF16 on cuda against the FP32 step on cpu-ref.
 *   blocks (no GPU needed, checked before the skip): how cuda_attn.h cuts queries, and
 *     the BF16 scratch within 4 blocks.
 * The pairs, their comparison and the whole-step runs are tests/gpupair.h's.
 * Skips (77) without a GPU or in a build without CUDA. TF32 stays off.
 * VT_TEST_VIT_OPS_ONLY=1: the op checks only (gpu-check.sh's compute-sanitizer runs).
 *
 * Tolerances (NMSE = sum (a-b)^2 / sum b^2; each kernel's own exactness statement is in
 * its file):
 *   BIT (0): transpose, add_bcast, scale_rows, token mean forward and backward do cpu-ref's
 *     own float operations in cpu-ref's order: bit for bit.
 *   TOL_DSUM 1e-13: LayerNorm and the column sums form cpu-ref's double sums in another
 *     order, so a float result is cpu-ref's but for a rare 1-ulp flip (2^-24 relative, NMSE
 *     <= 2^-48 ~ 4e-15 even if every element flipped); a wrong variance (biased vs
 *     unbiased at c = 48: 2% in invstd) is NMSE ~1e-4.
 *   TOL_GELU 1e-12: normcdff and expf (<= 5 ulp) against double erf: NMSE ~1e-13.
 *   TOL_ATT 1e-10: cuBLAS's float sums of 64 or 197 products against cpu-ref's double
 *     ones, ~1e-7 relative per logit, carried through exp and the weighted sums: NMSE
 *     ~1e-13 measured on the CPU (cpu vs cpu-ref, test_ops_attn); a wrong scale, a
 *     transposed head or a block not accumulated is NMSE > 1e-3.
 *   Steps (test_cuda_train_gpu's argument): every op is within ~1e-13 of cpu-ref, and
 *     LayerNorm renormalises each block, so vit_test's gradients carry NMSE ~1e-12 (as
 *     cpu vs cpu-ref in test_zoo_vit, bound 1e-8 there); videomae_vit_s has 12 blocks and
 *     is compared with the float cpu backend: GRAD_NMSE 1e-6 for both, which any wrong
 *     gradient (NMSE ~1) or mismatched drop-path draw (a whole branch) fails. Parameters
 *     after SGD (lr 0.05) move by lr * gradient: the same bound. Loss per clip 1e-5
 *     relative (a float cross-entropy over 5 logits).
 *   BF16 (bf16 keeps 8 significant bits: rounding a float to bf16, ties to even, errs by
 *     at most half an ulp, 2^-8 relative at the bottom of a binade and 2^-9 at its top):
 *     TOL_R1 4e-6: an output stored once as bf16 from cpu-ref's float value (LayerNorm's
 *       out and din, GELU, token mean, add_bcast, scale_rows, the bf16-rounded bias sum
 *       of add_bcast_backward): each element's error is that one rounding, uniform within
 *       half an ulp, so over the thousands of values spread across binades each check
 *       holds the NMSE is ~2.2e-6 (uniform values) to 2.8e-6 (normal ones), measured
 *       with torch's bf16 rounding (at 2000 values never above 3.2e-6 in 20000 draws; a
 *       few dozen values would pass 4e-6 now and then); a second rounding adds as much
 *       again (+ the float bounds above, 1e-13); transpose moves bf16 bits: BIT; the
 *       float outputs (mean, invstd, dgamma, dbeta, lse) read the same values as
 *       cpu-ref and stay at the FP32 bounds (TOL_DSUM, TOL_ATT): a bf16 rounding where
 *       none belongs (S rounded before the softmax) is NMSE ~1e-6 and fails them.
 *     TOL_ATT16_OUT 2e-5, TOL_ATT16_GRAD 1e-4: out carries P's rounding and its own,
 *       dqkv P's and dS's through dP - delta, which cancels; tests/oracle/
 *       cuda_attn_emu_bf16.py measures this path's NMSE against float64 on the same
 *       kind of data at 5-7e-6 (out) and 6e-6 to 3.5e-5 (dqkv), PyTorch's CPU autocast
 *       attention at 1.3-3.9e-5 on the same inputs; a missing scale or a block not
 *       summed is NMSE > 1e-3.
 *     Step (BF16 cuda vs FP32 cpu-ref): PyTorch's own autocast(bf16) step of vit_test
 *       (tests/oracle/torch_vit_bf16_gap.py, 3 seeds, on the CPU) differs from its FP32
 *       step by NMSE 3.9-5.0e-5 over all gradients, at most 1.3e-4 on one tensor,
 *       2.3-3.4e-5 on the logits, 0.3% on the loss: BF16_GRAD_TOTAL 1e-3 (also the
 *       parameters after the step and the eval logits), BF16_GRAD_TENSOR 5e-3 per
 *       tensor, BF16_LOSS_REL 2e-2: 20-40x PyTorch's gap (this path rounds at fewer
 *       points than PyTorch's), while a wrong gradient is NMSE ~1 on its tensor.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/cuda/cuda_attn.h"
#include "tests/testutil.h"

/* The query blocks (plain C, no GPU needed; run before the skip): the figures docs/cuda.md
 * gives, every block within VT_CUDA_ATTN_BLOCK_BYTES, blocks of whole 64-query tiles. */
static int check_blocks(void) {
    TCHECK(vt_cuda_attn_bq(1568, 6) == 1568, "ViT-S 16x224: one block, got %d",
           vt_cuda_attn_bq(1568, 6));
    TCHECK(vt_cuda_attn_bq(1568, 12) == 832, "ViT-B 16x224: 832 queries, got %d",
           vt_cuda_attn_bq(1568, 12));
    int bad = 0;
    for (int L = 1; L <= 20000; L += 97)
        for (int H = 1; H <= 16; H++) {
            const int bq = vt_cuda_attn_bq(L, H);
            const int64_t blk = (int64_t)H * bq * L * 4;
            bad += bq < 1 || bq > L || (blk > VT_CUDA_ATTN_BLOCK_BYTES && bq > 1) ||
                   (bq < L && bq >= 64 && bq % 64) ||
                   vt_cuda_attn_scratch_bound(L, H) != 2 * blk;
        }
    TCHECK(bad == 0, "%d (L, H) with a block out of bounds", bad);
    /* BF16: three float blocks' bytes and the accumulators' groups within one block, so
     * at most 4 x VT_CUDA_ATTN_BLOCK_BYTES (memplan.c's figure) */
    bad = 0;
    for (int L = 1; L <= 20000; L += 97)
        for (int B = 1; B <= 64; B += 3)
            for (int D = 16; D <= 128; D *= 2) {
                const int bq = vt_cuda_attn_bq(L, B), G = vt_cuda_attn_acc_members(L, D, B);
                bad += G < 1 || G > B || (G > 1 && 8LL * G * L * D > VT_CUDA_ATTN_BLOCK_BYTES) ||
                       (bq > 1 && vt_cuda_attn_scratch16(L, B, D, bq) > 4 * VT_CUDA_ATTN_BLOCK_BYTES);
            }
    TCHECK(bad == 0, "%d (L, B, D) with BF16 scratch out of bounds", bad);
    TCHECK(vt_cuda_attn_scratch16(1568, 6, 64, 1568) == 12LL * 6 * 1568 * 1568,
           "ViT-S 16x224 BF16: one block, no accumulators");
    return vt_test_failures;
}

#ifndef VT_HAVE_CUDA
int main(void) {
    if (check_blocks())
        return vt_test_done("test_vit_gpu");
    printf("test_vit_gpu: built without CUDA: skipping\n");
    return VT_TEST_SKIP;
}
#else

#include "models/cuda/cuda_info.h"
#include "tests/gpupair.h"

#define TOL_DSUM 1e-13
#define TOL_GELU 1e-12
#define TOL_ATT 1e-10
#define GRAD_NMSE 1e-6
/* BF16 (module comment) */
#define TOL_R1 4e-6
#define TOL_ATT16_OUT 2e-5
#define TOL_ATT16_GRAD 1e-4
#define BF16_LOSS_REL 2e-2
#define BF16_GRAD_TOTAL 1e-3
#define BF16_GRAD_TENSOR 5e-3
#define LOSS_REL 1e-5
static const step_tol STEP_FP32 = {LOSS_REL, GRAD_NMSE, 0, 0, 0, 0};
static const step_tol STEP_BF16 = {BF16_LOSS_REL, BF16_GRAD_TOTAL, BF16_GRAD_TENSOR, 1, 0, 0};

static void test_layernorm(int64_t rows, int c, int affine) {
    printf("layernorm rows %lld c %d%s\n", (long long)rows, c, affine ? "" : " (no gamma, beta)");
    const int64_t n = rows * c;
    pair x = pmake(n, 2, 4), g = pmake(c, 0.5f, 1.5f), b = pmake(c, -1, 1), y = pmake(n, 0, 0);
    pair mean = pmake(rows, 0, 0), is = pmake(rows, 0, 0), dy = pmake(n, -1, 1);
    pair dx = pmake(n, 9, 9), dg = pmake(c, -1, 1), db = pmake(c, -1, 1);
    const float *gg = affine ? g.g : NULL, *gr = affine ? g.r : NULL;
    VT_OP(G, layernorm_forward, y.g, mean.g, is.g, x.g, gg, affine ? b.g : NULL, rows, c, 1e-6f);
    VT_OP(R, layernorm_forward, y.r, mean.r, is.r, x.r, gr, affine ? b.r : NULL, rows, c, 1e-6f);
    cmp("layernorm out", &y, TOL_DSUM);
    cmp("layernorm mean", &mean, TOL_DSUM);
    cmp("layernorm invstd", &is, TOL_DSUM);
    VT_OP(G, layernorm_backward, dx.g, dg.g, db.g, dy.g, x.g, mean.g, is.g, gg, rows, c);
    VT_OP(R, layernorm_backward, dx.r, dg.r, db.r, dy.r, x.r, mean.r, is.r, gr, rows, c);
    cmp("layernorm din", &dx, TOL_DSUM);
    cmp("layernorm dgamma (+=)", &dg, TOL_DSUM);
    cmp("layernorm dbeta (+=)", &db, TOL_DSUM);
    /* din NULL: only the parameter gradients, added a second time */
    VT_OP(G, layernorm_backward, NULL, dg.g, db.g, dy.g, x.g, mean.g, is.g, gg, rows, c);
    VT_OP(R, layernorm_backward, NULL, dg.r, db.r, dy.r, x.r, mean.r, is.r, gr, rows, c);
    cmp("layernorm dgamma (din NULL)", &dg, TOL_DSUM);
    pfree(&x), pfree(&g), pfree(&b), pfree(&y), pfree(&mean), pfree(&is), pfree(&dy);
    pfree(&dx), pfree(&dg), pfree(&db);
}

static void test_gelu(void) {
    const int64_t n = 100003;
    pair x = pmake(n, -9, 9), y = pmake(n, 0, 0), d = pmake(n, -1, 1), dx = pmake(n, 0, 0);
    VT_OP(G, gelu_forward, y.g, x.g, n), VT_OP(R, gelu_forward, y.r, x.r, n);
    cmp("gelu forward", &y, TOL_GELU);
    VT_OP(G, gelu_backward, dx.g, d.g, x.g, n), VT_OP(R, gelu_backward, dx.r, d.r, x.r, n);
    cmp("gelu backward", &dx, TOL_GELU);
    pfree(&x), pfree(&y), pfree(&d), pfree(&dx);
}

/* bq > 0: VT_CUDA_ATTN_BQ, the cuda side in blocks of bq queries. */
static void test_attention(int n, int L, int H, int D, int bq) {
    printf("attention n %d L %d H %d D %d%s\n", n, L, H, D, bq ? " in query blocks" : "");
    char v[16];
    snprintf(v, sizeof v, "%d", bq);
    if (bq)
        setenv("VT_CUDA_ATTN_BQ", v, 1);
    const int64_t nq = (int64_t)n * L * 3 * H * D, no = (int64_t)n * L * H * D;
    pair qkv = pmake(nq, -2, 2), o = pmake(no, 0, 0), lse = pmake((int64_t)n * H * L, 0, 0);
    pair dO = pmake(no, -1, 1), dq = pmake(nq, 7, 7);
    VT_OP(G, attention_forward, o.g, lse.g, qkv.g, n, L, H, D);
    VT_OP(R, attention_forward, o.r, lse.r, qkv.r, n, L, H, D);
    cmp("attention out", &o, TOL_ATT);
    cmp("attention lse", &lse, TOL_ATT);
    VT_OP(G, attention_backward, dq.g, dO.g, qkv.g, o.g, lse.g, n, L, H, D);
    VT_OP(R, attention_backward, dq.r, dO.r, qkv.r, o.r, lse.r, n, L, H, D);
    cmp("attention dqkv", &dq, TOL_ATT);
    /* n == 0: nothing written */
    VT_OP(G, attention_forward, o.g, lse.g, qkv.g, 0, L, H, D);
    VT_OP(G, attention_backward, dq.g, dO.g, qkv.g, o.g, lse.g, 0, L, H, D);
    cmp("attention n == 0 untouched", &dq, TOL_ATT);
    unsetenv("VT_CUDA_ATTN_BQ");
    pfree(&qkv), pfree(&o), pfree(&lse), pfree(&dO), pfree(&dq);
}

static void test_tokens(void) {
    printf("token plumbing\n");
    const int n = 3, a = 48, b = 37;
    pair x = pmake((int64_t)n * a * b, -1, 1), y = pmake((int64_t)n * a * b, 0, 0);
    VT_OP(G, transpose, y.g, x.g, n, a, b), VT_OP(R, transpose, y.r, x.r, n, a, b);
    cmp("transpose (N, A, B) -> (N, B, A)", &y, BIT);
    VT_OP(G, transpose, x.g, y.g, n, b, a), VT_OP(R, transpose, x.r, y.r, n, b, a);
    cmp("transpose back", &x, BIT);
    pair m = pmake((int64_t)n * b, 0, 0), dm = pmake((int64_t)n * b, -1, 1);
    VT_OP(G, token_mean_forward, m.g, x.g, n, a, b), VT_OP(R, token_mean_forward, m.r, x.r, n, a, b);
    cmp("token mean forward", &m, BIT);
    VT_OP(G, token_mean_backward, y.g, dm.g, n, a, b);
    VT_OP(R, token_mean_backward, y.r, dm.r, n, a, b);
    cmp("token mean backward", &y, BIT);
    const int64_t per = (int64_t)a * b;
    pair pos = pmake(per, -1, 1), sc = pmake(n, 0, 2), dpos = pmake(per, -1, 1);
    VT_OP(G, add_bcast, y.g, x.g, pos.g, n, per), VT_OP(R, add_bcast, y.r, x.r, pos.r, n, per);
    cmp("add_bcast", &y, BIT);
    VT_OP(G, add_bcast, y.g, y.g, pos.g, n, per), VT_OP(R, add_bcast, y.r, y.r, pos.r, n, per);
    cmp("add_bcast in place", &y, BIT);
    VT_OP(G, add_bcast_backward, dpos.g, x.g, n, per);
    VT_OP(R, add_bcast_backward, dpos.r, x.r, n, per);
    cmp("add_bcast_backward (+=), 3 rows", &dpos, TOL_DSUM);
    VT_OP(G, scale_rows, y.g, x.g, sc.g, n, per), VT_OP(R, scale_rows, y.r, x.r, sc.r, n, per);
    cmp("scale_rows", &y, BIT);
    /* qkv's bias gradient: many rows (chunked partials), few columns */
    const int rows = 5003, cols = 96;
    pair big = pmake((int64_t)rows * cols, -1, 1), col = pmake(cols, -1, 1);
    VT_OP(G, add_bcast_backward, col.g, big.g, rows, cols);
    VT_OP(R, add_bcast_backward, col.r, big.r, rows, cols);
    cmp("add_bcast_backward (+=), 5003 rows", &col, TOL_DSUM);
    /* n == 0 writes nothing */
    VT_OP(G, add_bcast_backward, col.g, big.g, 0, cols);
    VT_OP(G, scale_rows, col.g, big.g, sc.g, 0, cols);
    cmp("n == 0 untouched", &col, TOL_DSUM);
    pfree(&x), pfree(&y), pfree(&m), pfree(&dm), pfree(&pos), pfree(&sc), pfree(&dpos);
    pfree(&big), pfree(&col);
}

/* ------------------------------------------------------------------ BF16 ops */

static void test_bf16_ops(void) {
    printf("BF16: cuda's bf16 path against cpu-ref's FP32 on the same bf16 values\n");
    /* LayerNorm: statistics and parameter gradients float from the same inputs */
    const int64_t rows = 300;
    const int c = 384;
    pair x = amake(rows * c, 2, 4), y = amake(rows * c, 0, 0), dy = amake(rows * c, -1, 1);
    pair dx = amake(rows * c, 0, 0), g = pmake(c, 0.5f, 1.5f), b = pmake(c, -1, 1);
    pair mean = pmake(rows, 0, 0), is = pmake(rows, 0, 0), dg = pmake(c, -1, 1), db = pmake(c, -1, 1);
    VT_OP(G, layernorm_forward, y.g, mean.g, is.g, x.g, g.g, b.g, rows, c, 1e-6f);
    VT_OP(R, layernorm_forward, y.r, mean.r, is.r, x.r, g.r, b.r, rows, c, 1e-6f);
    acmp("bf16 layernorm out", &y, TOL_R1);
    cmp("bf16 layernorm mean (float)", &mean, TOL_DSUM);
    cmp("bf16 layernorm invstd (float)", &is, TOL_DSUM);
    VT_OP(G, layernorm_backward, dx.g, dg.g, db.g, dy.g, x.g, mean.g, is.g, g.g, rows, c);
    VT_OP(R, layernorm_backward, dx.r, dg.r, db.r, dy.r, x.r, mean.r, is.r, g.r, rows, c);
    acmp("bf16 layernorm din", &dx, TOL_R1);
    cmp("bf16 layernorm dgamma (float, +=)", &dg, TOL_DSUM);
    cmp("bf16 layernorm dbeta (float, +=)", &db, TOL_DSUM);
    /* GELU */
    VT_OP(G, gelu_forward, y.g, dy.g, rows * c), VT_OP(R, gelu_forward, y.r, dy.r, rows * c);
    acmp("bf16 gelu forward", &y, TOL_R1);
    VT_OP(G, gelu_backward, dx.g, x.g, dy.g, rows * c);
    VT_OP(R, gelu_backward, dx.r, x.r, dy.r, rows * c);
    acmp("bf16 gelu backward", &dx, TOL_R1);
    /* token plumbing: (3, 48, 800) as (N, A, B) */
    const int n = 3, a = 48, bb = 800;
    VT_OP(G, transpose, y.g, x.g, n, a, bb), VT_OP(R, transpose, y.r, x.r, n, a, bb);
    acmp("bf16 transpose", &y, BIT);
    pair m = amake((int64_t)n * bb, 0, 0), dm = amake((int64_t)n * bb, -1, 1);
    VT_OP(G, token_mean_forward, m.g, x.g, n, a, bb), VT_OP(R, token_mean_forward, m.r, x.r, n, a, bb);
    acmp("bf16 token mean forward", &m, TOL_R1);
    VT_OP(G, token_mean_backward, y.g, dm.g, n, a, bb);
    VT_OP(R, token_mean_backward, y.r, dm.r, n, a, bb);
    acmp("bf16 token mean backward", &y, TOL_R1);
    /* the table bf16-exact too, so that cpu-ref adds what cuda's rounded read gives */
    const int64_t per = (int64_t)a * bb;
    pair pos = amake(per, -1, 1), sc = pmake(n, 0, 2), dpos = pmake(per, -1, 1);
    float *posf = vt_backend_alloc_x(G, (size_t)per * 4, "pos f32");
    G->i->act_to_f32(G, posf, pos.g, per); /* a float table of bf16-exact values */
    VT_OP(G, add_bcast, y.g, x.g, posf, n, per), VT_OP(R, add_bcast, y.r, x.r, pos.r, n, per);
    acmp("bf16 add_bcast", &y, TOL_R1);
    VT_OP(G, add_bcast_backward, dpos.g, dy.g, n, per);
    VT_OP(R, add_bcast_backward, dpos.r, dy.r, n, per);
    cmp("bf16 add_bcast_backward (+= a bf16 sum)", &dpos, TOL_R1);
    VT_OP(G, scale_rows, y.g, x.g, sc.g, n, per), VT_OP(R, scale_rows, y.r, x.r, sc.r, n, per);
    acmp("bf16 scale_rows", &y, TOL_R1);
    vt_backend_free_ptr(G, posf);
    pfree(&x), pfree(&y), pfree(&dy), pfree(&dx), pfree(&g), pfree(&b), pfree(&mean);
    pfree(&is), pfree(&dg), pfree(&db), pfree(&m), pfree(&dm), pfree(&pos), pfree(&sc);
    pfree(&dpos);
}

/* BF16 attention; bq > 0: in blocks of bq queries (dK, dV then summed in the float
 * accumulators). lse is float from float logits of the same bf16-exact q, k: FP32's bound. */
static void test_bf16_attention(int n, int L, int H, int D, int bq) {
    printf("bf16 attention n %d L %d H %d D %d%s\n", n, L, H, D, bq ? " in query blocks" : "");
    char v[16];
    snprintf(v, sizeof v, "%d", bq);
    if (bq)
        setenv("VT_CUDA_ATTN_BQ", v, 1);
    const int64_t nq = (int64_t)n * L * 3 * H * D, no = (int64_t)n * L * H * D;
    pair qkv = amake(nq, -2, 2), o = amake(no, 0, 0), lse = pmake((int64_t)n * H * L, 0, 0);
    pair dO = amake(no, -1, 1), dq = amake(nq, 7, 7);
    VT_OP(G, attention_forward, o.g, lse.g, qkv.g, n, L, H, D);
    VT_OP(R, attention_forward, o.r, lse.r, qkv.r, n, L, H, D);
    acmp("bf16 attention out", &o, TOL_ATT16_OUT);
    cmp("bf16 attention lse (float)", &lse, TOL_ATT);
    /* the backward from cpu-ref's out and lse on both sides: its own error alone */
    pair o2 = amake(no, 0, 0);
    {
        float *h = vt_malloc((size_t)no * 4);
        R->i->to_host(R, h, o.r, (size_t)no * 4);
        for (int64_t i = 0; i < no; i++)
            h[i] = vt_bf16_round(h[i]);
        aput(&o2, h);
        free(h);
    }
    VT_OP(G, attention_backward, dq.g, dO.g, qkv.g, o2.g, lse.g, n, L, H, D);
    VT_OP(R, attention_backward, dq.r, dO.r, qkv.r, o2.r, lse.r, n, L, H, D);
    acmp("bf16 attention dqkv", &dq, TOL_ATT16_GRAD);
    unsetenv("VT_CUDA_ATTN_BQ");
    pfree(&qkv), pfree(&o), pfree(&lse), pfree(&dO), pfree(&dq), pfree(&o2);
}

int main(void) {
    if (check_blocks())
        return vt_test_done("test_vit_gpu");
    if (vt_cuda_device_count() == 0) {
        printf("test_vit_gpu: no CUDA device: skipping\n");
        return VT_TEST_SKIP;
    }
    unsetenv("VT_TF32"); /* numerics are checked in FP32 */
    unsetenv("VT_CUDA_ATTN_BQ");
    vt_rng_seed(&rng, 4444);
    R = vt_backend_cpu_ref_init(0);
    G = vt_backend_cuda_init(0, 0);
    test_layernorm(37, 48, 1);
    test_layernorm(300, 384, 1);
    test_layernorm(5, 1000, 0);
    test_gelu();
    test_attention(2, 12, 2, 24, 0);  /* vit_test: 2x2x3 tokens, dim 48, 2 heads */
    test_attention(2, 197, 3, 64, 0); /* one block of 197 queries */
    test_attention(2, 197, 3, 64, 64); /* blocks of 64, 64, 64, 5 */
    test_attention(5, 50, 2, 32, 0);   /* more clips than heads: one head of 5 clips a GEMM */
    test_attention(5, 50, 2, 32, 16);  /* the same in blocks of 16, 16, 16, 2 */
    test_tokens();
    vt_backend *g32 = G, *g16 = vt_backend_cuda_init(0, 0);
    char err[256];
    const int bf16 = vt_backend_set_precision(g16, VT_PREC_BF16, err, sizeof err) == 0;
    if (bf16) { /* the same checks through G, now the BF16 backend */
        G = g16;
        test_bf16_ops();
        test_bf16_attention(2, 12, 2, 24, 0);  /* vit_test's shape */
        test_bf16_attention(2, 197, 3, 64, 0); /* one block */
        test_bf16_attention(2, 197, 3, 64, 64); /* 4 blocks: the float dK, dV sums */
        test_bf16_attention(5, 50, 2, 32, 16);  /* clips batched, in blocks */
        G = g32;
    } else {
        printf("BF16: not on this GPU (%s): bf16 checks skipped\n", err);
    }
    vt_backend_free(&g16);
    TCHECK(R->in_use == 0, "cpu-ref leaked %lld bytes", (long long)R->in_use);
    vt_backend_free(&G);
    vt_backend_free(&R);
    if (!getenv("VT_TEST_VIT_OPS_ONLY")) { /* gpu-check.sh's compute-sanitizer runs */
        net_vs_cpu("vit_test", "cpu-ref", 4, 32, 48, 2, 0.5f, 3, &STEP_FP32);
        net_vs_cpu("videomae_vit_s", "cpu", 4, 32, 32, 2, 0.1f, 1, &STEP_FP32);
        if (bf16) /* BF16 training against the FP32 step (module comment) */
            net_vs_cpu("vit_test", "cpu-ref", 4, 32, 48, 2, 0.5f, 2, &STEP_BF16);
    }
    return vt_test_done("test_vit_gpu");
}
#endif
