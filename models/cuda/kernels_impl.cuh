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
 *    ast() does; everything else (statistics, masks, losses, optimizer) stays float;
 *  - a memory-bound op that touches each element once (element-wise, batch-norm apply,
 *    bias, optimizer updates) is a functor of kernels_vec_ops.cuh launched through
 *    vt_map_launch / vt_rows_launch below: its per-element arithmetic is written once, in
 *    __host__ __device__ code, and runs in the scalar kernel or, where the arrays are
 *    aligned and VT_CUDA_VEC allows, in the vector kernel (16-byte accesses), with the
 *    same bits; tests/test_cuda_vec.cu checks both bodies on the CPU. A reduction keeps
 *    its own kernel: vectorising its loads would change each thread's order of additions.
 * They must never include FFmpeg or any vidtrain header other than kernels.h, this file,
 * cuda_check.h, kernels_vec.cuh and kernels_vec_ops.cuh (the functors and their bodies),
 * models/xsum_arith.h, models/max_rule.h, models/relu_rule.h and models/grad_gate.h (pure
 * arithmetic and a struct shared with the host; nvcc compiles them as C++), kernels_mvit.h
 * (MViT's launchers) and kernels_window.cuh (MViT's pooling windows).
 */
#ifndef VT_CUDA_KERNELS_IMPL_CUH
#define VT_CUDA_KERNELS_IMPL_CUH

#include <stdint.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "models/cuda/cuda_check.h"
#include "models/cuda/kernels.h"
#include "models/cuda/kernels_vec.cuh" /* VT_THREADS, vt_blocks and the bodies */

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
 * order, so deterministic: at each level w (VT_THREADS/2 down to 1) slot t < w becomes
 * slot t + slot t+w. The levels w >= 32 go through shared memory; the last five run in
 * the first warp as shuffles, lane t adding lane t+w's value exactly as slot t added
 * slot t+w (the same pairs, the same operand order, so the same bits as the all-shared
 * tree it replaces, with four barriers fewer). Lanes t >= w add what they get and are
 * never read. */
__device__ static inline double vt_block_sum(double v, double *sh) {
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int w = VT_THREADS / 2; w >= 32; w >>= 1) {
        if ((int)threadIdx.x < w)
            sh[threadIdx.x] += sh[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x < 32) {
        double a = sh[threadIdx.x];
        for (int w = 16; w > 0; w >>= 1)
            a += __shfl_down_sync(0xffffffffu, a, w);
        if (threadIdx.x == 0)
            sh[0] = a;
    }
    __syncthreads();
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
    unsigned gx, gy;
    vt_rows_grid(rows, s, &gx, &gy);
    return dim3(gx, gy);
}
#define VT_ROWS_LOOP(row, j, rows, s)                                                         \
    for (int64_t row = blockIdx.y; row < (rows); row += gridDim.y)                            \
        for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < (s);             \
             j += (int64_t)gridDim.x * blockDim.x)

/* kernels_vec.cuh's bodies as kernels, on a functor of kernels_vec_ops.cuh. Each thread
 * takes the gate (optimizers) on its own copy first. */
template <class F> __global__ static void k_map(F f, int64_t n) {
    F t = f;
    if (!t.take_gate())
        return;
    vt_scalar_body(t, (int64_t)blockIdx.x * blockDim.x + threadIdx.x,
                   (int64_t)gridDim.x * blockDim.x, n);
}
template <class F> __global__ static void k_map_vec(F f, int64_t n, int head) {
    F t = f;
    if (!t.take_gate())
        return;
    vt_vec_body(t, (int64_t)blockIdx.x * blockDim.x + threadIdx.x,
                (int64_t)gridDim.x * blockDim.x, n, head);
}
template <class F> __global__ static void k_rows(F f, int64_t rows, int64_t s) {
    vt_rows_body(f, blockIdx.x, blockIdx.y, threadIdx.x, gridDim.x, gridDim.y, blockDim.x, rows,
                 s);
}
/* n elements of f: the vector kernel where vt_vec_choose says so, else the scalar one. */
template <class F> static void vt_map_launch(cudaStream_t st, const F &f, int64_t n) {
    if (n <= 0)
        return;
    const vt_vec_plan p = vt_vec_plan_of(f, n, vt_cuk_vec_enabled());
    if (p.vec)
        k_map_vec<F><<<p.blocks, VT_THREADS, 0, st>>>(f, n, p.head);
    else
        k_map<F><<<p.blocks, VT_THREADS, 0, st>>>(f, n);
    CUDA_LAUNCH_CHECK();
}
/* The same for a (rows, s) op, whose scalar kernel walks rows_grid. */
template <class F> static void vt_rows_launch(cudaStream_t st, const F &f, int64_t rows, int64_t s) {
    if (rows <= 0 || s <= 0)
        return;
    const vt_vec_plan p = vt_vec_plan_of(f, rows * s, vt_cuk_vec_enabled());
    if (p.vec)
        k_map_vec<F><<<p.blocks, VT_THREADS, 0, st>>>(f, rows * s, p.head);
    else
        k_rows<F><<<rows_grid(rows, s), VT_THREADS, 0, st>>>(f, rows, s);
    CUDA_LAUNCH_CHECK();
}

#endif
