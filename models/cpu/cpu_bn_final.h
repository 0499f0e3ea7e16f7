/*
 * cpu_bn_final.h: batch norm's per-channel scalars (backend.h's bn_finalize) in double —
 * the single copy both CPU backends put in their op tables (cpu_ref.c, the truth; cpu.c),
 * so the two agree bit for bit by construction. The CUDA kernel (cuda/kernels_bn.cu)
 * spells the same formulas; test_cuda_ops_gpu compares it with cpu-ref.
 */
#ifndef VT_CPU_BN_FINAL_H
#define VT_CPU_BN_FINAL_H

#include <math.h>
#include <stdint.h>

#include "base/common.h"
#include "models/backend.h"

/* sum, sumsq: each channel's sums of x - k over count values (k NULL: 0). Training
 * (count > 0): the batch mean relative to k and 1/sqrt(var + eps), and the running
 * statistics (when given) moved by momentum towards the mean and the unbiased variance.
 * Eval (count 0): the running statistics' mean and 1/sqrt(var + eps). */
static inline void vt_cpu_bn_finalize(vt_backend *be, float *mean, float *invstd,
                                      float *running_mean, float *running_var, const float *sum,
                                      const float *sumsq, const float *k, int64_t count, int c,
                                      float momentum, float eps) {
    (void)be;
    VT_CHECK(count > 0 || (running_mean && running_var),
             "bn_finalize: count 0 (eval) needs the running statistics");
    for (int ci = 0; ci < c; ci++) {
        if (count == 0) { /* eval: normalise with the running statistics */
            mean[ci] = running_mean[ci];
            invstd[ci] = (float)(1.0 / sqrt((double)running_var[ci] + eps));
            continue;
        }
        double d = (double)sum[ci] / (double)count; /* mean - k */
        double var = (double)sumsq[ci] / (double)count - d * d;
        if (var < 0) /* rounding of E[(x-k)^2] - E[x-k]^2 */
            var = 0;
        double m = (k ? (double)k[ci] : 0.0) + d;
        mean[ci] = (float)d; /* relative to k: bn_apply and backward add k back */
        invstd[ci] = (float)(1.0 / sqrt(var + eps));
        if (running_mean) {
            double unbiased = count > 1 ? var * (double)count / (double)(count - 1) : var;
            running_mean[ci] = (float)((1.0 - momentum) * running_mean[ci] + momentum * m);
            running_var[ci] = (float)((1.0 - momentum) * running_var[ci] + momentum * unbiased);
        }
    }
}

#endif
