/*
 * cuda_attn.c: the transformer ops of the CUDA backend (backend.h's transformer section;
 * the slots VT_CUDA_ATTN_SLOTS puts into backend_cuda.c's table): LayerNorm, GELU,
 * multi-head attention, the token transpose and mean, the broadcast add and its gradient,
 * per-clip scaling. The arithmetic is in kernels_attn.cu and kernels_tokens.cu (each
 * kernel's exactness against cpu-ref is stated there); this file holds the host side:
 * scratch and attention's cuBLAS GEMMs. Under TF32 the attention GEMMs may use TF32 like
 * the linear ones (the cuBLAS handle's math mode, backend.h). BF16 (the CPU backends have
 * none for these ops: net_vit.c refuses them there): every op reads and writes bf16
 * activations as the CNN ops do (kernels.h's _dt launchers), and attention runs
 * attn16_forward / attn16_backward below: the same walk and query blocks, GEMMs in
 * cublasGemmStridedBatchedEx (bf16 A, B; CUBLAS_COMPUTE_32F) with flash attention's
 * rounding points (docs/precision.md "bf16 for the transformers"), checked without a
 * GPU by tests/oracle/cuda_attn_emu_bf16.py.
 *
 * Attention, on blocks of bq queries (cuda_attn.h), each GEMM batching B (clip, head)
 * pairs a fixed stride apart (the heads of a clip, or one head of every clip: attn_walk;
 * cuBLAS is column-major, so a row-major (r, c) matrix with row stride ld is read as its
 * column-major transpose with leading dimension ld):
 *   forward:  S = scale Q_b K^T                 (B, bq, L)  GEMM
 *             P = softmax rows, lse              kernel
 *             O_b = P V                          GEMM
 *   backward: S again, dP = dO_b V^T            two GEMMs
 *             P = exp(S - lse), dS = P (dP - delta) scale   kernel
 *             dV += P^T dO_b, dQ_b = dS K, dK += dS^T Q_b   three GEMMs (the first
 *             block writes dK, dV with beta 0, the later ones add with beta 1).
 * cuBLAS's results are bitwise repeatable on one GPU model (its documented determinism:
 * one stream, our own fixed workspace), so the whole op is; against cpu-ref the float
 * sums of the GEMMs (D or L products, against cpu-ref's double sums) dominate: NMSE
 * ~1e-13 on out and the gradients (tests/test_vit_gpu.c).
 * The GEMM arguments were checked, before any GPU ran them, by tests/oracle/cuda_attn_emu.py
 * (cuBLAS's column-major strided-batched call emulated in numpy, both walks, several
 * block sizes, against PyTorch's autograd).
 * cuDNN's fused attention (flash) is not used: its SDPA takes fp16, bf16 or fp8 only (its
 * support matrix); under BF16 it could become the fast path where its check_support
 * accepts the shape, with attn16_* as the fallback (not done; tests/test_cudnn_sdpa_gpu.c
 * probes which shapes it would take).
 */
#include <math.h>
#include <stdlib.h>

#include "base/common.h"
#include "models/cuda/backend_cuda_impl.h"
#include "models/cuda/cuda_attn.h"
#include "models/cuda/cuda_check.h"
#include "models/cuda/kernels.h"

/* Every op starts here: the device made current. */
static cu_ctx *enter(vt_backend *be) { return vt_cuda_enter(be); }
/* The activation type of the kernels: bf16 under BF16 (backend.h's [A] arrays). */
#define DT(c) ((c)->bf16 ? VT_CUK_BF16 : VT_CUK_F32)

/* ---------------------------------------------------------------- layernorm, gelu ---- */

void vt_cuda_layernorm_forward(vt_backend *be, float *out, float *mean, float *invstd,
                               const float *x, const float *gamma, const float *beta,
                               int64_t rows, int c, float eps) {
    cu_ctx *cx = enter(be);
    vt_cuk_layernorm_forward_dt(cx->stream, DT(cx), out, mean, invstd, x, gamma, beta, rows, c,
                                eps);
}

