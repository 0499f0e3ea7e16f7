/*
 * cpu_attn.h: the transformer ops of backend.h (layernorm, GELU, multi-head attention,
 * token transpose and mean, broadcast add, per-clip scaling) for the two CPU backends:
 * cpu_attn.c the plain loops with double sums (cpu-ref's, the truth), cpu_attn_fast.c
 * OpenBLAS sgemm and OpenMP (cpu's). Each backend's table takes them with one line,
 * VT_CPU_ATTN_REF_SLOTS or VT_CPU_ATTN_FAST_SLOTS, so cpu_ref.c and cpu.c stay as they are.
 * Contracts: backend.h's transformer section.
 */
#ifndef VT_CPU_ATTN_H
#define VT_CPU_ATTN_H

#include "models/backend.h"

#define VT_CPU_ATTN_DECL(P)                                                                  \
    void P##layernorm_forward(vt_backend *be, float *out, float *mean, float *invstd,        \
                              const float *x, const float *gamma, const float *beta,         \
                              int64_t rows, int c, float eps);                               \
    void P##layernorm_backward(vt_backend *be, float *din, float *dgamma, float *dbeta,      \
                               const float *dout, const float *x, const float *mean,         \
                               const float *invstd, const float *gamma, int64_t rows, int c);\
    void P##gelu_forward(vt_backend *be, float *out, const float *in, int64_t n);            \
    void P##gelu_backward(vt_backend *be, float *din, const float *dout, const float *in,    \
                          int64_t n);                                                        \
    void P##attention_forward(vt_backend *be, float *out, float *lse, const float *qkv,      \
                              int n, int tokens, int heads, int head_dim);                   \
    void P##attention_backward(vt_backend *be, float *dqkv, const float *dout,               \
                               const float *qkv, const float *out, const float *lse, int n,  \
                               int tokens, int heads, int head_dim);                         \
    void P##transpose(vt_backend *be, float *out, const float *in, int n, int a, int b);     \
    void P##token_mean_forward(vt_backend *be, float *out, const float *in, int n,           \
                               int tokens, int c);                                           \
    void P##token_mean_backward(vt_backend *be, float *din, const float *dout, int n,        \
                                int tokens, int c);                                          \
    void P##add_bcast(vt_backend *be, float *out, const float *in, const float *pos, int n,  \
                      int64_t per);                                                          \
    void P##add_bcast_backward(vt_backend *be, float *dpos, const float *dout, int n,        \
                               int64_t per);                                                 \
    void P##scale_rows(vt_backend *be, float *out, const float *in, const float *scale,      \
                       int n, int64_t per);

/* Bytes of scratch the cpu backend's attention (forward or backward) allocates at most
 * (through vt_backend_alloc) for L tokens of head_dim D, with up to 16 threads
 * (cpu_blocks.h's CPU_MAX_BLOCKS; the op runs on no more): each thread holds one head's
 * q, k, v, dout, out, dq, dk, dv (L x D each) and two min(64, L) x L blocks of logits. */
int64_t vt_cpu_attn_scratch_bound(int L, int D);

VT_CPU_ATTN_DECL(vt_ref_)
VT_CPU_ATTN_DECL(vt_fast_)

#define VT_CPU_ATTN_SLOTS(P)                                                                 \
    .layernorm_forward = P##layernorm_forward, .layernorm_backward = P##layernorm_backward,  \
    .gelu_forward = P##gelu_forward, .gelu_backward = P##gelu_backward,                      \
    .attention_forward = P##attention_forward, .attention_backward = P##attention_backward,  \
    .transpose = P##transpose, .token_mean_forward = P##token_mean_forward,                  \
    .token_mean_backward = P##token_mean_backward, .add_bcast = P##add_bcast,                \
    .add_bcast_backward = P##add_bcast_backward, .scale_rows = P##scale_rows

#endif
