/*
 * cuda_mvit.h: MViT's ops on the CUDA backend (cuda_mvit.c; backend.h's MViT section):
 * their slots for backend_cuda.c's table, and how the multiscale attention cuts its
 * queries into blocks — plain C without CUDA headers, so the memory planner
 * (models/memplan.c) can count the scratch in a build without CUDA too.
 *
 * The attention runs as cuda_attn.c's does: cuBLAS strided-batched GEMMs whose batch is
 * B = max(clips, heads) (clip, head) pairs, on blocks of bq queries, a block's logits
 * S (B, bq, Lk) and, in the backward, dP (B, bq, Lk) in the backend's attention scratch,
 * each at most VT_CUDA_ATTN_BLOCK_BYTES (cuda_attn.h). MViT's keys are pooled (Lk < Lq):
 * mvit_v2_s's first stage at 16x224 has Lq = 25089 queries and Lk = 393 keys, so 8 clips
 * take blocks of 5312 queries (S and dP under 64 MiB each).
 */
#ifndef VT_CUDA_MVIT_H
#define VT_CUDA_MVIT_H

#include <stdint.h>

#include "models/backend.h"
#include "models/cuda/cuda_attn.h"

/* Queries per block for Lq queries, Lk keys and a GEMM batch of B: all Lq when they fit in
 * VT_CUDA_ATTN_BLOCK_BYTES, else the most that fit, rounded down to a multiple of 64, at
 * least 1. */
static inline int vt_cuda_mvit_bq(int Lq, int Lk, int B) {
    const int64_t row = (int64_t)(B > 0 ? B : 1) * (Lk > 0 ? Lk : 1) * (int64_t)sizeof(float);
    int64_t bq = VT_CUDA_ATTN_BLOCK_BYTES / row;
    if (bq >= Lq)
        return Lq > 0 ? Lq : 1;
    if (bq >= 64)
        bq -= bq % 64;
    return bq < 1 ? 1 : (int)bq;
}

/* Bytes of attention scratch (S and dP) for that shape. */
static inline int64_t vt_cuda_mvit_scratch_bound(int Lq, int Lk, int B) {
    return 2 * (int64_t)(B > 0 ? B : 1) * vt_cuda_mvit_bq(Lq, Lk, B) * (Lk > 0 ? Lk : 1) *
           (int64_t)sizeof(float);
}
/* Under BF16: S and dP float, P and dS bf16 (12 bytes a logit: at most 3 x
 * VT_CUDA_ATTN_BLOCK_BYTES). The block's float O or dQ and the float dK, dV sums live in
 * the backend's other scratch, with the relative row sums (cuda_mvit.c). */
static inline int64_t vt_cuda_mvit_scratch16(int Lq, int Lk, int B) {
    return (int64_t)(B > 0 ? B : 1) * vt_cuda_mvit_bq(Lq, Lk, B) * (Lk > 0 ? Lk : 1) *
           (int64_t)(2 * sizeof(float) + 2 * sizeof(uint16_t));
}

void vt_cuda_mvit_pool_forward(vt_backend *be, float *out, const float *qkv, const float *w,
                               int n, int heads, int head_dim, int part, const int thw[3],
                               const vt_pool3d_p *p);
void vt_cuda_mvit_pool_backward(vt_backend *be, float *dqkv, float *dw, const float *dout,
                                const float *qkv, const float *w, int n, int heads,
                                int head_dim, int part, const int thw[3], const vt_pool3d_p *p);
void vt_cuda_mvit_attention_forward(vt_backend *be, float *out, float *lse, const float *q,
                                    const float *k, const float *v, const float *rh,
                                    const float *rw, const float *rt, int n, int heads,
                                    int head_dim, const int qthw[3], const int kthw[3],
                                    int residual);
void vt_cuda_mvit_attention_backward(vt_backend *be, float *dq, float *dk, float *dv, float *drh,
                                     float *drw, float *drt, const float *dout, const float *q,
                                     const float *k, const float *v, const float *rh,
                                     const float *rw, const float *rt, const float *lse, int n,
                                     int heads, int head_dim, const int qthw[3],
                                     const int kthw[3], int residual);
void vt_cuda_token_maxpool_forward(vt_backend *be, float *out, const float *in, int n, int c,
                                   const int thw[3], const vt_pool3d_p *p);
void vt_cuda_token_maxpool_backward(vt_backend *be, float *din, const float *dout,
                                    const float *in, int n, int c, const int thw[3],
                                    const vt_pool3d_p *p);

#define VT_CUDA_MVIT_SLOTS                                                                     \
    .mvit_pool_forward = vt_cuda_mvit_pool_forward,                                            \
    .mvit_pool_backward = vt_cuda_mvit_pool_backward,                                          \
    .mvit_attention_forward = vt_cuda_mvit_attention_forward,                                  \
    .mvit_attention_backward = vt_cuda_mvit_attention_backward,                                \
    .token_maxpool_forward = vt_cuda_token_maxpool_forward,                                    \
    .token_maxpool_backward = vt_cuda_token_maxpool_backward

#endif
