/*
 * kernels.cu: vidtrain's own CUDA kernels and their thin extern "C" launchers
 * (kernels.h) — element-wise ops, batch-norm statistics and application, pooling,
 * global average pooling, dropout, losses, optimizer updates and the device-local
 * reducer's rank-order sum. cuDNN does the convolutions and cuBLAS the GEMMs
 * (cuda_conv.c, backend_cuda.c); everything whose semantics must match cpu-ref exactly
 * lives here.
 *
 * Rules this file keeps:
 *  - the arithmetic is cpu-ref's (models/cpu_ref.c): sums that cpu-ref forms in double
 *    are formed in double here; float formulas use __fmul_rn/__fadd_rn where cpu-ref
 *    has a separate multiply and add, so nvcc cannot contract them into an FMA and the
 *    results stay bitwise equal to the CPU's (x86-64 without -march has no FMA);
 *  - every reduction has a fixed order (per-thread strided partials, then a fixed
 *    shared-memory tree, then partials reduced in index order): no atomics on floats,
 *    so a run is bitwise repeatable on the same GPU;
 *  - launchers never allocate and never synchronise; every launch is checked;
 *  - activations ([A] in models/backend.h) are float or __nv_bfloat16 as the launcher's
 *    vt_cuk_dt says: kernels are templates on that type, load through ld() (exact) and
 *    store through st(), which rounds a float to nearest even bf16 once, as cpu-ref's
 *    ast() does; everything else (statistics, masks, losses, optimizer) stays float.
 * It must never include FFmpeg or any vidtrain header other than kernels.h and
 * cuda_check.h (nvcc compiles this file as C++).
 */
#include <math.h>
#include <stdint.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "models/cuda/cuda_check.h"
#include "models/cuda/kernels.h"

#define VT_THREADS 256
/* Grid-stride loops cap the grid: enough blocks to fill any current GPU many times. */
#define VT_MAX_BLOCKS 65535

static unsigned vt_blocks(int64_t n) {
    int64_t b = (n + VT_THREADS - 1) / VT_THREADS;
    if (b < 1)
        b = 1;
    return (unsigned)(b > VT_MAX_BLOCKS ? VT_MAX_BLOCKS : b);
}

#define VT_GRID_STRIDE(i, n)                                                                   \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                  \
         i += (int64_t)gridDim.x * blockDim.x)

/* Activation element access: float, or bf16 widened exactly / rounded to nearest even. */
__device__ static inline float ld(const float *p, int64_t i) { return p[i]; }
__device__ static inline float ld(const __nv_bfloat16 *p, int64_t i) { return __bfloat162float(p[i]); }
__device__ static inline void st(float *p, int64_t i, float v) { p[i] = v; }
__device__ static inline void st(__nv_bfloat16 *p, int64_t i, float v) { p[i] = __float2bfloat16_rn(v); }
/* A parameter-gradient contribution as it is added to a float gradient (cpu-ref pacc). */
__device__ static inline float pacc(const float *, double g) { return (float)g; }
__device__ static inline float pacc(const __nv_bfloat16 *, double g) {
    return __bfloat162float(__float2bfloat16_rn((float)g));
}

/* Run the statement with A the activation type of dt. */
#define VT_DT(dt, ...)                                                                         \
    do {                                                                                       \
        if ((dt) == VT_CUK_BF16) {                                                             \
            typedef __nv_bfloat16 A;                                                           \
            __VA_ARGS__;                                                                       \
        } else {                                                                               \
            typedef float A;                                                                   \
            __VA_ARGS__;                                                                       \
        }                                                                                      \
    } while (0)

/* Tree reduction of one double per thread in a VT_THREADS block; result in sh[0]. Fixed
 * order, so deterministic. */
__device__ static double vt_block_sum(double v, double *sh) {
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int w = VT_THREADS / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w)
            sh[threadIdx.x] += sh[threadIdx.x + w];
        __syncthreads();
    }
    return sh[0];
}

/* ------------------------------------------------------------------ element-wise */

__global__ static void k_fill(float *x, float v, int64_t n) {
    VT_GRID_STRIDE(i, n) x[i] = v;
}
__global__ static void k_scale(float *x, float a, int64_t n) {
    VT_GRID_STRIDE(i, n) x[i] = __fmul_rn(x[i], a);
}
__global__ static void k_axpy(float *y, float a, const float *x, int64_t n) {
    VT_GRID_STRIDE(i, n) y[i] = __fadd_rn(y[i], __fmul_rn(a, x[i]));
}
__global__ static void k_round_even(float *x, int64_t n) {
    VT_GRID_STRIDE(i, n) x[i] = rintf(x[i]);
}
template <typename A>
__global__ static void k_add(A *out, const A *a, const A *b, int64_t n) {
    VT_GRID_STRIDE(i, n) st(out, i, __fadd_rn(ld(a, i), ld(b, i)));
}

extern "C" void vt_cuk_fill(cudaStream_t st, float *x, float v, int64_t n) {
    if (n <= 0)
        return;
    k_fill<<<vt_blocks(n), VT_THREADS, 0, st>>>(x, v, n);
    CUDA_LAUNCH_CHECK();
}
extern "C" void vt_cuk_scale(cudaStream_t st, float *x, float a, int64_t n) {
    if (n <= 0)
        return;
    k_scale<<<vt_blocks(n), VT_THREADS, 0, st>>>(x, a, n);
    CUDA_LAUNCH_CHECK();
}
extern "C" void vt_cuk_axpy(cudaStream_t st, float *y, float a, const float *x, int64_t n) {
    if (n <= 0)
        return;
    k_axpy<<<vt_blocks(n), VT_THREADS, 0, st>>>(y, a, x, n);
    CUDA_LAUNCH_CHECK();
}
extern "C" void vt_cuk_round_even(cudaStream_t st, float *x, int64_t n) {
    if (n <= 0)
        return;
    k_round_even<<<vt_blocks(n), VT_THREADS, 0, st>>>(x, n);
    CUDA_LAUNCH_CHECK();
}
extern "C" void vt_cuk_add(cudaStream_t st, vt_cuk_dt dt, void *out, const void *a,
                           const void *b, int64_t n) {
    if (n <= 0)
        return;
    VT_DT(dt, k_add<A><<<vt_blocks(n), VT_THREADS, 0, st>>>((A *)out, (const A *)a,
                                                            (const A *)b, n));
    CUDA_LAUNCH_CHECK();
}

