/*
 * kernels_xsum.cu: exact sums on the GPU (kernels.h): xsum.h's fixed-point accumulators
 * folded and rounded with the arithmetic of models/xsum_arith.h — the same inline
 * functions the CPU backends run, so a GPU tower's accumulators hold the same integers
 * as a CPU tower's for the same terms (the device-local reducer's int64 sum is in
 * kernels_reduce.cu). Each element is a function of its own values: no order to fix, no
 * reduction across threads.
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

/* acc += x, or acc = x's units with init (acc not read: xsum.h vt_xsum_fold_init) */
__global__ static void k_xsum_fold(int64_t *acc, const float *x, int64_t n, int init, int e0) {
    VT_GRID_STRIDE(i, n) {
        int64_t a[2] = {init ? 0 : acc[2 * i], init ? 0 : acc[2 * i + 1]};
        vt_xs_fold1(a, x[i], e0);
        acc[2 * i] = a[0];
        acc[2 * i + 1] = a[1];
    }
}
extern "C" void vt_cuk_xsum_fold(cudaStream_t st, int64_t *acc, const float *x, int64_t n,
                                 int init, int e0) {
    if (n <= 0)
        return;
    k_xsum_fold<<<vt_blocks(n), VT_THREADS, 0, st>>>(acc, x, n, init, e0);
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
