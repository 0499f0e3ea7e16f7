/*
 * cuda_mvit.c: MViT's ops on the CUDA backend (cuda_mvit.h; backend.h's MViT section):
 * the pooling of q, k, v, the multiscale attention with decomposed relative positions and
 * residual pooling, and the max pooling of a token grid. The arithmetic is in
 * kernels_mvit.cu (each kernel's exactness against cpu-ref stated there); this file holds
 * the host side: scratch and the attention's cuBLAS GEMMs. Under TF32 the GEMMs may use
 * TF32 like the linear layers (the cuBLAS handle's math mode). BF16 (the CPU backends
 * have none for these ops: net_vit.c refuses them there): every op reads and writes bf16
 * activations (kernels_mvit.h's vt_cuk_dt), and the attention runs mv16_forward /
 * mv16_backward below: the same walk and query blocks, the GEMMs in
 * cublasGemmStridedBatchedEx (bf16 A, B; CUBLAS_COMPUTE_32F) with cuda_attn.c's rounding
 * points: S, dP, the softmax, lse and the relative terms in float; P and dS rounded to
 * bf16 for the GEMMs; out (P V + the residual q), dq (dS K + its relative and residual
 * terms), dk and dv (float sums over the query blocks) each rounded once at the end; the
 * tables' gradients float (docs/precision.md "bf16 for the transformers").
 *
 * The attention follows cuda_attn.c's scheme on blocks of bq queries (cuda_mvit.h), each
 * GEMM batching B (clip, head) pairs a fixed stride apart (mv_walk), row-major matrices
 * read by column-major cuBLAS as their transposes:
 *   forward:  S = scale Q_b K^T                           (B, bq, Lk)  GEMM
 *             S += rel terms, P = softmax, lse             kernel (rel: q_i . R[dist],
 *                                                          one row at a time, never stored)
 *             O_b = P V                                    GEMM; then O += Q (residual)
 *   backward: S again, dP = dO_b V^T                       two GEMMs
 *             P = exp(S + rel - lse), dS = P (dP - delta), delta = sum P dP (MViT's out
 *             carries the residual, so not dO . O), arow = row sums of dS per key
 *             coordinate (all rows kept: N heads Lq KK floats)            kernel
 *             dV += P^T dO_b, dQ_b = scale dS K, dK += scale dS^T Q_b     three GEMMs
 *             then dQ += sum_x arow[x] R[dist] (+ dO: residual)           kernel
 *             and the tables' gradients from arow and Q as fixed-order sums  two kernels
 * cuBLAS's results are bitwise repeatable on one GPU model (one stream, our own
 * workspace), every kernel sums in a fixed order and no atomics are used: the op is
 * deterministic. The GEMM arguments are checked without a GPU by
 * tests/oracle/cuda_mvit_emu.py (run by test_mvit_emu), the whole op against cpu-ref by
 * tests/test_mvit_gpu.c.
 */
#include <math.h>
#include <stdlib.h>

#include "base/common.h"
#include "models/cuda/backend_cuda_impl.h"
#include "models/cuda/cuda_check.h"
#include "models/cuda/cuda_mvit.h"
#include "models/cuda/kernels_mvit.h"

/* Every op starts here: the device made current. */
static cu_ctx *enter(vt_backend *be) { return vt_cuda_enter(be); }
/* The activation type of the kernels: bf16 under BF16 (backend.h's [A] arrays). */
#define DT(c) ((c)->bf16 ? VT_CUK_BF16 : VT_CUK_F32)

static vt_cuk_pool pool_of(const int thw[3], const vt_pool3d_p *p, int pooled) {
    vt_cuk_pool k;
    for (int d = 0; d < 3; d++) {
        k.in[d] = thw[d];
        k.out[d] = pooled ? vt_conv_out(thw[d], p->k[d], p->s[d], p->p[d]) : thw[d];
        k.k[d] = pooled ? p->k[d] : 1;
        k.s[d] = pooled ? p->s[d] : 1;
        k.p[d] = pooled ? p->p[d] : 0;
    }
    return k;
}

