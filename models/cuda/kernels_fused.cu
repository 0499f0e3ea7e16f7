/*
 * kernels_fused.cu: the fused batch-norm tail (backend.h bn_apply_relu; issue 45 step 3):
 * out = relu(bn_apply(x) [+ res]) in one pass — one read of x (and res), one write of
 * out, instead of bn_apply's write, add's two reads and write, and relu's read and write.
 * Bit for bit the three kernels it replaces (kernels_bn.cu k_bn_apply, kernels_elem.cu
 * k_add and k_relu_fwd): the normalised value is formed in double and rounded to float
 * once, then to the activation type (bf16: as st() would store it), the sum is __fadd_rn
 * of the two stored values rounded again, and the ReLU keeps v > 0 else +0. The rules
 * all kernel files keep are in kernels_impl.cuh.
 * And the residual's backward without the copy (backend.h relu_backward_skip): the
 * ReLU's gradient stored twice from one read, as k_relu_bwd stores it (kernels_elem.cu).
 * (The BN + ReLU backward, bn_relu_backward_reduce, is a mode of kernels_bn.cu's
 * reduction, which it must sum in the same order.)
 */
#include <stdint.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "models/cuda/cuda_check.h"
#include "models/cuda/kernels.h"
#include "models/cuda/kernels_impl.cuh"
#include "models/relu_rule.h"

/* v rounded as storing it in A and loading it back would (float: itself). */
__device__ static inline float as_stored(const float *, float v) { return v; }
__device__ static inline float as_stored(const __nv_bfloat16 *, float v) {
    return __bfloat162float(__float2bfloat16_rn(v));
}

template <typename A>
__global__ static void k_bn_apply_relu(A *out, const A *x, const A *res, const float *k,
                                       const float *mean, const float *invstd,
                                       const float *gamma, const float *beta, int64_t rows,
                                       int c, int64_t s) {
    VT_ROWS_LOOP(row, j, rows, s) {
        const int ci = (int)(row % c);
        const double g = gamma ? gamma[ci] : 1.0, b = beta ? beta[ci] : 0.0;
        const double m = (k ? (double)k[ci] : 0.0) + (double)mean[ci];
        const int64_t i = row * s + j;
        float v = as_stored(out, (float)(g * ((double)ld(x, i) - m) * invstd[ci] + b));
        if (res)
            v = as_stored(out, __fadd_rn(v, ld(res, i)));
        st(out, i, vt_relu(v)); /* relu_forward's rule (relu_rule.h): a NaN passes */
    }
}

extern "C" void vt_cuk_bn_apply_relu(cudaStream_t st, vt_cuk_dt dt, void *out, const void *x,
                                     const void *res, const float *k, const float *mean,
                                     const float *invstd, const float *gamma, const float *beta,
                                     int n, int c, int64_t s) {
    const int64_t rows = (int64_t)n * c;
    if (rows <= 0 || s <= 0)
        return;
    VT_DT(dt, k_bn_apply_relu<A><<<rows_grid(rows, s), VT_THREADS, 0, st>>>(
                  (A *)out, (const A *)x, (const A *)res, k, mean, invstd, gamma, beta, rows, c,
                  s));
    CUDA_LAUNCH_CHECK();
}

template <typename A>
__global__ static void k_relu_bwd_skip(A *din, A *skip, const A *dout, const A *out, int64_t n) {
    VT_GRID_STRIDE(i, n) {
        const float v = vt_relu_grad(ld(out, i), ld(dout, i)); /* relu_backward's rule */
        st(din, i, v);
        st(skip, i, v);
    }
}

extern "C" void vt_cuk_relu_backward_skip(cudaStream_t st, vt_cuk_dt dt, void *din, void *skip,
                                          const void *dout, const void *out, int64_t n) {
    if (n <= 0)
        return;
    VT_DT(dt, k_relu_bwd_skip<A><<<vt_blocks(n), VT_THREADS, 0, st>>>(
                  (A *)din, (A *)skip, (const A *)dout, (const A *)out, n));
    CUDA_LAUNCH_CHECK();
}
