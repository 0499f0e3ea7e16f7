/*
 * cpu_loss.c: cpu_loss.h. Single-threaded on purpose: the loss reads (clips x classes)
 * numbers, a few thousand, nothing next to the layer before it.
 */
#include "models/cpu/cpu_loss.h"

#include <math.h>

#include "models/bf16.h"

void vt_cpu_softmax_xent_soft(vt_backend *be, float *loss, float *dlogits, const float *logits,
                              const float *target, int n, int k, float grad_scale) {
    const int bf16 = be->precision == VT_PREC_BF16;
    for (int ni = 0; ni < n; ni++) {
        const float *z = logits + (int64_t)ni * k, *t = target + (int64_t)ni * k;
        double mx = z[0];
        for (int j = 1; j < k; j++)
            mx = z[j] > mx ? z[j] : mx;
        double se = 0, ts = 0; /* ts = sum_j t_j: 1 for a distribution */
        for (int j = 0; j < k; j++) {
            se += exp((double)z[j] - mx);
            ts += t[j];
        }
        const double lse = mx + log(se);
        double l = 0;
        for (int j = 0; j < k; j++) {
            l -= (double)t[j] * ((double)z[j] - lse);
            if (!dlogits)
                continue;
            float d = (float)(grad_scale * (exp((double)z[j] - lse) * ts - t[j]));
            if (bf16)
                ((vt_bf16 *)(void *)dlogits)[(int64_t)ni * k + j] = vt_bf16_from_f32(d);
            else
                dlogits[(int64_t)ni * k + j] = d;
        }
        if (loss)
            loss[ni] = (float)l;
    }
}
