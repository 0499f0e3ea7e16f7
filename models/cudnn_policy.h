/*
 * cudnn_policy.h: decisions about cuDNN versions that are pure functions of the version
 * number, so the CPU tests check them (test_bench_gpu_cmds) and the CUDA backend only
 * asks. cuDNN 9 numbers its versions major * 10000 + minor * 100 + patch
 * (cudnnGetVersion(): 9.14.0 is 91400).
 */
#ifndef VT_CUDNN_POLICY_H
#define VT_CUDNN_POLICY_H

#include <stddef.h>

/* 1 when this cuDNN has the bf16 3-D convolution bug (9.8.0 up to 9.12.x: wrong results
 * of bf16 3-D convolutions on large inputs, fixed in 9.13.0; issue 45 step 7), else 0. */
int vt_cudnn_bf16_conv3d_bug(int cudnn_version);
/* When it has: the warning vidtrain prints (naming the version, what is wrong, and the
 * way out) into msg, and 1; else 0 and msg untouched. */
int vt_cudnn_bf16_warning(int cudnn_version, char *msg, size_t len);

#endif
