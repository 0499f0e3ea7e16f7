/*
 * kernels_xsum.cu: exact sums on the GPU (kernels.h): xsum.h's fixed-point accumulators
 * folded and rounded with the arithmetic of models/xsum_arith.h — the same inline
 * functions the CPU backends run, so a GPU tower's accumulators hold the same integers
 * as a CPU tower's for the same terms — and the device-local reducer's int64 sum. Each
 * element is a function of its own values: no order to fix, no reduction across threads.
 * The rules all kernel files keep are in kernels_impl.cuh (this file alone also includes
 * xsum_arith.h, pure arithmetic with no other dependency).
 */
#include <math.h>
#include <stdint.h>

#include <cuda_runtime.h>

#include "models/cuda/cuda_check.h"
#include "models/cuda/kernels.h"
#include "models/cuda/kernels_impl.cuh"
#include "models/xsum_arith.h"

__global__ static void k_xsum_fold(int64_t *acc, const float *x, int64_t n, int e0) {
    VT_GRID_STRIDE(i, n) { vt_xs_fold1(acc + 2 * i, x[i], e0); }
}
extern "C" void vt_cuk_xsum_fold(cudaStream_t st, int64_t *acc, const float *x, int64_t n,
                                 int e0) {
    if (n <= 0)
        return;
    k_xsum_fold<<<vt_blocks(n), VT_THREADS, 0, st>>>(acc, x, n, e0);
    CUDA_LAUNCH_CHECK();
}

__global__ static void k_xsum_round(float *out, const int64_t *acc, int64_t n, double unit) {
    VT_GRID_STRIDE(i, n) { out[i] = vt_xs_round1(acc + 2 * i, unit); }
}
extern "C" void vt_cuk_xsum_round(cudaStream_t st, float *out, const int64_t *acc, int64_t n,
                                  int e0) {
    if (n <= 0)
        return;
    k_xsum_round<<<vt_blocks(n), VT_THREADS, 0, st>>>(out, acc, n, ldexp(1.0, e0));
    CUDA_LAUNCH_CHECK();
}

typedef struct vt_cuk_ptrs64 {
    int64_t *p[VT_CUK_MAX_RANKS];
} vt_cuk_ptrs64;
__global__ static void k_sum_ranks_i64(vt_cuk_ptrs64 b, int nranks, int64_t lo, int64_t hi) {
    const int64_t n = hi - lo;
    VT_GRID_STRIDE(j, n) {
        const int64_t i = lo + j;
        int64_t s = b.p[0][i];
        for (int r = 1; r < nranks; r++)
            s += b.p[r][i];
        for (int r = 0; r < nranks; r++)
            b.p[r][i] = s;
    }
}
extern "C" void vt_cuk_sum_ranks_i64(cudaStream_t st, int64_t *const *bufs, int nranks,
                                     int64_t lo, int64_t hi) {
    if (hi <= lo)
        return;
    VT_CHECK(nranks >= 1 && nranks <= VT_CUK_MAX_RANKS, "sum_ranks_i64: %d ranks", nranks);
    vt_cuk_ptrs64 b;
    for (int r = 0; r < VT_CUK_MAX_RANKS; r++)
        b.p[r] = r < nranks ? bufs[r] : NULL;
    k_sum_ranks_i64<<<vt_blocks(hi - lo), VT_THREADS, 0, st>>>(b, nranks, lo, hi);
    CUDA_LAUNCH_CHECK();
}
