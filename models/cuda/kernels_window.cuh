/*
 * kernels_window.cuh: the walks of a pooling window over MViT's token grid that the
 * pooling kernels share — kernels_mvit.cu's q/k/v pooling and kernels_mvit_tmax.cu's token
 * max pool: the taps a window reads (the forward's walk, and the max pool's argmax), and
 * the windows that read an input row (the gathering backward's walk). Each walk visits
 * in one fixed order and calls the kernel's own body at each step, so a kernel's sums
 * and its max keep cpu-ref's order (models/cpu/cpu_mvit_impl.h) and its arithmetic is the
 * kernel's alone.
 *
 * Rows are a token grid's: row 0 the class token (no window reads it, none writes it), grid
 * cell (t, h, w) row 1 + (t H + h) W + w. Taps are numbered (a kh + b) kw + c, (a, b, c)
 * the tap's offsets in the window. Included by kernel files only (kernels_impl.cuh's
 * rules); nothing but kernels.h (vt_cuk_pool).
 */
#ifndef VT_CUDA_KERNELS_WINDOW_CUH
#define VT_CUDA_KERNELS_WINDOW_CUH

#include <stdint.h>

#include "models/cuda/kernels.h"

/* Cells of a (t, h, w) grid. */
static inline int grid3(const int *t) { return t[0] * t[1] * t[2]; }
/* Rows of a token grid: its cells and row 0, the class token (a pool's L of p.in, Lo of
 * p.out), for the kernels and their launchers alike. */
__host__ __device__ static inline int64_t grid_rows(const int *t) {
    return 1 + (int64_t)t[0] * t[1] * t[2];
}

/* Calls f(tap, xi) for each tap of window o (>= 1, a row of p.out's grid) that lies inside
 * p.in's grid (the padding skipped), taps in (t, h, w) order; xi the input row (>= 1) the
 * tap reads. */
template <typename F>
__device__ static inline void win_taps(const vt_cuk_pool &p, int64_t o, F f) {
    const int ot = (int)((o - 1) / ((int64_t)p.out[1] * p.out[2])),
              oh = (int)((o - 1) / p.out[2] % p.out[1]), ow = (int)((o - 1) % p.out[2]);
    for (int a = 0; a < p.k[0]; a++) {
        const int it = ot * p.s[0] - p.p[0] + a;
        if (it < 0 || it >= p.in[0])
            continue;
        for (int b = 0; b < p.k[1]; b++) {
            const int ih = oh * p.s[1] - p.p[1] + b;
            if (ih < 0 || ih >= p.in[1])
                continue;
            for (int c = 0; c < p.k[2]; c++) {
                const int iw = ow * p.s[2] - p.p[2] + c;
                if (iw < 0 || iw >= p.in[2])
                    continue;
                const int tap = (a * p.k[1] + b) * p.k[2] + c;
                f(tap, 1 + ((int64_t)it * p.in[1] + ih) * p.in[2] + iw);
            }
        }
    }
}

/* Calls f(tap, o) for each window o (>= 1, a row of p.out's grid) that reads input row xi
 * (>= 1) through its tap `tap`. Rev false: taps in (t, h, w) order (cpu-ref's tap order,
 * the q/k/v pooling's dx); Rev true: taps from the last down, which visits the windows in
 * increasing order (the max pool's gather, cpu-ref's order of its float adds). */
template <bool Rev, typename F>
__device__ static inline void win_readers(const vt_cuk_pool &p, int64_t xi, F f) {
    const int it = (int)((xi - 1) / ((int64_t)p.in[1] * p.in[2])),
              ih = (int)((xi - 1) / p.in[2] % p.in[1]), iw = (int)((xi - 1) % p.in[2]);
    for (int ia = 0; ia < p.k[0]; ia++) {
        const int a = Rev ? p.k[0] - 1 - ia : ia;
        const int nt = it + p.p[0] - a, ot = nt / p.s[0];
        if (nt < 0 || nt % p.s[0] || ot >= p.out[0])
            continue;
        for (int ib = 0; ib < p.k[1]; ib++) {
            const int b = Rev ? p.k[1] - 1 - ib : ib;
            const int nh = ih + p.p[1] - b, oh = nh / p.s[1];
            if (nh < 0 || nh % p.s[1] || oh >= p.out[1])
                continue;
            for (int ic = 0; ic < p.k[2]; ic++) {
                const int c = Rev ? p.k[2] - 1 - ic : ic;
                const int nw = iw + p.p[2] - c, ow = nw / p.s[2];
                if (nw < 0 || nw % p.s[2] || ow >= p.out[2])
                    continue;
                const int tap = (a * p.k[1] + b) * p.k[2] + c;
                f(tap, 1 + ((int64_t)ot * p.out[1] + oh) * p.out[2] + ow);
            }
        }
    }
}

#endif
