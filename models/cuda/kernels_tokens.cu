/*
 * kernels_tokens.cu: the token plumbing of the transformers (kernels.h): the per-clip
 * transpose between feature maps and tokens, the mean of tokens, the broadcast add of a
 * position table (or qkv's bias) and its gradient, per-clip scaling (drop path), and the
 * column sums over many rows that LayerNorm's dgamma/dbeta and the broadcast add's
 * gradient need. Each on float or bf16 activations (kernels.h's _dt launchers; BF16's
 * rounding points there). The rules all kernel files keep are in kernels_impl.cuh.
 *
 * Exactness against cpu-ref (models/cpu/cpu_attn.c): transpose, add_bcast, scale_rows and
 * token_mean_backward do cpu-ref's one float operation per element: bit for bit.
 * token_mean_forward sums each column over the tokens in cpu-ref's order in double and
 * divides once: bit for bit. The column sums (add_bcast_backward, LayerNorm's dgamma,
 * dbeta, and the FP32 linear layer's bias gradient, backend_cuda.c) are double partials over chunks of rows, then the chunks in order, rounded to
 * float once: cpu-ref's double sum in another order, so cpu-ref's float except when the
 * double sum lies within ~rows * 2^-53 relative of a float rounding boundary (1 ulp, rare).
 * No atomics: every sum has a fixed order.
 */
#include <math.h>
#include <stdint.h>

#include <cuda_runtime.h>

#include "models/cuda/cuda_check.h"
#include "models/cuda/kernels.h"
#include "models/cuda/kernels_impl.cuh"

/* ------------------------------------------------------------------ transpose */

#define TT 32 /* tile side; a (TT, 8) block moves a TT x TT tile through shared memory */

/* out (N, B, A) = transpose of each clip's in (N, A, B); blockIdx.z a clip, tiles of rows
 * strided by gridDim.y (a may pass 65535 tiles). E: the element (a bf16 moves as it is). */
template <typename E> __global__ static void k_transpose(E *out, const E *in, int a, int b) {
    __shared__ E t[TT][TT + 1]; /* + 1: no bank conflicts on the column reads */
    const int64_t base = (int64_t)blockIdx.z * a * b;
    const int j0 = blockIdx.x * TT;
    for (int i0 = blockIdx.y * TT; i0 < a; i0 += gridDim.y * TT) {
        for (int k = threadIdx.y; k < TT; k += blockDim.y) {
            const int i = i0 + k, j = j0 + threadIdx.x;
            if (i < a && j < b)
                t[k][threadIdx.x] = in[base + (int64_t)i * b + j];
        }
        __syncthreads();
        for (int k = threadIdx.y; k < TT; k += blockDim.y) {
            const int j = j0 + k, i = i0 + threadIdx.x;
            if (i < a && j < b)
                out[base + (int64_t)j * a + i] = t[threadIdx.x][k];
        }
        __syncthreads(); /* t is refilled by the next tile */
    }
}
extern "C" void vt_cuk_transpose_dt(cudaStream_t st, vt_cuk_dt dt, void *out, const void *in,
                                    int n, int a, int b) {
    if (n <= 0 || a <= 0 || b <= 0)
        return;
    const int gy = (a + TT - 1) / TT;
    /* gridDim.x may be 2^31 - 1; y and z at most 65535: clips in groups of 65535 */
    for (int n0 = 0; n0 < n; n0 += 65535) {
        const int nn = n - n0 < 65535 ? n - n0 : 65535;
        const int64_t off = (int64_t)n0 * a * b;
        const dim3 grid((unsigned)((b + TT - 1) / TT), (unsigned)(gy < 65535 ? gy : 65535),
                        (unsigned)nn);
        if (dt == VT_CUK_BF16) /* the 2-byte pattern as it is: a bf16 needs no arithmetic */
            k_transpose<uint16_t><<<grid, dim3(TT, 8), 0, st>>>((uint16_t *)out + off,
                                                                (const uint16_t *)in + off, a, b);
        else
            k_transpose<float><<<grid, dim3(TT, 8), 0, st>>>((float *)out + off,
                                                             (const float *)in + off, a, b);
        CUDA_LAUNCH_CHECK();
    }
}
extern "C" void vt_cuk_transpose(cudaStream_t st, float *out, const float *in, int n, int a,
                                 int b) {
    vt_cuk_transpose_dt(st, VT_CUK_F32, out, in, n, a, b);
}

/* ------------------------------------------------------------------ token mean */

