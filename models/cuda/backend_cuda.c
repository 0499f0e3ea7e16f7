/*
 * backend_cuda.c: the cuda backend — one vt_backend per GPU holding its stream, its
 * cuDNN and cuBLAS handles bound to that stream, the convolution workspace, a cache of
 * convolution algorithms per shape, and a caching allocator that enforces the device
 * budget (DESIGN.md §5, invariant 3). It fills every op of models/backend.h with the
 * semantics documented there and implemented by cpu-ref (models/cpu_ref.c), against
 * which test_cuda_ops_gpu checks each one.
 *
 * Who does what: cuDNN does the Nd convolutions (forward, backward data, backward filter
 * with beta = 1 accumulation, backward bias); cuBLAS the linear layer's GEMMs; our own
 * kernels (kernels.cu) everything whose semantics must follow cpu-ref: batch norm (the
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
 * cpu-ref does. Our kernels are templates on the activation type (kernels.cu).
 *
 * Input uploads (upload/upload_join/upload_wait): a second, non-blocking COPY stream per
 * backend. An upload first makes the copy stream wait for an event recorded on the compute
 * stream (so it runs after work issued before it, which may still read dst), copies, and
 * records a ticket event; upload_join makes the compute stream wait for a ticket. Freed
 * blocks are reused in compute-stream order only, so whoever frees a buffer an upload
 * writes must upload_wait first (the towers do, pipeline/parallel/tower.c free_stage).
 *
 * Steady state: after the first step every descriptor, algorithm, workspace and scratch
 * buffer exists, and tensors freed and re-allocated in the same sizes come from the
 * allocator's cache, so a training step makes no cudaMalloc.
 * This file must never include FFmpeg, know about towers, or synchronise the stream
 * except where the op table says so (sumsq, to_host, synchronize).
 */
#include "models/cuda/backend_cuda.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "models/backend.h"
#include "models/common.h"
#include "models/cuda/cuda_check.h"
#include "models/cuda/cuda_info.h"
#include "models/cuda/kernels.h"

/* ---------------------------------------------------------------- context ---- */

typedef struct cu_block { void *ptr; size_t bytes; } cu_block;

/* One convolution shape: descriptors and the algorithm chosen for each direction. The
 * three directions get their own convolution descriptor because the math type cuDNN
 * reports for the chosen algorithm is set per descriptor and may differ by direction. */
typedef struct cu_conv {
    int n, thw[3], tf32, bf16, det;
    vt_conv3d_p p;
    cudnnTensorDescriptor_t x, y, b;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t cf, cd, cw;
    int have_f, have_d, have_w;
    cudnnConvolutionFwdAlgo_t af;
    cudnnConvolutionBwdDataAlgo_t ad;
    cudnnConvolutionBwdFilterAlgo_t aw;
    size_t wsf, wsd, wsw;
} cu_conv;

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

    /* uploads: the copy stream, "compute reached here" and one event per ticket (a ring:
     * joining a ticket older than the ring waits for a later upload, never too little) */
    cudaStream_t copy_stream;
    cudaEvent_t order_ev;
#define CU_UPLOAD_RING 64
    cudaEvent_t up_ev[CU_UPLOAD_RING];
    uint64_t next_ticket;
    double *host_result; /* pinned: sumsq's result */

    cu_conv **conv;
    int nconv, capconv;

    /* caching allocator */
    pthread_mutex_t lock;
    cu_block *live, *cached;
    size_t nlive, caplive, ncached, capcached;
    int64_t live_bytes, cached_bytes, high_water, mallocs, hits;
} cu_ctx;

static const vt_backend_i cuda_i;

static cu_ctx *ctx_of(const vt_backend *be) {
    VT_CHECK(be && be->i == &cuda_i, "not a cuda backend");
    return (cu_ctx *)be->ctx;
}

/* Every op starts here: ops may be called from any thread, and the CUDA runtime's current
 * device is per thread. */
static cu_ctx *enter(vt_backend *be) {
    cu_ctx *c = ctx_of(be);
    CUDA_CHECK(cudaSetDevice(c->device));
    return c;
}


/* ---------------------------------------------------------------- allocator ---- */

/* Blocks are rounded to 512 bytes so tensors of nearly equal size share cache entries
 * and every block stays aligned for vector loads. */
#define CU_ROUND 512

static void block_push(cu_block **arr, size_t *n, size_t *cap, cu_block b) {
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 64;
        *arr = vt_realloc(*arr, *cap * sizeof(**arr));
    }
    (*arr)[(*n)++] = b;
}

/* Called with the lock held. */
static void release_cache_locked(cu_ctx *c) {
    for (size_t i = 0; i < c->ncached; i++)
        CUDA_CHECK(cudaFree(c->cached[i].ptr));
    c->ncached = 0;
    c->cached_bytes = 0;
}

static void *cu_alloc(vt_backend *be, size_t bytes) {
    cu_ctx *c = enter(be);
    const size_t rb = (bytes + CU_ROUND - 1) / CU_ROUND * CU_ROUND;
    pthread_mutex_lock(&c->lock);
    /* Best fit among cached blocks no more than 1/8 larger: reuse without hoarding. */
    size_t best = c->ncached;
    for (size_t i = 0; i < c->ncached; i++)
        if (c->cached[i].bytes >= rb && c->cached[i].bytes <= rb + rb / 8 &&
            (best == c->ncached || c->cached[i].bytes < c->cached[best].bytes))
            best = i;
    if (best < c->ncached) {
        cu_block b = c->cached[best];
        c->cached[best] = c->cached[--c->ncached];
        c->cached_bytes -= (int64_t)b.bytes;
        c->live_bytes += (int64_t)b.bytes;
        c->hits++;
        block_push(&c->live, &c->nlive, &c->caplive, b);
        pthread_mutex_unlock(&c->lock);
        return b.ptr;
    }
    /* The budget covers what we hold from the driver, cached blocks included. */
    if (be->budget > 0 && c->live_bytes + c->cached_bytes + (int64_t)rb > be->budget)
        release_cache_locked(c);
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, rb);
    if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError(); /* clear the sticky-free error state of this thread */
        release_cache_locked(c);
        e = cudaMalloc(&p, rb);
        if (e == cudaErrorMemoryAllocation) {
            (void)cudaGetLastError();
            pthread_mutex_unlock(&c->lock);
            return NULL; /* out of device memory: the caller reports it */
        }
    }
    CUDA_CHECK(e);
    c->mallocs++;
    c->live_bytes += (int64_t)rb;
    if (c->live_bytes + c->cached_bytes > c->high_water)
        c->high_water = c->live_bytes + c->cached_bytes;
    block_push(&c->live, &c->nlive, &c->caplive, (cu_block){p, rb});
    pthread_mutex_unlock(&c->lock);
    return p;
}

