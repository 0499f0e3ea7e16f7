/*
 * kernels_elem.cu: element-wise CUDA kernels (kernels.h): fill, scale, axpy,
 * rounding, add, dtype conversions, the double sum of squares; activations and dropout;
 * and the VT_CUDA_VEC switch every vectorised kernel's launch reads (kernels_vec.cuh).
 * The rules all kernel files keep are in kernels_impl.cuh.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "models/cuda/cuda_check.h"
#include "models/cuda/kernels.h"
#include "models/cuda/kernels_impl.cuh"
#include "models/cuda/kernels_vec_ops.cuh"
#include "models/relu_rule.h"

/* ------------------------------------------------------------------ element-wise */

/* VT_CUDA_VEC, read once (a C++ static is initialised once, thread-safe), and a test's
 * override of it. */
static int vec_from_env(void) {
    const char *e = getenv("VT_CUDA_VEC");
    if (!e || !*e)
        return 1;
    VT_CHECK(!strcmp(e, "0") || !strcmp(e, "1"),
             "VT_CUDA_VEC=%s: 0 (the scalar kernels) or 1 (the vectorised ones, the default)", e);
    return e[0] == '1';
}
static int vec_forced = -1;
extern "C" int vt_cuk_vec_enabled(void) {
    static const int env = vec_from_env();
    const int f = __atomic_load_n(&vec_forced, __ATOMIC_RELAXED);
    return f >= 0 ? f : env;
}
extern "C" void vt_cuk_vec_set(int on) {
    VT_CHECK(on >= -1 && on <= 1, "vt_cuk_vec_set(%d): 0, 1 or -1", on);
    __atomic_store_n(&vec_forced, on, __ATOMIC_RELAXED);
}

/* The element-wise ops are kernels_vec_ops.cuh's functors on kernels_impl.cuh's
 * vt_map_launch (vectorised where the arrays allow). */
extern "C" void vt_cuk_fill(cudaStream_t st, float *x, float v, int64_t n) {
    vt_op_fill f{};
    f.x = x, f.v = v;
    vt_map_launch(st, f, n);
}
extern "C" void vt_cuk_scale(cudaStream_t st, float *x, float a, int64_t n) {
    vt_op_scale f{};
    f.x = x, f.a = a;
    vt_map_launch(st, f, n);
}
extern "C" void vt_cuk_axpy(cudaStream_t st, float *y, float a, const float *x, int64_t n) {
    vt_op_axpy f{};
    f.y = y, f.a = a, f.x = x;
    vt_map_launch(st, f, n);
}
__global__ static void k_round_even(float *x, int64_t n) {
    VT_GRID_STRIDE(i, n) x[i] = rintf(x[i]);
}
extern "C" void vt_cuk_round_even(cudaStream_t st, float *x, int64_t n) {
    if (n <= 0)
        return;
    k_round_even<<<vt_blocks(n), VT_THREADS, 0, st>>>(x, n);
    CUDA_LAUNCH_CHECK();
}
extern "C" void vt_cuk_add(cudaStream_t st, vt_cuk_dt dt, void *out, const void *a,
                           const void *b, int64_t n) {
    VT_DT(dt, {
        vt_op_add<A> f{};
        f.out = (A *)out, f.a = (const A *)a, f.b = (const A *)b;
        vt_map_launch(st, f, n);
    });
}

/* dst (dt) = src (float), rounded for bf16; dst (float) = src (dt), exact. */
extern "C" void vt_cuk_to_act(cudaStream_t st, vt_cuk_dt dt, void *dst, const float *src,
                              int64_t n) {
    VT_DT(dt, {
        vt_op_convert<A, float> f{};
        f.dst = (A *)dst, f.src = src;
        vt_map_launch(st, f, n);
    });
}
extern "C" void vt_cuk_from_act(cudaStream_t st, vt_cuk_dt dt, float *dst, const void *src,
                                int64_t n) {
    VT_DT(dt, {
        vt_op_convert<float, A> f{};
        f.dst = dst, f.src = (const A *)src;
        vt_map_launch(st, f, n);
    });
}
/* dst (float) += src (dt): a bf16 weight gradient into the float one. */
extern "C" void vt_cuk_acc_from_act(cudaStream_t st, vt_cuk_dt dt, float *dst, const void *src,
                                    int64_t n) {
    VT_DT(dt, {
        vt_op_acc_from<A> f{};
        f.dst = dst, f.src = (const A *)src;
        vt_map_launch(st, f, n);
    });
}

