/*
 * kernels_attn.cu: the transformer CUDA kernels (kernels.h) — LayerNorm forward and
 * backward, GELU (erf form) forward and backward, and the two row kernels of attention
 * around cuBLAS's GEMMs (cuda_attn.c): the softmax of a block of logits with its
 * log-sum-exp, and the backward's ds = p (dp - delta) / sqrt(D). Each on float or bf16
 * activations (kernels.h's _dt launchers; BF16's rounding points there); the logits, lse
 * and the row arithmetic are float whatever the activations. The rules all kernel files
 * keep are in kernels_impl.cuh; the formulas are cpu-ref's (models/cpu/cpu_attn.c),
 * tested against PyTorch. The exactness below is FP32's; under BF16 each stored value
 * is that float result rounded to bf16 once (tests/test_vit_gpu.c's BF16 bounds).
 *
 * Exactness against cpu-ref, kernel by kernel (what tests/test_vit_gpu.c checks):
 *  - LayerNorm forward: the row's sum and centred sum of squares in double as cpu-ref,
 *    but in a warp's fixed butterfly order instead of cpu-ref's left-to-right one; the
 *    rest (division, sqrt, the normalised value, scale and shift) is cpu-ref's double
 *    arithmetic op for op (__d*_rn: no FMA contraction). The two sums differ by ~c * 2^-53
 *    relative, so mean, invstd and out are cpu-ref's floats except when a double result
 *    lies that close to a float rounding boundary: a 1-ulp difference in ~1e-7 of the
 *    elements, NMSE <= 1e-14.
 *  - LayerNorm backward: din per row as the forward (double sums in butterfly order, the
 *    rest cpu-ref's double formula); dgamma and dbeta as double partials over chunks of
 *    rows, then the chunks in order, rounded to float once and added: cpu-ref's double
 *    sum in another order, the same bound.
 *  - GELU: float arithmetic (normcdff, expf: a few ulp) against cpu-ref's double erf and
 *    exp: a few float ulp relative per element, NMSE ~1e-14. The cdf is normcdff, not
 *    0.5 (1 + erff(x / sqrt 2)), which would lose all relative digits of the cdf below
 *    x = -4 to the cancellation in 1 + erf.
 *  - softmax: logits from cuBLAS (float sums of D products, against cpu-ref's double
 *    ones: ~1e-7 relative on each logit, which the softmax turns into ~1e-7 relative on a
 *    probability), the row sum of exp in double in a fixed tree, expf: NMSE ~1e-13.
 *  - ds: delta = dout . out in double, p = expf(s - lse), the product in float: the same
 *    order of error as the softmax.
 * Every reduction has a fixed order and no atomics: a run is bitwise repeatable.
 */
#include <math.h>
#include <stdint.h>

#include <cuda_runtime.h>

#include "models/cuda/cuda_check.h"
#include "models/cuda/kernels.h"
#include "models/cuda/kernels_impl.cuh"

/* The sum of one double per lane over a warp, the same bits in every lane: the xor
 * butterfly adds v_i + v_(i^m) in lane i and v_(i^m) + v_i in lane i^m, equal as IEEE
 * addition commutes, so by induction every lane holds the same value after each step. */
__device__ static inline double warp_sum(double v) {
    for (int m = 16; m > 0; m >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, m);
    return v;
}

/* Warps of all blocks walk the rows: warp w takes rows w, w + nwarps, ... */
#define VT_WARP_ROWS(r, rows)                                                                 \
    for (int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; r < (rows);       \
         r += ((int64_t)gridDim.x * blockDim.x) >> 5)

static unsigned warp_blocks(int64_t rows) { return vt_blocks(rows * 32); }

/* ------------------------------------------------------------------ layernorm */

template <typename A>
__global__ static void k_ln_fwd(A *out, float *mean, float *invstd, const A *x,
                                const float *gamma, const float *beta, int64_t rows, int c,
                                float eps) {
    const int lane = threadIdx.x & 31;
    VT_WARP_ROWS(r, rows) {
        const A *xr = x + r * c;
        double s = 0, ss = 0;
        for (int j = lane; j < c; j += 32)
            s += ld(xr, j);
        const double mu = warp_sum(s) / c;
        for (int j = lane; j < c; j += 32) {
            const double d = __dsub_rn(ld(xr, j), mu);
            ss += __dmul_rn(d, d);
        }
        const double is = 1.0 / sqrt(__dadd_rn(warp_sum(ss) / c, (double)eps));
        if (lane == 0) {
            mean[r] = (float)mu;
            invstd[r] = (float)is;
        }
        for (int j = lane; j < c; j += 32) {
            /* cpu-ref: (x - mu) * is * gamma + beta, multiplies and adds apart */
            double v = __dmul_rn(__dmul_rn(__dsub_rn(ld(xr, j), mu), is), gamma ? (double)gamma[j] : 1.0);
            /* BF16: the float result rounded again (PyTorch: an fp32 LayerNorm, then the cast) */
            st(out, r * c + j, (float)__dadd_rn(v, beta ? (double)beta[j] : 0.0));
        }
    }
}

