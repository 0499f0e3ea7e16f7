/*
 * kernels_bn.cu: batch-norm CUDA kernels (kernels.h): per-channel statistics
 * around a shift reduced in a fixed order in double, finalize (mean, invstd, running
 * statistics), apply, and the backward reductions and apply.
 * The rules all kernel files keep are in kernels_impl.cuh.
 */
#include <math.h>
#include <stdint.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "models/cuda/cuda_check.h"
#include "models/cuda/kernels.h"
#include "models/cuda/kernels_impl.cuh"
#include "models/cuda/kernels_vec_ops.cuh"
#include "models/relu_rule.h"

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
 * mode 1: (sum dy, sum dy * (x - (k + mean)) * invstd) as cpu-ref;
 * mode 2: mode 1 of the ReLU's backward vt_relu_grad(y, dy) (relu_rule.h; y its output),
 * each value also stored into dyw (may be dy: each element is read, then written, by one
 * thread), so the sums are mode 1's over what k_relu_bwd would have stored, bit for bit (a
 * bf16 value stored again is itself). */
template <int MODE, typename A>
__global__ static void k_bn_part(double *pa, double *pb, const A *x, const A *dy, const float *k,
                                 const float *mean, const float *invstd, int c, int64_t s, int q,
                                 const A *y, A *dyw) {
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
            double g;
            if (MODE == 2) {
                const float v = vt_relu_grad(ld(y, base + j), ld(dy, base + j));
                st(dyw, base + j, v);
                g = v;
            } else {
                g = ld(dy, base + j);
            }
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
                      int n, int c, int64_t s, double *partials, const void *y = NULL,
                      void *dyw = NULL) {
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
                                                              k, mean, invstd, c, s, q,
                                                              (const A *)y, (A *)dyw));
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
extern "C" void vt_cuk_bn_relu_backward_reduce(cudaStream_t st, vt_cuk_dt dt, float *sum_dy,
                                               float *sum_dy_xhat, void *dy, const void *dout,
                                               const void *y, const void *x, const float *k,
                                               const float *mean, const float *invstd, int n,
                                               int c, int64_t s, double *partials) {
    bn_reduce<2>(st, dt, sum_dy, sum_dy_xhat, x, dout, k, mean, invstd, n, c, s, partials, y,
                 dy);
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
/* out = g*(x-(k+mean))*invstd + b. cpu-ref forms it in double and rounds once; so does
 * kernels_vec_ops.cuh vt_op_bn_apply, on kernels_impl.cuh's vt_rows_launch. */
extern "C" void vt_cuk_bn_apply(cudaStream_t st, vt_cuk_dt dt, void *out, const void *x,
                                const float *k, const float *mean, const float *invstd,
                                const float *gamma, const float *beta, int n, int c, int64_t s) {
    VT_DT(dt, {
        vt_op_bn_apply<A> f{};
        f.out = (A *)out, f.x = (const A *)x;
        f.k = k, f.mean = mean, f.invstd = invstd, f.gamma = gamma, f.beta = beta;
        f.c = c, f.s = s;
        vt_rows_launch(st, f, (int64_t)n * c, s);
    });
}

/* kernels_vec_ops.cuh vt_op_bn_bwd_apply */
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
    VT_DT(dt, {
        vt_op_bn_bwd_apply<A> f{};
        f.din = (A *)din, f.dy = (const A *)dy, f.x = (const A *)x;
        f.k = k, f.mean = mean, f.invstd = invstd, f.gamma = gamma;
        f.sum_dy = sum_dy, f.sum_dy_xhat = sum_dy_xhat, f.count = count;
        f.c = c, f.s = s;
        vt_rows_launch(st, f, rows, s);
    });
}
