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

#include <dlfcn.h> /* dladdr, and memmem below: _GNU_SOURCE comes from CMakeLists.txt */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* NCCL has no call that says which CUDA it was built for, but its library carries the
 * banner NCCL_DEBUG=INFO prints, "NCCL version 2.28.9+cuda13.0": found in the loaded
 * file (dladdr), read through mmap. Returns major * 1000 + minor * 10 (cudart's
 * encoding), 0 when the banner is not there. */
static int nccl_cuda_version(void) {
    Dl_info di;
    if (!dladdr((void *)ncclGetVersion, &di) || !di.dli_fname)
        return 0;
    int fd = open(di.dli_fname, O_RDONLY);
    if (fd < 0)
        return 0;
    struct stat st;
    int v = 0;
    if (fstat(fd, &st) == 0 && st.st_size > 0) {
        void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m != MAP_FAILED) {
            static const char tag[] = "NCCL version ";
            const char *p = memmem(m, (size_t)st.st_size, tag, sizeof tag - 1);
            const char *end = (const char *)m + st.st_size;
            for (; p && p < end - 64 && *p && *p != '+'; p++) {}
            int ma = 0, mi = 0;
            if (p && p < end - 64 && sscanf(p, "+cuda%d.%d", &ma, &mi) == 2)
                v = ma * 1000 + mi * 10;
            munmap(m, (size_t)st.st_size);
        }
    }
    close(fd);
    return v;
}

int vt_cuda_versions_check(const vt_cuda_versions *v, char *err, size_t errlen) {
    const int rt = v->runtime / 1000;
    const char *who = NULL;
    int other = 0;
    if (v->cudnn_cudart > 0 && v->cudnn_cudart / 1000 != rt) {
        who = "cuDNN";
        other = v->cudnn_cudart;
    } else if (v->nccl_cuda > 0 && v->nccl_cuda / 1000 != rt) {
        who = "NCCL";
        other = v->nccl_cuda;
    }
    if (!who)
        return 0;
    snprintf(err, errlen, "%s was built for CUDA %d.%d but the CUDA runtime is %d.%d: mixing "
             "CUDA majors fails at the first kernel\n  hint: put the CUDA %d build of %s first "
             "on LD_LIBRARY_PATH (scripts/gpu-check.sh searches the CUDA install before "
             "Python wheels)", who, other / 1000, other % 1000 / 10, v->runtime / 1000,
             v->runtime % 1000 / 10, rt, who);
    return -1;
}

#ifndef VT_CUDA_ARCHS
#define VT_CUDA_ARCHS "?"
#endif
const char *vt_cuda_archs(void) { return VT_CUDA_ARCHS; }

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
    out->cudnn_cudart = (int)cudnnGetCudartVersion();
    out->nccl_cuda = nccl_cuda_version();
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