/* Freed blocks go to the cache. They may still be read by work queued on this stream;
 * that is safe because anything that reuses them is queued on the same stream later. */
static void cu_free(vt_backend *be, void *ptr) {
    if (!ptr)
        return;
    cu_ctx *c = ctx_of(be);
    pthread_mutex_lock(&c->lock);
    size_t i = c->nlive;
    while (i > 0 && c->live[i - 1].ptr != ptr)
        i--;
    VT_CHECK(i > 0, "cuda%d: freeing a pointer this backend did not allocate", c->device);
    cu_block b = c->live[i - 1];
    c->live[i - 1] = c->live[--c->nlive];
    c->live_bytes -= (int64_t)b.bytes;
    c->cached_bytes += (int64_t)b.bytes;
    block_push(&c->cached, &c->ncached, &c->capcached, b);
    pthread_mutex_unlock(&c->lock);
}

void vt_cuda_release_cache(vt_backend *be) {
    cu_ctx *c = enter(be);
    pthread_mutex_lock(&c->lock);
    release_cache_locked(c);
    pthread_mutex_unlock(&c->lock);
}

static void cu_to_device(vt_backend *be, void *dst, const void *src, size_t bytes) {
    if (!bytes)
        return;
    cu_ctx *c = enter(be);
    /* Asynchronous on the stream: a pinned src must stay unchanged until the next
     * synchronize (pageable memory is staged by the driver before this returns). */
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->stream));
}
static void cu_to_host(vt_backend *be, void *dst, const void *src, size_t bytes) {
    if (!bytes)
        return;
    cu_ctx *c = enter(be);
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream));
    CUDA_CHECK(cudaStreamSynchronize(c->stream));
}
static void cu_copy(vt_backend *be, void *dst, const void *src, size_t bytes) {
    if (!bytes)
        return;
    cu_ctx *c = enter(be);
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c->stream));
}
/* ---- uploads on the copy stream (see the file comment) ---- */
static uint64_t cu_upload(vt_backend *be, void *dst, const void *src, size_t bytes) {
    cu_ctx *c = enter(be);
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
    cu_ctx *c = enter(be);
    if (ticket)
        CUDA_CHECK(cudaStreamWaitEvent(c->stream, c->up_ev[ticket % CU_UPLOAD_RING], 0));
}
static void cu_upload_wait(vt_backend *be) {
    cu_ctx *c = enter(be);
    CUDA_CHECK(cudaStreamSynchronize(c->copy_stream));
}

static void cu_synchronize(vt_backend *be) {
    cu_ctx *c = enter(be);
    CUDA_CHECK(cudaStreamSynchronize(c->stream));
}
static void *cu_host_alloc(vt_backend *be, size_t bytes) {
    enter(be);
    void *p = NULL;
    /* Portable: the loader's pinned batches may be copied to any of the GPUs. */
    CUDA_CHECK(cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable));
    return p;
}
static void cu_host_free(vt_backend *be, void *ptr) {
    if (!ptr)
        return;
    enter(be);
    CUDA_CHECK(cudaFreeHost(ptr));
}

/* Internal buffers (workspace, scratch) go through vt_backend_alloc so they count against
 * the budget and show in the high-water mark like any tensor. Grows only; the old buffer
 * is returned to the cache (stream order makes that safe). */
static void *grow(vt_backend *be, void **buf, size_t *have, size_t need, const char *what) {
    if (need <= *have && *buf)
        return *buf;
    vt_backend_free_ptr(be, *buf);
    *buf = NULL;
    *have = 0;
    *buf = vt_backend_alloc_x(be, need, what);
    *have = need;
    return *buf;
}

/* ---------------------------------------------------------------- element-wise ---- */

static void cu_fill(vt_backend *be, float *x, float v, int64_t n) {
    vt_cuk_fill(enter(be)->stream, x, v, n);
}
static void cu_scale(vt_backend *be, float *x, float a, int64_t n) {
    vt_cuk_scale(enter(be)->stream, x, a, n);
}
static void cu_axpy(vt_backend *be, float *y, float a, const float *x, int64_t n) {
    vt_cuk_axpy(enter(be)->stream, y, a, x, n);
}
/* The activation type of the kernels: bf16 under BF16 (backend.h [A] arguments). */
#define DT(c) ((c)->bf16 ? VT_CUK_BF16 : VT_CUK_F32)

static void cu_add(vt_backend *be, float *out, const float *a, const float *b, int64_t n) {
    cu_ctx *c = enter(be);
    vt_cuk_add(c->stream, DT(c), out, a, b, n);
}
static void cu_act_from_f32(vt_backend *be, float *dst, const float *src, int64_t n) {
    cu_ctx *c = enter(be);
    vt_cuk_to_act(c->stream, DT(c), dst, src, n);
}
static void cu_act_to_f32(vt_backend *be, float *dst, const float *src, int64_t n) {
    cu_ctx *c = enter(be);
    vt_cuk_from_act(c->stream, DT(c), dst, src, n);
}
static double cu_sumsq(vt_backend *be, const float *x, int64_t n) {
    cu_ctx *c = enter(be);
    if (n <= 0)
        return 0.0;
    const size_t need = ((size_t)vt_cuk_sumsq_parts() + 1) * sizeof(double);
    double *part = grow(be, &c->scratch, &c->scratch_bytes, need, "cuda scratch");
    double *res = part + vt_cuk_sumsq_parts();
    vt_cuk_sumsq(c->stream, res, part, x, n);
    CUDA_CHECK(cudaMemcpyAsync(c->host_result, res, sizeof(double), cudaMemcpyDeviceToHost,
                               c->stream));
    CUDA_CHECK(cudaStreamSynchronize(c->stream));
    return *c->host_result;
}