/* dst (dt) = src (float), rounded for bf16; dst (float) = src (dt), exact. */
template <typename D, typename S>
__global__ static void k_convert(D *dst, const S *src, int64_t n) {
    VT_GRID_STRIDE(i, n) st(dst, i, ld(src, i));
}
extern "C" void vt_cuk_to_act(cudaStream_t st, vt_cuk_dt dt, void *dst, const float *src,
                              int64_t n) {
    if (n <= 0)
        return;
    VT_DT(dt, k_convert<A, float><<<vt_blocks(n), VT_THREADS, 0, st>>>((A *)dst, src, n));
    CUDA_LAUNCH_CHECK();
}
extern "C" void vt_cuk_from_act(cudaStream_t st, vt_cuk_dt dt, float *dst, const void *src,
                                int64_t n) {
    if (n <= 0)
        return;
    VT_DT(dt, k_convert<float, A><<<vt_blocks(n), VT_THREADS, 0, st>>>(dst, (const A *)src, n));
    CUDA_LAUNCH_CHECK();
}
/* dst (float) += src (dt): a bf16 weight gradient into the float one. */
template <typename A>
__global__ static void k_acc_from(float *dst, const A *src, int64_t n) {
    VT_GRID_STRIDE(i, n) dst[i] = __fadd_rn(dst[i], ld(src, i));
}
extern "C" void vt_cuk_acc_from_act(cudaStream_t st, vt_cuk_dt dt, float *dst, const void *src,
                                    int64_t n) {
    if (n <= 0)
        return;
    VT_DT(dt, k_acc_from<A><<<vt_blocks(n), VT_THREADS, 0, st>>>(dst, (const A *)src, n));
    CUDA_LAUNCH_CHECK();
}

/* sumsq: VT_SUMSQ_PARTS blocks each write one double partial, one block sums them. */
#define VT_SUMSQ_PARTS 1024
__global__ static void k_sumsq_part(double *part, const float *x, int64_t n) {
    __shared__ double sh[VT_THREADS];
    double a = 0;
    VT_GRID_STRIDE(i, n) {
        double v = x[i];
        a += v * v;
    }
    double s = vt_block_sum(a, sh);
    if (threadIdx.x == 0)
        part[blockIdx.x] = s;
}
__global__ static void k_sum_parts(double *result, const double *part, int nparts) {
    __shared__ double sh[VT_THREADS];
    double a = 0;
    for (int i = threadIdx.x; i < nparts; i += VT_THREADS)
        a += part[i];
    double s = vt_block_sum(a, sh);
    if (threadIdx.x == 0)
        *result = s;
}
extern "C" int vt_cuk_sumsq_parts(void) { return VT_SUMSQ_PARTS; }
extern "C" void vt_cuk_sumsq(cudaStream_t st, double *result, double *partials, const float *x,
                             int64_t n) {
    if (n <= 0) {
        CUDA_CHECK(cudaMemsetAsync(result, 0, sizeof(double), st));
        return;
    }
    unsigned nb = vt_blocks(n);
    if (nb > VT_SUMSQ_PARTS)
        nb = VT_SUMSQ_PARTS;
    k_sumsq_part<<<nb, VT_THREADS, 0, st>>>(partials, x, n);
    CUDA_LAUNCH_CHECK();
    k_sum_parts<<<1, VT_THREADS, 0, st>>>(result, partials, (int)nb);
    CUDA_LAUNCH_CHECK();
}

/* ------------------------------------------------------------------ activations, dropout */

template <typename A>
__global__ static void k_relu_fwd(A *out, const A *in, int64_t n) {
    VT_GRID_STRIDE(i, n) {
        float v = ld(in, i);
        st(out, i, v > 0 ? v : 0.0f);
    }
}
template <typename A>
__global__ static void k_relu_bwd(A *din, const A *dout, const A *out, int64_t n) {
    VT_GRID_STRIDE(i, n) st(din, i, ld(out, i) > 0 ? ld(dout, i) : 0.0f);
}
extern "C" void vt_cuk_relu_forward(cudaStream_t st, vt_cuk_dt dt, void *out, const void *in,
                                    int64_t n) {
    if (n <= 0)
        return;
    VT_DT(dt, k_relu_fwd<A><<<vt_blocks(n), VT_THREADS, 0, st>>>((A *)out, (const A *)in, n));
    CUDA_LAUNCH_CHECK();
}
extern "C" void vt_cuk_relu_backward(cudaStream_t st, vt_cuk_dt dt, void *din, const void *dout,
                                     const void *out, int64_t n) {
    if (n <= 0)
        return;
    VT_DT(dt, k_relu_bwd<A><<<vt_blocks(n), VT_THREADS, 0, st>>>((A *)din, (const A *)dout,
                                                                 (const A *)out, n));
    CUDA_LAUNCH_CHECK();
}

/* Must stay equal to vt_hash64 in models/common.h (test_cuda_ops_gpu compares the dropout
 * masks of both bit for bit). */
__device__ static uint64_t vt_hash64_dev(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}
template <typename A>
__global__ static void k_dropout_fwd(A *out, float *mask, const A *in, int64_t n, float p,
                                     float scale, uint64_t seed) {
    VT_GRID_STRIDE(i, n) {
        uint64_t h = vt_hash64_dev(seed ^ ((uint64_t)i * 0x9E3779B97F4A7C15ull));
        float u = (float)(h >> 40) / 16777216.0f; /* 24 bits: exact in float */
        float m = (u >= p && p < 1.0f) ? scale : 0.0f;
        mask[i] = m;
        st(out, i, __fmul_rn(ld(in, i), m));
    }
}
extern "C" void vt_cuk_dropout_forward(cudaStream_t st, vt_cuk_dt dt, void *out, float *mask,
                                       const void *in, int64_t n, float p, float scale,
                                       uint64_t seed) {
    if (n <= 0)
        return;
    VT_DT(dt, k_dropout_fwd<A><<<vt_blocks(n), VT_THREADS, 0, st>>>((A *)out, mask, (const A *)in,
                                                                    n, p, scale, seed));
    CUDA_LAUNCH_CHECK();
}
template <typename A>
__global__ static void k_dropout_bwd(A *din, const A *dout, const float *mask, int64_t n) {
    VT_GRID_STRIDE(i, n) st(din, i, __fmul_rn(ld(dout, i), mask[i]));
}
extern "C" void vt_cuk_dropout_backward(cudaStream_t st, vt_cuk_dt dt, void *din,
                                        const void *dout, const float *mask, int64_t n) {
    if (n <= 0)
        return;
    VT_DT(dt, k_dropout_bwd<A><<<vt_blocks(n), VT_THREADS, 0, st>>>((A *)din, (const A *)dout,
                                                                    mask, n));
    CUDA_LAUNCH_CHECK();
}

