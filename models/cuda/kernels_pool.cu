/*
 * kernels_pool.cu: pooling CUDA kernels (kernels.h): max and average pooling
 * forward and backward (the backward gathers over covering windows, no atomics), and
 * global average pooling.
 * The rules all kernel files keep are in kernels_impl.cuh.
 */
#include <math.h>
#include <stdint.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "models/cuda/cuda_check.h"
#include "models/cuda/kernels.h"
#include "models/cuda/kernels_impl.cuh"
#include "models/max_rule.h"

/* ------------------------------------------------------------------ pooling */

/* Output cells of one dim whose window contains input position i: [lo, hi]. A window o
 * spans [o*s - p, o*s - p + k) (the ceil_mode tail beyond the padded input holds no
 * input, so this bound is exact for both max and avg). */
__device__ static void covering(int *lo, int *hi, int i, int k, int s, int p, int nout) {
    int a = i + p - k + 1;
    *lo = a <= 0 ? 0 : (a + s - 1) / s;
    int b = (i + p) / s;
    *hi = b < nout - 1 ? b : nout - 1;
}

/* Winning tap of window (ot, oh, ow): (t, h, w) order, max_rule.h's rule (strictly larger
 * or NaN replaces: the first maximum, a NaN anywhere propagates, the last of several NaNs
 * wins), padding never wins — cpu-ref's ref_max_arg. Returns the offset within the plane, -1 if the
 * window holds no input (cannot happen with PyTorch-valid padding). */
template <typename A>
__device__ static int max_arg(const A *plane, const vt_cuk_pool &g, int ot, int oh, int ow,
                              float *val) {
    int best = -1;
    float bv = 0;
    for (int kt = 0; kt < g.k[0]; kt++) {
        int it = ot * g.s[0] - g.p[0] + kt;
        if (it < 0 || it >= g.in[0])
            continue;
        for (int kh = 0; kh < g.k[1]; kh++) {
            int ih = oh * g.s[1] - g.p[1] + kh;
            if (ih < 0 || ih >= g.in[1])
                continue;
            for (int kw = 0; kw < g.k[2]; kw++) {
                int iw = ow * g.s[2] - g.p[2] + kw;
                if (iw < 0 || iw >= g.in[2])
                    continue;
                int i = (it * g.in[1] + ih) * g.in[2] + iw;
                float v = ld(plane, i);
                if (vt_max_takes(v, bv, best < 0)) {
                    best = i;
                    bv = v;
                }
            }
        }
    }
    *val = bv;
    return best;
}

template <typename A>
__global__ static void k_maxpool_fwd(A *out, const A *in, int64_t planes, vt_cuk_pool g) {
    const int64_t sout = (int64_t)g.out[0] * g.out[1] * g.out[2];
    const int64_t sin = (int64_t)g.in[0] * g.in[1] * g.in[2];
    VT_GRID_STRIDE(o, planes * sout) {
        const int64_t pl = o / sout;
        const int r = (int)(o - pl * sout);
        const int ow = r % g.out[2], oh = (r / g.out[2]) % g.out[1], ot = r / (g.out[2] * g.out[1]);
        float v;
        int a = max_arg(in + pl * sin, g, ot, oh, ow, &v);
        st(out, o, a >= 0 ? v : -INFINITY);
    }
}
extern "C" void vt_cuk_maxpool_forward(cudaStream_t st, vt_cuk_dt dt, void *out, const void *in,
                                       int64_t planes, vt_cuk_pool g) {
    const int64_t total = planes * g.out[0] * g.out[1] * g.out[2];
    if (total <= 0)
        return;
    VT_DT(dt, k_maxpool_fwd<A><<<vt_blocks(total), VT_THREADS, 0, st>>>((A *)out, (const A *)in,
                                                                        planes, g));
    CUDA_LAUNCH_CHECK();
}

/* Gather: each input cell sums the gradients of the covering windows whose winning tap
 * (max_arg) it is, in output order (the order cpu-ref's scatter adds them). The first maximum is
 * recomputed per covering window (at most ceil(k/s)^3 windows of k^3 cells): no atomics,
 * no argmax tensor. */