/* ---------------------------------------------------------------- conv3d ---- */

static void set_tensor5(cudnnTensorDescriptor_t d, cudnnDataType_t dt, int n, int c, int t, int h,
                        int w) {
    const int dims[5] = {n, c, t, h, w};
    const int strides[5] = {c * t * h * w, t * h * w, h * w, w, 1};
    CUDNN_CHECK(cudnnSetTensorNdDescriptor(d, dt, 5, dims, strides));
}

/* tensor_ok: TF32 (float data) or BF16 — tensor-op math allowed. The compute type is
 * float in every case (BF16: cuDNN's PSEUDO_BFLOAT16 configuration). */
static cudnnConvolutionDescriptor_t make_conv_desc(const vt_conv3d_p *p, int tensor_ok) {
    cudnnConvolutionDescriptor_t d;
    const int dil[3] = {1, 1, 1};
    CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d));
    /* CROSS_CORRELATION is what PyTorch (and cpu-ref) call convolution. */
    CUDNN_CHECK(cudnnSetConvolutionNdDescriptor(d, 3, p->p, p->s, dil, CUDNN_CROSS_CORRELATION,
                                                CUDNN_DATA_FLOAT));
    /* FMA_MATH: plain FP32, no tensor cores; DEFAULT_MATH lets cuDNN use TF32 (float data)
     * or bf16 tensor cores. */
    CUDNN_CHECK(cudnnSetConvolutionMathType(d, tensor_ok ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
    return d;
}

static cu_conv *conv_get(cu_ctx *c, int n, const int thw[3], const vt_conv3d_p *p) {
    for (int i = 0; i < c->nconv; i++) {
        cu_conv *e = c->conv[i];
        if (e->n == n && e->tf32 == c->tf32 && e->bf16 == c->bf16 && e->det == c->det &&
            !memcmp(e->thw, thw, sizeof e->thw) && !memcmp(&e->p, p, sizeof *p))
            return e;
    }
    VT_CHECK(p->cin > 0 && p->cout > 0, "conv3d: %d -> %d channels", p->cin, p->cout);
    const int To = vt_conv_out(thw[0], p->k[0], p->s[0], p->p[0]);
    const int Ho = vt_conv_out(thw[1], p->k[1], p->s[1], p->p[1]);
    const int Wo = vt_conv_out(thw[2], p->k[2], p->s[2], p->p[2]);
    VT_CHECK(To > 0 && Ho > 0 && Wo > 0, "conv3d: input %dx%dx%d too small for the kernel",
             thw[0], thw[1], thw[2]);
    cu_conv *e = vt_calloc(1, sizeof(*e));
    e->n = n;
    memcpy(e->thw, thw, sizeof e->thw);
    e->p = *p;
    e->tf32 = c->tf32;
    e->bf16 = c->bf16;
    e->det = c->det;
    const cudnnDataType_t dt = c->bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&e->x));
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&e->y));
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&e->b));
    CUDNN_CHECK(cudnnCreateFilterDescriptor(&e->w));
    set_tensor5(e->x, dt, n, p->cin, thw[0], thw[1], thw[2]);
    set_tensor5(e->y, dt, n, p->cout, To, Ho, Wo);
    set_tensor5(e->b, CUDNN_DATA_FLOAT, 1, p->cout, 1, 1, 1); /* FP32/TF32 bias only */
    const int wdims[5] = {p->cout, p->cin, p->k[0], p->k[1], p->k[2]};
    CUDNN_CHECK(cudnnSetFilterNdDescriptor(e->w, dt, CUDNN_TENSOR_NCHW, 5, wdims));
    e->cf = make_conv_desc(p, c->tf32 || c->bf16);
    e->cd = make_conv_desc(p, c->tf32 || c->bf16);
    e->cw = make_conv_desc(p, c->tf32 || c->bf16);
    int od[5];
    CUDNN_CHECK(cudnnGetConvolutionNdForwardOutputDim(e->cf, e->x, e->w, 5, od));
    VT_CHECK(od[0] == n && od[1] == p->cout && od[2] == To && od[3] == Ho && od[4] == Wo,
             "cuDNN output %dx%dx%dx%dx%d differs from vt_conv_out's %dx%dx%dx%dx%d", od[0],
             od[1], od[2], od[3], od[4], n, p->cout, To, Ho, Wo);
    if (c->nconv == c->capconv) {
        c->capconv = c->capconv ? 2 * c->capconv : 32;
        c->conv = vt_realloc(c->conv, (size_t)c->capconv * sizeof(*c->conv));
    }
    c->conv[c->nconv++] = e;
    return e;
}

static void conv_free(cu_conv *e) {
    if (!e)
        return;
    CUDNN_CHECK(cudnnDestroyTensorDescriptor(e->x));
    CUDNN_CHECK(cudnnDestroyTensorDescriptor(e->y));
    CUDNN_CHECK(cudnnDestroyTensorDescriptor(e->b));
    CUDNN_CHECK(cudnnDestroyFilterDescriptor(e->w));
    CUDNN_CHECK(cudnnDestroyConvolutionDescriptor(e->cf));
    CUDNN_CHECK(cudnnDestroyConvolutionDescriptor(e->cd));
    CUDNN_CHECK(cudnnDestroyConvolutionDescriptor(e->cw));
    free(e);
}

/* The three cuDNN perf structs, normalised so one chooser serves all directions. */
typedef struct cu_perf {
    int algo;
    cudnnStatus_t status;
    float time;
    size_t memory;
    cudnnDeterminism_t det;
    cudnnMathType_t math;
} cu_perf;

/* Workspace one algorithm may use: the configured limit, never past what the budget has
 * left (the current workspace counts as available: it is replaced if a larger one is
 * needed), with 1/16 of what is left kept for the scratch buffers of the other ops. */
static size_t ws_available(vt_backend *be, cu_ctx *c) {
    size_t lim = c->ws_limit;
    if (be->budget > 0) {
        int64_t left = be->budget - be->in_use + (int64_t)c->ws_bytes;
        left -= left / 16;
        if (left < 0)
            left = 0;
        if ((size_t)left < lim)
            lim = (size_t)left;
    }
    return lim;
}

