/*
 * reduce_local.c: the device-local reducer of pipeline/parallel/reduce.h — several ranks (towers)
 * on ONE GPU, each with its own backend and stream, summing in device memory without
 * NCCL (which refuses two ranks on one device) and without a trip through the host.
 *
 * allreduce_sum (and allreduce_sum_i64, the same for the exact sums' int64 accumulators):
 * every rank publishes its buffer pointer and records a "ready" event on
 * its stream; at a host barrier all pointers are known; then rank r makes its stream wait
 * for every rank's ready event and runs one kernel over ITS chunk of the elements that
 * sums all ranks' values IN RANK ORDER ((b0 + b1) + b2 ...) and writes the sum back into
 * every rank's buffer. Chunks are disjoint, so no element is read after being written and
 * no shared device buffer is needed (the sum lands directly in place). A "done" event and
 * a second barrier make every stream wait for all chunks before it goes on. Because the
 * sum is formed in rank order with float adds, the result is bitwise the host reducer's
 * (pipeline/parallel/reduce_host.c) and identical on every rank.
 *
 * It must never be used across devices, never average, and never let a rank's stream run
 * past the collective before every chunk is written. The host thread does not wait for
 * the GPU here: ordering is carried by events on the streams.
 */
#include <pthread.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "models/backend.h"
#include "base/common.h"
#include "models/cuda/backend_cuda.h"
#include "models/cuda/cuda_check.h"
#include "models/cuda/cuda_info.h"
#include "models/cuda/kernels.h"
#include "pipeline/parallel/reduce.h"

typedef struct local_ctx {
    int nranks, device;
    pthread_barrier_t bar;
    void *bufs[VT_CUK_MAX_RANKS];     /* this call's buffer of each rank */
    int64_t lens[VT_CUK_MAX_RANKS];   /* and its length, checked to agree */
    cudaEvent_t ready[VT_CUK_MAX_RANKS], done[VT_CUK_MAX_RANKS];
} local_ctx;

static cudaStream_t rank_stream(local_ctx *c, int rank, vt_backend *be) {
    VT_CHECK(rank >= 0 && rank < c->nranks, "local reducer: rank %d of %d", rank, c->nranks);
    VT_CHECK(be && be->kind == VT_BACKEND_CUDA && vt_cuda_device(be) == c->device,
             "local reducer: rank %d must pass a cuda:%d backend", rank, c->device);
    CUDA_CHECK(cudaSetDevice(c->device));
    return (cudaStream_t)vt_cuda_stream(be);
}

/* Publish, record "ready", meet: afterwards every rank's pointer and length are known. */
static void publish(local_ctx *c, int rank, cudaStream_t st, void *buf, int64_t n) {
    c->bufs[rank] = buf;
    c->lens[rank] = n;
    CUDA_CHECK(cudaEventRecord(c->ready[rank], st));
    pthread_barrier_wait(&c->bar);
    for (int q = 0; q < c->nranks; q++)
        VT_CHECK(c->lens[q] == n, "local reducer: ranks disagree on the length (%lld vs %lld)",
                 (long long)c->lens[q], (long long)n);
}

/* float (i64 = 0) or int64 (i64 = 1: the exact sums' accumulators) elements. */
static void allreduce_any(vt_reducer *r, int rank, vt_backend *be, void *buf, int64_t n,
                          int i64) {
    local_ctx *c = r->ctx;
    cudaStream_t st = rank_stream(c, rank, be);
    if (c->nranks == 1 || n <= 0)
        return;
    publish(c, rank, st, buf, n);
    for (int q = 0; q < c->nranks; q++)
        if (q != rank)
            CUDA_CHECK(cudaStreamWaitEvent(st, c->ready[q], 0));
    const int64_t lo = n * rank / c->nranks, hi = n * (rank + 1) / c->nranks;
    if (i64)
        vt_cuk_sum_ranks_i64(st, (int64_t *const *)c->bufs, c->nranks, lo, hi);
    else
        vt_cuk_sum_ranks(st, (float *const *)c->bufs, c->nranks, lo, hi);
    CUDA_CHECK(cudaEventRecord(c->done[rank], st));
    /* After this barrier every done event is recorded, and nobody republishes before all
     * have passed it, so bufs[] and the events are not overwritten while still needed. */
    pthread_barrier_wait(&c->bar);
    for (int q = 0; q < c->nranks; q++)
        if (q != rank)
            CUDA_CHECK(cudaStreamWaitEvent(st, c->done[q], 0));
}

