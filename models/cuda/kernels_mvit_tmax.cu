/*
 * kernels_mvit_tmax.cu: the max pooling of a token grid (kernels_mvit.h's token_maxpool;
 * MViT's pool_skip), forward and backward, on float or bf16 activations (the launcher's
 * vt_cuk_dt). Kept apart from kernels_mvit.cu, MViT's attention and q/k/v pooling, by
 * concern. The rules all kernel files keep are in kernels_impl.cuh; the formulas are
 * cpu-ref's (models/cpu/cpu_mvit_impl.h).
 *
 * Exactness against cpu-ref: every output element is formed by one thread with cpu-ref's
 * operations in cpu-ref's order (a max; float adds in window order): bit for bit. The
 * forward and backward find each window's winning tap with one device function (tmax_arg,
 * models/max_rule.h's rule, cpu-ref's too: the first maximum, a NaN wins); the backward
 * writes it per window, then gathers per input element the windows that chose it. BF16:
 * the forward copies a bf16 value (exact); the backward's float sum is rounded once.
 * It must never use atomics: the gather keeps the sums' order fixed.
 */
#include <math.h>
#include <stdint.h>

#include <cuda_runtime.h>

#include "models/cuda/cuda_check.h"
#include "models/cuda/kernels_impl.cuh"
#include "models/cuda/kernels_mvit.h"
#include "models/cuda/kernels_window.cuh"
#include "models/max_rule.h"

/* ------------------------------------------------------------------ token max pool */

/* Window o (>= 1)'s winning tap under max_rule.h's rule (the first maximum; a NaN wins,
 * the last of several), as a row >= 1, or -1 when the window lies wholly in the padding.
 * The forward returns its value and the backward routes the gradient to it: one walk of
 * the taps (kernels_window.cuh) for both, so they cannot disagree. */
template <typename A>
__device__ static int64_t tmax_arg(const A *x, int c, const vt_cuk_pool &p, int64_t o) {
    float best = -INFINITY;
    int64_t arg = -1;
    win_taps(p, o, [&](int, int64_t xi) {
        const float v = ld(x, xi * c);
        if (vt_max_takes(v, best, arg < 0)) {
            best = v;
            arg = xi;
        }
    });
    return arg;
}

/* out's e = (j Lo + o) c + ch: the window's winning tap's value (-inf for a window wholly
 * in the padding, as cpu-ref's), row 0 copied. */
template <typename A>
__global__ static void k_tmax_fwd(A *out, const A *in, int c, vt_cuk_pool p,
                                  int64_t total) {
    const int64_t L = grid_rows(p.in), Lo = grid_rows(p.out);
    VT_GRID_STRIDE(e, total) {
        const int ch = (int)(e % c);
        const int64_t r = e / c, o = r % Lo, j = r / Lo;
        const A *x = in + j * L * c + ch;
        if (o == 0) {
            st(out, e, ld(x, 0));
            continue;
        }
        const int64_t a = tmax_arg(x, c, p, o);
        st(out, e, a < 0 ? -INFINITY : ld(x, a * c)); /* a copy: exact in either type */
    }
}

/* arg's e = (j (Lo - 1) + o - 1) c + ch: window o >= 1's winning tap (a row >= 1). */
template <typename A>
__global__ static void k_tmax_argmax(int *arg, const A *in, int c, vt_cuk_pool p,
                                     int64_t total) {
    const int64_t L = grid_rows(p.in), Lw = grid_rows(p.out) - 1; /* windows: row 0 is none */
    VT_GRID_STRIDE(e, total) {
        const int ch = (int)(e % c);
        const int64_t r = e / c, o = r % Lw, j = r / Lw;
        arg[e] = (int)tmax_arg(in + j * L * c + ch, c, p, o + 1);
    }
}

/* din's e = (j L + xi) c + ch: 0 plus, in window order (cpu-ref's order of its float adds),
 * the gradient of every window whose winning tap (arg) is row xi. */
template <typename A>
__global__ static void k_tmax_bwd(A *din, const A *dout, const int *arg, int c,
                                  vt_cuk_pool p, int64_t total) {
    const int64_t L = grid_rows(p.in), Lo = grid_rows(p.out);
    VT_GRID_STRIDE(e, total) {
        const int ch = (int)(e % c);
        const int64_t r = e / c, xi = r % L, j = r / L;
        const A *gy = dout + j * Lo * c + ch;
        const int *ag = arg + j * (Lo - 1) * c + ch;
        if (xi == 0) {
            st(din, e, ld(gy, 0));
            continue;
        }
        float acc = 0.0f;
        /* taps from the last down: the windows in increasing order */
        win_readers<true>(p, xi, [&](int, int64_t o) {
            if (ag[(o - 1) * c] == xi)
                acc = __fadd_rn(acc, ld(gy, o * c));
        });
        st(din, e, acc); /* BF16: the float sum rounded once */
    }
}

extern "C" void vt_cuk_token_maxpool_fwd(cudaStream_t st, vt_cuk_dt dt, void *out,
                                         const void *in, int n, int c, const vt_cuk_pool *p) {
    const int64_t total = (int64_t)n * grid_rows(p->out) * c;
    if (total <= 0)
        return;
    VT_DT(dt, k_tmax_fwd<A><<<vt_blocks(total), VT_THREADS, 0, st>>>((A *)out, (const A *)in, c,
                                                                      *p, total));
    CUDA_LAUNCH_CHECK();
}
extern "C" void vt_cuk_token_maxpool_bwd(cudaStream_t st, vt_cuk_dt dt, void *din,
                                         const void *dout, const void *in, int n, int c,
                                         const vt_cuk_pool *p, int *arg) {
    const int64_t total = (int64_t)n * grid_rows(p->in) * c;
    if (total <= 0 || !din)
        return;
    const int64_t windows = (int64_t)n * grid3(p->out) * c;
    if (windows > 0) {
        VT_DT(dt, k_tmax_argmax<A><<<vt_blocks(windows), VT_THREADS, 0, st>>>(
                      arg, (const A *)in, c, *p, windows));
        CUDA_LAUNCH_CHECK();
    }
    VT_DT(dt, k_tmax_bwd<A><<<vt_blocks(total), VT_THREADS, 0, st>>>(
                  (A *)din, (const A *)dout, arg, c, *p, total));
    CUDA_LAUNCH_CHECK();
}