/* din = invstd (g - mean(g) - xhat mean(g xhat)), g = dout gamma, xhat from the SAVED
 * float mean and invstd (cpu-ref's). */
template <typename A>
__global__ static void k_ln_bwd_din(A *din, const A *dout, const A *x,
                                    const float *mean, const float *invstd, const float *gamma,
                                    int64_t rows, int c) {
    const int lane = threadIdx.x & 31;
    VT_WARP_ROWS(r, rows) {
        const double m = mean[r], is = invstd[r];
        double sg = 0, sgx = 0;
        for (int j = lane; j < c; j += 32) {
            const double g = __dmul_rn(ld(dout, r * c + j), gamma ? (double)gamma[j] : 1.0);
            sg += g;
            sgx += __dmul_rn(g, __dmul_rn(__dsub_rn(ld(x, r * c + j), m), is));
        }
        sg = warp_sum(sg);
        sgx = warp_sum(sgx);
        for (int j = lane; j < c; j += 32) {
            const double g = __dmul_rn(ld(dout, r * c + j), gamma ? (double)gamma[j] : 1.0);
            const double xh = __dmul_rn(__dsub_rn(ld(x, r * c + j), m), is);
            const double t = __dsub_rn(__dsub_rn(g, sg / c), __dmul_rn(xh, sgx) / c);
            st(din, r * c + j, (float)__dmul_rn(is, t));
        }
    }
}

extern "C" void vt_cuk_layernorm_forward_dt(cudaStream_t st, vt_cuk_dt dt, void *out,
                                            float *mean, float *invstd, const void *x,
                                            const float *gamma, const float *beta, int64_t rows,
                                            int c, float eps) {
    if (rows <= 0 || c <= 0)
        return;
    VT_DT(dt, k_ln_fwd<A><<<warp_blocks(rows), VT_THREADS, 0, st>>>(
                  (A *)out, mean, invstd, (const A *)x, gamma, beta, rows, c, eps));
    CUDA_LAUNCH_CHECK();
}
extern "C" void vt_cuk_layernorm_forward(cudaStream_t st, float *out, float *mean, float *invstd,
                                         const float *x, const float *gamma, const float *beta,
                                         int64_t rows, int c, float eps) {
    vt_cuk_layernorm_forward_dt(st, VT_CUK_F32, out, mean, invstd, x, gamma, beta, rows, c, eps);
}

extern "C" void vt_cuk_layernorm_backward_dt(cudaStream_t st, vt_cuk_dt dt, void *din,
                                             float *dgamma, float *dbeta, const void *dout,
                                             const void *x, const float *mean,
                                             const float *invstd, const float *gamma,
                                             int64_t rows, int c, double *partials) {
    if (rows <= 0 || c <= 0)
        return;
    if (dgamma || dbeta)
        vt_cuk_colsum2_acc_dt(st, dt, dgamma, dbeta, dout, x, mean, invstd, rows, c, partials);
    if (din) {
        VT_DT(dt, k_ln_bwd_din<A><<<warp_blocks(rows), VT_THREADS, 0, st>>>(
                      (A *)din, (const A *)dout, (const A *)x, mean, invstd, gamma, rows, c));
        CUDA_LAUNCH_CHECK();
    }
}
extern "C" void vt_cuk_layernorm_backward(cudaStream_t st, float *din, float *dgamma,
                                          float *dbeta, const float *dout, const float *x,
                                          const float *mean, const float *invstd,
                                          const float *gamma, int64_t rows, int c,
                                          double *partials) {
    vt_cuk_layernorm_backward_dt(st, VT_CUK_F32, din, dgamma, dbeta, dout, x, mean, invstd, gamma,
                                 rows, c, partials);
}

/* ------------------------------------------------------------------ gelu */

#define VT_INV_SQRT_2PI 0.39894228040143267794f

