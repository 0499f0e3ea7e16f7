/*
 * cuda_convbench.c: times one convolution shape in cuDNN's three directions, NCDHW or
 * NDHWC, FP32, TF32 or BF16 (cuda_convbench.h; `vidtrain bench conv`). It sets up the
 * descriptors the way the backend does (cuda_conv.c: cross-correlation, float compute,
 * the precision's math type), asks cuDNN's timed search (cudnnFind*Ex) for every
 * algorithm, keeps the fastest one the precision's math allows and the fastest
 * deterministic one, and re-times each over `reps` calls with cudaEvents (Find runs each
 * algorithm once: one run is noise at the 0.1 ms scale).
 *
 * It stands apart from the backend on purpose: its own handle, stream and buffers, so a
 * layout the backend does not use (NDHWC) can be measured before the backend changes.
 * The buffers hold a constant byte pattern (0x3c: 0.0116 in bf16 and ~0.0115 as a
 * float), not zeros: no kernel can take a short cut on them, and none is denormal.
 * It must never leave memory or descriptors behind, also when a call fails.
 */
#include "models/cuda/cuda_convbench.h"

#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "base/common.h"
#include "models/cuda/cuda_check.h"

#define CB_ALGOS 16

typedef struct cb_perf {
    int algo;
    cudnnStatus_t status;
    size_t memory;
    cudnnDeterminism_t det;
    cudnnMathType_t math;
} cb_perf;

#define CB_FROM(r, perf, got)                                                                  \
    for (int i_ = 0; i_ < (got); i_++)                                                         \
    (r)[i_] = (cb_perf){(int)(perf)[i_].algo, (perf)[i_].status, (perf)[i_].memory,            \
                        (perf)[i_].determinism, (perf)[i_].mathType}

typedef struct cb {
    cudnnHandle_t h;
    cudaStream_t st;
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t cd;
    void *dx, *dy, *dw, *ws;
    size_t ws_bytes;
} cb;

/* (n, c, t, h, w) in NCDHW or NDHWC strides. */
static void set_tensor(cudnnTensorDescriptor_t d, cudnnDataType_t dt, int ndhwc, int n, int c,
                       int t, int h, int w) {
    const int dims[5] = {n, c, t, h, w};
    int st[5];
    if (ndhwc) {
        st[1] = 1;
        st[4] = c;
        st[3] = w * c;
        st[2] = h * w * c;
        st[0] = t * h * w * c;
    } else {
        st[4] = 1;
        st[3] = w;
        st[2] = h * w;
        st[1] = t * h * w;
        st[0] = c * t * h * w;
    }
    CUDNN_CHECK(cudnnSetTensorNdDescriptor(d, dt, 5, dims, st));
}

/* dir 0: forward, 1: backward data, 2: backward filter; algo < 0: Find into r. Returns how
 * many results (Find) or the status of one call. */
static int run(cb *b, int dir, int algo, size_t ws, cb_perf *r) {
    const float one = 1.0f, zero = 0.0f;
    int got = 0;
    if (dir == 0) {
        if (algo >= 0)
            return cudnnConvolutionForward(b->h, &one, b->x, b->dx, b->w, b->dw, b->cd,
                                           (cudnnConvolutionFwdAlgo_t)algo, b->ws, ws, &zero,
                                           b->y, b->dy);
        cudnnConvolutionFwdAlgoPerf_t perf[CB_ALGOS];
        if (cudnnFindConvolutionForwardAlgorithmEx(b->h, b->x, b->dx, b->w, b->dw, b->cd, b->y,
                                                   b->dy, CB_ALGOS, &got, perf, b->ws,
                                                   b->ws_bytes) != CUDNN_STATUS_SUCCESS)
            return 0;
        CB_FROM(r, perf, got);
    } else if (dir == 1) {
        if (algo >= 0)
            return cudnnConvolutionBackwardData(b->h, &one, b->w, b->dw, b->y, b->dy, b->cd,
                                                (cudnnConvolutionBwdDataAlgo_t)algo, b->ws, ws,
                                                &zero, b->x, b->dx);
        cudnnConvolutionBwdDataAlgoPerf_t perf[CB_ALGOS];
        if (cudnnFindConvolutionBackwardDataAlgorithmEx(b->h, b->w, b->dw, b->y, b->dy, b->cd,
                                                        b->x, b->dx, CB_ALGOS, &got, perf, b->ws,
                                                        b->ws_bytes) != CUDNN_STATUS_SUCCESS)
            return 0;
        CB_FROM(r, perf, got);
    } else {
        if (algo >= 0)
            return cudnnConvolutionBackwardFilter(b->h, &one, b->x, b->dx, b->y, b->dy, b->cd,
                                                  (cudnnConvolutionBwdFilterAlgo_t)algo, b->ws,
                                                  ws, &zero, b->w, b->dw);
        cudnnConvolutionBwdFilterAlgoPerf_t perf[CB_ALGOS];
        if (cudnnFindConvolutionBackwardFilterAlgorithmEx(b->h, b->x, b->dx, b->y, b->dy, b->cd,
                                                          b->w, b->dw, CB_ALGOS, &got, perf,
                                                          b->ws, b->ws_bytes) !=
            CUDNN_STATUS_SUCCESS)
            return 0;
        CB_FROM(r, perf, got);
    }
    return got;
}