/* out[n, j] = (sum_l in[n, l, j]) / L, the sum in double over l in order (cpu-ref's). */
template <typename A> __global__ static void k_tmean_fwd(A *out, const A *in, int n, int L, int c) {
    VT_GRID_STRIDE(nj, (int64_t)n * c) {
        const int64_t ni = nj / c, j = nj % c;
        double a = 0;
        for (int l = 0; l < L; l++)
            a += ld(in, (ni * L + l) * c + j);
        st(out, nj, (float)(a / L));
    }
}
template <typename A>
__global__ static void k_tmean_bwd(A *din, const A *dout, int L, int c, int64_t total) {
    VT_GRID_STRIDE(i, total) {
        const int64_t nl = i / c, j = i % c;
        st(din, i, (float)((double)ld(dout, nl / L * c + j) / L));
    }
}
extern "C" void vt_cuk_token_mean_forward_dt(cudaStream_t st, vt_cuk_dt dt, void *out,
                                             const void *in, int n, int L, int c) {
    if (n <= 0 || c <= 0)
        return;
    VT_DT(dt, k_tmean_fwd<A><<<vt_blocks((int64_t)n * c), VT_THREADS, 0, st>>>(
                  (A *)out, (const A *)in, n, L, c));
    CUDA_LAUNCH_CHECK();
}
extern "C" void vt_cuk_token_mean_backward_dt(cudaStream_t st, vt_cuk_dt dt, void *din,
                                              const void *dout, int n, int L, int c) {
    const int64_t total = (int64_t)n * L * c;
    if (total <= 0 || !din)
        return;
    VT_DT(dt, k_tmean_bwd<A><<<vt_blocks(total), VT_THREADS, 0, st>>>((A *)din, (const A *)dout,
                                                                      L, c, total));
    CUDA_LAUNCH_CHECK();
}
extern "C" void vt_cuk_token_mean_forward(cudaStream_t st, float *out, const float *in, int n,
                                          int L, int c) {
    vt_cuk_token_mean_forward_dt(st, VT_CUK_F32, out, in, n, L, c);
}
extern "C" void vt_cuk_token_mean_backward(cudaStream_t st, float *din, const float *dout, int n,
                                           int L, int c) {
    vt_cuk_token_mean_backward_dt(st, VT_CUK_F32, din, dout, n, L, c);
}

/* ------------------------------------------------------------------ broadcast, scaling */

/* A float as an A operand reads it: itself, or rounded to bf16 (the position table or
 * qkv's bias under BF16, as PyTorch's type_as / autocast's cast of a float tensor). */
__device__ static inline float as_act(const float *, float v) { return v; }
__device__ static inline float as_act(const __nv_bfloat16 *, float v) {
    return __bfloat162float(__float2bfloat16_rn(v));
}

template <typename A>
__global__ static void k_add_bcast(A *out, const A *in, const float *pos, int64_t per,
                                   int64_t total) {
    VT_GRID_STRIDE(i, total) st(out, i, __fadd_rn(ld(in, i), as_act(in, pos[i % per])));
}
template <typename A>
__global__ static void k_scale_rows(A *out, const A *in, const float *scale, int64_t per,
                                    int64_t total) {
    VT_GRID_STRIDE(i, total) st(out, i, __fmul_rn(ld(in, i), scale[i / per]));
}
extern "C" void vt_cuk_add_bcast_dt(cudaStream_t st, vt_cuk_dt dt, void *out, const void *in,
                                    const float *pos, int n, int64_t per) {
    const int64_t total = (int64_t)n * per;
    if (total <= 0)
        return;
    VT_DT(dt, k_add_bcast<A><<<vt_blocks(total), VT_THREADS, 0, st>>>((A *)out, (const A *)in, pos,
                                                                      per, total));
    CUDA_LAUNCH_CHECK();
}
extern "C" void vt_cuk_scale_rows_dt(cudaStream_t st, vt_cuk_dt dt, void *out, const void *in,
                                     const float *scale, int n, int64_t per) {
    const int64_t total = (int64_t)n * per;
    if (total <= 0 || !out)
        return;
    VT_DT(dt, k_scale_rows<A><<<vt_blocks(total), VT_THREADS, 0, st>>>(
                  (A *)out, (const A *)in, scale, per, total));
    CUDA_LAUNCH_CHECK();
}
extern "C" void vt_cuk_add_bcast(cudaStream_t st, float *out, const float *in, const float *pos,
                                 int n, int64_t per) {
    vt_cuk_add_bcast_dt(st, VT_CUK_F32, out, in, pos, n, per);
}
extern "C" void vt_cuk_scale_rows(cudaStream_t st, float *out, const float *in,
                                  const float *scale, int n, int64_t per) {
    vt_cuk_scale_rows_dt(st, VT_CUK_F32, out, in, scale, n, per);
}

/* ------------------------------------------------------------------ column sums */

/* Rows per chunk: enough chunks to fill the GPU when the columns are few (qkv's bias
 * gradient: 1152 columns over N*L = 12544 rows), one when they are many (a position
 * table's gradient: L*C columns over N clips); at most VT_COLSUM_CELLS partials. */
#define VT_COLSUM_MAXP 256
#define VT_COLSUM_CELLS ((int64_t)1 << 22)
extern "C" int vt_cuk_colsum_parts(int64_t rows, int64_t cols) {
    int64_t p = (rows + 15) / 16;
    if (p > VT_COLSUM_MAXP)
        p = VT_COLSUM_MAXP;
    if (cols > 0 && p * cols > VT_COLSUM_CELLS)
        p = VT_COLSUM_CELLS / cols;
    return (int)(p < 1 ? 1 : p);
}

/* Partials of chunk `part` (blockIdx.y) for columns j: MODE 0 pa = sum a; MODE 1 (LayerNorm)
 * pa = sum a * xhat, pb = sum a with xhat = (x - mean[r]) * invstd[r] in double. */
