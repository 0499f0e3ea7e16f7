/*
 * cpu_act.c: SiLU, sigmoid and the channel scale of the fast CPU backend (cpu_act.h). Each
 * value depends on its own inputs only, or (the channel scale's ds) on one plane summed in
 * a fixed order, so threads never change a bit.
 */
#include "models/cpu/cpu_act.h"

#include <math.h>

#include <omp.h>

#include "models/cpu/cpu_blocks.h"

/* SiLU and sigmoid in float, as PyTorch's CPU kernels; expf per value. */
void vt_cpu_silu_forward(vt_backend *be, float *out, const float *in, int64_t n) {
#pragma omp parallel for simd num_threads(be->threads) schedule(guided, 4096) if (n > CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        out[i] = in[i] / (1.0f + expf(-in[i]));
}
void vt_cpu_silu_backward(vt_backend *be, float *din, const float *dout, const float *in,
                              int64_t n) {
#pragma omp parallel for simd num_threads(be->threads) schedule(guided, 4096) if (n > CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        const float x = in[i], s = 1.0f / (1.0f + expf(-x));
        din[i] = dout[i] * (s * (1.0f + x * (1.0f - s)));
    }
}
void vt_cpu_sigmoid_forward(vt_backend *be, float *out, const float *in, int64_t n) {
#pragma omp parallel for simd num_threads(be->threads) schedule(guided, 4096) if (n > CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        out[i] = 1.0f / (1.0f + expf(-in[i]));
}
void vt_cpu_sigmoid_backward(vt_backend *be, float *din, const float *dout, const float *out,
                                 int64_t n) {
#pragma omp parallel for simd num_threads(be->threads) schedule(guided, 4096) if (n > CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        din[i] = dout[i] * (out[i] * (1.0f - out[i]));
}
/* Channel scale: one plane a thread at a time; ds as a double sum in plane order. */
void vt_cpu_chscale_forward(vt_backend *be, float *out, const float *x, const float *s, int n,
                                int c, int64_t sp) {
    const int64_t planes = (int64_t)n * c;
#pragma omp parallel for num_threads(be->threads) schedule(guided) if (planes * sp > CPU_PAR_MIN)
    for (int64_t pl = 0; pl < planes; pl++) {
        const float v = s[pl];
        const float *xp = x + pl * sp;
        float *o = out + pl * sp;
#pragma omp simd
        for (int64_t j = 0; j < sp; j++)
            o[j] = xp[j] * v;
    }
}
void vt_cpu_chscale_backward(vt_backend *be, float *dx, float *ds, const float *dout,
                                 const float *x, const float *s, int n, int c, int64_t sp) {
    const int64_t planes = (int64_t)n * c;
#pragma omp parallel for num_threads(be->threads) schedule(guided) if (planes * sp > CPU_PAR_MIN)
    for (int64_t pl = 0; pl < planes; pl++) {
        const float *d = dout + pl * sp, *xp = x + pl * sp;
        if (ds) { /* before dx: dx may be dout */
            double a = 0;
            for (int64_t j = 0; j < sp; j++)
                a += (double)(d[j] * xp[j]);
            ds[pl] = (float)a;
        }
        if (dx) {
            const float v = s[pl];
            float *o = dx + pl * sp;
#pragma omp simd
            for (int64_t j = 0; j < sp; j++)
                o[j] = d[j] * v;
        }
    }
}

