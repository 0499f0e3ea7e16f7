/*
 * kernels_optim.cu: optimizer CUDA kernels (kernels.h): SGD (momentum,
 * Nesterov), RMSprop and AdamW updates, unfused float arithmetic as cpu-ref.
 * The rules all kernel files keep are in kernels_impl.cuh.
 */
#include <math.h>
#include <stdint.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "models/cuda/cuda_check.h"
#include "models/cuda/kernels.h"
#include "models/cuda/kernels_impl.cuh"

/* ------------------------------------------------------------------ optimizers */

/* The step's gradient gate (backend.h; NULL: none): every thread of a skipped step
 * returns at once; a clipping one reads g * (float)coef, the product the scale kernel
 * would have left in g (__fmul_rn: never contracted into what follows). */
#define GATE_BEGIN(gate)                                                                       \
    if ((gate) && (gate)->skip)                                                                \
        return;                                                                                \
    const bool clip_ = (gate) && (gate)->coef < 1.0;                                           \
    const float c_ = clip_ ? __double2float_rn((gate)->coef) : 1.0f;
#define GATE_G(g, i) (clip_ ? __fmul_rn((g)[i], c_) : (g)[i])

/* torch.optim.SGD, written as cpu-ref's ref_sgd_update with unfused float operations. */
__global__ static void k_sgd(float *p, const float *g, float *buf, int64_t n, float lr,
                             float momentum, float dampening, float wd, int nesterov,
                             int first_step, const vt_grad_gate *gate) {
    GATE_BEGIN(gate)
    VT_GRID_STRIDE(i, n) {
        float d = GATE_G(g, i);
        if (wd != 0)
            d = __fadd_rn(d, __fmul_rn(wd, p[i]));
        if (momentum != 0) {
            float b = first_step ? d
                                 : __fadd_rn(__fmul_rn(momentum, buf[i]),
                                             __fmul_rn(1.0f - dampening, d));
            buf[i] = b;
            d = nesterov ? __fadd_rn(d, __fmul_rn(momentum, b)) : b;
        }
        p[i] = __fsub_rn(p[i], __fmul_rn(lr, d));
    }
}
extern "C" void vt_cuk_sgd(cudaStream_t st, float *p, const float *g, float *buf, int64_t n,
                           float lr, float momentum, float dampening, float wd, int nesterov,
                           int first_step, const vt_grad_gate *gate) {
    if (n <= 0)
        return;
    k_sgd<<<vt_blocks(n), VT_THREADS, 0, st>>>(p, g, buf, n, lr, momentum, dampening, wd,
                                               nesterov, first_step, gate);
    CUDA_LAUNCH_CHECK();
}

__global__ static void k_rmsprop(float *p, const float *g, float *sq, float *buf, int64_t n,
                                 float lr, float alpha, float eps, float wd, float momentum,
                                 const vt_grad_gate *gate) {
    GATE_BEGIN(gate)
    VT_GRID_STRIDE(i, n) {
        float d = GATE_G(g, i);
        if (wd != 0)
            d = __fadd_rn(d, __fmul_rn(wd, p[i]));
        /* cpu-ref: alpha * sq + (1 - alpha) * d * d, i.e. ((1-alpha)*d)*d */
        float s = __fadd_rn(__fmul_rn(alpha, sq[i]), __fmul_rn(__fmul_rn(1.0f - alpha, d), d));
        sq[i] = s;
        float avg = __fadd_rn(__fsqrt_rn(s), eps);
        if (momentum > 0) {
            float b = __fadd_rn(__fmul_rn(momentum, buf[i]), __fdiv_rn(d, avg));
            buf[i] = b;
            p[i] = __fsub_rn(p[i], __fmul_rn(lr, b));
        } else {
            p[i] = __fsub_rn(p[i], __fmul_rn(lr, __fdiv_rn(d, avg)));
        }
    }
}
extern "C" void vt_cuk_rmsprop(cudaStream_t st, float *p, const float *g, float *sq, float *buf,
                               int64_t n, float lr, float alpha, float eps, float wd,
                               float momentum, const vt_grad_gate *gate) {
    if (n <= 0)
        return;
    k_rmsprop<<<vt_blocks(n), VT_THREADS, 0, st>>>(p, g, sq, buf, n, lr, alpha, eps, wd,
                                                   momentum, gate);
    CUDA_LAUNCH_CHECK();
}

__global__ static void k_adamw(float *p, const float *g, float *m, float *v, int64_t n,
                               float decay, float beta1, float beta2, float eps, float step_size,
                               float bc2_sqrt, const vt_grad_gate *gate) {
    GATE_BEGIN(gate)
    VT_GRID_STRIDE(i, n) {
        const float gi = GATE_G(g, i);
        float pi = __fmul_rn(p[i], decay);
        float mi = __fadd_rn(__fmul_rn(beta1, m[i]), __fmul_rn(1.0f - beta1, gi));
        /* cpu-ref: beta2 * v + (1 - beta2) * g * g, i.e. ((1-beta2)*g)*g */
        float vi = __fadd_rn(__fmul_rn(beta2, v[i]), __fmul_rn(__fmul_rn(1.0f - beta2, gi), gi));
        float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), bc2_sqrt), eps);
        pi = __fsub_rn(pi, __fmul_rn(step_size, __fdiv_rn(mi, denom)));
        m[i] = mi;
        v[i] = vi;
        p[i] = pi;
    }
}
extern "C" void vt_cuk_adamw(cudaStream_t st, float *p, const float *g, float *m, float *v,
                             int64_t n, float decay, float beta1, float beta2, float eps,
                             float step_size, float bc2_sqrt, const vt_grad_gate *gate) {
    if (n <= 0)
        return;
    k_adamw<<<vt_blocks(n), VT_THREADS, 0, st>>>(p, g, m, v, n, decay, beta1, beta2, eps,
                                                 step_size, bc2_sqrt, gate);
    CUDA_LAUNCH_CHECK();
}