template <typename A>
__global__ static void k_maxpool_bwd(A *din, const A *dout, const A *in, int64_t planes,
                                     vt_cuk_pool g) {
    const int64_t sout = (int64_t)g.out[0] * g.out[1] * g.out[2];
    const int64_t sin = (int64_t)g.in[0] * g.in[1] * g.in[2];
    VT_GRID_STRIDE(x, planes * sin) {
        const int64_t pl = x / sin;
        const int r = (int)(x - pl * sin);
        const int iw = r % g.in[2], ih = (r / g.in[2]) % g.in[1], it = r / (g.in[2] * g.in[1]);
        int tlo, thi, hlo, hhi, wlo, whi;
        covering(&tlo, &thi, it, g.k[0], g.s[0], g.p[0], g.out[0]);
        covering(&hlo, &hhi, ih, g.k[1], g.s[1], g.p[1], g.out[1]);
        covering(&wlo, &whi, iw, g.k[2], g.s[2], g.p[2], g.out[2]);
        const A *plane = in + pl * sin;
        float facc = 0.0f; /* cpu-ref adds into a zeroed float din in output order: so do we */
        for (int ot = tlo; ot <= thi; ot++)
            for (int oh = hlo; oh <= hhi; oh++)
                for (int ow = wlo; ow <= whi; ow++) {
                    float v;
                    if (max_arg(plane, g, ot, oh, ow, &v) == r)
                        facc = __fadd_rn(facc, ld(dout, pl * sout +
                                                            ((int64_t)ot * g.out[1] + oh) * g.out[2] + ow));
                }
        st(din, x, facc);
    }
}
extern "C" void vt_cuk_maxpool_backward(cudaStream_t st, vt_cuk_dt dt, void *din,
                                        const void *dout, const void *in, int64_t planes,
                                        vt_cuk_pool g) {
    const int64_t total = planes * g.in[0] * g.in[1] * g.in[2];
    if (total <= 0)
        return;
    VT_DT(dt, k_maxpool_bwd<A><<<vt_blocks(total), VT_THREADS, 0, st>>>(
                  (A *)din, (const A *)dout, (const A *)in, planes, g));
    CUDA_LAUNCH_CHECK();
}

/* PyTorch's count_include_pad divisor: the window clipped to the PADDED input (cpu-ref's
 * ref_avg_window). lo/hi: the window clipped to the input. */
