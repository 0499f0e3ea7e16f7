/*
 * max_rule.h: which tap of a max-pooling window wins — the one rule that the max pools'
 * forward (the maximum) and backward (the tap its gradient goes to) both follow, the token
 * max pool's (cpu_mvit_impl.h, kernels_mvit_tmax.cu) and maxpool3d's (cpu_ref.c, cpu.c,
 * kernels_pool.cu), on the CPU backends and in the CUDA kernels, so
 * that a gradient always reaches the tap whose value the forward returned, and the
 * backends agree bit for bit whatever the input holds.
 *
 * The rule is PyTorch's max_pool3d (aten's CPU and CUDA kernels: `val > maxval ||
 * isnan(val)`, the window's first tap taken first): walking the taps in (t, h, w) order,
 * a tap replaces the best so far when it is the first, strictly greater, or NaN. So ties
 * keep the first maximum, a NaN anywhere in a window is its maximum (it propagates, as in
 * PyTorch, and the non-finite guards see it), and of several NaNs the last takes the
 * gradient.
 *
 * It must never include anything but the C headers below (nvcc compiles it as C++, for
 * host and device; kernels_impl.cuh lists it among the headers kernel files may include).
 */
#ifndef VT_MAX_RULE_H
#define VT_MAX_RULE_H

#include <math.h>

#ifdef __CUDACC__
#define VT_MAX_RULE_FN static inline __host__ __device__
#else
#define VT_MAX_RULE_FN static inline
#endif

/* Whether tap value v replaces best, the window's best so far (first: v is the window's
 * first tap inside the grid, best not yet set). */
VT_MAX_RULE_FN int vt_max_takes(float v, float best, int first) {
    return first || v > best || isnan(v);
}

#endif
