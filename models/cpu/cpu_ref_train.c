/*
 * cpu_ref_train.c: the cpu-ref backend's losses and optimizer updates (cpu_ref.c has the
 * rest and the table): plain loops, double accumulators, torch's formulas, as cpu_ref.c's
 * rules say; the contracts are backend.h's.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "models/cpu/cpu_loss.h"
#include "models/cpu/cpu_ref_impl.h"
#include "models/optim_elem.h"

/* ---------------------------------------------------------------- losses ---- */

/* cw NULL: every weight 1, and the arithmetic is the unweighted op's (x 1.0 is exact). */
void vt_cpuref_softmax_xent_w(vt_backend *be, float *loss, float *dlogits, float *prob,
                              const float *logits, const int32_t *label, const float *cw, int n,
                              int k, float smoothing, float grad_scale) {
    VT_CHECK(label || (!loss && !dlogits), "softmax_xent: a loss without labels");
    for (int ni = 0; ni < n; ni++) {
        const float *z = logits + (int64_t)ni * k;
        int y = label ? label[ni] : -1; /* no labels: probabilities only */
        VT_CHECK(!label || (y >= 0 && y < k), "softmax_xent: label %d outside [0, %d)", y, k);
        double mx = z[0];
        for (int j = 1; j < k; j++)
            mx = z[j] > mx ? z[j] : mx;
        double se = 0;
        for (int j = 0; j < k; j++)
            se += exp((double)z[j] - mx);
        double lse = mx + log(se);
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
                ast(be, dlogits, (int64_t)ni * k + j, (float)(grad_scale * (pj * tw - t * w)));
        }
        if (loss)
            loss[ni] = (float)l;
    }
}

void vt_cpuref_softmax_xent(vt_backend *be, float *loss, float *dlogits, float *prob,
                            const float *logits, const int32_t *label, int n, int k,
                            float smoothing, float grad_scale) {
    vt_cpuref_softmax_xent_w(be, loss, dlogits, prob, logits, label, NULL, n, k, smoothing,
                             grad_scale);
}

void vt_cpuref_bce_logits(vt_backend *be, float *loss, float *dlogits, float *prob,
                          const float *logits, const float *target, int n, int k,
                          float grad_scale) {
    VT_CHECK(target || (!loss && !dlogits), "bce_logits: a loss without targets");
    for (int ni = 0; ni < n; ni++) {
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
                ast(be, dlogits, i, (float)(grad_scale * (1.0 / (1.0 + exp(-x)) - t)));
        }
        if (loss)
            loss[ni] = (float)l;
    }
}

/* ---------------------------------------------------------------- optimizers ---- */

/* torch.optim's SGD, RMSprop and AdamW, one element at a time: models/optim_elem.h (the
 * formulas are there, shared with cpu.c). */

void vt_cpuref_sgd_update(vt_backend *be, float *p, const float *g, float *buf, int64_t n, float lr,
                          float momentum, float dampening, float wd, int nesterov, int64_t step,
                          const vt_grad_gate *gate) {
    float c;
    const int clip = vt_grad_gate_clip(gate, &c);
    if (gate && gate->skip) /* the step is skipped: nothing changes */
        return;
    for (int64_t i = 0; i < n; i++)
        vt_sgd_elem(p, vt_grad_gate_g(g, i, clip, c), buf, i, lr, momentum, dampening, wd,
                    nesterov, step);
}

void vt_cpuref_rmsprop_update(vt_backend *be, float *p, const float *g, float *sq, float *buf,
                              int64_t n, float lr, float alpha, float eps, float wd,
                              float momentum, const vt_grad_gate *gate) {
    float c;
    const int clip = vt_grad_gate_clip(gate, &c);
    if (gate && gate->skip) /* the step is skipped: nothing changes */
        return;
    for (int64_t i = 0; i < n; i++)
        vt_rmsprop_elem(p, vt_grad_gate_g(g, i, clip, c), sq, buf, i, lr, alpha, eps, wd,
                        momentum);
}

void vt_cpuref_adamw_update(vt_backend *be, float *p, const float *g, float *m, float *v, int64_t n,
                            float lr, float beta1, float beta2, float eps, float wd, int64_t step,
                            const vt_grad_gate *gate) {
    float step_size, bc2_sqrt, c;
    vt_adamw_step_consts(lr, beta1, beta2, step, &step_size, &bc2_sqrt);
    const int clip = vt_grad_gate_clip(gate, &c);
    if (gate && gate->skip)
        return;
    for (int64_t i = 0; i < n; i++)
        vt_adamw_elem(p, vt_grad_gate_g(g, i, clip, c), m, v, i, lr, beta1, beta2, eps, wd,
                      step_size, bc2_sqrt);
}

