/*
 * cuda_info.h: what the rest of vidtrain may ask about GPUs, in plain C (no CUDA
 * headers leak out). Only compiled and callable when VT_HAVE_CUDA is defined.
 */
#ifndef VT_CUDA_INFO_H
#define VT_CUDA_INFO_H

#include <stddef.h>
#include <stdint.h>

typedef struct vt_gpu_info {
    int id;
    char name[256];
    int64_t total_bytes, free_bytes;
    int cc_major, cc_minor;
    int multiprocessors;
} vt_gpu_info;

typedef struct vt_cuda_versions {
    int driver, runtime;  /* e.g. 13000 */
    int cudnn;            /* cudnnGetVersion() */
    int nccl;             /* ncclGetVersion() */
    int cublas;
    int cudnn_cudart;     /* cudnnGetCudartVersion(): the runtime cuDNN was built with */
    int nccl_cuda;        /* the CUDA NCCL was built with (its "+cudaM.m" tag), 0 unknown */
} vt_cuda_versions;

/* Number of usable GPUs; 0 when there is no driver or no device (never aborts). */
int vt_cuda_device_count(void);
/* 0 on success. */
int vt_cuda_device_query(int id, vt_gpu_info *out);
void vt_cuda_versions_get(vt_cuda_versions *out);
/* 0 when cuDNN and NCCL were built for the runtime's CUDA major; else -1 with err naming
 * both versions (a CUDA 12 cuDNN from a Python wheel beside CUDA 13's cudart, say).
 * An unknown version (0) is not a mismatch. */
int vt_cuda_versions_check(const vt_cuda_versions *v, char *err, size_t errlen);
/* The GPU architectures this binary carries code for, as built ("80-real,86-real,90"). */
const char *vt_cuda_archs(void);

#endif