/* Mean ms of reps calls of one algorithm (after one untimed call); < 0 when it fails.
 * FP32 keeps FMA_MATH on the descriptor whatever math the result reports (as cuda_conv.c
 * adopt() does: DEFAULT_MATH would permit TF32 on Ampere and newer). */
static double time_algo(cb *b, int dir, const cb_perf *r, int reps, vt_precision prec) {
    CUDNN_CHECK(cudnnSetConvolutionMathType(b->cd, prec == VT_PREC_FP32 ? CUDNN_FMA_MATH
                                                                        : r->math));
    if (run(b, dir, r->algo, r->memory, NULL) != CUDNN_STATUS_SUCCESS)
        return -1;
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    CUDA_CHECK(cudaEventRecord(e0, b->st));
    int ok = 1;
    for (int i = 0; i < reps && ok; i++)
        ok = run(b, dir, r->algo, r->memory, NULL) == CUDNN_STATUS_SUCCESS;
    CUDA_CHECK(cudaEventRecord(e1, b->st));
    CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    CUDA_CHECK(cudaEventDestroy(e0));
    CUDA_CHECK(cudaEventDestroy(e1));
    return ok ? ms / reps : -1;
}

static void bench_dir(cb *b, int dir, vt_precision prec, cudnnMathType_t math, int reps,
                      vt_convbench_dir *o) {
    memset(o, 0, sizeof *o);
    cb_perf r[CB_ALGOS];
    CUDNN_CHECK(cudnnSetConvolutionMathType(b->cd, math));
    const int got = run(b, dir, -1, 0, r);
    int first = -1, first_det = -1;
    for (int i = 0; i < got; i++) {
        if (r[i].status != CUDNN_STATUS_SUCCESS || r[i].memory > b->ws_bytes)
            continue;
        /* FP32 promises FP32 arithmetic: no tensor-op result (as cuda_conv.c choose()) */
        if (prec == VT_PREC_FP32 && r[i].math != CUDNN_FMA_MATH && r[i].math != CUDNN_DEFAULT_MATH)
            continue;
        if (first < 0)
            first = i;
        if (first_det < 0 && r[i].det == CUDNN_DETERMINISTIC)
            first_det = i;
    }
    if (first >= 0) {
        o->ms = time_algo(b, dir, &r[first], reps, prec);
        o->ok = o->ms >= 0;
        o->algo = r[first].algo;
        o->ws = r[first].memory;
        o->tensor_ops = r[first].math == CUDNN_TENSOR_OP_MATH ||
                        r[first].math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
    }
    if (first_det >= 0) {
        o->det_ms = first_det == first ? o->ms : time_algo(b, dir, &r[first_det], reps, prec);
        o->det_ok = o->det_ms >= 0;
        o->det_algo = r[first_det].algo;
    }
}