/* Returns the index of the chosen result or -1. Results come sorted fastest first (Find)
 * or in cuDNN's heuristic order (Get_v7). strict_fp32: without TF32 accept only results
 * reported with FMA_MATH (or DEFAULT_MATH before cc 8.0, where it is the same); the
 * relaxed pass also takes DEFAULT_MATH results, which still run in FP32 because the
 * descriptor keeps FMA_MATH (adopt). Tensor-op results are never taken without TF32. */
static int choose_pass(const cu_perf *r, int nr, size_t ws_max, int tf32, int cc_major,
                       int det_mode, int timed, int strict_fp32) {
    int first = -1, first_det = -1;
    for (int i = 0; i < nr; i++) {
        if (r[i].status != CUDNN_STATUS_SUCCESS || r[i].memory > ws_max)
            continue;
        if (!tf32) {
            int fp32 = r[i].math == CUDNN_FMA_MATH ||
                       (r[i].math == CUDNN_DEFAULT_MATH && (cc_major < 8 || !strict_fp32));
            if (!fp32)
                continue;
        }
        if (first < 0)
            first = i;
        if (first_det < 0 && r[i].det == CUDNN_DETERMINISTIC)
            first_det = i;
    }
    if (det_mode == 1)
        return first_det;
    if (det_mode == 2 && first_det >= 0) {
        /* Prefer the deterministic one unless it costs more than 10% time. */
        if (!timed || first < 0 || r[first_det].time <= 1.10f * r[first].time)
            return first_det;
    }
    return first;
}
static int choose(const cu_perf *r, int nr, size_t ws_max, int tf32, int cc_major, int det_mode,
                  int timed) {
    int k = choose_pass(r, nr, ws_max, tf32, cc_major, det_mode, timed, 1);
    return k >= 0 ? k : choose_pass(r, nr, ws_max, tf32, cc_major, det_mode, timed, 0);
}

/* A temporary workspace for cudnnFind*Ex: as large as allowed, halved until it fits. */
static void *find_ws(vt_backend *be, size_t *bytes) {
    size_t b = *bytes;
    while (b >= (1u << 20)) {
        void *p = vt_backend_alloc(be, b);
        if (p) {
            *bytes = b;
            return p;
        }
        b /= 2;
    }
    *bytes = 0;
    return NULL;
}

static void die_no_algo(const char *dir, const cu_conv *e, size_t ws_max, int det) {
    char a[32];
    VT_DIE("cuDNN offers no %s algorithm for conv %d->%d k=%dx%dx%d on %dx%dx%dx%d within %s of "
           "workspace%s\n  hint: raise VT_CUDA_WORKSPACE or the budget, or unset "
           "VT_CUDA_DETERMINISTIC",
           dir, e->p.cin, e->p.cout, e->p.k[0], e->p.k[1], e->p.k[2], e->n, e->thw[0], e->thw[1],
           e->thw[2], vt_fmt_bytes(a, sizeof a, (int64_t)ws_max),
           det == 1 ? " (deterministic required)" : "");
}

/* After choosing: with tensor ops allowed (TF32, BF16) the descriptor takes the
 * algorithm's math type (cuDNN's documented requirement for Find/Get results); without,
 * it keeps FMA_MATH, which choose() made sure the algorithm ran with. The persistent
 * workspace grows to fit. */
static void adopt(vt_backend *be, cu_ctx *c, cudnnConvolutionDescriptor_t d, const cu_perf *r) {
    if (c->tf32 || c->bf16)
        CUDNN_CHECK(cudnnSetConvolutionMathType(d, r->math));
    if (r->memory > c->ws_bytes)
        grow(be, &c->ws, &c->ws_bytes, r->memory, "cuDNN workspace");
}

#define CU_MAX_ALGOS 16

static void pick_fwd(vt_backend *be, cu_ctx *c, cu_conv *e, const void *x, const void *w,
                     void *y) {
    cudnnConvolutionFwdAlgoPerf_t perf[CU_MAX_ALGOS];
    cu_perf r[CU_MAX_ALGOS];
    int got = 0;
    size_t ws_max = ws_available(be, c);
    if (c->find) {
        void *tmp = find_ws(be, &ws_max);
        CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(c->cudnn, e->x, x, e->w, w, e->cf, e->y,
                                                           y, CU_MAX_ALGOS, &got, perf, tmp,
                                                           ws_max));
        vt_backend_free_ptr(be, tmp);
    } else {
        CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(c->cudnn, e->x, e->w, e->cf, e->y,
                                                           CU_MAX_ALGOS, &got, perf));
    }
    for (int i = 0; i < got; i++)
        r[i] = (cu_perf){perf[i].algo, perf[i].status, perf[i].time, perf[i].memory,
                         perf[i].determinism, perf[i].mathType};
    int k = choose(r, got, ws_max, c->tf32 || c->bf16, c->cc_major, c->det, c->find);
    if (k < 0)
        die_no_algo("forward", e, ws_max, c->det);
    e->af = (cudnnConvolutionFwdAlgo_t)r[k].algo;
    e->wsf = r[k].memory;
    adopt(be, c, e->cf, &r[k]);
    e->have_f = 1;
    vt_debug("cuda%d: conv %d->%d n=%d fwd algo %d (%zu B workspace, %.3f ms)\n", c->device,
             e->p.cin, e->p.cout, e->n, r[k].algo, r[k].memory, (double)r[k].time);
}

static void pick_bwd_data(vt_backend *be, cu_ctx *c, cu_conv *e, const void *w, const void *dy,
                          void *dx) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[CU_MAX_ALGOS];
    cu_perf r[CU_MAX_ALGOS];
    int got = 0;
    size_t ws_max = ws_available(be, c);
    if (c->find) {
        /* dx is overwritten by the real call right after, so it may serve as scratch. */
        void *tmp = find_ws(be, &ws_max);
        CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(c->cudnn, e->w, w, e->y, dy, e->cd,
                                                                e->x, dx, CU_MAX_ALGOS, &got,
                                                                perf, tmp, ws_max));
        vt_backend_free_ptr(be, tmp);
    } else {
        CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(c->cudnn, e->w, e->y, e->cd, e->x,
                                                                CU_MAX_ALGOS, &got, perf));
    }
    for (int i = 0; i < got; i++)
        r[i] = (cu_perf){perf[i].algo, perf[i].status, perf[i].time, perf[i].memory,
                         perf[i].determinism, perf[i].mathType};
    int k = choose(r, got, ws_max, c->tf32 || c->bf16, c->cc_major, c->det, c->find);
    if (k < 0)
        die_no_algo("backward-data", e, ws_max, c->det);
    e->ad = (cudnnConvolutionBwdDataAlgo_t)r[k].algo;
    e->wsd = r[k].memory;
    adopt(be, c, e->cd, &r[k]);
    e->have_d = 1;
    vt_debug("cuda%d: conv %d->%d n=%d bwd-data algo %d (%zu B workspace, %.3f ms)\n", c->device,
             e->p.cin, e->p.cout, e->n, r[k].algo, r[k].memory, (double)r[k].time);
}