/* ---------------------------------------------------------------- pooling of q, k, v ---- */

void vt_cuda_mvit_pool_forward(vt_backend *be, float *out, const float *qkv, const float *w,
                               int n, int heads, int D, int part, const int thw[3],
                               const vt_pool3d_p *p) {
    cu_ctx *cx = enter(be);
    const vt_cuk_pool k = pool_of(thw, p, w != NULL);
    vt_cuk_mvit_pool_fwd(cx->stream, DT(cx), out, qkv, w, n, heads, D, part, &k);
}

void vt_cuda_mvit_pool_backward(vt_backend *be, float *dqkv, float *dw, const float *dout,
                                const float *qkv, const float *w, int n, int heads, int D,
                                int part, const int thw[3], const vt_pool3d_p *p) {
    cu_ctx *cx = enter(be);
    if (n <= 0)
        return;
    const vt_cuk_pool k = pool_of(thw, p, w != NULL);
    vt_cuk_mvit_pool_bwd_dx(cx->stream, DT(cx), dqkv, dout, w, n, heads, D, part, &k);
    if (!dw || !w)
        return;
    const size_t need = (size_t)vt_cuk_mvit_pool_dw_parts(n, heads, D, &k) * (size_t)D *
                        (size_t)(k.k[0] * k.k[1] * k.k[2]) * sizeof(double);
    double *part_buf = vt_cuda_grow(be, &cx->scratch, &cx->scratch_bytes, need, "cuda scratch");
    vt_cuk_mvit_pool_bwd_dw(cx->stream, DT(cx), dw, dout, qkv, n, heads, D, part, &k, part_buf);
}

/* ---------------------------------------------------------------- attention ---- */


/* How the (clip, head) pairs are walked: one GEMM batches B members a fixed stride apart —
 * the heads of a clip or one head of every clip, whichever are more — and the host loops
 * over the other U. q and the lse (N, heads, Lq[, D]) step by l (rows: q by l * D), k and
 * v (N, heads, Lk, D) by k, out (N, Lq, heads D) by o; u_ the loop, b_ the batch. */
typedef struct mv_walk {
    int U, B;
    int64_t u_l, u_k, u_o, b_l, b_k, b_o;
} mv_walk;

static mv_walk walk(int n, int H, int Lq, int Lk, int D) {
    const int64_t C = (int64_t)H * D;
    if (n > H) /* batch the clips, loop over the heads */
        return (mv_walk){H, n, Lq, (int64_t)Lk * D, D, (int64_t)H * Lq, (int64_t)H * Lk * D,
                         (int64_t)Lq * C};
    return (mv_walk){n, H, (int64_t)H * Lq, (int64_t)H * Lk * D, (int64_t)Lq * C, Lq,
                     (int64_t)Lk * D, D};
}

/* Queries per block: cuda_mvit.h's, or fewer when VT_CUDA_MVIT_BQ (a test switch:
 * tests/test_mvit_gpu.c cuts a small Lq into several blocks) asks for fewer. */
static int block_queries(int Lq, int Lk, int B) {
    int bq = vt_cuda_mvit_bq(Lq, Lk, B);
    const char *e = getenv("VT_CUDA_MVIT_BQ");
    const int want = e && *e ? atoi(e) : 0;
    return want > 0 && want < bq ? want : bq;
}

static vt_cuk_mvgeo geometry(const int qthw[3], const int kthw[3], int D, const float *rh) {
    vt_cuk_mvgeo g;
    for (int d = 0; d < 3; d++) {
        g.qthw[d] = qthw[d];
        g.kthw[d] = kthw[d];
    }
    g.Lq = 1 + qthw[0] * qthw[1] * qthw[2];
    g.Lk = 1 + kthw[0] * kthw[1] * kthw[2];
    g.KK = kthw[0] + kthw[1] + kthw[2];
    g.D = D;
    g.rel = rh != NULL;
    VT_CHECK(!g.rel || g.KK <= VT_CUK_MVIT_MAXKK, "mvit_attention: %d relative terms a row "
             "(key grid %dx%dx%d) > %d", g.KK, kthw[0], kthw[1], kthw[2], VT_CUK_MVIT_MAXKK);
    return g;
}