__device__ static int avg_window(int lo[3], int hi[3], const vt_cuk_pool &g, const int oc[3]) {
    int div = 1;
    for (int d = 0; d < 3; d++) {
        int start = oc[d] * g.s[d] - g.p[d];
        int end = start + g.k[d] < g.in[d] + g.p[d] ? start + g.k[d] : g.in[d] + g.p[d];
        div *= end - start;
        lo[d] = start > 0 ? start : 0;
        hi[d] = end < g.in[d] ? end : g.in[d];
    }
    return div;
}
template <typename A>
__global__ static void k_avgpool_fwd(A *out, const A *in, int64_t planes, vt_cuk_pool g) {
    const int64_t sout = (int64_t)g.out[0] * g.out[1] * g.out[2];
    const int64_t sin = (int64_t)g.in[0] * g.in[1] * g.in[2];
    VT_GRID_STRIDE(o, planes * sout) {
        const int64_t pl = o / sout;
        const int r = (int)(o - pl * sout);
        const int oc[3] = {r / (g.out[2] * g.out[1]), (r / g.out[2]) % g.out[1], r % g.out[2]};
        int lo[3], hi[3];
        const int div = avg_window(lo, hi, g, oc);
        const A *plane = in + pl * sin;
        double s = 0;
        for (int t = lo[0]; t < hi[0]; t++)
            for (int h = lo[1]; h < hi[1]; h++)
                for (int w = lo[2]; w < hi[2]; w++)
                    s += ld(plane, (t * g.in[1] + h) * g.in[2] + w);
        st(out, o, (float)(s / div));
    }
}
template <typename A>
__global__ static void k_avgpool_bwd(A *din, const A *dout, int64_t planes, vt_cuk_pool g) {
    const int64_t sout = (int64_t)g.out[0] * g.out[1] * g.out[2];
    const int64_t sin = (int64_t)g.in[0] * g.in[1] * g.in[2];
    VT_GRID_STRIDE(x, planes * sin) {
        const int64_t pl = x / sin;
        const int r = (int)(x - pl * sin);
        const int ic[3] = {r / (g.in[2] * g.in[1]), (r / g.in[2]) % g.in[1], r % g.in[2]};
        int clo[3], chi[3];
        for (int d = 0; d < 3; d++)
            covering(&clo[d], &chi[d], ic[d], g.k[d], g.s[d], g.p[d], g.out[d]);
        double acc = 0; /* cpu-ref accumulates these in double, in output order */
        for (int ot = clo[0]; ot <= chi[0]; ot++)
            for (int oh = clo[1]; oh <= chi[1]; oh++)
                for (int ow = clo[2]; ow <= chi[2]; ow++) {
                    const int oc[3] = {ot, oh, ow};
                    int lo[3], hi[3];
                    const int div = avg_window(lo, hi, g, oc);
                    acc += ld(dout, pl * sout + ((int64_t)ot * g.out[1] + oh) * g.out[2] + ow) /
                           (double)div;
                }
        st(din, x, (float)acc);
    }
}
extern "C" void vt_cuk_avgpool_forward(cudaStream_t st, vt_cuk_dt dt, void *out, const void *in,
                                       int64_t planes, vt_cuk_pool g) {
    const int64_t total = planes * g.out[0] * g.out[1] * g.out[2];
    if (total <= 0)
        return;
    VT_DT(dt, k_avgpool_fwd<A><<<vt_blocks(total), VT_THREADS, 0, st>>>((A *)out, (const A *)in,
                                                                        planes, g));
    CUDA_LAUNCH_CHECK();
}
extern "C" void vt_cuk_avgpool_backward(cudaStream_t st, vt_cuk_dt dt, void *din,
                                        const void *dout, int64_t planes, vt_cuk_pool g) {
    const int64_t total = planes * g.in[0] * g.in[1] * g.in[2];
    if (total <= 0)
        return;
    VT_DT(dt, k_avgpool_bwd<A><<<vt_blocks(total), VT_THREADS, 0, st>>>((A *)din,
                                                                        (const A *)dout, planes, g));
    CUDA_LAUNCH_CHECK();
}

/* Global average pool: one block per (n, c) row, double sum, then / S as cpu-ref. */
template <typename A>
__global__ static void k_gap_fwd(A *out, const A *in, int64_t rows, int64_t s) {
    __shared__ double sh[VT_THREADS];
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        double a = 0;
        for (int64_t j = threadIdx.x; j < s; j += VT_THREADS)
            a += ld(in, row * s + j);
        double t = vt_block_sum(a, sh);
        if (threadIdx.x == 0)
            st(out, row, (float)(t / (double)s));
        __syncthreads(); /* sh is reused by the next row */
    }
}
template <typename A>
__global__ static void k_gap_bwd(A *din, const A *dout, int64_t rows, int64_t s) {
    VT_ROWS_LOOP(row, j, rows, s) st(din, row * s + j, (float)((double)ld(dout, row) / (double)s));
}
extern "C" void vt_cuk_gap_forward(cudaStream_t st, vt_cuk_dt dt, void *out, const void *in,
                                   int64_t rows, int64_t s) {
    if (rows <= 0 || s <= 0)
        return;
    const unsigned nb = (unsigned)(rows < VT_MAX_BLOCKS ? rows : VT_MAX_BLOCKS);
    VT_DT(dt, k_gap_fwd<A><<<nb, VT_THREADS, 0, st>>>((A *)out, (const A *)in, rows, s));
    CUDA_LAUNCH_CHECK();
}
extern "C" void vt_cuk_gap_backward(cudaStream_t st, vt_cuk_dt dt, void *din, const void *dout,
                                    int64_t rows, int64_t s) {
    if (rows <= 0 || s <= 0)
        return;
    VT_DT(dt, k_gap_bwd<A><<<rows_grid(rows, s), VT_THREADS, 0, st>>>((A *)din, (const A *)dout,
                                                                      rows, s));
    CUDA_LAUNCH_CHECK();
}
