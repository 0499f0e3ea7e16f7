/*
 * kernels_loss.cu: loss CUDA kernels (kernels.h): softmax cross-entropy with
 * label smoothing and multi-label BCE on logits, in double as cpu-ref.
 * The rules all kernel files keep are in kernels_impl.cuh.
 */
#include <math.h>
#include <stdint.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "models/cuda/cuda_check.h"
#include "models/cuda/kernels.h"
#include "models/cuda/kernels_impl.cuh"

/* ------------------------------------------------------------------ losses */

/* One thread per clip, double throughout (cpu-ref's ref_softmax_xent_w). A label outside
 * [0, k) cannot abort from a kernel: that clip's loss and gradient become NaN, which the
 * training loop reports as a non-finite loss (cpu-ref aborts on it instead). No labels
 * (label NULL, loss and dlogits NULL): probabilities only. cw (k) class weights, NULL: all
 * 1 (x 1.0 is exact: the unweighted results are unchanged). */
template <typename A>
__global__ static void k_softmax_xent(float *loss, A *dlogits, float *prob,
                                      const float *logits, const int32_t *label, const float *cw,
                                      int n, int k, float smoothing, float grad_scale) {
    int ni = blockIdx.x * blockDim.x + threadIdx.x;
    if (ni >= n)
        return;
    const float *z = logits + (int64_t)ni * k;
    const int y = label ? label[ni] : -1;
    if (label && (y < 0 || y >= k)) {
        if (loss)
            loss[ni] = NAN;
        for (int j = 0; j < k; j++) {
            if (prob)
                prob[(int64_t)ni * k + j] = NAN;
            if (dlogits)
                st(dlogits, (int64_t)ni * k + j, NAN);
        }
        return;
    }
    double mx = z[0];
    for (int j = 1; j < k; j++)
        mx = z[j] > mx ? z[j] : mx;
    double se = 0;
    for (int j = 0; j < k; j++)
        se += exp((double)z[j] - mx);
    const double lse = mx + log(se);
    double tw = 1.0; /* sum_j t_j cw_j */
    if (cw) {
        tw = 0;
        for (int j = 0; j < k; j++)
            tw += ((j == y ? 1.0 - smoothing : 0.0) + (double)smoothing / k) * cw[j];
    }
    double l = 0;
    for (int j = 0; j < k; j++) {
        double t = (j == y ? 1.0 - smoothing : 0.0) + (double)smoothing / k;
        double w = cw ? cw[j] : 1.0;
        double pj = exp((double)z[j] - lse);
        l -= t * w * ((double)z[j] - lse);
        if (prob)
            prob[(int64_t)ni * k + j] = (float)pj;
        if (dlogits)
            st(dlogits, (int64_t)ni * k + j, (float)(grad_scale * (pj * tw - t * w)));
    }
    if (loss)
        loss[ni] = (float)l;
}
extern "C" void vt_cuk_softmax_xent(cudaStream_t st, vt_cuk_dt dt, float *loss, void *dlogits,
                                    float *prob, const float *logits, const int32_t *label,
                                    const float *cw, int n, int k, float smoothing,
                                    float grad_scale) {
    if (n <= 0 || k <= 0)
        return;
    VT_DT(dt, k_softmax_xent<A><<<(unsigned)((n + 127) / 128), 128, 0, st>>>(
                  loss, (A *)dlogits, prob, logits, label, cw, n, k, smoothing, grad_scale));
    CUDA_LAUNCH_CHECK();
}

/* Soft targets (backend.h softmax_xent_soft): one thread per clip, double throughout, as
 * models/cpu/cpu_loss.c. */
template <typename A>
__global__ static void k_softmax_xent_soft(float *loss, A *dlogits, const float *logits,
                                           const float *target, int n, int k,
                                           float grad_scale) {
    int ni = blockIdx.x * blockDim.x + threadIdx.x;
    if (ni >= n)
        return;
    const float *z = logits + (int64_t)ni * k, *t = target + (int64_t)ni * k;
    double mx = z[0];
    for (int j = 1; j < k; j++)
        mx = z[j] > mx ? z[j] : mx;
    double se = 0, ts = 0;
    for (int j = 0; j < k; j++) {
        se += exp((double)z[j] - mx);
        ts += t[j];
    }
    const double lse = mx + log(se);
    double l = 0;
    for (int j = 0; j < k; j++) {
        l -= (double)t[j] * ((double)z[j] - lse);
        if (dlogits)
            st(dlogits, (int64_t)ni * k + j,
               (float)(grad_scale * (exp((double)z[j] - lse) * ts - t[j])));
    }
    if (loss)
        loss[ni] = (float)l;
}
extern "C" void vt_cuk_softmax_xent_soft(cudaStream_t st, vt_cuk_dt dt, float *loss,
                                         void *dlogits, const float *logits, const float *target,
                                         int n, int k, float grad_scale) {
    if (n <= 0 || k <= 0)
        return;
    VT_DT(dt, k_softmax_xent_soft<A><<<(unsigned)((n + 127) / 128), 128, 0, st>>>(
                  loss, (A *)dlogits, logits, target, n, k, grad_scale));
    CUDA_LAUNCH_CHECK();
}

template <typename A>
__global__ static void k_bce_logits(float *loss, A *dlogits, float *prob, const float *logits,
                                    const float *target, int n, int k, float grad_scale) {
    int ni = blockIdx.x * blockDim.x + threadIdx.x;
    if (ni >= n)
        return;
    double l = 0;
    for (int j = 0; j < k; j++) {
        int64_t i = (int64_t)ni * k + j;
        double x = logits[i];
        if (prob)
            prob[i] = (float)(1.0 / (1.0 + exp(-x)));
        if (!target) /* no targets: probabilities only */
            continue;
        double t = target[i];
        /* max(x,0) - x t + log(1 + e^-|x|): PyTorch's overflow-free form. */
        l += (x > 0 ? x : 0) - x * t + log1p(exp(-fabs(x)));
        if (dlogits)
            st(dlogits, i, (float)(grad_scale * (1.0 / (1.0 + exp(-x)) - t)));
    }
    if (loss)
        loss[ni] = (float)l;
}
extern "C" void vt_cuk_bce_logits(cudaStream_t st, vt_cuk_dt dt, float *loss, void *dlogits,
                                  float *prob, const float *logits, const float *target, int n,
                                  int k, float grad_scale) {
    if (n <= 0 || k <= 0)
        return;
    VT_DT(dt, k_bce_logits<A><<<(unsigned)((n + 127) / 128), 128, 0, st>>>(
                  loss, (A *)dlogits, prob, logits, target, n, k, grad_scale));
    CUDA_LAUNCH_CHECK();
}
