/*
 * cuda_check.h: the check macros of the CUDA side (docs/style.md §8: "one check macro makes the
 * rest", after ggml's CUDA_CHECK_GEN). VT_CUDA_CHECK_GEN makes CUDA_CHECK, CUDNN_CHECK,
 * CUBLAS_CHECK and NCCL_CHECK; each prints the expression, function, file:line and the
 * library's own error string, then aborts through vt_die_at.
 *
 * Usable from C (.c) and from C++ (.cu, which nvcc compiles as C++). It must never be
 * included by code outside models/cuda/, pipeline/parallel/cuda/ and the gpu tests: the rest of
 * vidtrain sees no CUDA headers. No status code is ever dropped: a library call either
 * goes through one of these macros or its status is examined explicitly with a comment
 * saying why.
 */
#ifndef VT_CUDA_CHECK_H
#define VT_CUDA_CHECK_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "base/common.h"
#ifdef __cplusplus
}
#endif

/* status type, success value, the library's name and its error-string function. */
#define VT_CUDA_CHECK_GEN(type, ok, lib, strfn, expr)                                       \
    do {                                                                                    \
        type vt_st_ = (expr);                                                               \
        if (vt_st_ != (ok))                                                                 \
            vt_die_at(__FILE__, __LINE__, __func__, #expr, "%s error %d: %s", (lib),        \
                      (int)vt_st_, strfn(vt_st_));                                          \
    } while (0)

#define CUDA_CHECK(expr) VT_CUDA_CHECK_GEN(cudaError_t, cudaSuccess, "CUDA", cudaGetErrorString, expr)
/* After a kernel launch: launch-configuration errors surface here, execution errors at
 * the next synchronisation (which is checked too). */
#define CUDA_LAUNCH_CHECK() CUDA_CHECK(cudaGetLastError())

#ifdef CUDNN_MAJOR /* defined by cudnn.h: include it before this file to get the macro */
#define CUDNN_CHECK(expr) \
    VT_CUDA_CHECK_GEN(cudnnStatus_t, CUDNN_STATUS_SUCCESS, "cuDNN", cudnnGetErrorString, expr)
#endif
#ifdef CUBLAS_VER_MAJOR /* cublas_api.h */
#define CUBLAS_CHECK(expr) \
    VT_CUDA_CHECK_GEN(cublasStatus_t, CUBLAS_STATUS_SUCCESS, "cuBLAS", cublasGetStatusString, expr)
#endif
#ifdef NCCL_MAJOR /* nccl.h */
#define NCCL_CHECK(expr) \
    VT_CUDA_CHECK_GEN(ncclResult_t, ncclSuccess, "NCCL", ncclGetErrorString, expr)
#endif

#endif