template <typename A> __global__ static void k_gelu_fwd(A *out, const A *in, int64_t n) {
    VT_GRID_STRIDE(i, n) {
        const float x = ld(in, i);
        st(out, i, __fmul_rn(x, normcdff(x)));
    }
}
/* d/dx x Phi(x) = Phi(x) + x phi(x) */
template <typename A>
__global__ static void k_gelu_bwd(A *din, const A *dout, const A *in, int64_t n) {
    VT_GRID_STRIDE(i, n) {
        const float x = ld(in, i);
        const float pdf = __fmul_rn(expf(__fmul_rn(__fmul_rn(-0.5f, x), x)), VT_INV_SQRT_2PI);
        st(din, i, __fmul_rn(ld(dout, i), __fadd_rn(normcdff(x), __fmul_rn(x, pdf))));
    }
}
extern "C" void vt_cuk_gelu_forward_dt(cudaStream_t st, vt_cuk_dt dt, void *out, const void *in,
                                       int64_t n) {
    if (n <= 0)
        return;
    VT_DT(dt, k_gelu_fwd<A><<<vt_blocks(n), VT_THREADS, 0, st>>>((A *)out, (const A *)in, n));
    CUDA_LAUNCH_CHECK();
}
extern "C" void vt_cuk_gelu_backward_dt(cudaStream_t st, vt_cuk_dt dt, void *din,
                                        const void *dout, const void *in, int64_t n) {
    if (n <= 0 || !din)
        return;
    VT_DT(dt, k_gelu_bwd<A><<<vt_blocks(n), VT_THREADS, 0, st>>>((A *)din, (const A *)dout,
                                                                 (const A *)in, n));
    CUDA_LAUNCH_CHECK();
}
extern "C" void vt_cuk_gelu_forward(cudaStream_t st, float *out, const float *in, int64_t n) {
    vt_cuk_gelu_forward_dt(st, VT_CUK_F32, out, in, n);
}
extern "C" void vt_cuk_gelu_backward(cudaStream_t st, float *din, const float *dout,
                                     const float *in, int64_t n) {
    vt_cuk_gelu_backward_dt(st, VT_CUK_F32, din, dout, in, n);
}

/* ------------------------------------------------------------------ attention rows */

/* Rows of a (B, bq, L) block of scaled logits s, row = b * bq + i (b: a head or a clip of
 * the GEMM batch): the probabilities exp(s - m) / z into p (FP32: p is s, in place; BF16:
 * a separate bf16 block, each probability rounded once, for the P V GEMM);
 * lse[b * lse_bs + i] = m + log z (lse points at member 0's entry of the block's first
 * query). One block a row. */
template <typename P>
__global__ static void k_attn_softmax(const float *s, P *p, float *lse, int64_t rows, int L,
                                      int bq, int64_t lse_bs) {
    __shared__ double sh[VT_THREADS];
    __shared__ float shf[VT_THREADS];
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const float *sr = s + row * L;
        P *pr = p + row * L;
        float m = -INFINITY;
        for (int j = threadIdx.x; j < L; j += VT_THREADS)
            m = fmaxf(m, sr[j]);
        m = vt_block_max(m, shf);
        double z = 0;
        for (int j = threadIdx.x; j < L; j += VT_THREADS)
            z += expf(__fsub_rn(sr[j], m));
        z = vt_block_sum(z, sh);
        const float inv = (float)(1.0 / z);
        for (int j = threadIdx.x; j < L; j += VT_THREADS)
            st(pr, j, __fmul_rn(expf(__fsub_rn(sr[j], m)), inv));
        if (threadIdx.x == 0)
            lse[(row / bq) * lse_bs + row % bq] = (float)((double)m + log(z));
        __syncthreads(); /* sh and shf are reused by the next row */
    }
}

/* Backward rows: s (B, bq, L) scaled logits -> p = exp(s - lse); dp (B, bq, L) float =
 * dout . v -> ds / sqrt(D) = p (dp - delta) * scale, delta = dout_i . out_i (double).
 * p and ds go to po and dso (FP32: s and dp, in place; BF16: separate bf16 blocks, each
 * value rounded once: the GEMMs' bf16 inputs). Member b's query i: dout + b * o_bs +
 * i * hd (out alike), lse[b * lse_bs + i]. */
