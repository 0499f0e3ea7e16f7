/*
 * backend_cuda_impl.h: the CUDA backend's insides, shared by its files and private to
 * models/cuda/ (ggml-backend-impl.h's role): the context one vt_backend holds per GPU,
 * the helpers both op files use on it (cuda_ctx.c), and what the op table's file
 * (backend_cuda.c) takes from the convolution file (cuda_conv.c). Everything else sees
 * models/cuda/backend_cuda.h.
 *
 * It must never be included outside models/cuda/: it pulls in the CUDA, cuDNN and cuBLAS
 * headers, which the rest of vidtrain never sees.
 */
#ifndef VT_BACKEND_CUDA_IMPL_H
#define VT_BACKEND_CUDA_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "models/backend.h"
#include "models/cuda/cuda_alloc.h"

/* One convolution shape with its descriptors and chosen algorithms (cuda_conv.c). */
typedef struct cu_conv cu_conv;

typedef struct cu_ctx {
    int device;
    cudaStream_t stream;
    cudnnHandle_t cudnn;
    cublasHandle_t cublas;
    int tf32;       /* TF32 tensor ops allowed for float data */
    int bf16;       /* activations are bf16 (precision BF16) */
    int cc_major;   /* compute capability: TF32 exists from 8.0 */
    int det;        /* 0 fastest, 1 required, 2 preferred */
    int find;       /* 1: cudnnFind*Ex timing, 0: cudnnGet*_v7 heuristics */
    size_t ws_limit;

    void *ws;       /* convolution workspace (through vt_backend_alloc: in the budget) */
    size_t ws_bytes;
    void *blas_ws;  /* cuBLAS workspace, ours so it is in the budget */
    size_t blas_ws_bytes;
    void *scratch;  /* BN partials, sumsq partials and result (doubles) */
    size_t scratch_bytes;
    void *w16, *dw16; /* BF16: one layer's weights / weight gradient in bf16 */
    size_t w16_bytes, dw16_bytes;
    void *attn;     /* attention's logits blocks (cuda_attn.c, cuda_attn.h) */
    size_t attn_bytes;

    /* uploads: the copy stream, "compute reached here" and one event per ticket (a ring:
     * joining a ticket older than the ring waits for a later upload, never too little) */
    cudaStream_t copy_stream;
    cudaEvent_t order_ev;
#define CU_UPLOAD_RING 64
    cudaEvent_t up_ev[CU_UPLOAD_RING];
    uint64_t next_ticket;
    double *host_result; /* pinned: sumsq's result */

    cu_conv **conv;  /* the shapes seen so far (cuda_conv.c) */
    int nconv, capconv;

    vt_cuda_cache cache; /* the caching allocator (cuda_alloc.h) */
    struct cu_prof *prof; /* VT_CUDA_PROF=1: the per-op timer (cuda_prof.h), else NULL */
} cu_ctx;

/* ---- cuda_ctx.c ---- */
/* The context of a cuda backend (aborts on any other backend). */
cu_ctx *vt_cuda_ctx(const vt_backend *be);
/* The same with its device made current for this thread: every op starts here (ops may
 * be called from any thread; the current device is per thread). */
cu_ctx *vt_cuda_enter(vt_backend *be);
/* *buf grown to at least `need` bytes through vt_backend_alloc (so internal buffers count
 * against the budget like any tensor); grows only, the old buffer back to the cache. */
void *vt_cuda_grow(vt_backend *be, void **buf, size_t *have, size_t need, const char *what);
/* BF16: a bf16 copy of n master weights in the staging buffer; room for a bf16 weight
 * gradient of n weights. */
void *vt_cuda_stage_w16(vt_backend *be, cu_ctx *c, const float *w, int64_t n);
void *vt_cuda_stage_dw16(vt_backend *be, cu_ctx *c, int64_t n);

/* ---- cuda_conv.c ---- */
/* The op table's conv3d_forward and conv3d_backward (backend.h semantics). */
void vt_cuda_conv3d_forward(vt_backend *be, float *out, const float *in, const float *w,
                            const float *b, int n, const int in_thw[3], const vt_conv3d_p *p);
