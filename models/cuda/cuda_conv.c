/*
 * cuda_conv.c: the CUDA backend's conv3d (backend_cuda_impl.h) — cuDNN Nd convolutions,
 * forward, backward data, backward filter with beta = 1 accumulation, backward bias —
 * with a cache of descriptors per shape, and the choice of cuDNN's algorithm per shape
 * and direction: timed once (cudnnFind*Ex, like torch.backends.cudnn.benchmark) or taken
 * from cuDNN's heuristic order (VT_CUDA_CONV_ALGO=heuristic), within the workspace the
 * budget leaves, preferring deterministic algorithms (VT_CUDA_DETERMINISTIC), and FP32
 * math unless TF32 or BF16 allows tensor ops (conv_math: the math type per precision).
 * The three directions differ only in how cuDNN is asked (query()); one choice (pick())
 * serves all three.
 *
 * BF16 (backend.h): x, w, y bf16 in cuDNN's PSEUDO_BFLOAT16 configuration (compute type
 * float); the float32 master weights go through the bf16 staging copy, the weight
 * gradient comes out in bf16 and is added to the float32 one, and a bias is written into
 * the output first and accumulated onto with beta = 1, so output + bias is rounded once,
 * as cpu-ref does.
 *
 * It must never choose an algorithm that breaks the precision's promise (no tensor-op
 * math without TF32 or BF16), never let a workspace pass the budget, and never
 * synchronise the stream.
 */
#include <string.h>

#include "base/common.h"
#include "models/cuda/backend_cuda_impl.h"
#include "models/cuda/cuda_check.h"
#include "models/cuda/kernels.h"

/* The three directions of a convolution, each with its own algorithm. */
typedef enum cu_dir { CU_FWD, CU_BWD_DATA, CU_BWD_FILTER } cu_dir;
static const char *const dir_short[3] = {"fwd", "bwd-data", "bwd-filter"};
static const char *const dir_long[3] = {"forward", "backward-data", "backward-filter"};

/* A direction's convolution descriptor (its own, because the math type cuDNN reports for
 * the chosen algorithm is set per descriptor and may differ by direction) and choice. */
typedef struct cu_algo {
    cudnnConvolutionDescriptor_t desc;
    int have;       /* chosen */
    int algo;       /* a cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t */
    size_t ws;      /* the workspace it runs with */
} cu_algo;

/* One convolution shape: descriptors and the algorithm chosen for each direction. */
struct cu_conv {
    int n, thw[3], tf32, bf16, det;
    vt_conv3d_p p;
    cudnnTensorDescriptor_t x, y, b;
    cudnnFilterDescriptor_t w;
    cu_algo dir[3]; /* by cu_dir */
};

static void set_tensor5(cudnnTensorDescriptor_t d, cudnnDataType_t dt, int n, int c, int t, int h,
                        int w) {
    const int dims[5] = {n, c, t, h, w};
    const int strides[5] = {c * t * h * w, t * h * w, h * w, w, 1};
    CUDNN_CHECK(cudnnSetTensorNdDescriptor(d, dt, 5, dims, strides));
}

/* The math type a precision asks cuDNN for before Find/Get (cudnnMathType_t, cuDNN 9):
 * FP32 FMA_MATH — FMA kernels only, so FP32 stays FP32 on Ampere and newer, where
 * DEFAULT_MATH would permit TF32; TF32 DEFAULT_MATH — the documented way to permit TF32
 * tensor cores for float data (PyTorch's choice under allow_tf32); BF16 TENSOR_OP_MATH —
 * DEFAULT_MATH documents only TF32 as permitted, and the legacy API takes bf16 tensor-core
 * kernels when tensor ops are asked for (PyTorch asks TENSOR_OP_MATH for half and bf16).
 * adopt() then sets what the chosen algorithm reports. */
static cudnnMathType_t conv_math(int tf32, int bf16) {
    return bf16 ? CUDNN_TENSOR_OP_MATH : tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
}

/* The compute type is float in every precision (BF16: cuDNN's PSEUDO_BFLOAT16
 * configuration). */
