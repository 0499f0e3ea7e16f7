/*
 * cpu_ref_impl.h: what the cpu-ref backend's files share (cpu_ref.c: the table and most
 * ops; cpu_ref_train.c: the losses and the optimizers' updates): the precision helpers
 * (cpu_ref.c's comment says how BF16 reads through them) and the ops cpu_ref_train.c
 * defines for the table. Not for other files: cpu-ref is reached through backend.h.
 */
#ifndef VT_CPU_REF_IMPL_H
#define VT_CPU_REF_IMPL_H

#include <stdint.h>

#include "models/backend.h"
#include "models/bf16.h"

static inline int is_bf16(const vt_backend *be) { return be->precision == VT_PREC_BF16; }
/* Element i of an activation array ([A] in backend.h). */
static inline float ald(const vt_backend *be, const float *a, int64_t i) {
    return is_bf16(be) ? vt_bf16_to_f32(((const vt_bf16 *)(const void *)a)[i]) : a[i];
}
/* Store v (rounded to float first, as a float32 kernel would hold it) into an activation. */
static inline void ast(const vt_backend *be, float *a, int64_t i, double v) {
    if (is_bf16(be))
        ((vt_bf16 *)(void *)a)[i] = vt_bf16_from_f32((float)v);
    else
        a[i] = (float)v;
}
/* A float32 master weight or bias as conv3d and linear read it. */
static inline double wld(const vt_backend *be, const float *w, int64_t i) {
    return is_bf16(be) ? (double)vt_bf16_round(w[i]) : (double)w[i];
}
/* One call's parameter-gradient contribution, as it is added to the float32 gradient. */
static inline float pacc(const vt_backend *be, double g) {
    return is_bf16(be) ? vt_bf16_round((float)g) : (float)g;
}

/* cpu_ref_train.c: backend.h's contracts (losses, sgd/rmsprop/adamw updates). */
void vt_cpuref_softmax_xent_w(vt_backend *be, float *loss, float *dlogits, float *prob,
                              const float *logits, const int32_t *label, const float *cw, int n,
                              int k, float smoothing, float grad_scale);
void vt_cpuref_softmax_xent(vt_backend *be, float *loss, float *dlogits, float *prob,
                            const float *logits, const int32_t *label, int n, int k,
                            float smoothing, float grad_scale);
void vt_cpuref_bce_logits(vt_backend *be, float *loss, float *dlogits, float *prob,
                          const float *logits, const float *target, int n, int k, float grad_scale);
void vt_cpuref_sgd_update(vt_backend *be, float *p, const float *g, float *buf, int64_t n, float lr,
                          float momentum, float dampening, float wd, int nesterov, int64_t step,
                          const vt_grad_gate *gate);
void vt_cpuref_rmsprop_update(vt_backend *be, float *p, const float *g, float *sq, float *buf,
                              int64_t n, float lr, float alpha, float eps, float wd,
                              float momentum, const vt_grad_gate *gate);
void vt_cpuref_adamw_update(vt_backend *be, float *p, const float *g, float *m, float *v, int64_t n,
                            float lr, float beta1, float beta2, float eps, float wd, int64_t step,
                            const vt_grad_gate *gate);

#endif