/* ------------------------------------------------------------------ batch norm */

/* Each channel's N*S values are cut into nparts = n * q pieces: piece `part` covers clip
 * part / q, positions [(part % q) * chunk, +chunk) of its S. A block reduces one piece of
 * one channel into double partials; k_bn_final sums a channel's pieces in order. */
#define VT_BN_CHUNK 8192
#define VT_BN_MAXQ 64
static int bn_q(int64_t s) {
    int64_t q = (s + VT_BN_CHUNK - 1) / VT_BN_CHUNK;
    if (q < 1)
        q = 1;
    return (int)(q > VT_BN_MAXQ ? VT_BN_MAXQ : q);
}
extern "C" int vt_cuk_bn_parts(int n, int64_t s) { return n * bn_q(s); }

/* mode 0: (sum (x - k), sum (x - k)^2) around the shift k (NULL: 0, backend.h);
 * mode 1: (sum dy, sum dy * (x - (k + mean)) * invstd) as cpu-ref. */
template <int MODE, typename A>
__global__ static void k_bn_part(double *pa, double *pb, const A *x, const A *dy, const float *k,
                                 const float *mean, const float *invstd, int c, int64_t s, int q) {
    __shared__ double sh[VT_THREADS];
    const int part = blockIdx.x, ch = blockIdx.y, nparts = gridDim.x;
    const int ni = part / q, qi = part % q;
    const int64_t chunk = (s + q - 1) / q;
    const int64_t lo = (int64_t)qi * chunk;
    const int64_t hi = lo + chunk < s ? lo + chunk : s;
    const int64_t base = ((int64_t)ni * c + ch) * s;
    double a = 0, b = 0;
    if (MODE == 0) {
        const double kc = k ? (double)k[ch] : 0.0;
        for (int64_t j = lo + threadIdx.x; j < hi; j += VT_THREADS) {
            double v = (double)ld(x, base + j) - kc;
            a += v;
            b += v * v;
        }
    } else {
        const double m = (k ? (double)k[ch] : 0.0) + (double)mean[ch], is = invstd[ch];
        for (int64_t j = lo + threadIdx.x; j < hi; j += VT_THREADS) {
            double g = ld(dy, base + j);
            a += g;
            b += g * ((double)ld(x, base + j) - m) * is;
        }
    }
    double ra = vt_block_sum(a, sh);
    __syncthreads(); /* sh is reused */
    double rb = vt_block_sum(b, sh);
    if (threadIdx.x == 0) {
        pa[(int64_t)ch * nparts + part] = ra;
        pb[(int64_t)ch * nparts + part] = rb;
    }
}
__global__ static void k_bn_final(float *oa, float *ob, const double *pa, const double *pb,
                                  int nparts) {
    __shared__ double sh[VT_THREADS];
    const int ch = blockIdx.x;
    double a = 0, b = 0;
    for (int i = threadIdx.x; i < nparts; i += VT_THREADS) {
        a += pa[(int64_t)ch * nparts + i];
        b += pb[(int64_t)ch * nparts + i];
    }
    double ra = vt_block_sum(a, sh);
    __syncthreads();
    double rb = vt_block_sum(b, sh);
    if (threadIdx.x == 0) {
        oa[ch] = (float)ra;
        ob[ch] = (float)rb;
    }
}
template <int MODE>
static void bn_reduce(cudaStream_t st, vt_cuk_dt dt, float *oa, float *ob, const void *x,
                      const void *dy, const float *k, const float *mean, const float *invstd,
                      int n, int c, int64_t s, double *partials) {
    if (c <= 0)
        return;
    if (n <= 0 || s <= 0) { /* sums over an empty set: zeros (cpu-ref writes them too) */
        CUDA_CHECK(cudaMemsetAsync(oa, 0, sizeof(float) * (size_t)c, st));
        CUDA_CHECK(cudaMemsetAsync(ob, 0, sizeof(float) * (size_t)c, st));
        return;
    }
    VT_CHECK(c <= 65535, "batch norm over %d channels: more than the grid allows", c);
    const int q = bn_q(s), nparts = n * q;
    double *pa = partials, *pb = partials + (int64_t)c * nparts;
    dim3 grid((unsigned)nparts, (unsigned)c);
    VT_DT(dt, k_bn_part<MODE, A><<<grid, VT_THREADS, 0, st>>>(pa, pb, (const A *)x, (const A *)dy,
                                                              k, mean, invstd, c, s, q));
    CUDA_LAUNCH_CHECK();
    k_bn_final<<<(unsigned)c, VT_THREADS, 0, st>>>(oa, ob, pa, pb, nparts);
    CUDA_LAUNCH_CHECK();
}
extern "C" void vt_cuk_bn_stats(cudaStream_t st, vt_cuk_dt dt, float *sum, float *sumsq,
                                const void *x, const float *k, int n, int c, int64_t s,
                                double *partials) {
    bn_reduce<0>(st, dt, sum, sumsq, x, NULL, k, NULL, NULL, n, c, s, partials);
}
extern "C" void vt_cuk_bn_backward_reduce(cudaStream_t st, vt_cuk_dt dt, float *sum_dy,
                                          float *sum_dy_xhat, const void *dy, const void *x,
                                          const float *k, const float *mean, const float *invstd,
                                          int n, int c, int64_t s, double *partials) {
    bn_reduce<1>(st, dt, sum_dy, sum_dy_xhat, x, dy, k, mean, invstd, n, c, s, partials);
}

