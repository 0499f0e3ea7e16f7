/*
 * backend_cuda.c: the cuda backend — one vt_backend per GPU holding its stream, its
 * cuDNN and cuBLAS handles bound to that stream, the convolution workspace, a cache of
 * convolution algorithms per shape, and a caching allocator that enforces the device
 * budget (docs/design.md §5.1, §3.3). It fills every op of models/backend.h with the
 * semantics documented there and implemented by cpu-ref (models/cpu/cpu_ref.c), against
 * which test_cuda_ops_gpu checks each one.
 *
 * Files: this one holds the op table, the context's life cycle and every op but the
 * convolutions and the transformer ops; cuda_conv.c the convolutions and cuDNN's
 * algorithm choice; cuda_attn.c LayerNorm, GELU, attention and the token ops; cuda_alloc.c
 * the caching allocator; backend_cuda_impl.h the context they share and cuda_ctx.c its
 * helpers (so the two op files need each other only one way); kernels_*.cu our own
 * kernels.
 *
 * Who does what: cuDNN does the Nd convolutions (forward, backward data, backward filter
 * with beta = 1 accumulation, backward bias); cuBLAS the linear layer's GEMMs; our own
 * kernels (kernels_*.cu) everything whose semantics must follow cpu-ref: batch norm (the
 * op table splits BN into stats / finalize / apply / backward_reduce / backward_apply so
 * towers can combine statistics the SyncBN way — cuDNN's fused BN training calls compute
 * the statistics and normalise in one call, which does not fit that split), pooling
 * (cuDNN has no ceil_mode, and its max pooling does not promise the FIRST maximum that
 * PyTorch and cpu-ref give the gradient to), ReLU (a one-line kernel; going through
 * cudnnActivation would add descriptors and no speed), dropout, losses, optimizers.
 *
 * Precision (backend.h). TF32: the conv descriptors allow tensor-op math and cuBLAS uses
 * TF32 tensor ops. BF16 (compute capability >= 8.0): activations are __nv_bfloat16 in
 * device memory; convolutions run in cuDNN's PSEUDO_BFLOAT16 configuration (x, w, y
 * bf16, compute type float: the only bf16 configuration of the legacy Nd API), the
 * linear layer in cublasGemmEx (bf16 A/B/C, CUBLAS_COMPUTE_32F); the float32 master
 * weights are converted into a bf16 staging copy for each call, weight gradients come
 * out of cuDNN/cuBLAS as bf16 into a second staging buffer and are added to the float32
 * ones (memplan.c counts both: vt_memplan_bf16_stage_bytes); a bias is written into the
 * output first and accumulated onto with beta = 1, so output + bias is rounded once, as
 * cpu-ref does. Our kernels are templates on the activation type (kernels_*.cu).
 *
 * Input uploads (upload/upload_join/upload_wait): a second, non-blocking COPY stream per
 * backend. An upload first makes the copy stream wait for an event recorded on the compute
 * stream (so it runs after work issued before it, which may still read dst), copies, and
 * records a ticket event; upload_join makes the compute stream wait for a ticket. Freed
 * blocks are reused in compute-stream order only, so whoever frees a buffer an upload
 * writes must upload_wait first (the towers do, pipeline/parallel/towers/tower.c free_stage).
 *
 * Steady state: after the first step every descriptor, algorithm, workspace and scratch
 * buffer exists, and tensors freed and re-allocated in the same sizes come from the
 * allocator's cache, so a training step makes no cudaMalloc.
 * This file must never include FFmpeg, know about towers, or synchronise the stream
 * except where the op table says so (sumsq, to_host, synchronize).
 */
#include "models/cuda/backend_cuda.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/backend.h"
#include "base/common.h"
#include "models/cuda/backend_cuda_impl.h"
#include "models/cudnn_policy.h"
#include "models/cuda/cuda_alloc.h"
#include "models/cuda/cuda_check.h"
#include "models/cuda/cuda_info.h"
#include "models/cuda/cuda_mvit.h"
#include "models/cuda/cuda_prof.h"
#include "models/cuda/kernels.h"

/* ---------------------------------------------------------------- memory ---- */

/* The caching allocator (cuda_alloc.c) holds the blocks; the budget is the backend's. */
static void *cu_alloc(vt_backend *be, size_t bytes) {
    return vt_cuda_cache_alloc(&vt_cuda_enter(be)->cache, be->budget, bytes);
}
static void cu_free(vt_backend *be, void *ptr) {
    if (ptr)
        vt_cuda_cache_free(&vt_cuda_ctx(be)->cache, ptr);
}

void vt_cuda_release_cache(vt_backend *be) { vt_cuda_cache_release(&vt_cuda_enter(be)->cache); }

static void cu_to_device(vt_backend *be, void *dst, const void *src, size_t bytes) {
    if (!bytes)
        return;
    cu_ctx *c = vt_cuda_enter(be);
    /* Asynchronous on the stream: a pinned src must stay unchanged until the next
     * synchronize (pageable memory is staged by the driver before this returns). */
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->stream));
}
static void cu_to_host(vt_backend *be, void *dst, const void *src, size_t bytes) {
    if (!bytes)
        return;
    cu_ctx *c = vt_cuda_enter(be);
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream));
    CUDA_CHECK(cudaStreamSynchronize(c->stream));
}
/* The same copy without the wait: dst (pinned: cu_host_alloc; pageable memory would make
 * the driver wait anyway) holds the bytes after the next synchronize. */
