/*
 * kernels_impl.cuh: what vidtrain's CUDA kernel files (models/cuda/kernels_*.cu) share —
 * launch geometry, activation access for float and bf16, the dtype dispatch and the
 * fixed-order block sum. The launchers themselves are declared in kernels.h; one .cu
 * file per op family defines them, as ggml's CUDA backend does.
 *
 * Rules the kernel files keep:
 *  - the arithmetic is cpu-ref's (models/cpu/cpu_ref.c): sums that cpu-ref forms in double
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
 * They must never include FFmpeg or any vidtrain header other than kernels.h, this file,
 * cuda_check.h, models/xsum_arith.h, models/max_rule.h and models/relu_rule.h (pure
 * arithmetic shared with the host; nvcc compiles them as C++), kernels_mvit.h (MViT's
 * launchers) and kernels_window.cuh (MViT's pooling windows).
 */
#ifndef VT_CUDA_KERNELS_IMPL_CUH
#define VT_CUDA_KERNELS_IMPL_CUH

#include <stdint.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "models/cuda/kernels.h"

#define VT_THREADS 256
/* Grid-stride loops cap the grid: enough blocks to fill any current GPU many times. */
#define VT_MAX_BLOCKS 65535

static inline unsigned vt_blocks(int64_t n) {
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
__device__ static inline double vt_block_sum(double v, double *sh) {
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int w = VT_THREADS / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w)
            sh[threadIdx.x] += sh[threadIdx.x + w];
        __syncthreads();
    }
    return sh[0];
}
/* The max of one float per thread over a VT_THREADS block; result in sh[0] (order does not
 * matter for a max; NaN ignored, as cpu-ref's `s > m ? s : m` ignores it): the attention
 * softmaxes' row max (kernels_attn.cu, kernels_mvit.cu). */
__device__ static inline float vt_block_max(float v, float *sh) {
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int w = VT_THREADS / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w)
            sh[threadIdx.x] = fmaxf(sh[threadIdx.x], sh[threadIdx.x + w]);
        __syncthreads();
    }
    return sh[0];
}

/* (rows = N*C, S) layout: blockIdx.y walks rows, blockIdx.x * blockDim.x walks S. */
static inline dim3 rows_grid(int64_t rows, int64_t s) {
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

#endif
