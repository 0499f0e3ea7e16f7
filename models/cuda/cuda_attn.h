/*
 * cuda_attn.h: how the CUDA backend's attention (cuda_attn.c) cuts a clip's queries into
 * blocks, and the scratch that costs — plain C without CUDA headers, so that the memory
 * planner (models/memplan.c) can count it in a build without CUDA too.
 *
 * Attention runs as cuBLAS strided-batched GEMMs whose batch is B (clip, head) pairs —
 * the H heads of a clip, or one head of the N clips, whichever is more: B = max(N, H) —
 * on blocks of bq queries: a block's scaled logits S (B, bq, L) and, in the backward, dP
 * (B, bq, L) live in the backend's attention scratch, never more than
 * VT_CUDA_ATTN_BLOCK_BYTES a block. ViT-S at 16x224 (L = 1568, H = 6) with 6 clips a pass
 * or fewer: one block of all 1568 queries (2 x 59 MB); with 8: blocks of 1280; ViT-B
 * (H = 12, up to 12 clips): blocks of 832.
 */
#ifndef VT_CUDA_ATTN_H
#define VT_CUDA_ATTN_H

#include <stdint.h>

/* The most bytes one logits block (S or dP) may take. */
#define VT_CUDA_ATTN_BLOCK_BYTES ((int64_t)64 << 20)

/* Queries per block for L tokens and a GEMM batch of B = max(clips, heads): all L when
 * they fit, else the most that fit, rounded down to a multiple of 64 (whole GEMM tiles),
 * at least 1. */
static inline int vt_cuda_attn_bq(int L, int B) {
    const int64_t row = (int64_t)(B > 0 ? B : 1) * (L > 0 ? L : 1) * (int64_t)sizeof(float);
    int64_t bq = VT_CUDA_ATTN_BLOCK_BYTES / row;
    if (bq >= L)
        return L > 0 ? L : 1;
    if (bq >= 64)
        bq -= bq % 64;
    return bq < 1 ? 1 : (int)bq;
}

/* Bytes of attention scratch the cuda backend holds for L tokens and a GEMM batch of B =
 * max(clips, heads) (two blocks: S and dP; the forward uses the first): at most
 * 2 x VT_CUDA_ATTN_BLOCK_BYTES unless B * L alone passes it. */
static inline int64_t vt_cuda_attn_scratch_bound(int L, int B) {
    return 2 * (int64_t)(B > 0 ? B : 1) * vt_cuda_attn_bq(L, B) * (L > 0 ? L : 1) *
           (int64_t)sizeof(float);
}

/* BF16 (cuda_attn.c): the forward holds S (float) and P (bf16) of a block, the backward
 * S and dP (float) and P and dS (bf16): 12 bytes a logit, three float blocks. dK and dV
 * are sums over the query blocks: with one block the GEMMs write them (rounded to bf16
 * once); with several they are summed in float accumulators (2 L D floats a member),
 * then rounded once — for members in groups whose accumulators fit one block: */
static inline int vt_cuda_attn_acc_members(int L, int D, int B) {
    const int64_t per = 8 * (int64_t)(L > 0 ? L : 1) * (D > 0 ? D : 1);
    int64_t m = VT_CUDA_ATTN_BLOCK_BYTES / per;
    if (m > B)
        m = B;
    return m < 1 ? 1 : (int)m;
}
/* Bytes of BF16 attention scratch for blocks of bq queries (at most 4 x
 * VT_CUDA_ATTN_BLOCK_BYTES with vt_cuda_attn_bq's bq, unless B * L or L * D alone passes
 * it). */
static inline int64_t vt_cuda_attn_scratch16(int L, int B, int D, int bq) {
    const int64_t l = L > 0 ? L : 1, b = B > 0 ? B : 1;
    int64_t bytes = 12 * b * (bq > 0 ? bq : 1) * l;
    if (bq < L)
        bytes += 8 * (int64_t)vt_cuda_attn_acc_members(L, D, B) * l * (D > 0 ? D : 1);
    return bytes;
}

#endif
