/*
 * cpu_mvit.h: MViT's ops of backend.h (pooling of q, k, v; attention with decomposed
 * relative positions and residual pooling; max pooling of a token grid) for the two CPU
 * backends. One implementation (cpu_mvit_impl.h) compiled twice: cpu_mvit.c for cpu-ref
 * (one thread, sums in double: the readable truth) and cpu_mvit_fast.c for cpu (OpenMP
 * across rows, keys and channels, sums in float). Both are deterministic: every output
 * element is summed by one thread in a fixed order, so the bits do not depend on the
 * thread count. Each backend's table takes them with VT_CPU_MVIT_SLOTS(prefix).
 * Contracts: backend.h's MViT section.
 */
#ifndef VT_CPU_MVIT_H
#define VT_CPU_MVIT_H

#include "models/backend.h"

#define VT_CPU_MVIT_DECL(P)                                                                  \
    void P##mvit_pool_forward(vt_backend *be, float *out, const float *qkv, const float *w,  \
                              int n, int heads, int head_dim, int part, const int thw[3],    \
                              const vt_pool3d_p *p);                                         \
    void P##mvit_pool_backward(vt_backend *be, float *dqkv, float *dw, const float *dout,    \
                               const float *qkv, const float *w, int n, int heads,           \
                               int head_dim, int part, const int thw[3],                     \
                               const vt_pool3d_p *p);                                        \
    void P##mvit_attention_forward(vt_backend *be, float *out, float *lse, const float *q,   \
                                   const float *k, const float *v, const float *rh,          \
                                   const float *rw, const float *rt, int n, int heads,       \
                                   int head_dim, const int qthw[3], const int kthw[3],       \
                                   int residual);                                            \
    void P##mvit_attention_backward(vt_backend *be, float *dq, float *dk, float *dv,         \
                                    float *drh, float *drw, float *drt, const float *dout,   \
                                    const float *q, const float *k, const float *v,          \
                                    const float *rh, const float *rw, const float *rt,       \
                                    const float *lse, int n, int heads, int head_dim,        \
                                    const int qthw[3], const int kthw[3], int residual);     \
    void P##token_maxpool_forward(vt_backend *be, float *out, const float *in, int n, int c, \
                                  const int thw[3], const vt_pool3d_p *p);                   \
    void P##token_maxpool_backward(vt_backend *be, float *din, const float *dout,            \
                                   const float *in, int n, int c, const int thw[3],          \
                                   const vt_pool3d_p *p);

VT_CPU_MVIT_DECL(vt_ref_)
VT_CPU_MVIT_DECL(vt_fast_)

#define VT_CPU_MVIT_SLOTS(P)                                                                 \
    .mvit_pool_forward = P##mvit_pool_forward, .mvit_pool_backward = P##mvit_pool_backward,  \
    .mvit_attention_forward = P##mvit_attention_forward,                                     \
    .mvit_attention_backward = P##mvit_attention_backward,                                   \
    .token_maxpool_forward = P##token_maxpool_forward,                                       \
    .token_maxpool_backward = P##token_maxpool_backward

#endif