static void local_allreduce(vt_reducer *r, int rank, vt_backend *be, float *buf, int64_t n) {
    allreduce_any(r, rank, be, buf, n, 0);
}

static void local_allreduce_i64(vt_reducer *r, int rank, vt_backend *be, int64_t *buf,
                                int64_t n) {
    allreduce_any(r, rank, be, buf, n, 1);
}

static void local_broadcast(vt_reducer *r, int rank, vt_backend *be, float *buf, int64_t n,
                            int root) {
    local_ctx *c = r->ctx;
    VT_CHECK(root >= 0 && root < c->nranks, "local reducer: root %d of %d", root, c->nranks);
    cudaStream_t st = rank_stream(c, rank, be);
    if (c->nranks == 1 || n <= 0)
        return;
    publish(c, rank, st, buf, n);
    if (rank != root) {
        CUDA_CHECK(cudaStreamWaitEvent(st, c->ready[root], 0));
        CUDA_CHECK(cudaMemcpyAsync(buf, c->bufs[root], (size_t)n * sizeof(float),
                                   cudaMemcpyDeviceToDevice, st));
    }
    CUDA_CHECK(cudaEventRecord(c->done[rank], st));
    pthread_barrier_wait(&c->bar);
    /* The root may not change its buffer before every copy out of it has run. */
    if (rank == root)
        for (int q = 0; q < c->nranks; q++)
            if (q != rank)
                CUDA_CHECK(cudaStreamWaitEvent(st, c->done[q], 0));
}

static void local_barrier(vt_reducer *r, int rank) {
    local_ctx *c = r->ctx;
    (void)rank;
    if (c->nranks > 1)
        pthread_barrier_wait(&c->bar);
}

static void local_destroy(vt_reducer *r) {
    local_ctx *c = r->ctx;
    if (!c)
        return;
    CUDA_CHECK(cudaSetDevice(c->device));
    for (int q = 0; q < c->nranks; q++) {
        CUDA_CHECK(cudaEventSynchronize(c->done[q])); /* nothing may still wait on them */
        CUDA_CHECK(cudaEventDestroy(c->ready[q]));
        CUDA_CHECK(cudaEventDestroy(c->done[q]));
    }
    pthread_barrier_destroy(&c->bar);
    free(c);
    r->ctx = NULL;
}

static const vt_reducer_i local_i = {
    .name = "local",
    .allreduce_sum = local_allreduce,
    .broadcast = local_broadcast,
    .allreduce_sum_i64 = local_allreduce_i64,
    .barrier = local_barrier,
    .destroy = local_destroy,
    .stats = NULL,
};

vt_reducer *vt_reducer_local_init(int nranks, int cuda_device) {
    const int ndev = vt_cuda_device_count();
    VT_CHECK(nranks >= 1 && nranks <= VT_CUK_MAX_RANKS, "local reducer: %d ranks (1..%d)", nranks,
             VT_CUK_MAX_RANKS);
    VT_CHECK(cuda_device >= 0 && cuda_device < ndev, "local reducer: cuda:%d does not exist "
             "(%d devices)", cuda_device, ndev);
    local_ctx *c = vt_calloc(1, sizeof(*c));
    c->nranks = nranks;
    c->device = cuda_device;
    VT_CHECK(pthread_barrier_init(&c->bar, NULL, (unsigned)nranks) == 0, "pthread_barrier_init");
    CUDA_CHECK(cudaSetDevice(cuda_device));
    for (int q = 0; q < nranks; q++) {
        /* No timing: these events only order streams, and timing-free ones are cheaper. */
        CUDA_CHECK(cudaEventCreateWithFlags(&c->ready[q], cudaEventDisableTiming));
        CUDA_CHECK(cudaEventCreateWithFlags(&c->done[q], cudaEventDisableTiming));
    }
    vt_reducer *r = vt_calloc(1, sizeof(*r));
    r->i = &local_i;
    r->ctx = c;
    r->nranks = nranks;
    return r;
}
