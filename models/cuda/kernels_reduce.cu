/*
 * kernels_reduce.cu: the device-local reducer's kernel (kernels.h): several
 * towers' gradient buffers on one GPU summed in rank order and written back to each
 * (float, and int64 for the exact sums' accumulators).
 * The rules all kernel files keep are in kernels_impl.cuh.
 */
#include <math.h>
#include <stdint.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "models/cuda/cuda_check.h"
#include "models/cuda/kernels.h"
#include "models/cuda/kernels_impl.cuh"

/* ------------------------------------------------------------------ device-local reducer */

/* float sums add with __fadd_rn (no contraction: the host reducer's bits); int64 sums
 * (the exact sums' accumulators) are integer adds, exact in any order. */
static __device__ inline float add_rn(float a, float b) { return __fadd_rn(a, b); }
static __device__ inline int64_t add_rn(int64_t a, int64_t b) { return a + b; }

template <typename T> struct vt_cuk_ptrs {
    T *p[VT_CUK_MAX_RANKS];
};
template <typename T>
__global__ static void k_sum_ranks(vt_cuk_ptrs<T> b, int nranks, int64_t lo, int64_t hi) {
    const int64_t n = hi - lo;
    VT_GRID_STRIDE(j, n) {
        const int64_t i = lo + j;
        T s = b.p[0][i];
        for (int r = 1; r < nranks; r++)
            s = add_rn(s, b.p[r][i]);
        for (int r = 0; r < nranks; r++)
            b.p[r][i] = s;
    }
}
template <typename T>
static void sum_ranks(cudaStream_t st, T *const *bufs, int nranks, int64_t lo, int64_t hi) {
    if (hi <= lo)
        return;
    VT_CHECK(nranks >= 1 && nranks <= VT_CUK_MAX_RANKS, "sum_ranks: %d ranks", nranks);
    vt_cuk_ptrs<T> b;
    for (int r = 0; r < VT_CUK_MAX_RANKS; r++)
        b.p[r] = r < nranks ? bufs[r] : NULL;
    k_sum_ranks<T><<<vt_blocks(hi - lo), VT_THREADS, 0, st>>>(b, nranks, lo, hi);
    CUDA_LAUNCH_CHECK();
}
extern "C" void vt_cuk_sum_ranks(cudaStream_t st, float *const *bufs, int nranks, int64_t lo,
                                 int64_t hi) {
    sum_ranks(st, bufs, nranks, lo, hi);
}
extern "C" void vt_cuk_sum_ranks_i64(cudaStream_t st, int64_t *const *bufs, int nranks,
                                     int64_t lo, int64_t hi) {
    sum_ranks(st, bufs, nranks, lo, hi);
}
