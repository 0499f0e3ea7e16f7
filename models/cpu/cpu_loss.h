/*
 * cpu_loss.h: the soft-target softmax cross-entropy (backend.h softmax_xent_soft) that the
 * cpu and cpu-ref backends share: one plain loop, double throughout, so the two agree bit
 * for bit and both are checked against PyTorch's F.cross_entropy with probability targets
 * (tests/test_mix.c).
 */
#ifndef VT_CPU_LOSS_H
#define VT_CPU_LOSS_H

#include "models/backend.h"

/* backend.h softmax_xent_soft: dlogits is an activation array ([A]: bf16 under BF16). */
void vt_cpu_softmax_xent_soft(vt_backend *be, float *loss, float *dlogits, const float *logits,
                              const float *target, int n, int k, float grad_scale);

#endif