__global__ static void k_bn_finalize(float *mean, float *invstd, float *rm, float *rv,
                                     const float *sum, const float *sumsq, const float *k,
                                     int64_t count, int c, float momentum, float eps) {
    int ci = blockIdx.x * blockDim.x + threadIdx.x;
    if (ci >= c)
        return;
    if (count == 0) { /* eval: normalise with the running statistics */
        mean[ci] = rm[ci];
        invstd[ci] = (float)(1.0 / sqrt((double)rv[ci] + eps));
        return;
    }
    double d = (double)sum[ci] / (double)count; /* mean - k */
    double var = (double)sumsq[ci] / (double)count - d * d;
    if (var < 0)
        var = 0;
    double m = (k ? (double)k[ci] : 0.0) + d;
    mean[ci] = (float)d; /* relative to k: apply and backward add k back */
    invstd[ci] = (float)(1.0 / sqrt(var + eps));
    if (rm) {
        double unbiased = count > 1 ? var * (double)count / (double)(count - 1) : var;
        rm[ci] = (float)((1.0 - momentum) * rm[ci] + momentum * m);
        rv[ci] = (float)((1.0 - momentum) * rv[ci] + momentum * unbiased);
    }
}
extern "C" void vt_cuk_bn_finalize(cudaStream_t st, float *mean, float *invstd,
                                   float *running_mean, float *running_var, const float *sum,
                                   const float *sumsq, const float *k, int64_t count, int c,
                                   float momentum, float eps) {
    if (c <= 0)
        return;
    VT_CHECK(count > 0 || (running_mean && running_var),
             "bn_finalize: count 0 (eval) needs the running statistics");
    k_bn_finalize<<<(unsigned)((c + 127) / 128), 128, 0, st>>>(
        mean, invstd, running_mean, running_var, sum, sumsq, k, count, c, momentum, eps);
    CUDA_LAUNCH_CHECK();
}

/* (rows = N*C, S) layout: blockIdx.y walks rows, blockIdx.x * blockDim.x walks S. */
static dim3 rows_grid(int64_t rows, int64_t s) {
    int64_t gx = (s + VT_THREADS - 1) / VT_THREADS;
    if (gx > 1024)
        gx = 1024;
    if (gx < 1)
        gx = 1;
    int64_t gy = rows < 65535 ? rows : 65535;
    if (gy < 1)
        gy = 1;
    return dim3((unsigned)gx, (unsigned)gy);
}
#define VT_ROWS_LOOP(row, j, rows, s)                                                         \
    for (int64_t row = blockIdx.y; row < (rows); row += gridDim.y)                            \
        for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < (s);             \
             j += (int64_t)gridDim.x * blockDim.x)

/* out = g*(x-(k+mean))*invstd + b. cpu-ref forms it in double and rounds once; so do we. */
template <typename A>
__global__ static void k_bn_apply(A *out, const A *x, const float *k, const float *mean,
                                  const float *invstd, const float *gamma, const float *beta,
                                  int64_t rows, int c, int64_t s) {
    VT_ROWS_LOOP(row, j, rows, s) {
        const int ci = (int)(row % c);
        const double g = gamma ? gamma[ci] : 1.0, b = beta ? beta[ci] : 0.0;
        const double m = (k ? (double)k[ci] : 0.0) + (double)mean[ci];
        const int64_t i = row * s + j;
        st(out, i, (float)(g * ((double)ld(x, i) - m) * invstd[ci] + b));
    }
}
extern "C" void vt_cuk_bn_apply(cudaStream_t st, vt_cuk_dt dt, void *out, const void *x,
                                const float *k, const float *mean, const float *invstd,
                                const float *gamma, const float *beta, int n, int c, int64_t s) {
    const int64_t rows = (int64_t)n * c;
    if (rows <= 0 || s <= 0)
        return;
    VT_DT(dt, k_bn_apply<A><<<rows_grid(rows, s), VT_THREADS, 0, st>>>(
                  (A *)out, (const A *)x, k, mean, invstd, gamma, beta, rows, c, s));
    CUDA_LAUNCH_CHECK();
}

template <typename A>
__global__ static void k_bn_bwd_apply(A *din, const A *dy, const A *x, const float *k,
                                      const float *mean, const float *invstd, const float *gamma,
                                      const float *sum_dy, const float *sum_dy_xhat, int64_t count,
                                      int64_t rows, int c, int64_t s) {
    VT_ROWS_LOOP(row, j, rows, s) {
        const int ci = (int)(row % c);
        const double g = gamma ? gamma[ci] : 1.0;
        const double mdy = (double)sum_dy[ci] / (double)count;
        const double mdyx = (double)sum_dy_xhat[ci] / (double)count;
        const double m = (k ? (double)k[ci] : 0.0) + (double)mean[ci];
        const int64_t i = row * s + j;
        const double xhat = ((double)ld(x, i) - m) * invstd[ci];
        st(din, i, (float)(g * invstd[ci] * ((double)ld(dy, i) - mdy - xhat * mdyx)));
    }
}
extern "C" void vt_cuk_bn_backward_apply(cudaStream_t st, vt_cuk_dt dt, void *din,
                                         const void *dy, const void *x, const float *k,
                                         const float *mean, const float *invstd,
                                         const float *gamma,
                                         const float *sum_dy, const float *sum_dy_xhat,
                                         int64_t count, int n, int c, int64_t s) {
    const int64_t rows = (int64_t)n * c;
    if (rows <= 0 || s <= 0)
        return;
    VT_CHECK(count > 0, "bn_backward_apply: count %lld", (long long)count);
    VT_DT(dt, k_bn_bwd_apply<A><<<rows_grid(rows, s), VT_THREADS, 0, st>>>(
                  (A *)din, (const A *)dy, (const A *)x, k, mean, invstd, gamma, sum_dy, sum_dy_xhat,
                  count, rows, c, s));
    CUDA_LAUNCH_CHECK();
}

/* ------------------------------------------------------------------ pooling */

/* Output cells of one dim whose window contains input position i: [lo, hi]. A window o
 * spans [o*s - p, o*s - p + k) (the ceil_mode tail beyond the padded input holds no
 * input, so this bound is exact for both max and avg). */
