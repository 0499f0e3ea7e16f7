/*
 * kernels_bias.cu: bias CUDA kernels around the cuBLAS GEMMs and cuDNN
 * convolutions (kernels.h): bias added per row, bias gradients summed over rows or
 * channels in a fixed order, and the bias fill a GEMM accumulates onto.
 * The rules all kernel files keep are in kernels_impl.cuh.
 */
#include <math.h>
#include <stdint.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "models/cuda/cuda_check.h"
#include "models/cuda/kernels.h"
#include "models/cuda/kernels_impl.cuh"
#include "models/cuda/kernels_vec_ops.cuh"

/* ------------------------------------------------------------------ linear helpers */

/* out[i] += b[i % f]: kernels_vec_ops.cuh vt_op_add_bias_rows */
extern "C" void vt_cuk_add_bias_rows(cudaStream_t st, float *out, const float *b, int n, int f) {
    vt_op_add_bias_rows op{};
    op.out = out, op.b = b, op.f = f;
    vt_map_launch(st, op, (int64_t)n * f);
}
/* db[o] += sum_n dout[n, o]: one thread per column, rows in order, double like cpu-ref;
 * the contribution rounded to bf16 first when dout is bf16 (cpu-ref's pacc). */
template <typename A>
__global__ static void k_colsum_acc(float *db, const A *dout, int n, int f) {
    int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= f)
        return;
    double a = 0;
    for (int i = 0; i < n; i++)
        a += ld(dout, (int64_t)i * f + o);
    db[o] += pacc(dout, a);
}
extern "C" void vt_cuk_colsum_acc(cudaStream_t st, vt_cuk_dt dt, float *db, const void *dout,
                                  int n, int f) {
    if (n <= 0 || f <= 0)
        return;
    VT_DT(dt, k_colsum_acc<A><<<(unsigned)((f + 127) / 128), 128, 0, st>>>(db, (const A *)dout,
                                                                           n, f));
    CUDA_LAUNCH_CHECK();
}
/* db[c] += sum over (n, s) of dout[n, c, s]: one block per channel, a fixed-order double
 * sum, the contribution rounded as pacc (the conv bias gradient under BF16). */
template <typename A>
__global__ static void k_chansum_acc(float *db, const A *dout, int n, int c, int64_t s) {
    __shared__ double sh[VT_THREADS];
    const int ch = blockIdx.x;
    double a = 0;
    for (int ni = 0; ni < n; ni++)
        for (int64_t j = threadIdx.x; j < s; j += VT_THREADS)
            a += ld(dout, ((int64_t)ni * c + ch) * s + j);
    double t = vt_block_sum(a, sh);
    if (threadIdx.x == 0)
        db[ch] += pacc(dout, t);
}
extern "C" void vt_cuk_chansum_acc(cudaStream_t st, vt_cuk_dt dt, float *db, const void *dout,
                                   int n, int c, int64_t s) {
    if (n <= 0 || c <= 0 || s <= 0)
        return;
    VT_DT(dt, k_chansum_acc<A><<<(unsigned)c, VT_THREADS, 0, st>>>(db, (const A *)dout, n, c, s));
    CUDA_LAUNCH_CHECK();
}
/* out[row, j] = b[row % c] (rounded to A) for rows = N*C of s elements: the bias a conv or
 * GEMM then accumulates onto with beta = 1, so the sum is rounded once
 * (kernels_vec_ops.cuh vt_op_fill_bias). */
extern "C" void vt_cuk_fill_bias(cudaStream_t st, vt_cuk_dt dt, void *out, const float *b,
                                 int64_t rows, int c, int64_t s) {
    VT_DT(dt, {
        vt_op_fill_bias<A> f{};
        f.out = (A *)out, f.b = b, f.c = c, f.s = s;
        vt_rows_launch(st, f, rows, s);
    });
}
