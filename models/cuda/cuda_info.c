/*
 * cuda_info.c: answers models/cuda/cuda_info.h — how many GPUs, what each one is, and
 * which driver, runtime, cuDNN, NCCL and cuBLAS versions are loaded — for `vidtrain
 * devices`, the device list and the GPU tests' skip decision.
 *
 * It must never abort when there is no driver or no device: a CPU-only machine running a
 * CUDA build is normal (the GPU tests then skip). Errors from a present device are
 * returned as -1, not aborted on, because this is what a user runs to diagnose a setup.
 */
#include "models/cuda/cuda_info.h"

#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <nccl.h>

#include "models/cuda/cuda_check.h"

int vt_cuda_device_count(void) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        /* cudaErrorNoDevice, cudaErrorInsufficientDriver, ...: no usable GPU. Clear the
         * error so later runtime calls do not report it. */
        (void)cudaGetLastError();
        return 0;
    }
    return n;
}

int vt_cuda_device_query(int id, vt_gpu_info *out) {
    memset(out, 0, sizeof(*out));
    out->id = id;
    if (id < 0 || id >= vt_cuda_device_count())
        return -1;
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, id) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    snprintf(out->name, sizeof out->name, "%s", prop.name);
    out->cc_major = prop.major;
    out->cc_minor = prop.minor;
    out->multiprocessors = prop.multiProcessorCount;
    out->total_bytes = (int64_t)prop.totalGlobalMem;
    /* Free memory needs a context on that device; keep the caller's current device. */
    int prev = 0;
    size_t fr = 0, tot = 0;
    if (cudaGetDevice(&prev) != cudaSuccess || cudaSetDevice(id) != cudaSuccess ||
        cudaMemGetInfo(&fr, &tot) != cudaSuccess) {
        (void)cudaGetLastError();
        (void)cudaSetDevice(prev); /* best effort: we are already reporting a failure */
        return -1;
    }
    CUDA_CHECK(cudaSetDevice(prev));
    out->free_bytes = (int64_t)fr;
    out->total_bytes = (int64_t)tot;
    return 0;
}

void vt_cuda_versions_get(vt_cuda_versions *out) {
    memset(out, 0, sizeof(*out));
    /* The driver version is 0 when no driver is installed: that is the answer, not an
     * error. */
    if (cudaDriverGetVersion(&out->driver) != cudaSuccess) {
        (void)cudaGetLastError();
        out->driver = 0;
    }
    CUDA_CHECK(cudaRuntimeGetVersion(&out->runtime));
    out->cudnn = (int)cudnnGetVersion();
    if (ncclGetVersion(&out->nccl) != ncclSuccess)
        out->nccl = 0;
    /* cuBLAS's own encoding (CUBLAS_VERSION): major * 10000 + minor * 100 + patch; asked
     * through cublasGetProperty because cublasGetVersion needs a handle, hence a GPU. */
    int ma = 0, mi = 0, pa = 0;
    if (cublasGetProperty(MAJOR_VERSION, &ma) == CUBLAS_STATUS_SUCCESS &&
        cublasGetProperty(MINOR_VERSION, &mi) == CUBLAS_STATUS_SUCCESS &&
        cublasGetProperty(PATCH_LEVEL, &pa) == CUBLAS_STATUS_SUCCESS)
        out->cublas = ma * 10000 + mi * 100 + pa;
}