static void cu_to_host_async(vt_backend *be, void *dst, const void *src, size_t bytes) {
    if (!bytes)
        return;
    cu_ctx *c = vt_cuda_enter(be);
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream));
}
static void cu_copy(vt_backend *be, void *dst, const void *src, size_t bytes) {
    if (!bytes)
        return;
    cu_ctx *c = vt_cuda_enter(be);
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c->stream));
}
/* ---- uploads on the copy stream (see the file comment) ---- */
static uint64_t cu_upload(vt_backend *be, void *dst, const void *src, size_t bytes) {
    cu_ctx *c = vt_cuda_enter(be);
    if (!bytes)
        return 0;
    CUDA_CHECK(cudaEventRecord(c->order_ev, c->stream));
    CUDA_CHECK(cudaStreamWaitEvent(c->copy_stream, c->order_ev, 0));
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->copy_stream));
    const uint64_t t = ++c->next_ticket;
    CUDA_CHECK(cudaEventRecord(c->up_ev[t % CU_UPLOAD_RING], c->copy_stream));
    return t;
}
static void cu_upload_join(vt_backend *be, uint64_t ticket) {
    cu_ctx *c = vt_cuda_enter(be);
    if (ticket)
        CUDA_CHECK(cudaStreamWaitEvent(c->stream, c->up_ev[ticket % CU_UPLOAD_RING], 0));
}
static void cu_upload_wait(vt_backend *be) {
    cu_ctx *c = vt_cuda_enter(be);
    CUDA_CHECK(cudaStreamSynchronize(c->copy_stream));
}

static void cu_synchronize(vt_backend *be) {
    cu_ctx *c = vt_cuda_enter(be);
    CUDA_CHECK(cudaStreamSynchronize(c->stream));
}
static void *cu_host_alloc(vt_backend *be, size_t bytes) {
    vt_cuda_enter(be);
    void *p = NULL;
    /* Portable: the loader's pinned batches may be copied to any of the GPUs. */
    CUDA_CHECK(cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable));
    return p;
}
static void cu_host_free(vt_backend *be, void *ptr) {
    if (!ptr)
        return;
    vt_cuda_enter(be);
    CUDA_CHECK(cudaFreeHost(ptr));
}

/* ---------------------------------------------------------------- element-wise ---- */

static void cu_fill(vt_backend *be, float *x, float v, int64_t n) {
    vt_cuk_fill(vt_cuda_enter(be)->stream, x, v, n);
}
static void cu_xsum_fold(vt_backend *be, int64_t *acc, const float *x, int64_t n, int init,
                         int e0) {
    vt_cuk_xsum_fold(vt_cuda_enter(be)->stream, acc, x, n, init, e0);
}
static void cu_xsum_round(vt_backend *be, float *out, const int64_t *acc, int64_t n, int e0) {
    vt_cuk_xsum_round(vt_cuda_enter(be)->stream, out, acc, n, e0);
}
static void cu_scale(vt_backend *be, float *x, float a, int64_t n) {
    vt_cuk_scale(vt_cuda_enter(be)->stream, x, a, n);
}
static void cu_axpy(vt_backend *be, float *y, float a, const float *x, int64_t n) {
    vt_cuk_axpy(vt_cuda_enter(be)->stream, y, a, x, n);
}
static void cu_round_even(vt_backend *be, float *x, int64_t n) {
    vt_cuk_round_even(vt_cuda_enter(be)->stream, x, n);
}
/* The activation type of the kernels: bf16 under BF16 (backend.h [A] arguments). */
#define DT(c) ((c)->bf16 ? VT_CUK_BF16 : VT_CUK_F32)

static void cu_add(vt_backend *be, float *out, const float *a, const float *b, int64_t n) {
    cu_ctx *c = vt_cuda_enter(be);
    vt_cuk_add(c->stream, DT(c), out, a, b, n);
}
static void cu_act_from_f32(vt_backend *be, float *dst, const float *src, int64_t n) {
    cu_ctx *c = vt_cuda_enter(be);
    vt_cuk_to_act(c->stream, DT(c), dst, src, n);
}
static void cu_act_to_f32(vt_backend *be, float *dst, const float *src, int64_t n) {
    cu_ctx *c = vt_cuda_enter(be);
    vt_cuk_from_act(c->stream, DT(c), dst, src, n);
}
static double cu_sumsq(vt_backend *be, const float *x, int64_t n) {
    cu_ctx *c = vt_cuda_enter(be);
    if (n <= 0)
        return 0.0;
    const size_t need = ((size_t)vt_cuk_sumsq_parts() + 1) * sizeof(double);
    double *part = vt_cuda_grow(be, &c->scratch, &c->scratch_bytes, need, "cuda scratch");
    double *res = part + vt_cuk_sumsq_parts();
    vt_cuk_sumsq(c->stream, res, part, x, n, 0);
    CUDA_CHECK(cudaMemcpyAsync(c->host_result, res, sizeof(double), cudaMemcpyDeviceToHost,
                               c->stream));
    CUDA_CHECK(cudaStreamSynchronize(c->stream));
    return *c->host_result;
}
/* The gradient gate (backend.h): sumsq's kernels into the gate, no copy back, no wait. */
static void cu_grad_sumsq(vt_backend *be, vt_grad_gate *gate, const float *x, int64_t n,
                          int add) {
    cu_ctx *c = vt_cuda_enter(be);
    const size_t need = (size_t)vt_cuk_sumsq_parts() * sizeof(double);
    double *part = vt_cuda_grow(be, &c->scratch, &c->scratch_bytes, need, "cuda scratch");
    vt_cuk_sumsq(c->stream, &gate->sumsq, part, x, n, add);
}
static void cu_grad_gate(vt_backend *be, vt_grad_gate *gate, float clip_norm, double skip_at,
                         int skip) {
    vt_cuk_grad_gate(vt_cuda_enter(be)->stream, gate, clip_norm, skip_at, skip);
}
static void cu_copy_if_skip(vt_backend *be, void *dst, const void *src, size_t bytes,
                            const vt_grad_gate *gate) {
    VT_CHECK(bytes % sizeof(float) == 0, "copy_if_skip: %zu bytes, not whole floats", bytes);
    vt_cuk_copy_if_skip(vt_cuda_enter(be)->stream, dst, src, (int64_t)(bytes / sizeof(float)),
                        gate);
}

