/*
 * grad_gate.h: the gradient gate's layout, shared by backend.h's op table and the CUDA
 * kernels (models/cuda/kernels.h) that read and write it; its meaning is backend.h's
 * (grad_sumsq, grad_gate, copy_if_skip, the optimizer updates) and models/optim.h's.
 */
#ifndef VT_GRAD_GATE_H
#define VT_GRAD_GATE_H

#include <stdint.h>

/* A training step's gradient gate (issue 45 item 3; models/optim.h): the global norm of
 * the gradients and what follows from it, decided where the gradients are (grad_sumsq,
 * grad_gate) and read there by the optimizer updates and copy_if_skip, so that the host
 * learns a step's norm and skip later, without a wait of its own. Backend memory. */
typedef struct vt_grad_gate {
    double sumsq;   /* sum of g^2 over the gradients that train, in double */
    double norm;    /* sqrt(sumsq): the global L2 norm before clipping */
    double coef;    /* the clip factor clip_norm / (norm + 1e-6), 1.0 without clipping; an
                       update reads g * (float)coef where coef < 1 */
    int32_t skip;   /* 1: the step is skipped (the updates and copy_if_skip read it) */
    int32_t unused;
} vt_grad_gate;

#endif