int vt_cuda_convbench(int device, int n, const int thw[3], const vt_conv3d_p *p,
                      vt_precision prec, int ndhwc, size_t ws_max, int reps,
                      vt_convbench_dir out[3], char *err, size_t errlen) {
    memset(out, 0, 3 * sizeof *out);
    if (cudaSetDevice(device) != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(err, errlen, "cuda:%d: no such device", device);
        return -1;
    }
    int o[3];
    for (int d = 0; d < 3; d++)
        o[d] = vt_conv_out(thw[d], p->k[d], p->s[d], p->p[d]);
    const int es = prec == VT_PREC_BF16 ? 2 : 4;
    const cudnnDataType_t dt = prec == VT_PREC_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
    const cudnnMathType_t math = prec == VT_PREC_BF16   ? CUDNN_TENSOR_OP_MATH
                                 : prec == VT_PREC_TF32 ? CUDNN_DEFAULT_MATH
                                                        : CUDNN_FMA_MATH;
    const size_t nx = (size_t)n * p->cin * thw[0] * thw[1] * thw[2];
    const size_t ny = (size_t)n * p->cout * o[0] * o[1] * o[2];
    const size_t nw = (size_t)p->cout * p->cin * p->k[0] * p->k[1] * p->k[2];
    cb b;
    memset(&b, 0, sizeof b);
    int rc = -1;
    CUDA_CHECK(cudaStreamCreateWithFlags(&b.st, cudaStreamNonBlocking));
    CUDNN_CHECK(cudnnCreate(&b.h));
    CUDNN_CHECK(cudnnSetStream(b.h, b.st));
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&b.x));
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&b.y));
    CUDNN_CHECK(cudnnCreateFilterDescriptor(&b.w));
    CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&b.cd));
    set_tensor(b.x, dt, ndhwc, n, p->cin, thw[0], thw[1], thw[2]);
    set_tensor(b.y, dt, ndhwc, n, p->cout, o[0], o[1], o[2]);
    const int wd[5] = {p->cout, p->cin, p->k[0], p->k[1], p->k[2]};
    CUDNN_CHECK(cudnnSetFilterNdDescriptor(b.w, dt, ndhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                                           5, wd));
    const int dil[3] = {1, 1, 1};
    CUDNN_CHECK(cudnnSetConvolutionNdDescriptor(b.cd, 3, p->p, p->s, dil, CUDNN_CROSS_CORRELATION,
                                                CUDNN_DATA_FLOAT));
    /* the workspace: as large as allowed, halved until the device has it */
    b.ws_bytes = ws_max;
    while (b.ws_bytes >= ((size_t)1 << 20) && cudaMalloc(&b.ws, b.ws_bytes) != cudaSuccess) {
        (void)cudaGetLastError();
        b.ws = NULL;
        b.ws_bytes /= 2;
    }
    if (!b.ws)
        b.ws_bytes = 0;
    if (cudaMalloc(&b.dx, nx * es) != cudaSuccess || cudaMalloc(&b.dy, ny * es) != cudaSuccess ||
        cudaMalloc(&b.dw, nw * es) != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(err, errlen, "cuda:%d: out of memory for conv %d->%d on %dx%dx%dx%d (%zu + %zu "
                 "elements)\n  hint: a smaller --batch or --clip", device, p->cin, p->cout, n,
                 thw[0], thw[1], thw[2], nx, ny);
        goto done;
    }
    CUDA_CHECK(cudaMemsetAsync(b.dx, 0x3c, nx * es, b.st));
    CUDA_CHECK(cudaMemsetAsync(b.dy, 0x3c, ny * es, b.st));
    CUDA_CHECK(cudaMemsetAsync(b.dw, 0x3c, nw * es, b.st));
    for (int d = 0; d < 3; d++)
        bench_dir(&b, d, prec, math, reps > 0 ? reps : 1, &out[d]);
    CUDA_CHECK(cudaStreamSynchronize(b.st));
    rc = 0;
done:
    cudaFree(b.dx);
    cudaFree(b.dy);
    cudaFree(b.dw);
    cudaFree(b.ws);
    (void)cudaGetLastError();
    CUDNN_CHECK(cudnnDestroyConvolutionDescriptor(b.cd));
    CUDNN_CHECK(cudnnDestroyFilterDescriptor(b.w));
    CUDNN_CHECK(cudnnDestroyTensorDescriptor(b.x));
    CUDNN_CHECK(cudnnDestroyTensorDescriptor(b.y));
    CUDNN_CHECK(cudnnDestroy(b.h));
    CUDA_CHECK(cudaStreamDestroy(b.st));
    return rc;
}
