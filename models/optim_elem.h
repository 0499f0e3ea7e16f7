/*
 * optim_elem.h: one element of each optimizer update in torch.optim's float formulas —
 * the single copy the CPU backends run (cpu_ref.c in a plain loop, the truth; cpu.c in
 * the same loop under OpenMP), so the two agree bit for bit by construction. Element i
 * of p and the state arrays, whose gradient g the caller reads (clipped, where the step's
 * gate clips: vt_grad_gate_g); a state array is touched only when the option uses it
 * (buf is NULL for SGD without momentum and RMSprop without it). The CUDA kernels
 * (cuda/kernels_optim.cu) spell the same formulas with unfused operations, which nvcc would
 * otherwise contract into FMAs; test_cuda_ops_gpu compares them with cpu-ref.
 */
#ifndef VT_OPTIM_ELEM_H
#define VT_OPTIM_ELEM_H

#include <math.h>
#include <stdint.h>

#include "models/backend.h"

/* The gate's clip, as the update ops apply it (backend.h): *c = (float)gate->coef when the
 * gate clips (coef < 1), and 1 is returned; 0 without a gate or without clipping. Then a
 * gradient reads g[i] * c: the float product the scale op would have left in g[i]. */
static inline int vt_grad_gate_clip(const vt_grad_gate *gate, float *c) {
    *c = 1.0f;
    if (!gate || !(gate->coef < 1.0))
        return 0;
    *c = (float)gate->coef;
    return 1;
}
static inline float vt_grad_gate_g(const float *g, int64_t i, int clip, float c) {
    return clip ? g[i] * c : g[i];
}

/* torch.optim.SGD: d = g + wd p; buf = d on the first step, else m buf + (1-damp) d;
 * nesterov: d += m buf, else d = buf; p -= lr d. */
static inline void vt_sgd_elem(float *p, float g, float *buf, int64_t i, float lr,
                               float momentum, float dampening, float wd, int nesterov,
                               int64_t step) {
    float d = g;
    if (wd != 0)
        d += wd * p[i];
    if (momentum != 0) {
        buf[i] = step <= 1 ? d : momentum * buf[i] + (1 - dampening) * d;
        d = nesterov ? d + momentum * buf[i] : buf[i];
    }
    p[i] -= lr * d;
}

/* torch.optim.RMSprop (centered=False): sq = a sq + (1-a) d^2; avg = sqrt(sq) + eps;
 * momentum: buf = m buf + d/avg, p -= lr buf; else p -= lr d/avg. */
static inline void vt_rmsprop_elem(float *p, float g, float *sq, float *buf, int64_t i,
                                   float lr, float alpha, float eps, float wd, float momentum) {
    float d = g;
    if (wd != 0)
        d += wd * p[i];
    sq[i] = alpha * sq[i] + (1 - alpha) * d * d;
    float avg = sqrtf(sq[i]) + eps;
    if (momentum > 0) {
        buf[i] = momentum * buf[i] + d / avg;
        p[i] -= lr * buf[i];
    } else {
        p[i] -= lr * (d / avg);
    }
}

/* torch.optim.AdamW: p *= 1 - lr wd; m, v moments; p -= lr/bc1 * m / (sqrt(v)/sqrt(bc2) +
 * eps). The bias corrections are per step: vt_adamw_step_consts. */
static inline void vt_adamw_step_consts(float lr, float beta1, float beta2, int64_t step,
                                        float *step_size, float *bc2_sqrt) {
    const double bc1 = 1.0 - pow(beta1, (double)step);
    const double bc2 = 1.0 - pow(beta2, (double)step);
    *step_size = (float)(lr / bc1);
    *bc2_sqrt = (float)sqrt(bc2);
}

static inline void vt_adamw_elem(float *p, float g, float *m, float *v, int64_t i,
                                 float lr, float beta1, float beta2, float eps, float wd,
                                 float step_size, float bc2_sqrt) {
    p[i] *= 1 - lr * wd;
    m[i] = beta1 * m[i] + (1 - beta1) * g;
    v[i] = beta2 * v[i] + (1 - beta2) * g * g;
    float denom = sqrtf(v[i]) / bc2_sqrt + eps;
    p[i] -= step_size * (m[i] / denom);
}

#endif