/* ---------------------------------------------------------------- batch norm ---- */

static double *bn_partials(vt_backend *be, cu_ctx *c, int n, int ch, int64_t s) {
    const size_t need = 2 * (size_t)ch * (size_t)VT_MAX(vt_cuk_bn_parts(n, s), 1) * sizeof(double);
    return vt_cuda_grow(be, &c->scratch, &c->scratch_bytes, need, "cuda scratch");
}
static void cu_bn_stats(vt_backend *be, float *sum, float *sumsq, const float *x,
                        const float *k, int n, int ch, int64_t s) {
    cu_ctx *c = vt_cuda_enter(be);
    double *part = n > 0 ? bn_partials(be, c, n, ch, s) : NULL;
    vt_cuk_bn_stats(c->stream, DT(c), sum, sumsq, x, k, n, ch, s, part);
}
static void cu_bn_finalize(vt_backend *be, float *mean, float *invstd, float *running_mean,
                           float *running_var, const float *sum, const float *sumsq,
                           const float *k, int64_t count, int ch, float momentum, float eps) {
    cu_ctx *c = vt_cuda_enter(be);
    vt_cuk_bn_finalize(c->stream, mean, invstd, running_mean, running_var, sum, sumsq, k, count,
                       ch, momentum, eps);
}
static void cu_bn_apply(vt_backend *be, float *out, const float *x, const float *k,
                        const float *mean, const float *invstd, const float *gamma,
                        const float *beta, int n, int ch, int64_t s) {
    cu_ctx *c = vt_cuda_enter(be);
    vt_cuk_bn_apply(c->stream, DT(c), out, x, k, mean, invstd, gamma, beta, n, ch, s);
}
static void cu_bn_apply_relu(vt_backend *be, float *out, const float *x, const float *k,
                             const float *mean, const float *invstd, const float *gamma,
                             const float *beta, const float *res, int n, int ch, int64_t s) {
    cu_ctx *c = vt_cuda_enter(be);
    vt_cuk_bn_apply_relu(c->stream, DT(c), out, x, res, k, mean, invstd, gamma, beta, n, ch, s);
}
static void cu_bn_backward_reduce(vt_backend *be, float *sum_dy, float *sum_dy_xhat,
                                  const float *dy, const float *x, const float *k,
                                  const float *mean, const float *invstd, int n, int ch,
                                  int64_t s) {
    cu_ctx *c = vt_cuda_enter(be);
    double *part = n > 0 ? bn_partials(be, c, n, ch, s) : NULL;
    vt_cuk_bn_backward_reduce(c->stream, DT(c), sum_dy, sum_dy_xhat, dy, x, k, mean, invstd, n,
                              ch, s, part);
}
static void cu_bn_relu_backward_reduce(vt_backend *be, float *sum_dy, float *sum_dy_xhat,
                                       float *dy, const float *dout, const float *y,
                                       const float *x, const float *k, const float *mean,
                                       const float *invstd, int n, int ch, int64_t s) {
    cu_ctx *c = vt_cuda_enter(be);
    double *part = n > 0 ? bn_partials(be, c, n, ch, s) : NULL;
    vt_cuk_bn_relu_backward_reduce(c->stream, DT(c), sum_dy, sum_dy_xhat, dy, dout, y, x, k,
                                   mean, invstd, n, ch, s, part);
}
static void cu_relu_backward_skip(vt_backend *be, float *din, float *skip, const float *dout,
                                  const float *out, int64_t n) {
    cu_ctx *c = vt_cuda_enter(be);
    vt_cuk_relu_backward_skip(c->stream, DT(c), din, skip, dout, out, n);
}
static void cu_bn_backward_apply(vt_backend *be, float *din, const float *dy, const float *x,
                                 const float *k, const float *mean, const float *invstd,
                                 const float *gamma, const float *sum_dy,
                                 const float *sum_dy_xhat, int64_t count, int n, int ch,
                                 int64_t s) {
    cu_ctx *c = vt_cuda_enter(be);
    vt_cuk_bn_backward_apply(c->stream, DT(c), din, dy, x, k, mean, invstd, gamma, sum_dy,
                             sum_dy_xhat, count, n, ch, s);
}