__device__ static void covering(int *lo, int *hi, int i, int k, int s, int p, int nout) {
    int a = i + p - k + 1;
    *lo = a <= 0 ? 0 : (a + s - 1) / s;
    int b = (i + p) / s;
    *hi = b < nout - 1 ? b : nout - 1;
}

/* First maximum of window (ot, oh, ow): (t, h, w) order, strictly larger replaces, padding
 * never wins — cpu-ref's ref_max_arg. Returns the offset within the plane, -1 if the
 * window holds no input (cannot happen with PyTorch-valid padding). */
template <typename A>
__device__ static int max_arg(const A *plane, const vt_cuk_pool &g, int ot, int oh, int ow,
                              float *val) {
    int best = -1;
    float bv = 0;
    for (int kt = 0; kt < g.k[0]; kt++) {
        int it = ot * g.s[0] - g.p[0] + kt;
        if (it < 0 || it >= g.in[0])
            continue;
        for (int kh = 0; kh < g.k[1]; kh++) {
            int ih = oh * g.s[1] - g.p[1] + kh;
            if (ih < 0 || ih >= g.in[1])
                continue;
            for (int kw = 0; kw < g.k[2]; kw++) {
                int iw = ow * g.s[2] - g.p[2] + kw;
                if (iw < 0 || iw >= g.in[2])
                    continue;
                int i = (it * g.in[1] + ih) * g.in[2] + iw;
                float v = ld(plane, i);
                if (best < 0 || v > bv) {
                    best = i;
                    bv = v;
                }
            }
        }
    }
    *val = bv;
    return best;
}

template <typename A>
__global__ static void k_maxpool_fwd(A *out, const A *in, int64_t planes, vt_cuk_pool g) {
    const int64_t sout = (int64_t)g.out[0] * g.out[1] * g.out[2];
    const int64_t sin = (int64_t)g.in[0] * g.in[1] * g.in[2];
    VT_GRID_STRIDE(o, planes * sout) {
        const int64_t pl = o / sout;
        const int r = (int)(o - pl * sout);
        const int ow = r % g.out[2], oh = (r / g.out[2]) % g.out[1], ot = r / (g.out[2] * g.out[1]);
        float v;
        int a = max_arg(in + pl * sin, g, ot, oh, ow, &v);
        st(out, o, a >= 0 ? v : -INFINITY);
    }
}
extern "C" void vt_cuk_maxpool_forward(cudaStream_t st, vt_cuk_dt dt, void *out, const void *in,
                                       int64_t planes, vt_cuk_pool g) {
    const int64_t total = planes * g.out[0] * g.out[1] * g.out[2];
    if (total <= 0)
        return;
    VT_DT(dt, k_maxpool_fwd<A><<<vt_blocks(total), VT_THREADS, 0, st>>>((A *)out, (const A *)in,
                                                                        planes, g));
    CUDA_LAUNCH_CHECK();
}

/* Gather: each input cell sums the gradients of the covering windows whose first maximum
 * it is, in output order (the order cpu-ref's scatter adds them). The first maximum is
 * recomputed per covering window (at most ceil(k/s)^3 windows of k^3 cells): no atomics,
 * no argmax tensor. */
template <typename A>
__global__ static void k_maxpool_bwd(A *din, const A *dout, const A *in, int64_t planes,
                                     vt_cuk_pool g) {
    const int64_t sout = (int64_t)g.out[0] * g.out[1] * g.out[2];
    const int64_t sin = (int64_t)g.in[0] * g.in[1] * g.in[2];
    VT_GRID_STRIDE(x, planes * sin) {
        const int64_t pl = x / sin;
        const int r = (int)(x - pl * sin);
        const int iw = r % g.in[2], ih = (r / g.in[2]) % g.in[1], it = r / (g.in[2] * g.in[1]);
        int tlo, thi, hlo, hhi, wlo, whi;
        covering(&tlo, &thi, it, g.k[0], g.s[0], g.p[0], g.out[0]);
        covering(&hlo, &hhi, ih, g.k[1], g.s[1], g.p[1], g.out[1]);
        covering(&wlo, &whi, iw, g.k[2], g.s[2], g.p[2], g.out[2]);
        const A *plane = in + pl * sin;
        float facc = 0.0f; /* cpu-ref adds into a zeroed float din in output order: so do we */
        for (int ot = tlo; ot <= thi; ot++)
            for (int oh = hlo; oh <= hhi; oh++)
                for (int ow = wlo; ow <= whi; ow++) {
                    float v;
                    if (max_arg(plane, g, ot, oh, ow, &v) == r)
                        facc = __fadd_rn(facc, ld(dout, pl * sout +
                                                            ((int64_t)ot * g.out[1] + oh) * g.out[2] + ow));
                }
        st(din, x, facc);
    }
}
extern "C" void vt_cuk_maxpool_backward(cudaStream_t st, vt_cuk_dt dt, void *din,
                                        const void *dout, const void *in, int64_t planes,
                                        vt_cuk_pool g) {
    const int64_t total = planes * g.in[0] * g.in[1] * g.in[2];
    if (total <= 0)
        return;
    VT_DT(dt, k_maxpool_bwd<A><<<vt_blocks(total), VT_THREADS, 0, st>>>(
                  (A *)din, (const A *)dout, (const A *)in, planes, g));
    CUDA_LAUNCH_CHECK();
}

/* PyTorch's count_include_pad divisor: the window clipped to the PADDED input (cpu-ref's
 * ref_avg_window). lo/hi: the window clipped to the input. */
