/*
 * reduce_nccl.c: the NCCL reducer of pipeline/parallel/reduce.h — one rank per GPU of this
 * process. ncclCommInitAll makes one communicator per device; each tower thread calls
 * the collective on its own communicator and on its backend's stream (the stream that
 * computed the gradients, so no extra synchronisation is needed before the call), then
 * waits for the stream while polling ncclCommGetAsyncError and a timeout, so a failed or
 * missing peer ends the run with a message instead of hanging.
 *
 * Sums: NCCL's ring/tree allreduce gives every rank bitwise the same result (each chunk
 * is reduced once and then broadcast), but not in rank order: it equals the host
 * reducer's rank-order sum only where float addition is exact (test_nccl_gpu uses
 * integer-valued data for that reason). It must never average, and never be used with
 * two ranks on one device (NCCL forbids it; vt_reducer_local_init is for that case).
 * Each rank has its own thread, so no ncclGroupStart/End is needed here: groups are for
 * one thread issuing the calls of several ranks.
 *
 * Across processes (vt_reducer_nccl_world_init, mpirun): one communicator over every GPU
 * of every process, NCCL rank = the tower's index in the whole run; process 0's unique id
 * reaches the others through an MPI broadcast, and the communicators are created in one
 * group (this process's GPUs from one thread) after an MPI barrier, so every process is
 * there before NCCL's bootstrap starts; the communicators are non-blocking (blocking = 0),
 * so start-up is polled with the same timeout as the collectives. A peer that dies, at
 * start-up or later, shows up as an asynchronous error or the timeout below;
 * ncclCommAbort then lets the others fail too.
 * UNVERIFIED on hardware: written and compiled without a multi-GPU, multi-process machine.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "models/backend.h"
#include "base/common.h"
#include "models/cuda/backend_cuda.h"
#include "models/cuda/cuda_check.h"
#include "models/cuda/cuda_info.h"
#include "pipeline/parallel/reduce.h"

typedef struct nccl_ctx {
    int nranks;
    int *dev;           /* (nranks) CUDA device of each rank */
    ncclComm_t *comm;   /* (nranks) */
    double timeout_s;
    pthread_barrier_t bar;
    int first, nglobal; /* NCCL ranks of this process's towers: first.. of nglobal */
    void (*world_barrier)(void); /* NULL: one process */
} nccl_ctx;

static void rank_check(const nccl_ctx *c, int rank, vt_backend *be) {
    VT_CHECK(rank >= 0 && rank < c->nranks, "nccl reducer: rank %d of %d", rank, c->nranks);
    VT_CHECK(be && be->kind == VT_BACKEND_CUDA && vt_cuda_device(be) == c->dev[rank],
             "nccl reducer: rank %d must pass its cuda:%d backend", rank, c->dev[rank]);
}

/* Wait for the collective (and whatever preceded it on the stream) without blocking in
 * the driver, so NCCL's asynchronous errors and a dead peer are noticed. */
static void wait_stream(nccl_ctx *c, int rank, cudaStream_t st, const char *what) {
    const double t0 = vt_now();
    const struct timespec nap = {0, 50 * 1000}; /* 50 us: small next to any real collective */
    for (;;) {
        ncclResult_t ae = ncclSuccess;
        NCCL_CHECK(ncclCommGetAsyncError(c->comm[rank], &ae));
        /* A non-blocking communicator (the world's) may still be enqueueing the call:
         * until NCCL says ncclSuccess, the stream may look idle without the collective. */
        if (ae == ncclSuccess) {
            cudaError_t e = cudaStreamQuery(st);
            if (e == cudaSuccess)
                return;
            if (e != cudaErrorNotReady)
                CUDA_CHECK(e);
        }
        if (ae != ncclSuccess && ae != ncclInProgress) {
            const char *msg = ncclGetLastError(c->comm[rank]);
            /* Abort our communicator so peers waiting on it fail too instead of hanging;
             * its status no longer matters, we are stopping. */
            (void)ncclCommAbort(c->comm[rank]);
            VT_DIE("NCCL %s failed on NCCL rank %d of %d (cuda:%d): %s%s%s", what,
                   c->first + rank, c->nglobal, c->dev[rank], ncclGetErrorString(ae),
                   msg && *msg ? ": " : "", msg ? msg : "");
        }
        if (vt_now() - t0 > c->timeout_s) {
            (void)ncclCommAbort(c->comm[rank]);
            VT_DIE("NCCL %s on NCCL rank %d of %d (cuda:%d) did not finish in %.0f s: a peer "
                   "rank (another GPU or process) never joined, died or a GPU hangs\n  hint: "
                   "VT_NCCL_TIMEOUT=seconds raises the limit; NCCL_DEBUG=INFO shows what NCCL "
                   "is doing", what, c->first + rank, c->nglobal, c->dev[rank], c->timeout_s);
        }
        nanosleep(&nap, NULL);
    }
}