/* ---------------------------------------------------------------- activations ---- */

static void cu_relu_forward(vt_backend *be, float *out, const float *in, int64_t n) {
    cu_ctx *c = vt_cuda_enter(be);
    vt_cuk_relu_forward(c->stream, DT(c), out, in, n);
}
static void cu_relu_backward(vt_backend *be, float *din, const float *dout, const float *out,
                             int64_t n) {
    cu_ctx *c = vt_cuda_enter(be);
    vt_cuk_relu_backward(c->stream, DT(c), din, dout, out, n);
}

static void cu_silu_forward(vt_backend *be, float *out, const float *in, int64_t n) {
    cu_ctx *c = vt_cuda_enter(be);
    vt_cuk_silu_forward(c->stream, DT(c), out, in, n);
}
static void cu_silu_backward(vt_backend *be, float *din, const float *dout, const float *in,
                             int64_t n) {
    cu_ctx *c = vt_cuda_enter(be);
    vt_cuk_silu_backward(c->stream, DT(c), din, dout, in, n);
}
static void cu_sigmoid_forward(vt_backend *be, float *out, const float *in, int64_t n) {
    cu_ctx *c = vt_cuda_enter(be);
    vt_cuk_sigmoid_forward(c->stream, DT(c), out, in, n);
}
static void cu_sigmoid_backward(vt_backend *be, float *din, const float *dout, const float *out,
                                int64_t n) {
    cu_ctx *c = vt_cuda_enter(be);
    vt_cuk_sigmoid_backward(c->stream, DT(c), din, dout, out, n);
}
static void cu_chscale_forward(vt_backend *be, float *out, const float *x, const float *s, int n,
                               int ch, int64_t sp) {
    cu_ctx *c = vt_cuda_enter(be);
    vt_cuk_chscale_forward(c->stream, DT(c), out, x, s, (int64_t)n * ch, sp);
}
static void cu_chscale_backward(vt_backend *be, float *dx, float *ds, const float *dout,
                                const float *x, const float *s, int n, int ch, int64_t sp) {
    cu_ctx *c = vt_cuda_enter(be);
    vt_cuk_chscale_backward(c->stream, DT(c), dx, ds, dout, x, s, (int64_t)n * ch, sp);
}

/* ---------------------------------------------------------------- pooling ---- */

static vt_cuk_pool pool_geom(const int in_thw[3], const vt_pool3d_p *p) {
    vt_cuk_pool g;
    for (int d = 0; d < 3; d++) {
        g.in[d] = in_thw[d];
        g.out[d] = vt_pool_out(in_thw[d], p->k[d], p->s[d], p->p[d], p->ceil_mode);
        g.k[d] = p->k[d];
        g.s[d] = p->s[d];
        g.p[d] = p->p[d];
        VT_CHECK(g.k[d] > 0 && g.s[d] > 0 && g.p[d] >= 0 && g.out[d] > 0,
                 "pool3d: bad geometry in=%d k=%d s=%d p=%d", in_thw[d], p->k[d], p->s[d], p->p[d]);
    }
    return g;
}
static void cu_maxpool3d_forward(vt_backend *be, float *out, const float *in, int n, int ch,
                                 const int in_thw[3], const vt_pool3d_p *p) {
    if (n <= 0)
        return;
    cu_ctx *c = vt_cuda_enter(be);
    vt_cuk_maxpool_forward(c->stream, DT(c), out, in, (int64_t)n * ch, pool_geom(in_thw, p));
}
static void cu_maxpool3d_backward(vt_backend *be, float *din, const float *dout, const float *in,
                                  int n, int ch, const int in_thw[3], const vt_pool3d_p *p) {
    if (n <= 0)
        return;
    cu_ctx *c = vt_cuda_enter(be);
    vt_cuk_maxpool_backward(c->stream, DT(c), din, dout, in, (int64_t)n * ch, pool_geom(in_thw, p));
}
static void cu_avgpool3d_forward(vt_backend *be, float *out, const float *in, int n, int ch,
                                 const int in_thw[3], const vt_pool3d_p *p) {
    if (n <= 0)
        return;
    cu_ctx *c = vt_cuda_enter(be);
    vt_cuk_avgpool_forward(c->stream, DT(c), out, in, (int64_t)n * ch, pool_geom(in_thw, p));
}
static void cu_avgpool3d_backward(vt_backend *be, float *din, const float *dout, int n, int ch,
                                  const int in_thw[3], const vt_pool3d_p *p) {
    if (n <= 0)
        return;
    cu_ctx *c = vt_cuda_enter(be);
    vt_cuk_avgpool_backward(c->stream, DT(c), din, dout, (int64_t)n * ch, pool_geom(in_thw, p));
}
static void cu_gap_forward(vt_backend *be, float *out, const float *in, int n, int ch, int64_t s) {
    cu_ctx *c = vt_cuda_enter(be);
    vt_cuk_gap_forward(c->stream, DT(c), out, in, (int64_t)n * ch, s);
}
static void cu_gap_backward(vt_backend *be, float *din, const float *dout, int n, int ch,
                            int64_t s) {
    cu_ctx *c = vt_cuda_enter(be);
    vt_cuk_gap_backward(c->stream, DT(c), din, dout, (int64_t)n * ch, s);
}