__device__ static int avg_window(int lo[3], int hi[3], const vt_cuk_pool &g, const int oc[3]) {
    int div = 1;
    for (int d = 0; d < 3; d++) {
        int start = oc[d] * g.s[d] - g.p[d];
        int end = start + g.k[d] < g.in[d] + g.p[d] ? start + g.k[d] : g.in[d] + g.p[d];
        div *= end - start;
        lo[d] = start > 0 ? start : 0;
        hi[d] = end < g.in[d] ? end : g.in[d];
    }
    return div;
}
template <typename A>
__global__ static void k_avgpool_fwd(A *out, const A *in, int64_t planes, vt_cuk_pool g) {
    const int64_t sout = (int64_t)g.out[0] * g.out[1] * g.out[2];
    const int64_t sin = (int64_t)g.in[0] * g.in[1] * g.in[2];
    VT_GRID_STRIDE(o, planes * sout) {
        const int64_t pl = o / sout;
        const int r = (int)(o - pl * sout);
        const int oc[3] = {r / (g.out[2] * g.out[1]), (r / g.out[2]) % g.out[1], r % g.out[2]};
        int lo[3], hi[3];
        const int div = avg_window(lo, hi, g, oc);
        const A *plane = in + pl * sin;
        double s = 0;
        for (int t = lo[0]; t < hi[0]; t++)
            for (int h = lo[1]; h < hi[1]; h++)
                for (int w = lo[2]; w < hi[2]; w++)
                    s += ld(plane, (t * g.in[1] + h) * g.in[2] + w);
        st(out, o, (float)(s / div));
    }
}
template <typename A>
__global__ static void k_avgpool_bwd(A *din, const A *dout, int64_t planes, vt_cuk_pool g) {
    const int64_t sout = (int64_t)g.out[0] * g.out[1] * g.out[2];
    const int64_t sin = (int64_t)g.in[0] * g.in[1] * g.in[2];
    VT_GRID_STRIDE(x, planes * sin) {
        const int64_t pl = x / sin;
        const int r = (int)(x - pl * sin);
        const int ic[3] = {r / (g.in[2] * g.in[1]), (r / g.in[2]) % g.in[1], r % g.in[2]};
        int clo[3], chi[3];
        for (int d = 0; d < 3; d++)
            covering(&clo[d], &chi[d], ic[d], g.k[d], g.s[d], g.p[d], g.out[d]);
        double acc = 0; /* cpu-ref accumulates these in double, in output order */
        for (int ot = clo[0]; ot <= chi[0]; ot++)
            for (int oh = clo[1]; oh <= chi[1]; oh++)
                for (int ow = clo[2]; ow <= chi[2]; ow++) {
                    const int oc[3] = {ot, oh, ow};
                    int lo[3], hi[3];
                    const int div = avg_window(lo, hi, g, oc);
                    acc += ld(dout, pl * sout + ((int64_t)ot * g.out[1] + oh) * g.out[2] + ow) /
                           (double)div;
                }
        st(din, x, (float)acc);
    }
}
extern "C" void vt_cuk_avgpool_forward(cudaStream_t st, vt_cuk_dt dt, void *out, const void *in,
                                       int64_t planes, vt_cuk_pool g) {
    const int64_t total = planes * g.out[0] * g.out[1] * g.out[2];
    if (total <= 0)
        return;
    VT_DT(dt, k_avgpool_fwd<A><<<vt_blocks(total), VT_THREADS, 0, st>>>((A *)out, (const A *)in,
                                                                        planes, g));
    CUDA_LAUNCH_CHECK();
}
extern "C" void vt_cuk_avgpool_backward(cudaStream_t st, vt_cuk_dt dt, void *din,
                                        const void *dout, int64_t planes, vt_cuk_pool g) {
    const int64_t total = planes * g.in[0] * g.in[1] * g.in[2];
    if (total <= 0)
        return;
    VT_DT(dt, k_avgpool_bwd<A><<<vt_blocks(total), VT_THREADS, 0, st>>>((A *)din,
                                                                        (const A *)dout, planes, g));
    CUDA_LAUNCH_CHECK();
}

/* Global average pool: one block per (n, c) row, double sum, then / S as cpu-ref. */
template <typename A>
__global__ static void k_gap_fwd(A *out, const A *in, int64_t rows, int64_t s) {
    __shared__ double sh[VT_THREADS];
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        double a = 0;
        for (int64_t j = threadIdx.x; j < s; j += VT_THREADS)
            a += ld(in, row * s + j);
        double t = vt_block_sum(a, sh);
        if (threadIdx.x == 0)
            st(out, row, (float)(t / (double)s));
        __syncthreads(); /* sh is reused by the next row */
    }
}
template <typename A>
__global__ static void k_gap_bwd(A *din, const A *dout, int64_t rows, int64_t s) {
    VT_ROWS_LOOP(row, j, rows, s) st(din, row * s + j, (float)((double)ld(dout, row) / (double)s));
}
extern "C" void vt_cuk_gap_forward(cudaStream_t st, vt_cuk_dt dt, void *out, const void *in,
                                   int64_t rows, int64_t s) {
    if (rows <= 0 || s <= 0)
        return;
    const unsigned nb = (unsigned)(rows < VT_MAX_BLOCKS ? rows : VT_MAX_BLOCKS);
    VT_DT(dt, k_gap_fwd<A><<<nb, VT_THREADS, 0, st>>>((A *)out, (const A *)in, rows, s));
    CUDA_LAUNCH_CHECK();
}
extern "C" void vt_cuk_gap_backward(cudaStream_t st, vt_cuk_dt dt, void *din, const void *dout,
                                    int64_t rows, int64_t s) {
    if (rows <= 0 || s <= 0)
        return;
    VT_DT(dt, k_gap_bwd<A><<<rows_grid(rows, s), VT_THREADS, 0, st>>>((A *)din, (const A *)dout,
                                                                      rows, s));
    CUDA_LAUNCH_CHECK();
}

/* ------------------------------------------------------------------ linear helpers */

__global__ static void k_add_bias_rows(float *out, const float *b, int64_t total, int f) {
    VT_GRID_STRIDE(i, total) out[i] = __fadd_rn(out[i], b[i % f]);
}
extern "C" void vt_cuk_add_bias_rows(cudaStream_t st, float *out, const float *b, int n, int f) {
    const int64_t total = (int64_t)n * f;
    if (total <= 0)
        return;
    k_add_bias_rows<<<vt_blocks(total), VT_THREADS, 0, st>>>(out, b, total, f);
    CUDA_LAUNCH_CHECK();
}
/* db[o] += sum_n dout[n, o]: one thread per column, rows in order, double like cpu-ref;
 * the contribution rounded to bf16 first when dout is bf16 (cpu-ref's pacc). */
