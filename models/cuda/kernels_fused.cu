/*
 * kernels_fused.cu: the fused batch-norm tail (backend.h bn_apply_relu; issue 45 step 3):
 * out = relu(bn_apply(x) [+ res]) in one pass — one read of x (and res), one write of
 * out, instead of bn_apply's write, add's two reads and write, and relu's read and write.
 * Bit for bit the three ops it replaces (bn_apply, add and relu_forward): the normalised
 * value is formed in double and rounded to float once, then to the activation type
 * (bf16: as st() would store it), the sum is __fadd_rn of the two stored values rounded
 * again, and the ReLU keeps v > 0 else +0 (kernels_vec_ops.cuh vt_op_bn_apply_relu). The
 * rules all kernel files keep are in kernels_impl.cuh.
 * And the residual's backward without the copy (backend.h relu_backward_skip): the
 * ReLU's gradient stored twice from one read, as relu_backward stores it.
 * (The BN + ReLU backward, bn_relu_backward_reduce, is a mode of kernels_bn.cu's
 * reduction, which it must sum in the same order.)
 */
#include <stdint.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "models/cuda/cuda_check.h"
#include "models/cuda/kernels.h"
#include "models/cuda/kernels_impl.cuh"
#include "models/cuda/kernels_vec_ops.cuh"
#include "models/relu_rule.h"

/* kernels_vec_ops.cuh vt_op_bn_apply_relu, on kernels_impl.cuh's vt_rows_launch
 * (vectorised where the arrays allow) */
extern "C" void vt_cuk_bn_apply_relu(cudaStream_t st, vt_cuk_dt dt, void *out, const void *x,
                                     const void *res, const float *k, const float *mean,
                                     const float *invstd, const float *gamma, const float *beta,
                                     int n, int c, int64_t s) {
    VT_DT(dt, {
        vt_op_bn_apply_relu<A> f{};
        f.out = (A *)out, f.x = (const A *)x, f.res = (const A *)res;
        f.k = k, f.mean = mean, f.invstd = invstd, f.gamma = gamma, f.beta = beta;
        f.c = c, f.s = s;
        vt_rows_launch(st, f, (int64_t)n * c, s);
    });
}

/* kernels_vec_ops.cuh vt_op_relu_bwd with its second store */
extern "C" void vt_cuk_relu_backward_skip(cudaStream_t st, vt_cuk_dt dt, void *din, void *skip,
                                          const void *dout, const void *out, int64_t n) {
    VT_DT(dt, {
        vt_op_relu_bwd<A> f{};
        f.din = (A *)din, f.skip = (A *)skip, f.dout = (const A *)dout, f.out = (const A *)out;
        vt_map_launch(st, f, n);
    });
}