/* ---------------------------------------------------------------- linear ---- */

/* cuBLAS is column-major: a row-major (r, c) matrix is its transpose, column-major with
 * leading dimension c. So with row-major in (N, I), w (O, I), out (N, O):
 *   out^T (O, N) = w (O, I) . in^T (I, N)    -> gemm(T, N, m=O, n=N, k=I, w ld I, in ld I)
 *   din^T (I, N) = w^T (I, O) . dout^T (O, N)-> gemm(N, N, m=I, n=N, k=O, w ld I, dout ld O)
 *   dw^T (I, O) += in^T (I, N) . dout (N, O) -> gemm(N, T, m=I, n=O, k=N, in ld I, dout ld O)
 */
/* BF16: the same three GEMMs with bf16 A, B, C and float compute (cublasGemmEx). */
static void gemm_bf16(cu_ctx *c, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                      const void *a, int lda, const void *b, int ldb, float beta, void *out,
                      int ldc) {
    const float one = 1.0f;
    CUBLAS_CHECK(cublasGemmEx(c->cublas, ta, tb, m, n, k, &one, a, CUDA_R_16BF, lda, b,
                              CUDA_R_16BF, ldb, &beta, out, CUDA_R_16BF, ldc, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT));
}

static void cu_linear_forward(vt_backend *be, float *out, const float *in, const float *w,
                              const float *b, int n, int in_f, int out_f) {
    if (n <= 0)
        return;
    cu_ctx *c = vt_cuda_enter(be);
    const float one = 1.0f, zero = 0.0f;
    if (c->bf16) {
        const void *w16 = vt_cuda_stage_w16(be, c, w, (int64_t)in_f * out_f);
        if (b) /* out = bias, then out = w . in + 1 * out: one rounding of the sum */
            vt_cuk_fill_bias(c->stream, VT_CUK_BF16, out, b, (int64_t)n * out_f, out_f, 1);
        gemm_bf16(c, CUBLAS_OP_T, CUBLAS_OP_N, out_f, n, in_f, w16, in_f, in, in_f, b ? 1.0f : 0.0f,
                  out, out_f);
        return;
    }
    CUBLAS_CHECK(cublasSgemm(c->cublas, CUBLAS_OP_T, CUBLAS_OP_N, out_f, n, in_f, &one, w, in_f,
                             in, in_f, &zero, out, out_f));
    if (b)
        vt_cuk_add_bias_rows(c->stream, out, b, n, out_f);
}
static void cu_linear_backward(vt_backend *be, float *din, float *dw, float *db, const float *dout,
                               const float *in, const float *w, int n, int in_f, int out_f) {
    if (n <= 0)
        return;
    cu_ctx *c = vt_cuda_enter(be);
    const float one = 1.0f, zero = 0.0f;
    if (c->bf16) {
        const int64_t nw = (int64_t)in_f * out_f;
        if (din) {
            const void *w16 = vt_cuda_stage_w16(be, c, w, nw);
            gemm_bf16(c, CUBLAS_OP_N, CUBLAS_OP_N, in_f, n, out_f, w16, in_f, dout, out_f, 0.0f,
                      din, in_f);
        }
        void *dw16 = vt_cuda_stage_dw16(be, c, nw);
        gemm_bf16(c, CUBLAS_OP_N, CUBLAS_OP_T, in_f, out_f, n, in, in_f, dout, out_f, 0.0f, dw16,
                  in_f);
        vt_cuk_acc_from_act(c->stream, VT_CUK_BF16, dw, dw16, nw);
        if (db)
            vt_cuk_colsum_acc(c->stream, VT_CUK_BF16, db, dout, n, out_f);
        return;
    }
    if (din)
        CUBLAS_CHECK(cublasSgemm(c->cublas, CUBLAS_OP_N, CUBLAS_OP_N, in_f, n, out_f, &one, w,
                                 in_f, dout, out_f, &zero, din, in_f));
    CUBLAS_CHECK(cublasSgemm(c->cublas, CUBLAS_OP_N, CUBLAS_OP_T, in_f, out_f, n, &one, in, in_f,
                             dout, out_f, &one, dw, in_f));
    if (db) { /* in chunks of rows: a transformer's token linear has N*L = 12544 rows; up
               * to 16 rows one chunk, the rows in order as before (bit for bit cpu-ref) */
        const size_t need = (size_t)vt_cuk_colsum_parts(n, out_f) * (size_t)out_f * sizeof(double);
        double *part = vt_cuda_grow(be, &c->scratch, &c->scratch_bytes, need, "cuda scratch");
        vt_cuk_colsum_acc_parts(c->stream, db, dout, n, out_f, part);
    }
}

/* ---------------------------------------------------------------- dropout ---- */