/* S (B, b, Lk) = scale Q_b K^T for queries [i0, i0 + b) of the walk step's members:
 * S^T (Lk, b) = K (Lk, D) Q_b^T (D, b). */
static void logits(cu_ctx *cx, float *s, const float *q, const float *k, int i0, int b,
                   const vt_cuk_mvgeo *g, const mv_walk *w, float scale) {
    const int D = g->D;
    vt_cu_gemm_b(cx, CUBLAS_OP_T, CUBLAS_OP_N, g->Lk, b, D, scale, k, D, w->b_k, q + (int64_t)i0 * D,
           D, w->b_l * D, 0.0f, s, g->Lk, (int64_t)b * g->Lk, w->B);
}

/* The backward's relative scratch: every row's row sums (floats, rounded up to whole
 * doubles), then the tables' double partials; nothing without the tables. */
static int64_t rel_floats(int n, int H, const vt_cuk_mvgeo *g) {
    return g->rel ? ((int64_t)n * H * g->Lq * g->KK + 1) / 2 * 2 : 0;
}
static int64_t rel_bytes(int n, int H, const vt_cuk_mvgeo *g) {
    if (!g->rel)
        return 0;
    int64_t cells = 0;
    for (int a = 0; a < 3; a++)
        cells += (int64_t)g->qthw[a] * g->kthw[a] * g->D;
    return rel_floats(n, H, g) * (int64_t)sizeof(float) +
           (int64_t)vt_cuk_mvit_rel_parts(n, H, g) * cells * (int64_t)sizeof(double);
}

/* ---------------------------------------------------------------- attention, BF16 ---- */

/* S (B, b, Lk) float = scale Q_b K^T (bf16 q, k: the walk step's first rows). */
static void logits16(cu_ctx *cx, float *s, const uint16_t *q, const uint16_t *k, int i0, int b,
                     const vt_cuk_mvgeo *g, const mv_walk *w, float scale) {
    const int D = g->D;
    vt_cu_gemm16_b(cx, CUBLAS_OP_T, CUBLAS_OP_N, g->Lk, b, D, scale, k, D, w->b_k,
                   q + (int64_t)i0 * D, D, w->b_l * D, 0.0f, s, CUDA_R_32F, g->Lk,
                   (int64_t)b * g->Lk, w->B);
}

/* The attention scratch under BF16 (cuda_mvit.h's vt_cuda_mvit_scratch16): S and dP
 * float, then P and dS bf16, each (B, bq, Lk). */
static float *scratch16(vt_backend *be, cu_ctx *cx, const vt_cuk_mvgeo *g, int B) {
    return vt_cuda_grow(be, &cx->attn, &cx->attn_bytes,
                        (size_t)vt_cuda_mvit_scratch16(g->Lq, g->Lk, B), "attention logits");
}

/* The forward as the FP32 one; O_b = P V in float (the backend's scratch, B bq D floats),
 * then out = O_b (+ q) rounded once by the block's end kernel. */