/* A call on a communicator: a non-blocking one (config.blocking = 0, NCCL's
 * communicator docs) may answer ncclInProgress, which the caller then polls to
 * completion with ncclCommGetAsyncError (wait_stream, poll_ready). */
#define NCCL_CALL(expr)                                                                        \
    do {                                                                                       \
        ncclResult_t r_ = (expr);                                                              \
        if (r_ != ncclInProgress)                                                              \
            NCCL_CHECK(r_);                                                                    \
    } while (0)

/* In-place sum of n elements of type dt on rank's stream, then waited for. */
static void allreduce_any(vt_reducer *r, int rank, vt_backend *be, void *buf, int64_t n,
                          ncclDataType_t dt, const char *what) {
    nccl_ctx *c = r->ctx;
    rank_check(c, rank, be);
    if (n <= 0)
        return;
    CUDA_CHECK(cudaSetDevice(c->dev[rank]));
    cudaStream_t st = (cudaStream_t)vt_cuda_stream(be);
    NCCL_CALL(ncclAllReduce(buf, buf, (size_t)n, dt, ncclSum, c->comm[rank], st));
    wait_stream(c, rank, st, what);
}

static void nccl_allreduce(vt_reducer *r, int rank, vt_backend *be, float *buf, int64_t n) {
    allreduce_any(r, rank, be, buf, n, ncclFloat, "allreduce");
}

/* The exact sums' int64 accumulators (reduce.h): an integer sum, so NCCL's order does
 * not matter and every rank gets the same integers as the host reducer's rank-order sum. */
static void nccl_allreduce_i64(vt_reducer *r, int rank, vt_backend *be, int64_t *buf,
                               int64_t n) {
    allreduce_any(r, rank, be, buf, n, ncclInt64, "allreduce (int64)");
}

static void nccl_broadcast(vt_reducer *r, int rank, vt_backend *be, float *buf, int64_t n,
                           int root) {
    nccl_ctx *c = r->ctx;
    rank_check(c, rank, be);
    VT_CHECK(root >= 0 && root < c->nranks, "nccl reducer: root %d of %d", root, c->nranks);
    if (n <= 0)
        return;
    CUDA_CHECK(cudaSetDevice(c->dev[rank]));
    cudaStream_t st = (cudaStream_t)vt_cuda_stream(be);
    NCCL_CALL(ncclBroadcast(buf, buf, (size_t)n, ncclFloat, root, c->comm[rank], st));
    wait_stream(c, rank, st, "broadcast");
}

/* The ranks of this process meet on a host barrier (exact, no GPU work); across
 * processes one of them also meets the other processes. */
static void nccl_barrier(vt_reducer *r, int rank) {
    nccl_ctx *c = r->ctx;
    if (c->nranks > 1)
        pthread_barrier_wait(&c->bar);
    if (!c->world_barrier)
        return;
    if (rank == 0)
        c->world_barrier();
    if (c->nranks > 1)
        pthread_barrier_wait(&c->bar);
}

static void poll_ready(nccl_ctx *c, int rank, const char *what);

static void nccl_destroy(vt_reducer *r) {
    nccl_ctx *c = r->ctx;
    if (!c)
        return;
    /* Sequential destroy from one thread, as NCCL's single-process example does; a
     * non-blocking communicator is finalized first and polled until done (NCCL docs:
     * ncclCommFinalize, then ncclCommDestroy). */
    for (int i = 0; i < c->nranks; i++)
        if (c->comm[i]) {
            if (c->world_barrier) {
                NCCL_CALL(ncclCommFinalize(c->comm[i]));
                poll_ready(c, i, "finalize");
            }
            NCCL_CHECK(ncclCommDestroy(c->comm[i]));
        }
    pthread_barrier_destroy(&c->bar);
    free(c->comm);
    free(c->dev);
    free(c);
    r->ctx = NULL;
}

/* Wait until NCCL rank `rank`'s communicator leaves ncclInProgress (a non-blocking
 * start-up or finalize), with the collectives' timeout; on an error or the timeout every
 * communicator of this process is aborted, so peers blocked on them fail too. */
static void poll_ready(nccl_ctx *c, int rank, const char *what) {
    const double t0 = vt_now();
    const struct timespec nap = {0, 1000 * 1000}; /* 1 ms: start-up takes 100s of ms */
    for (;;) {
        ncclResult_t ae = ncclSuccess;
        NCCL_CHECK(ncclCommGetAsyncError(c->comm[rank], &ae));
        if (ae == ncclSuccess)
            return;
        const int late = vt_now() - t0 > c->timeout_s;
        if (ae != ncclInProgress || late) {
            const char *msg = ae != ncclInProgress ? ncclGetLastError(c->comm[rank]) : "";
            for (int i = 0; i < c->nranks; i++)
                if (c->comm[i])
                    (void)ncclCommAbort(c->comm[i]); /* stopping: its status no longer matters */
            VT_DIE("NCCL %s of NCCL rank %d of %d (cuda:%d) %s%s%s\n  hint: every process of "
                   "the run must reach start-up (a peer that died or never started stops "
                   "it); VT_NCCL_TIMEOUT=seconds changes the limit, NCCL_DEBUG=INFO shows "
                   "what NCCL is doing", what, c->first + rank, c->nglobal, c->dev[rank],
                   late ? "did not finish within the timeout" : "failed: ",
                   late ? "" : ncclGetErrorString(ae), msg && *msg ? msg : "");
        }
        nanosleep(&nap, NULL);
    }
}

