/*
 * reduce.h: gradient reducers — an op table like the backends' (docs/design.md §5.3). Every
 * tower (rank) calls the same collective with its own buffer; afterwards every buffer
 * holds the SUM over ranks (docs/design.md §3.2: towers scale by 1/B, reducers sum,
 * nobody averages). Sums are taken in rank order so every replica gets bitwise the same
 * result.
 *
 * Implementations: host (threads in one process, pipeline/parallel/reduce_host.c), nccl (GPUs,
 * pipeline/parallel/cuda/; one process, or every GPU of every rank with its id sent through MPI),
 * device-local (several towers on one GPU, pipeline/parallel/cuda/), mpi (the towers of several
 * processes: host sums within each, fixed-order MPI sums across, pipeline/parallel/reduce_mpi.c).
 * vt_reducer_choose (pipeline/parallel/reduce.c) picks one for a run's devices; the towers
 * never know which one they have. `rank` is always the tower's index in THIS
 * process; reducers that span processes add the ranks of the other processes themselves.
 */
#ifndef VT_REDUCE_H
#define VT_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "models/backend.h"
#include "pipeline/parallel/device.h"

typedef struct vt_reducer vt_reducer;

/* What the reducer has cost so far, from the view of this process's tower 0 (summed over
 * calls; a step's figures are differences). Reducers that do not measure leave zeros. */
typedef struct vt_reduce_stats {
    int64_t calls;
    int64_t bytes;          /* bytes of the buffers summed or broadcast (n * 4 per call) */
    int64_t wire_bytes;     /* bytes this process sent to other processes */
    double wait_s;          /* waiting for the other towers (and processes) to arrive */
    double reduce_s;        /* summing and copying once all were there: nothing overlaps
                               it, so it is the exposed reduction time */
} vt_reduce_stats;

typedef struct vt_reducer_i {
    const char *name;
    /* Collective: called by every rank from its own thread; buf is that rank's backend
     * memory (be = the rank's backend); in place; returns when buf holds the sum. */
    void (*allreduce_sum)(vt_reducer *r, int rank, vt_backend *be, float *buf, int64_t n);
    /* Collective: copy root's buf into every rank's buf. */
    void (*broadcast)(vt_reducer *r, int rank, vt_backend *be, float *buf, int64_t n, int root);
    /* Collective, optional (NULL: none; host and mpi have it): buf (n int64 of be's memory)
     * replaced by the integer sum over ranks — exact, so the same in any order (the exact
     * sums of models/xsum.h: gradients and sync-BN statistics of networks built with
     * vt_net_cfg.exact). */
    void (*allreduce_sum_i64)(vt_reducer *r, int rank, vt_backend *be, int64_t *buf, int64_t n);
    void (*barrier)(vt_reducer *r, int rank);
    void (*destroy)(vt_reducer *r); /* frees r->ctx */
    /* Optional (NULL: not measured): the figures so far. Between collectives only. */
    void (*stats)(vt_reducer *r, vt_reduce_stats *out);
} vt_reducer_i;

struct vt_reducer {
    const vt_reducer_i *i;
    void *ctx;
    int nranks;
};

/* Host reducer for nranks threads of this process (any backend: device buffers are
 * staged through host memory with to_host/to_device). */
vt_reducer *vt_reducer_host_init(int nranks);
/* The towers of every process of the MPI world (pipeline/parallel/mpi.h): nranks threads here sum
 * in rank order (as the host reducer), then one of them sums the processes' partial
 * sums in process order with vt_mpi_sum_f32, so every replica everywhere gets the same
 * bits. broadcast's root is a tower of process 0. Every process must create one. */
vt_reducer *vt_reducer_mpi_init(int nranks);
#ifdef VT_HAVE_CUDA
/* NCCL over the given CUDA devices, one rank per entry (a device may not repeat). */
vt_reducer *vt_reducer_nccl_init(int nranks, const int *cuda_devices);
/* One NCCL communicator over the GPUs of every process: this process's nranks towers are
 * NCCL ranks first..first+nranks-1 of nglobal. Process 0 makes the unique id and
 * bcast(buf, bytes) (an MPI broadcast from process 0) hands it to every process;
 * world_barrier() is a barrier of all processes. */
vt_reducer *vt_reducer_nccl_world_init(int nranks, const int *cuda_devices, int nglobal, int first,
                                       void (*bcast)(void *buf, size_t bytes),
                                       void (*world_barrier)(void));
/* Several ranks on ONE GPU: sums in device memory without NCCL. */
vt_reducer *vt_reducer_local_init(int nranks, int cuda_device);
#endif
void vt_reducer_free(vt_reducer **r);

/* Which reducer a run's towers need, and that reducer made (reduce.c). towers: every
 * process's towers in process order, process q's at [first[q], first[q + 1]) (one
 * process: nproc = 1, first = {0, towers->n}); this process is `me` and the reducer
 * serves its towers. want: NULL, "" or "auto" chooses — one process: nccl when every
 * tower has a GPU of its own, local when all share one GPU, else host; several: nccl
 * when every tower of every process has a GPU of its own, else mpi —; "host", "nccl",
 * "local" and, across processes, "mpi" (= "host") ask for one. Every process decides
 * from the same global list, so all decide the same. NULL with err when the one asked
 * for cannot serve these towers or is not built in. */
vt_reducer *vt_reducer_choose(const char *want, const vt_device_list *towers, int nproc,
                              const int *first, int me, char *err, size_t errlen);
/* Two cuda towers of the global list (as above) on one GPU of one host — the same
 * ordinal where host(q) names the same machine for both processes — as global tower
 * indices *a < *b: 1, else 0. NCCL does not support one device as two ranks of a
 * communicator (it may hang), so nccl refuses such towers and auto takes mpi. */
int vt_reducer_gpu_clash(const vt_device_list *towers, int nproc, const int *first,
                         const char *(*host)(int rank), int *a, int *b);

#endif