static void mv16_forward(vt_backend *be, cu_ctx *cx, float *out, float *lse, const float *q,
                         const float *k, const float *v, const float *rh, const float *rw,
                         const float *rt, int n, int H, const vt_cuk_mvgeo *g, int residual) {
    const int D = g->D;
    const mv_walk w = walk(n, H, g->Lq, g->Lk, D);
    const int bq = block_queries(g->Lq, g->Lk, w.B);
    const int64_t blk = (int64_t)w.B * bq * g->Lk, C = (int64_t)H * D;
    float *s = scratch16(be, cx, g, w.B);
    uint16_t *p16 = (uint16_t *)(void *)(s + 2 * blk);
    float *ob = vt_cuda_grow(be, &cx->scratch, &cx->scratch_bytes,
                             (size_t)w.B * (size_t)bq * (size_t)D * sizeof(float), "cuda scratch");
    const float scale = (float)(1.0 / sqrt((double)D));
    const uint16_t *q16 = (const uint16_t *)(const void *)q;
    const uint16_t *k16 = (const uint16_t *)(const void *)k;
    const uint16_t *v16 = (const uint16_t *)(const void *)v;
    for (int u = 0; u < w.U; u++) {
        const uint16_t *qu = q16 + u * w.u_l * D, *ku = k16 + u * w.u_k, *vu = v16 + u * w.u_k;
        uint16_t *o = (uint16_t *)(void *)out + u * w.u_o;
        float *ls = lse + u * w.u_l;
        for (int i0 = 0; i0 < g->Lq; i0 += bq) {
            const int b = VT_MIN(bq, g->Lq - i0);
            logits16(cx, s, qu, ku, i0, b, g, &w, scale);
            vt_cuk_mvit_softmax(cx->stream, VT_CUK_BF16, s, p16, ls, qu, rh, rw, rt, g, w.B, b,
                                i0, w.b_l);
            /* O_b^T (D, b) = V^T (D, Lk) P^T (Lk, b), float, O_b's rows D apart */
            vt_cu_gemm16_b(cx, CUBLAS_OP_N, CUBLAS_OP_N, D, b, g->Lk, 1.0f, vu, D, w.b_k, p16,
                           g->Lk, (int64_t)b * g->Lk, 0.0f, ob, CUDA_R_32F, D, (int64_t)b * D, w.B);
            vt_cuk_mvit_out16(cx->stream, o, ob, qu, g, w.B, b, i0, w.b_l, w.b_o, C, residual);
        }
    }
}

/* The backward as the FP32 one: S and dP float, P and dS bf16 for the three GEMMs; dQ_b
 * float in the scratch, finished and rounded per block (vt_cuk_mvit_dq16); dK and dV
 * summed over the blocks in float scratch (B Lk D floats each) and rounded once at the
 * end of the walk step; the tables' gradients from the float row sums. The backend's
 * scratch: [row sums | table partials | dQ_b | dK sums | dV sums]. */
