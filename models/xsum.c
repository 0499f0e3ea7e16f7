/*
 * xsum.c: the fixed-point accumulators of xsum.h, on the host (the CPU backends' ops
 * xsum_fold and xsum_round call these). The arithmetic of an element is xsum_arith.h's,
 * which the CUDA kernels (models/cuda/kernels_xsum.cu) compile too.
 */
#include "models/xsum.h"

#include <math.h>

#include "models/xsum_arith.h"

/* Loops this long go parallel (as cpu_blocks.h's CPU_PAR_MIN). */
#define XSUM_PAR_MIN 32768

void vt_xsum_fold(int64_t *acc, const float *x, int64_t n, int e0, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static) if (n > XSUM_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        vt_xs_fold1(acc + 2 * i, x[i], e0);
}

void vt_xsum_fold_init(int64_t *acc, const float *x, int64_t n, int e0, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static) if (n > XSUM_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        int64_t a[2] = {0, 0};
        vt_xs_fold1(a, x[i], e0);
        acc[2 * i] = a[0];
        acc[2 * i + 1] = a[1];
    }
}

void vt_xsum_round(float *out, const int64_t *acc, int64_t n, int e0, int threads) {
    const double unit = ldexp(1.0, e0);
#pragma omp parallel for num_threads(threads) schedule(static) if (n > XSUM_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        out[i] = vt_xs_round1(acc + 2 * i, unit);
}

void vt_xsum_add(int64_t *dst, const int64_t *src, int64_t n) {
    for (int64_t i = 0; i < 2 * n; i++)
        dst[i] += src[i];
}