static void cu_dropout_forward(vt_backend *be, float *out, float *mask, const float *in, int64_t n,
                               float p, uint64_t seed) {
    /* The kept value is computed here exactly as cpu-ref computes it (one float division)
     * so the masks agree bit for bit. */
    const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    cu_ctx *c = vt_cuda_enter(be);
    vt_cuk_dropout_forward(c->stream, DT(c), out, mask, in, n, p, scale, seed);
}
static void cu_dropout_backward(vt_backend *be, float *din, const float *dout, const float *mask,
                                int64_t n) {
    cu_ctx *c = vt_cuda_enter(be);
    vt_cuk_dropout_backward(c->stream, DT(c), din, dout, mask, n);
}

/* ---------------------------------------------------------------- losses ---- */

static void cu_softmax_xent(vt_backend *be, float *loss, float *dlogits, float *prob,
                            const float *logits, const int32_t *label, int n, int k,
                            float smoothing, float grad_scale) {
    cu_ctx *c = vt_cuda_enter(be);
    vt_cuk_softmax_xent(c->stream, DT(c), loss, dlogits, prob, logits, label, NULL, n, k,
                        smoothing, grad_scale);
}
static void cu_softmax_xent_w(vt_backend *be, float *loss, float *dlogits, float *prob,
                              const float *logits, const int32_t *label, const float *cw, int n,
                              int k, float smoothing, float grad_scale) {
    cu_ctx *c = vt_cuda_enter(be);
    vt_cuk_softmax_xent(c->stream, DT(c), loss, dlogits, prob, logits, label, cw, n, k,
                        smoothing, grad_scale);
}
static void cu_softmax_xent_soft(vt_backend *be, float *loss, float *dlogits,
                                 const float *logits, const float *target, int n, int k,
                                 float grad_scale) {
    cu_ctx *c = vt_cuda_enter(be);
    vt_cuk_softmax_xent_soft(c->stream, DT(c), loss, dlogits, logits, target, n, k, grad_scale);
}
static void cu_bce_logits(vt_backend *be, float *loss, float *dlogits, float *prob,
                          const float *logits, const float *target, int n, int k,
                          float grad_scale) {
    cu_ctx *c = vt_cuda_enter(be);
    vt_cuk_bce_logits(c->stream, DT(c), loss, dlogits, prob, logits, target, n, k, grad_scale);
}

/* ---------------------------------------------------------------- optimizers ---- */

static void cu_sgd_update(vt_backend *be, float *p, const float *g, float *buf, int64_t n,
                          float lr, float momentum, float dampening, float wd, int nesterov,
                          int64_t step, const vt_grad_gate *gate) {
    VT_CHECK(momentum == 0 || buf, "sgd_update: momentum %g needs a buffer", (double)momentum);
    vt_cuk_sgd(vt_cuda_enter(be)->stream, p, g, buf, n, lr, momentum, dampening, wd, nesterov,
               step <= 1, gate);
}
static void cu_rmsprop_update(vt_backend *be, float *p, const float *g, float *sq, float *buf,
                              int64_t n, float lr, float alpha, float eps, float wd,
                              float momentum, const vt_grad_gate *gate) {
    VT_CHECK(momentum <= 0 || buf, "rmsprop_update: momentum %g needs a buffer", (double)momentum);
    vt_cuk_rmsprop(vt_cuda_enter(be)->stream, p, g, sq, buf, n, lr, alpha, eps, wd, momentum,
                   gate);
}
static void cu_adamw_update(vt_backend *be, float *p, const float *g, float *m, float *v,
                            int64_t n, float lr, float beta1, float beta2, float eps, float wd,
                            int64_t step, const vt_grad_gate *gate) {
    /* The step's scalars, computed exactly as cpu-ref does (double, rounded once). */
    const double bc1 = 1.0 - pow(beta1, (double)step);
    const double bc2 = 1.0 - pow(beta2, (double)step);
    const float step_size = (float)(lr / bc1);
    const float bc2_sqrt = (float)sqrt(bc2);
    const float decay = 1 - lr * wd;
    vt_cuk_adamw(vt_cuda_enter(be)->stream, p, g, m, v, n, decay, beta1, beta2, eps, step_size,
                 bc2_sqrt, gate);
}

/* ---------------------------------------------------------------- life cycle ---- */

static void cu_destroy(vt_backend *be) {
    cu_ctx *c = vt_cuda_ctx(be);
    if (!c)
        return;
    CUDA_CHECK(cudaSetDevice(c->device));
    CUDA_CHECK(cudaStreamSynchronize(c->stream));
    if (c->prof) { /* VT_CUDA_PROF=1: the table, then the timer */
        vt_cuda_prof_report(c->prof, c->device, stderr);
        vt_cuda_prof_free(c->prof);
    }
    vt_cuda_conv_free_all(c);
    vt_backend_free_ptr(be, c->ws);
    vt_backend_free_ptr(be, c->blas_ws);
    vt_backend_free_ptr(be, c->scratch);
    vt_backend_free_ptr(be, c->w16);
    vt_backend_free_ptr(be, c->dw16);
    vt_backend_free_ptr(be, c->attn);
    CUDA_CHECK(cudaStreamSynchronize(c->copy_stream));
    for (int i = 0; i < CU_UPLOAD_RING; i++)
        CUDA_CHECK(cudaEventDestroy(c->up_ev[i]));
    CUDA_CHECK(cudaEventDestroy(c->order_ev));
    CUDA_CHECK(cudaStreamDestroy(c->copy_stream));
    CUBLAS_CHECK(cublasDestroy(c->cublas));
    CUDNN_CHECK(cudnnDestroy(c->cudnn));
    vt_cuda_cache_destroy(&c->cache);
    CUDA_CHECK(cudaFreeHost(c->host_result));
    CUDA_CHECK(cudaStreamDestroy(c->stream));
    free(c);
    be->ctx = NULL;
}