template <int MODE, typename A>
__global__ static void k_colsum_part(double *pa, double *pb, const A *a, const A *x,
                                     const float *mean, const float *invstd, int64_t rows,
                                     int64_t cols) {
    const int part = blockIdx.y, parts = gridDim.y;
    const int64_t chunk = (rows + parts - 1) / parts;
    const int64_t lo = (int64_t)part * chunk, hi = lo + chunk < rows ? lo + chunk : rows;
    for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < cols;
         j += (int64_t)gridDim.x * blockDim.x) {
        double sa = 0, sb = 0;
        for (int64_t r = lo; r < hi; r++) {
            const double v = ld(a, r * cols + j);
            if (MODE == 1) {
                const double xh = __dmul_rn(__dsub_rn(ld(x, r * cols + j), (double)mean[r]),
                                            (double)invstd[r]);
                sa += __dmul_rn(v, xh);
                sb += v;
            } else {
                sa += v;
            }
        }
        pa[(int64_t)part * cols + j] = sa;
        if (MODE == 1)
            pb[(int64_t)part * cols + j] = sb;
    }
}
/* dst[j] += (float)(partials of column j summed in chunk order); dst NULL: skipped. R
 * bf16: the sum rounded to bf16 first (a parameter gradient's contribution under BF16,
 * backend.h; kernels_impl.cuh's pacc). */
template <typename R>
__global__ static void k_colsum_final(float *da, float *db, const double *pa, const double *pb,
                                      int parts, int64_t cols) {
    VT_GRID_STRIDE(j, cols) {
        double sa = 0, sb = 0;
        for (int p = 0; p < parts; p++) {
            sa += pa[(int64_t)p * cols + j];
            if (pb)
                sb += pb[(int64_t)p * cols + j];
        }
        if (da)
            da[j] += pacc((const R *)NULL, sa);
        if (db)
            db[j] += pacc((const R *)NULL, sb);
    }
}
static dim3 colsum_grid(int64_t cols, int parts) {
    int64_t gx = (cols + VT_THREADS - 1) / VT_THREADS;
    if (gx > 4096)
        gx = 4096;
    return dim3((unsigned)(gx < 1 ? 1 : gx), (unsigned)parts);
}

/* BF16: the sum of bf16 dout rounded to bf16 before it is added (add_bcast's gradient is
 * a bias gradient: qkv's q_bias and v_bias, a learned position table). */
extern "C" void vt_cuk_colsum_acc_parts_dt(cudaStream_t st, vt_cuk_dt dt, float *dst,
                                           const void *src, int64_t rows, int64_t cols,
                                           double *partials) {
    if (rows <= 0 || cols <= 0 || !dst)
        return;
    const int parts = vt_cuk_colsum_parts(rows, cols);
    VT_DT(dt, k_colsum_part<0, A><<<colsum_grid(cols, parts), VT_THREADS, 0, st>>>(
                  partials, NULL, (const A *)src, (const A *)NULL, NULL, NULL, rows, cols));
    CUDA_LAUNCH_CHECK();
    VT_DT(dt, k_colsum_final<A><<<vt_blocks(cols), VT_THREADS, 0, st>>>(dst, NULL, partials, NULL,
                                                                        parts, cols));
    CUDA_LAUNCH_CHECK();
}
extern "C" void vt_cuk_colsum_acc_parts(cudaStream_t st, float *dst, const float *src,
                                        int64_t rows, int64_t cols, double *partials) {
    vt_cuk_colsum_acc_parts_dt(st, VT_CUK_F32, dst, src, rows, cols, partials);
}
/* LayerNorm's dgamma, dbeta: float sums whatever the activations (as BN's, backend.h). */
extern "C" void vt_cuk_colsum2_acc_dt(cudaStream_t st, vt_cuk_dt dt, float *dgamma, float *dbeta,
                                      const void *dout, const void *x, const float *mean,
                                      const float *invstd, int64_t rows, int c,
                                      double *partials) {
    if (rows <= 0 || c <= 0 || (!dgamma && !dbeta))
        return;
    const int parts = vt_cuk_colsum_parts(rows, c);
    double *pb = partials + (int64_t)parts * c;
    VT_DT(dt, k_colsum_part<1, A><<<colsum_grid(c, parts), VT_THREADS, 0, st>>>(
                  partials, pb, (const A *)dout, (const A *)x, mean, invstd, rows, c));
    CUDA_LAUNCH_CHECK();
    k_colsum_final<float><<<vt_blocks(c), VT_THREADS, 0, st>>>(dgamma, dbeta, partials, pb, parts,
                                                               c);
    CUDA_LAUNCH_CHECK();
}
extern "C" void vt_cuk_colsum2_acc(cudaStream_t st, float *dgamma, float *dbeta,
                                   const float *dout, const float *x, const float *mean,
                                   const float *invstd, int64_t rows, int c, double *partials) {
    vt_cuk_colsum2_acc_dt(st, VT_CUK_F32, dgamma, dbeta, dout, x, mean, invstd, rows, c, partials);
}