static cudnnConvolutionDescriptor_t make_conv_desc(const vt_conv3d_p *p, cudnnMathType_t math) {
    cudnnConvolutionDescriptor_t d;
    const int dil[3] = {1, 1, 1};
    CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d));
    /* CROSS_CORRELATION is what PyTorch (and cpu-ref) call convolution. */
    CUDNN_CHECK(cudnnSetConvolutionNdDescriptor(d, 3, p->p, p->s, dil, CUDNN_CROSS_CORRELATION,
                                                CUDNN_DATA_FLOAT));
    CUDNN_CHECK(cudnnSetConvolutionMathType(d, math));
    /* groups (X3D's depthwise convs): cuDNN's group count, the filter (Cout, Cin/groups) */
    CUDNN_CHECK(cudnnSetConvolutionGroupCount(d, vt_conv_groups(p)));
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
    const int wdims[5] = {p->cout, p->cin / vt_conv_groups(p), p->k[0], p->k[1], p->k[2]};
    CUDNN_CHECK(cudnnSetFilterNdDescriptor(e->w, dt, CUDNN_TENSOR_NCHW, 5, wdims));
    for (int d = 0; d < 3; d++)
        e->dir[d].desc = make_conv_desc(p, conv_math(c->tf32, c->bf16));
    int od[5];
    CUDNN_CHECK(cudnnGetConvolutionNdForwardOutputDim(e->dir[CU_FWD].desc, e->x, e->w, 5, od));
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
    for (int d = 0; d < 3; d++)
        CUDNN_CHECK(cudnnDestroyConvolutionDescriptor(e->dir[d].desc));
    free(e);
}

void vt_cuda_conv_free_all(cu_ctx *c) {
    for (int i = 0; i < c->nconv; i++)
        conv_free(c->conv[i]);
    free(c->conv);
    c->conv = NULL;
    c->nconv = c->capconv = 0;
}

/* ---------------------------------------------------------------- choosing ---- */

/* The three cuDNN perf structs, normalised so one chooser serves all directions. */
typedef struct cu_perf {
    int algo;
    cudnnStatus_t status;
    float time;
    size_t memory;
    cudnnDeterminism_t det;
    cudnnMathType_t math;
} cu_perf;

/* The perf structs of the three directions have the same fields: copy any of them. */
#define CU_PERF_FROM(r, perf, got)                                                             \
    for (int i_ = 0; i_ < (got); i_++)                                                         \
    (r)[i_] = (cu_perf){(int)(perf)[i_].algo, (perf)[i_].status, (perf)[i_].time,              \
                        (perf)[i_].memory, (perf)[i_].determinism, (perf)[i_].mathType}

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
        vt_cuda_grow(be, &c->ws, &c->ws_bytes, r->memory, "cuDNN workspace");
}

#define CU_MAX_ALGOS 16

/* cuDNN's results for direction d into r (returns how many): timed by running each
 * algorithm (Find) when out is not NULL — out is written, tmp (ws bytes) is the
 * workspace — else its heuristic order (Get_v7). The operands a, b and out are the
 * direction's: forward x, w -> y; backward data w, dy -> dx; backward filter x, dy -> dw. */
static int query(cu_ctx *c, cu_conv *e, cu_dir d, const void *a, const void *b, void *out,
                 void *tmp, size_t ws, cu_perf *r) {
    const cudnnConvolutionDescriptor_t cd = e->dir[d].desc;
    int got = 0;
    switch (d) {
    case CU_FWD: {
        cudnnConvolutionFwdAlgoPerf_t perf[CU_MAX_ALGOS];
        if (out)
            CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(c->cudnn, e->x, a, e->w, b, cd,
                                                               e->y, out, CU_MAX_ALGOS, &got,
                                                               perf, tmp, ws));
        else
            CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(c->cudnn, e->x, e->w, cd, e->y,
                                                               CU_MAX_ALGOS, &got, perf));
        CU_PERF_FROM(r, perf, got);
        break;
    }
    case CU_BWD_DATA: {
        cudnnConvolutionBwdDataAlgoPerf_t perf[CU_MAX_ALGOS];
        if (out)
            CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(c->cudnn, e->w, a, e->y, b,
                                                                    cd, e->x, out, CU_MAX_ALGOS,
                                                                    &got, perf, tmp, ws));
        else
            CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(c->cudnn, e->w, e->y, cd,
                                                                    e->x, CU_MAX_ALGOS, &got,
                                                                    perf));
        CU_PERF_FROM(r, perf, got);
        break;
    }
    case CU_BWD_FILTER: {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[CU_MAX_ALGOS];
        if (out)
            CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(c->cudnn, e->x, a, e->y, b,
                                                                      cd, e->w, out,
                                                                      CU_MAX_ALGOS, &got, perf,
                                                                      tmp, ws));
        else
            CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(c->cudnn, e->x, e->y, cd,
                                                                      e->w, CU_MAX_ALGOS, &got,
                                                                      perf));
        CU_PERF_FROM(r, perf, got);
        break;
    }
    }
    return got;
}

