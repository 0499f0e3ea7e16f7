/*
 * kernels_reduce.cu: the device-local reducer's kernel (kernels.h): several
 * towers' gradient buffers on one GPU summed in rank order and written back to each.
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