template <typename A>
__global__ static void k_colsum_acc(float *db, const A *dout, int n, int f) {
    int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= f)
        return;
    double a = 0;
    for (int i = 0; i < n; i++)
        a += ld(dout, (int64_t)i * f + o);
    db[o] += pacc(dout, a);
}
extern "C" void vt_cuk_colsum_acc(cudaStream_t st, vt_cuk_dt dt, float *db, const void *dout,
                                  int n, int f) {
    if (n <= 0 || f <= 0)
        return;
    VT_DT(dt, k_colsum_acc<A><<<(unsigned)((f + 127) / 128), 128, 0, st>>>(db, (const A *)dout,
                                                                           n, f));
    CUDA_LAUNCH_CHECK();
}
/* db[c] += sum over (n, s) of dout[n, c, s]: one block per channel, a fixed-order double
 * sum, the contribution rounded as pacc (the conv bias gradient under BF16). */
template <typename A>
__global__ static void k_chansum_acc(float *db, const A *dout, int n, int c, int64_t s) {
    __shared__ double sh[VT_THREADS];
    const int ch = blockIdx.x;
    double a = 0;
    for (int ni = 0; ni < n; ni++)
        for (int64_t j = threadIdx.x; j < s; j += VT_THREADS)
            a += ld(dout, ((int64_t)ni * c + ch) * s + j);
    double t = vt_block_sum(a, sh);
    if (threadIdx.x == 0)
        db[ch] += pacc(dout, t);
}
extern "C" void vt_cuk_chansum_acc(cudaStream_t st, vt_cuk_dt dt, float *db, const void *dout,
                                   int n, int c, int64_t s) {
    if (n <= 0 || c <= 0 || s <= 0)
        return;
    VT_DT(dt, k_chansum_acc<A><<<(unsigned)c, VT_THREADS, 0, st>>>(db, (const A *)dout, n, c, s));
    CUDA_LAUNCH_CHECK();
}
/* out[row, j] = b[row % c] (rounded to A) for rows = N*C of s elements: the bias a conv or
 * GEMM then accumulates onto with beta = 1, so the sum is rounded once. */
template <typename A>
__global__ static void k_fill_bias(A *out, const float *b, int64_t rows, int c, int64_t s) {
    VT_ROWS_LOOP(row, j, rows, s) st(out, row * s + j, b[row % c]);
}
extern "C" void vt_cuk_fill_bias(cudaStream_t st, vt_cuk_dt dt, void *out, const float *b,
                                 int64_t rows, int c, int64_t s) {
    if (rows <= 0 || s <= 0)
        return;
    VT_DT(dt, k_fill_bias<A><<<rows_grid(rows, s), VT_THREADS, 0, st>>>((A *)out, b, rows, c, s));
    CUDA_LAUNCH_CHECK();
}

/* ------------------------------------------------------------------ losses */

/* One thread per clip, double throughout (cpu-ref's ref_softmax_xent). A label outside
 * [0, k) cannot abort from a kernel: that clip's loss and gradient become NaN, which the
 * training loop reports as a non-finite loss (cpu-ref aborts on it instead). No labels
 * (label NULL, loss and dlogits NULL): probabilities only. */
template <typename A>
__global__ static void k_softmax_xent(float *loss, A *dlogits, float *prob,
                                      const float *logits, const int32_t *label, int n, int k,
                                      float smoothing, float grad_scale) {
    int ni = blockIdx.x * blockDim.x + threadIdx.x;
    if (ni >= n)
        return;
    const float *z = logits + (int64_t)ni * k;
    const int y = label ? label[ni] : -1;
    if (label && (y < 0 || y >= k)) {
        if (loss)
            loss[ni] = NAN;
        for (int j = 0; j < k; j++) {
            if (prob)
                prob[(int64_t)ni * k + j] = NAN;
            if (dlogits)
                st(dlogits, (int64_t)ni * k + j, NAN);
        }
        return;
    }
    double mx = z[0];
    for (int j = 1; j < k; j++)
        mx = z[j] > mx ? z[j] : mx;
    double se = 0;
    for (int j = 0; j < k; j++)
        se += exp((double)z[j] - mx);
    const double lse = mx + log(se);
    double l = 0;
    for (int j = 0; j < k; j++) {
        double t = (j == y ? 1.0 - smoothing : 0.0) + (double)smoothing / k;
        double pj = exp((double)z[j] - lse);
        l -= t * ((double)z[j] - lse);
        if (prob)
            prob[(int64_t)ni * k + j] = (float)pj;
        if (dlogits)
            st(dlogits, (int64_t)ni * k + j, (float)(grad_scale * (pj - t)));
    }
    if (loss)
        loss[ni] = (float)l;
}
extern "C" void vt_cuk_softmax_xent(cudaStream_t st, vt_cuk_dt dt, float *loss, void *dlogits,
                                    float *prob, const float *logits, const int32_t *label, int n,
                                    int k, float smoothing, float grad_scale) {
    if (n <= 0 || k <= 0)
        return;
    VT_DT(dt, k_softmax_xent<A><<<(unsigned)((n + 127) / 128), 128, 0, st>>>(
                  loss, (A *)dlogits, prob, logits, label, n, k, smoothing, grad_scale));
    CUDA_LAUNCH_CHECK();
}

template <typename A>
__global__ static void k_bce_logits(float *loss, A *dlogits, float *prob, const float *logits,
                                    const float *target, int n, int k, float grad_scale) {
    int ni = blockIdx.x * blockDim.x + threadIdx.x;
    if (ni >= n)
        return;
    double l = 0;
    for (int j = 0; j < k; j++) {
        int64_t i = (int64_t)ni * k + j;
        double x = logits[i];
        if (prob)
            prob[i] = (float)(1.0 / (1.0 + exp(-x)));
        if (!target) /* no targets: probabilities only */
            continue;
        double t = target[i];
        /* max(x,0) - x t + log(1 + e^-|x|): PyTorch's overflow-free form. */
        l += (x > 0 ? x : 0) - x * t + log1p(exp(-fabs(x)));
        if (dlogits)
            st(dlogits, i, (float)(grad_scale * (1.0 / (1.0 + exp(-x)) - t)));
    }
    if (loss)
        loss[ni] = (float)l;
}
extern "C" void vt_cuk_bce_logits(cudaStream_t st, vt_cuk_dt dt, float *loss, void *dlogits,
                                  float *prob, const float *logits, const float *target, int n,
                                  int k, float grad_scale) {
    if (n <= 0 || k <= 0)
        return;
    VT_DT(dt, k_bce_logits<A><<<(unsigned)((n + 127) / 128), 128, 0, st>>>(
                  loss, (A *)dlogits, prob, logits, target, n, k, grad_scale));
    CUDA_LAUNCH_CHECK();
}