/* scratch_dw: where Find may write a filter gradient (BF16: the bf16 staging buffer the
 * real call overwrites next), or NULL: FP32's real dw accumulates (beta = 1), so Find
 * writes into a scratch filter allocated here — and when the budget has no room for one
 * (the plan does not count it: a budget filled by the memory policy may be that tight),
 * this shape takes cuDNN's heuristic choice instead of aborting the run. */
static void pick_bwd_filter(vt_backend *be, cu_ctx *c, cu_conv *e, const void *x,
                            const void *dy, void *scratch_dw) {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[CU_MAX_ALGOS];
    cu_perf r[CU_MAX_ALGOS];
    int got = 0, timed = 0;
    size_t ws_max = ws_available(be, c);
    void *own = NULL;
    if (c->find && !scratch_dw) {
        const size_t wbytes = sizeof(float) * (size_t)e->p.cout * (size_t)e->p.cin *
                              (size_t)e->p.k[0] * (size_t)e->p.k[1] * (size_t)e->p.k[2];
        scratch_dw = own = vt_backend_alloc(be, wbytes);
        if (!own)
            vt_debug("cuda%d: no room for a %zu B search filter: heuristic bwd-filter choice\n",
                     c->device, wbytes);
    }
    if (c->find && scratch_dw) {
        ws_max = ws_available(be, c);
        void *tmp = find_ws(be, &ws_max);
        CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(c->cudnn, e->x, x, e->y, dy,
                                                                  e->cw, e->w, scratch_dw,
                                                                  CU_MAX_ALGOS, &got, perf, tmp,
                                                                  ws_max));
        vt_backend_free_ptr(be, tmp);
        vt_backend_free_ptr(be, own);
        timed = 1;
    } else {
        CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(c->cudnn, e->x, e->y, e->cw,
                                                                  e->w, CU_MAX_ALGOS, &got, perf));
    }
    for (int i = 0; i < got; i++)
        r[i] = (cu_perf){perf[i].algo, perf[i].status, perf[i].time, perf[i].memory,
                         perf[i].determinism, perf[i].mathType};
    int k = choose(r, got, ws_max, c->tf32 || c->bf16, c->cc_major, c->det, timed);
    if (k < 0)
        die_no_algo("backward-filter", e, ws_max, c->det);
    e->aw = (cudnnConvolutionBwdFilterAlgo_t)r[k].algo;
    e->wsw = r[k].memory;
    adopt(be, c, e->cw, &r[k]);
    e->have_w = 1;
    vt_debug("cuda%d: conv %d->%d n=%d bwd-filter algo %d (%zu B workspace, %.3f ms)\n",
             c->device, e->p.cin, e->p.cout, e->n, r[k].algo, r[k].memory, (double)r[k].time);
}

/* BF16 staging (see the file comment): a bf16 copy of n master weights, and room for a
 * bf16 weight gradient of n weights. */
static void *stage_w16(vt_backend *be, cu_ctx *c, const float *w, int64_t n) {
    void *w16 = grow(be, &c->w16, &c->w16_bytes, (size_t)n * 2, "bf16 weights");
    vt_cuk_to_act(c->stream, VT_CUK_BF16, w16, w, n);
    return w16;
}
static void *stage_dw16(vt_backend *be, cu_ctx *c, int64_t n) {
    return grow(be, &c->dw16, &c->dw16_bytes, (size_t)n * 2, "bf16 weight gradient");
}
static int64_t conv_weights(const vt_conv3d_p *p) {
    return (int64_t)p->cout * p->cin * p->k[0] * p->k[1] * p->k[2];
}

static void cu_conv3d_forward(vt_backend *be, float *out, const float *in, const float *w,
                              const float *b, int n, const int in_thw[3], const vt_conv3d_p *p) {
    if (n <= 0)
        return;
    cu_ctx *c = enter(be);
    cu_conv *e = conv_get(c, n, in_thw, p);
    const float one = 1.0f, zero = 0.0f;
    if (c->bf16) {
        const void *w16 = stage_w16(be, c, w, conv_weights(p));
        if (!e->have_f) /* before the bias goes in: Find overwrites out */
            pick_fwd(be, c, e, in, w16, out);
        const int To = vt_conv_out(in_thw[0], p->k[0], p->s[0], p->p[0]);
        const int Ho = vt_conv_out(in_thw[1], p->k[1], p->s[1], p->p[1]);
        const int Wo = vt_conv_out(in_thw[2], p->k[2], p->s[2], p->p[2]);
        if (b) /* y = bias, then y = conv + 1 * y: one rounding of the sum */
            vt_cuk_fill_bias(c->stream, VT_CUK_BF16, out, b, (int64_t)n * p->cout, p->cout,
                             (int64_t)To * Ho * Wo);
        CUDNN_CHECK(cudnnConvolutionForward(c->cudnn, &one, e->x, in, e->w, w16, e->cf, e->af,
                                            e->wsf ? c->ws : NULL, e->wsf, b ? &one : &zero,
                                            e->y, out));
        return;
    }
    if (!e->have_f)
        pick_fwd(be, c, e, in, w, out);
    CUDNN_CHECK(cudnnConvolutionForward(c->cudnn, &one, e->x, in, e->w, w, e->cf, e->af,
                                        e->wsf ? c->ws : NULL, e->wsf, &zero, e->y, out));
    if (b)
        CUDNN_CHECK(cudnnAddTensor(c->cudnn, &one, e->b, b, &one, e->y, out));
}