static const vt_reducer_i nccl_i = {
    .name = "nccl",
    .allreduce_sum = nccl_allreduce,
    .broadcast = nccl_broadcast,
    .allreduce_sum_i64 = nccl_allreduce_i64,
    .barrier = nccl_barrier,
    .destroy = nccl_destroy,
    .stats = NULL,
};

static void check_devices(int nranks, const int *cuda_devices) {
    const int ndev = vt_cuda_device_count();
    VT_CHECK(nranks >= 1, "nccl reducer: %d ranks", nranks);
    for (int i = 0; i < nranks; i++) {
        VT_CHECK(cuda_devices[i] >= 0 && cuda_devices[i] < ndev,
                 "nccl reducer: cuda:%d does not exist (%d devices)", cuda_devices[i], ndev);
        for (int j = 0; j < i; j++)
            VT_CHECK(cuda_devices[j] != cuda_devices[i],
                     "nccl reducer: cuda:%d appears twice (use the local reducer for several "
                     "towers on one GPU)", cuda_devices[i]);
    }
}

static nccl_ctx *ctx_new(int nranks, const int *cuda_devices) {
    nccl_ctx *c = vt_calloc(1, sizeof(*c));
    c->nranks = nranks;
    c->nglobal = nranks;
    c->dev = vt_malloc((size_t)nranks * sizeof(int));
    memcpy(c->dev, cuda_devices, (size_t)nranks * sizeof(int));
    c->comm = vt_calloc((size_t)nranks, sizeof(ncclComm_t));
    c->timeout_s = 600;
    const char *t = getenv("VT_NCCL_TIMEOUT");
    if (t && *t)
        c->timeout_s = atof(t) > 0 ? atof(t) : c->timeout_s;
    VT_CHECK(pthread_barrier_init(&c->bar, NULL, (unsigned)nranks) == 0, "pthread_barrier_init");
    return c;
}

static vt_reducer *reducer_new(nccl_ctx *c, int nranks) {
    vt_reducer *r = vt_calloc(1, sizeof(*r));
    r->i = &nccl_i;
    r->ctx = c;
    r->nranks = nranks;
    return r;
}

vt_reducer *vt_reducer_nccl_init(int nranks, const int *cuda_devices) {
    check_devices(nranks, cuda_devices);
    nccl_ctx *c = ctx_new(nranks, cuda_devices);
    NCCL_CHECK(ncclCommInitAll(c->comm, nranks, c->dev));
    return reducer_new(c, nranks);
}

vt_reducer *vt_reducer_nccl_world_init(int nranks, const int *cuda_devices, int nglobal, int first,
                                       void (*bcast)(void *buf, size_t bytes),
                                       void (*world_barrier)(void)) {
    check_devices(nranks, cuda_devices);
    VT_CHECK(first >= 0 && first + nranks <= nglobal, "nccl reducer: ranks %d..%d of %d", first,
             first + nranks - 1, nglobal);
    nccl_ctx *c = ctx_new(nranks, cuda_devices);
    c->first = first;
    c->nglobal = nglobal;
    c->world_barrier = world_barrier;
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (first == 0) /* process 0 holds NCCL rank 0 */
        NCCL_CHECK(ncclGetUniqueId(&id));
    bcast(&id, sizeof id);
    world_barrier(); /* everyone is here before NCCL's bootstrap starts */
    /* Non-blocking start-up (blocking = 0), polled with the collectives' timeout: a peer
     * that dies during the bootstrap would otherwise hang every rank in
     * ncclCommInitRank. In a group, the calls and ncclGroupEnd may answer ncclInProgress;
     * each communicator is then polled until ncclSuccess, as NCCL documents for
     * non-blocking communicators. */
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    NCCL_CHECK(ncclGroupStart());
    for (int i = 0; i < nranks; i++) {
        CUDA_CHECK(cudaSetDevice(c->dev[i]));
        NCCL_CALL(ncclCommInitRankConfig(&c->comm[i], nglobal, id, first + i, &cfg));
    }
    NCCL_CALL(ncclGroupEnd());
    for (int i = 0; i < nranks; i++)
        poll_ready(c, i, "start-up");
    return reducer_new(c, nranks);
}