void vt_cuda_layernorm_backward(vt_backend *be, float *din, float *dgamma, float *dbeta,
                                const float *dout, const float *x, const float *mean,
                                const float *invstd, const float *gamma, int64_t rows, int c) {
    cu_ctx *cx = enter(be);
    if (rows <= 0 || c <= 0)
        return;
    double *part = NULL;
    if (dgamma || dbeta) {
        const size_t need = 2 * (size_t)vt_cuk_colsum_parts(rows, c) * (size_t)c * sizeof(double);
        part = vt_cuda_grow(be, &cx->scratch, &cx->scratch_bytes, need, "cuda scratch");
    }
    vt_cuk_layernorm_backward_dt(cx->stream, DT(cx), din, dgamma, dbeta, dout, x, mean, invstd,
                                 gamma, rows, c, part);
}

void vt_cuda_gelu_forward(vt_backend *be, float *out, const float *in, int64_t n) {
    cu_ctx *cx = enter(be);
    vt_cuk_gelu_forward_dt(cx->stream, DT(cx), out, in, n);
}
void vt_cuda_gelu_backward(vt_backend *be, float *din, const float *dout, const float *in,
                           int64_t n) {
    cu_ctx *cx = enter(be);
    vt_cuk_gelu_backward_dt(cx->stream, DT(cx), din, dout, in, n);
}

/* ---------------------------------------------------------------- attention ---- */

/* backend_cuda_impl.h; cuda_mvit.c's attention uses it too */
void vt_cu_gemm_b(cu_ctx *cx, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                  float alpha, const float *a, int64_t lda, int64_t sa, const float *b,
                  int64_t ldb, int64_t sb, float beta, float *c, int64_t ldc, int64_t sc,
                  int batch) {
    CUBLAS_CHECK(cublasSgemmStridedBatched(cx->cublas, ta, tb, m, n, k, &alpha, a, (int)lda,
                                           (long long)sa, b, (int)ldb, (long long)sb, &beta, c,
                                           (int)ldc, (long long)sc, batch));
}

/* How the (clip, head) pairs are walked. One GEMM batches B members that sit a fixed stride
 * apart — the H heads of a clip (D floats apart in qkv's rows), or one head of the N clips
 * (a clip's L rows apart) — and the host loops over the other U: the larger of N and H is
 * batched, so a big batch of short clips costs H launches a GEMM, not N. The u_ fields
 * step the loop, the b_ fields the batch, in qkv (rows of 3HD), out (rows of HD) and lse
 * ((N, H, L)). */
typedef struct attn_walk {
    int U, B;
    int64_t u_qkv, u_o, u_lse, b_qkv, b_o, b_lse;
} attn_walk;

static attn_walk walk(int n, int L, int H, int D) {
    const int64_t ld3 = 3LL * H * D, hd = (int64_t)H * D;
    attn_walk w;
    if (n > H) /* batch the clips, loop over the heads */
        w = (attn_walk){H, n, D, D, L, L * ld3, L * hd, (int64_t)H * L};
    else /* batch the heads, loop over the clips */
        w = (attn_walk){n, H, L * ld3, L * hd, (int64_t)H * L, D, D, L};
    return w;
}

/* Queries per block: cuda_attn.h's, or fewer when VT_CUDA_ATTN_BQ (a test switch:
 * tests/test_vit_gpu.c makes a small L take several blocks) asks for fewer. The scratch
 * is always vt_cuda_attn_scratch_bound's, which fewer queries never pass. */
static int block_queries(int L, int B) {
    int bq = vt_cuda_attn_bq(L, B);
    const char *e = getenv("VT_CUDA_ATTN_BQ");
    const int want = e && *e ? atoi(e) : 0;
    return want > 0 && want < bq ? want : bq;
}

/* The two logits blocks (S, dP) of this shape in the backend's attention scratch. */
static float *attn_scratch(vt_backend *be, cu_ctx *cx, int L, int B) {
    return vt_cuda_grow(be, &cx->attn, &cx->attn_bytes,
                        (size_t)vt_cuda_attn_scratch_bound(L, B), "attention logits");
}

/* S (B, bq, L) = scale * Q_b K^T for queries [i0, i0 + bq) of the walk's members (q, k:
 * member 0's first q and k element). */