/* FP32, TF32 and — on compute capability >= 8.0, where cuDNN has bf16 convolutions and
 * tensor cores have bf16 — BF16. */
static int cu_set_precision(vt_backend *be, vt_precision p) {
    cu_ctx *c = vt_cuda_enter(be);
    if (p == VT_PREC_BF16 && c->cc_major < 8)
        return -1;
    static _Atomic int warned; /* once a process, however many backends */
    char msg[512];
    if (p == VT_PREC_BF16 && vt_cudnn_bf16_warning((int)cudnnGetVersion(), msg, sizeof msg) &&
        !warned++)
        vt_warn("cuda:%d: %s\n", c->device, msg);
    c->tf32 = p == VT_PREC_TF32;
    c->bf16 = p == VT_PREC_BF16;
    /* BF16's GEMMs are cublasGemmEx with CUBLAS_COMPUTE_32F: the math mode does not apply */
    CUBLAS_CHECK(cublasSetMathMode(c->cublas, c->tf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                      : CUBLAS_DEFAULT_MATH));
    return 0;
}

static const vt_backend_i cuda_i = {
    .name = "cuda",
    .destroy = cu_destroy,
    .alloc = cu_alloc,
    .free = cu_free,
    .to_device = cu_to_device,
    .to_host = cu_to_host,
    .copy = cu_copy,
    .to_host_async = cu_to_host_async,
    .synchronize = cu_synchronize,
    .host_alloc = cu_host_alloc,
    .host_free = cu_host_free,
    .upload = cu_upload,
    .upload_join = cu_upload_join,
    .upload_wait = cu_upload_wait,
    .set_precision = cu_set_precision,
    .fill = cu_fill,
    .scale = cu_scale,
    .axpy = cu_axpy,
    .round_even = cu_round_even,
    .add = cu_add,
    .sumsq = cu_sumsq,
    .grad_sumsq = cu_grad_sumsq,
    .grad_gate = cu_grad_gate,
    .copy_if_skip = cu_copy_if_skip,
    .act_from_f32 = cu_act_from_f32,
    .act_to_f32 = cu_act_to_f32,
    .conv3d_forward = vt_cuda_conv3d_forward,
    .conv3d_backward = vt_cuda_conv3d_backward,
    .bn_stats = cu_bn_stats,
    .bn_finalize = cu_bn_finalize,
    .bn_apply = cu_bn_apply,
    .bn_apply_relu = cu_bn_apply_relu,
    .relu_backward_skip = cu_relu_backward_skip,
    .bn_relu_backward_reduce = cu_bn_relu_backward_reduce,
    .bn_backward_reduce = cu_bn_backward_reduce,
    .bn_backward_apply = cu_bn_backward_apply,
    .relu_forward = cu_relu_forward,
    .relu_backward = cu_relu_backward,
    .silu_forward = cu_silu_forward,
    .silu_backward = cu_silu_backward,
    .sigmoid_forward = cu_sigmoid_forward,
    .sigmoid_backward = cu_sigmoid_backward,
    .chscale_forward = cu_chscale_forward,
    .chscale_backward = cu_chscale_backward,
    .maxpool3d_forward = cu_maxpool3d_forward,
    .maxpool3d_backward = cu_maxpool3d_backward,
    .avgpool3d_forward = cu_avgpool3d_forward,
    .avgpool3d_backward = cu_avgpool3d_backward,
    .gap_forward = cu_gap_forward,
    .gap_backward = cu_gap_backward,
    .linear_forward = cu_linear_forward,
    .linear_backward = cu_linear_backward,
    .dropout_forward = cu_dropout_forward,
    .dropout_backward = cu_dropout_backward,
    .softmax_xent = cu_softmax_xent,
    .softmax_xent_w = cu_softmax_xent_w,
    .softmax_xent_soft = cu_softmax_xent_soft,
    .xsum_fold = cu_xsum_fold,
    .xsum_round = cu_xsum_round,
    .bce_logits = cu_bce_logits,
    .sgd_update = cu_sgd_update,
    .rmsprop_update = cu_rmsprop_update,
    .adamw_update = cu_adamw_update,
    VT_CUDA_ATTN_SLOTS, /* the transformer ops: cuda_attn.c */
    VT_CUDA_MVIT_SLOTS, /* MViT's ops: cuda_mvit.c */
};