static void cu_conv3d_backward(vt_backend *be, float *din, float *dw, float *db, const float *dout,
                               const float *in, const float *w, int n, const int in_thw[3],
                               const vt_conv3d_p *p) {
    if (n <= 0)
        return;
    cu_ctx *c = enter(be);
    cu_conv *e = conv_get(c, n, in_thw, p);
    const float one = 1.0f, zero = 0.0f;
    if (c->bf16) {
        const int64_t nw = conv_weights(p);
        if (din) {
            const void *w16 = stage_w16(be, c, w, nw);
            if (!e->have_d)
                pick_bwd_data(be, c, e, w16, dout, din);
            CUDNN_CHECK(cudnnConvolutionBackwardData(c->cudnn, &one, e->w, w16, e->y, dout, e->cd,
                                                     e->ad, e->wsd ? c->ws : NULL, e->wsd, &zero,
                                                     e->x, din));
        }
        /* this call's weight gradient in bf16 (beta = 0), then added to the float one */
        void *dw16 = stage_dw16(be, c, nw);
        if (!e->have_w)
            pick_bwd_filter(be, c, e, in, dout, dw16);
        CUDNN_CHECK(cudnnConvolutionBackwardFilter(c->cudnn, &one, e->x, in, e->y, dout, e->cw,
                                                   e->aw, e->wsw ? c->ws : NULL, e->wsw, &zero,
                                                   e->w, dw16));
        vt_cuk_acc_from_act(c->stream, VT_CUK_BF16, dw, dw16, nw);
        if (db) {
            const int64_t s = (int64_t)vt_conv_out(in_thw[0], p->k[0], p->s[0], p->p[0]) *
                              vt_conv_out(in_thw[1], p->k[1], p->s[1], p->p[1]) *
                              vt_conv_out(in_thw[2], p->k[2], p->s[2], p->p[2]);
            vt_cuk_chansum_acc(c->stream, VT_CUK_BF16, db, dout, n, p->cout, s);
        }
        return;
    }
    if (din) { /* input gradient: overwritten (beta = 0) */
        if (!e->have_d)
            pick_bwd_data(be, c, e, w, dout, din);
        CUDNN_CHECK(cudnnConvolutionBackwardData(c->cudnn, &one, e->w, w, e->y, dout, e->cd, e->ad,
                                                 e->wsd ? c->ws : NULL, e->wsd, &zero, e->x, din));
    }
    /* parameter gradients: accumulated (beta = 1) */
    if (!e->have_w)
        pick_bwd_filter(be, c, e, in, dout, NULL);
    CUDNN_CHECK(cudnnConvolutionBackwardFilter(c->cudnn, &one, e->x, in, e->y, dout, e->cw, e->aw,
                                               e->wsw ? c->ws : NULL, e->wsw, &one, e->w, dw));
    if (db)
        CUDNN_CHECK(cudnnConvolutionBackwardBias(c->cudnn, &one, e->y, dout, &one, e->b, db));
}

/* ---------------------------------------------------------------- batch norm ---- */

static double *bn_partials(vt_backend *be, cu_ctx *c, int n, int ch, int64_t s) {
    const size_t need = 2 * (size_t)ch * (size_t)VT_MAX(vt_cuk_bn_parts(n, s), 1) * sizeof(double);
    return grow(be, &c->scratch, &c->scratch_bytes, need, "cuda scratch");
}
static void cu_bn_stats(vt_backend *be, float *sum, float *sumsq, const float *x, int n, int ch,
                        int64_t s) {
    cu_ctx *c = enter(be);
    double *part = n > 0 ? bn_partials(be, c, n, ch, s) : NULL;
    vt_cuk_bn_stats(c->stream, DT(c), sum, sumsq, x, n, ch, s, part);
}
static void cu_bn_finalize(vt_backend *be, float *mean, float *invstd, float *running_mean,
                           float *running_var, const float *sum, const float *sumsq,
                           int64_t count, int ch, float momentum, float eps) {
    cu_ctx *c = enter(be);
    vt_cuk_bn_finalize(c->stream, mean, invstd, running_mean, running_var, sum, sumsq, count, ch,
                       momentum, eps);
}
static void cu_bn_apply(vt_backend *be, float *out, const float *x, const float *mean,
                        const float *invstd, const float *gamma, const float *beta, int n, int ch,
                        int64_t s) {
    cu_ctx *c = enter(be);
    vt_cuk_bn_apply(c->stream, DT(c), out, x, mean, invstd, gamma, beta, n, ch, s);
}
static void cu_bn_backward_reduce(vt_backend *be, float *sum_dy, float *sum_dy_xhat,
                                  const float *dy, const float *x, const float *mean,
                                  const float *invstd, int n, int ch, int64_t s) {
    cu_ctx *c = enter(be);
    double *part = n > 0 ? bn_partials(be, c, n, ch, s) : NULL;
    vt_cuk_bn_backward_reduce(c->stream, DT(c), sum_dy, sum_dy_xhat, dy, x, mean, invstd, n, ch, s,
                              part);
}
static void cu_bn_backward_apply(vt_backend *be, float *din, const float *dy, const float *x,
                                 const float *mean, const float *invstd, const float *gamma,
                                 const float *sum_dy, const float *sum_dy_xhat, int64_t count,
                                 int n, int ch, int64_t s) {
    cu_ctx *c = enter(be);
    vt_cuk_bn_backward_apply(c->stream, DT(c), din, dy, x, mean, invstd, gamma, sum_dy,
                             sum_dy_xhat, count, n, ch, s);
}

/* ---------------------------------------------------------------- activations ---- */

