/*
 * kernels_se.cu: X3D's element-wise CUDA kernels (kernels.h): SiLU (Swish), sigmoid and
 * squeeze-excitation's channel scale, forward and backward, float32 or bf16 activations as
 * vt_cuk_dt says. The rules all kernel files keep are in kernels_impl.cuh; the formulas
 * are backend.h's (cpu-ref's, tested against PyTorch).
 */
#include <math.h>
#include <stdint.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "models/cuda/cuda_check.h"
#include "models/cuda/kernels.h"
#include "models/cuda/kernels_impl.cuh"

__device__ static inline float sig(float x) { return 1.0f / (1.0f + expf(-x)); }

template <typename A>
__global__ static void k_silu_fwd(A *out, const A *in, int64_t n) {
    VT_GRID_STRIDE(i, n) {
        const float x = ld(in, i);
        st(out, i, x * sig(x));
    }
}
template <typename A>
__global__ static void k_silu_bwd(A *din, const A *dout, const A *in, int64_t n) {
    VT_GRID_STRIDE(i, n) {
        const float x = ld(in, i), s = sig(x);
        st(din, i, ld(dout, i) * (s * (1.0f + x * (1.0f - s))));
    }
}
template <typename A>
__global__ static void k_sigmoid_fwd(A *out, const A *in, int64_t n) {
    VT_GRID_STRIDE(i, n) st(out, i, sig(ld(in, i)));
}
template <typename A>
__global__ static void k_sigmoid_bwd(A *din, const A *dout, const A *out, int64_t n) {
    VT_GRID_STRIDE(i, n) {
        const float y = ld(out, i);
        st(din, i, ld(dout, i) * (y * (1.0f - y)));
    }
}

extern "C" void vt_cuk_silu_forward(cudaStream_t st, vt_cuk_dt dt, void *out, const void *in,
                                    int64_t n) {
    if (n <= 0)
        return;
    VT_DT(dt, k_silu_fwd<A><<<vt_blocks(n), VT_THREADS, 0, st>>>((A *)out, (const A *)in, n));
    CUDA_LAUNCH_CHECK();
}
extern "C" void vt_cuk_silu_backward(cudaStream_t st, vt_cuk_dt dt, void *din, const void *dout,
                                     const void *in, int64_t n) {
    if (n <= 0)
        return;
    VT_DT(dt, k_silu_bwd<A><<<vt_blocks(n), VT_THREADS, 0, st>>>((A *)din, (const A *)dout,
                                                                 (const A *)in, n));
    CUDA_LAUNCH_CHECK();
}
extern "C" void vt_cuk_sigmoid_forward(cudaStream_t st, vt_cuk_dt dt, void *out, const void *in,
                                       int64_t n) {
    if (n <= 0)
        return;
    VT_DT(dt, k_sigmoid_fwd<A><<<vt_blocks(n), VT_THREADS, 0, st>>>((A *)out, (const A *)in, n));
    CUDA_LAUNCH_CHECK();
}
extern "C" void vt_cuk_sigmoid_backward(cudaStream_t st, vt_cuk_dt dt, void *din,
                                        const void *dout, const void *out, int64_t n) {
    if (n <= 0)
        return;
    VT_DT(dt, k_sigmoid_bwd<A><<<vt_blocks(n), VT_THREADS, 0, st>>>((A *)din, (const A *)dout,
                                                                    (const A *)out, n));
    CUDA_LAUNCH_CHECK();
}

/* Channel scale over (rows = N*C, S): out[row, j] = x[row, j] * s[row]. */
template <typename A>
__global__ static void k_chscale_fwd(A *out, const A *x, const A *s, int64_t rows, int64_t sp) {
    VT_ROWS_LOOP(row, j, rows, sp) st(out, row * sp + j, ld(x, row * sp + j) * ld(s, row));
}
/* ds[row] = sum_j dout * x, one block a row, in double as gap's forward. */
template <typename A>
__global__ static void k_chscale_ds(A *ds, const A *dout, const A *x, int64_t rows, int64_t sp) {
    __shared__ double sh[VT_THREADS];
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        double a = 0;
        for (int64_t j = threadIdx.x; j < sp; j += VT_THREADS)
            a += (double)(ld(dout, row * sp + j) * ld(x, row * sp + j));
        double t = vt_block_sum(a, sh);
        if (threadIdx.x == 0)
            st(ds, row, (float)t);
        __syncthreads(); /* sh is reused by the next row */
    }
}
extern "C" void vt_cuk_chscale_forward(cudaStream_t st, vt_cuk_dt dt, void *out, const void *x,
                                       const void *s, int64_t rows, int64_t sp) {
    if (rows <= 0 || sp <= 0)
        return;
    VT_DT(dt, k_chscale_fwd<A><<<rows_grid(rows, sp), VT_THREADS, 0, st>>>(
                  (A *)out, (const A *)x, (const A *)s, rows, sp));
    CUDA_LAUNCH_CHECK();
}
extern "C" void vt_cuk_chscale_backward(cudaStream_t st, vt_cuk_dt dt, void *dx, void *ds,
                                        const void *dout, const void *x, const void *s,
                                        int64_t rows, int64_t sp) {
    if (rows <= 0 || sp <= 0)
        return;
    if (ds) { /* first: dx may be dout (the stream orders the two launches) */
        const unsigned nb = (unsigned)(rows < VT_MAX_BLOCKS ? rows : VT_MAX_BLOCKS);
        VT_DT(dt, k_chscale_ds<A><<<nb, VT_THREADS, 0, st>>>((A *)ds, (const A *)dout,
                                                             (const A *)x, rows, sp));
        CUDA_LAUNCH_CHECK();
    }
    if (dx) {
        VT_DT(dt, k_chscale_fwd<A><<<rows_grid(rows, sp), VT_THREADS, 0, st>>>(
                      (A *)dx, (const A *)dout, (const A *)s, rows, sp));
        CUDA_LAUNCH_CHECK();
    }
}