static void mv16_backward(vt_backend *be, cu_ctx *cx, float *dq, float *dk, float *dv,
                          float *drh, float *drw, float *drt, const float *dout, const float *q,
                          const float *k, const float *v, const float *rh, const float *rw,
                          const float *rt, const float *lse, int n, int H,
                          const vt_cuk_mvgeo *g, int residual) {
    const int D = g->D;
    const mv_walk w = walk(n, H, g->Lq, g->Lk, D);
    const int bq = block_queries(g->Lq, g->Lk, w.B);
    const int64_t blk = (int64_t)w.B * bq * g->Lk, C = (int64_t)H * D;
    const int64_t LD = (int64_t)g->Lk * D, nq = (int64_t)w.B * bq * D;
    float *s = scratch16(be, cx, g, w.B), *dp = s + blk;
    uint16_t *p16 = (uint16_t *)(void *)(dp + blk), *ds16 = p16 + blk;
    const int64_t rb = rel_bytes(n, H, g);
    char *base = vt_cuda_grow(be, &cx->scratch, &cx->scratch_bytes,
                              (size_t)rb + (size_t)(nq + 2 * w.B * LD) * sizeof(float),
                              "cuda scratch");
    float *arow = g->rel ? (float *)(void *)base : NULL;
    double *rpart = g->rel ? (double *)(void *)(arow + rel_floats(n, H, g)) : NULL;
    float *dqb = (float *)(void *)(base + rb), *ak = dqb + nq, *av = ak + w.B * LD;
    const float scale = (float)(1.0 / sqrt((double)D));
    const uint16_t *q16 = (const uint16_t *)(const void *)q;
    const uint16_t *k16 = (const uint16_t *)(const void *)k;
    const uint16_t *v16 = (const uint16_t *)(const void *)v;
    const uint16_t *g16 = (const uint16_t *)(const void *)dout;
    uint16_t *dq16 = (uint16_t *)(void *)dq, *dk16 = (uint16_t *)(void *)dk,
             *dv16 = (uint16_t *)(void *)dv;
    for (int u = 0; u < w.U; u++) {
        const uint16_t *qu = q16 + u * w.u_l * D, *ku = k16 + u * w.u_k, *vu = v16 + u * w.u_k;
        const uint16_t *dO = g16 + u * w.u_o;
        const float *ls = lse + u * w.u_l;
        float *ar = arow ? arow + u * w.u_l * g->KK : NULL;
        for (int i0 = 0; i0 < g->Lq; i0 += bq) {
            const int b = VT_MIN(bq, g->Lq - i0);
            const int64_t sb = (int64_t)b * g->Lk, lq = w.b_l * D;
            const float beta = i0 ? 1.0f : 0.0f; /* the dK, dV sums: the first block writes */
            logits16(cx, s, qu, ku, i0, b, g, &w, scale);
            /* dP^T (Lk, b) = V (Lk, D) dO_b^T (D, b), float */
            vt_cu_gemm16_b(cx, CUBLAS_OP_T, CUBLAS_OP_N, g->Lk, b, D, 1.0f, vu, D, w.b_k,
                           dO + i0 * C, C, w.b_o, 0.0f, dp, CUDA_R_32F, g->Lk, sb, w.B);
            vt_cuk_mvit_ds(cx->stream, VT_CUK_BF16, s, dp, p16, ds16, ar, ls, qu, rh, rw, rt, g,
                           w.B, b, i0, w.b_l);
            /* dV^T (D, Lk) += dO_b^T (D, b) P (b, Lk) */
            vt_cu_gemm16_b(cx, CUBLAS_OP_N, CUBLAS_OP_T, D, g->Lk, b, 1.0f, dO + i0 * C, C, w.b_o,
                           p16, g->Lk, sb, beta, av, CUDA_R_32F, D, LD, w.B);
            /* dQ_b^T (D, b) = scale K^T (D, Lk) dS^T (Lk, b), then its other terms */
            vt_cu_gemm16_b(cx, CUBLAS_OP_N, CUBLAS_OP_N, D, b, g->Lk, scale, ku, D, w.b_k, ds16,
                           g->Lk, sb, 0.0f, dqb, CUDA_R_32F, D, (int64_t)b * D, w.B);
            vt_cuk_mvit_dq16(cx->stream, dq16 + u * w.u_l * D, dqb, ar, dO, rh, rw, rt, g, w.B, b,
                             i0, w.b_l, w.b_o, C, residual);
            /* dK^T (D, Lk) += scale Q_b^T (D, b) dS (b, Lk) */
            vt_cu_gemm16_b(cx, CUBLAS_OP_N, CUBLAS_OP_T, D, g->Lk, b, scale, qu + (int64_t)i0 * D,
                           D, lq, ds16, g->Lk, sb, beta, ak, CUDA_R_32F, D, LD, w.B);
        }
        vt_cuk_attn_store16(cx->stream, dk16 + u * w.u_k, ak, w.B, g->Lk, D, w.b_k, D);
        vt_cuk_attn_store16(cx->stream, dv16 + u * w.u_k, av, w.B, g->Lk, D, w.b_k, D);
    }
    vt_cuk_mvit_rel_grad(cx->stream, VT_CUK_BF16, drh, drw, drt, arow, q, n, H, g, rpart);
}

/* ---------------------------------------------------------------- attention, entry ---- */

