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
#include "models/cuda/kernels_vec_ops.cuh"

/* ------------------------------------------------------------------ optimizers */

/* kernels_vec_ops.cuh's vt_op_sgd, vt_op_rmsprop and vt_op_adamw (each thread reads the
 * step's gradient gate first: vt_gated), on kernels_impl.cuh's vt_map_launch. */
extern "C" void vt_cuk_sgd(cudaStream_t st, float *p, const float *g, float *buf, int64_t n,
                           float lr, float momentum, float dampening, float wd, int nesterov,
                           int first_step, const vt_grad_gate *gate) {
    vt_op_sgd f{};
    f.gate = gate, f.p = p, f.g = g, f.buf = buf;
    f.lr = lr, f.momentum = momentum, f.dampening = dampening, f.wd = wd;
    f.nesterov = nesterov, f.first_step = first_step;
    vt_map_launch(st, f, n);
}
extern "C" void vt_cuk_rmsprop(cudaStream_t st, float *p, const float *g, float *sq, float *buf,
                               int64_t n, float lr, float alpha, float eps, float wd,
                               float momentum, const vt_grad_gate *gate) {
    vt_op_rmsprop f{};
    f.gate = gate, f.p = p, f.g = g, f.sq = sq, f.buf = buf;
    f.lr = lr, f.alpha = alpha, f.eps = eps, f.wd = wd, f.momentum = momentum;
    vt_map_launch(st, f, n);
}
extern "C" void vt_cuk_adamw(cudaStream_t st, float *p, const float *g, float *m, float *v,
                             int64_t n, float decay, float beta1, float beta2, float eps,
                             float step_size, float bc2_sqrt, const vt_grad_gate *gate) {
    vt_op_adamw f{};
    f.gate = gate, f.p = p, f.g = g, f.m = m, f.v = v;
    f.decay = decay, f.beta1 = beta1, f.beta2 = beta2, f.eps = eps;
    f.step_size = step_size, f.bc2_sqrt = bc2_sqrt;
    vt_map_launch(st, f, n);
}