static int64_t conv_weights(const vt_conv3d_p *p) {
    return (int64_t)p->cout * (p->cin / vt_conv_groups(p)) * p->k[0] * p->k[1] * p->k[2];
}

/* Choose direction d's algorithm for shape e, once. out: where a timed search may write
 * the direction's result (the real call overwrites it next). Only the FP32 backward
 * filter passes none, because its real dw accumulates (beta = 1): the search then writes
 * a scratch filter allocated here — and when the budget has no room for one (the plan
 * does not count it: a budget filled by the memory policy may be that tight), this
 * shape takes cuDNN's heuristic choice instead of aborting the run. */
static void pick(vt_backend *be, cu_ctx *c, cu_conv *e, cu_dir d, const void *a, const void *b,
                 void *out) {
    void *own = NULL;
    if (c->find && !out) {
        const size_t wbytes = sizeof(float) * (size_t)conv_weights(&e->p);
        out = own = vt_backend_alloc(be, wbytes);
        if (!own)
            vt_debug("cuda%d: no room for a %zu B search filter: heuristic %s choice\n",
                     c->device, wbytes, dir_short[d]);
    }
    cu_perf r[CU_MAX_ALGOS];
    const int timed = c->find && out;
    /* A timed search runs in the room of the persistent workspace: it is released first
     * (stream-ordered, like vt_cuda_grow) and grown back afterwards to at least its old
     * size, which the algorithms already chosen for other shapes run with. The memory
     * plan reserves that room once (vt_memplan_cuda_reserve). */
    const size_t keep = c->ws_bytes;
    if (timed && c->ws) {
        vt_backend_free_ptr(be, c->ws);
        c->ws = NULL;
        c->ws_bytes = 0;
    }
    size_t ws_max = ws_available(be, c);
    int got;
    if (timed) {
        void *tmp = find_ws(be, &ws_max);
        got = query(c, e, d, a, b, out, tmp, ws_max, r);
        vt_backend_free_ptr(be, tmp);
        vt_backend_free_ptr(be, own);
    } else {
        got = query(c, e, d, a, b, NULL, NULL, 0, r);
    }
    int k = choose(r, got, ws_max, c->tf32 || c->bf16, c->cc_major, c->det, timed);
    if (k < 0)
        die_no_algo(dir_long[d], e, ws_max, c->det);
    cu_algo *al = &e->dir[d];
    al->algo = r[k].algo;
    al->ws = r[k].memory;
    adopt(be, c, al->desc, &r[k]);
    if (keep > c->ws_bytes)
        vt_cuda_grow(be, &c->ws, &c->ws_bytes, keep, "cuDNN workspace");
    al->have = 1;
    vt_debug("cuda%d: conv %d->%d n=%d %s algo %d (%zu B workspace, %.3f ms)\n", c->device,
             e->p.cin, e->p.cout, e->n, dir_short[d], r[k].algo, r[k].memory, (double)r[k].time);
}

/* ---------------------------------------------------------------- the ops ---- */