/* sumsq: VT_SUMSQ_PARTS blocks each write one double partial, one block sums them. */
#define VT_SUMSQ_PARTS 1024
__global__ static void k_sumsq_part(double *part, const float *x, int64_t n) {
    __shared__ double sh[VT_THREADS];
    double a = 0;
    VT_GRID_STRIDE(i, n) {
        double v = x[i];
        a += v * v;
    }
    double s = vt_block_sum(a, sh);
    if (threadIdx.x == 0)
        part[blockIdx.x] = s;
}
__global__ static void k_sum_parts(double *result, const double *part, int nparts, int add) {
    __shared__ double sh[VT_THREADS];
    double a = 0;
    for (int i = threadIdx.x; i < nparts; i += VT_THREADS)
        a += part[i];
    double s = vt_block_sum(a, sh);
    if (threadIdx.x == 0) /* the gate's groups: the host's `ss += s` of before, in double */
        *result = add ? __dadd_rn(*result, s) : s;
}
extern "C" int vt_cuk_sumsq_parts(void) { return VT_SUMSQ_PARTS; }
extern "C" void vt_cuk_sumsq(cudaStream_t st, double *result, double *partials, const float *x,
                             int64_t n, int add) {
    if (n <= 0) {
        if (!add)
            CUDA_CHECK(cudaMemsetAsync(result, 0, sizeof(double), st));
        return;
    }
    unsigned nb = vt_blocks(n);
    if (nb > VT_SUMSQ_PARTS)
        nb = VT_SUMSQ_PARTS;
    k_sumsq_part<<<nb, VT_THREADS, 0, st>>>(partials, x, n);
    CUDA_LAUNCH_CHECK();
    k_sum_parts<<<1, VT_THREADS, 0, st>>>(result, partials, (int)nb, add);
    CUDA_LAUNCH_CHECK();
}

/* The gradient gate's decision (backend.h grad_gate): the CPU backends' arithmetic
 * (backend.c vt_backend_grad_gate_host), each double operation rounded to nearest as
 * IEEE says, spelled out so that nothing is contracted or approximated. */
__global__ static void k_grad_gate(vt_grad_gate *g, float clip_norm, double skip_at, int skip) {
    const double norm = __dsqrt_rn(g->sumsq);
    g->norm = norm;
    g->skip = skip || (skip_at > 0 && !(norm < skip_at));
    g->coef = clip_norm > 0 ? __ddiv_rn((double)clip_norm, __dadd_rn(norm, 1e-6)) : 1.0;
}
extern "C" void vt_cuk_grad_gate(cudaStream_t st, vt_grad_gate *gate, float clip_norm,
                                 double skip_at, int skip) {
    k_grad_gate<<<1, 1, 0, st>>>(gate, clip_norm, skip_at, skip);
    CUDA_LAUNCH_CHECK();
}

__global__ static void k_copy_if_skip(float *dst, const float *src, int64_t n,
                                      const vt_grad_gate *g) {
    if (!g->skip)
        return;
    VT_GRID_STRIDE(i, n) dst[i] = src[i];
}
extern "C" void vt_cuk_copy_if_skip(cudaStream_t st, float *dst, const float *src, int64_t n,
                                    const vt_grad_gate *gate) {
    if (n <= 0)
        return;
    k_copy_if_skip<<<vt_blocks(n), VT_THREADS, 0, st>>>(dst, src, n, gate);
    CUDA_LAUNCH_CHECK();
}

/* ------------------------------------------------------------------ activations, dropout */

/* relu and its gradient (relu_rule.h: a NaN passes) */
extern "C" void vt_cuk_relu_forward(cudaStream_t st, vt_cuk_dt dt, void *out, const void *in,
                                    int64_t n) {
    VT_DT(dt, {
        vt_op_relu_fwd<A> f{};
        f.out = (A *)out, f.in = (const A *)in;
        vt_map_launch(st, f, n);
    });
}
extern "C" void vt_cuk_relu_backward(cudaStream_t st, vt_cuk_dt dt, void *din, const void *dout,
                                     const void *out, int64_t n) {
    VT_DT(dt, {
        vt_op_relu_bwd<A> f{};
        f.din = (A *)din, f.skip = NULL, f.dout = (const A *)dout, f.out = (const A *)out;
        vt_map_launch(st, f, n);
    });
}

/* Must stay equal to vt_hash64 in base/common.h (test_cuda_ops_gpu compares the dropout
 * masks of both bit for bit). */
__device__ static uint64_t vt_hash64_dev(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}
template <typename A>
__global__ static void k_dropout_fwd(A *out, float *mask, const A *in, int64_t n, float p,
                                     float scale, uint64_t seed) {
    VT_GRID_STRIDE(i, n) {
        uint64_t h = vt_hash64_dev(seed ^ ((uint64_t)i * 0x9E3779B97F4A7C15ull));
        float u = (float)(h >> 40) / 16777216.0f; /* 24 bits: exact in float */
        float m = (u >= p && p < 1.0f) ? scale : 0.0f;
        mask[i] = m;
        st(out, i, __fmul_rn(ld(in, i), m));
    }
}
extern "C" void vt_cuk_dropout_forward(cudaStream_t st, vt_cuk_dt dt, void *out, float *mask,
                                       const void *in, int64_t n, float p, float scale,
                                       uint64_t seed) {
    if (n <= 0)
        return;
    VT_DT(dt, k_dropout_fwd<A><<<vt_blocks(n), VT_THREADS, 0, st>>>((A *)out, mask, (const A *)in,
                                                                    n, p, scale, seed));
    CUDA_LAUNCH_CHECK();
}
template <typename A>
__global__ static void k_dropout_bwd(A *din, const A *dout, const float *mask, int64_t n) {
    VT_GRID_STRIDE(i, n) st(din, i, __fmul_rn(ld(dout, i), mask[i]));
}
extern "C" void vt_cuk_dropout_backward(cudaStream_t st, vt_cuk_dt dt, void *din,
                                        const void *dout, const float *mask, int64_t n) {
    if (n <= 0)
        return;
    VT_DT(dt, k_dropout_bwd<A><<<vt_blocks(n), VT_THREADS, 0, st>>>((A *)din, (const A *)dout,
                                                                    mask, n));
    CUDA_LAUNCH_CHECK();
}
