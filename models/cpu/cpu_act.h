/*
 * cpu_act.h: the fast CPU backend's squeeze-excitation and SiLU ops (cpu_act.c), which
 * cpu.c puts in its table: silu, sigmoid and the channel scale of backend.h, OpenMP loops
 * as cpu.c's other element-wise ops (the same thresholds and rules: bits independent of
 * the thread count). They must never keep state.
 */
#ifndef VT_CPU_ACT_H
#define VT_CPU_ACT_H

#include <stdint.h>

#include "models/backend.h"

void vt_cpu_silu_forward(vt_backend *be, float *out, const float *in, int64_t n);
void vt_cpu_silu_backward(vt_backend *be, float *din, const float *dout, const float *in,
                          int64_t n);
void vt_cpu_sigmoid_forward(vt_backend *be, float *out, const float *in, int64_t n);
void vt_cpu_sigmoid_backward(vt_backend *be, float *din, const float *dout, const float *out,
                             int64_t n);
void vt_cpu_chscale_forward(vt_backend *be, float *out, const float *x, const float *s, int n,
                            int c, int64_t sp);
void vt_cpu_chscale_backward(vt_backend *be, float *dx, float *ds, const float *dout,
                             const float *x, const float *s, int n, int c, int64_t sp);

#endif