template <typename A>
__global__ static void k_attn_ds(const float *s, const float *dp, A *po, A *dso,
                                 const float *lse, const A *dout, const A *out, int64_t rows,
                                 int L, int bq, int D, int64_t hd, int64_t o_bs, int64_t lse_bs,
                                 float scale) {
    __shared__ double sh[VT_THREADS];
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const int64_t b = row / bq, i = row % bq;
        const A *dor = dout + b * o_bs + i * hd, *orr = out + b * o_bs + i * hd;
        double a = 0;
        for (int d = threadIdx.x; d < D; d += VT_THREADS)
            a += (double)ld(dor, d) * ld(orr, d);
        const float delta = (float)vt_block_sum(a, sh);
        const float ls = lse[b * lse_bs + i];
        const float *sr = s + row * L, *dpr = dp + row * L;
        A *pr = po + row * L, *dsr = dso + row * L;
        for (int j = threadIdx.x; j < L; j += VT_THREADS) {
            const float p = expf(__fsub_rn(sr[j], ls));
            const float g = __fmul_rn(__fmul_rn(p, __fsub_rn(dpr[j], delta)), scale);
            st(pr, j, p);
            st(dsr, j, g);
        }
        __syncthreads(); /* sh is reused by the next row */
    }
}

/* dst[b * dst_bs + l * ld + d] = src[(b L + l) D + d] rounded to bf16: the float dK, dV
 * accumulators of a BF16 backward into their columns of dqkv. */
__global__ static void k_attn_store16(__nv_bfloat16 *dst, const float *src, int64_t total, int L,
                                      int D, int64_t dst_bs, int64_t dst_ld) {
    VT_GRID_STRIDE(e, total) {
        const int64_t d = e % D, bl = e / D, l = bl % L, b = bl / L;
        st(dst, b * dst_bs + l * dst_ld + d, src[e]);
    }
}

static unsigned row_blocks(int64_t rows) {
    return (unsigned)(rows < VT_MAX_BLOCKS ? rows : VT_MAX_BLOCKS);
}

extern "C" void vt_cuk_attn_softmax_dt(cudaStream_t st, vt_cuk_dt dt, const float *s, void *p,
                                       float *lse, int64_t rows, int L, int bq, int64_t lse_bs) {
    if (rows <= 0 || L <= 0)
        return;
    VT_DT(dt, k_attn_softmax<A><<<row_blocks(rows), VT_THREADS, 0, st>>>(s, (A *)p, lse, rows, L,
                                                                          bq, lse_bs));
    CUDA_LAUNCH_CHECK();
}
extern "C" void vt_cuk_attn_softmax(cudaStream_t st, float *s, float *lse, int64_t rows, int L,
                                    int bq, int64_t lse_bs) {
    vt_cuk_attn_softmax_dt(st, VT_CUK_F32, s, s, lse, rows, L, bq, lse_bs);
}
extern "C" void vt_cuk_attn_ds_dt(cudaStream_t st, vt_cuk_dt dt, const float *s, const float *dp,
                                  void *p, void *ds, const float *lse, const void *dout,
                                  const void *out, int64_t rows, int L, int bq, int D, int64_t hd,
                                  int64_t o_bs, int64_t lse_bs, float scale) {
    if (rows <= 0 || L <= 0)
        return;
    VT_DT(dt, k_attn_ds<A><<<row_blocks(rows), VT_THREADS, 0, st>>>(
                  s, dp, (A *)p, (A *)ds, lse, (const A *)dout, (const A *)out, rows, L, bq, D,
                  hd, o_bs, lse_bs, scale));
    CUDA_LAUNCH_CHECK();
}
extern "C" void vt_cuk_attn_ds(cudaStream_t st, float *s, float *dp, const float *lse,
                               const float *dout, const float *out, int64_t rows, int L, int bq,
                               int D, int64_t hd, int64_t o_bs, int64_t lse_bs, float scale) {
    vt_cuk_attn_ds_dt(st, VT_CUK_F32, s, dp, s, dp, lse, dout, out, rows, L, bq, D, hd, o_bs,
                      lse_bs, scale);
}
extern "C" void vt_cuk_attn_store16(cudaStream_t st, void *dst, const float *src, int nb, int L,
                                    int D, int64_t dst_bs, int64_t dst_ld) {
    const int64_t total = (int64_t)nb * L * D;
    if (total <= 0)
        return;
    k_attn_store16<<<vt_blocks(total), VT_THREADS, 0, st>>>((__nv_bfloat16 *)dst, src, total, L,
                                                            D, dst_bs, dst_ld);
    CUDA_LAUNCH_CHECK();
}