void vt_cuda_mvit_attention_forward(vt_backend *be, float *out, float *lse, const float *q,
                                    const float *k, const float *v, const float *rh,
                                    const float *rw, const float *rt, int n, int H, int D,
                                    const int qthw[3], const int kthw[3], int residual) {
    cu_ctx *cx = enter(be);
    if (n <= 0)
        return;
    const vt_cuk_mvgeo g = geometry(qthw, kthw, D, rh);
    if (cx->bf16) {
        mv16_forward(be, cx, out, lse, q, k, v, rh, rw, rt, n, H, &g, residual);
        return;
    }
    const mv_walk w = walk(n, H, g.Lq, g.Lk, D);
    const int bq = block_queries(g.Lq, g.Lk, w.B);
    float *s = vt_cuda_grow(be, &cx->attn, &cx->attn_bytes,
                            (size_t)vt_cuda_mvit_scratch_bound(g.Lq, g.Lk, w.B),
                            "attention logits");
    const int64_t C = (int64_t)H * D;
    const float scale = (float)(1.0 / sqrt((double)D));
    for (int u = 0; u < w.U; u++) {
        const float *qu = q + u * w.u_l * D, *ku = k + u * w.u_k, *vu = v + u * w.u_k;
        float *o = out + u * w.u_o, *ls = lse + u * w.u_l;
        for (int i0 = 0; i0 < g.Lq; i0 += bq) {
            const int b = VT_MIN(bq, g.Lq - i0);
            logits(cx, s, qu, ku, i0, b, &g, &w, scale);
            vt_cuk_mvit_softmax(cx->stream, VT_CUK_F32, s, s, ls, qu, rh, rw, rt, &g, w.B, b, i0,
                                w.b_l);
            /* O_b^T (D, b) = V^T (D, Lk) P^T (Lk, b), O's rows C apart */
            vt_cu_gemm_b(cx, CUBLAS_OP_N, CUBLAS_OP_N, D, b, g.Lk, 1.0f, vu, D, w.b_k, s, g.Lk,
                   (int64_t)b * g.Lk, 0.0f, o + i0 * C, C, w.b_o, w.B);
        }
    }
    if (residual)
        vt_cuk_mvit_residual(cx->stream, out, q, n, H, &g);
}