static void logits(cu_ctx *cx, float *s, const float *q, const float *k, int i0, int bq, int L,
                   int64_t ld3, int D, const attn_walk *w, float scale) {
    vt_cu_gemm_b(cx, CUBLAS_OP_T, CUBLAS_OP_N, L, bq, D, scale, k, ld3, w->b_qkv, q + i0 * ld3, ld3,
           w->b_qkv, 0.0f, s, L, (int64_t)bq * L, w->B);
}

/* ---------------------------------------------------------------- attention, BF16 ---- */

/* backend_cuda_impl.h; cuda_mvit.c's attention uses it too. C of type ct: CUDA_R_32F for
 * the logits S and dP and the dK/dV accumulators, CUDA_R_16BF for out, dQ, dK, dV. */
void vt_cu_gemm16_b(cu_ctx *cx, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                    float alpha, const uint16_t *a, int64_t lda, int64_t sa, const uint16_t *b,
                    int64_t ldb, int64_t sb, float beta, void *c, cudaDataType_t ct, int64_t ldc,
                    int64_t sc, int batch) {
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        cx->cublas, ta, tb, m, n, k, &alpha, a, CUDA_R_16BF, (int)lda, (long long)sa, b,
        CUDA_R_16BF, (int)ldb, (long long)sb, &beta, c, ct, (int)ldc, (long long)sc, batch,
        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* S (nb, bq, L) float = scale * Q_b K^T (bf16 q, k: member 0's first element). */
static void logits16(cu_ctx *cx, float *s, const uint16_t *q, const uint16_t *k, int i0, int bq,
                     int L, int64_t ld3, int D, int64_t b_qkv, int nb, float scale) {
    vt_cu_gemm16_b(cx, CUBLAS_OP_T, CUBLAS_OP_N, L, bq, D, scale, k, ld3, b_qkv, q + i0 * ld3, ld3,
                   b_qkv, 0.0f, s, CUDA_R_32F, L, (int64_t)bq * L, nb);
}

/* The forward as the FP32 one, with flash attention's rounding points: the logits and
 * softmax in float, P rounded to bf16 for the P V GEMM, out rounded once. */
static void attn16_forward(vt_backend *be, cu_ctx *cx, float *out, float *lse, const float *qkv,
                           int n, int L, int H, int D) {
    const attn_walk w = walk(n, L, H, D);
    const int bq = block_queries(L, w.B);
    float *s = vt_cuda_grow(be, &cx->attn, &cx->attn_bytes,
                            (size_t)vt_cuda_attn_scratch16(L, w.B, D, bq), "attention logits");
    uint16_t *p16 = (uint16_t *)(s + (int64_t)w.B * bq * L);
    const int64_t ld3 = 3LL * H * D, hd = (int64_t)H * D;
    const float scale = (float)(1.0 / sqrt((double)D));
    const uint16_t *x = (const uint16_t *)(const void *)qkv;
    uint16_t *o16 = (uint16_t *)(void *)out;
    for (int u = 0; u < w.U; u++) {
        const uint16_t *q = x + u * w.u_qkv, *v = q + 2 * hd;
        uint16_t *o = o16 + u * w.u_o;
        float *ls = lse + u * w.u_lse;
        for (int i0 = 0; i0 < L; i0 += bq) {
            const int b = VT_MIN(bq, L - i0);
            logits16(cx, s, q, q + hd, i0, b, L, ld3, D, w.b_qkv, w.B, scale);
            vt_cuk_attn_softmax_dt(cx->stream, VT_CUK_BF16, s, p16, ls + i0, (int64_t)w.B * b, L,
                                   b, w.b_lse);
            vt_cu_gemm16_b(cx, CUBLAS_OP_N, CUBLAS_OP_N, D, b, L, 1.0f, v, ld3, w.b_qkv, p16, L,
                           (int64_t)b * L, 0.0f, o + i0 * hd, CUDA_R_16BF, hd, w.b_o, w.B);
        }
    }
}

/* The backward as the FP32 one: S and dP in float, P and dS rounded to bf16 for the three
 * gradient GEMMs, dQ rounded once; dK and dV rounded once, straight from the GEMM with
 * one query block, else from float accumulators (cuda_attn.h), for groups of members. */
static void attn16_backward(vt_backend *be, cu_ctx *cx, float *dqkv, const float *dout,
                            const float *qkv, const float *out, const float *lse, int n, int L,
                            int H, int D) {
    const attn_walk w = walk(n, L, H, D);
    const int bq = block_queries(L, w.B), multi = bq < L;
    const int64_t blk = (int64_t)w.B * bq * L;
    float *s = vt_cuda_grow(be, &cx->attn, &cx->attn_bytes,
                            (size_t)vt_cuda_attn_scratch16(L, w.B, D, bq), "attention logits");
    float *dp = s + blk, *acc = dp + blk + blk; /* after the two bf16 blocks */
    uint16_t *p16 = (uint16_t *)(dp + blk), *ds16 = p16 + blk;
    const int G = multi ? vt_cuda_attn_acc_members(L, D, w.B) : w.B;
    const int64_t ld3 = 3LL * H * D, hd = (int64_t)H * D, LD = (int64_t)L * D;
    const float scale = (float)(1.0 / sqrt((double)D));
    const uint16_t *x = (const uint16_t *)(const void *)qkv;
    const uint16_t *g16 = (const uint16_t *)(const void *)dout;
    const uint16_t *o16 = (const uint16_t *)(const void *)out;
    uint16_t *dx = (uint16_t *)(void *)dqkv;
    for (int u = 0; u < w.U; u++)
        for (int m0 = 0; m0 < w.B; m0 += G) {
            const int nb = VT_MIN(G, w.B - m0);
            const uint16_t *q = x + u * w.u_qkv + m0 * w.b_qkv, *k = q + hd, *v = q + 2 * hd;
            uint16_t *dq = dx + u * w.u_qkv + m0 * w.b_qkv, *dk = dq + hd, *dv = dq + 2 * hd;
            const uint16_t *dO = g16 + u * w.u_o + m0 * w.b_o, *O = o16 + u * w.u_o + m0 * w.b_o;
            const float *ls = lse + u * w.u_lse + m0 * w.b_lse;
            float *ak = acc, *av = acc + nb * LD;
            for (int i0 = 0; i0 < L; i0 += bq) {
                const int b = VT_MIN(bq, L - i0);
                const int64_t sb = (int64_t)b * L;
                const float beta = i0 ? 1.0f : 0.0f; /* the accumulators: the first block writes */
                logits16(cx, s, q, k, i0, b, L, ld3, D, w.b_qkv, nb, scale);
                /* dP^T (L, b) = V (L, D) dO_b^T (D, b), float */
                vt_cu_gemm16_b(cx, CUBLAS_OP_T, CUBLAS_OP_N, L, b, D, 1.0f, v, ld3, w.b_qkv,
                               dO + i0 * hd, hd, w.b_o, 0.0f, dp, CUDA_R_32F, L, sb, nb);
                vt_cuk_attn_ds_dt(cx->stream, VT_CUK_BF16, s, dp, p16, ds16, ls + i0,
                                  dO + i0 * hd, O + i0 * hd, (int64_t)nb * b, L, b, D, hd, w.b_o,
                                  w.b_lse, scale);
                /* dV^T (D, L) += dO_b^T (D, b) P (b, L) */
                if (multi)
                    vt_cu_gemm16_b(cx, CUBLAS_OP_N, CUBLAS_OP_T, D, L, b, 1.0f, dO + i0 * hd, hd,
                                   w.b_o, p16, L, sb, beta, av, CUDA_R_32F, D, LD, nb);
                else
                    vt_cu_gemm16_b(cx, CUBLAS_OP_N, CUBLAS_OP_T, D, L, b, 1.0f, dO + i0 * hd, hd,
                                   w.b_o, p16, L, sb, 0.0f, dv, CUDA_R_16BF, ld3, w.b_qkv, nb);
                /* dQ_b^T (D, b) = K^T (D, L) dS^T (L, b) (the scale is in dS) */
                vt_cu_gemm16_b(cx, CUBLAS_OP_N, CUBLAS_OP_N, D, b, L, 1.0f, k, ld3, w.b_qkv, ds16,
                               L, sb, 0.0f, dq + i0 * ld3, CUDA_R_16BF, ld3, w.b_qkv, nb);
                /* dK^T (D, L) += Q_b^T (D, b) dS (b, L) */
                if (multi)
                    vt_cu_gemm16_b(cx, CUBLAS_OP_N, CUBLAS_OP_T, D, L, b, 1.0f, q + i0 * ld3, ld3,
                                   w.b_qkv, ds16, L, sb, beta, ak, CUDA_R_32F, D, LD, nb);
                else
                    vt_cu_gemm16_b(cx, CUBLAS_OP_N, CUBLAS_OP_T, D, L, b, 1.0f, q + i0 * ld3, ld3,
                                   w.b_qkv, ds16, L, sb, 0.0f, dk, CUDA_R_16BF, ld3, w.b_qkv, nb);
            }
            if (multi) {
                vt_cuk_attn_store16(cx->stream, dk, ak, nb, L, D, w.b_qkv, ld3);
                vt_cuk_attn_store16(cx->stream, dv, av, nb, L, D, w.b_qkv, ld3);
            }
        }
}

void vt_cuda_attention_forward(vt_backend *be, float *out, float *lse, const float *qkv, int n,
                               int L, int H, int D) {
    cu_ctx *cx = enter(be);
    if (n <= 0 || L <= 0)
        return;
    if (cx->bf16) {
        attn16_forward(be, cx, out, lse, qkv, n, L, H, D);
        return;
    }
    const attn_walk w = walk(n, L, H, D);
    const int bq = block_queries(L, w.B);
    float *s = attn_scratch(be, cx, L, w.B);
    const int64_t ld3 = 3LL * H * D, hd = (int64_t)H * D;
    const float scale = (float)(1.0 / sqrt((double)D));
    for (int u = 0; u < w.U; u++) {
        const float *q = qkv + u * w.u_qkv, *v = q + 2 * hd;
        float *o = out + u * w.u_o, *ls = lse + u * w.u_lse;
        for (int i0 = 0; i0 < L; i0 += bq) {
            const int b = VT_MIN(bq, L - i0);
            logits(cx, s, q, q + hd, i0, b, L, ld3, D, &w, scale);
            vt_cuk_attn_softmax(cx->stream, s, ls + i0, (int64_t)w.B * b, L, b, w.b_lse);
            /* O_b^T (D, b) = V^T (D, L) P^T (L, b) */
            vt_cu_gemm_b(cx, CUBLAS_OP_N, CUBLAS_OP_N, D, b, L, 1.0f, v, ld3, w.b_qkv, s, L,
                   (int64_t)b * L, 0.0f, o + i0 * hd, hd, w.b_o, w.B);
        }
    }
}

void vt_cuda_attention_backward(vt_backend *be, float *dqkv, const float *dout, const float *qkv,
                                const float *out, const float *lse, int n, int L, int H, int D) {
    cu_ctx *cx = enter(be);
    if (n <= 0 || L <= 0 || !dqkv)
        return;
    if (cx->bf16) {
        attn16_backward(be, cx, dqkv, dout, qkv, out, lse, n, L, H, D);
        return;
    }
    const attn_walk w = walk(n, L, H, D);
    const int bq = block_queries(L, w.B);
    float *s = attn_scratch(be, cx, L, w.B), *dp = s + (int64_t)w.B * bq * L;
    const int64_t ld3 = 3LL * H * D, hd = (int64_t)H * D;
    const float scale = (float)(1.0 / sqrt((double)D));
    for (int u = 0; u < w.U; u++) {
        const float *q = qkv + u * w.u_qkv, *k = q + hd, *v = q + 2 * hd;
        float *dq = dqkv + u * w.u_qkv, *dk = dq + hd, *dv = dq + 2 * hd;
        const float *dO = dout + u * w.u_o, *O = out + u * w.u_o, *ls = lse + u * w.u_lse;
        for (int i0 = 0; i0 < L; i0 += bq) {
            const int b = VT_MIN(bq, L - i0);
            const int64_t sb = (int64_t)b * L;
            const float acc = i0 ? 1.0f : 0.0f; /* dK, dV: the first block writes */
            logits(cx, s, q, k, i0, b, L, ld3, D, &w, scale);
            /* dP^T (L, b) = V (L, D) dO_b^T (D, b) */
            vt_cu_gemm_b(cx, CUBLAS_OP_T, CUBLAS_OP_N, L, b, D, 1.0f, v, ld3, w.b_qkv, dO + i0 * hd, hd,
                   w.b_o, 0.0f, dp, L, sb, w.B);
            vt_cuk_attn_ds(cx->stream, s, dp, ls + i0, dO + i0 * hd, O + i0 * hd,
                           (int64_t)w.B * b, L, b, D, hd, w.b_o, w.b_lse, scale);
            /* dV^T (D, L) += dO_b^T (D, b) P (b, L) */
            vt_cu_gemm_b(cx, CUBLAS_OP_N, CUBLAS_OP_T, D, L, b, 1.0f, dO + i0 * hd, hd, w.b_o, s, L, sb,
                   acc, dv, ld3, w.b_qkv, w.B);
            /* dQ_b^T (D, b) = K^T (D, L) dS^T (L, b) (the scale is in dS) */
            vt_cu_gemm_b(cx, CUBLAS_OP_N, CUBLAS_OP_N, D, b, L, 1.0f, k, ld3, w.b_qkv, dp, L, sb, 0.0f,
                   dq + i0 * ld3, ld3, w.b_qkv, w.B);
            /* dK^T (D, L) += Q_b^T (D, b) dS (b, L) */
            vt_cu_gemm_b(cx, CUBLAS_OP_N, CUBLAS_OP_T, D, L, b, 1.0f, q + i0 * ld3, ld3, w.b_qkv, dp, L,
                   sb, acc, dk, ld3, w.b_qkv, w.B);
        }
    }
}

/* ---------------------------------------------------------------- token plumbing ---- */

void vt_cuda_transpose(vt_backend *be, float *out, const float *in, int n, int a, int b) {
    cu_ctx *cx = enter(be);
    vt_cuk_transpose_dt(cx->stream, DT(cx), out, in, n, a, b);
}
void vt_cuda_token_mean_forward(vt_backend *be, float *out, const float *in, int n, int L,
                                int c) {
    cu_ctx *cx = enter(be);
    vt_cuk_token_mean_forward_dt(cx->stream, DT(cx), out, in, n, L, c);
}
void vt_cuda_token_mean_backward(vt_backend *be, float *din, const float *dout, int n, int L,
                                 int c) {
    cu_ctx *cx = enter(be);
    vt_cuk_token_mean_backward_dt(cx->stream, DT(cx), din, dout, n, L, c);
}
void vt_cuda_add_bcast(vt_backend *be, float *out, const float *in, const float *pos, int n,
                       int64_t per) {
    cu_ctx *cx = enter(be);
    vt_cuk_add_bcast_dt(cx->stream, DT(cx), out, in, pos, n, per);
}
void vt_cuda_add_bcast_backward(vt_backend *be, float *dpos, const float *dout, int n,
                                int64_t per) {
    cu_ctx *cx = enter(be);
    if (n <= 0 || per <= 0)
        return;
    const size_t need = (size_t)vt_cuk_colsum_parts(n, per) * (size_t)per * sizeof(double);
    double *part = vt_cuda_grow(be, &cx->scratch, &cx->scratch_bytes, need, "cuda scratch");
    vt_cuk_colsum_acc_parts_dt(cx->stream, DT(cx), dpos, dout, n, per, part);
}
/* Drop path: the scale per clip comes from the host (vt_drop_path_scale, net_vit.c), the
 * same draw on every backend and tower; the multiply is cpu-ref's, bit for bit (BF16: the
 * product rounded to bf16 once). */
void vt_cuda_scale_rows(vt_backend *be, float *out, const float *in, const float *scale, int n,
                        int64_t per) {
    cu_ctx *cx = enter(be);
    vt_cuk_scale_rows_dt(cx->stream, DT(cx), out, in, scale, n, per);
}