static void cu_relu_forward(vt_backend *be, float *out, const float *in, int64_t n) {
    cu_ctx *c = enter(be);
    vt_cuk_relu_forward(c->stream, DT(c), out, in, n);
}
static void cu_relu_backward(vt_backend *be, float *din, const float *dout, const float *out,
                             int64_t n) {
    cu_ctx *c = enter(be);
    vt_cuk_relu_backward(c->stream, DT(c), din, dout, out, n);
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
    cu_ctx *c = enter(be);
    vt_cuk_maxpool_forward(c->stream, DT(c), out, in, (int64_t)n * ch, pool_geom(in_thw, p));
}
static void cu_maxpool3d_backward(vt_backend *be, float *din, const float *dout, const float *in,
                                  int n, int ch, const int in_thw[3], const vt_pool3d_p *p) {
    if (n <= 0)
        return;
    cu_ctx *c = enter(be);
    vt_cuk_maxpool_backward(c->stream, DT(c), din, dout, in, (int64_t)n * ch, pool_geom(in_thw, p));
}
static void cu_avgpool3d_forward(vt_backend *be, float *out, const float *in, int n, int ch,
                                 const int in_thw[3], const vt_pool3d_p *p) {
    if (n <= 0)
        return;
    cu_ctx *c = enter(be);
    vt_cuk_avgpool_forward(c->stream, DT(c), out, in, (int64_t)n * ch, pool_geom(in_thw, p));
}
static void cu_avgpool3d_backward(vt_backend *be, float *din, const float *dout, int n, int ch,
                                  const int in_thw[3], const vt_pool3d_p *p) {
    if (n <= 0)
        return;
    cu_ctx *c = enter(be);
    vt_cuk_avgpool_backward(c->stream, DT(c), din, dout, (int64_t)n * ch, pool_geom(in_thw, p));
}
static void cu_gap_forward(vt_backend *be, float *out, const float *in, int n, int ch, int64_t s) {
    cu_ctx *c = enter(be);
    vt_cuk_gap_forward(c->stream, DT(c), out, in, (int64_t)n * ch, s);
}
static void cu_gap_backward(vt_backend *be, float *din, const float *dout, int n, int ch,
                            int64_t s) {
    cu_ctx *c = enter(be);
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
    cu_ctx *c = enter(be);
    const float one = 1.0f, zero = 0.0f;
    if (c->bf16) {
        const void *w16 = stage_w16(be, c, w, (int64_t)in_f * out_f);
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
    cu_ctx *c = enter(be);
    const float one = 1.0f, zero = 0.0f;
    if (c->bf16) {
        const int64_t nw = (int64_t)in_f * out_f;
        if (din) {
            const void *w16 = stage_w16(be, c, w, nw);
            gemm_bf16(c, CUBLAS_OP_N, CUBLAS_OP_N, in_f, n, out_f, w16, in_f, dout, out_f, 0.0f,
                      din, in_f);
        }
        void *dw16 = stage_dw16(be, c, nw);
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
    if (db)
        vt_cuk_colsum_acc(c->stream, VT_CUK_F32, db, dout, n, out_f);
}

/* ---------------------------------------------------------------- dropout ---- */

static void cu_dropout_forward(vt_backend *be, float *out, float *mask, const float *in, int64_t n,
                               float p, uint64_t seed) {
    /* The kept value is computed here exactly as cpu-ref computes it (one float division)
     * so the masks agree bit for bit. */
    const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    cu_ctx *c = enter(be);
    vt_cuk_dropout_forward(c->stream, DT(c), out, mask, in, n, p, scale, seed);
}
static void cu_dropout_backward(vt_backend *be, float *din, const float *dout, const float *mask,
                                int64_t n) {
    cu_ctx *c = enter(be);
    vt_cuk_dropout_backward(c->stream, DT(c), din, dout, mask, n);
}

/* ---------------------------------------------------------------- losses ---- */

static void cu_softmax_xent(vt_backend *be, float *loss, float *dlogits, float *prob,
                            const float *logits, const int32_t *label, int n, int k,
                            float smoothing, float grad_scale) {
    cu_ctx *c = enter(be);
    vt_cuk_softmax_xent(c->stream, DT(c), loss, dlogits, prob, logits, label, n, k, smoothing,
                        grad_scale);
}
static void cu_bce_logits(vt_backend *be, float *loss, float *dlogits, const float *logits,
                          const float *target, int n, int k, float grad_scale) {
    cu_ctx *c = enter(be);
    vt_cuk_bce_logits(c->stream, DT(c), loss, dlogits, logits, target, n, k, grad_scale);
}

/* ---------------------------------------------------------------- optimizers ---- */

static void cu_sgd_update(vt_backend *be, float *p, const float *g, float *buf, int64_t n,
                          float lr, float momentum, float dampening, float wd, int nesterov,
                          int64_t step) {
    VT_CHECK(momentum == 0 || buf, "sgd_update: momentum %g needs a buffer", (double)momentum);
    vt_cuk_sgd(enter(be)->stream, p, g, buf, n, lr, momentum, dampening, wd, nesterov, step <= 1);
}
static void cu_rmsprop_update(vt_backend *be, float *p, const float *g, float *sq, float *buf,
                              int64_t n, float lr, float alpha, float eps, float wd,
                              float momentum) {
    VT_CHECK(momentum <= 0 || buf, "rmsprop_update: momentum %g needs a buffer", (double)momentum);
    vt_cuk_rmsprop(enter(be)->stream, p, g, sq, buf, n, lr, alpha, eps, wd, momentum);
}
static void cu_adamw_update(vt_backend *be, float *p, const float *g, float *m, float *v,
                            int64_t n, float lr, float beta1, float beta2, float eps, float wd,
                            int64_t step) {
    /* The step's scalars, computed exactly as cpu-ref does (double, rounded once). */
    const double bc1 = 1.0 - pow(beta1, (double)step);
    const double bc2 = 1.0 - pow(beta2, (double)step);
    const float step_size = (float)(lr / bc1);
    const float bc2_sqrt = (float)sqrt(bc2);
    const float decay = 1 - lr * wd;
    vt_cuk_adamw(enter(be)->stream, p, g, m, v, n, decay, beta1, beta2, eps, step_size, bc2_sqrt);
}

/* ---------------------------------------------------------------- life cycle ---- */

static void cu_destroy(vt_backend *be) {
    cu_ctx *c = ctx_of(be);
    if (!c)
        return;
    CUDA_CHECK(cudaSetDevice(c->device));
    CUDA_CHECK(cudaStreamSynchronize(c->stream));
    for (int i = 0; i < c->nconv; i++)
        conv_free(c->conv[i]);
    free(c->conv);
    vt_backend_free_ptr(be, c->ws);
    vt_backend_free_ptr(be, c->blas_ws);
    vt_backend_free_ptr(be, c->scratch);
    vt_backend_free_ptr(be, c->w16);
    vt_backend_free_ptr(be, c->dw16);
    CUDA_CHECK(cudaStreamSynchronize(c->copy_stream));
    for (int i = 0; i < CU_UPLOAD_RING; i++)
        CUDA_CHECK(cudaEventDestroy(c->up_ev[i]));
    CUDA_CHECK(cudaEventDestroy(c->order_ev));
    CUDA_CHECK(cudaStreamDestroy(c->copy_stream));
    CUBLAS_CHECK(cublasDestroy(c->cublas));
    CUDNN_CHECK(cudnnDestroy(c->cudnn));
    pthread_mutex_lock(&c->lock);
    release_cache_locked(c);
    if (c->nlive)
        vt_warn("cuda%d: %zu allocations (%lld bytes) still live at destroy; freeing them\n",
                c->device, c->nlive, (long long)c->live_bytes);
    for (size_t i = 0; i < c->nlive; i++)
        CUDA_CHECK(cudaFree(c->live[i].ptr));
    pthread_mutex_unlock(&c->lock);
    free(c->live);
    free(c->cached);
    CUDA_CHECK(cudaFreeHost(c->host_result));
    CUDA_CHECK(cudaStreamDestroy(c->stream));
    pthread_mutex_destroy(&c->lock);
    free(c);
    be->ctx = NULL;
}

/* FP32, TF32 and — on compute capability >= 8.0, where cuDNN has bf16 convolutions and
 * tensor cores have bf16 — BF16. */
static int cu_set_precision(vt_backend *be, vt_precision p) {
    cu_ctx *c = enter(be);
    if (p == VT_PREC_BF16 && c->cc_major < 8)
        return -1;
    c->tf32 = p == VT_PREC_TF32;
    c->bf16 = p == VT_PREC_BF16;
    /* BF16's GEMMs are cublasGemmEx with CUBLAS_COMPUTE_32F: the math mode does not apply */
    CUBLAS_CHECK(cublasSetMathMode(c->cublas, c->tf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                      : CUBLAS_DEFAULT_MATH));
    return 0;
}

static const vt_backend_i cuda_i = {
    /* .name = */ "cuda",
    /* .destroy = */ cu_destroy,
    /* .alloc = */ cu_alloc,
    /* .free = */ cu_free,
    /* .to_device = */ cu_to_device,
    /* .to_host = */ cu_to_host,
    /* .copy = */ cu_copy,
    /* .synchronize = */ cu_synchronize,
    /* .host_alloc = */ cu_host_alloc,
    /* .host_free = */ cu_host_free,
    /* .upload = */ cu_upload,
    /* .upload_join = */ cu_upload_join,
    /* .upload_wait = */ cu_upload_wait,
    /* .set_precision = */ cu_set_precision,
    /* .fill = */ cu_fill,
    /* .scale = */ cu_scale,
    /* .axpy = */ cu_axpy,
    /* .add = */ cu_add,
    /* .sumsq = */ cu_sumsq,
    /* .act_from_f32 = */ cu_act_from_f32,
    /* .act_to_f32 = */ cu_act_to_f32,
    /* .conv3d_forward = */ cu_conv3d_forward,
    /* .conv3d_backward = */ cu_conv3d_backward,
    /* .bn_stats = */ cu_bn_stats,
    /* .bn_finalize = */ cu_bn_finalize,
    /* .bn_apply = */ cu_bn_apply,
    /* .bn_backward_reduce = */ cu_bn_backward_reduce,
    /* .bn_backward_apply = */ cu_bn_backward_apply,
    /* .relu_forward = */ cu_relu_forward,
    /* .relu_backward = */ cu_relu_backward,
    /* .maxpool3d_forward = */ cu_maxpool3d_forward,
    /* .maxpool3d_backward = */ cu_maxpool3d_backward,
    /* .avgpool3d_forward = */ cu_avgpool3d_forward,
    /* .avgpool3d_backward = */ cu_avgpool3d_backward,
    /* .gap_forward = */ cu_gap_forward,
    /* .gap_backward = */ cu_gap_backward,
    /* .linear_forward = */ cu_linear_forward,
    /* .linear_backward = */ cu_linear_backward,
    /* .dropout_forward = */ cu_dropout_forward,
    /* .dropout_backward = */ cu_dropout_backward,
    /* .softmax_xent = */ cu_softmax_xent,
    /* .bce_logits = */ cu_bce_logits,
    /* .sgd_update = */ cu_sgd_update,
    /* .rmsprop_update = */ cu_rmsprop_update,
    /* .adamw_update = */ cu_adamw_update,
};

vt_backend *vt_backend_cuda_init(int device, int64_t budget) {
    const int count = vt_cuda_device_count();
    VT_CHECK(device >= 0 && device < count, "cuda:%d: no such device (%d CUDA device%s found)",
             device, count, count == 1 ? "" : "s");
    VT_CHECK(budget >= 0, "cuda:%d: negative budget", device);
    CUDA_CHECK(cudaSetDevice(device));

    cu_ctx *c = vt_calloc(1, sizeof(*c));
    c->device = device;
    pthread_mutex_init(&c->lock, NULL);
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

void *vt_cuda_stream(vt_backend *be) { return (void *)ctx_of(be)->stream; }
int vt_cuda_device(const vt_backend *be) { return ctx_of(be)->device; }
int vt_cuda_tf32(const vt_backend *be) { return ctx_of(be)->tf32; }

void vt_cuda_set_tf32(vt_backend *be, int on) {
    char err[256];
    VT_CHECK(vt_backend_set_precision(be, on ? VT_PREC_TF32 : VT_PREC_FP32, err, sizeof err) == 0,
             "%s", err);
}

void vt_cuda_set_deterministic(vt_backend *be, int mode) {
    VT_CHECK(mode >= 0 && mode <= 2, "deterministic mode %d", mode);
    ctx_of(be)->det = mode;
}

void vt_cuda_mem_stats_get(vt_backend *be, vt_cuda_mem_stats *out) {
    cu_ctx *c = ctx_of(be);
    pthread_mutex_lock(&c->lock);
    out->budget = be->budget;
    out->live_bytes = c->live_bytes;
    out->cached_bytes = c->cached_bytes;
    out->high_water = c->high_water;
    out->device_mallocs = c->mallocs;
    out->cache_hits = c->hits;
    out->workspace_bytes = (int64_t)c->ws_bytes;
    out->conv_shapes = c->nconv;
    pthread_mutex_unlock(&c->lock);
}