/* ------------------------------------------------------------------ optimizers */

/* torch.optim.SGD, written as cpu-ref's ref_sgd_update with unfused float operations. */
__global__ static void k_sgd(float *p, const float *g, float *buf, int64_t n, float lr,
                             float momentum, float dampening, float wd, int nesterov,
                             int first_step) {
    VT_GRID_STRIDE(i, n) {
        float d = g[i];
        if (wd != 0)
            d = __fadd_rn(d, __fmul_rn(wd, p[i]));
        if (momentum != 0) {
            float b = first_step ? d
                                 : __fadd_rn(__fmul_rn(momentum, buf[i]),
                                             __fmul_rn(1.0f - dampening, d));
            buf[i] = b;
            d = nesterov ? __fadd_rn(d, __fmul_rn(momentum, b)) : b;
        }
        p[i] = __fsub_rn(p[i], __fmul_rn(lr, d));
    }
}
extern "C" void vt_cuk_sgd(cudaStream_t st, float *p, const float *g, float *buf, int64_t n,
                           float lr, float momentum, float dampening, float wd, int nesterov,
                           int first_step) {
    if (n <= 0)
        return;
    k_sgd<<<vt_blocks(n), VT_THREADS, 0, st>>>(p, g, buf, n, lr, momentum, dampening, wd,
                                               nesterov, first_step);
    CUDA_LAUNCH_CHECK();
}

__global__ static void k_rmsprop(float *p, const float *g, float *sq, float *buf, int64_t n,
                                 float lr, float alpha, float eps, float wd, float momentum) {
    VT_GRID_STRIDE(i, n) {
        float d = g[i];
        if (wd != 0)
            d = __fadd_rn(d, __fmul_rn(wd, p[i]));
        /* cpu-ref: alpha * sq + (1 - alpha) * d * d, i.e. ((1-alpha)*d)*d */
        float s = __fadd_rn(__fmul_rn(alpha, sq[i]), __fmul_rn(__fmul_rn(1.0f - alpha, d), d));
        sq[i] = s;
        float avg = __fadd_rn(__fsqrt_rn(s), eps);
        if (momentum > 0) {
            float b = __fadd_rn(__fmul_rn(momentum, buf[i]), __fdiv_rn(d, avg));
            buf[i] = b;
            p[i] = __fsub_rn(p[i], __fmul_rn(lr, b));
        } else {
            p[i] = __fsub_rn(p[i], __fmul_rn(lr, __fdiv_rn(d, avg)));
        }
    }
}
extern "C" void vt_cuk_rmsprop(cudaStream_t st, float *p, const float *g, float *sq, float *buf,
                               int64_t n, float lr, float alpha, float eps, float wd,
                               float momentum) {
    if (n <= 0)
        return;
    k_rmsprop<<<vt_blocks(n), VT_THREADS, 0, st>>>(p, g, sq, buf, n, lr, alpha, eps, wd,
                                                   momentum);
    CUDA_LAUNCH_CHECK();
}

__global__ static void k_adamw(float *p, const float *g, float *m, float *v, int64_t n,
                               float decay, float beta1, float beta2, float eps, float step_size,
                               float bc2_sqrt) {
    VT_GRID_STRIDE(i, n) {
        const float gi = g[i];
        float pi = __fmul_rn(p[i], decay);
        float mi = __fadd_rn(__fmul_rn(beta1, m[i]), __fmul_rn(1.0f - beta1, gi));
        /* cpu-ref: beta2 * v + (1 - beta2) * g * g, i.e. ((1-beta2)*g)*g */
        float vi = __fadd_rn(__fmul_rn(beta2, v[i]), __fmul_rn(__fmul_rn(1.0f - beta2, gi), gi));
        float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), bc2_sqrt), eps);
        pi = __fsub_rn(pi, __fmul_rn(step_size, __fdiv_rn(mi, denom)));
        m[i] = mi;
        v[i] = vi;
        p[i] = pi;
    }
}
extern "C" void vt_cuk_adamw(cudaStream_t st, float *p, const float *g, float *m, float *v,
                             int64_t n, float decay, float beta1, float beta2, float eps,
                             float step_size, float bc2_sqrt) {
    if (n <= 0)
        return;
    k_adamw<<<vt_blocks(n), VT_THREADS, 0, st>>>(p, g, m, v, n, decay, beta1, beta2, eps,
                                                 step_size, bc2_sqrt);
    CUDA_LAUNCH_CHECK();
}

/* ------------------------------------------------------------------ device-local reducer */

typedef struct vt_cuk_ptrs {
    float *p[VT_CUK_MAX_RANKS];
} vt_cuk_ptrs;
__global__ static void k_sum_ranks(vt_cuk_ptrs b, int nranks, int64_t lo, int64_t hi) {
    const int64_t n = hi - lo;
    VT_GRID_STRIDE(j, n) {
        const int64_t i = lo + j;
        float s = b.p[0][i];
        for (int r = 1; r < nranks; r++)
            s = __fadd_rn(s, b.p[r][i]);
        for (int r = 0; r < nranks; r++)
            b.p[r][i] = s;
    }
}
extern "C" void vt_cuk_sum_ranks(cudaStream_t st, float *const *bufs, int nranks, int64_t lo,
                                 int64_t hi) {
    if (hi <= lo)
        return;
    VT_CHECK(nranks >= 1 && nranks <= VT_CUK_MAX_RANKS, "sum_ranks: %d ranks", nranks);
    vt_cuk_ptrs b;
    for (int r = 0; r < VT_CUK_MAX_RANKS; r++)
        b.p[r] = r < nranks ? bufs[r] : NULL;
    k_sum_ranks<<<vt_blocks(hi - lo), VT_THREADS, 0, st>>>(b, nranks, lo, hi);
    CUDA_LAUNCH_CHECK();
}