void vt_cuda_conv3d_forward(vt_backend *be, float *out, const float *in, const float *w,
                            const float *b, int n, const int in_thw[3], const vt_conv3d_p *p) {
    if (n <= 0)
        return;
    cu_ctx *c = vt_cuda_enter(be);
    cu_conv *e = conv_get(c, n, in_thw, p);
    const cu_algo *f = &e->dir[CU_FWD];
    const float one = 1.0f, zero = 0.0f;
    if (c->bf16) {
        const void *w16 = vt_cuda_stage_w16(be, c, w, conv_weights(p));
        if (!f->have) /* before the bias goes in: Find overwrites out */
            pick(be, c, e, CU_FWD, in, w16, out);
        const int To = vt_conv_out(in_thw[0], p->k[0], p->s[0], p->p[0]);
        const int Ho = vt_conv_out(in_thw[1], p->k[1], p->s[1], p->p[1]);
        const int Wo = vt_conv_out(in_thw[2], p->k[2], p->s[2], p->p[2]);
        if (b) /* y = bias, then y = conv + 1 * y: one rounding of the sum */
            vt_cuk_fill_bias(c->stream, VT_CUK_BF16, out, b, (int64_t)n * p->cout, p->cout,
                             (int64_t)To * Ho * Wo);
        CUDNN_CHECK(cudnnConvolutionForward(c->cudnn, &one, e->x, in, e->w, w16, f->desc,
                                            (cudnnConvolutionFwdAlgo_t)f->algo,
                                            f->ws ? c->ws : NULL, f->ws, b ? &one : &zero, e->y,
                                            out));
        return;
    }
    if (!f->have)
        pick(be, c, e, CU_FWD, in, w, out);
    CUDNN_CHECK(cudnnConvolutionForward(c->cudnn, &one, e->x, in, e->w, w, f->desc,
                                        (cudnnConvolutionFwdAlgo_t)f->algo, f->ws ? c->ws : NULL,
                                        f->ws, &zero, e->y, out));
    if (b)
        CUDNN_CHECK(cudnnAddTensor(c->cudnn, &one, e->b, b, &one, e->y, out));
}

void vt_cuda_conv3d_backward(vt_backend *be, float *din, float *dw, float *db,
                             const float *dout, const float *in, const float *w, int n,
                             const int in_thw[3], const vt_conv3d_p *p) {
    if (n <= 0)
        return;
    cu_ctx *c = vt_cuda_enter(be);
    cu_conv *e = conv_get(c, n, in_thw, p);
    const cu_algo *bd = &e->dir[CU_BWD_DATA], *bf = &e->dir[CU_BWD_FILTER];
    const float one = 1.0f, zero = 0.0f;
    if (c->bf16) {
        const int64_t nw = conv_weights(p);
        if (din) {
            const void *w16 = vt_cuda_stage_w16(be, c, w, nw);
            if (!bd->have)
                pick(be, c, e, CU_BWD_DATA, w16, dout, din);
            CUDNN_CHECK(cudnnConvolutionBackwardData(c->cudnn, &one, e->w, w16, e->y, dout,
                                                     bd->desc,
                                                     (cudnnConvolutionBwdDataAlgo_t)bd->algo,
                                                     bd->ws ? c->ws : NULL, bd->ws, &zero, e->x,
                                                     din));
        }
        /* this call's weight gradient in bf16 (beta = 0), then added to the float one */
        void *dw16 = vt_cuda_stage_dw16(be, c, nw);
        if (!bf->have)
            pick(be, c, e, CU_BWD_FILTER, in, dout, dw16);
        CUDNN_CHECK(cudnnConvolutionBackwardFilter(c->cudnn, &one, e->x, in, e->y, dout, bf->desc,
                                                   (cudnnConvolutionBwdFilterAlgo_t)bf->algo,
                                                   bf->ws ? c->ws : NULL, bf->ws, &zero, e->w,
                                                   dw16));
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
        if (!bd->have)
            pick(be, c, e, CU_BWD_DATA, w, dout, din);
        CUDNN_CHECK(cudnnConvolutionBackwardData(c->cudnn, &one, e->w, w, e->y, dout, bd->desc,
                                                 (cudnnConvolutionBwdDataAlgo_t)bd->algo,
                                                 bd->ws ? c->ws : NULL, bd->ws, &zero, e->x,
                                                 din));
    }
    /* parameter gradients: accumulated (beta = 1) */
    if (!bf->have)
        pick(be, c, e, CU_BWD_FILTER, in, dout, NULL);
    CUDNN_CHECK(cudnnConvolutionBackwardFilter(c->cudnn, &one, e->x, in, e->y, dout, bf->desc,
                                               (cudnnConvolutionBwdFilterAlgo_t)bf->algo,
                                               bf->ws ? c->ws : NULL, bf->ws, &one, e->w, dw));
    if (db)
        CUDNN_CHECK(cudnnConvolutionBackwardBias(c->cudnn, &one, e->y, dout, &one, e->b, db));
}