vt_backend *vt_backend_cuda_init(int device, int64_t budget) {
    const int count = vt_cuda_device_count();
    VT_CHECK(device >= 0 && device < count, "cuda:%d: no such device (%d CUDA device%s found)",
             device, count, count == 1 ? "" : "s");
    VT_CHECK(budget >= 0, "cuda:%d: negative budget", device);
    CUDA_CHECK(cudaSetDevice(device));

    cu_ctx *c = vt_calloc(1, sizeof(*c));
    c->device = device;
    vt_cuda_cache_init(&c->cache, device);
    /* Non-blocking: no implicit synchronisation with the legacy default stream, so towers
     * on one GPU overlap. */
    CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&c->copy_stream, cudaStreamNonBlocking));
    /* No timing: these events only order the two streams. */
    CUDA_CHECK(cudaEventCreateWithFlags(&c->order_ev, cudaEventDisableTiming));
    for (int i = 0; i < CU_UPLOAD_RING; i++)
        CUDA_CHECK(cudaEventCreateWithFlags(&c->up_ev[i], cudaEventDisableTiming));
    CUDNN_CHECK(cudnnCreate(&c->cudnn));
    CUDNN_CHECK(cudnnSetStream(c->cudnn, c->stream));
    CUBLAS_CHECK(cublasCreate(&c->cublas));
    CUBLAS_CHECK(cublasSetStream(c->cublas, c->stream));
    CUDA_CHECK(cudaMallocHost((void **)&c->host_result, sizeof(double)));

    CUDA_CHECK(cudaDeviceGetAttribute(&c->cc_major, cudaDevAttrComputeCapabilityMajor, device));
    c->tf32 = 0; /* FP32 until vt_backend_set_precision (vt_net_init sets the net's) */
    const char *det = getenv("VT_CUDA_DETERMINISTIC");
    c->det = det && *det ? (atoi(det) ? 1 : 0) : 2;
    const char *algo = getenv("VT_CUDA_CONV_ALGO");
    c->find = !(algo && !strcmp(algo, "heuristic"));
    c->ws_limit = (size_t)1 << 30;
    const char *wsl = getenv("VT_CUDA_WORKSPACE");
    if (wsl && *wsl) {
        int64_t v = vt_parse_bytes(wsl);
        VT_CHECK(v >= 0, "VT_CUDA_WORKSPACE=%s: not a size (e.g. 512M)", wsl);
        c->ws_limit = (size_t)v;
    }
    CUBLAS_CHECK(cublasSetMathMode(c->cublas, c->tf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                      : CUBLAS_DEFAULT_MATH));

    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    if (budget == 0) {
        /* Free memory now, less a reserve for what the libraries allocate on their own
         * (cuDNN/cuBLAS kernels loaded lazily, NCCL buffers): 2% of the card, >= 256 MiB. */
        int64_t reserve = VT_MAX((int64_t)256 << 20, (int64_t)(total_b / 50));
        budget = (int64_t)free_b - reserve;
        VT_CHECK(budget > 0, "cuda:%d: only %zu bytes free", device, free_b);
    } else if ((size_t)budget > free_b) {
        char a[32], b[32];
        vt_warn("cuda:%d: budget %s exceeds the %s free now; allocations may fail first\n",
                device, vt_fmt_bytes(a, sizeof a, budget), vt_fmt_bytes(b, sizeof b, (int64_t)free_b));
    }

    vt_backend *be = vt_calloc(1, sizeof(*be));
    be->i = &cuda_i;
    if (vt_cuda_prof_enabled()) { /* the per-op timer: a wrapping table (cuda_prof.c) */
        be->i = vt_cuda_prof_wrap(&cuda_i);
        c->prof = vt_cuda_prof_new();
    }
    be->ctx = c;
    be->kind = VT_BACKEND_CUDA;
    be->ordinal = device;
    be->threads = 1;
    be->budget = budget;

    /* cuBLAS workspace, ours so it is in the budget (cuBLAS docs: 32 MiB on Hopper and
     * newer, 4 MiB before). Set after cublasSetStream, which resets it. */
    c->blas_ws_bytes = (size_t)(c->cc_major >= 9 ? 32 : 4) << 20;
    c->blas_ws = vt_backend_alloc_x(be, c->blas_ws_bytes, "cuBLAS workspace");
    CUBLAS_CHECK(cublasSetWorkspace(c->cublas, c->blas_ws, c->blas_ws_bytes));
    return be;
}

/* ---------------------------------------------------------------- extras ---- */

void *vt_cuda_stream(vt_backend *be) { return (void *)vt_cuda_ctx(be)->stream; }
int vt_cuda_device(const vt_backend *be) { return vt_cuda_ctx(be)->device; }
int vt_cuda_tf32(const vt_backend *be) { return vt_cuda_ctx(be)->tf32; }

void vt_cuda_set_tf32(vt_backend *be, int on) {
    char err[256];
    VT_CHECK(vt_backend_set_precision(be, on ? VT_PREC_TF32 : VT_PREC_FP32, err, sizeof err) == 0,
             "%s", err);
}

void vt_cuda_prof_restart(vt_backend *be) {
    cu_ctx *c = vt_cuda_enter(be);
    vt_cuda_prof_reset(c->prof);
}

void vt_cuda_set_deterministic(vt_backend *be, int mode) {
    VT_CHECK(mode >= 0 && mode <= 2, "deterministic mode %d", mode);
    vt_cuda_ctx(be)->det = mode;
}

void vt_cuda_mem_stats_get(vt_backend *be, vt_cuda_mem_stats *out) {
    cu_ctx *c = vt_cuda_ctx(be);
    vt_cuda_cache_stats(&c->cache, out);
    out->budget = be->budget;
    out->workspace_bytes = (int64_t)c->ws_bytes;
    out->conv_shapes = c->nconv;
}
