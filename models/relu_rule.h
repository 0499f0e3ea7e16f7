/*
 * relu_rule.h: ReLU's value and gradient — the one rule that relu_forward and
 * relu_backward (backend.h) and the fused batch-norm tails (bn_apply_relu,
 * relu_backward_skip, bn_relu_backward_reduce) follow on the CPU backends (cpu.c,
 * cpu_ref.c) and in the CUDA kernels (kernels_elem.cu, kernels_fused.cu, kernels_bn.cu),
 * so that the backends agree bit for bit whatever the input holds.
 *
 * The rule is PyTorch's relu and threshold_backward (out <= 0 ? 0 : grad): a value passes
 * unless it is <= 0, so a NaN passes forward and a NaN output passes its gradient back (a
 * diverged activation reaches the loss and the non-finite guards instead of turning into
 * 0); -0 gives +0. Written !(v <= 0), never v > 0, which would stop the NaN.
 *
 * It must never include anything (nvcc compiles it as C++, for host and device;
 * kernels_impl.cuh lists it among the headers kernel files may include).
 */
#ifndef VT_RELU_RULE_H
#define VT_RELU_RULE_H

#ifdef __CUDACC__
#define VT_RELU_RULE_FN static inline __host__ __device__
#else
#define VT_RELU_RULE_FN static inline
#endif

/* relu(v): v, or +0 where v <= 0 (a NaN passes). */
VT_RELU_RULE_FN float vt_relu(float v) { return !(v <= 0) ? v : 0.0f; }

/* The gradient at a ReLU whose OUTPUT is out (so in-place relu works): dout, or +0 where
 * out <= 0 (a NaN output passes dout). Both arguments are read: callers load dout
 * unconditionally (on the CPU a conditional load would not vectorise). */
VT_RELU_RULE_FN float vt_relu_grad(float out, float dout) { return !(out <= 0) ? dout : 0.0f; }

#endif