void vt_cuda_mvit_attention_backward(vt_backend *be, float *dq, float *dk, float *dv, float *drh,
                                     float *drw, float *drt, const float *dout, const float *q,
                                     const float *k, const float *v, const float *rh,
                                     const float *rw, const float *rt, const float *lse, int n,
                                     int H, int D, const int qthw[3], const int kthw[3],
                                     int residual) {
    cu_ctx *cx = enter(be);
    if (n <= 0)
        return;
    const vt_cuk_mvgeo g = geometry(qthw, kthw, D, rh);
    if (cx->bf16) {
        mv16_backward(be, cx, dq, dk, dv, drh, drw, drt, dout, q, k, v, rh, rw, rt, lse, n, H,
                      &g, residual);
        return;
    }
    const mv_walk w = walk(n, H, g.Lq, g.Lk, D);
    const int bq = block_queries(g.Lq, g.Lk, w.B);
    float *s = vt_cuda_grow(be, &cx->attn, &cx->attn_bytes,
                            (size_t)vt_cuda_mvit_scratch_bound(g.Lq, g.Lk, w.B),
                            "attention logits");
    float *dp = s + (int64_t)w.B * bq * g.Lk;
    /* the scratch: every row's relative row sums (floats), then the tables' partials */
    float *arow = NULL;
    double *rpart = NULL;
    if (g.rel) {
        const int64_t na = rel_floats(n, H, &g);
        arow = vt_cuda_grow(be, &cx->scratch, &cx->scratch_bytes, (size_t)rel_bytes(n, H, &g),
                            "cuda scratch");
        rpart = (double *)(arow + na);
    }
    const int64_t C = (int64_t)H * D;
    const float scale = (float)(1.0 / sqrt((double)D));
    for (int u = 0; u < w.U; u++) {
        const float *qu = q + u * w.u_l * D, *ku = k + u * w.u_k, *vu = v + u * w.u_k;
        float *dqu = dq + u * w.u_l * D, *dku = dk + u * w.u_k, *dvu = dv + u * w.u_k;
        const float *dO = dout + u * w.u_o, *ls = lse + u * w.u_l;
        float *ar = arow ? arow + u * w.u_l * g.KK : NULL;
        for (int i0 = 0; i0 < g.Lq; i0 += bq) {
            const int b = VT_MIN(bq, g.Lq - i0);
            const int64_t sb = (int64_t)b * g.Lk, lq = w.b_l * D;
            const float acc = i0 ? 1.0f : 0.0f; /* dK, dV: the first block writes */
            logits(cx, s, qu, ku, i0, b, &g, &w, scale);
            /* dP^T (Lk, b) = V (Lk, D) dO_b^T (D, b) */
            vt_cu_gemm_b(cx, CUBLAS_OP_T, CUBLAS_OP_N, g.Lk, b, D, 1.0f, vu, D, w.b_k, dO + i0 * C, C,
                   w.b_o, 0.0f, dp, g.Lk, sb, w.B);
            vt_cuk_mvit_ds(cx->stream, VT_CUK_F32, s, dp, s, dp, ar, ls, qu, rh, rw, rt, &g, w.B, b,
                           i0, w.b_l);
            /* dV^T (D, Lk) += dO_b^T (D, b) P (b, Lk) */
            vt_cu_gemm_b(cx, CUBLAS_OP_N, CUBLAS_OP_T, D, g.Lk, b, 1.0f, dO + i0 * C, C, w.b_o, s,
                   g.Lk, sb, acc, dvu, D, w.b_k, w.B);
            /* dQ_b^T (D, b) = scale K^T (D, Lk) dS^T (Lk, b) */
            vt_cu_gemm_b(cx, CUBLAS_OP_N, CUBLAS_OP_N, D, b, g.Lk, scale, ku, D, w.b_k, dp, g.Lk, sb,
                   0.0f, dqu + (int64_t)i0 * D, D, lq, w.B);
            /* dK^T (D, Lk) += scale Q_b^T (D, b) dS (b, Lk) */
            vt_cu_gemm_b(cx, CUBLAS_OP_N, CUBLAS_OP_T, D, g.Lk, b, scale, qu + (int64_t)i0 * D, D, lq,
                   dp, g.Lk, sb, acc, dku, D, w.b_k, w.B);
        }
    }
    vt_cuk_mvit_dq_fix(cx->stream, dq, arow, dout, rh, rw, rt, n, H, &g, residual);
    vt_cuk_mvit_rel_grad(cx->stream, VT_CUK_F32, drh, drw, drt, arow, q, n, H, &g, rpart);
}

/* ---------------------------------------------------------------- token max pool ---- */

void vt_cuda_token_maxpool_forward(vt_backend *be, float *out, const float *in, int n, int c,
                                   const int thw[3], const vt_pool3d_p *p) {
    const vt_cuk_pool k = pool_of(thw, p, 1);
    cu_ctx *cx = enter(be);
    vt_cuk_token_maxpool_fwd(cx->stream, DT(cx), out, in, n, c, &k);
}
void vt_cuda_token_maxpool_backward(vt_backend *be, float *din, const float *dout,
                                    const float *in, int n, int c, const int thw[3],
                                    const vt_pool3d_p *p) {
    cu_ctx *cx = enter(be);
    if (n <= 0 || !din)
        return;
    const vt_cuk_pool k = pool_of(thw, p, 1);
    const size_t need = (size_t)n * (size_t)(k.out[0] * k.out[1] * k.out[2]) * (size_t)c *
                        sizeof(int);
    int *arg = vt_cuda_grow(be, &cx->scratch, &cx->scratch_bytes, VT_MAX(need, sizeof(int)),
                            "cuda scratch");
    vt_cuk_token_maxpool_bwd(cx->stream, DT(cx), din, dout, in, n, c, &k, arg);
}