void vt_cuda_conv3d_backward(vt_backend *be, float *din, float *dw, float *db,
                             const float *dout, const float *in, const float *w, int n,
                             const int in_thw[3], const vt_conv3d_p *p);
/* Every cached shape's descriptors destroyed (the backend's destroy). */
void vt_cuda_conv_free_all(cu_ctx *c);

/* ---- cuda_attn.c: the transformer ops (backend.h semantics), and their slots ---- */
void vt_cuda_layernorm_forward(vt_backend *be, float *out, float *mean, float *invstd,
                               const float *x, const float *gamma, const float *beta,
                               int64_t rows, int c, float eps);
void vt_cuda_layernorm_backward(vt_backend *be, float *din, float *dgamma, float *dbeta,
                                const float *dout, const float *x, const float *mean,
                                const float *invstd, const float *gamma, int64_t rows, int c);
void vt_cuda_gelu_forward(vt_backend *be, float *out, const float *in, int64_t n);
void vt_cuda_gelu_backward(vt_backend *be, float *din, const float *dout, const float *in,
                           int64_t n);
void vt_cuda_attention_forward(vt_backend *be, float *out, float *lse, const float *qkv, int n,
                               int tokens, int heads, int head_dim);
void vt_cuda_attention_backward(vt_backend *be, float *dqkv, const float *dout, const float *qkv,
                                const float *out, const float *lse, int n, int tokens, int heads,
                                int head_dim);
void vt_cuda_transpose(vt_backend *be, float *out, const float *in, int n, int a, int b);
void vt_cuda_token_mean_forward(vt_backend *be, float *out, const float *in, int n, int tokens,
                                int c);
void vt_cuda_token_mean_backward(vt_backend *be, float *din, const float *dout, int n,
                                 int tokens, int c);
void vt_cuda_add_bcast(vt_backend *be, float *out, const float *in, const float *pos, int n,
                       int64_t per);
void vt_cuda_add_bcast_backward(vt_backend *be, float *dpos, const float *dout, int n,
                                int64_t per);
void vt_cuda_scale_rows(vt_backend *be, float *out, const float *in, const float *scale, int n,
                        int64_t per);
#define VT_CUDA_ATTN_SLOTS                                                                     \
    .layernorm_forward = vt_cuda_layernorm_forward,                                            \
    .layernorm_backward = vt_cuda_layernorm_backward, .gelu_forward = vt_cuda_gelu_forward,    \
    .gelu_backward = vt_cuda_gelu_backward, .attention_forward = vt_cuda_attention_forward,    \
    .attention_backward = vt_cuda_attention_backward, .transpose = vt_cuda_transpose,          \
    .token_mean_forward = vt_cuda_token_mean_forward,                                          \
    .token_mean_backward = vt_cuda_token_mean_backward, .add_bcast = vt_cuda_add_bcast,        \
    .add_bcast_backward = vt_cuda_add_bcast_backward, .scale_rows = vt_cuda_scale_rows

/* One strided-batched float GEMM on cx's stream (column-major, cuBLAS's arguments):
 * the attention's (cuda_attn.c) and MViT's (cuda_mvit.c). */
void vt_cu_gemm_b(cu_ctx *cx, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                  float alpha, const float *a, int64_t lda, int64_t sa, const float *b,
                  int64_t ldb, int64_t sb, float beta, float *c, int64_t ldc, int64_t sc,
                  int batch);
/* The same on bf16 A and B (uint16_t bits), float compute, C of type ct (CUDA_R_32F: logits,
 * accumulators; CUDA_R_16BF: a result rounded once): the BF16 attention's (cuda_attn.c)
 * and MViT's (cuda_mvit.c). */
void vt_cu_gemm16_b(cu_ctx *cx, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                    float alpha, const uint16_t *a, int64_t lda, int64_t sa, const uint16_t *b,
                    int64_t ldb, int64_t sb, float beta, void *c, cudaDataType_t ct, int64_t ldc,
                    int64_t sc, int batch);

#endif
