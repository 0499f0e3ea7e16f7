/*
 * reduce.h: gradient reducers — an op table like the backends' (DESIGN.md §5). Every
 * tower (rank) calls the same collective with its own buffer; afterwards every buffer
 * holds the SUM over ranks (DESIGN.md invariant 2: towers scale by 1/B, reducers sum,
 * nobody averages). Sums are taken in rank order so every replica gets bitwise the same
 * result.
 *
 * Implementations: host (threads in one process, pipeline/reduce_host.c), nccl (GPUs,
 * pipeline/cuda/), device-local (several towers on one GPU, pipeline/cuda/), mpi later.
 * The towers never know which one they have.
 */
#ifndef VT_REDUCE_H
#define VT_REDUCE_H

#include <stdint.h>

#include "models/backend.h"

typedef struct vt_reducer vt_reducer;

typedef struct vt_reducer_i {
    const char *name;
    /* Collective: called by every rank from its own thread; buf is that rank's backend
     * memory (be = the rank's backend); in place; returns when buf holds the sum. */
    void (*allreduce_sum)(vt_reducer *r, int rank, vt_backend *be, float *buf, int64_t n);
    /* Collective: copy root's buf into every rank's buf. */
    void (*broadcast)(vt_reducer *r, int rank, vt_backend *be, float *buf, int64_t n, int root);
    void (*barrier)(vt_reducer *r, int rank);
    void (*destroy)(vt_reducer *r); /* frees r->ctx */
} vt_reducer_i;

struct vt_reducer {
    const vt_reducer_i *i;
    void *ctx;
    int nranks;
};

/* Host reducer for nranks threads of this process (any backend: device buffers are
 * staged through host memory with to_host/to_device). */
vt_reducer *vt_reducer_host_init(int nranks);
#ifdef VT_HAVE_CUDA
/* NCCL over the given CUDA devices, one rank per entry (a device may not repeat). */
vt_reducer *vt_reducer_nccl_init(int nranks, const int *cuda_devices);
/* Several ranks on ONE GPU: sums in device memory without NCCL. */
vt_reducer *vt_reducer_local_init(int nranks, int cuda_device);
#endif
void vt_reducer_free(vt_reducer **r);

#endif
