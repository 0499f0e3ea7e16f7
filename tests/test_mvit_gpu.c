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
 *   bf16 (a second cuda backend at BF16, compute capability >= 8.0; inputs bf16-exact, so
 *     cpu-ref's FP32 result on the same values is the reference): every op above through
 *     the bf16 path, and mvit_test (at its built clip 8x32 and at 4x48, where the relative
 *     tables are interpolated with FP32 ops inside the BF16 step) and mvit_v1_test (the
 *     class and position tables) training steps at BF16 on cuda against FP32 on cpu-ref.
 *   blocks (no GPU needed, checked before the skip): how cuda_mvit.h cuts the queries,
 *     the BF16 scratch within 3 blocks.
 * The pairs, their comparison and the whole-step runs are tests/gpupair.h's.
 * Skips (77) without a GPU or in a build without CUDA. TF32 stays off.
 * VT_TEST_MVIT_OPS_ONLY=1: the op checks only (gpu-check.sh's compute-sanitizer runs).
 *
 * Tolerances (NMSE = sum (a-b)^2 / sum b^2; each kernel's exactness is stated in
 * kernels_mvit.cu):
 *   BIT (0): the pool's forward and dqkv, the token max pool both ways: one thread does
 *     cpu-ref's operations in cpu-ref's order (exact float products summed in double).
 *     BIT_NAN: the same, for an output that holds NaNs (a NaN where cpu-ref has one, any NaN).
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
 *   BF16 (bf16 keeps 8 significant bits: rounding a float to bf16 errs by at most 2^-9
 *     relative, ties to even):
 *     BIT after rounding cpu-ref's output to bf16 (ref16): the pool's forward and dqkv,
 *       the token max pool's backward: their FP32 float is cpu-ref's bit for bit (above)
 *       and the BF16 path rounds that float once, so the bf16 result is exactly cpu-ref's
 *       float rounded to nearest even; the gathered parts and the max pool's forward copy
 *       bf16 values: BIT as they are. A second rounding or a rounding before the sum is
 *       off by an ulp somewhere and fails.
 *     Float outputs from the same bf16-exact inputs stay at the FP32 bounds: the pool's
 *       dw (TOL_DSUM), lse (TOL_ATT: float logits, float relative terms) and the tables'
 *       gradients (TOL_TAB: from the float ds, never rounded); a bf16 rounding where none
 *       belongs (S, the relative terms or ds rounded) is NMSE ~1e-6 and fails them.
 *     TOL_ATT16_OUT 2e-5, TOL_ATT16_GRAD 1e-4: test_vit_gpu's bounds for the same
 *       rounding points (P rounded for P V, out once; P and dS rounded for the three
 *       gradient GEMMs, dq, dk, dv once), which tests/oracle/cuda_attn_emu_bf16.py
 *       measures at 5-7e-6 and 6e-6 to 3.5e-5 against float64; MViT adds exact terms
 *       (the residual q and dout, float relative terms), which only lower the relative
 *       error. A missing scale or a block not summed is NMSE > 1e-3.
 *     Steps (BF16 cuda vs FP32 cpu-ref): PyTorch's own autocast(bf16) step of mvit_test
 *       and mvit_v1_test differs from its FP32 step (tests/oracle/torch_mvit_bf16_gap.py,
 *       3 seeds each, on the CPU) by NMSE 5.6e-4 to 3.5e-3 over all gradients, 2e-5 to
 *       1.4e-4 on the logits, up to 0.7% on the loss, and per tensor up to 9e-3 — but for
 *       pool_k's LayerNorm bias, whose exact gradient is 0 (a shift of every key shifts a
 *       row's logits alike), where any rounding is NMSE ~1e9: with the floor below
 *       (1e-3 of its share of all gradients' squares) up to 1.9e-2. BF16_GRAD_TOTAL
 *       1e-2 (also the parameters after the step and the eval logits), BF16_GRAD_TENSOR
 *       5e-2 floored at BF16_FLOOR 1e-3, BF16_LOSS_REL 2e-2: about 3x PyTorch's gap (this
 *       path rounds at fewer points than PyTorch's), while a wrong gradient is NMSE ~1
 *       on its tensor.
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
    /* BF16: S and dP float, P and dS bf16 in one scratch of 12 bytes a logit, so at most
     * 3 x VT_CUDA_ATTN_BLOCK_BYTES (memplan.c's figure) */
    bad = 0;
    for (int Lq = 1; Lq <= 40000; Lq += 397)
        for (int Lk = 1; Lk <= 3000; Lk += 211)
            for (int B = 1; B <= 16; B += 5) {
                const int64_t s16 = vt_cuda_mvit_scratch16(Lq, Lk, B);
                bad += s16 != 12LL * B * vt_cuda_mvit_bq(Lq, Lk, B) * Lk ||
                       (vt_cuda_mvit_bq(Lq, Lk, B) > 1 && s16 > 3 * VT_CUDA_ATTN_BLOCK_BYTES);
            }
    TCHECK(bad == 0, "%d (Lq, Lk, B) with BF16 scratch out of bounds", bad);
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
static const step_tol STEP_TOL = {LOSS_REL, GRAD_NMSE, 0, 0, 0, 0};
/* BF16 (module comment) */
#define TOL_ATT16_OUT 2e-5
#define TOL_ATT16_GRAD 1e-4
#define BF16_LOSS_REL 2e-2
#define BF16_GRAD_TOTAL 1e-2
#define BF16_GRAD_TENSOR 5e-2
#define BF16_FLOOR 1e-3
static const step_tol STEP_BF16 = {BF16_LOSS_REL, BF16_GRAD_TOTAL, BF16_GRAD_TENSOR, 1,
                                   BF16_FLOOR, 0};

static int grid(const int t[3]) { return t[0] * t[1] * t[2]; }

/* ------------------------------------------------------------------ the ops
 * Each test runs FP32 (bf16 0) or through the BF16 backend (bf16 1: G is then the BF16
 * backend; [A] arrays bf16-exact, their results widened by acmp), with the same draws in
 * the same order either way. */

/* cpu-ref's side of an [A] pair rounded to bf16 in place (the value a single rounding of
 * its float gives), for the BIT checks of the module comment. */
static void ref16(const pair *p) {
    float *h = vt_malloc((size_t)VT_MAX(p->n, 1) * 4);
    R->i->to_host(R, h, p->r, (size_t)p->n * 4);
    for (int64_t i = 0; i < p->n; i++)
        h[i] = vt_bf16_round(h[i]);
    R->i->to_device(R, p->r, h, (size_t)p->n * 4);
    free(h);
}

/* An [A] array: amake under BF16, else pmake. */
static pair act_make(int bf16, int64_t n, float lo, float hi) {
    return bf16 ? amake(n, lo, hi) : pmake(n, lo, hi);
}

/* An [A] result against cpu-ref: cmp at tol, or under BF16 acmp at tol16, cpu-ref's float
 * first rounded to bf16 when round_ref (ref16: a result the BF16 path rounds once). The
 * label gets "bf16 " in front under BF16. */
static void act_cmp(int bf16, const char *what, const pair *p, double tol, double tol16,
                    int round_ref) {
    char label[96];
    snprintf(label, sizeof label, "%s%s", bf16 ? "bf16 " : "", what);
    if (!bf16) {
        cmp(label, p, tol);
        return;
    }
    if (round_ref)
        ref16(p);
    acmp(label, p, tol16);
}

/* mvit_pool of every part, pooled (kernel 3, stride (1, s, s), padding 1) and gathered;
 * BF16: the forward and dqkv BIT against cpu-ref's float rounded once, dw float. */
static void test_pool(int bf16, int n, int heads, int D, const int thw[3], int s) {
    printf("%smvit_pool n %d heads %d D %d grid %dx%dx%d stride (1, %d, %d)\n",
           bf16 ? "bf16 " : "", n, heads, D, thw[0], thw[1], thw[2], s, s);
    const vt_pool3d_p p = {{3, 3, 3}, {1, s, s}, {1, 1, 1}, 0};
    int og[3];
    for (int d = 0; d < 3; d++)
        og[d] = vt_conv_out(thw[d], p.k[d], p.s[d], p.p[d]);
    const int64_t L = 1 + grid(thw), C3 = 3LL * heads * D;
    pair qkv = act_make(bf16, n * L * C3, -1, 1), dqkv = act_make(bf16, n * L * C3, 5, 6);
    for (int part = 0; part < 3; part++)
        for (int pooled = 1; pooled >= 0; pooled--) {
            const int64_t Lo = pooled ? 1 + grid(og) : L, no = (int64_t)n * heads * Lo * D;
            /* the weights and dw float (parameters), as on every path */
            pair w = pmake((int64_t)D * 27, -0.5f, 0.5f), dw = pmake((int64_t)D * 27, -1, 1);
            pair out = act_make(bf16, no, 0, 0), dout = act_make(bf16, no, -1, 1);
            char what[64];
            const float *wg = pooled ? w.g : NULL, *wr = pooled ? w.r : NULL;
            VT_OP(G, mvit_pool_forward, out.g, qkv.g, wg, n, heads, D, part, thw, &p);
            VT_OP(R, mvit_pool_forward, out.r, qkv.r, wr, n, heads, D, part, thw, &p);
            snprintf(what, sizeof what, "pool part %d%s forward", part, pooled ? "" : " (gather)");
            act_cmp(bf16, what, &out, BIT, BIT, 1);
            VT_OP(G, mvit_pool_backward, dqkv.g, pooled ? dw.g : NULL, dout.g, qkv.g, wg, n,
                  heads, D, part, thw, &p);
            VT_OP(R, mvit_pool_backward, dqkv.r, pooled ? dw.r : NULL, dout.r, qkv.r, wr, n,
                  heads, D, part, thw, &p);
            snprintf(what, sizeof what, "pool part %d%s dqkv", part, pooled ? "" : " (gather)");
            act_cmp(bf16, what, &dqkv, BIT, BIT, 1);
            if (pooled) {
                snprintf(what, sizeof what, "%spool part %d dw (float, +=)", bf16 ? "bf16 " : "",
                         part);
                cmp(what, &dw, TOL_DSUM);
            }
            pfree(&w), pfree(&dw), pfree(&out), pfree(&dout);
        }
    pfree(&qkv), pfree(&dqkv);
}

/* bq > 0: VT_CUDA_MVIT_BQ, the cuda side in blocks of bq queries. BF16: q, k, v, dout
 * bf16-exact, the tables, lse and the tables' gradients float. */
static void test_attention(int bf16, int n, int H, int D, const int qthw[3], const int kthw[3],
                           int rel, int residual, int bq) {
    printf("%smvit_attention n %d H %d D %d q %dx%dx%d k %dx%dx%d%s%s%s\n", bf16 ? "bf16 " : "",
           n, H, D, qthw[0], qthw[1], qthw[2], kthw[0], kthw[1], kthw[2], rel ? " rel" : "",
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
    pair q = act_make(bf16, nq, -1, 1), k = act_make(bf16, nk, -1, 1);
    pair vv = act_make(bf16, nk, -1, 1);
    pair rt = pmake(tab[0], -0.5f, 0.5f), rh = pmake(tab[1], -0.5f, 0.5f),
         rw = pmake(tab[2], -0.5f, 0.5f);
    pair out = act_make(bf16, nq, 0, 0), lse = pmake(n * H * Lq, 0, 0);
    pair dout = act_make(bf16, nq, -1, 1);
    pair dq = act_make(bf16, nq, 7, 7), dk = act_make(bf16, nk, 7, 7);
    pair dv = act_make(bf16, nk, 7, 7);
    pair drt = pmake(tab[0], -1, 1), drh = pmake(tab[1], -1, 1), drw = pmake(tab[2], -1, 1);
#define TABS(s) rel ? rh.s : NULL, rel ? rw.s : NULL, rel ? rt.s : NULL
#define DTABS(s) rel ? drh.s : NULL, rel ? drw.s : NULL, rel ? drt.s : NULL
    VT_OP(G, mvit_attention_forward, out.g, lse.g, q.g, k.g, vv.g, TABS(g), n, H, D, qthw, kthw,
          residual);
    VT_OP(R, mvit_attention_forward, out.r, lse.r, q.r, k.r, vv.r, TABS(r), n, H, D, qthw, kthw,
          residual);
    act_cmp(bf16, "attention out", &out, TOL_ATT, TOL_ATT16_OUT, 0);
    cmp(bf16 ? "bf16 attention lse (float)" : "attention lse", &lse, TOL_ATT);
    VT_OP(G, mvit_attention_backward, dq.g, dk.g, dv.g, DTABS(g), dout.g, q.g, k.g, vv.g, TABS(g),
          lse.g, n, H, D, qthw, kthw, residual);
    VT_OP(R, mvit_attention_backward, dq.r, dk.r, dv.r, DTABS(r), dout.r, q.r, k.r, vv.r, TABS(r),
          lse.r, n, H, D, qthw, kthw, residual);
    act_cmp(bf16, "attention dq", &dq, TOL_ATT, TOL_ATT16_GRAD, 0);
    act_cmp(bf16, "attention dk", &dk, TOL_ATT, TOL_ATT16_GRAD, 0);
    act_cmp(bf16, "attention dv", &dv, TOL_ATT, TOL_ATT16_GRAD, 0);
    if (rel) {
        cmp(bf16 ? "bf16 attention drt (float, +=)" : "attention drt (+=)", &drt, TOL_TAB);
        cmp(bf16 ? "bf16 attention drh (float, +=)" : "attention drh (+=)", &drh, TOL_TAB);
        cmp(bf16 ? "bf16 attention drw (float, +=)" : "attention drw (+=)", &drw, TOL_TAB);
    }
    if (!bf16) { /* n == 0: nothing written */
        VT_OP(G, mvit_attention_forward, out.g, lse.g, q.g, k.g, vv.g, TABS(g), 0, H, D, qthw,
              kthw, residual);
        VT_OP(G, mvit_attention_backward, dq.g, dk.g, dv.g, DTABS(g), dout.g, q.g, k.g, vv.g,
              TABS(g), lse.g, 0, H, D, qthw, kthw, residual);
        cmp("attention n == 0 untouched", &dq, TOL_ATT);
    }
#undef TABS
#undef DTABS
    unsetenv("VT_CUDA_MVIT_BQ");
    pfree(&q), pfree(&k), pfree(&vv), pfree(&rt), pfree(&rh), pfree(&rw), pfree(&out);
    pfree(&lse), pfree(&dout), pfree(&dq), pfree(&dk), pfree(&dv), pfree(&drt), pfree(&drh);
    pfree(&drw);
}

/* levels, nans: FP32 only (BF16 draws uniform values). nans > 0: about one input in nans
 * a NaN (the forward then holds NaNs: BIT_NAN). BF16: the forward copies bf16 values (BIT
 * as they are), the backward BIT against cpu-ref's float rounded once. */
static void test_maxpool(int bf16, int n, int c, const int thw[3], int levels, int nans) {
    printf("%stoken_maxpool n %d c %d grid %dx%dx%d%s%s\n", bf16 ? "bf16 " : "", n, c, thw[0],
           thw[1], thw[2], levels ? " (ties)" : "", nans ? " (NaNs)" : "");
    const vt_pool3d_p p = {{3, 3, 3}, {1, 2, 2}, {1, 1, 1}, 0};
    int og[3];
    for (int d = 0; d < 3; d++)
        og[d] = vt_conv_out(thw[d], p.k[d], p.s[d], p.p[d]);
    const int64_t L = 1 + grid(thw), Lo = 1 + grid(og);
    pair x = bf16 ? amake(n * L * c, -1, 1) : pmake_q(n * L * c, -1, 1, levels, nans);
    pair y = act_make(bf16, n * Lo * c, 0, 0);
    pair dy = act_make(bf16, n * Lo * c, -1, 1), dx = act_make(bf16, n * L * c, 9, 9);
    VT_OP(G, token_maxpool_forward, y.g, x.g, n, c, thw, &p);
    VT_OP(R, token_maxpool_forward, y.r, x.r, n, c, thw, &p);
    act_cmp(bf16, "token_maxpool forward", &y, nans ? BIT_NAN : BIT, BIT, 0);
    VT_OP(G, token_maxpool_backward, dx.g, dy.g, x.g, n, c, thw, &p);
    VT_OP(R, token_maxpool_backward, dx.r, dy.r, x.r, n, c, thw, &p);
    act_cmp(bf16, "token_maxpool backward", &dx, BIT, BIT, 1);
    if (!bf16) {
        VT_OP(G, token_maxpool_backward, dx.g, dy.g, x.g, 0, c, thw, &p);
        cmp("token_maxpool n == 0 untouched", &dx, BIT);
    }
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
    test_pool(0, 2, 2, 8, (const int[3]){2, 6, 6}, 2);
    test_pool(0, 4, 2, 8, (const int[3]){4, 16, 16}, 2); /* 2048 windows: dw in 4 chunks */
    test_pool(0, 2, 1, 16, (const int[3]){3, 5, 7}, 1);
    /* keys pooled coarser than the queries (MViT), clips batched (n > heads) */
    test_attention(0, 2, 1, 8, (const int[3]){2, 4, 4}, (const int[3]){2, 2, 2}, 1, 1, 0);
    test_attention(0, 2, 1, 8, (const int[3]){2, 4, 4}, (const int[3]){2, 2, 2}, 1, 1, 5);
    /* heads batched, q coarser than k, whole and in blocks of 4 */
    test_attention(0, 1, 3, 8, (const int[3]){1, 2, 3}, (const int[3]){2, 4, 3}, 1, 1, 0);
    test_attention(0, 1, 3, 8, (const int[3]){1, 2, 3}, (const int[3]){2, 4, 3}, 1, 1, 4);
    test_attention(0, 2, 2, 16, (const int[3]){2, 3, 3}, (const int[3]){2, 3, 3}, 1, 0, 0);
    /* v1 */
    test_attention(0, 3, 2, 16, (const int[3]){2, 3, 3}, (const int[3]){1, 2, 2}, 0, 0, 7);
    test_attention(0, 2, 2, 16, (const int[3]){2, 3, 3}, (const int[3]){1, 1, 1}, 0, 1, 0);
    /* mvit_v2_s's first stage, scaled down: head_dim 96, 785 queries, 17 keys */
    test_attention(0, 2, 1, 96, (const int[3]){4, 14, 14}, (const int[3]){4, 2, 2}, 1, 1, 0);
    test_attention(0, 2, 1, 96, (const int[3]){4, 14, 14}, (const int[3]){4, 2, 2}, 1, 1, 256);
    test_maxpool(0, 2, 16, (const int[3]){4, 8, 8}, 0, 0);
    test_maxpool(0, 3, 8, (const int[3]){3, 7, 9}, 3, 0); /* values 0, 1, 2: ties everywhere */
    /* NaNs among ties: a window of 27 taps holds none (~25%), one (~35%) or several */
    test_maxpool(0, 3, 8, (const int[3]){3, 7, 9}, 3, 20);
    vt_backend *g32 = G, *g16 = vt_backend_cuda_init(0, 0);
    char err[256];
    const int bf16 = vt_backend_set_precision(g16, VT_PREC_BF16, err, sizeof err) == 0;
    if (bf16) { /* the same checks through G, now the BF16 backend */
        G = g16;
        test_pool(1, 2, 2, 8, (const int[3]){2, 6, 6}, 2);
        test_pool(1, 4, 2, 8, (const int[3]){4, 16, 16}, 2); /* dw in 4 chunks */
        test_attention(1, 2, 1, 8, (const int[3]){2, 4, 4}, (const int[3]){2, 2, 2}, 1, 1, 0);
        test_attention(1, 2, 1, 8, (const int[3]){2, 4, 4}, (const int[3]){2, 2, 2}, 1, 1, 5);
        test_attention(1, 1, 3, 8, (const int[3]){1, 2, 3}, (const int[3]){2, 4, 3}, 1, 1, 4);
        test_attention(1, 3, 2, 16, (const int[3]){2, 3, 3}, (const int[3]){1, 2, 2}, 0, 0, 7);
        test_attention(1, 2, 1, 96, (const int[3]){4, 14, 14}, (const int[3]){4, 2, 2}, 1, 1,
                            256);
        test_maxpool(1, 2, 16, (const int[3]){4, 8, 8}, 0, 0);
        G = g32;
    } else {
        printf("BF16: not on this GPU (%s): bf16 checks skipped\n", err);
    }
    vt_backend_free(&g16);
    TCHECK(R->in_use == 0, "cpu-ref leaked %lld bytes", (long long)R->in_use);
    vt_backend_free(&G);
    vt_backend_free(&R);
    if (!getenv("VT_TEST_MVIT_OPS_ONLY")) { /* gpu-check.sh's compute-sanitizer runs */
        net_vs_cpu("mvit_test", "cpu-ref", 8, 32, 32, 2, 0.2f, 2, &STEP_TOL);
        net_vs_cpu("mvit_v1_test", "cpu-ref", 8, 32, 32, 2, 0.2f, 2, &STEP_TOL);
        if (bf16) { /* BF16 training against the FP32 step (module comment) */
            net_vs_cpu("mvit_test", "cpu-ref", 8, 32, 32, 2, 0.2f, 2, &STEP_BF16);
            net_vs_cpu("mvit_test", "cpu-ref", 4, 48, 48, 2, 0.2f, 1, &STEP_BF16);
            net_vs_cpu("mvit_v1_test", "cpu-ref", 8, 32, 32, 2, 0.2f, 1, &STEP_BF16);
        }
    }
    return vt_test_done("test_mvit_gpu");
}
#endif
